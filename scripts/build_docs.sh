#!/usr/bin/env bash
# Build the documentation site (Sphinx + numpydoc + MyST) into OUTDIR, warnings as errors.
#
#   scripts/build_docs.sh OUTDIR
#
# Uses the Python in PATH (PYTHON overrides it), which must have eagle_sparse installed
# (the API pages are read from its docstrings); installs the docs requirements (the
# [docs] extra) into it where they are missing.
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: scripts/build_docs.sh OUTDIR" >&2
  exit 2
fi
# OUTDIR relative to the caller's folder, not the repository's
mkdir -p "$1"
OUT="$(cd "$1" && pwd)"
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
"$PY" -c "import eagle_sparse" 2>/dev/null || {
  echo "eagle_sparse is not importable by $PY: install it first (pip install .)" >&2; exit 1; }
"$PY" -c "import sphinx, numpydoc, myst_parser, sphinx_mathjax_offline" 2>/dev/null \
  || "$PY" -m pip install -q "sphinx>=7" "numpydoc>=1.6" "myst-parser>=2" sphinx-mathjax-offline
# -W: every warning fails the build; -E: no stale pickles.  (Not -n: the docstrings name
# private modules and constants for the curious reader, which the site does not document.)
"$PY" -m sphinx -W --keep-going -E -b html docs "$OUT"
echo "docs: $OUT/index.html"
