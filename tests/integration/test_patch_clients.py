"""Client libraries' own test suites, run with SciPy's solvers patched.

Each client's test files run twice, at once, in two pytest subprocesses with warnings as
errors (``-W error``): patched, through the command line a user runs
(``python -m eagle_sparse.patch -m pytest ...``), and unpatched (``python -m pytest``,
the baseline).  The patched run must fail no test that the baseline passes and pass at
least as many; and it must have called the drop-ins: a pytest plugin (:data:`PLUGIN`)
counts the DEBUG records that each call of an installed function leaves on the
``eagle_sparse.patch`` logger, so a patch that installs nothing, or installs functions
nobody calls, cannot pass (and the baseline must have made no such call).

Each client is skipped, saying why, where its package or its test files are absent
(scikit-image 0.26's wheel ships no tests: ``$EAGLE_SPARSE_SKIMAGE_TESTS`` may name a
checkout's ``test_random_walker.py``).  The default run takes the fast selections (about
a minute of wall time on two cores); scikit-learn's full ridge and linear-model files are
``slow``.  Nothing of the clients' is vendored.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

#: A pytest plugin for both runs: it counts the calls of the installed functions (one
#: DEBUG record each on ``eagle_sparse.patch``, by ``record.solver``) and notes what
#: SciPy's public names are when the session starts; both go to ``$EAGLE_PATCH_CALLS``.
#: It imports no eagle_sparse (the baseline must run SciPy alone).
PLUGIN = '''
import json
import logging
import os

CALLS = {}
INSTALLED = {}


class _Count(logging.Handler):
    def emit(self, record):
        if record.levelno == logging.DEBUG:  # (one per call; INFO: a handed-over call)
            name = getattr(record, "solver", "?")
            CALLS[name] = CALLS.get(name, 0) + 1


_logger = logging.getLogger("eagle_sparse.patch")
_logger.addHandler(_Count(logging.DEBUG))
_logger.setLevel(logging.DEBUG)
_logger.propagate = False  # (not into every test's captured log)


def pytest_sessionstart(session):
    import scipy.linalg
    import scipy.sparse.linalg

    for name in ("cg", "lsqr", "lsmr", "factorized"):
        INSTALLED[name] = getattr(scipy.sparse.linalg, name).__module__
    INSTALLED["lstsq"] = scipy.linalg.lstsq.__module__


def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["EAGLE_PATCH_CALLS"], "w") as f:
        json.dump({"calls": CALLS, "installed": INSTALLED}, f)
'''


@dataclass(frozen=True)
class Client:
    """A client's test files (globs under its package directory) and what a patched
    run of them must show."""

    package: str
    files: tuple[str, ...]
    solvers: tuple[str, ...]  # each called at least once when patched
    min_passed: int
    keyword: str | None = None
    rootdir_is_package_parent: bool = True


CLIENTS = {
    # SciPy's least-squares solvers, which bind lsmr by name at import (trf, dogbox,
    # trf_linear, lsq_linear)
    "scipy-optimize": Client(
        "scipy", ("optimize/tests/test_lsq_linear.py", "optimize/tests/test_least_squares.py"),
        ("lsmr",), 140),
    # the drop-ins' own SciPy test files, against the installed (patched) functions
    "scipy-drop-ins": Client(
        "scipy", ("sparse/linalg/_isolve/tests/test_iterative.py",
                  "sparse/linalg/_isolve/tests/test_lsqr.py",
                  "sparse/linalg/_isolve/tests/test_lsmr.py",
                  "linalg/tests/test_basic.py"),
        ("cg", "lsqr", "lsmr", "lstsq"), 900, keyword="not test_basic or lstsq or Lstsq"),
    # networkx looks scipy.sparse.linalg.cg / factorized up at call time
    "networkx": Client(
        "networkx", ("algorithms/centrality/tests/test_current_flow_*.py",),
        ("cg", "factorized"), 30),
    # scikit-learn: the ridge tests of the solvers that call SciPy's (sparse_cg, lsqr;
    # _sparse_linalg_cg is bound at import) and all of LinearRegression's (lsqr, lstsq)
    "sklearn": Client(
        "sklearn", ("linear_model/tests/test_ridge.py", "linear_model/tests/test_base.py"),
        ("cg", "lsqr", "lstsq"), 250,
        keyword="test_base or sparse_cg or lsqr or convergence_fail"),
    "sklearn-full": Client(
        "sklearn", ("linear_model/tests/test_ridge.py", "linear_model/tests/test_base.py"),
        ("cg", "lsqr", "lstsq"), 1000),
    # scikit-image binds cg at import (from scipy.sparse.linalg import cg)
    "skimage": Client(
        "skimage", ("segmentation/tests/test_random_walker.py",), ("cg",), 30),
}
SLOW = {"sklearn-full"}


def _files(name: str) -> tuple[list[Path], Path]:
    """The client's test files and the rootdir to run them from; skips where absent."""
    client = CLIENTS[name]
    spec = importlib.util.find_spec(client.package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{client.package} is not installed")
    package = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(f for pattern in client.files for f in package.glob(pattern))
    if name == "skimage" and not files and os.environ.get("EAGLE_SPARSE_SKIMAGE_TESTS"):
        files = [Path(os.environ["EAGLE_SPARSE_SKIMAGE_TESTS"])]
        if not files[0].is_file():
            pytest.skip(f"$EAGLE_SPARSE_SKIMAGE_TESTS names no file ({files[0]})")
        return files, files[0].parent
    missing = [p for p in client.files if not any(package.glob(p))]
    if missing:
        hint = (" (its tests live in the source repository's tests/ since 0.26: set "
                "$EAGLE_SPARSE_SKIMAGE_TESTS to a checkout's tests/skimage/segmentation/"
                "test_random_walker.py)") if name == "skimage" else ""
        pytest.skip(f"this {client.package} installation ships no {', '.join(missing)} "
                    f"under {package}{hint}")
    return files, package.parent


def _start(tmp: Path, mode: str, files: list[Path], rootdir: Path, keyword: str | None):
    """One pytest subprocess: ``mode`` ``patched`` (through ``python -m
    eagle_sparse.patch``) or ``scipy`` (the baseline)."""
    run = tmp / mode
    run.mkdir()
    (run / "pytest.ini").write_text("[pytest]\n")  # (none of this repository's options)
    prefix = ["-m", "eagle_sparse.patch"] if mode == "patched" else []
    cmd = [sys.executable, *prefix, "-m", "pytest", *map(str, files), "-q",
           "-c", str(run / "pytest.ini"), "--rootdir", str(rootdir),
           "-p", "eagle_patch_calls", "-p", "no:cacheprovider", "-p", "no:randomly",
           "-W", "error", f"--junitxml={run / 'report.xml'}"]
    if hasattr(pytest, "PytestRemovedIn10Warning"):  # pytest's own deprecations (9.x)
        cmd += ["-W", "ignore::pytest.PytestRemovedIn10Warning"]
    if keyword:
        cmd += ["-k", keyword]
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp)] + [
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["EAGLE_PATCH_CALLS"] = str(run / "calls.json")
    with open(run / "log.txt", "w") as log:  # (the child has its own descriptor)
        proc = subprocess.Popen(cmd, cwd=run, env=env, stdout=log, stderr=subprocess.STDOUT)
    started = {"proc": proc, "run": run, "t0": time.perf_counter()}

    def reap():  # (its own wall and CPU time, while the other run goes on)
        if hasattr(os, "wait4"):
            _, status, usage = os.wait4(proc.pid, 0)
            started["cpu"] = usage.ru_utime + usage.ru_stime
            proc.returncode = os.waitstatus_to_exitcode(status)
        else:  # pragma: no cover - Windows: no CPU time of a child
            proc.wait()
            started["cpu"] = float("nan")
        started["wall"] = time.perf_counter() - started["t0"]

    started["reaper"] = threading.Thread(target=reap, daemon=True)
    started["reaper"].start()
    return started


def _finish(started, timeout: float):
    """``(outcomes, calls, wall s, cpu s, log tail)`` of a run: outcomes
    ``{"class::test": "passed" | "failed" | "skipped"}`` (xfail counts as skipped)."""
    proc, run = started["proc"], started["run"]
    started["reaper"].join(timeout)
    if started["reaper"].is_alive():  # pragma: no cover - reported below
        proc.kill()
        started["reaper"].join()
    tail = (run / "log.txt").read_text()[-6000:]
    assert proc.returncode in (0, 1), f"pytest exited {proc.returncode} ({run.name}):\n{tail}"
    assert (run / "report.xml").exists() and (run / "calls.json").exists(), tail
    outcomes = {}
    for case in ET.parse(run / "report.xml").getroot().iter("testcase"):
        tags = {child.tag for child in case}
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = (
            "failed" if tags & {"failure", "error"} else
            "skipped" if "skipped" in tags else "passed")
    calls = json.loads((run / "calls.json").read_text())
    return outcomes, calls, started["wall"], started["cpu"], tail


def _check(name: str, tmp_path: Path, record_property) -> None:
    client = CLIENTS[name]
    files, rootdir = _files(name)
    (tmp_path / "eagle_patch_calls.py").write_text(PLUGIN)
    # both runs at once (two cores): the baseline costs no wall time of its own
    patched = _start(tmp_path, "patched", files, rootdir, client.keyword)
    baseline = _start(tmp_path, "scipy", files, rootdir, client.keyword)
    ours, calls, wall, cpu, log = _finish(patched, timeout=1500)
    theirs, calls0, wall0, cpu0, _ = _finish(baseline, timeout=1500)

    def count(outcomes, state):
        return sum(v == state for v in outcomes.values())

    summary = (f"{name}: patched {count(ours, 'passed')} passed, {count(ours, 'failed')} "
               f"failed, {count(ours, 'skipped')} skipped in {wall:.1f} s ({cpu:.1f} s CPU); "
               f"SciPy's own {count(theirs, 'passed')} passed, {count(theirs, 'failed')} "
               f"failed, {count(theirs, 'skipped')} skipped in {wall0:.1f} s ({cpu0:.1f} s "
               f"CPU); calls {calls['calls']}")
    print(summary)  # noqa: T201 - the measurement, shown with -s
    record_property("summary", summary)

    # SciPy's public names were the drop-ins in the patched session, SciPy's in the other
    assert set(calls["installed"].values()) == {"eagle_sparse.patch"}, calls["installed"]
    assert all(m.startswith("scipy.") for m in calls0["installed"].values()), calls0
    assert calls0["calls"] == {}, f"the baseline called drop-ins: {calls0['calls']}"
    uncalled = [s for s in client.solvers if not calls["calls"].get(s)]
    assert not uncalled, f"{name}: the patched run never called {uncalled}: {calls['calls']}"

    assert ours.keys() == theirs.keys(), (
        f"the runs collected different tests: {sorted(ours.keys() ^ theirs.keys())[:10]}")
    failed = {k for k, v in ours.items() if v == "failed"}
    failed0 = {k for k, v in theirs.items() if v == "failed"}
    new = sorted(failed - failed0)
    assert not new, f"{len(new)} tests fail only patched: {new[:20]}\n{log}"
    assert count(ours, "passed") >= count(theirs, "passed"), summary
    assert count(ours, "passed") >= client.min_passed, f"{summary}\n{log}"


@pytest.mark.parametrize("name", [n for n in CLIENTS if n not in SLOW])
def test_client_suite_passes_patched(name, tmp_path, record_property):
    _check(name, tmp_path, record_property)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW))
def test_client_suite_passes_patched_in_full(name, tmp_path, record_property):
    _check(name, tmp_path, record_property)
