"""Read a student's answer variable into a trusted pint Quantity or float.

The answer contract: a variable named ``<what>_<unit>`` (``ex1_send_per_rank_GB``,
``ex1_lower_bound_ms``; every part of a notebook has names of its own) may hold

* a number, read in the unit the name carries (``ex1_send_per_rank_GB = 3``);
* a string with a unit (``"3 GB"``, ``"3000 MB"``), converted;
* a pint Quantity, from this course's registry or any other one.

Before the student answers, the released cell holds ``...`` (``checks.UNANSWERED``):
the checks report it as "还没有作答" (:mod:`.checks`).

A name without a unit suffix (``speedup``, ``bubble_fraction``) holds a plain
number; fractions also accept ``"45.5%"``.

The student's object is never trusted: its ``__eq__``, ``__float__``,
``__str__`` are not called.  Numbers and strings are copied through the base
type's own slots (``float.__float__``, ``str.__str__``) and Quantities are taken
apart attribute by attribute, so an object that lies about itself is read as
what it really holds, or refused.  Every refusal is a :class:`AnswerError`
with a Chinese message naming the variable, what was given and what is
accepted.
"""

from __future__ import annotations

import math
import re
import sys

import pint

from ..model.unit_text import MAX_TEXT_CHARS, MAX_UNIT_TERMS, NUMBER
from ..model.units import Q_, parse, unit_of_items
from .plain import UnreadQuantity

# Unit suffixes of answer names -> (kind for units.parse, unit the bare number is in).
SUFFIX_UNITS = {
    "GB": ("bytes", "GB"),
    "MB": ("bytes", "MB"),
    "B": ("bytes", "B"),
    "GBps": ("bandwidth", "GB/s"),
    "ms": ("time", "ms"),
    "s": ("time", "s"),
}
KIND_ZH = {"bytes": "数据量", "time": "时间", "bandwidth": "带宽", "number": "纯数字", "fraction": "比例"}


_NUMBER_TEXT = re.compile(NUMBER)


class AnswerError(ValueError):
    """The answer cannot be read as the quantity its name promises."""


class Unevaluated(AnswerError):
    """Text that is an expression or too long: refused unread (the grader never evaluates a student's text)."""


_EXPRESSION = re.compile(r"[*()^]")


def _refuse_text(message: str, text: str) -> AnswerError:
    """The error for text the grammar refused: :class:`Unevaluated` (an integrity row) if it looks like an expression."""
    text = text.strip()
    return (Unevaluated if len(text) > MAX_TEXT_CHARS or _EXPRESSION.search(text[:10_000]) else AnswerError)(message)


def unit_of(name: str):
    """``("bytes", "GB")`` for ``ex1_send_per_rank_GB``; ``None`` for a unitless name."""
    suffix = name.rsplit("_", 1)[-1] if "_" in name else ""
    return SUFFIX_UNITS.get(suffix)


def _genuine_number(value):
    """The real float inside ``value``, or None when it is not a plain number."""
    t = type(value)
    if t is bool or isinstance(value, bool):
        return None
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, int):
        return int.__float__(value)
    numpy = sys.modules.get("numpy")
    if numpy is not None and t.__module__ == "numpy" and getattr(numpy, t.__name__, None) is t:
        if t.__name__.startswith(("float", "int", "uint")):
            return float.__float__(float(numpy.float64(value)))
    return None


def _genuine_quantity(value, name: str):
    """(magnitude, unit text) of a pint Quantity of any registry, without calling its methods."""
    try:
        mag = object.__getattribute__(value, "_magnitude")
        units = object.__getattribute__(value, "_units")
        d = object.__getattribute__(units, "_d")
        items = list(dict.items(d)) if isinstance(d, dict) else None
    except AttributeError:
        items = None
    if items is None:
        raise AnswerError(f"变量 {name} 是一个无法识别的 Quantity 对象。请改写成字符串，例如 {name} = \"3 GB\"。")
    number = _genuine_number(mag)
    if number is None:
        raise AnswerError(f"变量 {name} 的数值部分不是普通的数（{type(mag).__name__}）。请写成 {name} = \"3 GB\" 这样的形式。")
    parts = []
    for unit, exp in items[:MAX_UNIT_TERMS + 1]:
        e = _genuine_number(exp)
        if not isinstance(unit, str) or e is None:
            raise AnswerError(f"变量 {name} 的单位无法识别。请写成 {name} = \"3 GB\" 这样的形式。")
        parts.append((str.__str__(unit)[:64], e))
    return number, parts


def describe(value) -> str:
    """A short, safe description of a student's value for messages (no user __repr__)."""
    if value is None or type(value) is bool:
        return repr(value)
    number = _genuine_number(value)
    if number is not None:
        return repr(number) if not float(number).is_integer() else repr(int(number)) if abs(number) < 1e15 else repr(number)
    if isinstance(value, str):
        text = str.__str__(value)
        return repr(text if len(text) <= 60 else text[:57] + "...")
    if isinstance(value, pint.Quantity):
        try:
            mag, parts = _genuine_quantity(value, "答案")
            unit = unit_of_items(parts)
            return f"Quantity({mag!r}, {str(unit) if unit is not None else '无法识别的单位'!r})"
        except AnswerError:
            return "无法识别的 Quantity"
    return f"{type(value).__name__} 类型的对象"


def _example(name: str) -> str:
    spec = unit_of(name)
    if spec is None:
        return f"{name} = 1.5"
    return f"{name} = 1.5（按 {spec[1]}）或 {name} = \"1.5 {spec[1]}\""


def read_answer(name: str, value, kind: str | None = None):
    """Return the answer as a Quantity (named unit) or a float (unitless name).

    ``kind`` defaults from the name's suffix; pass ``"fraction"`` for a share
    in [0, 1] that may also be written ``"45.5%"``, or ``"number"``.
    """
    spec = unit_of(name)
    if kind is None:
        kind = spec[0] if spec else "number"
    if value is Ellipsis:  # the released answer cell's sentinel (checks.UNANSWERED)
        raise AnswerError(f"变量 {name} 还没有作答（还是 ...）。请写例如 {_example(name)}。")
    if value is None:
        raise AnswerError(f"变量 {name} 还没有赋值。请写例如 {_example(name)}。")
    if isinstance(value, bool):
        raise AnswerError(f"变量 {name} 需要{KIND_ZH.get(kind, kind)}，收到布尔值 {value!r}。例如 {_example(name)}。")
    number = _genuine_number(value)
    if kind in ("number", "fraction"):
        if number is None and isinstance(value, str):
            text = str.__str__(value).strip()
            digits = text[:-1].rstrip() if kind == "fraction" and text.endswith("%") else text
            if len(text) <= MAX_TEXT_CHARS and _NUMBER_TEXT.fullmatch(digits):  # the grammar, as practice.js's NUMBER
                number = float(digits) / 100 if digits is not text else float(digits)
            else:
                raise _refuse_text(
                    f"变量 {name} 需要一个纯数字，收到 {describe(value)}。例如 {name} = 0.455"
                    + ("或 \"45.5%\"。" if kind == "fraction" else "。"), text)
        if number is None:
            raise AnswerError(f"变量 {name} 需要一个纯数字，收到 {describe(value)}。例如 {name} = 1.5。")
        if not math.isfinite(number):
            raise AnswerError(f"变量 {name} 必须是有限的数，收到 {describe(value)}。")
        if kind == "fraction":
            _check_fraction(name, number, value)
        return number
    if spec is None:
        raise AnswerError(f"变量名 {name} 没有单位后缀，无法按 {kind} 读取。")
    if isinstance(value, UnreadQuantity):
        raise Unevaluated(f"变量 {name} 是一个单位无法识别的 Quantity（单位不是本课程单位表里的名字，可能是表达式），"
                          f"评分者没有读取它。例如 {_example(name)}。")
    if number is not None:
        value = Q_(number, spec[1])
    elif isinstance(value, str):
        value = str.__str__(value)
        bare = value.strip()
        if len(bare) <= MAX_TEXT_CHARS and _NUMBER_TEXT.fullmatch(bare):
            value = Q_(float(bare), spec[1])  # "32.25" for peak_GB is 32.25 GB, as the bare number 32.25 is
    elif isinstance(value, pint.Quantity):
        mag, parts = _genuine_quantity(value, name)
        unit = unit_of_items(parts)  # one known identifier per term, small integer powers: never an expression
        if unit is None:
            raise AnswerError(
                f"变量 {name} 的单位 {' * '.join(f'{u}**{e:g}' for u, e in parts)[:80]!r} 不在本课程的单位表里。"
                f"例如 {_example(name)}。"
            )
        value = Q_(mag, unit)
    else:
        raise AnswerError(
            f"变量 {name} 需要{KIND_ZH[kind]}：数字（按 {spec[1]}）、带单位的字符串或 pint Quantity，"
            f"收到 {describe(value)}。例如 {_example(name)}。"
        )
    try:
        return parse(value, kind, arg=name)
    except ValueError as exc:
        message = str(exc)
    error = _suffix_message(message, name, spec)
    raise _refuse_text(error, value) if isinstance(value, str) else AnswerError(error)


def _suffix_message(message: str, name: str, spec) -> str:
    """The parser's message, retold for an answer variable: a bare number is in the name's unit, not SI."""
    message = message.replace(f"参数 {name}", f"变量 {name}", 1)
    message = re.sub(r"也可给纯数字[\x2c，]按 [^。]*? 理解", f"也可给纯数字，按变量名后缀的 {spec[1]} 理解", message)
    return _full_width(message)


_FULL_WIDTH = {",": "，", ";": "；", ":": "："}
_ASCII_NEXT_TO_HAN = re.compile(r"(?<=[\u4e00-\u9fff])[,;:]|[,;:](?=[\u4e00-\u9fff])")


def _full_width(message: str) -> str:
    """The parser's ASCII , ; : next to Chinese in full width, as in the rest of the feedback."""
    return _ASCII_NEXT_TO_HAN.sub(lambda m: _FULL_WIDTH[m.group()], message)


def _check_fraction(name: str, number: float, value) -> None:
    """A share lies in [0, 1]; ``51.7`` meant as 51.7 % gets the two ways to write it."""
    if 0 <= number <= 1:
        return
    if 1 < number <= 100 and not (isinstance(value, str) and str.__str__(value).strip().endswith("%")):
        share = f"{number / 100:.4g}"
        raise AnswerError(
            f"变量 {name} 是 0 到 1 之间的比例，收到 {describe(value)}。"
            f"如果你指的是 {number:g}%，请写 {name} = {share} 或 {name} = \"{number:g}%\"。"
        )
    raise AnswerError(f"变量 {name} 是 0 到 1 之间的比例（或 \"0%\" 到 \"100%\"），收到 {describe(value)}。")


_INT_TEXT = re.compile(r"[+-]?[0-9]{1,30}")  # fullmatch, ASCII digits (practice.js)


def read_int(name: str, value, allow_none: bool = False):
    """An integer answer: ``2``, ``2.0``, ``"2"`` or a numpy integer all read as 2 (``None`` if allowed).

    Like :func:`read_answer` it never calls the student's methods; a value that
    is not a whole number is refused with a message saying what is accepted.
    """
    if value is None and allow_none:
        return None
    also = "（或 None）" if allow_none else ""
    if value is Ellipsis:
        raise AnswerError(f"变量 {name} 还没有作答（还是 ...）。请写一个整数{also}，例如 {name} = 2。")
    if value is None:
        raise AnswerError(f"变量 {name} 还没有赋值。请写一个整数{also}，例如 {name} = 2。")
    if isinstance(value, bool):
        raise AnswerError(f"变量 {name} 需要整数{also}，收到布尔值 {value!r}。例如 {name} = 2。")
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, str):
        text = str.__str__(value).strip()
        if _INT_TEXT.fullmatch(text):
            return int(text)
        raise AnswerError(f"变量 {name} 需要整数{also}，收到字符串 {describe(value)}。请直接写数字，例如 {name} = 2。")
    number = _genuine_number(value)
    if number is not None and math.isfinite(number) and float(number).is_integer():
        return int(number)
    raise AnswerError(f"变量 {name} 需要整数{also}，收到 {describe(value)}。例如 {name} = 2。")
