"""Does the book build -W clean, with every chapter, its computed ({eval}) numbers, and nothing online?"""

from __future__ import annotations

import re

import pytest
import yaml

import parallel_budget as pb
from conftest import ROOT

pytestmark = pytest.mark.slow

CHAPTERS = ["two-rank-update", "ring-allreduce", "zero-memory", "tp-pp", "debugging"]


def toc_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [c["file"] for c in part["chapters"]]
    return files


def test_toc_has_the_five_chapters_in_lesson_order():
    files = [f.removeprefix("book/") for f in toc_files()]
    positions = [files.index(c) for c in CHAPTERS]
    assert positions == sorted(positions)


@pytest.mark.parametrize("page", [f for f in toc_files()])
def test_every_page_is_a_myst_notebook_with_eval_numbers(page):
    """Has every page the jupytext header (else it is silently not executed) and an {eval} number?"""
    text = (ROOT / f"{page}.md").read_text(encoding="utf-8")
    assert "format_name: myst" in text, f"{page}.md lacks the jupytext header"
    assert "import parallel_budget" in text
    assert "{eval}`" in text


EVAL_SPAN = re.compile(r'<span class="output text_plain">([^<]*)</span>')  # what myst-nb renders for {eval}


def test_every_page_exists_with_computed_numbers(built_site):
    for page in toc_files():
        html = (built_site / f"{page}.html").read_text(encoding="utf-8")
        assert EVAL_SPAN.search(html), f"{page}: no {{eval}} number rendered"
        assert "{eval}" not in html and "{glue" not in html, f"{page}: a raw role reached the page"


def expected_numbers():
    r = pb.ring_allreduce(4, "2 GB", "25 GB/s")
    return {
        "book/ring-allreduce": [pb.fmt(r.send_per_rank), pb.fmt(r.lower_bound)],
        "book/zero-memory": [pb.fmt(row.total) for row in pb.zero_table(1e9, 4)],
    }


@pytest.mark.parametrize("page, numbers", list(expected_numbers().items()))
def test_eval_numbers_come_from_the_package(built_site, page, numbers):
    html = (built_site / f"{page}.html").read_text(encoding="utf-8")
    shown = EVAL_SPAN.findall(html)
    for n in numbers:
        assert n in shown, f"{page}: {n!r} not shown by {{eval}} (found {shown})"


ONLINE = re.compile(
    r'<script[^>]+src="(?:https?:)?//|<link[^>]+href="(?:https?:)?//[^"]+\.(?:css|js)|@import\s+url\((?:https?:)?//'
    r'|unpkg\.com|cdn\.jsdelivr|cdnjs|fonts\.googleapis'
)


def test_no_page_loads_anything_from_the_network(built_site):
    """Does any built page reference a script, stylesheet or CDN outside the site?"""
    offenders = []
    for f in built_site.rglob("*.html"):
        m = ONLINE.search(f.read_text(encoding="utf-8", errors="replace"))
        if m:
            offenders.append(f"{f.relative_to(built_site)}: {m.group(0)}")
    assert not offenders, offenders


def test_mathjax_is_served_locally(built_site):
    html = (built_site / "book" / "ring-allreduce.html").read_text(encoding="utf-8")
    assert re.search(r'<script[^>]+src="\.\./_static/mathjax/tex-chtml\.js', html)


def test_search_is_chinese(built_site):
    """Is the search index built with the Chinese (jieba) splitter?"""
    import json

    js = (built_site / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(js[js.index("(") + 1 : js.rindex(")")])
    words = [t for t in index["terms"] if re.fullmatch(r"[\u4e00-\u9fff]{2,}", t)]
    assert "通信" in index["terms"], "Chinese words are not in the search index"
    assert len(words) >= 10
