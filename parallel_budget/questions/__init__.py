"""The course's question bank: every numeric question of the lesson, as a template.

One module per chapter (``update``, ``ring``, ``zero``, ``tppp``, ``debugging``, ``plan``);
each question draws parameters from a seed (0: the book's numbers), fills its
prompt and worked solution, and takes its expected answer and named mistakes
from :mod:`parallel_budget.answers.diagnose`.  The static site's practice boxes
(``<div class="pb-practice" data-q="ring.ex1_send">``) render these questions
through ``book/_static/calc/practice.js``; ``tests/test_questions.py`` proves
the exercise notebooks' hidden tests expect the bank's default answers.

    >>> from parallel_budget import questions
    >>> q = questions.get("ring.ex1_send")
    >>> questions.check(q, q.generate(0), "3000 MB")["ok"]
    True
"""

from __future__ import annotations

from . import debugging, plan, ring, tppp, update, zero
from .core import SEED_MAX, Question, check

QUESTIONS = {q.id: q for m in (update, ring, zero, tppp, debugging, plan) for q in m.QUESTIONS}
CHAPTERS = ("two-rank-update", "ring-allreduce", "zero-memory", "tp-pp", "debugging", "plan-builder", "exercises")


def get(qid: str) -> Question:
    """The question ``qid``; a clear message naming the known ids otherwise."""
    try:
        return QUESTIONS[qid]
    except KeyError:
        raise KeyError(f"题库里没有题目 {qid!r}。已有：{'、'.join(QUESTIONS)}") from None


__all__ = ["QUESTIONS", "CHAPTERS", "SEED_MAX", "Question", "check", "get"]
