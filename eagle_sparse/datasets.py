"""Access to the real test matrices (``shared/data``) and the bundled Longley data.

The matrix collection is not shipped with the package: it lives in a folder
found through the ``EAGLE_SPARSE_DATA`` environment variable or, in a source
checkout, at ``../shared/data`` beside the repository.  The NIST Longley
regression data (public domain, 16 x 7) ships inside the package for the demo.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
from functools import lru_cache
from pathlib import Path

import numpy as np

_PKG_DATA = Path(__file__).resolve().parent / "data"


def find_data_dir() -> Path | None:
    """The shared matrix folder, or ``None`` when it is not present."""
    env = os.environ.get("EAGLE_SPARSE_DATA")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve()
    for parent in list(here.parents)[:4] + [Path.cwd(), *Path.cwd().parents[:2]]:
        candidates.append(parent / "shared" / "data")
        candidates.append(parent.parent / "shared" / "data")
    for c in candidates:
        if (c / "registry.json").is_file():
            return c
    return None


@lru_cache(maxsize=1)
def registry() -> dict[str, dict]:
    """Name -> record of every item in ``registry.json`` (empty without the folder)."""
    root = find_data_dir()
    if root is None:
        return {}
    with open(root / "registry.json") as fh:
        return {e["name"]: e for e in json.load(fh)}


def _read_mtx(path: Path):
    import scipy.io as sio

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path) as fh:
        return sio.mmread(fh)


def load_matrix(name: str):
    """``(A, b)`` for a registry item: ``A`` as CSR (or dense for ``dense/`` sets),
    ``b`` the shipped right-hand side or ``None``.

    Raises
    ------
    FileNotFoundError
        When the data folder or the item is missing.
    """
    import scipy.sparse as sp

    root = find_data_dir()
    if root is None:
        raise FileNotFoundError(
            "the shared matrix folder was not found: set EAGLE_SPARSE_DATA to its path"
        )
    reg = registry()
    if name not in reg:
        raise FileNotFoundError(f"no item {name!r} in {root / 'registry.json'}")
    e = reg[name]
    path = root / e["file"]
    if path.suffix == ".npz":
        with np.load(path) as d:
            return np.asarray(d["X"], dtype=np.float64), np.asarray(d["y"], dtype=np.float64)
    A = sp.csr_matrix(_read_mtx(path)).astype(np.float64)
    b = None
    if e.get("rhs"):
        rhs = _read_mtx(root / e["rhs"])
        rhs = rhs.toarray() if sp.issparse(rhs) else rhs
        b = np.asarray(rhs, dtype=np.float64).ravel()
    return A, b


def load_nist(name: str) -> dict:
    """A NIST StRD linear-regression set from the shared folder (``design``, ``y``, ``beta``)."""
    root = find_data_dir()
    if root is None:
        raise FileNotFoundError("the shared matrix folder was not found (EAGLE_SPARSE_DATA)")
    path = root / "nist_strd" / f"{name}.npz"
    if not path.is_file():
        raise FileNotFoundError(f"no NIST StRD set {name!r} at {path}")
    with np.load(path) as d:
        return {k: d[k] for k in ("design", "y", "beta")}


def load_longley() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NIST StRD Longley data bundled with the package.

    Returns
    -------
    design : (16, 7) ndarray
        ``[1, x1, ..., x6]`` (intercept column first).
    y : (16,) ndarray
        Total employment.
    beta : (7,) ndarray
        NIST's certified least-squares coefficients.

    Examples
    --------
    >>> from eagle_sparse.datasets import load_longley
    >>> X, y, beta = load_longley()
    >>> X.shape, y.shape, beta.shape
    ((16, 7), (16,), (7,))
    """
    with open(_PKG_DATA / "longley.csv", newline="") as fh:
        rows = [r for r in csv.reader(fh) if r and not r[0].startswith("#")]
    data = np.array([[float(v) for v in r] for r in rows[1:]])
    y = data[:, 0]
    design = np.column_stack([np.ones(len(y)), data[:, 1:]])
    with open(_PKG_DATA / "longley_certified.csv", newline="") as fh:
        crow = [r for r in csv.reader(fh) if r and not r[0].startswith("#")]
    beta = np.array([float(r[1]) for r in crow[1:]])
    return design, y, beta
