"""SciPy's solvers swapped for the drop-ins with one line: :func:`patch`, :func:`unpatch`
and :func:`patched` (the command line is :mod:`eagle_sparse.patch`).

A client library binds SciPy's function when it is imported
(``from scipy.sparse.linalg import lsmr`` in ``scipy.optimize._lsq.trf``) or looks it up
at call time (``scipy.sparse.linalg.cg`` in networkx).  :func:`patch` rebinds both:
SciPy's public names, the defining modules' names (so modules imported later get the
drop-in whichever path they import from), and every name, in every module already
imported, that is bound to SciPy's function object.  :func:`unpatch` puts SciPy's
function back in every binding that holds the drop-in, those made after the patch
included, and nowhere else.

What is installed is not the drop-in with its extras but a function with exactly
SciPy's signature (:func:`inspect.signature` equal) that runs the drop-in's ``auto``
route as SciPy's function (``_result.SCIPY_MODE``): no
:class:`~eagle_sparse.ConvergenceWarning` (the info code says it, as SciPy's does), and
an argument the drop-in refuses goes to SciPy's own function, so the client sees
SciPy's exception, or SciPy's answer where SciPy accepts it.  eagle_sparse's own
modules are never rebound: its routes reach SciPy's solvers through
:mod:`eagle_sparse._scipy`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import logging
import os
import sys
import threading
import types
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from .. import _scipy
from .._result import SCIPY_MODE

logger = logging.getLogger("eagle_sparse")
#: Each call of an installed drop-in is a DEBUG record here (``extra={"solver": name}``):
#: attach a handler to see which client calls what.
calls_logger = logging.getLogger("eagle_sparse.patch")

#: name -> (SciPy's public namespace, the module that defines SciPy's function)
TARGETS = {
    "cg": ("scipy.sparse.linalg", "scipy.sparse.linalg._isolve.iterative"),
    "lsqr": ("scipy.sparse.linalg", "scipy.sparse.linalg._isolve.lsqr"),
    "lsmr": ("scipy.sparse.linalg", "scipy.sparse.linalg._isolve.lsmr"),
    "factorized": ("scipy.sparse.linalg", "scipy.sparse.linalg._dsolve.linsolve"),
    "lstsq": ("scipy.linalg", "scipy.linalg._basic"),
}
NAMES = tuple(TARGETS)

#: The package's own modules are never rebound (they hold SciPy's functions on purpose).
_OWN = __name__.split(".", 1)[0]
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _refused(exc: BaseException) -> bool:
    """Whether ``exc`` is the drop-in refusing its arguments: a ``ValueError``,
    ``TypeError``, ``NotImplementedError`` or ``LinAlgError`` raised by eagle_sparse's
    own code (not by the caller's operator, preconditioner or callback)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_OWN_DIR)


def _as_scipy(ours, theirs, *args, method=None, **kwargs):
    """``ours(*args, **kwargs)`` run as SciPy's function ``theirs`` (``method`` is passed
    to ``ours`` only): silent on non-convergence, and SciPy's own behaviour for an
    argument ``ours`` refuses."""
    if calls_logger.isEnabledFor(logging.DEBUG):
        calls_logger.debug("%s called", ours.__name__, extra={"solver": ours.__name__})
    extra = {} if method is None else {"method": method}
    return _run_as_scipy(ours.__name__, lambda: ours(*args, **extra, **kwargs),
                         lambda: theirs(*args, **kwargs))


def _run_as_scipy(name: str, call, fallback):
    """``call()`` in :data:`SCIPY_MODE`; where eagle_sparse refuses its arguments
    (:func:`_refused`), ``fallback()`` (SciPy's own function) answers instead, outside
    the handler so that its exception reaches the caller unchained."""
    import numpy as np

    token = SCIPY_MODE.set(True)
    try:
        return call()
    except (ValueError, TypeError, NotImplementedError, np.linalg.LinAlgError) as exc:
        if not _refused(exc):
            raise
        calls_logger.info("%s: eagle_sparse refused the arguments (%s: %s); SciPy's own "
                          "%s runs", name, type(exc).__name__, exc, name,
                          extra={"solver": name})
    finally:
        SCIPY_MODE.reset(token)
    return fallback()


def _sparse(A) -> bool:
    import scipy.sparse as sp

    return sp.issparse(A)


def _pydata(A) -> bool:
    return type(A).__module__.split(".")[0] == "sparse"  # (SciPy takes pydata/sparse)


def _sparse_warning():
    import scipy.sparse

    return scipy.sparse.SparseEfficiencyWarning


def _factorized_solve(solve, scipy_solve):
    """The drop-in's ``solve(b)`` run as SciPy's: a ``b`` that is not an ndarray, or
    one the drop-in refuses, goes to SciPy's own factorisation (``scipy_solve()``, made
    once, on the first such call)."""
    import numpy as np

    theirs: list = []

    def fallback(b):
        if not theirs:
            theirs.append(scipy_solve())
        return theirs[0](b)

    @functools.wraps(solve)
    def solve_as_scipy(b):
        if not isinstance(b, np.ndarray):
            return fallback(b)
        return _run_as_scipy("factorized", lambda: solve(b), lambda: fallback(b))
    return solve_as_scipy


def _scipy_signature(name: str) -> inspect.Signature:
    return inspect.signature(getattr(_scipy, name))


def _drop_in(name: str):
    """The function :func:`patch` installs for ``name``: SciPy's signature, the drop-in's
    ``auto`` route, SciPy's conventions for warnings and refused arguments."""
    from .. import linalg

    ours, theirs = getattr(linalg, name), getattr(_scipy, name)
    if name == "cg":
        def fn(A, b, x0=None, *, rtol=1e-05, atol=0.0, maxiter=None, M=None, callback=None):
            # SciPy's own iteration, bit for bit, and its true residual checked
            # (``auto``'s compiled loop and preconditioners change the iterates)
            return _as_scipy(ours, theirs, A, b, x0, rtol=rtol, atol=atol, maxiter=maxiter,
                             M=M, callback=callback, method="krylov")
    elif name == "lsqr":
        def fn(A, b, damp=0.0, atol=1e-06, btol=1e-06, conlim=100000000.0, iter_lim=None,
               show=False, calc_var=False, x0=None):
            return _as_scipy(ours, theirs, A, b, damp, atol, btol, conlim, iter_lim, show,
                             calc_var, x0)
    elif name == "lsmr":
        def fn(A, b, damp=0.0, atol=1e-06, btol=1e-06, conlim=100000000.0, maxiter=None,
               show=False, x0=None):
            return _as_scipy(ours, theirs, A, b, damp, atol, btol, conlim, maxiter, show, x0)
    elif name == "factorized":
        def fn(A):
            solve = _as_scipy(ours, theirs, A)
            if not (getattr(solve, "__module__", None) or "").startswith("eagle_sparse"):
                return solve  # (SciPy's own, for an A the drop-in refused: it warned)
            if not (_sparse(A) and A.format == "csc") and not _pydata(A):
                # (SciPy's splu converts to CSC and says so)
                warnings.warn("splu converted its input to CSC format",
                              _sparse_warning(), stacklevel=2)
            return _factorized_solve(solve, lambda: theirs(A))
    else:  # lstsq
        def fn(a, b, cond=None, overwrite_a=False, overwrite_b=False, check_finite=True,
               lapack_driver=None):
            return _as_scipy(ours, theirs, a, b, cond, overwrite_a, overwrite_b,
                             check_finite, lapack_driver)
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = "eagle_sparse.patch"
    fn.__doc__ = (f"eagle_sparse's drop-in for SciPy's ``{name}``, installed by "
                  f"eagle_sparse.patch() (SciPy's signature and conventions).\n\n"
                  + (theirs.__doc__ or ""))
    # SciPy's own attributes (``lstsq.default_lapack_driver``: SciPy's lstsq reads it
    # through its module's name, which the patch rebinds)
    fn.__dict__.update({k: v for k, v in vars(theirs).items() if not k.startswith("__")})
    fn.__wrapped_scipy__ = theirs
    return fn


@dataclass
class PatchReport:
    """What a call of :func:`patch` or :func:`unpatch` did.

    Attributes
    ----------
    rebound : list of (str, str)
        ``(module, name)`` of every binding changed, in the order changed.
    skipped : dict
        ``name -> reason`` for each requested name left as it was (already in the
        requested state, or absent or different in this SciPy version).
    patched : tuple of str
        The names patched after the call.
    """

    rebound: list[tuple[str, str]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    patched: tuple[str, ...] = ()

    def __str__(self) -> str:
        lines = [f"{mod}.{name}" for mod, name in self.rebound]
        lines += [f"{name}: {why}" for name, why in self.skipped.items()]
        return "\n".join(lines) or "nothing to do"


_LOCK = threading.RLock()
#: name -> (SciPy's function, the installed drop-in) for each patched name
_STATE: dict[str, tuple[object, object]] = {}
#: name -> how many :func:`patched` blocks hold it now (nested or overlapping)
_DEPTH: dict[str, int] = {}
#: names a :func:`patched` block patched (not :func:`patch`): unpatched when the last
#: block holding them exits
_BY_BLOCKS: set[str] = set()


def _names(names: str | Iterable[str] | None) -> list[str]:
    if names is None:
        return list(NAMES)
    if isinstance(names, str):
        names = [names]
    out = []
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"names must be strings, got {type(name).__name__}")
        if name not in TARGETS:
            raise ValueError(f"names: {name!r} is not one of {', '.join(NAMES)}")
        if name not in out:
            out.append(name)
    return out


def _original(name: str):
    """SciPy's function for ``name`` in this SciPy version and the modules to patch,
    or ``(None, reason)``."""
    public, defining = TARGETS[name]
    try:
        namespace = importlib.import_module(public)
    except ImportError as exc:  # pragma: no cover - SciPy is required
        return None, f"{public} cannot be imported ({exc})"
    fn = getattr(namespace, name, None)
    if fn is None:
        return None, f"this SciPy has no {public}.{name}"
    theirs = getattr(_scipy, name)
    if fn is not theirs:
        return None, (f"{public}.{name} is not SciPy's own function ({fn!r}): something "
                      "else patched it; unpatch that first")
    if inspect.signature(drop_in(name)) != inspect.signature(theirs):
        return None, (f"SciPy's {name}{inspect.signature(theirs)} differs from the "
                      f"signature the drop-in mirrors ({inspect.signature(drop_in(name))})")
    return fn, defining


@functools.cache
def drop_in(name: str):
    """The function :func:`patch` installs for ``name`` (one object per name)."""
    return _drop_in(name)


def _modules() -> list[types.ModuleType]:
    """Every imported module but eagle_sparse's own (a snapshot: importing may add)."""
    return [m for key, m in list(sys.modules.items())
            if isinstance(m, types.ModuleType) and key != _OWN
            and not key.startswith(_OWN + ".")]


def _rebind(old, new, name: str, report: PatchReport) -> None:
    """Every module attribute bound to ``old`` becomes ``new``."""
    for module in _modules():
        try:
            namespace = vars(module)
        except TypeError:  # pragma: no cover - a module without __dict__
            continue
        for attr, value in list(namespace.items()):
            if value is old:
                try:
                    setattr(module, attr, new)
                except (AttributeError, TypeError):  # pragma: no cover - read-only
                    continue
                report.rebound.append((module.__name__, attr))


def patch(names: str | Iterable[str] | None = None) -> PatchReport:
    """Make SciPy's solvers eagle_sparse's drop-ins, in every module that uses them.

    Parameters
    ----------
    names : str or iterable of str, optional
        Which of ``"cg"``, ``"lsqr"``, ``"lsmr"``, ``"factorized"`` (in
        ``scipy.sparse.linalg``) and ``"lstsq"`` (in ``scipy.linalg``); all by default.

    Returns
    -------
    PatchReport
        Every ``(module, name)`` rebound, and why a name was skipped (already patched, or
        absent or different in this SciPy version: then it is left alone).  Also logged
        at INFO on the ``eagle_sparse`` logger.

    Notes
    -----
    SciPy's public name, the defining module's name, and every name bound to SciPy's
    function object in a module already imported are rebound; modules imported later
    import the drop-in.  A reference held elsewhere (a dict, a default argument, a
    closure) is not reached.  The installed functions have SciPy's exact signature and
    conventions: no warning where SciPy's is silent, and an argument the drop-in
    refuses is handed to SciPy's function (its exception, or its answer).  Idempotent
    and thread-safe; :func:`unpatch` undoes it.

    Examples
    --------
    >>> import numpy as np, scipy.sparse.linalg
    >>> import eagle_sparse
    >>> report = eagle_sparse.patch("lsmr")
    >>> ("scipy.sparse.linalg", "lsmr") in report.rebound
    True
    >>> x = scipy.sparse.linalg.lsmr(np.eye(3), np.ones(3))[0]
    >>> _ = eagle_sparse.unpatch()
    >>> scipy.sparse.linalg.lsmr.__module__
    'scipy.sparse.linalg._isolve.lsmr'
    """
    report = PatchReport()
    with _LOCK:
        for name in _names(names):
            if name in _STATE:
                report.skipped[name] = "already patched"
                continue
            theirs, where = _original(name)
            if theirs is None:
                report.skipped[name] = where
                logger.info("eagle_sparse.patch: %s not patched: %s", name, where)
                continue
            ours = drop_in(name)
            _rebind(theirs, ours, name, report)
            _STATE[name] = (theirs, ours)
        report.patched = tuple(n for n in NAMES if n in _STATE)
    for mod, attr in report.rebound:
        logger.info("eagle_sparse.patch: %s.%s", mod, attr)
    return report


def unpatch(names: str | Iterable[str] | None = None) -> PatchReport:
    """Undo :func:`patch`: SciPy's function again in every binding that holds the
    drop-in (bindings made after the patch, by modules imported since, included).

    Parameters
    ----------
    names : str or iterable of str, optional
        As :func:`patch`; all patched names by default.

    Returns
    -------
    PatchReport
        Every ``(module, name)`` restored.
    """
    report = PatchReport()
    with _LOCK:
        for name in _names(names):
            if name not in _STATE:
                report.skipped[name] = "not patched"
                continue
            theirs, ours = _STATE.pop(name)
            _DEPTH.pop(name, None)
            _BY_BLOCKS.discard(name)
            _rebind(ours, theirs, name, report)
        report.patched = tuple(n for n in NAMES if n in _STATE)
    for mod, attr in report.rebound:
        logger.info("eagle_sparse.unpatch: %s.%s", mod, attr)
    return report


@contextlib.contextmanager
def patched(names: str | Iterable[str] | None = None) -> Iterator[PatchReport]:
    """:func:`patch` for the duration of a ``with`` block; on leaving, the names this
    block patched are unpatched (names patched before it stay patched).

    Examples
    --------
    >>> import numpy as np, scipy.linalg
    >>> import eagle_sparse
    >>> with eagle_sparse.patched("lstsq"):
    ...     x = scipy.linalg.lstsq(np.eye(2), np.ones(2))[0]
    >>> scipy.linalg.lstsq.__module__
    'scipy.linalg._basic'
    """
    with _LOCK:
        report = patch(names)
        mine = [n for n in _names(names) if n in _STATE]
        for n in mine:
            _DEPTH[n] = _DEPTH.get(n, 0) + 1
            if n not in report.skipped:  # (patched by this block: the last block out,
                _BY_BLOCKS.add(n)        # nested or overlapping, unpatches it)
    try:
        yield report
    finally:
        with _LOCK:
            done = []
            for n in mine:
                if n in _DEPTH:
                    _DEPTH[n] -= 1
                    if _DEPTH[n] == 0:
                        del _DEPTH[n]
                        if n in _BY_BLOCKS:
                            done.append(n)
            if done:
                unpatch(done)


USAGE = """usage: python -m eagle_sparse.patch [-v] [--names NAMES] (-m module | script) [args ...]

Run a Python program with SciPy's cg, lsqr, lsmr, factorized and lstsq replaced by
eagle_sparse's drop-ins (eagle_sparse.patch()), as python -m module / python script would.

options:
  -h, --help       this message
  -v, --verbose    print what was rebound to stderr
  --names NAMES    comma-separated subset of {names}
  -m module        run a library module as a script; the rest are its arguments
"""


def main(argv: list[str] | None = None) -> int:
    """``python -m eagle_sparse.patch [-v] [--names cg,lsmr] (-m module | script) [args]``:
    run a program with SciPy's solvers patched (as ``python -m`` / ``python script``).
    Everything after ``-m module`` or the script is the program's own arguments."""
    import runpy

    args = list(sys.argv[1:] if argv is None else argv)
    usage = USAGE.format(names=",".join(NAMES))
    verbose, names, module = False, None, None
    while args:
        arg = args.pop(0)
        if arg in ("-h", "--help"):
            sys.stdout.write(usage)
            return 0
        if arg in ("-v", "--verbose"):
            verbose = True
        elif arg == "--names" or arg.startswith("--names="):
            value = arg.partition("=")[2] if "=" in arg else (args.pop(0) if args else "")
            names = [n.strip() for n in value.split(",") if n.strip()]
        elif arg == "-m" or (arg.startswith("-m") and len(arg) > 2):
            module = arg[2:] or (args.pop(0) if args else None)
            break
        elif arg.startswith("-") and arg != "-":
            sys.stderr.write(f"{usage}\npython -m eagle_sparse.patch: error: unknown option "
                             f"{arg!r}\n")
            return 2
        else:
            args.insert(0, arg)
            break
    if module is None and not args:
        sys.stderr.write(f"{usage}\npython -m eagle_sparse.patch: error: give a script or "
                         "-m module\n")
        return 2
    try:
        report = patch(names)
    except (TypeError, ValueError) as exc:
        sys.stderr.write(f"python -m eagle_sparse.patch: error: {exc}\n")
        return 2
    if verbose:
        sys.stderr.write(f"eagle_sparse.patch: patched {', '.join(report.patched) or 'nothing'}"
                         f"\n{report}\n")
    if module is not None:
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(args)
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
        runpy.run_path(args[0], run_name="__main__")
    return 0
