"""Release: ``solutions/<assignment>`` -> ``exercises/<assignment>`` with nbgrader, and a staleness check.

The release is generated with a throw-away gradebook, so releasing never
touches the course gradebook.  :func:`stale_notebooks` generates into a
temporary folder and compares notebook by notebook with the committed
``exercises/``.

**Practice self-checks.**  With ``c.PracticeCheck.enabled = True`` (the
default, set in ``autograde/nbgrader_config.py``) every test cell that has
hidden tests is followed in the release by a read-only, unscored *practice*
cell made from those hidden tests: ``with checks.practice(...):`` and the very
calls the grader runs, so the student gets the grader's own feedback and the
hidden tests stay the one source of the expected values.  A markdown cell
after the notebook's introduction says what the practice cells are.  With
``enabled = False`` nothing is added: the release is exactly what nbgrader's
``generate_assignment`` makes (a graded release without value feedback).
Test cells are identical in both versions and practice cells carry no nbgrader
metadata, so grading either version works the same way: nbgrader restores the
test cells from the gradebook, and a practice cell is an ordinary cell.

**Per-student numbers.**  With ``c.Variants.enabled = True`` the release also
gets the cells of :func:`.personal.add_variant_cells` (the student's id, their
numbers under each varied prompt, practice checks of their own variant).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import nbformat

from . import personal
from .course import Course, load_config

PRACTICE_TAG = "practice-check"
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
PRACTICE_HEAD = (
    "# 练习自测（不计分）：运行评分时的同一组检查，打印“✔”或“✘”和可能的错误，不会中断 Run All。\n"
    "# 正式评分版不含这个单元（教师发布时可关闭）。\n"
)
PRACTICE_NOTE = (
    "**两种检查**。每个计分单元里的**可见测试**只检查类型和单位，不看数值；它后面的**练习自测**单元"
    "（只读、不计分）运行评分时的同一组数值检查，告诉你数值对不对，错了会写出最可能的错误。"
    "练习自测只给你自己看，不影响分数。"
)


def practice_enabled(cfg) -> bool:
    """``c.PracticeCheck.enabled`` of the course configuration (default True)."""
    section = cfg.get("PracticeCheck", {})
    return bool(section.get("enabled", True))


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else source


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def practice_source(test_source: str) -> str | None:
    """The practice cell of one test cell: its imports and its hidden tests under ``checks.practice``."""
    if HIDDEN_BEGIN not in test_source:
        return None
    visible, rest = test_source.split(HIDDEN_BEGIN, 1)
    hidden = rest.split(HIDDEN_END, 1)[0].strip("\n")
    # checks and diagnose come from the notebook's read-only setup cell (an import of the grading
    # package in an ordinary cell is what the integrity scan reports as tampering)
    imports = [line for line in visible.splitlines()
               if line.startswith(("from ", "import ")) and "parallel_budget.grading" not in line]
    match = re.search(r"checks\.\w+\(\s*\"([^\"]+)\"", hidden)
    name = match.group(1) if match else "答案"
    body = "\n".join("    " + line if line.strip() else "" for line in hidden.splitlines())
    return PRACTICE_HEAD + "".join(line + "\n" for line in imports) + f"with checks.practice({name!r}):\n" + body


def _practice_meta() -> dict:
    return {"tags": [PRACTICE_TAG], "editable": False, "deletable": False}


def _practice_cell(gid: str, source: str) -> dict:
    return {"cell_type": "code", "id": f"practice-{gid}"[:64], "execution_count": None, "outputs": [],
            "source": source, "metadata": _practice_meta()}


def add_practice_checks(released: dict, source: dict) -> dict:
    """``released`` with a practice cell after each test cell that has hidden tests in ``source``."""
    tests = {}
    for cell in source["cells"]:
        m = _meta(cell)
        if m.get("grade") and not m.get("solution") and cell["cell_type"] == "code":
            tests[m["grade_id"]] = practice_source(_text(cell["source"]))
    cells = []
    for cell in released["cells"]:
        cells.append(cell)
        gid = _meta(cell).get("grade_id", "")
        if tests.get(gid):
            cells.append(_practice_cell(gid, tests[gid]))
        if gid.startswith("intro_"):
            cells.append({"cell_type": "markdown", "id": "practice-note", "source": PRACTICE_NOTE,
                          "metadata": _practice_meta()})
    return dict(released, cells=cells)


def generate(course: Course, assignment: str, dest: Path) -> Path:
    """Run nbgrader's generate_assignment for ``assignment`` into ``dest/<assignment>``."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory

    with tempfile.TemporaryDirectory(prefix="pb-release-") as tmp:
        cfg = load_config(course)
        cfg.CourseDirectory.db_url = "sqlite:///" + str(Path(tmp) / "gradebook.db")
        out = Path(tmp) / "release"
        cfg.CourseDirectory.release_directory = str(out)
        coursedir = CourseDirectory(config=cfg)
        coursedir.assignment_id = assignment
        app = GenerateAssignment(coursedir=coursedir, config=cfg)
        app.force = True
        app.start()
        target = dest / assignment
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(out / assignment, target)
        practice, variant = practice_enabled(cfg), personal.enabled(cfg)
        if practice or variant:
            for path in sorted(target.glob("*.ipynb")):
                released = json.loads(path.read_text(encoding="utf-8"))
                source = json.loads((course.source / assignment / path.name).read_text(encoding="utf-8"))
                if practice:
                    released = add_practice_checks(released, source)
                if variant:  # per-student numbers (c.Variants.enabled, parallel_budget/grading/personal.py)
                    released = personal.add_variant_cells(released, personal.course_id(cfg), assignment, path.stem)
                nbformat.write(nbformat.from_dict(released), str(path))
    return target


def _canonical(path: Path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    return json.dumps(nb, sort_keys=True, ensure_ascii=False)


def stale_notebooks(course: Course, assignment: str) -> list[str]:
    """Names of released notebooks that differ from a fresh generation (missing or extra ones too)."""
    with tempfile.TemporaryDirectory(prefix="pb-check-") as tmp:
        fresh = generate(course, assignment, Path(tmp))
        committed = course.release / assignment
        names = {p.name for p in fresh.glob("*.ipynb")} | {p.name for p in committed.glob("*.ipynb")}
        stale = []
        for name in sorted(names):
            a, b = fresh / name, committed / name
            if not (a.exists() and b.exists()) or _canonical(a) != _canonical(b):
                stale.append(name)
        return stale
