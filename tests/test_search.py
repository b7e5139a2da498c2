"""Does the site's search find what a student types, show readable excerpts, and work from disk?

The course's words (通信预算, 挂起, 方案构建器 ...), glossary terms and units ("GB/s" and "Gb/s", told
apart) go through Sphinx's Chinese search with the course's jieba dictionary and splitter
(parallel_budget.book.search); the first result must be the page that teaches the word.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

from parallel_budget.book import search

# What a student types -> the page that must come first.
FIRST = {
    "通信预算": "book/plan-record.html",
    "挂起": "book/debugging.html",
    "方案构建器": "book/plan-builder.html",
    "构建器": "book/plan-builder.html",
    "流水线气泡": "book/tp-pp.html",
    "集合通信": "book/two-rank-update.html",
    "集体通信": "book/two-rank-update.html",
    "单向有效带宽": "book/ring-allreduce.html",
    "GB/s": "book/ring-allreduce.html",
    "Gb/s": "book/ring-allreduce.html",
    "微批次": "book/tp-pp.html",
    "hang": "book/glossary.html",
}
DONE = "() => { const s = document.querySelector('#search-results .search-summary'); return s && s.textContent.length > 0; }"
RESULTS = "[...document.querySelectorAll('#search-results ul.search > li > a')].map((a) => a.getAttribute('href'))"


def run_search(tab, query: str):
    page = tab.open(f"search.html?q={quote(query)}")
    page.wait_for_function(DONE)
    return page


@pytest.mark.slow
def test_each_term_finds_its_page_first(tab):
    """Does each of these searches list the page that teaches the word first?"""
    wrong = {}
    for query, first in FIRST.items():
        hits = run_search(tab, query).evaluate(RESULTS)
        if not hits or hits[0].split("#")[0] != first:
            wrong[query] = hits[:3]
    assert not wrong, wrong


@pytest.mark.slow
def test_units_are_tokens_and_bits_are_not_bytes(tab):
    """Are "GB/s" and "Gb/s" searched as units (not "GB" + "s"), and does a word between Chinese terms not stop the search?"""
    page = run_search(tab, "Gb/s")
    assert page.evaluate("splitQuery('25 Gb/s 和 GB/s 与 Gbps')") == ["gbit/s", "gb/s", "gbit/s", "25"]
    assert page.evaluate("splitQuery('流水线的气泡')") == ["流水线", "气泡"]
    hits = run_search(tab, "流水线的气泡").evaluate(RESULTS)
    assert "book/tp-pp.html" in [h.split("#")[0] for h in hits]


@pytest.mark.slow
def test_excerpts_show_no_raw_tex(tab):
    """Do the excerpts under the results read as text, with formulas left out instead of their TeX?"""
    page = run_search(tab, "ring all-reduce")
    page.wait_for_function("document.querySelectorAll('#search-results p.context').length >= 3")
    excerpts = page.locator("#search-results p.context").all_inner_texts()
    assert excerpts
    for text in excerpts:
        assert "\\(" not in text and "\\frac" not in text and "$$" not in text, text


@pytest.mark.slow
def test_search_from_disk_lists_pages_and_says_why_no_excerpts(disk_tab):
    """Opened from disk, does search list the results, say in Chinese that excerpts need the site served, and raise nothing?"""
    page = run_search(disk_tab, "通信预算")
    assert page.evaluate(RESULTS)[0].split("#")[0] == FIRST["通信预算"]
    assert "http.server" in page.locator(".pb-search-note").inner_text()
    assert page.locator("#search-results p.context").count() == 0  # disk_tab fails on any console error


def test_the_dictionary_holds_the_course_terms_and_the_glossary():
    """Does the jieba dictionary carry the course's terms and the glossary's Chinese names?"""
    words = set(search.dictionary_lines())
    assert {"通信预算", "挂起", "方案构建器", "流水线气泡", "集合通信", "集体通信", "单向有效带宽"} <= words
    glossary = search.glossary_terms(search.GLOSSARY.read_text(encoding="utf-8"))
    assert {"all-gather", "流水线气泡", "微批次", "GB/s", "Gb/s"} <= set(glossary)
    assert set(search.TAUGHT) <= set(FIRST)


@pytest.mark.parametrize("text, tokens", [
    ("25 GB/s", ["gb/s"]), ("25 Gb/s", ["gbit/s"]), ("25 Gbps", ["gbit/s"]), ("2 GiB", ["gib"]), ("8 Mb", ["mbit"]),
    ("all-gather 与 reduce-scatter", ["all-gather", "reduce-scatter"]),
])
def test_the_index_keeps_units_and_hyphenated_words(text, tokens):
    """Does the indexer keep each unit (bytes and bits apart) and hyphenated word as one word?"""
    words = search.SearchCourse({}).split(text)
    for t in tokens:
        assert t in words
    assert "s" not in words
