"""Shared test vectors of the question bank: ``python -m parallel_budget.questions.vectors``.

Writes ``tests/vectors/questions.json``: for every question and a few seeds,
the drawn parameters, the filled prompt and solution, the expected value and
its mistakes (SI units), and typed answers with the grader's verdict, i.e.
the message :func:`~.core.check` gets from ``checks.value``/``checks.exact``.
Cases per question: the right answer in several spellings, every named
mistake, a unit slip, a plain wrong value, a wrong dimension, and garbage.
``tests/js/practice.test.mjs`` runs the page's twin on them;
``tests/test_questions.py`` fails when the file is stale.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from ..answers.read import read_answer, unit_of
from ..answers.diagnose import MISTAKES, SLIP_UNITS, _close, bits_slip
from ..model.units import Q_
from . import QUESTIONS
from .core import BASE, answer_unit, check, magnitude, per_unit

PATH = Path(__file__).resolve().parents[2] / "tests" / "vectors" / "questions.json"
SEEDS = (0, 1, 2, 42, 999999)
# pint reads "1..2" as 1. * .2 and "2 + 2" as 4; the page refuses them, so they are not shared cases.
GARBAGE = ("", "   ", "abc", "NaN", "Infinity", "-5", "1e999", "%", "3 KB", "null", "undefined", "3 GB GB", "GB")


def _in(value: float, unit: str) -> float:
    return value / per_unit(unit)


def _num(x: float) -> str:
    return repr(float(x)) if not float(x).is_integer() else str(int(x))


def _status(q, text: str, verdict: dict) -> str:
    if verdict["ok"]:
        return "ok"
    message = verdict["message"]
    if "这个数按" in message and "算是对的" in message:
        return "slip"
    if "可能的错误" in message:
        return "mistake"
    return "wrong" if f"{q.answer} = " in message and "不对" in message else "error"


def _keys(exp, given: float) -> list:
    """The mistake keys ``diagnose`` matches for a value read as ``given`` (SI)."""
    out = []
    for key, value in exp.mistakes:
        value, right = magnitude(value), magnitude(exp.value)
        if _close(given, value, exp.rel_tol) and not _close(value, right, exp.rel_tol) and key not in out:
            out.append(key)
    return out


def spellings(q, params) -> list:
    """Typed answers worth checking for ``q`` at ``params``."""
    exp = q.expected(params)
    if q.kind == "int":
        right = "None" if exp is None else str(exp)
        return [right, f" {right} ", "None" if exp is not None else "0", "7", "-1", "2.5", "two"]
    unit = answer_unit(q)
    value = magnitude(exp.value)
    cases = []
    if unit:
        kind = unit_of(q.answer)[0]
        r = _in(value, unit)
        other = {"GB": "MB", "MB": "GB", "ms": "s", "s": "ms"}[unit]
        cases += [_num(r), f"{_num(r)} {unit}", f"{_num(_in(value, other))} {other}", f"{_num(r)}{unit}",
                  f"{_num(round(r, 6))}", f"{_num(value)} {BASE[str(Q_(1, unit).dimensionality)]}"]
        cases += [_num(_in(magnitude(v), unit)) for _, v in exp.mistakes]
        cases += [_num(_in(value, alt)) for alt in SLIP_UNITS[kind] if alt != unit][:2]
        cases += [_num(r * 1.37), _num(r * 0.995), "3 ms" if kind == "bytes" else "3 GB", "3 GB/s"]
        if kind in ("bytes", "bandwidth"):  # the right number in bits (the bits/bytes slip) and in an ambiguous unit
            bits = unit.replace("B", "b", 1)
            cases += [f"{_num(r)} {bits}", f"{_num(r)}{bits}", f"{_num(r)} {unit.lower()}", f"{_num(r * 8)} {bits}"]
    else:
        cases += [_num(value), f"{value:.4g}", f" {_num(value)} "]
        if q.kind == "fraction":
            cases += [f"{_num(100 * value)}%", f"{100 * value:.3g}%", _num(100 * value), "150%", "1.5"]
        cases += [_num(magnitude(v)) for _, v in exp.mistakes]
        cases += [_num(value * 1.37), "3 GB", "45.5%" if q.kind != "fraction" else "45.5 %"]
    # Pathological text (issue 31): refused at once by the grammar in both readers, never evaluated.
    cases += [f"2**9999999 {unit}".rstrip(), "(" * 40 + "1" + ")" * 40, "1" * 31, "\u0661", "1_000", "nan", "1e99999",
              "9" * 70 + "%" if q.kind == "fraction" else "9" * 70]
    return cases


_SHOWN = re.compile(r"^\w+ = (.*?) 不对")


def case(q, params, text: str) -> dict:
    """The box's verdict on ``text``: the grader's words, except that coinciding mistakes are said to coincide."""
    from .core import box_value
    from .site import TEXT

    verdict = check(q, params, text)
    status = _status(q, text, verdict)
    out = {"text": text, "status": status}
    if status != "error":  # the page words its reading errors shorter; the test checks they are clear
        out["message"] = verdict["message"]
    if status == "mistake":
        given, exp = box_value(q, text), q.expected(params)
        read = read_answer(q.answer, given, q.kind)
        out["keys"] = ["bits"] if bits_slip(given, read, exp) else _keys(exp, magnitude(read))
        if len(out["keys"]) > 1:  # the grader lists them joined by 或者; the box offers numbers that tell them apart
            shown = _SHOWN.match(verdict["message"]).group(1)
            out.update(status="coincide", message=TEXT["coincide"].format(name=q.answer, shown=shown, n=len(out["keys"])))
    return out


def _expected(q, params):
    exp = q.expected(params)
    if q.kind == "int":
        return {"value": exp}
    return {"value": magnitude(exp.value), "tol": exp.rel_tol,
            "mistakes": [[k, magnitude(v)] for k, v in exp.mistakes]}


def vectors() -> dict:
    from .site import TEXT, question_data

    out = {"mistakes": MISTAKES, "text": TEXT, "questions": []}
    for q in QUESTIONS.values():
        draws = []
        for seed in SEEDS:
            params = q.generate(seed)
            draws.append({
                "seed": seed, "params": params, "prompt": q.prompt(params), "solution": q.solution(params),
                "expected": _expected(q, params),
                "cases": [case(q, params, t) for t in spellings(q, params) + list(GARBAGE if not seed else ())],
            })
        out["questions"].append({"question": question_data(q), "draws": draws})
    return out


def text() -> str:
    return json.dumps(vectors(), ensure_ascii=False, indent=0, sort_keys=True) + "\n"


def main() -> int:
    PATH.write_text(text(), encoding="utf-8")
    print(f"wrote {PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
