"""SciPy's own test files, run against the drop-ins.

The installed SciPy wheel ships the tests of the functions we mirror.  They are copied
into a temporary package with their imports pointed at eagle_sparse's drop-ins (each
rewrite is checked, so a SciPy release that moves an import fails here loudly instead
of silently testing SciPy), run in a subprocess, and every test must pass except the
few listed in docs/SCIPY_PARITY.md, each of which checks a SciPy internal that no
drop-in can match.  Nothing of SciPy's is vendored into the package.
"""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import scipy

ROOT = Path(__file__).resolve().parents[2]
SCIPY = Path(scipy.__file__).parent

#: name -> (SciPy test file, pytest -k expression, [(pattern, replacement)]).  A pattern
#: must match exactly once.
SUITES = {
    "cg": ("sparse/linalg/_isolve/tests/test_iterative.py", None, [
        (r"(from scipy\.sparse\.linalg\._isolve import \([^)]*\)\n)",
         r"\1from eagle_sparse.linalg import cg  # the drop-in under test\n"),
    ]),
    "lsqr": ("sparse/linalg/_isolve/tests/test_lsqr.py", None, [
        (r"from scipy\.sparse\.linalg import lsqr\n",
         "from eagle_sparse.linalg import lsqr  # the drop-in under test\n"),
    ]),
    "lsmr": ("sparse/linalg/_isolve/tests/test_lsmr.py", None, [
        (r"from scipy\.sparse\.linalg import lsmr\n",
         "from eagle_sparse.linalg import lsmr  # the drop-in under test\n"),
    ]),
    "lstsq": ("linalg/tests/test_basic.py", "TestLstsq", [
        (r"(from scipy\.linalg import \([^)]*\)\n)",
         r"\1from eagle_sparse import lstsq  # the drop-in under test\n"),
    ]),
    "lstsq_batch": ("linalg/tests/test_batch.py", "test_lstsq", [
        (r"(from scipy import linalg, sparse\n)",
         r"\1from eagle_sparse import lstsq as _eagle_lstsq  # the drop-in under test\n"),
        (r"res = linalg\.lstsq\(A, b\)", "res = _eagle_lstsq(A, b)"),
    ]),
}

#: Test ids (``file::test``) that check SciPy internals no drop-in can match; each is
#: explained in docs/SCIPY_PARITY.md.
KNOWN = {
}


def _absent(name: str) -> Path | None:
    """The SciPy test file of suite ``name`` where this installation lacks it (SciPy
    ships no tests, or a release older than the suite: test_batch.py is 1.17's)."""
    src = SCIPY / SUITES[name][0]
    return None if src.exists() else src


def _prepare(tmp: Path, name: str) -> tuple[Path, str | None]:
    rel, keyword, rewrites = SUITES[name]
    src = SCIPY / rel
    text = src.read_text()
    for pattern, repl in rewrites:
        text, count = re.subn(pattern, repl, text)
        assert count == 1, f"{rel}: the import {pattern!r} was not found exactly once"
    (tmp / src.name).write_text(text)
    return tmp / src.name, keyword


@pytest.fixture(scope="module")
def parity_run(tmp_path_factory):
    """Run every suite once (one pytest subprocess) and return ``{test id: outcome}``,
    with the drop-ins (their extras included) imported by the rewritten test files.
    SciPy's unmodified files against ``eagle_sparse.patch()``:
    tests/integration/test_patch_clients.py."""
    tmp = tmp_path_factory.mktemp("scipy_parity") / "scipy_parity"
    tmp.mkdir()
    (tmp / "__init__.py").write_text("")
    # test_lsmr imports the problem of test_lsqr
    files, keywords = [], []
    present = [name for name in SUITES if _absent(name) is None]
    if not present:
        pytest.skip("this SciPy installation ships no test files")
    for name in present:
        path, keyword = _prepare(tmp, name)
        files.append(path)
        keywords.append((path.name, keyword))
    report = tmp.parent / "report.xml"
    cmd = [sys.executable, "-m", "pytest", str(tmp), "-q", "-p", "no:cacheprovider",
           "-o", "addopts=", "--rootdir", str(tmp.parent), f"--junitxml={report}",
           "-W", "ignore::UserWarning", "-W", "ignore::DeprecationWarning"]
    # only the lstsq tests of the two linalg files
    deselect = " or ".join(f"({k})" for f, k in keywords if k)
    cmd += ["-k", f"not (test_basic or test_batch) or {deselect}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp.parent, timeout=1200)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        cid = f"{case.get('classname')}::{case.get('name')}"
        state = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                state = "failed"
                break
            if child.tag == "skipped":
                state = "skipped"
        outcomes[cid] = state
    return outcomes, proc.stdout


@pytest.mark.parametrize("name", list(SUITES))
def test_scipy_test_file_passes_against_the_drop_in(parity_run, name):
    if (src := _absent(name)) is not None:
        pytest.skip(f"this SciPy installation has no {src.name} ({src} is absent)")
    outcomes, log = parity_run
    stem = Path(SUITES[name][0]).stem
    mine = {k: v for k, v in outcomes.items() if f".{stem}." in f".{k}" or
            k.startswith(f"scipy_parity.{stem}")}
    assert mine, f"no tests of {stem} ran:\n{log[-2000:]}"
    failed = sorted(k for k, v in mine.items() if v == "failed" and k not in KNOWN)
    assert not failed, f"{len(failed)} of {len(mine)} SciPy tests fail: {failed[:20]}\n" \
        + log[-4000:]


def test_known_exceptions_are_documented():
    doc = (ROOT / "docs" / "SCIPY_PARITY.md").read_text()
    for cid in KNOWN:
        assert cid.split("::")[-1] in doc, f"{cid} is not explained in docs/SCIPY_PARITY.md"
