"""Chinese prose on the site: no stray space where a source line breaks, numbers that keep their units.

MyST keeps a paragraph's line breaks as newlines, and a browser shows a newline as a space: a
Chinese sentence wrapped in the source ("更新后的\\n参数") reads "更新后的 参数" on the page.
:class:`ChineseProse` removes a line break that has a CJK character (or full-width punctuation) on
both sides, across inline markup too ("**每 rank**\\n发送"), and puts a no-break space between a
number and its unit ("3 GB", "120 ms", "67.4 亿"), so a narrow screen never shows "12" at the
end of one line and "GB" at the start of the next.  Code, maths and raw HTML are left alone, and so are
the {eval} values (their text and markup stay exactly myst-nb's, which tests read):
``book/_static/course.js`` keeps each one that is a number with its unit on one line.
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

# CJK ideographs and punctuation, full-width forms, and the curly quotes Chinese text uses.
CJK = "\u2e80-\u2fff\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef\u2018-\u201d"
_IS_CJK = re.compile(f"[{CJK}]")
_INNER_BREAK = re.compile(f"(?<=[{CJK}])[ \\t]*\\n[ \\t]*(?=[{CJK}])")
UNIT = r"(?:[kKMGTP]i?)?(?:B|b|bits?)(?:/s|ps)?|[kMGTPE]?FLOP(?:/s|S)?|ms|µs|us|ns|s|min|h|万亿|亿|万|%"
_NUMBER_UNIT = re.compile(rf"(?<=\d) (?=(?:{UNIT})(?![A-Za-z]))")
NBSP = "\u00a0"
# Text under these is shown as written.
VERBATIM = (nodes.literal, nodes.literal_block, nodes.math, nodes.math_block, nodes.raw, nodes.comment,
            nodes.target, nodes.substitution_definition)


def join_lines(texts: list[str]) -> list[str]:
    """The strings of consecutive text nodes with each line break between two CJK characters removed.

    A break may end one string and the CJK character that follows it start the next, so the
    neighbours are looked up across the strings.  ``["更新后的\\n", "参数"]`` -> ``["更新后的", "参数"]``.
    """
    out = [_INNER_BREAK.sub("", t) for t in texts]
    for i, t in enumerate(out):
        stripped = t.rstrip(" \t\n")
        if "\n" not in t[len(stripped):]:
            continue
        before = stripped[-1:] or _last_char(out[:i])
        after = _first_char(out[i + 1:])
        if before and after and _IS_CJK.match(before) and _IS_CJK.match(after):
            out[i] = stripped
            if i + 1 < len(out):
                out[i + 1] = out[i + 1].lstrip(" \t\n")
    return out


def _last_char(texts):
    for t in reversed(texts):
        if t.strip():
            return t.rstrip()[-1]
    return ""


def _first_char(texts):
    for t in texts:
        if t.strip():
            return t.lstrip()[0]
    return ""


def keep_units(text: str) -> str:
    """``"每 rank 发送 3 GB"`` -> ``"每 rank 发送 3\\u00a0GB"``."""
    return _NUMBER_UNIT.sub(NBSP, text)


def _verbatim(node) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, VERBATIM):
            return True
        parent = parent.parent
    return False


class ChineseProse(SphinxPostTransform):
    """Per text block (paragraph, title, term ...): join CJK lines, keep numbers with their units."""

    # A post-transform: myst-nb picks each {eval} value's text only then (SelectMimeType, priority 4),
    # and cross-references get their text at 10.
    default_priority = 900

    def run(self, **kwargs) -> None:
        for block in self.document.findall(nodes.TextElement):
            if isinstance(block, nodes.Inline) or isinstance(block, VERBATIM) or _verbatim(block):
                continue
            texts = [t for t in block.findall(nodes.Text) if _block_of(t) is block]
            fixed = [_verbatim(t) for t in texts]
            # Code and maths stay as written and count as Latin text between their neighbours.
            joined = join_lines(["x" if v else str(t) for t, v in zip(texts, fixed)])
            for old, new, v in zip(texts, joined, fixed):
                if _computed(old):  # stays exactly the package's text and markup (tests read it); see course.js
                    continue
                new = keep_units(new)
                if not v and new != str(old):
                    old.parent.replace(old, nodes.Text(new))


def _computed(text) -> bool:
    """Is ``text`` an {eval} value (myst-nb's ``<span class="output text_plain">``)?"""
    return isinstance(text.parent, nodes.inline) and "output" in text.parent.get("classes", ())


def _block_of(text):
    """The block ``text`` belongs to: its nearest TextElement above any inline markup."""
    parent = text.parent
    while parent is not None and not isinstance(parent, nodes.TextElement):
        parent = parent.parent
    while parent is not None and isinstance(parent, nodes.Inline) and isinstance(parent.parent, nodes.TextElement):
        parent = parent.parent
    return parent


def setup(app):
    app.add_post_transform(ChineseProse)
