"""Per-student numbers on the grading side: the setting, the release's extra cells, expected values, copying.

**The setting.**  ``c.Variants.enabled = True`` in ``autograde/nbgrader_config.py``
switches a release to per-student numbers (default ``False``: everyone gets the
book's numbers and the release is byte-identical to one without this module).
The rule that turns a student id into numbers is in
:mod:`parallel_budget.questions.variants`.

**Release** (:func:`add_variant_cells`): after the introduction, an editable
"你的编号" cell (``MY_STUDENT_ID = ""``; on JupyterHub the login name
``JUPYTERHUB_USER`` is used); after every prompt of a varied part, a read-only
"你的数字" cell printing that part's questions with the student's numbers; the
practice self-check of a varied test cell checks the student's own variant.
None of these cells carries nbgrader metadata: test cells, points and grading
are those of the book release.

**Grading** (:class:`Swap`): a test cell's checks still run in the grader
(:mod:`.trusted`), but the expected value of a varied test cell is the
student's own, computed from nbgrader's student id, i.e. the name of the
submission folder ``submitted/<student_id>/<assignment>/``; nothing inside the
notebook takes part.  An answer that is wrong for the student, that no named
mistake of their own variant explains, and that is right for another student's
variant (a classmate graded in the same run, or any student in the gradebook)
is recorded as ``possible_copying`` with both ids; it still scores 0.  An
answer that is the book's right answer for the question (no variant's right
answer is: :func:`.variants.near_book`) and that no named slip of the
student's own numbers explains is recorded as ``book_answer`` ("与书中公开答案一致":
copied from the public ``solutions/``, or worked with the prose's numbers
instead of the student's); it scores 0 and the feedback says it is the book's
answer.  Integer answers (a rank, a ZeRO stage) take a handful of values and
are compared with neither.
"""

from __future__ import annotations

import dataclasses
import json

from ...questions import variants
from ...answers.read import AnswerError, read_answer
from ...answers.diagnose import diagnose

ID_TAG, SHOW_TAG = "variant-id", "variant-show"
RECORDED: list = []  # findings of the Swaps of this grading process (read and cleared by .shard)
TRICK = "possible_copying"
BOOK_TRICK = "book_answer"
NOTE = (
    "**每位同学的数字不同**。这一版作业里，每道计算题的数字由你的学生编号按固定规则算出，评分也按这些数字。"
    "先运行下面的“你的编号”单元：在 JupyterHub 上它自动读取你的登录名；在自己的电脑上，请把你提交作业用的编号"
    "填进 `MY_STUDENT_ID` 的引号里再运行。之后每个部分的题目下面都有一个“你的数字”单元，运行它就能看到你的数字；"
    "正文里写的数字是书中的例子。练习自测也按你的数字检查。"
)


def enabled(cfg) -> bool:
    """``c.Variants.enabled`` of the course configuration (default False: the book's numbers)."""
    return bool(cfg.get("Variants", {}).get("enabled", False))


def course_id(cfg) -> str:
    return str(cfg.get("CourseDirectory", {}).get("course_id", "") or "")


def kernel_code(student: str) -> str:
    """What the grader runs first in a grading kernel: the notebook's own cells then show this student's numbers."""
    return f"__import__('parallel_budget.questions.variants', fromlist=['graded_as']).graded_as({student!r})"


def _cell(kind: str, cid: str, source: str, tag: str, editable: bool) -> dict:
    cell = {"cell_type": kind, "id": cid[:64], "metadata": {"tags": [tag], "editable": editable, "deletable": False},
            "source": source}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def id_source(course: str, assignment: str, notebook: str) -> str:
    return ("# 你的编号（不计分）：本作业的数字因人而异，由学生编号按固定规则算出；评分按你提交时的编号。\n"
            "# 在 JupyterHub 上不用改（自动读取登录名）。在自己的电脑上：把编号写进引号里，例如 MY_STUDENT_ID = \"s001\"，再运行。\n"
            "MY_STUDENT_ID = \"\"\n"
            "from parallel_budget.questions import variants\n"
            f"variants.use(MY_STUDENT_ID, course={course!r}, assignment={assignment!r}, notebook={notebook!r})")


def show_source(prompt_cell: str) -> str:
    return ("# 你的数字（只读、不计分）：运行本单元，显示本部分用你的学生编号算出的数字。\n"
            "from parallel_budget.questions import variants\n"
            f"variants.show({prompt_cell!r})")


def practice_source(practice: str, test_cell: str, name: str) -> str:
    """A practice cell of a varied test cell: its header comment, then the check of the student's variant."""
    head = "".join(line + "\n" for line in practice.splitlines() if line.startswith("#"))
    return (head + "from parallel_budget.questions import variants\n"
            f"with checks.practice({name!r}):\n    variants.check({test_cell!r}, {name})")


def add_variant_cells(released: dict, course: str, assignment: str, notebook: str) -> dict:
    """A released notebook made per-student (see the module docstring); unchanged if nothing in it varies."""
    scenarios = variants.SCENARIOS.get(notebook, ())
    if not scenarios:
        return released
    bank = variants._bank()
    prompts = {gid for s in scenarios for gid, _ in s.parts}
    has_note = any(c.get("id") == "practice-note" for c in released["cells"])
    cells, placed = [], False
    for cell in released["cells"]:
        gid = (cell.get("metadata", {}).get("nbgrader", {}) or {}).get("grade_id", "")
        cid = str(cell.get("id", ""))
        tested = cid[len("practice-"):] if cid.startswith("practice-") else ""
        if tested and (qid := variants.question_of(notebook, tested)):
            cell = dict(cell, source=practice_source(_text(cell["source"]), tested, bank[qid].answer))
        cells.append(cell)
        if gid in prompts:
            cells.append(_cell("code", f"variant-{gid}", show_source(gid), SHOW_TAG, False))
        if not placed and (cid == "practice-note" if has_note else gid.startswith("intro_")):
            cells.append(_cell("markdown", "variant-note", NOTE, ID_TAG, False))
            cells.append(_cell("code", "variant-id", id_source(course, assignment, notebook), ID_TAG, True))
            placed = True
    return dict(released, cells=cells)


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else source


def _matches(expected, answer) -> bool:
    if hasattr(expected.value, "units") and (not hasattr(answer, "units")
                                             or answer.dimensionality != expected.value.dimensionality):
        return False
    return expected.matches(answer)


class Swap:
    """``checks.swapped`` hook of one varied test cell: the student's expected values; copying evidence."""

    def __init__(self, course: str, assignment: str, notebook: str, student: str, test_cell: str,
                 peers=(), found: list | None = None):
        self.where = (course, assignment, notebook)
        self.student, self.test_cell = student, test_cell
        self.qid = variants.question_of(notebook, test_cell)
        self.q = variants._bank()[self.qid] if self.qid else None
        self.peers = [p for p in peers if p != student]
        self.found = found if found is not None else []

    def _mine(self, student: str):
        return variants.expected(*self.where, student, self.qid)

    def value(self, name, given, expected, kind):
        if self.q is None or name != self.q.answer:
            return expected
        mine = self._mine(self.student)
        self._compare(name, given, mine, kind)
        return mine

    def exact(self, name, given, right, hint):
        if self.q is None or name != self.q.answer:
            return right, hint
        return self._mine(self.student), self.q.hint or hint

    def _compare(self, name, given, mine, kind):
        try:
            answer = read_answer(name, given, kind)
        except AnswerError:
            return
        own = dataclasses.replace(mine, mistakes=tuple(m for m in mine.mistakes if m[0] != "book_numbers"))
        if _matches(own, answer) or diagnose(own, answer):
            return  # right, or a named slip of the student's own numbers explains it
        where = {"notebook": self.where[2], "cell": self.test_cell, "answer": name}
        if variants.is_book_answer(self.qid, answer):
            self.found.append(dict(where, trick=BOOK_TRICK))
            return
        same = sorted(p for p in self.peers if _matches(self._mine(p), answer))
        if same:
            self.found.append(dict(where, peers=same))


def trick_of(item: dict) -> str:
    """The integrity trick of one recorded finding: ``book_answer`` or ``possible_copying``."""
    return item.get("trick", TRICK)


def finding_detail(item: dict) -> str:
    """The integrity report's evidence of one finding: the answer, and the other students or the book."""
    if trick_of(item) == BOOK_TRICK:
        return f"{item['answer']} 对自己的数字不对，等于书中数字的答案（solutions/ 里公开的答案）"
    peers = item["peers"]
    shown = "、".join(peers[:5]) + (f" 等 {len(peers)} 人" if len(peers) > 5 else "")
    return f"{item['answer']} 对自己的数字不对，却等于 {shown} 的数字的正确答案"


def dumps(found: list) -> str:
    return json.dumps(found, ensure_ascii=False)


def numbers_text(course, students, assignment=None) -> str:
    """``python -m parallel_budget.grading numbers ID...``: each student's numbers, part by part."""
    from ..course import CourseError, load_config

    cfg = load_config(course)
    assignments = course.assignments()
    assignment = assignment or (assignments[0] if len(assignments) == 1 else None)
    if assignment not in assignments:
        raise CourseError(f"请用 --assignment 指定作业，可用：{'、'.join(assignments)}")
    state = "已打开" if enabled(cfg) else "没有打开（c.Variants.enabled = False，发布和评分都用书中的数字）"
    lines = [f"个人数字：{state}；课程 {course_id(cfg)!r}，作业 {assignment}。"]
    for student in students:
        if not variants._ID.match(student):
            raise CourseError(f"学生编号 {student!r} 不合规：不能含空格、/ 或 \\。")
        lines.append(f"\n== {student} ==")
        for nb in course.notebooks(assignment):
            for scenario in variants.SCENARIOS.get(nb, ()):
                for gid, _ in scenario.parts:
                    text = variants.shown(variants.prompts(course_id(cfg), assignment, nb, student, gid))
                    lines.append(f"[{nb} / {gid}]\n{text}")
    return "\n".join(lines)
