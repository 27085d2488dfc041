"""Command line: ``eagle-sparse {demo,solve,config}`` (also ``python -m eagle_sparse``).

Thin: every command calls the public API a user would call.  Every user error (a
missing, malformed or too large input file, a bad output path or a failed write, shapes
that do not match, an unknown backend, an argument the library refuses, no memory) ends
in one line ``eagle-sparse: error: ...`` on stderr and exit status 1; a solve whose
answer is not certified (``info.converged`` False) prints ``eagle-sparse: warning: ...``,
still writes its answer and exits 2; argparse's usage errors exit 2 as usual.  A closed
output pipe (``| head``) ends the program quietly (status 141, as ``SIGPIPE`` would).

``solve -o FILE`` writes to a temporary file beside ``FILE`` and renames it over
``FILE`` only once the whole answer is written (``os.replace``): a failed solve or write
leaves an existing ``FILE`` (the input itself included) as it was, and never leaves a
partial one.  A Matrix Market header declaring a dense matrix larger than
:data:`eagle_sparse._system._validation.MAX_OPERATOR_BYTES` is refused before anything is
allocated.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
import tempfile
import time
import warnings

import numpy as np

PROG = "eagle-sparse"
#: The errors the library raises for a user's mistake (reported in one line).
USER_ERRORS = (ValueError, TypeError, np.linalg.LinAlgError, MemoryError)


class CLIError(Exception):
    """An input error, reported as one line (no traceback)."""


def _digits(err: float) -> float:
    return float(-np.log10(max(err, 1e-17)))


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def cmd_demo(args) -> int:
    import scipy.linalg as sla

    import eagle_sparse as es
    from eagle_sparse.datasets import load_longley

    X, y, beta = load_longley()
    t0 = time.perf_counter()
    try:
        x, info = es.solve(X, y, method="eagle", rtol=0, return_info=True,
                           backend=args.backend)
    except USER_ERRORS as exc:
        raise CLIError(f"demo: {_one_line(exc)}") from exc
    t_eagle = time.perf_counter() - t0
    t0 = time.perf_counter()
    x_lapack = sla.lstsq(X, y)[0]
    t_lapack = time.perf_counter() - t0
    err_cert = np.max(np.abs(x - beta) / np.abs(beta))
    err_lapack_cert = np.max(np.abs(x_lapack - beta) / np.abs(beta))
    agree = np.max(np.abs(x - x_lapack) / np.abs(x_lapack))
    out = _stdout()
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
    out.flush()
    return 0 if err_cert < 1e-8 else 1


def _stdout():
    """``sys.stdout``, or a ``CLIError`` where the process has none (started with its
    standard output closed, ``>&-``)."""
    out = sys.stdout
    if out is None or out.closed:
        raise CLIError("cannot write to standard output: it is closed (use -o FILE)")
    return out


def _check_header(path: str, what: str) -> None:
    """Refuse, from the header alone, a dense (``array``) matrix whose values would take
    more than ``MAX_OPERATOR_BYTES``: reading it would allocate all of it first."""
    import scipy.io as sio

    from eagle_sparse._system._validation import MAX_OPERATOR_BYTES

    try:
        rows, cols, _entries, fmt, field, _sym = sio.mminfo(path)
    except (ValueError, OSError, EOFError, IndexError) as exc:
        raise CLIError(f"{what}: cannot read {path} as Matrix Market: {_one_line(exc)}"
                       ) from exc
    if fmt != "array":
        return
    nbytes = int(rows) * int(cols) * (16 if field == "complex" else 8)
    if nbytes > MAX_OPERATOR_BYTES:
        raise CLIError(f"{what}: {path} declares a dense {rows} x {cols} {field} matrix "
                       f"({nbytes / 2**30:.3g} GiB), above the {MAX_OPERATOR_BYTES / 2**30:.3g}"
                       f" GiB limit for dense input (MAX_OPERATOR_BYTES); store a large "
                       "sparse matrix in coordinate format")


def _read(path: str, what: str):
    """A Matrix Market file (``.mtx``, ``.mtx.gz``, ``.mtx.bz2``), read by path."""
    import scipy.io as sio

    if not os.path.exists(path):
        raise CLIError(f"{what}: no such file: {path}")
    if os.path.isdir(path):
        raise CLIError(f"{what}: is a directory: {path}")
    _check_header(path, what)
    try:
        return sio.mmread(path)
    except MemoryError as exc:
        raise CLIError(f"{what}: not enough memory to read {path}") from exc
    except (ValueError, OSError, EOFError, IndexError) as exc:
        raise CLIError(f"{what}: cannot read {path} as Matrix Market: {_one_line(exc)}"
                       ) from exc


class _Output:
    """``-o FILE``, written safely: a temporary file beside ``FILE`` (created before the
    solve, so a bad path fails at once), renamed over it by :meth:`commit`; a device or
    pipe that exists already (``/dev/stdout``, a FIFO) is written in place.  Nothing the
    CLI did not create is ever deleted or truncated."""

    def __init__(self, path: str):
        if os.path.isdir(path):
            raise CLIError(f"--output: is a directory: {path}")
        self.path = path
        self.target = os.path.realpath(path)  # (a symlink: write where it points)
        try:
            st = os.stat(self.target)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise CLIError(f"--output: cannot write {path}: {exc.strerror or exc}") from exc
        self.special = st is not None and not stat.S_ISREG(st.st_mode)
        try:
            where = ""
            if self.special:
                self.tmp, self.file = None, open(self.target, "ab")  # noqa: SIM115
            else:
                where = f" (creating a temporary file in {os.path.dirname(self.target)})"
                fd, self.tmp = tempfile.mkstemp(
                    prefix=f".{os.path.basename(self.target)}.", suffix=".tmp",
                    dir=os.path.dirname(self.target))
                self.file = os.fdopen(fd, "wb")
                os.chmod(self.tmp, stat.S_IMODE(st.st_mode) if st is not None
                         else 0o666 & ~_umask())
        except OSError as exc:
            raise CLIError(f"--output: cannot write {path}: {exc.strerror or exc}{where}"
                           ) from exc

    def commit(self) -> None:
        """Flush, close and move the finished file into place."""
        try:
            self.file.close()
            if self.tmp is not None:
                os.replace(self.tmp, self.target)
                self.tmp = None
        except OSError as exc:
            raise CLIError(f"--output: cannot write {self.path}: {exc.strerror or exc}"
                           ) from exc

    def discard(self) -> None:
        """Close and remove the temporary file (only ever the CLI's own)."""
        with contextlib.suppress(OSError):
            self.file.close()
        if self.tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.tmp)
            self.tmp = None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _load_problem(args):
    import scipy.sparse as sp

    A = _read(args.A, "A")
    b = _read(args.b, "b")
    b = b.toarray() if sp.issparse(b) else np.asarray(b)
    if b.ndim == 2 and b.shape[1] == 1:
        b = b[:, 0]
    if b.shape[0] != A.shape[0]:
        raise CLIError(f"b has {b.shape[0]} rows but A is {A.shape[0]} x {A.shape[1]}")
    return A, b


def _solve(A, b, args):
    """``es.solve`` with the library's refusals as one line and its warnings (a
    ConvergenceWarning) as ``eagle-sparse: warning:`` lines."""
    import eagle_sparse as es

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            x, info = es.solve(A, b, rtol=args.rtol, maxiter=args.maxiter,
                               method=args.method, return_info=True, backend=args.backend,
                               show=args.progress)
        except USER_ERRORS as exc:
            raise CLIError(f"solve: {_one_line(exc)}") from exc
    for w in caught:
        sys.stderr.write(f"{PROG}: warning: {_one_line(w.message)}\n")
    return x, info


def cmd_solve(args) -> int:
    import scipy.io as sio

    A, b = _load_problem(args)
    out = _Output(args.output) if args.output else None
    if out is None:
        _stdout()  # (a closed standard output fails before the solve)
    try:
        x, info = _solve(A, b, args)
        sys.stderr.write(
            f"method={info.method} backend={info.backend or '-'} "
            f"iterations={info.iterations} converged={info.converged} ({info.reason}) "
            f"residual={np.max(info.residual_norm):.3e} time={info.elapsed:.3f}s\n")
        xm = x[:, None] if x.ndim == 1 else x
        if out is not None:
            try:
                sio.mmwrite(out.file, xm)
            except OSError as exc:
                raise CLIError(f"--output: cannot write {args.output}: "
                               f"{exc.strerror or exc}") from exc
            out.commit()
        else:
            stdout = _stdout()
            np.savetxt(stdout, xm, fmt="%.17g")
            stdout.flush()
    finally:
        if out is not None:
            out.discard()
    return 0 if info.converged else 2


def cmd_config(args) -> int:
    import eagle_sparse as es

    _stdout()
    es.show_config()
    sys.stdout.flush()
    return 0


def _version() -> str:
    from eagle_sparse._version import __version__

    return f"{PROG} {__version__}"


def _positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}")
    return n


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
                       "and write x as text to stdout, or as Matrix Market to --output. "
                       "Exit status 0: the answer is certified; 2: it is not (a warning "
                       "says why; x is still written); 1: an error.")
    p.add_argument("A", help="the matrix: a Matrix Market file (.mtx, .mtx.gz, .mtx.bz2)")
    p.add_argument("b", help="the right-hand side(s): a Matrix Market file")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write x to this Matrix Market file, as named (default: stdout); "
                   "replaced only once x is completely written")
    p.add_argument("--rtol", type=float, default=1e-10,
                   help="relative tolerance on the residual (default: 1e-10)")
    p.add_argument("--maxiter", type=_positive_int, default=None,
                   help="iteration cap of the iterative routes (default: the route's own)")
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


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so the interpreter's flush at exit cannot
    fail again on a pipe whose reader has gone."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except CLIError as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 1
    except BrokenPipeError:
        # the reader went away (| head): silence the flush at exit, as POSIX tools do
        _quiet_stdout()
        return 141
    except MemoryError:
        sys.stderr.write(f"{PROG}: error: not enough memory\n")
        return 1
    except OSError as exc:  # (reading or writing a stream the OS refuses)
        sys.stderr.write(f"{PROG}: error: {exc.strerror or _one_line(exc)}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
