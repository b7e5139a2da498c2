"""Do released answer cells name their answers and start from the sentinel `...` (grading/scoring/answer_stubs.py)?"""

from __future__ import annotations

import json

import nbformat
import pytest

from grading_helpers import ROOT

from parallel_budget.grading.scoring.answer_stubs import AnswerStubs, answer_names, assigned, release_preprocessors

COMMENT = "# 在这里写你的答案"


def _cell(kind, source, **nbgrader):
    meta = {"nbgrader": dict({"grade": False, "solution": False, "locked": False, "schema_version": 3,
                              "grade_id": f"c{len(source)}"}, **nbgrader)}
    if kind == "code":
        return nbformat.v4.new_code_cell(source, metadata=meta)
    return nbformat.v4.new_markdown_cell(source, metadata=meta)


def _stubbed(*cells) -> list[str]:
    nb = nbformat.v4.new_notebook(cells=list(cells))
    pre = AnswerStubs(code_stub={"python": COMMENT})
    out, _ = pre.preprocess(nb, {})
    return [c.source for c in out.cells]


def test_a_region_becomes_one_sentinel_line_per_answer():
    """Does a solution region become the comment and `name = ...` for each answer it assigns (not its helpers),
    a function body `return ...`, a markdown region the text stub, and code outside a region stay?"""
    answer = _cell("code", "x_ms = 0\n### BEGIN SOLUTION\ncomm_ms = 2\nx_ms = comm_ms * 3\nk, y = 1, 2\n### END SOLUTION",
                   solution=True, grade_id="answer")
    func = _cell("code", "def f(a):\n    \"\"\"doc\"\"\"\n    ### BEGIN SOLUTION\n    return a\n    ### END SOLUTION",
                 solution=True, grade_id="answer_f")
    test = _cell("code", '"""检查。"""\nchecks.visible("x_ms", x_ms)\nchecks.exact("y", y, 2)\nchecks.exact("f", f(1), 1)',
                 grade=True, grade_id="test", points=1)
    text = _cell("markdown", "=== BEGIN MARK SCHEME ===\nx\n=== END MARK SCHEME ===", solution=True, grade_id="m")
    out = _stubbed(answer, func, test, text)
    assert out[0] == f"x_ms = 0\n{COMMENT}\nx_ms = ...\ny = ..."
    assert out[1] == f"def f(a):\n    \"\"\"doc\"\"\"\n    {COMMENT}\n    return ..."
    assert out[2] == test.source
    compile(out[0], "answer", "exec") and compile(out[1], "answer_f", "exec")


def test_helpers_read_answers_and_assignments():
    """Are the answer names what the test cells read, and `assigned` the region's top-level targets in order?"""
    nb = nbformat.v4.new_notebook(cells=[_cell("code", 'checks.value("a_GB", a_GB, e)\ngood = 1\nchecks.exact("g", f(good), 1)',
                                               grade=True, grade_id="t", points=1)])
    assert answer_names(nb) == {"a_GB", "e", "f"}
    assert assigned("b = 1\na, (c, b) = 1, (2, 3)\nd: int = 4\nif x:\n    z = 1") == ["b", "a", "c", "d"]
    assert assigned("def (") == []


def test_the_course_release_uses_answer_stubs_in_place_of_clear_solutions():
    """Is AnswerStubs nbgrader's ClearSolutions' only replacement in the configured release preprocessors?"""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.preprocessors import ClearSolutions

    from parallel_budget.grading.course import Course, load_config

    stock = GenerateAssignment.class_traits()["preprocessors"].default()
    assert [AnswerStubs if p is ClearSolutions else p for p in stock] == release_preprocessors()
    assert load_config(Course(ROOT)).GenerateAssignment.preprocessors == release_preprocessors()


@pytest.mark.parametrize("path", sorted((ROOT / "exercises" / "lesson").glob("*.ipynb")), ids=lambda p: p.stem)
def test_every_released_answer_cell_starts_from_the_sentinel(path):
    """Does every released code answer cell assign `...` to exactly the answers its source region assigns, raise nothing,
    and name no answer of another cell?"""
    released = json.loads(path.read_text(encoding="utf-8"))
    source = nbformat.read(str(ROOT / "solutions" / "lesson" / path.name), as_version=4)
    answers = answer_names(source)
    assert "NotImplementedError" not in path.read_text(encoding="utf-8")
    solutions = {c.metadata.nbgrader.grade_id: c.source for c in source.cells
                 if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"}
    seen = set()
    for cell in released["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid not in solutions:
            continue
        text = "".join(cell["source"])
        region = solutions[gid].split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
        mine = [n for n in assigned(region) if n in answers]
        if mine:
            assert [line for line in text.splitlines() if line.endswith(" = ...")] == [f"{n} = ..." for n in mine], gid
        else:
            assert text.rstrip().endswith("return ..."), gid
        assert not seen & set(mine), gid
        seen |= set(mine)
