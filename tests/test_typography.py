"""Is the course typeset as Chinese text should be: paired curly quotes, full-width punctuation, one term each?

The quote and punctuation checks read the built pages (what a reader sees, after Sphinx's
smartquotes); the term checks read the chapter sources.
"""

from __future__ import annotations

import re

import pytest

from conftest import ROOT

bs4 = pytest.importorskip("bs4")

HAN = "\u4e00-\u9fff"
# ASCII punctuation touching a Chinese character: should be full-width in running text (GB/T 15834).
ASCII_NEXT_TO_HAN = re.compile(rf"[{HAN}][,;:?!()]|[,;:?!()][{HAN}]")
SKIP = ["script", "style", "code", "pre", "kbd", "samp", "math", "svg", "textarea", "select", "option"]


def pages(site):
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.parts and "genindex" not in p.name)


def visible_text(html: str, *, prose_only: bool = False) -> str:
    soup = bs4.BeautifulSoup(html, "html.parser")
    for tag in soup(SKIP):
        tag.decompose()
    for tag in soup.select(".math, .MathJax, .highlight, .headerlink"):
        tag.decompose()
    if prose_only:
        # executed cell outputs (lab tables, repr of results) are program output, not running text
        for tag in soup.select(".cell_output, .output"):
            tag.decompose()
        main = soup.select_one("main") or soup.select_one("article") or soup
        return main.get_text(" ")
    return soup.get_text(" ")


def unopened_closing_quotes(text: str) -> list:
    """Positions (with context) of a ” that no “ opened, and of “ that nests in another “."""
    bad, depth = [], 0
    for m in re.finditer("[“”]", text):
        if m.group() == "“":
            if depth:
                bad.append(text[max(0, m.start() - 30): m.end() + 30])
            depth += 1
        elif depth == 0:
            bad.append(text[max(0, m.start() - 30): m.end() + 30])
        else:
            depth -= 1
    return bad


def test_quote_checker_catches_smartquotes_output():
    """Would the check notice ASCII quotes that smartquotes turned into ”…”, but accept “…”?"""
    assert unopened_closing_quotes("所谓”同步”其实")
    assert unopened_closing_quotes("一个“开头“又一个")
    assert not unopened_closing_quotes("所谓“同步”和“平均”")
    assert ASCII_NEXT_TO_HAN.search("读完本章,你能够") and not ASCII_NEXT_TO_HAN.search("读完本章，你能够 (R-1)/R")


def test_every_closing_quote_has_an_opening_one(built_site):
    """Is every ” on every built page preceded by its “ (no ASCII quote rendered as ”…”)?"""
    found = {}
    for page in pages(built_site):
        bad = unopened_closing_quotes(visible_text(page.read_text(encoding="utf-8")))
        if bad:
            found[str(page.relative_to(built_site))] = bad[:3]
    assert found == {}, found


def test_chinese_prose_uses_full_width_punctuation(built_site):
    """Does no running text of the site put an ASCII , ; : ? ! ( ) next to a Chinese character?"""
    found = {}
    for page in pages(built_site):
        text = visible_text(page.read_text(encoding="utf-8"), prose_only=True)
        hits = [text[max(0, m.start() - 12): m.end() + 12] for m in ASCII_NEXT_TO_HAN.finditer(text)]
        if hits:
            found[str(page.relative_to(built_site))] = hits[:5]
    assert found == {}, found


# ---------------------------------------------------------------- one term each (sources)

def prose(path) -> str:
    """The Markdown outside code fences (except {glossary}) and inline code."""
    out, fence = [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^(`{3,})(.*)$", line)
        if m:
            if fence is None:
                d = re.match(r"\{([a-z-]+)\}", m.group(2).strip())
                fence = "code" if not d or d.group(1) in ("code-cell", "code", "code-block", "raw") else (
                    "glossary" if d.group(1) == "glossary" else "prose")
            elif not m.group(2).strip():
                fence = None
            continue
        if fence == "glossary" and line and not line.startswith(" "):
            continue  # a glossary entry's own (English) name
        if fence != "code":
            out.append(re.sub(r"(\{[a-z:-]+\})?`[^`]*`", "", line))
    return "\n".join(out)


CHAPTERS = sorted((ROOT / "book").glob("*.md"))
# (pattern that must not appear, the chosen term)
TERMS = [
    (r"互联", "互连"),
    (r"微批(?!次)", "微批次"),
    (r"\d+\s*字节\s*/\s*参数", "B/参数,例如 16 B/参数"),
    (r"(?<!设备)(?<!主机)(?<!显存与)内存(?!”)", "显存(设备内存);“内存”只用于主机内存"),
    (r"第\s*0\d\s*[课章]", "第 3 课 / 第 3 章,不补零"),
    (r"(?<![(（])\bhang\b(?![)）])", "挂起(hang 只作括注)"),
    (r"挂住|hang 住", "挂起"),
]


@pytest.mark.parametrize("pattern, term", TERMS)
def test_one_term_each(pattern, term):
    """Does every page use the chosen term (互连, 微批次, B/参数, 显存, 第 N 课, 挂起)?"""
    found = {p.name: m for p in CHAPTERS if (m := re.findall(rf".{{0,12}}{pattern}.{{0,12}}", prose(p)))}
    assert found == {}, f"use {term}: {found}"


def test_the_lesson_says_once_which_lesson_of_the_series_it_is():
    """Does the introduction say this is lesson 5 of a series, and no other page restate it differently?"""
    intro = prose(ROOT / "book" / "intro.md")
    assert re.search(r"系列课程的第 5 课", intro)
    for p in CHAPTERS:
        assert not re.search(r"第 [0-46-9] 课(?!”)", prose(p)) or "本系列" in prose(p), p.name
