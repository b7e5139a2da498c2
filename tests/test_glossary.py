"""Do glossary terms work on the site as Sphinx term references, from links JupyterLab also follows (issue 13)?"""

from __future__ import annotations

import re

from conftest import ROOT
from parallel_budget.book import glossary

CONF = """
extensions = ["myst_parser", "parallel_budget.book.glossary"]
myst_enable_extensions = ["deflist"]
exclude_patterns = ["_build"]
"""
GLOSSARY = """# 术语表

```{glossary}
KV cache
  : 推理时保存的键和值。

rank
  : 进程序号。
  第二行。
```
"""


def build(tmp_path, page: str):
    """A tiny Sphinx project (myst-parser and the glossary extension only): (exit code, warnings, html dir)."""
    from sphinx.cmd.build import build_main

    src = tmp_path / "src"
    (src / "book").mkdir(parents=True)
    (src / "conf.py").write_text(CONF, encoding="utf-8")
    (src / "index.md").write_text("# 首页\n\n```{toctree}\nbook/glossary\nbook/page\n```\n", encoding="utf-8")
    (src / "book" / "glossary.md").write_text(GLOSSARY, encoding="utf-8")
    (src / "book" / "page.md").write_text(page, encoding="utf-8")
    warnings = tmp_path / "warnings.txt"
    code = build_main(["-q", "-W", "--keep-going", "-w", str(warnings), "-b", "html", str(src), str(tmp_path / "html")])
    return code, warnings.read_text(encoding="utf-8"), tmp_path / "html"


def test_links_to_glossary_anchors_become_term_references(tmp_path):
    """Does [text](glossary.md#term-x) link to the entry (-W clean), and the glossary read `  : definition`?"""
    code, warnings, html = build(tmp_path, "# 正文\n\n一个 [rank](glossary.md#term-rank)，一个 [键值缓存](glossary.md#term-KV-cache)。\n")
    assert code == 0, warnings
    page = (html / "book" / "page.html").read_text(encoding="utf-8")
    assert re.search(r'<a class="reference internal" href="glossary.html#term-rank">.*?rank', page)
    assert re.search(r'href="glossary.html#term-KV-cache">.*?键值缓存', page)
    entries = (html / "book" / "glossary.html").read_text(encoding="utf-8")
    assert '<dt id="term-rank">' in entries and "进程序号。\n第二行。" in entries and "<p>: " not in entries


def test_a_link_to_an_unknown_term_fails_the_build(tmp_path):
    """Does a glossary anchor that names no entry warn (so -W fails), naming the anchor, and leave no dead link?"""
    code, warnings, html = build(tmp_path, "# 正文\n\n一个 [rank](glossary.md#term-ranks)。\n")
    assert code != 0 and "#term-ranks" in warnings and "term-rank" in warnings
    assert 'href="glossary.html#term-ranks"' not in (html / "book" / "page.html").read_text(encoding="utf-8")


def test_definition_markers_are_read_as_indentation():
    """Is `  : text` a definition line for Sphinx's glossary, with every other line unchanged?"""
    assert glossary.sphinx_lines(["rank", "  : 进程序号。", "  第二行：是的", "", "TP"]) == \
        ["rank", "  进程序号。", "  第二行：是的", "", "TP"]


def test_built_chapters_link_their_terms_to_glossary_entries(built_site):
    """On the built site, does every glossary link of a chapter point at an entry that glossary.html has?"""
    ids = set(re.findall(r'<dt id="(term-[^"]+)"', (built_site / "book" / "glossary.html").read_text(encoding="utf-8")))
    links = []
    for md in sorted((ROOT / "book").glob("*.md")):
        if "glossary.md#" in md.read_text(encoding="utf-8"):
            page = (built_site / "book" / f"{md.stem}.html").read_text(encoding="utf-8")
            links += [(md.stem, a) for a in re.findall(r'<a class="reference internal" href="glossary.html#([^"]+)"', page)]
    assert len(links) >= 15 and {a for _, a in links} <= ids, links
