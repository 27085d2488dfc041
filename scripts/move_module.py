#!/usr/bin/env python3
"""Move modules of ``eagle_sparse`` and rewrite every reference to them (a pure move).

    python scripts/move_module.py eagle_sparse._lsq._lapack eagle_sparse._lsq._lapack [...]

Each pair moves one module (``x.py``) or package (``x/``) with ``git mv`` and then
rewrites, across the package, the tests, the bench, the scripts, the examples and the
docs:

* relative imports inside the package (resolved against each file's old place,
  written again relative to its new place; ``from . import a, b`` is split where ``a``
  and ``b`` now live in different folders), imports inside functions included;
* absolute imports (``from eagle_sparse import _lapack``, ``import eagle_sparse._lsq._lapack``);
* dotted names and paths in text (``eagle_sparse._lsq._lapack.lstsq`` in a monkeypatch
  string or a ``:mod:`` reference, ``eagle_sparse/_lsq/_lapack.py`` in a document);
* the module's test file ``tests/<old folder>/test_<name>.py`` follows it to
  ``tests/<new folder>/test_<name>.py`` (tests mirror the package).

A target folder must exist as a package (its ``__init__.py`` with the docstring that
says what lives there) before the move.  Nothing else changes, so the commit is a pure
move that ``git log --follow`` traces.  Run ``ruff check`` and the tests afterwards.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = "eagle_sparse"
SCAN = ("eagle_sparse", "tests", "bench", "scripts", "examples", "docs")
TEXT_SUFFIXES = {".py", ".md", ".rst", ".toml", ".sh", ".txt", ".cfg", ".yml", ".yaml"}
LINE = 100


def module_path(name: str) -> Path:
    rel = Path(*name.split("."))
    if (ROOT / rel.with_suffix(".py")).is_file():  # (a module beside its new folder)
        return ROOT / rel.with_suffix(".py")
    return ROOT / rel


def file_module(path: Path) -> tuple[str, bool]:
    """(dotted module name, is a package's __init__) of a file under ROOT."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    init = parts[-1] == "__init__"
    if init:
        parts = parts[:-1]
    return ".".join(parts), init


class Mapping:
    def __init__(self, pairs: list[tuple[str, str]]):
        self.pairs = sorted(pairs, key=lambda p: -len(p[0]))

    def __call__(self, name: str) -> str:
        for old, new in self.pairs:
            if name == old or name.startswith(old + "."):
                return new + name[len(old):]
        return name


def is_module(name: str, old_modules: set[str]) -> bool:
    return name in old_modules


def package_of(mod: str, init: bool) -> list[str]:
    return mod.split(".") if init else mod.split(".")[:-1]


def resolve(node: ast.ImportFrom, pkg: list[str]) -> str:
    base = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
    return ".".join(base + ([node.module] if node.module else []))


def relative(target: str, pkg: list[str]) -> tuple[int, str]:
    t = target.split(".")
    common = 0
    while common < min(len(t), len(pkg)) and t[common] == pkg[common]:
        common += 1
    level = len(pkg) - common + 1
    return level, ".".join(t[common:])


def render(indent: str, module: str, names: list[tuple[str, str | None]], tail: str) -> str:
    items = [n if a is None or a == n else f"{n} as {a}" for n, a in names]
    one = f"{indent}from {module} import {', '.join(items)}{tail}"
    if len(one) <= LINE - 1 or len(items) == 1:
        return one
    lines = [f"{indent}from {module} import ("]
    cur = indent + "    "
    for it in items:
        piece = it + ","
        if len(cur) + len(piece) + 1 > LINE - 1 and cur.strip():
            lines.append(cur.rstrip())
            cur = indent + "    "
        cur += piece + " "
    lines.append(cur.rstrip())
    lines.append(f"{indent}){tail}")
    return "\n".join(lines)


def rewrite_imports(path: Path, new_path: Path, mapping: Mapping, old_modules: set[str]) -> str:
    src = path.read_text()
    tree = ast.parse(src)
    old_mod, init = file_module(path)
    new_mod, _ = file_module(new_path)
    old_pkg, new_pkg = package_of(old_mod, init), package_of(new_mod, init)
    in_package = old_mod.split(".")[0] == PKG
    lines = src.split("\n")
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level and not in_package:
                continue
            target = resolve(node, old_pkg) if node.level else (node.module or "")
            if not (target == PKG or target.startswith(PKG + ".")):
                continue
            groups: dict[str, list[tuple[str, str | None]]] = {}
            for a in node.names:
                full = f"{target}.{a.name}"
                if a.name != "*" and is_module(full, old_modules):
                    new_full = mapping(full)
                    parent, leaf = new_full.rsplit(".", 1)
                    groups.setdefault(parent, []).append((leaf, a.asname or (
                        a.name if leaf != a.name else None)))
                else:
                    groups.setdefault(mapping(target), []).append((a.name, a.asname))
            out = []
            for mod, names in groups.items():
                if node.level:
                    level, rest = relative(mod, new_pkg)
                    spec = "." * level + rest
                else:
                    spec = mod
                out.append((spec, names))
            unchanged = (len(out) == 1 and node.level
                         and out[0][0] == "." * node.level + (node.module or "")
                         and [n for n, _ in out[0][1]] == [a.name for a in node.names])
            unchanged = unchanged or (len(out) == 1 and not node.level
                                      and out[0][0] == node.module
                                      and [n for n, _ in out[0][1]]
                                      == [a.name for a in node.names])
            if unchanged:
                continue
            edits.append((node, out))
        elif isinstance(node, ast.Import) and any(mapping(a.name) != a.name
                                                  for a in node.names):
            edits.append((node, None))
    for node, out in sorted(edits, key=lambda e: -e[0].lineno):
        first, last = node.lineno - 1, node.end_lineno - 1
        head = lines[first][: node.col_offset]
        tail = lines[last][node.end_col_offset:]
        if head.strip():
            raise SystemExit(f"{path}:{node.lineno}: an import that does not start its line")
        if out is None:
            items = [a.name if a.asname is None else f"{a.name} as {a.asname}"
                     for a in node.names]
            items = [re.sub(r"^[\w.]+", lambda m: mapping(m.group(0)), it) for it in items]
            text = f"{head}import {', '.join(items)}{tail}"
        else:
            text = "\n".join(render(head, spec, names, tail if i == len(out) - 1 else "")
                             for i, (spec, names) in enumerate(out))
        lines[first: last + 1] = text.split("\n")
    return "\n".join(lines)


def rewrite_text(text: str, pairs: list[tuple[str, str]]) -> str:
    """Dotted names and paths of the moved modules, replaced in one pass (a name the
    pass writes is never read again: ``_routing`` -> ``_solve._routing`` stays so while
    ``_solve`` -> ``_solve._front``)."""
    table = {}
    for _old, new in pairs:  # (new names map to themselves: the imports already written)
        table.setdefault(new, new)
        table.setdefault(new.replace(".", "/"), new.replace(".", "/"))
    for old, new in pairs:
        table[old] = new
        table[old.replace(".", "/")] = new.replace(".", "/")
    names = sorted(table, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w./])(" + "|".join(map(re.escape, names)) + r")(?!\w)")

    def swap(m: re.Match) -> str:
        found = m.group(1)
        new = table[found]
        if new.startswith(found) and m.string.startswith(new, m.start(1)):
            return found  # (already the new name)
        if "/" in found and not re.match(r"(\.py|/)(?!\w)", m.string[m.end(1):]):
            return found  # (a path only where a file or folder follows)
        return new

    return pattern.sub(swap, text)


def main(argv: list[str]) -> None:
    if len(argv) < 2 or len(argv) % 2:
        raise SystemExit(__doc__)
    pairs = list(zip(argv[::2], argv[1::2], strict=True))
    mapping = Mapping(pairs)
    for old, new in pairs:
        if not module_path(old).exists():
            raise SystemExit(f"{old}: no such module")
        parent = ROOT / Path(*new.split(".")[:-1])
        if not (parent / "__init__.py").is_file():
            raise SystemExit(f"{new}: create the package {parent} (with its docstring) first")
    # every module that exists before the move, under its old name
    old_modules = set()
    for p in (ROOT / PKG).rglob("*.py"):
        old_modules.add(file_module(p)[0])
    files = sorted({p for d in SCAN if (ROOT / d).exists() for p in (ROOT / d).rglob("*")
                    if p.is_file() and p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts})
    files += [ROOT / f for f in ("README.md", "CHANGELOG.md", "pyproject.toml",
                                 "CMakeLists.txt", ".ci/run") if (ROOT / f).exists()]
    test_moves = planned_test_moves(pairs)
    text_pairs = pairs + [(str(t.relative_to(ROOT).with_suffix("")).replace("/", "."),
                           str(d.relative_to(ROOT).with_suffix("")).replace("/", "."))
                          for t, d in test_moves]  # (paths such as tests/test_x.py)
    new_text = {}
    for path in files:
        new_path = path
        mod, init = file_module(path) if path.suffix == ".py" else ("", False)
        if path.suffix == ".py" and mod.split(".")[0] == PKG:
            moved = mapping(mod)
            new_path = ROOT / Path(*moved.split("."))
            new_path = new_path / "__init__.py" if init else new_path.with_suffix(".py")
        text = rewrite_imports(path, new_path, mapping, old_modules) \
            if path.suffix == ".py" else path.read_text()
        text = rewrite_text(text, text_pairs)
        new_text[path] = text
    for path, text in new_text.items():
        path.write_text(text)
    for old, new in pairs:
        src, dst = module_path(old), ROOT / Path(*new.split("."))
        dst = dst if src.is_dir() else dst.with_suffix(".py")
        subprocess.run(["git", "mv", str(src), str(dst)], cwd=ROOT, check=True)
    for test, tdst in test_moves:
        tdst.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "mv", str(test), str(tdst)], cwd=ROOT, check=True)


def planned_test_moves(pairs: list[tuple[str, str]]) -> list[tuple[Path, Path]]:
    """``tests/<old folder>/test_<name>.py`` -> ``tests/<new folder>/test_<new name>.py``
    for each moved module that has one (not a public module's test of the same stem)."""
    out = []
    for old, new in pairs:
        src = module_path(old)
        o_parts, n_parts = old.split(".")[1:], new.split(".")[1:]
        stem = o_parts[-1].lstrip("_")
        test = ROOT / "tests" / Path(*o_parts[:-1]) / f"test_{stem}.py"
        public = ROOT / PKG / Path(*o_parts[:-1]) / f"{stem}.py"  # (its test stays)
        if test.is_file() and not src.is_dir() and not (public.is_file() and public != src):
            nstem = n_parts[-1].lstrip("_")
            out.append((test, ROOT / "tests" / Path(*n_parts[:-1]) / f"test_{nstem}.py"))
    return out

if __name__ == "__main__":
    main(sys.argv[1:])
