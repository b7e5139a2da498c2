"""The grammar of a typed quantity (``"1006.63 MB"``, ``"25 Gb/s"``, ``"400 ms"``): text only, no pint.

Students' answers and calculator fields are read by this grammar, never by
pint's expression parser: pint evaluates what it is given (``"2**9999999 MB"``
costs hours of CPU, nested parentheses its recursion), and the text comes from
students.  The grammar is a number (decimal or scientific, at most 30 digits
before and after the point and a 4-digit exponent), optional spaces and an
optional unit spelled as in :data:`UNIT_SPELLINGS`; nothing else, and at most
:data:`MAX_TEXT_CHARS` characters.  :mod:`.units` then gives pint only the
parsed parts, a float and a unit of the fixed table.  model.js's
``parseQuantity`` reads the same grammar (tests/vectors/calculators.json).
"""

from __future__ import annotations

import re

MAX_TEXT_CHARS = 64  # a typed quantity ("1006.63 MB" is 10 characters); longer text is refused unread
NUMBER = r"[+-]?(?:[0-9]{1,30}(?:\.[0-9]{0,30})?|\.[0-9]{1,30})(?:[eE][+-]?[0-9]{1,4})?"  # ASCII digits: re's \d would take "١"
QUANTITY_TEXT = re.compile(rf"({NUMBER})[ \t]*([^0-9.\s].*)?", re.S)  # fullmatch: the unit never starts with a digit
_INFO_PREFIXES = ("", "k", "M", "G", "T", "P", "Ki", "Mi", "Gi", "Ti")
_TIME_SPELLINGS = {"s": "s", "sec": "s", "ms": "ms", "us": "us", "µs": "us", "ns": "ns", "min": "min", "h": "h",
                   "hr": "h"}


def _spellings() -> dict:
    """Every accepted unit spelling -> (kind, pint unit symbol); built once from fixed lists."""
    table = {}
    for prefix in _INFO_PREFIXES:
        for written, symbol in (("B", "B"), ("b", "b"), ("bit", "b")):
            unit = f"{prefix}{symbol}" if symbol == "B" or prefix else symbol
            table[prefix + written] = ("bytes", unit)
            for per in ("/s", "/sec"):  # spaces around "/" are dropped first (units._read_text)
                table[prefix + written + per] = ("bandwidth", f"{unit}/s")
    for written, symbol in _TIME_SPELLINGS.items():
        table[written] = ("time", symbol)
    return table


UNIT_SPELLINGS = _spellings()

# A pint Quantity taken apart (answers, plain): "(gigabyte)**1.0 * (second)**-1.0", one identifier per term.
UNIT_NAME = re.compile(r"[A-Za-zµ]{1,24}")
MAX_UNIT_TERMS = 4
_TERM = re.compile(r"\(([A-Za-zµ]{1,24})\)\*\*([+-]?\d{1,2}(?:\.0)?)")


def unit_items(text):
    """``[(name, exponent), ...]`` of a taken-apart unit text, ``[]`` for ``"dimensionless"``, None if malformed."""
    if type(text) is not str or len(text) > 200:
        return None
    if text == "dimensionless":
        return []
    items = []
    for term in text.split(" * ")[:MAX_UNIT_TERMS + 1]:
        m = _TERM.fullmatch(term)
        if not m:
            return None
        items.append((m.group(1), float(m.group(2))))
    return items
