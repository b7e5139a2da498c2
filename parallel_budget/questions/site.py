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

from ..answers.read import unit_of
from ..answers.checks import RECEIPT
from ..answers.diagnose import MISTAKES, SLIP_UNITS
from . import CHAPTERS, QUESTIONS
from .core import answer_unit

MOUNT = re.compile(r"""<div class="pb-practice" data-q="([\w.]+)"></div>""")
SUMMARY = 'class="pb-practice-summary"'
BOOK = Path(__file__).resolve().parents[2] / "book"

# The page's sentences, ``{key}`` filled by practice.js.  The verdicts are worded as
# grading.checks words them (tests/vectors/questions.json holds the two to each other).
TEXT = {
    "ok": RECEIPT + "：{name} 的数值正确",
    "ok_int": RECEIPT + "：{name} 正确",
    "wrong_int": "{name} = {x} 不对。",
    "wrong_int_hint": "{name} = {x} 不对。\n{hint}",
    "mistake": "{name} = {shown} 不对。\n可能的错误：{why}。",
    "coincide": "{name} = {shown} 不对。\n在这组数下，有 {n} 种常见错误恰好都得到这个数，分不出是哪一种。"
                "点“换一组能分开它们的数”再算一次。",
    "slip": "{name} = {shown} 不对。\n可能的错误：这个数按 {alt} 算是对的，但变量名后缀 _{suffix} 表示纯数字按 {unit} 理解；"
            "请写 {right}，或写带单位的字符串 \"{bare} {alt}\"。",
    "wrong": "{name} = {shown} 不对（容差 {tol}）。\n请对照公式逐项检查单位和系数。",
    "int": "变量 {name} 需要整数（或 None），收到字符串 {text}。请直接写数字，例如 {name} = 2。",
    "number": "变量 {name} 需要一个纯数字，收到 {text}。例如 {name} = 1.5。",
    "fraction": "变量 {name} 需要一个纯数字，收到 {text}。例如 {name} = 0.455 或 \"45.5%\"。",
    "finite": "变量 {name} 必须是有限的数，收到 {text}。",
    "percent": "变量 {name} 是 0 到 1 之间的比例，收到 {t}。如果你指的是 {t}%，请写 {name} = {share} 或 {name} = \"{t}%\"。",
    "range": "变量 {name} 是 0 到 1 之间的比例（或 \"0%\" 到 \"100%\"），收到 {text}。",
    "quantity": "变量 {name} 读不出来：{why}。纯数字按变量名后缀的 {unit} 理解，例如 {name} = 1.5 或 \"1.5 {unit}\"。",
    "negative": "不能为负数，收到 \"{t}\"",
    "source": "练习 · {source}",
    "check": "检查",
    "again": "换一组数",
    "separate": "换一组能分开它们的数",
    "show": "看解答",
    "retry": "改好再试一次；想看完整推算就点“看解答”。",
    "stat": "本题已检查 {n} 次，做对 {ok} 次，看过解答 {sol} 次（只保存在本浏览器）",
    "drawn": "（第 {seed} 组数）",
    "book": "（书中的数）",
    "solution": "解答：",
    "head": ["章节", "做对的题", "检查次数", "看过解答的题"],
}


def label(q) -> str:
    """The answer box's label: what is accepted, as the grader accepts it."""
    unit = answer_unit(q)
    if unit:
        example = {"GB": "“1500 MB”", "MB": "“0.5 GB”", "ms": "“0.2 s”"}.get(unit, f"“1.5 {unit}”")
        return f"你的答案 {q.answer}（纯数字按 {unit} 理解；也可带单位，如 {example}）"
    return {"fraction": f"你的答案 {q.answer}（小数或百分数，如 0.455 或 45.5%）",
            "int": f"你的答案 {q.answer}（整数" + ("；哪个阶段都放不下时写 None）" if q.builder == "smallest_stage" else "）")
            }.get(q.kind, f"你的答案 {q.answer}（纯数字）")


def question_data(q) -> dict:
    """What the page's twin needs to draw, ask, check and explain question ``q``."""
    spec = unit_of(q.answer)
    kind = q.kind or (spec[0] if spec else "number")
    return {
        "id": q.id, "chapter": q.chapter, "source": q.source, "answer": q.answer, "kind": kind,
        "unit": answer_unit(q), "slip": list(SLIP_UNITS.get(kind, ())), "builder": q.builder, "fixed": q.fixed, "hint": q.hint,
        "params": [[p.name, p.default, p.options, p.unit] for p in q.params],
        "prompt": q.prompt_text, "solution": q.solution_text, "label": label(q),
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
    if any(question_data(QUESTIONS[i])["kind"] in ("bytes", "bandwidth") for i in ids):
        keys.add("bits")  # a bits unit typed for a bytes answer (diagnose.bits_slip)
    data = {"questions": qs, "mistakes": {k: v for k, v in MISTAKES.items() if k in keys}, "text": TEXT}
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
        raise ValueError(f"练习框引用了题库里没有的题目：{'、'.join(unknown)}。已有：{'、'.join(QUESTIONS)}")
    return body + f'<script type="application/json" id="pb-bank">{bank_json(ids, summary)}</script>'
