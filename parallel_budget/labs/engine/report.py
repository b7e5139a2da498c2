"""What a lab hands back: predicted-vs-measured rows, notes and raw facts.

A lab's ``summarize()`` returns a :class:`Report`.  The launcher wraps it in a
``LabResult``; under ``torchrun`` rank 0 prints ``Report.text()`` itself.
Rendering lives here so the notebook table and the terminal table agree.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass, field

HEADERS = ("项目", "预测", "实测", "结论")

_HAN = "\u4e00-\u9fff"
_FULL = {",": "\uff0c", ";": "\uff1b", ":": "\uff1a", "?": "\uff1f", "!": "\uff01", "(": "\uff08", ")": "\uff09"}


def zh_punct(text: str) -> str:
    """Full-width punctuation where ASCII , ; : ? ! ( ) touch a Chinese character (GB/T 15834).

    ``"计算 3.5 ms,暴露 2 ms(通信的 40%)"`` -> ``"计算 3.5 ms，暴露 2 ms（通信的 40%）"``.
    Parentheses are converted in pairs, when either of the pair touches Chinese text
    or encloses some; numbers, code and English stay as they are.
    """
    chars = list(text)
    pairs = paren_pairs(text)

    def han(j):
        return 0 <= j < len(chars) and re.match(f"[{_HAN}]", chars[j]) is not None

    for o, c in pairs:
        inner = "".join(chars[o + 1:c])
        if han(o - 1) or han(o + 1) or han(c - 1) or han(c + 1) or re.search(f"[{_HAN}]", inner):
            chars[o], chars[c] = _FULL["("], _FULL[")"]
    for i, c in enumerate(chars):
        if c and c in ",;:?!" and (han(i - 1) or han(i + 1) or (i + 2 < len(chars) and chars[i + 1] == " " and han(i + 2))
                             or (chars[i - 1:i] == [_FULL[")"]])):
            chars[i] = _FULL[c]
            if i + 1 < len(chars) and chars[i + 1] == " ":
                chars[i + 1] = ""
    return "".join(chars)


def paren_pairs(text: str) -> list:
    """(open, close) positions of the matched ASCII parentheses of ``text``, inner pairs first."""
    stack, pairs = [], []
    for i, c in enumerate(text):
        if c == "(":
            stack.append(i)
        elif c == ")" and stack:
            pairs.append((stack.pop(), i))
    return pairs


@dataclass(frozen=True)
class Row:
    """One line of the table: what the package predicts beside what was measured."""

    item: str
    predicted: str
    measured: str
    verdict: str = ""
    ok: bool | None = None  # True: agrees, False: the lab shows a difference, None: no verdict

    def cells(self) -> tuple:
        mark = {True: "✓ ", False: "✗ ", None: ""}[self.ok]
        return tuple(zh_punct(c) for c in (self.item, self.predicted, self.measured, mark + self.verdict))


@dataclass(frozen=True)
class Report:
    """Rows, explanatory notes (Chinese) and raw numbers for tests and plots."""

    title: str
    rows: tuple = ()
    notes: tuple = ()
    facts: dict = field(default_factory=dict)
    figure: str = ""  # a preformatted block (a schedule drawn in characters), shown after the table

    def text(self) -> str:
        return render_text(self.title, self.rows, self.notes, figure=self.figure)

    def html(self) -> str:
        return render_html(self.title, self.rows, self.notes, figure=self.figure)


def _width(s: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in s)


def _pad(s: str, width: int) -> str:
    return s + " " * (width - _width(s))


def render_text(title: str, rows, notes=(), extra: str = "", figure: str = "") -> str:
    """A plain-text table that lines up Chinese and ASCII in a terminal (then the figure, then the notes)."""
    title, extra, notes = zh_punct(title), zh_punct(extra), [zh_punct(n) for n in notes]
    lines = [title]
    if extra:
        lines.append(extra)
    if rows:
        cells = [HEADERS] + [r.cells() for r in rows]
        widths = [max(_width(c[i]) for c in cells) for i in range(len(HEADERS))]
        for n, c in enumerate(cells):
            lines.append("  ".join(_pad(x, w) for x, w in zip(c, widths)).rstrip())
            if n == 0:
                lines.append("  ".join("-" * w for w in widths))
    if figure:
        lines.append(figure.rstrip("\n"))
    lines.extend(f"· {n}" for n in notes)
    return "\n".join(lines)


def render_html(title: str, rows, notes=(), extra: str = "", figure: str = "") -> str:
    """The same table as HTML for a notebook cell (no external CSS or script)."""
    esc = html.escape
    title, extra, notes = zh_punct(title), zh_punct(extra), [zh_punct(n) for n in notes]
    colour = {True: "#1a7f37", False: "#cf222e", None: "inherit"}
    out = [f"<div class='pb-lab'><p><strong>{esc(title)}</strong></p>"]
    if extra:
        out.append(f"<p>{esc(extra)}</p>")
    if rows:
        out.append("<table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in HEADERS) + "</tr></thead><tbody>")
        for r in rows:
            c = r.cells()
            out.append(
                "<tr>" + "".join(f"<td>{esc(x)}</td>" for x in c[:3])
                + f"<td style='color:{colour[r.ok]}'>{esc(c[3])}</td></tr>"
            )
        out.append("</tbody></table>")
    if figure:
        out.append(f"<pre class='pb-lab-figure'>{esc(figure.rstrip())}</pre>")
    if notes:
        out.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    out.append("</div>")
    return "".join(out)


def fmt_diff(x: float) -> str:
    """A max-abs-difference for a table: 0 stays 0, tiny values in e-notation."""
    if x == 0:
        return "0"
    return f"{x:.3g}" if abs(x) >= 1e-3 else f"{x:.2e}"
