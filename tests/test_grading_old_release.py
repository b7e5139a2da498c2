"""A notebook released before the answer readers moved (``parallel_budget.grading`` ->
``parallel_budget.answers``, December 2026) still grades, and still self-checks.

``tests/files/release-2026-12-07/`` is the release committed on 2026-12-07: its test and practice
cells say ``from parallel_budget.grading import checks, diagnose``.  A student who answered that
release with the solutions is graded by today's grader (whose gradebook holds today's test cells)
to the same full marks as a student of today's release, with no integrity finding; and the old
import line still gives the student's own kernel the real checkers.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from grading_helpers import FILES, ROOT, course_copy, flags, scores

from parallel_budget.grading.course import Course
from parallel_budget.grading.intake import synthetic
from parallel_budget.grading.runner import grade

pytestmark = pytest.mark.slow
OLD = FILES / "release-2026-12-07"


def test_the_fixture_is_the_release_before_the_move():
    """Does the stored release really import the checkers from their old place (else this file tests nothing)?"""
    names = sorted(p.name for p in OLD.glob("*.ipynb"))
    assert names == sorted(p.name for p in (ROOT / "exercises" / "lesson").glob("*.ipynb"))
    for path in OLD.glob("*.ipynb"):
        text = path.read_text(encoding="utf-8")
        assert "from parallel_budget.grading import checks" in text
        assert "parallel_budget.answers" not in text


def test_an_old_release_grades_to_the_same_marks_as_todays(tmp_path):
    """One student answers the old release, one today's, both with the solutions: same full marks, no flag?"""
    course = Course(course_copy(tmp_path / "course"))
    folder = tmp_path / "in"
    synthetic.write_student(folder, "old", "lesson", synthetic.submission(course, "lesson", release=OLD))
    synthetic.write_student(folder, "new", "lesson", synthetic.submission(course, "lesson"))
    grade(folder, root=course.root, jobs=2, timeout=20, quiet=True)
    sc = scores(course.gradebook)
    old = {k[1:]: v for k, v in sc.items() if k[0] == "old"}
    new = {k[1:]: v for k, v in sc.items() if k[0] == "new"}
    assert len(old) >= 20 and set(old) == set(new)
    assert old == new
    auto = {k: v for k, v in new.items() if k[1].startswith("test_")}  # the rest is marked by hand
    assert len(auto) >= 15 and all(score == mx for score, mx in auto.values()), auto
    assert flags(course.gradebook) == set()


def test_the_old_import_line_gives_the_real_checkers():
    """In a student's own kernel, does an old self-check cell get parallel_budget.answers' checkers?"""
    code = ("from parallel_budget.grading import checks, diagnose\n"
            "import parallel_budget.answers.checks as c, parallel_budget.answers.diagnose as d\n"
            "assert checks is c and diagnose is d\n"
            "import parallel_budget.grading as g\n"
            "try:\n    g.nothing\nexcept AttributeError as e:\n    print('refused', e)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "refused" in run.stdout
