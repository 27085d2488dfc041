"""eagle_sparse.__main__: the command line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.io as sio

from eagle_sparse.__main__ import main


def test_demo_runs_and_reports_digits(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "NIST StRD Longley" in out and "digits agreeing with the certified values" in out


def test_solve_cli_round_trip(tmp_path, capsys):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((30, 5))
    b = rng.standard_normal((30, 1))
    sio.mmwrite(tmp_path / "A.mtx", A)
    sio.mmwrite(tmp_path / "b.mtx", b)
    assert main(["solve", str(tmp_path / "A.mtx"), str(tmp_path / "b.mtx"),
                 "-o", str(tmp_path / "x.mtx"), "--method", "eagle"]) == 0
    x = np.asarray(sio.mmread(tmp_path / "x.mtx"))
    np.testing.assert_allclose(x[:, 0], np.linalg.lstsq(A, b[:, 0], rcond=None)[0], rtol=1e-9)
    assert "method=eagle" in capsys.readouterr().err


def _files(tmp_path, m=30, n=5):
    rng = np.random.default_rng(1)
    A, b = rng.standard_normal((m, n)), rng.standard_normal((m, 1))
    sio.mmwrite(tmp_path / "A.mtx", A)
    sio.mmwrite(tmp_path / "b.mtx", b)
    return str(tmp_path / "A.mtx"), str(tmp_path / "b.mtx"), A, b


def _one_line_error(capsys, *needles):
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("eagle-sparse: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], err


def test_version(capsys):
    from eagle_sparse import __version__

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"eagle-sparse {__version__}"


def test_every_option_has_help():
    import argparse

    from eagle_sparse.__main__ import parser

    top = parser()
    subs = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subs.choices.items():
        for action in sub._actions:
            assert action.help, (name, action.dest)


def test_missing_input_file(tmp_path, capsys):
    A, b, *_ = _files(tmp_path)
    assert main(["solve", str(tmp_path / "nope.mtx"), b]) == 1
    _one_line_error(capsys, "A: no such file", "nope.mtx")
    assert main(["solve", A, str(tmp_path)]) == 1
    _one_line_error(capsys, "b: is a directory")


def test_malformed_input_file(tmp_path, capsys):
    A, b, *_ = _files(tmp_path)
    bad = tmp_path / "bad.mtx"
    bad.write_text("%%MatrixMarket matrix array real general\nthis is not a matrix\n")
    assert main(["solve", str(bad), b]) == 1
    _one_line_error(capsys, "A: cannot read", "bad.mtx")
    gz = tmp_path / "bad.mtx.gz"
    gz.write_bytes(b"not gzip at all")
    assert main(["solve", A, str(gz)]) == 1
    _one_line_error(capsys, "b: cannot read")


def test_bad_output_paths_fail_before_the_solve(tmp_path, capsys):
    A, b, *_ = _files(tmp_path)
    assert main(["solve", A, b, "-o", str(tmp_path / "no" / "such" / "x.mtx")]) == 1
    _one_line_error(capsys, "--output: cannot write")
    (tmp_path / "outdir").mkdir()
    assert main(["solve", A, b, "-o", str(tmp_path / "outdir")]) == 1
    _one_line_error(capsys, "--output: is a directory")
    assert not (tmp_path / "outdir.mtx").exists()


def test_output_is_written_as_named(tmp_path, capsys):
    A, b, Am, bm = _files(tmp_path)
    out = tmp_path / "solution"  # no extension: none is added
    assert main(["solve", A, b, "-o", str(out), "--method", "sketch"]) == 0
    x = np.asarray(sio.mmread(str(out)))[:, 0]
    np.testing.assert_allclose(x, np.linalg.lstsq(Am, bm[:, 0], rcond=None)[0], rtol=1e-8)
    assert "method=sketch" in capsys.readouterr().err


def test_shape_mismatch_and_bad_backend(tmp_path, capsys):
    A, _, *_ = _files(tmp_path)
    sio.mmwrite(tmp_path / "b7.mtx", np.ones((7, 1)))
    assert main(["solve", A, str(tmp_path / "b7.mtx")]) == 1
    _one_line_error(capsys, "b has 7 rows but A is 30 x 5")
    assert main(["solve", A, str(tmp_path / "b.mtx"), "--backend", "nosuch",
                 "-o", str(tmp_path / "x.mtx")]) == 1
    _one_line_error(capsys, "solve:")
    assert not (tmp_path / "x.mtx").exists()  # no empty output left behind


def test_module_and_console_script_in_a_closed_pipe(tmp_path):
    """``python -m eagle_sparse`` (and the installed ``eagle-sparse``) write to a pipe
    whose reader has gone without a traceback."""
    import shutil
    import subprocess
    import sys

    import scipy.sparse as sp

    n = 20000  # x is ~500 KB of text: more than a pipe holds
    sio.mmwrite(tmp_path / "A.mtx", sp.diags(np.arange(1.0, n + 1), format="coo"))
    sio.mmwrite(tmp_path / "b.mtx", np.ones((n, 1)))
    cmds = [[sys.executable, "-m", "eagle_sparse"]]
    if shutil.which("eagle-sparse"):
        cmds.append(["eagle-sparse"])
    for cmd in cmds:
        v = subprocess.run([*cmd, "--version"], capture_output=True, text=True, check=False)
        assert v.returncode == 0 and v.stdout.startswith("eagle-sparse "), v.stderr
        proc = subprocess.Popen([*cmd, "solve", str(tmp_path / "A.mtx"),
                                 str(tmp_path / "b.mtx")], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        proc.stdout.read(10)
        proc.stdout.close()  # the reader goes away
        err = proc.stderr.read().decode()
        proc.wait(timeout=120)
        assert "Traceback" not in err and "BrokenPipe" not in err, err


# ------------------------------------------------- issue 31: files, errors, exit codes


def _listing(path):
    return sorted(p.name for p in path.iterdir())


def _bad_inputs(tmp_path):
    """Solves that fail after the output path was accepted: (argv tail, needle)."""
    rng = np.random.default_rng(2)
    bad = rng.standard_normal((30, 5))
    bad[3, 2] = np.nan
    sio.mmwrite(tmp_path / "nan.mtx", bad)
    return [(["--backend", "nosuch"], "solve: backend"),
            (["--rtol", "nan"], "solve: rtol"),
            (["--rtol", "-1"], "solve: rtol")], str(tmp_path / "nan.mtx")


@pytest.mark.parametrize("target", ["other", "A", "b"])
def test_failed_solve_never_touches_an_existing_output(tmp_path, capsys, target):
    """Issue 31: ``solve -o FILE`` deleted FILE when the solve failed, even when it
    existed before, including ``-o A.mtx`` (the input itself).  Now every failure leaves
    it byte for byte, and no temporary file behind."""
    A, b, *_ = _files(tmp_path)
    other = tmp_path / "keep.mtx"
    other.write_text("precious\n")
    path = {"other": str(other), "A": A, "b": b}[target]
    cases, nan_A = _bad_inputs(tmp_path)
    before = Path(path).read_bytes()
    listing = _listing(tmp_path)
    for tail, needle in cases:
        assert main(["solve", A, b, "-o", path, *tail]) == 1
        _one_line_error(capsys, needle)
        assert Path(path).read_bytes() == before and _listing(tmp_path) == listing
    assert main(["solve", nan_A, b, "-o", path]) == 1
    _one_line_error(capsys, "solve: A contains NaN")
    assert Path(path).read_bytes() == before and _listing(tmp_path) == listing


@pytest.mark.parametrize("seed", range(3))
def test_successful_solve_replaces_the_output_atomically(tmp_path, capsys, seed):
    """A success replaces FILE (also the input itself, read first) with the complete
    answer, keeps FILE's permissions and leaves no temporary file."""
    import os
    import stat

    rng = np.random.default_rng(seed)
    shape = [(30, 5), (50, 12), (200, 7)][seed]
    Am, bm = rng.standard_normal(shape), rng.standard_normal((shape[0], 1))
    sio.mmwrite(tmp_path / "A.mtx", Am)
    sio.mmwrite(tmp_path / "b.mtx", bm)
    out = tmp_path / "x.mtx"
    out.write_text("old\n")
    os.chmod(out, 0o640)
    ref = np.linalg.lstsq(Am, bm[:, 0], rcond=None)[0]
    tol = 10 * np.linalg.cond(Am) * np.finfo(float).eps
    for path in (out, tmp_path / "A.mtx"):
        assert main(["solve", str(tmp_path / "A.mtx"), str(tmp_path / "b.mtx"),
                     "-o", str(path)]) == 0
        x = np.asarray(sio.mmread(str(path)))[:, 0]
        assert np.linalg.norm(x - ref) <= tol * np.linalg.norm(ref)
        if path == out:
            assert stat.S_IMODE(os.stat(out).st_mode) == 0o640
            sio.mmwrite(tmp_path / "A.mtx", Am)  # (the next pass overwrites the input)
    assert _listing(tmp_path) == ["A.mtx", "b.mtx", "x.mtx"]
    capsys.readouterr()


def _run_cli(args, **kw):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "eagle_sparse", *args], capture_output=True,
                          text=True, check=False, timeout=120, **kw)


def _assert_one_line(proc, *needles):
    lines = proc.stderr.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("eagle-sparse: error: ")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in errors[0], proc.stderr


def test_failed_write_is_one_line_and_keeps_the_old_file(tmp_path):
    """A write that fails part-way (the file size limit of the process: EFBIG, as a full
    disk gives ENOSPC) is one error line, exit 1; the existing FILE is intact and the
    temporary file is removed.  A device that refuses the write (/dev/full) likewise."""
    import os
    import resource
    import signal

    A, b, *_ = _files(tmp_path, m=400, n=300)  # x: 300 lines, more than the limit below
    out = tmp_path / "x.mtx"
    out.write_text("old answer\n")

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))

    proc = _run_cli(["solve", A, b, "-o", str(out)], preexec_fn=limit)
    assert proc.returncode == 1
    _assert_one_line(proc, "--output: cannot write", "x.mtx")
    assert out.read_text() == "old answer\n"
    assert _listing(tmp_path) == ["A.mtx", "b.mtx", "x.mtx"]
    if os.path.exists("/dev/full"):
        proc = _run_cli(["solve", A, b, "-o", "/dev/full"])
        assert proc.returncode == 1
        _assert_one_line(proc, "--output: cannot write /dev/full")


def test_closed_standard_output_is_one_line(tmp_path):
    """Started with its standard output closed (``>&-``): one error line, exit 1, for
    every command that writes there."""
    import shlex
    import subprocess
    import sys

    A, b, *_ = _files(tmp_path)
    for args in (["solve", A, b], ["config"], ["demo"]):
        cmd = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "eagle_sparse", *args])
        proc = subprocess.run(f"{cmd} >&-", shell=True, capture_output=False,
                              stderr=subprocess.PIPE, text=True, check=False, timeout=120)
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stderr.strip().splitlines()[-1].startswith(
            "eagle-sparse: error: cannot write to standard output"), proc.stderr


def test_unknown_backend_in_demo_is_one_line(capsys):
    for bad in ("bogus", "NUMPY", ""):
        assert main(["demo", "--backend", bad]) == 1
        _one_line_error(capsys, "demo: backend must be one of")


@pytest.mark.parametrize(("shape", "field"), [((100_000, 100_000), "real"),
                                              ((20_000, 20_000), "complex"),
                                              ((3, 10**11), "integer")])
@pytest.mark.parametrize("gz", [False, True])
def test_huge_dense_header_is_refused_before_reading(tmp_path, capsys, shape, field, gz):
    """Issue 31: a header declaring a 1e5 x 1e5 dense matrix ended in a MemoryError
    traceback.  A dense header beyond MAX_OPERATOR_BYTES is refused from the header
    alone (no allocation), compressed or not; a coordinate header whose entries cannot
    be held is one line too."""
    import gzip
    import time

    A, b, *_ = _files(tmp_path)
    text = f"%%MatrixMarket matrix array {field} general\n{shape[0]} {shape[1]}\n1\n"
    path = tmp_path / ("big.mtx.gz" if gz else "big.mtx")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    t0 = time.perf_counter()
    assert main(["solve", str(path), b]) == 1
    assert time.perf_counter() - t0 < 5
    _one_line_error(capsys, f"A: {path} declares a dense {shape[0]} x {shape[1]}",
                    "MAX_OPERATOR_BYTES")
    assert main(["solve", A, str(path)]) == 1
    _one_line_error(capsys, "b: ")


def test_lying_coordinate_header_is_one_line(tmp_path, capsys):
    _, b, *_ = _files(tmp_path)
    lie = tmp_path / "lie.mtx"
    lie.write_text("%%MatrixMarket matrix coordinate real general\n30 5 100000000000\n"
                   "1 1 1.0\n")
    assert main(["solve", str(lie), b]) == 1
    _one_line_error(capsys, "A: ", "lie.mtx")


@pytest.mark.parametrize("seed", range(3))
def test_uncertified_solve_exits_2_with_a_warning_line(tmp_path, capsys, seed):
    """A solve whose answer fails the certificate (EAGLE cut off after one iteration on
    a problem with condition number 1e8) exits 2 with one ``eagle-sparse: warning:``
    line, and still writes its answer; the same problem without the cap exits 0."""
    rng = np.random.default_rng(seed)
    m, n = 200 + 50 * seed, 20 + 5 * seed
    U, _ = np.linalg.qr(rng.standard_normal((m, n)))
    V, _ = np.linalg.qr(rng.standard_normal((n, n)))
    Am = (U * np.logspace(0, -8, n)) @ V.T
    sio.mmwrite(tmp_path / "A.mtx", Am)
    sio.mmwrite(tmp_path / "b.mtx", rng.standard_normal((m, 1)))
    A, b, out = (str(tmp_path / f) for f in ("A.mtx", "b.mtx", "x.mtx"))
    assert main(["solve", A, b, "-o", out, "--method", "eagle", "--maxiter", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    warn = [ln for ln in err if ln.startswith("eagle-sparse: warning: ")]
    assert len(warn) == 1 and "did not converge" in warn[0], err
    assert "converged=False" in err[-1]
    assert np.asarray(sio.mmread(out)).shape == (n, 1)
    assert main(["solve", A, b, "-o", out, "--method", "eagle"]) == 0
    assert "converged=True" in capsys.readouterr().err


@pytest.mark.parametrize("sparse", [False, True])
def test_complex_tall_least_squares_through_the_cli(tmp_path, capsys, sparse):
    """Issue 31: complex 600 x 300 least squares returned rc 0 with a residual 7500x the
    optimum.  Through the CLI (dense and coordinate files) the answer is within
    10 kappa eps of SciPy's lstsq, exit 0."""
    import scipy.linalg as sla
    import scipy.sparse as sp

    rng = np.random.default_rng(7)
    Am = rng.standard_normal((600, 300)) + 1j * rng.standard_normal((600, 300))
    bm = rng.standard_normal(600) + 1j * rng.standard_normal(600)
    sio.mmwrite(tmp_path / "A.mtx", sp.coo_matrix(Am) if sparse else Am)
    sio.mmwrite(tmp_path / "b.mtx", bm[:, None])
    assert main(["solve", str(tmp_path / "A.mtx"), str(tmp_path / "b.mtx"),
                 "-o", str(tmp_path / "x.mtx")]) == 0
    x = np.asarray(sio.mmread(tmp_path / "x.mtx"))[:, 0]
    ref = sla.lstsq(Am, bm)[0]
    tol = 10 * np.linalg.cond(Am) * np.finfo(float).eps
    assert np.linalg.norm(x - ref) <= tol * np.linalg.norm(ref)
    capsys.readouterr()
