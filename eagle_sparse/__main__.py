"""Command line: ``eagle-sparse {demo,solve,config}`` (also ``python -m eagle_sparse``).

Thin: every command calls the public API a user would call.  Input errors (a missing or
malformed file, a bad output path, shapes that do not match) end in one line
``eagle-sparse: error: ...`` on stderr and exit status 1; a solve that does not converge
exits 2; argparse's usage errors exit 2 as usual.  A closed output pipe (``| head``)
ends the program quietly.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

PROG = "eagle-sparse"


class CLIError(Exception):
    """An input error, reported as one line (no traceback)."""


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


def _read(path: str, what: str):
    """A Matrix Market file (``.mtx``, ``.mtx.gz``, ``.mtx.bz2``), read by path."""
    import scipy.io as sio

    if not os.path.exists(path):
        raise CLIError(f"{what}: no such file: {path}")
    if os.path.isdir(path):
        raise CLIError(f"{what}: is a directory: {path}")
    try:
        return sio.mmread(path)
    except (ValueError, OSError, EOFError, IndexError) as exc:
        raise CLIError(f"{what}: cannot read {path} as Matrix Market: {exc}") from exc


def _open_output(path: str):
    """The output file, opened before the solve so a bad path fails at once (``-o``
    names a file, written as given: no extension is added)."""
    if os.path.isdir(path):
        raise CLIError(f"--output: is a directory: {path}")
    try:
        return open(path, "wb")
    except OSError as exc:
        raise CLIError(f"--output: cannot write {path}: {exc.strerror or exc}") from exc


def cmd_solve(args) -> int:
    import scipy.io as sio
    import scipy.sparse as sp

    import eagle_sparse as es

    A = _read(args.A, "A")
    b = _read(args.b, "b")
    b = b.toarray() if sp.issparse(b) else np.asarray(b)
    if b.ndim == 2 and b.shape[1] == 1:
        b = b[:, 0]
    if b.shape[0] != A.shape[0]:
        raise CLIError(f"b has {b.shape[0]} rows but A is {A.shape[0]} x {A.shape[1]}")
    out = _open_output(args.output) if args.output else None
    written = False
    try:
        try:
            x, info = es.solve(A, b, rtol=args.rtol, method=args.method, return_info=True,
                               backend=args.backend, show=args.progress)
        except (ValueError, TypeError, np.linalg.LinAlgError, MemoryError) as exc:
            raise CLIError(f"solve: {exc}") from exc
        sys.stderr.write(
            f"method={info.method} backend={info.backend or '-'} "
            f"iterations={info.iterations} converged={info.converged} ({info.reason}) "
            f"residual={np.max(info.residual_norm):.3e} time={info.elapsed:.3f}s\n")
        xm = x[:, None] if x.ndim == 1 else x
        if out is not None:
            sio.mmwrite(out, xm)
        else:
            np.savetxt(sys.stdout, xm, fmt="%.17g")
        written = True
    finally:
        if out is not None:
            out.close()
            if not written:  # (opened early to check the path: leave no empty file)
                os.unlink(args.output)
    return 0 if info.converged else 2


def cmd_config(args) -> int:
    import eagle_sparse as es

    es.show_config()
    return 0


def _version() -> str:
    from eagle_sparse._version import __version__

    return f"{PROG} {__version__}"


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog=PROG, description="EAGLE linear solvers: least squares, SPD and sparse "
        "systems from Matrix Market files, and the configuration they run on.")
    top.add_argument("--version", action="version", version=_version(),
                     help="print the version and exit")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    backend_help = ("kernel backend: native, numba, numpy or cupy (default: the first "
                    "available, see the config command)")
    p = sub.add_parser("demo", help="solve the bundled NIST Longley regression",
                       description="Solve the NIST StRD Longley regression with EAGLE and "
                       "compare with the certified values and LAPACK.")
    p.add_argument("--backend", default=None, help=backend_help)
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("solve", help="solve A x = b from Matrix Market files",
                       description="Solve A x = b (least squares where A is not square) "
                       "and write x as text to stdout, or as Matrix Market to --output.")
    p.add_argument("A", help="the matrix: a Matrix Market file (.mtx, .mtx.gz, .mtx.bz2)")
    p.add_argument("b", help="the right-hand side(s): a Matrix Market file")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write x to this Matrix Market file, as named (default: stdout)")
    p.add_argument("--rtol", type=float, default=1e-10,
                   help="relative tolerance on the residual (default: 1e-10)")
    p.add_argument("--method", default="auto", choices=["auto", "eagle", "lapack", "sketch"],
                   help="solver route, as eagle_sparse.solve's method (default: auto)")
    p.add_argument("--backend", default=None, help=backend_help)
    p.add_argument("--progress", action="store_true",
                   help="show a progress bar on stderr (needs tqdm)")
    p.set_defaults(func=cmd_solve)
    p = sub.add_parser("config", help="print eagle_sparse.show_config()",
                       description="Print the backends, BLAS, threads and CUDA status.")
    p.set_defaults(func=cmd_config)
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except CLIError as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 1
    except BrokenPipeError:
        # the reader went away (| head): silence the flush at exit, as POSIX tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
