"""The package's shape: no import cycles, no overlong functions, private names kept private.

Every module of ``eagle_sparse`` is parsed with :mod:`ast` (nothing is imported), so the
checks see function-local imports as well as module-level ones:

* the import graph between the package's modules (relative imports resolved,
  ``from . import x`` read as an import of the submodule ``x`` where there is one, and an
  import of ``eagle_sparse.linalg._pinv`` from outside ``eagle_sparse.linalg`` also one
  of ``eagle_sparse.linalg``, whose ``__init__`` runs first) has no cycle;
* no function or method has more than :data:`MAX_CODE_LINES` code lines (its body
  without the docstring, blank lines and comment-only lines; nested functions count
  towards the function that holds them), except those in :data:`PENDING_LONG_FUNCTIONS`;
* a private name (leading underscore) is imported from another module of the package
  only where :data:`PENDING_PRIVATE_IMPORTS` lists it: modules share helpers through
  names without an underscore (their internal API), and a private module itself (such
  as ``eagle_sparse._lsq._residual``) may be imported freely.

The two pending sets record known debts; they may shrink but must not grow.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

PACKAGE = "eagle_sparse"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE

MAX_CODE_LINES = 80

#: ``module:qualified name`` of functions still over :data:`MAX_CODE_LINES` (being
#: rewritten elsewhere); to be emptied.
PENDING_LONG_FUNCTIONS: set[str] = set()

#: ``importing module -> imported module:name`` for private names that still cross
#: modules; must not grow.
PENDING_PRIVATE_IMPORTS: set[str] = set()


def _modules() -> dict[str, Path]:
    """Dotted name -> file of every Python module of the package."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def _top_level_names(module: str) -> set[str]:
    """Names a module binds at its top level (definitions, assignments, imports)."""
    names = set()
    for node in ast.parse(MODULES[module].read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _base(module: str, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names."""
    if not node.level:
        return node.module or ""
    package = module if _is_package(module) else module.rpartition(".")[0]
    parts = package.split(".")
    if node.level > 1:
        parts = parts[: len(parts) - node.level + 1]
    return ".".join(parts + ([node.module] if node.module else []))


def _imports(module: str):
    """``(target module, imported name or None)`` for every import in ``module``
    (function-local ones included); targets outside the package are dropped."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    yield alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, node)
            if base != PACKAGE and not base.startswith(PACKAGE + "."):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in MODULES or (_is_package(base)
                                      and alias.name not in _top_level_names(base)):
                    yield sub, None  # a submodule (or a compiled one, e.g. _core)
                else:
                    yield base, alias.name


def _graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports.  Importing ``a.b.c`` also runs the
    ``__init__`` of the subpackage ``a.b`` (an edge to it) unless the importer lives
    inside ``a.b`` already; the top-level package, which every module is inside, is an
    edge only where it is named."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name in MODULES:
        for target, _ in _imports(name):
            parts = target.split(".")
            for i in range(2, len(parts)):
                parent = ".".join(parts[:i])
                if not (name == parent or name.startswith(parent + ".")):
                    graph[name].add(parent)
            if target in MODULES and target != name:
                graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _code_lines(source: str) -> set[int]:
    """Line numbers that hold code (not blank, not only a comment)."""
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                        tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER):
            continue
        lines.update(range(tok.start[0], tok.end[0] + 1))
    return lines


def _functions(tree: ast.AST, prefix: str = ""):
    """``(qualified name, node)`` of every function and method (nested ones too)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + node.name
            yield name, node
            yield from _functions(node, name + ".<locals>.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def _length(node: ast.FunctionDef, code: set[int]) -> int:
    """Code lines of a function's body, its docstring left out."""
    body = node.body
    if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        body = body[1:]
    if not body:
        return 0
    return len([ln for ln in range(body[0].lineno, node.end_lineno + 1) if ln in code])


def _long_functions() -> dict[str, int]:
    out = {}
    for module, path in MODULES.items():
        source = path.read_text()
        code = _code_lines(source)
        for name, node in _functions(ast.parse(source, str(path))):
            n = _length(node, code)
            if n > MAX_CODE_LINES:
                out[f"{module}:{name}"] = n
    return out


def _pending_long(key: str) -> bool:
    module = key.partition(":")[0]
    return key in PENDING_LONG_FUNCTIONS or f"{module}:*" in PENDING_LONG_FUNCTIONS


def _private_imports() -> set[str]:
    out = set()
    for module in MODULES:
        for target, name in _imports(module):
            if name is not None and name.startswith("_") and not name.startswith("__") \
                    and target != module:
                out.add(f"{module} -> {target}:{name}")
    return out


def test_the_import_graph_sees_every_kind_of_import():
    assert f"{PACKAGE}._solve._front" in MODULES and f"{PACKAGE}.linalg._lsq" in MODULES
    graph = _graph()
    assert f"{PACKAGE}._lsq._lapack" in graph[f"{PACKAGE}.linalg._lsq"]  # relative, local
    assert f"{PACKAGE}._lsq._residual" in graph[f"{PACKAGE}.distributed._rounds"]  # module level
    assert f"{PACKAGE}._certify" in graph[f"{PACKAGE}._solve._front"]  # from .. import <mod>
    # importing eagle_sparse.linalg._lstsq runs eagle_sparse/linalg/__init__.py first
    assert f"{PACKAGE}.linalg" in graph[PACKAGE]
    assert f"{PACKAGE}.linalg" not in graph[f"{PACKAGE}.linalg._lsq"]


def test_no_import_cycles():
    assert _cycles(_graph()) == []


# ------------------------------------------------------------- layers (docs/ARCHITECTURE.md)

#: The package's rooms (its folders, and the modules at its root), from the bottom up:
#: a room imports rooms of its own layer or below, never above (imports inside
#: functions counted).  docs/ARCHITECTURE.md draws this table.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("backends",),
    ("_result", "_version", "_config", "_progress", "_scipy", "_system", "_certify",
     "_cg_loop", "sketch", "datasets", "_testing", "_routing"),
    ("_eagle",),
    ("_lsq",),
    ("precond",),
    ("linalg",),
    ("_solve", "distributed", "sklearn"),
    ("eagle_sparse", "__main__", "patch"),
)

#: ``importing room -> imported room`` against :data:`LAYERS`, each with its reason (and
#: listed in docs/ARCHITECTURE.md); the test fails when another appears, and when one
#: listed here is gone (shrink the list).
UPWARD: dict[str, str] = {}

#: Modules still over :data:`MAX_MODULE_LINES` (being split); must shrink.
PENDING_LONG_MODULES: set[str] = set()

MAX_MODULE_LINES = 600
#: Private modules (not packages) at the package's root, at most.
MAX_ROOT_PRIVATE_MODULES = 8


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _layer_of() -> dict[str, int]:
    return {room: i for i, rooms in enumerate(LAYERS) for room in rooms}


def _room_edges() -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for a, targets in _graph().items():
        for b in targets:
            if _room(a) != _room(b):
                out.setdefault((_room(a), _room(b)), []).append(f"{a} -> {b}")
    return out


def test_every_room_has_a_layer():
    rooms = {_room(m) for m in MODULES}
    assert rooms - set(_layer_of()) == set()
    assert set(_layer_of()) - rooms == set()  # (no stale name in the table)


def test_imports_follow_the_layers():
    layer = _layer_of()
    upward = {f"{a} -> {b}": where for (a, b), where in _room_edges().items()
              if layer[a] < layer[b]}
    assert set(upward) - set(UPWARD) == set(), upward
    assert set(UPWARD) - set(upward) == set()  # (fixed: take it off the list)


def test_no_cycles_between_rooms():
    graph: dict[str, set[str]] = {room: set() for room in _layer_of()}
    for a, b in _room_edges():
        graph[a].add(b)
    assert _cycles(graph) == []


def test_upward_imports_are_documented():
    text = (ROOT.parent / "docs" / "ARCHITECTURE.md").read_text()
    assert all(edge in text for edge in UPWARD)
    for rooms in LAYERS:  # the drawing names every room
        assert all(room in text for room in rooms if room != "eagle_sparse")


def test_no_module_is_longer_than_the_limit():
    long = {m for m, p in MODULES.items()
            if len(p.read_text().splitlines()) > MAX_MODULE_LINES}
    assert long - PENDING_LONG_MODULES == set()
    assert PENDING_LONG_MODULES - long == set()  # (split: take it off the list)


def test_the_root_holds_few_private_modules():
    root = [p.name for p in ROOT.glob("_*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(root) <= MAX_ROOT_PRIVATE_MODULES, sorted(root)


def test_a_cycle_would_be_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_function_is_longer_than_the_limit():
    long = _long_functions()
    assert {k: n for k, n in long.items() if not _pending_long(k)} == {}


def test_pending_long_functions_name_real_functions():
    """The allowlist names modules and functions that exist (no typo hides a long one)."""
    known = set()
    for module, path in MODULES.items():
        known.add(f"{module}:*")
        known.update(f"{module}:{name}" for name, _ in _functions(ast.parse(path.read_text())))
    assert PENDING_LONG_FUNCTIONS - known == set()


def test_private_names_do_not_cross_modules():
    assert _private_imports() - PENDING_PRIVATE_IMPORTS == set()


def test_pending_private_imports_still_exist():
    """An entry that no longer happens is removed from the set."""
    assert PENDING_PRIVATE_IMPORTS - _private_imports() == set()


@pytest.mark.parametrize(("source", "expected"), [
    ("def f():\n    '''doc\n    more'''\n    # note\n\n    x = 1\n    return x\n", 2),
    ("def f():\n    return (1,\n            2)\n", 2),
    ("def f():\n    '''only a docstring'''\n", 0),
])
def test_code_lines_are_counted_without_docstring_blanks_and_comments(source, expected):
    (_, node), = _functions(ast.parse(source))
    assert _length(node, _code_lines(source)) == expected


#: Modules only the backend layer may import: the compiled core, the CUDA module, CuPy.
BACKEND_ONLY = {f"{PACKAGE}._core", f"{PACKAGE}._cuda"}


def _all_imports(module: str):
    """Every imported module name (absolute, package-internal ones resolved) and the
    names imported from the package's modules."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, node)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def test_the_core_cuda_and_cupy_are_imported_only_inside_backends():
    leaks = {}
    for module in MODULES:
        if module.startswith(f"{PACKAGE}.backends"):
            continue
        bad = {t for t in _all_imports(module)
               if t in BACKEND_ONLY or t == "cupy" or t.startswith(("cupy.", "cupyx"))}
        if bad:
            leaks[module] = sorted(bad)
    assert leaks == {}


def test_pyamg_is_imported_only_by_its_adapter():
    """One module speaks to PyAMG (``precond/_amg.py``): the rest asks it."""
    users = {module for module in MODULES
             if any(t == "pyamg" or t.startswith("pyamg.") for t in _all_imports(module))}
    assert users == {f"{PACKAGE}.precond._amg"}


#: Test files named for what they cover rather than one module.
TESTS_FOR = {
    "test_main.py": "__main__.py",
    "backends/test_registry.py": "backends/__init__.py",
    "backends/test_kernels.py": "backends/numpy_backend.py",  # the kernel interface
    "backends/test_sketch_kernels.py": "backends/numpy_backend.py",
    "backends/test_kernel_refusals.py": "backends/numpy_backend.py",
    "backends/test_gram_kernels.py": "backends/native.py",  # the core's CsrMatrix products
    "backends/test_binding_inputs.py": "backends/native.py",  # the core's argument handling
    "backends/test_gpu.py": "backends/_device.py",  # the device path, end to end
}


def test_tests_mirror_the_package():
    """tests/<sub>/test_<name>.py covers eagle_sparse/<sub>/[_]<name>.py (or the package
    <name>/); what crosses modules lives in tests/integration/."""
    tests = ROOT.parent / "tests"
    orphans = []
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(tests)
        if rel.parts[0] == "integration":
            continue
        target = TESTS_FOR.get(rel.as_posix())
        stem = rel.name[len("test_"):]
        candidates = [ROOT / target] if target else [
            ROOT / rel.parent / stem, ROOT / rel.parent / f"_{stem}",
            ROOT / rel.parent / stem.removesuffix(".py") / "__init__.py",  # (a package)
            ROOT / rel.parent / f"_{stem.removesuffix('.py')}" / "__init__.py"]
        if not any(c.is_file() for c in candidates):
            orphans.append(rel.as_posix())
    assert orphans == []


# ------------------------------------------------------------- routing in one place

def _defined_names(module: str) -> set[str]:
    """Names a module defines at its top level (functions, classes, assignments; not
    imports)."""
    names = set()
    for node in ast.parse(MODULES[module].read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _routing_rules() -> set[str]:
    rules = set()
    for module in MODULES:
        if _room(module) == "_routing" and module != f"{PACKAGE}._routing":
            rules |= _defined_names(module) - {"__all__"}
    return rules


def test_routing_rules_live_in_one_folder():
    """The decisions of ``method="auto"`` and their constants are defined in
    ``eagle_sparse/_routing`` only: no other module defines (or redefines) one of its
    names, so a threshold has one home, next to the bench figures it comes from."""
    rules = _routing_rules()
    assert {"auto_method", "HANDOVER", "SWITCH_MIN_N", "JACOBI_MIN_RATIO", "LU_MAX_BYTES",
            "cg_iteration_time", "qr_first"} <= rules
    elsewhere = {f"{m}:{name}" for m in MODULES if _room(m) != "_routing"
                 for name in _defined_names(m) & rules}
    assert elsewhere == set()


def test_routing_decides_from_counts_not_the_clock():
    """Nothing in ``_routing`` reads a clock (or the machine's load): the same input takes
    the same route on any machine."""
    for module in MODULES:
        if _room(module) != "_routing":
            continue
        text = MODULES[module].read_text()
        assert "perf_counter" not in text and "import time" not in text, module
        assert "getloadavg" not in text and "cpu_count" not in text, module


# ------------------------------------------------------------- one normaliser

#: What an operand check says when it refuses (the normaliser's words): shapes, dtypes,
#: finiteness, emptiness.
OPERAND_CHECK = ("contains NaN", "must have shape", "must be square", "must be 2-D",
                 "is empty (shape", "dtype=object", "must be real numeric",
                 "must be numeric", "must be a numeric", "NaN or infinity")

#: Rooms that check what they are handed at a lower boundary: the kernels' arguments
#: (the compiled core must never crash, whatever it is passed).
OPERAND_CHECK_ELSEWHERE = ("backends",)


def test_operands_are_checked_by_the_one_normaliser():
    """Shapes, dtypes, finiteness and emptiness of a front door's operands are checked in
    ``eagle_sparse/_system`` only (``make_system``, a method of ``System``, or
    ``_system/_operands.py`` for what is not a linear system): no other module raises
    such an error itself."""
    found = []
    for module, path in MODULES.items():
        if _room(module) in ("_system",) + OPERAND_CHECK_ELSEWHERE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and node.exc is not None:
                text = ast.unparse(node.exc)
                if any(words in text for words in OPERAND_CHECK):
                    found.append(f"{module}:{node.lineno}")
    assert found == []


# ------------------------------------------------------------- the device behind the backends

#: What tests where an array lives (the executor's business, inside ``backends/``).
DEVICE_PREDICATES = {"is_device_array", "is_device_sparse", "wants_device", "require_cupy",
                     "require_cupyx_scipy", "device_copy", "cupy_module", "cuda_module"}


def _device_leaks(module: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        names: list[str] = []
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.alias):
            names = [node.name, node.asname or ""]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.arg):
            names = [node.arg]
        elif isinstance(node, ast.Compare):  # device == "cuda", "cuda" != device ...
            consts = [c for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
            if any(c.value == "cuda" for c in consts):
                out.append(f"{module}:{node.lineno}: compares with 'cuda'")
        for name in names:
            low = name.lower()
            if "cupy" in low or name in DEVICE_PREDICATES or (
                    isinstance(node, ast.Name) and name == "to_device") or name.endswith(
                    ("backends._device", "backends._gpu", "backends._xp")):
                out.append(f"{module}:{getattr(node, 'lineno', 0)}: {name}")
    return out


def test_the_device_is_an_executor_behind_the_backends():
    """Outside ``backends/`` no module names CuPy in its code (imports, names, functions,
    arguments), tests where an array lives, compares ``device`` with ``"cuda"``, or
    imports the backends' private modules: front doors and routes ask the executor
    (:func:`eagle_sparse.backends.executor`, :func:`~eagle_sparse.backends.executor_of`)
    for the array module, the sparse modules, moving operands, the backend, the
    LAPACK-equivalent and what runs best there.  (Docstrings and messages may name CuPy:
    users pass CuPy arrays.)"""
    leaks = [leak for module in MODULES if _room(module) != "backends"
             for leak in _device_leaks(module)]
    assert leaks == []


def test_a_device_leak_would_be_found(tmp_path):
    src = ("from .backends._device import is_device_array\n"
           "def f(A, device):\n    import cupy\n"
           "    return cupy.asarray(A) if device == 'cuda' else A\n")
    MODULES["eagle_sparse._probe_leak"] = tmp_path / "probe.py"
    (tmp_path / "probe.py").write_text(src)
    try:
        leaks = _device_leaks("eagle_sparse._probe_leak")
    finally:
        del MODULES["eagle_sparse._probe_leak"]
    assert len(leaks) >= 4
