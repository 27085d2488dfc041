"""eagle_sparse.__main__: the command line."""

from __future__ import annotations

import numpy as np
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
