"""Is the package laid out so a newcomer can read it: no import circles, floors that import only downwards
(model < answers < questions < book/grading/labs), grading's stages along its flow, no module (nor in-page
script) over MAX_LINES lines?"""

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


# The package's floors, bottom up: a module imports only from its own room and the floors below.
# Rooms on one floor (book, grading, labs) never import each other.
LAYERS = {
    "parallel_budget.model": 0,
    "parallel_budget.pidfd": 0,
    "parallel_budget.answers": 1,
    "parallel_budget.questions": 2,
    "parallel_budget.book": 3,
    "parallel_budget.grading": 3,
    "parallel_budget.labs": 3,
}
# Grading's stages in the order of its flow; a stage imports only from stages before it and from
# the base modules (course, bounds), which import no stage.  The top (runner, release, the
# command) may import any stage.
GRADING = "parallel_budget.grading"
STAGES = ["intake", "sandbox", "scoring", "results", "fleet"]
GRADING_BASE = {f"{GRADING}.course", f"{GRADING}.bounds", GRADING}


def _room(module: str, rooms) -> str | None:
    return next((r for r in rooms if module == r or module.startswith(r + ".")), None)


def _layer_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for m, targets in graph.items():
        here = _room(m, LAYERS)
        if here is None:  # parallel_budget/__init__.py: the package's face, above everything
            continue
        for t in targets:
            there = _room(t, LAYERS)
            if there is not None and there != here and LAYERS[there] >= LAYERS[here]:
                bad.append(f"{m} -> {t}")
    return sorted(bad)


def _stage(module: str) -> int:
    """0 for grading's base modules, 1..5 for the stages, 6 for the top (runner, release, __main__)."""
    if module in GRADING_BASE:
        return 0
    rest = module[len(GRADING) + 1:].split(".")[0]
    return STAGES.index(rest) + 1 if rest in STAGES else len(STAGES) + 1


def _stage_violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for m, targets in graph.items():
        if not m.startswith(GRADING):
            continue
        for t in targets:
            if t.startswith(GRADING + ".") and t not in (GRADING,) and _stage(t) > _stage(m):
                if t == m.rpartition(".")[0]:  # a stage's own package face
                    continue
                bad.append(f"{m} -> {t}")
    return sorted(bad)


def test_every_room_imports_only_from_the_floors_below():
    """model < answers < questions < book/grading/labs: does any module import against that order?"""
    graph = _graph()
    assert {_room(m, LAYERS) for m in graph} >= set(LAYERS)
    assert _layer_violations(graph) == []


def test_grading_stages_import_only_along_the_flow():
    """intake < sandbox < scoring < results < fleet < runner: does any stage import a later one?"""
    graph = _graph()
    assert {_stage(m) for m in graph if m.startswith(GRADING)} == set(range(len(STAGES) + 2))
    assert _stage_violations(graph) == []


def test_the_labs_engine_never_imports_a_lab():
    """Does labs/engine (the machinery) stay free of the twelve labs above it (they are run by name)?"""
    graph = _graph()
    labs = {m for m in graph if m.startswith("parallel_budget.labs.") and not m.startswith("parallel_budget.labs.engine")}
    assert len(labs) >= 12
    for m, targets in graph.items():
        if m.startswith("parallel_budget.labs.engine"):
            assert not targets & labs, f"{m} imports {sorted(targets & labs)}"


def test_the_order_checks_find_an_import_against_the_order():
    """Would the two order checks above fail on a real backward import?"""
    assert _layer_violations({"parallel_budget.answers.checks": {"parallel_budget.questions.core"}}) == [
        "parallel_budget.answers.checks -> parallel_budget.questions.core"]
    assert _layer_violations({"parallel_budget.book.x": {"parallel_budget.grading.runner"}}) != []
    assert _layer_violations({"parallel_budget.questions.core": {"parallel_budget.answers.checks"}}) == []
    assert _stage_violations({f"{GRADING}.intake.collect": {f"{GRADING}.fleet.shard"}}) != []
    assert _stage_violations({f"{GRADING}.course": {f"{GRADING}.intake.collect"}}) != []
    assert _stage_violations({f"{GRADING}.fleet.shard": {f"{GRADING}.results.feedback", f"{GRADING}.course"}}) == []


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
