"""The bank on the static site: each practice mount gets its question's data, as JSON in the page.

A chapter mounts a practice box with ``<div class="pb-practice" data-q="ring.ex1_send"></div>``
(in a ``{raw} html`` block); the record page mounts the progress summary with
``<div class="pb-practice-summary"></div>``.  :func:`embed` (called by
``parallel_budget.book.sphinxext`` for each page) puts into the page one
``<script type="application/json" id="pb-bank">`` with the mounted questions'
templates, parameter options, builder names, and the grader's mistake
sentences (``diagnose.MISTAKES``), so ``practice.js`` holds no course text of
its own and the feedback is worded exactly as nbgrader's.  Data in the page,
not in the script: a page carries only the questions it mounts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..grading.answers import unit_of
from ..grading.diagnose import MISTAKES
from . import CHAPTERS, QUESTIONS
from .core import answer_unit

MOUNT = re.compile(r"""<div class="pb-practice" data-q="([\w.]+)"></div>""")
SUMMARY = 'class="pb-practice-summary"'
BOOK = Path(__file__).resolve().parents[2] / "book"


def question_data(q) -> dict:
    """What the page's twin needs to draw, ask, check and explain question ``q``."""
    spec = unit_of(q.answer)
    kind = q.kind or (spec[0] if spec else "number")
    return {
        "id": q.id, "chapter": q.chapter, "source": q.source, "answer": q.answer, "kind": kind,
        "unit": answer_unit(q), "builder": q.builder, "fixed": q.fixed, "hint": q.hint,
        "params": [[p.name, p.default, p.options, p.unit] for p in q.params],
        "prompt": q.prompt_text, "solution": q.solution_text,
    }


def chapter_titles() -> dict:
    """docname -> the page's title (its first ``# `` heading)."""
    out = {}
    for name in CHAPTERS:
        path = BOOK / f"{name}.md"
        title = next((line[2:].strip() for line in path.read_text(encoding="utf-8").splitlines()
                      if line.startswith("# ")), name) if path.exists() else name
        out[name] = title
    return out


def bank_json(ids, summary: bool) -> str:
    """The page's bank: its questions, the mistake sentences they may name, and the chapter index."""
    qs = [question_data(QUESTIONS[i]) for i in dict.fromkeys(ids)]
    keys = {k for i in ids if QUESTIONS[i].kind != "int" for k, _ in QUESTIONS[i].expected(QUESTIONS[i].defaults()).mistakes}
    data = {"questions": qs, "mistakes": {k: v for k, v in MISTAKES.items() if k in keys}}
    if summary:
        data["index"] = {c: [q.id for q in QUESTIONS.values() if q.chapter == c] for c in CHAPTERS}
        data["titles"] = chapter_titles()
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")


def embed(body: str) -> str:
    """``body`` with the bank appended when it mounts a practice box or the summary; unknown ids fail."""
    ids = MOUNT.findall(body)
    summary = SUMMARY in body
    if not ids and not summary:
        return body
    unknown = [i for i in ids if i not in QUESTIONS]
    if unknown:
        raise ValueError(f"练习框引用了题库里没有的题目:{', '.join(unknown)}。已有:{', '.join(QUESTIONS)}")
    return body + f'<script type="application/json" id="pb-bank">{bank_json(ids, summary)}</script>'
