"""Sphinx configuration of the eagle_sparse documentation (scripts/build_docs.sh OUTDIR)."""

from __future__ import annotations

import importlib.util
import os
import sys

import eagle_sparse

project = "eagle-sparse"
author = "the eagle-sparse developers"
copyright = "2026, the eagle-sparse developers"  # (Sphinx's name)
release = version = eagle_sparse.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    # MathJax bundled into _static: formulas render offline (no CDN)
    "sphinx-mathjax-offline",
    "numpydoc",
    "myst_parser",
]
# the scikit-learn estimators' page builds where scikit-learn is not installed
autodoc_mock_imports = [] if importlib.util.find_spec("sklearn") else ["sklearn"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

# numpydoc: the "Parameters / Returns / Examples" sections of every public docstring;
# no autosummary stub pages (the API page lists each object explicitly).
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
autodoc_default_options: dict = {}  # (members only where api.rst asks: :members:)
autodoc_typehints = "none"  # the numpydoc sections carry the types

# no network: cross-references to NumPy/SciPy are written as plain text, not resolved
intersphinx_mapping: dict = {}

html_theme = "alabaster"
html_title = f"eagle-sparse {release}"
html_theme_options = {"description": "Krylov outside, EAGLE inside", "fixed_sidebar": True}

# the examples must not need the build folder on sys.path
sys.path.insert(0, os.path.abspath(".."))
