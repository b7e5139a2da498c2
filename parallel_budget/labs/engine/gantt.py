"""A pipeline schedule drawn in characters, one line per stage, for a lab report (terminal and notebook alike).

An action is ``(kind, microbatch, start, end)`` in seconds; ``unit`` seconds make
one character.  A forward of microbatch 3 lasting two units is ``F3``, a
backward of four units ``B3==``; idle time is ``.``.  Microbatches above 9 are
written in base 36 (``a`` is 10).
"""

from __future__ import annotations

import unicodedata

DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _label(kind: str, microbatch: int, width: int) -> str:
    tag = kind + (DIGITS[microbatch] if microbatch < len(DIGITS) else "+")
    return (tag + "=" * width)[:width] if width > 0 else ""


def lane(actions, t0: float, unit: float) -> str:
    """One stage's line: each action starts at its own column, later ones overwrite earlier overlaps."""
    cells = []
    for kind, mb, start, end in sorted(actions, key=lambda a: a[2]):
        col = max(0, round((start - t0) / unit))
        width = max(1, round((end - start) / unit))
        if len(cells) < col + width:
            cells.extend("." * (col + width - len(cells)))
        cells[col:col + width] = _label(kind, mb, width)
    return "".join(cells)


def _width(s: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in s)


def draw(title: str, lanes: dict, t0: float, unit: float) -> str:
    """``title`` then one line per stage: ``lanes[label] = [(kind, microbatch, start, end), ...]``."""
    width = max(_width(k) for k in lanes)
    lines = [title]
    for label, actions in lanes.items():
        lines.append(label + " " * (width - _width(label)) + " |" + lane(actions, t0, unit))
    return "\n".join(lines)
