"""Is the package laid out so a newcomer can read it: no import circles, the model below everything, no module
(nor in-page script) over MAX_LINES lines?"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "parallel_budget"
CALC = PACKAGE.parent / "book" / "_static" / "calc"
MAX_LINES = 400  # a module per concept: one that grows past this is split along a seam


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every parallel_budget module this file imports, at any depth (lazy imports count)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("parallel_budget"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("parallel_budget"):
                continue
            found.add(target)
            for alias in node.names:  # `from .book import figures` imports a module
                if (PACKAGE.parent / (target.replace(".", "/") + f"/{alias.name}.py")).exists():
                    found.add(f"{target}.{alias.name}")
    found.discard(name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {m: {t for t in _imports(p) if t in modules} for m, p in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str):
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            # importing a package runs its __init__, but a submodule importing its own
            # package's __init__ for a sibling is not a circle of modules: skip parents.
            if m.startswith(t + "."):
                continue
            if state.get(t) == 1:
                return stack[stack.index(t):] + [t]
            if t not in state and (found := visit(t)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_no_import_circles():
    """Does any module of the package import itself through others (lazy imports included)?"""
    cycle = _cycle(_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_the_model_imports_nothing_but_itself():
    """Does parallel_budget.model stay free of the book, the grader and the labs?"""
    graph = _graph()
    for m, targets in graph.items():
        if m.startswith("parallel_budget.model"):
            outside = {t for t in targets if not t.startswith("parallel_budget.model")}
            assert not outside, f"{m} imports {sorted(outside)}"


def test_book_side_code_never_holds_the_grader_or_labs():
    """Does parallel_budget.book depend only on the model (and itself)?"""
    for m, targets in _graph().items():
        if m.startswith("parallel_budget.book"):
            bad = {t for t in targets if t.startswith(("parallel_budget.grading", "parallel_budget.labs"))}
            assert not bad, f"{m} imports {sorted(bad)}"


def test_no_module_is_over_max_lines():
    """Is every module of the package and every in-page script (book/_static/calc/*.js) at most 400 lines?"""
    files = sorted(PACKAGE.rglob("*.py")) + sorted(CALC.glob("*.js"))
    assert any(p.name == "plan.js" for p in files) and len(files) > 100
    lines = {str(p.relative_to(PACKAGE.parent)): len(p.read_text(encoding="utf-8").splitlines()) for p in files}
    assert {p: n for p, n in lines.items() if n > MAX_LINES} == {}


def test_the_checker_finds_a_circle():
    """Would the circle check above fail on a real circle (a -> b -> a)?"""
    assert _cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
