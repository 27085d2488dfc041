"""Command line: ``python -m eagle_sparse {demo,solve,config}``.

Thin: every command calls the public API a user would call.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time

import numpy as np


def _digits(err: float) -> float:
    return float(-np.log10(max(err, 1e-17)))


def cmd_demo(args) -> int:
    import scipy.linalg as sla

    import eagle_sparse as es
    from eagle_sparse.datasets import load_longley

    X, y, beta = load_longley()
    t0 = time.perf_counter()
    x, info = es.solve(X, y, method="eagle", rtol=0, return_info=True, backend=args.backend)
    t_eagle = time.perf_counter() - t0
    t0 = time.perf_counter()
    x_lapack = sla.lstsq(X, y)[0]
    t_lapack = time.perf_counter() - t0
    err_cert = np.max(np.abs(x - beta) / np.abs(beta))
    err_lapack_cert = np.max(np.abs(x_lapack - beta) / np.abs(beta))
    agree = np.max(np.abs(x - x_lapack) / np.abs(x_lapack))
    out = sys.stdout
    out.write("eagle_sparse demo: NIST StRD Longley regression (16 observations, 7 coefficients,\n")
    out.write(f"condition number {np.linalg.cond(X):.2e}), solved with EAGLE "
              f"(backend {info.backend}, {info.iterations} iterations, {info.reason}).\n\n")
    out.write(f"{'coef':>5} {'EAGLE':>22} {'NIST certified':>22}\n")
    for i, (a, c) in enumerate(zip(x, beta, strict=True)):
        out.write(f"{'B' + str(i):>5} {a:22.14g} {c:22.14g}\n")
    out.write(f"\ndigits agreeing with the certified values: EAGLE {_digits(err_cert):.1f}, "
              f"LAPACK gelsd {_digits(err_lapack_cert):.1f}\n")
    out.write(f"digits agreeing with LAPACK gelsd: {_digits(agree):.1f}\n")
    out.write(f"time: EAGLE {t_eagle * 1e3:.2f} ms, LAPACK gelsd {t_lapack * 1e3:.2f} ms\n")
    return 0 if err_cert < 1e-8 else 1


def _read(path):
    import scipy.io as sio

    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path) as fh:
        return sio.mmread(fh)


def cmd_solve(args) -> int:
    import scipy.io as sio
    import scipy.sparse as sp

    import eagle_sparse as es

    A = _read(args.A)
    b = _read(args.b)
    b = b.toarray() if sp.issparse(b) else np.asarray(b)
    if b.ndim == 2 and b.shape[1] == 1:
        b = b[:, 0]
    x, info = es.solve(A, b, rtol=args.rtol, method=args.method, return_info=True,
                       backend=args.backend)
    sys.stderr.write(
        f"method={info.method} backend={info.backend or '-'} iterations={info.iterations} "
        f"converged={info.converged} ({info.reason}) residual={np.max(info.residual_norm):.3e} "
        f"time={info.elapsed:.3f}s\n"
    )
    xm = x[:, None] if x.ndim == 1 else x
    if args.output:
        sio.mmwrite(args.output, xm)
    else:
        np.savetxt(sys.stdout, xm, fmt="%.17g")
    return 0 if info.converged else 2


def cmd_config(args) -> int:
    import eagle_sparse as es

    es.show_config()
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eagle_sparse",
                                     description="EAGLE linear solvers")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="solve the bundled NIST Longley regression")
    p.add_argument("--backend", default=None)
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("solve", help="solve A x = b from Matrix Market files")
    p.add_argument("A", help="matrix (.mtx or .mtx.gz)")
    p.add_argument("b", help="right-hand side(s) (.mtx or .mtx.gz)")
    p.add_argument("-o", "--output", help="write x to this .mtx file (default: stdout)")
    p.add_argument("--rtol", type=float, default=1e-10)
    p.add_argument("--method", default="auto", choices=["auto", "eagle", "lapack"])
    p.add_argument("--backend", default=None)
    p.set_defaults(func=cmd_solve)
    p = sub.add_parser("config", help="print eagle_sparse.show_config()")
    p.set_defaults(func=cmd_config)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
