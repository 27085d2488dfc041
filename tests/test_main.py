"""eagle_sparse.__main__: the command line."""

from __future__ import annotations

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
