"""Which files of the package an executed page depends on (never-stale builds, issue 16).

Sphinx re-reads a page when a file noted with ``env.note_dependency`` is newer than
the page's last read, and myst-nb (``execute_notebooks: inline``) executes a page
when it reads it.  :func:`page_dependencies` gives those files for one page: the
modules its code imports from ``parallel_budget``, followed through the package's
own static imports.  It errs towards more: a module that imports by name at run
time (``importlib.import_module``, ``python -m``) brings its whole room (``labs/``, engine included),
and an import line it cannot parse brings the whole package.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

PACKAGE = "parallel_budget"
ROOT = Path(__file__).resolve().parents[1]  # the package directory the build imports
_IMPORT_LINE = re.compile(rf"^[ \t]*(?:from[ \t]+{PACKAGE}\b|import[ \t]+{PACKAGE}\b)[^\n]*$", re.M)
_DYNAMIC = re.compile(r"\bimport_module\b|__import__|[\"']-m[\"']")


def package_files(root: Path = ROOT) -> tuple[Path, ...]:
    """Every source file of the package (no caches, no compiled files)."""
    return tuple(sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                        and p.suffix not in (".pyc", ".pyo")))


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """The file of module ``parallel_budget.x.y`` (``x/y.py`` or ``x/y/__init__.py``), or None."""
    parts = name.split(".")[1:]
    base = root.joinpath(*parts)
    for candidate in (base.with_suffix(".py") if parts else None, base / "__init__.py"):
        if candidate is not None and candidate.is_file():
            return candidate
    return None


def module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = [PACKAGE, *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(tree: ast.AST, current: str | None = None, is_package: bool = False) -> set[str]:
    """Modules of the package an AST imports (``from a import b`` may name module ``a.b``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level and current:
                anchor = current.split(".") if is_package else current.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names.add(base)
            names |= {f"{base}.{a.name}" for a in node.names}
    return {n for n in names if n == PACKAGE or n.startswith(PACKAGE + ".")}


def with_parents(name: str) -> set[str]:
    """Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` too."""
    parts = name.split(".")
    return {".".join(parts[: i + 1]) for i in range(len(parts))}


@lru_cache(maxsize=None)
def _module_deps(path: Path, root: Path, mtime_ns: int) -> tuple[frozenset[str], frozenset[Path]]:
    """(modules a file imports, extra files it needs because it imports by name at run time)."""
    text = path.read_text(encoding="utf-8")
    name = module_name(path, root)
    tree = ast.parse(text)
    extra = frozenset()
    if _DYNAMIC.search(text):
        rel = path.relative_to(root).parts
        extra = frozenset(package_files(root / rel[0] if len(rel) > 1 else path.parent))
    return frozenset(imported_names(tree, name, path.name == "__init__.py")), extra


def closure(modules: set[str], root: Path = ROOT) -> set[Path]:
    """Files of the package needed to import ``modules``, following the package's imports."""
    todo = {p for m in modules for p in with_parents(m)}
    seen: set[str] = set()
    files: set[Path] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = module_file(name, root)
        if path is None:
            continue  # a name imported from a module, not a module
        files.add(path)
        imported, extra = _module_deps(path, root, path.stat().st_mtime_ns)
        files |= extra
        todo |= {p for m in imported for p in with_parents(m)} - seen
    return files


def page_dependencies(source: str, root: Path = ROOT) -> set[Path]:
    """Files of the package whose change must re-execute a page with this source text."""
    modules = set()
    for line in _IMPORT_LINE.findall(source):
        try:
            modules |= imported_names(ast.parse(line.strip()))
        except SyntaxError:
            return set(package_files(root))  # e.g. a parenthesised multi-line import: depend on everything
    return closure(modules, root) if modules else set()
