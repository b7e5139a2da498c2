"""Release: ``solutions/<assignment>`` -> ``exercises/<assignment>`` with nbgrader, and a staleness check.

The release is generated with a throw-away gradebook, so releasing never
touches the course gradebook.  :func:`stale_notebooks` generates into a
temporary folder and compares notebook by notebook with the committed
``exercises/``.

**Two editions** (:func:`edition`), chosen by ``c.PracticeCheck.enabled`` in
``autograde/nbgrader_config.py``; the release command says which one it wrote.

* *Self-study* (``True``, the default; the committed ``exercises/`` is this
  edition): every test cell that has hidden tests is followed by a read-only,
  unscored *practice* cell made from those hidden tests: ``with
  checks.practice(...):`` and the very calls the grader runs, so the student
  gets the grader's own feedback and the hidden tests stay the one source of
  the expected values.  Its source is folded (``jupyter.source_hidden``), so its
  styled ✔/✘ line sits right under the test cell's output.  A markdown cell
  after the notebook's introduction says what the practice cells are.  The
  practice cells hold the expected answers (``checks.exact("fix_choice",
  fix_choice, "C", ...)``): this edition suits self-study, not an exam.
* *Graded* (``False``): nothing is added, the release is exactly what nbgrader's
  ``generate_assignment`` makes; :func:`expected_answers` is empty for it
  (no practice cell, no line of a hidden test in any cell), and
  :func:`generate` refuses to write a graded release that is not.

Test cells are identical in both editions and practice cells carry no nbgrader
metadata, so grading either edition works the same way: nbgrader restores the
test cells from the gradebook, and a practice cell is an ordinary cell.

**Per-student numbers.**  With ``c.Variants.enabled = True`` the release also
gets the cells of :func:`.student_numbers.add_variant_cells` (the student's id, their
numbers under each varied prompt, practice checks of their own variant).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import nbformat

from .intake import student_numbers
from .course import Course, ask_schema_head_once, load_config

PRACTICE_TAG = "practice-check"
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
PRACTICE_HEAD = (
    "# 练习自测（不计分）：运行评分时的同一组检查，显示“✔”或“✘”和可能的错误；还没作答时显示“还没有作答”。\n"
    "# 它从不中断 Run All。只有自学版有这个单元，正式评分版没有。\n"
)
EDITIONS = {
    "practice": "自学版：每个计分单元后有练习自测（含评分时的期望答案），适合自学，不适合正式考核",
    "graded": "正式评分版：没有练习自测，任何单元里都没有期望答案",
}
PRACTICE_NOTE = (
    "**两种检查（自学版）**。每个计分单元里的**可见测试**只检查类型和单位，不看数值；紧跟在它下面的**练习自测**单元"
    "（只读、不计分，源码已折叠）运行评分时的同一组数值检查，显示一行“✔”或“✘”：数值对不对，错了写出最可能的错误。"
    "练习自测只给你自己看，不影响分数；正式评分版没有它。"
)


def practice_enabled(cfg) -> bool:
    """``c.PracticeCheck.enabled`` of the course configuration (default True)."""
    section = cfg.get("PracticeCheck", {})
    return bool(section.get("enabled", True))


def edition(cfg) -> str:
    """``"practice"`` (self-study, the committed ``exercises/``) or ``"graded"``: what a release writes."""
    return "practice" if practice_enabled(cfg) else "graded"


def edition_text(cfg) -> str:
    """The edition in the instructor's words, for the release command's output."""
    from .intake import student_numbers

    numbers = "每位学生的数字不同（c.Variants.enabled）" if student_numbers.enabled(cfg) else "所有人用书中的数字"
    return f"{EDITIONS[edition(cfg)]}；{numbers}"


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
    # checks and diagnose come from the notebook's read-only setup cell (an import of the answers or
    # grading package in an ordinary cell is what the integrity scan reports as tampering)
    imports = [line for line in visible.splitlines() if line.startswith(("from ", "import "))
               and "parallel_budget.answers" not in line and "parallel_budget.grading" not in line]
    match = re.search(r"checks\.\w+\(\s*\"([^\"]+)\"", hidden)
    name = match.group(1) if match else "答案"
    body = "\n".join("    " + line if line.strip() else "" for line in hidden.splitlines())
    return PRACTICE_HEAD + "".join(line + "\n" for line in imports) + f"with checks.practice({name!r}):\n" + body


def _practice_meta() -> dict:
    return {"tags": [PRACTICE_TAG], "editable": False, "deletable": False}


def _practice_cell(gid: str, source: str) -> dict:
    # the source is folded in JupyterLab: the ✔/✘ line shows right under the test cell's output
    meta = dict(_practice_meta(), jupyter={"source_hidden": True})
    return {"cell_type": "code", "id": f"practice-{gid}"[:64], "execution_count": None, "outputs": [],
            "source": source, "metadata": meta}


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
    """Run nbgrader's generate_assignment for ``assignment`` into ``dest/<assignment>``, in the configured edition.

    Everything is made in a temporary folder first: a graded release that would show an expected
    answer raises ``RuntimeError`` and leaves ``dest`` as it was.
    """
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
        ask_schema_head_once()
        app.start()
        practice, variant = practice_enabled(cfg), student_numbers.enabled(cfg)
        for path in sorted((out / assignment).glob("*.ipynb")):
            released = json.loads(path.read_text(encoding="utf-8"))
            source = json.loads((course.source / assignment / path.name).read_text(encoding="utf-8"))
            if practice:
                released = add_practice_checks(released, source)
            if variant:  # per-student numbers (c.Variants.enabled, parallel_budget/grading/intake/student_numbers.py)
                released = student_numbers.add_variant_cells(released, student_numbers.course_id(cfg), assignment, path.stem)
            if not practice and (leaks := expected_answers(released, source)):
                raise RuntimeError(f"{path.name} 的正式评分版里有期望答案（{leaks[0]}），没有发布")
            if practice or variant:
                nbformat.write(nbformat.from_dict(released), str(path))
        target = dest / assignment
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(out / assignment, target)
    return target


def expected_answers(released: dict, source: dict) -> list[str]:
    """What in ``released`` gives an answer away: practice cells, and any line of a hidden test of ``source``."""
    hidden = set()
    for cell in source["cells"]:
        text = _text(cell["source"])
        if cell["cell_type"] == "code" and HIDDEN_BEGIN in text:
            block = text.split(HIDDEN_BEGIN, 1)[1].split(HIDDEN_END, 1)[0]
            hidden.update(line.strip() for line in block.splitlines()
                          if line.strip() and not line.strip().startswith(("#", "from ", "import ")))
    found = []
    for cell in released["cells"]:
        text = _text(cell["source"])
        where = cell.get("id") or _meta(cell).get("grade_id") or "?"
        if PRACTICE_TAG in cell.get("metadata", {}).get("tags", []):
            found.append(f"练习自测单元 {where}")
        found += [f"单元 {where}：{line.strip()}" for line in text.splitlines() if line.strip() in hidden]
    return found


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
