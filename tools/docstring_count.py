"""Count the library's public definitions and how many carry a docstring, overall and per folder.

    python tools/docstring_count.py            # the table, one row per top-level folder
    python tools/docstring_count.py --missing  # also list each public definition without one
    python tools/docstring_count.py nn optim   # only these folders (or root files: testing.py)

A public definition is a module-level function or class whose name does not start with ``_``, or
a method of such a class whose name does not start with ``_`` (dunders are not public API here).
Property setters and deleters share their getter's docstring and ``typing.overload`` stubs are
declarations, so neither is counted. Library files are the package's ``.py`` files outside
``tests/``, ``tools/``, ``examples/``, ``benchmarks/``, ``bench/`` and the virtual environment.
The source is parsed, never imported, so the count is quick and needs no GPU, Triton or NumPy;
``tests/test_docstrings.py`` uses :func:`definitions` to hold folders to a full count.
"""
from __future__ import annotations

import argparse
import ast
import pathlib
import sys
from typing import Iterator, NamedTuple

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXCLUDED = {"tests", "tools", "examples", "benchmarks", "bench", ".venv", "build", "dist", ".git"}
ROOT_FOLDER = "(root)"


class Definition(NamedTuple):
    path: str       # relative to the package root, with forward slashes
    line: int
    qualname: str   # "name" or "Class.method"
    kind: str       # "function", "class" or "method"
    documented: bool


def library_files(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    """Every library ``.py`` file under ``root``, sorted; the excluded folders are never entered."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(part in EXCLUDED or part.endswith(".egg-info") for part in rel.parts[:-1]):
            continue
        out.append(path)
    return out


def folder_of(rel: str) -> str:
    """The top-level folder a file belongs to; files at the package root are grouped as ``(root)``."""
    parts = rel.split("/")
    return parts[0] if len(parts) > 1 else ROOT_FOLDER


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, looking inside ``if``/``try`` blocks (definitions made conditionally)."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _top_level(block)
        else:
            yield node


def _skipped_method(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A property's setter/deleter, or an ``@overload`` declaration: not a definition of its own."""
    for deco in node.decorator_list:
        if isinstance(deco, ast.Attribute) and deco.attr in ("setter", "deleter"):
            return True
        if isinstance(deco, ast.Name) and deco.id == "overload":
            return True
        if isinstance(deco, ast.Attribute) and deco.attr == "overload":
            return True
    return False


def definitions(path: pathlib.Path, root: pathlib.Path = ROOT) -> list[Definition]:
    """The public definitions of one file, each with whether it has a docstring."""
    rel = path.relative_to(root).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
    out = []
    funcs = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in _top_level(tree.body):
        if isinstance(node, funcs) and not node.name.startswith("_") and not _skipped_method(node):
            out.append(Definition(rel, node.lineno, node.name, "function", ast.get_docstring(node) is not None))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            out.append(Definition(rel, node.lineno, node.name, "class", ast.get_docstring(node) is not None))
            for item in node.body:
                if isinstance(item, funcs) and not item.name.startswith("_") and not _skipped_method(item):
                    out.append(Definition(rel, item.lineno, f"{node.name}.{item.name}", "method",
                                          ast.get_docstring(item) is not None))
    return out


def count(folders: list[str] | None = None, root: pathlib.Path = ROOT) -> dict[str, list[Definition]]:
    """Public definitions per top-level folder (or per root file named in ``folders``)."""
    table: dict[str, list[Definition]] = {}
    for path in library_files(root):
        rel = path.relative_to(root).as_posix()
        folder = folder_of(rel)
        if folders and folder not in folders and rel not in folders:
            continue
        table.setdefault(rel if folders and rel in folders else folder, []).extend(definitions(path, root))
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", help="top-level folders or root files (default: all)")
    parser.add_argument("--missing", action="store_true", help="list every public definition without a docstring")
    args = parser.parse_args(argv)
    table = count(args.folders or None)
    width = max([len(k) for k in table] + [len("total")])
    print(f"{'folder':<{width}}  {'public':>6}  {'documented':>10}  {'share':>6}")
    total = documented = 0
    for folder in sorted(table):
        defs = table[folder]
        n, d = len(defs), sum(x.documented for x in defs)
        total, documented = total + n, documented + d
        print(f"{folder:<{width}}  {n:>6}  {d:>10}  {d / n if n else 1:>6.0%}")
    print(f"{'total':<{width}}  {total:>6}  {documented:>10}  {documented / total if total else 1:>6.0%}")
    if args.missing:
        for folder in sorted(table):
            for x in table[folder]:
                if not x.documented:
                    print(f"{x.path}:{x.line}: {x.kind} {x.qualname}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
