"""Is the committed release in exercises/ what nbgrader generates from solutions/, and free of torch?"""

from __future__ import annotations

import json

import pytest

from grading_helpers import ROOT

from parallel_budget.grading.course import Course
from parallel_budget.grading.release import stale_notebooks

pytestmark = pytest.mark.slow


def test_exercises_are_not_stale():
    """Does a fresh generate_assignment reproduce exercises/ exactly?"""
    course = Course(ROOT)
    for assignment in course.assignments():
        assert stale_notebooks(course, assignment) == [], (
            "exercises/ is stale: run `python -m parallel_budget.grading release` and commit")


def test_graded_notebooks_do_not_import_torch_and_hide_solutions():
    """Do the released notebooks avoid torch and carry no solution or hidden test?"""
    for path in sorted((ROOT / "exercises").rglob("*.ipynb")):
        text = path.read_text(encoding="utf-8")
        assert "import torch" not in text and "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text, path
    for path in sorted((ROOT / "solutions").rglob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        tests = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade")
                 and c["cell_type"] == "code"]
        assert tests and all("".join(c["source"]).lstrip().startswith('"""检查') for c in tests), path
        visible_part = "".join(tests[0]["source"]).split("### BEGIN HIDDEN TESTS")[0]
        assert "checks." in visible_part, f"{path}: the first test cell must check something visibly"


def test_the_committed_exercises_are_the_self_study_edition():
    """Is the configured (and committed) edition the self-study one, named so, with the graded one one setting away?"""
    from parallel_budget.grading.__main__ import SWITCH
    from parallel_budget.grading.course import load_config
    from parallel_budget.grading.release import EDITIONS, edition, edition_text

    cfg = load_config(Course(ROOT))
    assert edition(cfg) == "practice" and edition_text(cfg).startswith(EDITIONS["practice"])
    assert "自学版" in edition_text(cfg) and "书中的数字" in edition_text(cfg)
    assert "c.PracticeCheck.enabled = False" in SWITCH["practice"] and "自学版" in SWITCH["graded"]
    cfg.PracticeCheck.enabled = False
    assert edition(cfg) == "graded" and edition_text(cfg).startswith("正式评分版")
    assert "The committed `exercises/` is the *self-study edition* (自学版)" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "仓库里提交的 `exercises/` 是**自学版**" in (ROOT / "autograde" / "README.md").read_text(encoding="utf-8")
