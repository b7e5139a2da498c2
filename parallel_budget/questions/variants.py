"""Per-student numbers: which of a notebook's questions vary, and each student's parameters.

**The rule.**  A notebook's varied questions come in *scenarios*
(:data:`SCENARIOS`): questions that the notebook asks about one and the same
set-up (NB02 parts C and D, NB03 all parts ...).  A student's parameters of a
scenario are::

    key  = "<course id>/<assignment>/<notebook>/<student id>/<question id of the scenario's first question>"
    seed = 1 + int.from_bytes(sha256(key as UTF-8)[:8], "big") % SEED_MAX      # 1 .. 999 999, never 0

and every question of the scenario draws its parameters with the bank's own
generator, ``Question.generate(seed)`` (mulberry32, :mod:`.core`).  A draw is
*rejected*, and the next seed ``seed % SEED_MAX + 1`` is used, until every
question of the scenario accepts its numbers, when

* the model refuses the numbers (none of today's bank does:
  ``tests/test_questions.py`` tries 3000 seeds of every question), or
* any of the scenario's expected answers is the book's (:func:`near_book`):
  within the question's tolerance of the book's answer to the same question
  (seed 0, the numbers the book and the committed ``solutions/`` print) or of
  one of the book's named slips (the book's bits-for-bytes value ...), or, for
  an integer answer, equal to the book's.  So the public answers never score
  on a varied cell, and a student's own right answer is never a book value.

A
parameter name that an earlier question of the scenario already drew keeps
that value, so the questions of one scenario agree (``act`` of NB03 part B is
one value for ``peak_GB`` and ``smallest_stage``).  The student id is the
nbgrader student id, exactly (case and all).  Seed 0 would be the book's
numbers and is never drawn; a seed is also what the site's practice boxes
take.  The same id gives the same numbers on any machine, always: nothing but
SHA-256 and the bank's generator is involved (never Python's ``hash()``).

Expected answers come from the bank (``Question.expected``), never from
numbers typed anywhere else.  A student's expected value of a numeric question
(:func:`expected`) also names the book's answer as a slip (``book_numbers``:
"this is the answer for the book's numbers"), so the practice self-check and
the feedback tell a student who answered with the prose's numbers what happened.  Questions not listed here (choices, the
checkpoint function, NB02 part A whose manual explanation compares with the
chapter's four-card example, NB05 part A's log) keep the book's numbers.

The notebook side (run in the student's kernel of a variant release):
:func:`use` (who is this student), :func:`show` (a part's numbers),
:func:`check` (the practice self-check against the student's own variant).
The grader never calls these: it computes each student's numbers from the
submission folder's id (:mod:`parallel_budget.grading.intake.student_numbers`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from dataclasses import dataclass
from functools import lru_cache

from .core import SEED_MAX, Question

ENV = "JUPYTERHUB_USER"


@dataclass(frozen=True)
class Scenario:
    """Questions of one notebook set-up: ``parts`` maps a prompt cell to its (test cell, question id) pairs."""

    parts: tuple  # ((prompt grade_id, ((test grade_id, question id), ...)), ...)

    @property
    def tests(self) -> tuple:
        return tuple(pair for _, pairs in self.parts for pair in pairs)

    @property
    def lead(self) -> str:
        return self.tests[0][1]


SCENARIOS = {
    "01-two-rank-update": (
        Scenario((("prompt_updated_w", (("test_updated_w", "update.nb01_updated_w"),)),
                  ("prompt_bug", (("test_buggy_w", "update.nb01_buggy_w"),)))),
    ),
    "02-ring-allreduce": (
        Scenario((("prompt_ex2", (("test_ex2_send", "ring.ex2_send"), ("test_ex2_bound", "ring.ex2_bound"))),)),
        Scenario((("prompt_step", (("test_step_ms", "ring.nb02_step"), ("test_speedup", "ring.nb02_speedup"),
                                   ("test_efficiency", "ring.nb02_efficiency"))),
                  ("prompt_overlap", (("test_overlap_step", "ring.nb02_overlap"),)))),
    ),
    "03-zero-memory": (
        Scenario((("prompt_zero2", (("test_zero2", "zero.nb03_zero2"),)),
                  ("prompt_peak", (("test_peak", "zero.nb03_peak"), ("test_smallest_stage", "zero.nb03_smallest"))),
                  ("prompt_zero_comm", (("test_zero_comm", "zero.nb03_zero3_send"),)))),
    ),
    "04-tp-pp": (
        Scenario((("prompt_bubble", (("test_bubble", "tppp.nb04_bubble"),)),)),
        Scenario((("prompt_tp", (("test_tp", "tppp.nb04_tp_send"),)),)),
    ),
    "05-debugging": (
        Scenario((("prompt_late", (("test_slow_rank", "debugging.nb05_slow_rank"),
                                   ("test_late_step", "debugging.nb05_late_step"),
                                   ("test_rank0_wait", "debugging.nb05_rank0_wait"))),)),
    ),
}


def _bank():
    from . import QUESTIONS

    return QUESTIONS


def seed(course: str, assignment: str, notebook: str, student: str, question: str) -> int:
    """The documented seed (1 .. SEED_MAX) of one student's scenario led by ``question``."""
    key = "/".join((course, assignment, notebook, student, question))
    return 1 + int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % SEED_MAX


def question_of(notebook: str, test_cell: str) -> str | None:
    """The bank question a test cell checks in a variant release, or None (book numbers)."""
    for scenario in SCENARIOS.get(notebook, ()):
        for gid, qid in scenario.tests:
            if gid == test_cell:
                return qid
    return None


@lru_cache(maxsize=4096)
def _params(course: str, assignment: str, notebook: str, student: str) -> tuple:
    bank = _bank()
    out = {}
    for scenario in SCENARIOS.get(notebook, ()):
        s = seed(course, assignment, notebook, student, scenario.lead)
        for _ in range(1000):  # at most 9 seeds in 3000 ids today (tests/test_variants.py)
            mine = _draw(bank, scenario, s)
            if mine is not None:
                break
            s = s % SEED_MAX + 1  # rejected (refused by the model, or the book's answer): the next seed
        else:
            raise ValueError(f"{notebook}：{scenario.lead} 连续 1000 个种子都被拒绝，题库的选项太少")
        out.update(mine)
    return tuple(out.items())


def _draw(bank, scenario: Scenario, s: int) -> dict | None:
    """{question id: frozen params} of one scenario at seed ``s``; None when the draw is rejected (module docstring)."""
    drawn: dict = {}
    out = {}
    for _, qid in scenario.tests:
        q = bank[qid]
        for name, value in q.generate(s).items():
            drawn.setdefault(name, value)
        out[qid] = tuple((p.name, _freeze(drawn[p.name])) for p in q.params)
        try:
            mine = _expected(qid, out[qid])
        except ValueError:
            return None
        if near_book(qid, mine):
            return None
    return out


@lru_cache(maxsize=256)
def book(qid: str):
    """The book's expected answer to question ``qid``: its numbers, seed 0."""
    q = _bank()[qid]
    return q.expected(q.generate(0))


def _same_kind(a, b) -> bool:
    return hasattr(a, "units") == hasattr(b, "units") and (
        not hasattr(a, "units") or a.dimensionality == b.dimensionality)


def near_book(qid: str, mine) -> bool:
    """Would the book's answer to ``qid``, or one of the book's named slips, pass as the answer ``mine`` expects?"""
    ours = book(qid)
    if _bank()[qid].kind == "int":
        return mine == ours
    public = [ours.value] + [value for _, value in ours.mistakes]
    return any(_same_kind(mine.value, v) and mine.matches(v) for v in public)


def is_book_answer(qid: str, answer) -> bool:
    """Is a student's answer (a Quantity or a float) the book's right answer to ``qid``?"""
    ours = book(qid)
    return _bank()[qid].kind != "int" and _same_kind(ours.value, answer) and ours.matches(answer)


def _freeze(v):
    return tuple(v) if isinstance(v, list) else v


def params(course: str, assignment: str, notebook: str, student: str) -> dict:
    """{question id: {parameter: value}} of one student's notebook (only the varied questions)."""
    return {qid: {k: list(v) if isinstance(v, tuple) else v for k, v in ps}
            for qid, ps in _params(course, assignment, notebook, student)}


@lru_cache(maxsize=65536)
def _expected(qid: str, frozen: tuple):
    q = _bank()[qid]
    return q.expected({k: list(v) if isinstance(v, tuple) else v for k, v in frozen})


def expected(course: str, assignment: str, notebook: str, student: str, qid: str):
    """What the grader expects of this student for question ``qid`` (an ``Expected``, or an int/None).

    A numeric answer's slips include the book's answer (``book_numbers``): the prose's numbers used instead.
    """
    frozen = dict(_params(course, assignment, notebook, student))[qid]
    mine = _expected(qid, frozen)
    if _bank()[qid].kind == "int":
        return mine
    return dataclasses.replace(mine, mistakes=(*mine.mistakes, ("book_numbers", book(qid).value)))


def prompts(course: str, assignment: str, notebook: str, student: str, prompt_cell: str) -> list[str]:
    """The bank's prompts of one notebook part, filled with the student's numbers (empty if not varied)."""
    bank, mine = _bank(), params(course, assignment, notebook, student)
    for scenario in SCENARIOS.get(notebook, ()):
        for gid, pairs in scenario.parts:
            if gid == prompt_cell:
                return [bank[qid].prompt(mine[qid]) for _, qid in pairs]
    return []


def shown(texts: list[str]) -> str:
    """Prompts of one part as the notebook prints them: a shared set-up once, then each question."""
    if len(texts) < 2:
        return "".join(texts)
    common = os.path.commonprefix(texts)
    cut = common.rfind("。") + 1
    if cut <= 0:
        return "\n".join(f"{i}. {t}" for i, t in enumerate(texts, 1))
    return common[:cut] + "\n" + "\n".join(f"{i}. {t[cut:]}" for i, t in enumerate(texts, 1))


# ---- the notebook side: runs in the student's kernel of a variant release --------------------------------

_ID = re.compile(r"^[^\s/\\]{1,64}$")
_state: dict = {"who": None, "where": None, "graded": None}


def graded_as(student: str) -> None:
    """Set by the grader in a grading kernel: the submission folder's id, so the graded copy shows those numbers."""
    _state["graded"] = str(student)


def _resolve(typed) -> tuple[str | None, str]:
    if _state["graded"]:
        note = f"评分时按提交文件夹的编号 {_state['graded']}"
        typed = str(typed or "").strip()
        return _state["graded"], note + (f"（notebook 里填的是 {typed}）" if typed and typed != _state["graded"] else "")
    typed = "" if typed is None else typed
    if not isinstance(typed, str):
        return None, f"MY_STUDENT_ID 需要写成字符串（加引号），例如 MY_STUDENT_ID = \"s001\"，收到的是 {type(typed).__name__}。"
    typed = typed.strip()
    hub = os.environ.get(ENV, "").strip()
    if typed:
        if not _ID.match(typed):
            return None, (f"学生编号 {typed!r} 不合规：不能含空格、/ 或 \\，最长 64 个字符。"
                          "请填写你提交作业用的编号，例如 MY_STUDENT_ID = \"s001\"。")
        clash = f"；注意它与 JupyterHub 登录名 {hub} 不同，评分按提交文件夹的编号（通常就是登录名）" if hub and hub != typed else ""
        return typed, f"来自 MY_STUDENT_ID{clash}"
    if hub:
        return hub, f"来自 JupyterHub 登录名（{ENV}）"
    return None, ("还不知道你的学生编号：MY_STUDENT_ID 是空的，也不在 JupyterHub 上（没有 JUPYTERHUB_USER）。"
                  "请把你提交作业用的编号写进上面的引号里（例如 MY_STUDENT_ID = \"s001\"，区分大小写），再运行本单元。")


def use(typed_id, course: str, assignment: str, notebook: str) -> str | None:
    """The "你的编号" cell: decide whose numbers this notebook shows; print who, or what to fix."""
    who, why = _resolve(typed_id)
    _state["where"] = (course, assignment, notebook)
    _state["who"] = who
    if who is None:
        print(f"✘ {why}")
        return None
    print(f"学生编号：{who}（{why}）。下面每个标着“你的数字”的单元会显示你的数字，练习自测也按你的数字检查。"
          "编号和提交时用的不一致时，评分会按提交的编号出题，你的答案就对不上。")
    return who


def _who():
    if _state["who"] is None or _state["where"] is None:
        print("✘ 还不知道你的学生编号：请先运行本 notebook 开头的“你的编号”单元（在那里填写编号），再运行本单元。")
        return None
    return _state["who"]


def show(prompt_cell: str) -> None:
    """A "你的数字" cell: print this part's questions with the student's own numbers."""
    who = _who()
    if who is None:
        return
    text = shown(prompts(*_state["where"], who, prompt_cell))
    print(f"你的数字（学生编号 {who}；本部分按这些数字作答和评分，上面正文里的数字是书中的例子）：\n{text}")


def check(test_cell: str, given) -> None:
    """Practice self-check of a variant release: the grader's check of this student's own variant."""
    from ..answers import checks

    __tracebackhide__ = True
    who = _who()
    if who is None:
        return
    course, assignment, notebook = _state["where"]
    qid = question_of(notebook, test_cell)
    q: Question = _bank()[qid]
    right = expected(course, assignment, notebook, who, qid)
    if q.kind == "int":
        checks.exact(q.answer, given, right, q.hint, allow_none=True)
    else:
        checks.value(q.answer, given, right, q.kind)
