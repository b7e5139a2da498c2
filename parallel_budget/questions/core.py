"""The shape of a practice question (PrairieLearn-style): parameters, prompt, expected answer.

A :class:`Question` is a small template.  ``generate(seed)`` draws parameters
(seed 0 is the book's own numbers), ``prompt(params)`` and ``solution(params)``
fill the Chinese text with them, ``expected(params)`` returns the
:class:`~parallel_budget.answers.diagnose.Expected` the grader uses (the right
value and its named mistakes, all from package calls).

The in-page twin (``book/_static/calc/practice.js``) draws the same parameters
from the same seed with the same generator (:class:`Rng`, mulberry32 on
unsigned 32-bit integers), fills the same templates, and recomputes the same
expected values; ``tests/vectors/questions.json`` holds both to each other.

Template syntax: ``{name}`` is a parameter shown with its unit (``{grad}`` ->
``2 GB``); ``{key|unit}`` is a computed value (``answer`` or one of the
question's ``extra`` values, in SI base units) shown with 4 significant digits
in ``unit`` (``{answer|ms}`` -> ``120 ms``; ``|`` alone: a plain number;
``|%``: a percentage).
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass, field
from typing import Callable

from ..answers import checks
from ..answers.read import unit_of
from ..model.units import Q_, _trim

MASK = 0xFFFFFFFF
SEED_MAX = 999_999
NUMBER = re.compile(r"^\s*[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$")  # ASCII, as practice.js


class Rng:
    """mulberry32 on unsigned 32-bit integers: the same draws in Python and in the page's JavaScript."""

    def __init__(self, seed: int):
        self.a = int(seed) & MASK

    def next(self) -> int:
        self.a = (self.a + 0x6D2B79F5) & MASK
        t = self.a
        t = ((t ^ (t >> 15)) * (t | 1)) & MASK
        t = (t ^ ((t + (((t ^ (t >> 7)) * (t | 61)) & MASK)) & MASK)) & MASK
        return (t ^ (t >> 14)) & MASK

    def pick(self, options):
        return options[self.next() % len(options)]


@dataclass(frozen=True)
class Param:
    """One parameter: its book value, the options the generator picks from, and its unit in prose.

    ``options`` is a tuple to pick one from, or for a list parameter a dict
    ``{"len": (...), "each": (...)}`` with an optional ``"late": (...)``: one
    element, picked at random, gets that much added (a straggler).
    """

    name: str
    default: object
    options: object
    unit: str = ""


@dataclass(frozen=True)
class Question:
    """A numeric question of the course, as a template."""

    id: str            # "ring.ex1_send": module, then the question
    chapter: str       # docname of the page it belongs to ("ring-allreduce", "exercises")
    source: str        # where the book asks it ("练习 1", "检查自己 2", "NB02 第 A 部分")
    answer: str        # the answer variable, as in the notebooks ("ex1_send_per_rank_GB")
    kind: str | None   # None: from the name's suffix; "fraction", "number" or "int"
    params: tuple      # of Param, in drawing order
    builder: str       # the JS twin's builder name
    build: Callable    # params -> Expected (value and named mistakes) or int/None for kind "int"
    prompt_text: str
    solution_text: str
    fixed: dict = field(default_factory=dict)      # parameters not drawn (passed to the builder)
    extra: Callable | None = None                  # params -> {key: SI magnitude} for the solution
    hint: str = ""                                 # for "int" answers: the grader's hint

    def defaults(self) -> dict:
        return {p.name: _copy(p.default) for p in self.params}

    def generate(self, seed: int) -> dict:
        """The book's numbers for seed 0, else a reproducible draw within the options."""
        if not seed:
            return self.defaults()
        rng = Rng(seed)
        return {p.name: _draw(rng, p.options) for p in self.params}

    def args(self, params: dict) -> dict:
        return {**self.fixed, **params}

    def expected(self, params: dict):
        return self.build(self.args(params))

    def values(self, params: dict) -> dict:
        """The computed values the solution may show, in SI base units."""
        exp = self.expected(params)
        out = dict(self.extra(self.args(params))) if self.extra else {}
        out["answer"] = exp if self.kind == "int" else magnitude(exp.value)
        return out

    def prompt(self, params: dict) -> str:
        return fill(self.prompt_text, self, params, {})

    def solution(self, params: dict) -> str:
        return fill(self.solution_text, self, params, self.values(params))


def _copy(v):
    return list(v) if isinstance(v, (list, tuple)) else v


def _draw(rng: Rng, options):
    if isinstance(options, dict):
        n = rng.pick(options["len"])
        xs = [rng.pick(options["each"]) for _ in range(n)]
        if "late" in options:
            xs[rng.next() % n] += rng.pick(options["late"])
        return xs
    return rng.pick(options)


BASE = {"[information]": "B", "[information] / [time]": "B/s", "[time]": "s"}


def magnitude(x) -> float:
    """A Quantity in the course's base units (bytes, bytes per second, seconds), or the float itself."""
    return float(x.to(BASE[str(x.dimensionality)]).magnitude) if hasattr(x, "dimensionality") else float(x)


def per_unit(unit: str) -> float:
    """How many base units (B, B/s, s) one ``unit`` is."""
    return magnitude(Q_(1, unit))


def number(x) -> str:
    """A parameter as the page's JavaScript ``String(x)`` writes it."""
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e21 else repr(x)


def show(value: float, unit: str) -> str:
    """A base-unit value in ``unit`` with 4 significant digits (``units.fmt``'s rounding)."""
    if value is None:
        return "None"
    if unit == "%":
        return f"{_trim(100 * value, 4)}%"
    if not unit:
        return _trim(value, 4)
    return f"{_trim(value / per_unit(unit), 4)} {unit}"


def param_text(p: Param, v) -> str:
    text = "、".join(number(x) for x in v) if isinstance(v, (list, tuple)) else number(v)
    return f"{text} {p.unit}" if p.unit else text


_FIELD = re.compile(r"\{(\w+)(?:\|([^}]*))?\}")


def fill(template: str, q: Question, params: dict, values: dict) -> str:
    units = {p.name: p for p in q.params}

    def one(m):
        key, unit = m.group(1), m.group(2)
        if unit is None:
            return param_text(units[key], params[key])
        return show(values[key], unit)

    return _FIELD.sub(one, template)


def box_value(q: Question, text: str):
    """What a typed answer stands for: a bare number is in the variable's unit, like ``x_GB = 3``."""
    t = str(text).strip()
    if q.kind == "int":
        if t.lower() in ("none", "无"):
            return None
        if re.match(r"^[+-]?\d+$", t):
            return int(t)
        return t
    return float(t) if NUMBER.match(t) else t


def check(q: Question, params: dict, text: str) -> dict:
    """Grade a typed answer with the grader's own checks; ``{"ok": bool, "message": ...}``.

    The message is the receipt (``✔ 检查通过:…``) or the ``CheckFailed``
    feedback, exactly as a notebook's hidden test prints it.
    """
    given = box_value(q, text)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            if q.kind == "int":
                checks.exact(q.answer, given, q.expected(params), q.hint, allow_none=True)
            else:
                checks.value(q.answer, given, q.expected(params), q.kind)
    except checks.CheckFailed as exc:
        return {"ok": False, "message": str(exc)}
    return {"ok": True, "message": out.getvalue().strip()}


def answer_unit(q: Question) -> str:
    """The unit a bare number is read in ('' for a plain number or fraction)."""
    spec = unit_of(q.answer)
    return spec[1] if spec and q.kind not in ("fraction", "number", "int") else ""
