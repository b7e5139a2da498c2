"""Do the chapters read in JupyterLab as on the site (issue 13)?  A real JupyterLab from this venv, driven
by Playwright and Debian's chromium, localhost only: double-click a chapter, Run All, read the prose."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

import parallel_budget as pb
from conftest import ROOT
from jupyterlab_server import NO_WINDOWING, NOTEBOOK, jupyterlab, run_all
from serve import Tab

pytestmark = pytest.mark.slow

RAW = ["{glue", ":::", "{term}", "{eval}", "{download}", "{raw}", "pb-calc", "pb-practice", "glue_text", "remove-input"]


def shots_dir(tmp: Path) -> Path:
    """Screenshots go to PB_SHOTS (if set) and the test's temporary folder."""
    return Path(os.environ.get("PB_SHOTS") or tmp)


def glossary_terms() -> set[str]:
    text = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    return set(re.findall(r"^(\S[^\n]*)\n  \S", text.split("```{glossary}")[1], re.M))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a copy of book/ and exercises/ (running a chapter must not touch the repository)."""
    tmp = tmp_path_factory.mktemp("jupyterlab")
    root = tmp / "root"
    for folder in ("book", "exercises"):
        shutil.copytree(ROOT / folder, root / folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    with jupyterlab(root, tmp / "user", user_settings=NO_WINDOWING) as server:
        yield server


@pytest.fixture()
def page(browser, lab):
    """A page on the JupyterLab server (``page.tab``: what it requested and logged, tests/serve.py:Tab)."""
    tab = Tab(browser, lab.url, viewport={"width": 1400, "height": 1000})
    tab.page.tab = tab
    try:
        yield tab.page
    finally:
        tab.context.close()


def open_by_double_click(page, lab, folder: str, name: str):
    page.goto(f"{lab.url}/lab/tree/{folder}", wait_until="domcontentloaded")
    item = page.locator(f'.jp-DirListing-item[title^="Name: {name}"]')
    item.wait_for(timeout=90_000)
    item.dblclick()
    page.wait_for_selector(f"{NOTEBOOK} .jp-Notebook", timeout=90_000)
    page.wait_for_selector(f"{NOTEBOOK} .jp-MarkdownCell .myst", timeout=60_000)  # jupyterlab-myst rendered it


def notebook_text(page) -> str:
    return page.evaluate(f"() => document.querySelector('{NOTEBOOK} .jp-Notebook').innerText")


def test_ring_chapter_double_click_run_all_reads_like_the_site(lab, page, tmp_path):
    """Does a double-click open the ring chapter as a notebook; after Run All, does the prose show the
    lesson's numbers (3 GB, 120 ms, 220 ms, 1.82) with nothing raw, admonitions rendered, answers closed,
    the ipywidgets panel where the site has its calculator, reacting to an edit; no stderr, no outside
    request?"""
    shots = shots_dir(tmp_path)
    open_by_double_click(page, lab, "book", "ring-allreduce.md")
    assert page.locator(".jp-FileEditor:visible").count() == 0, "the chapter opened as a text file"
    page.screenshot(path=str(shots / "jupyterlab-ring-opened.png"))

    run_all(page, lab)
    page.screenshot(path=str(shots / "jupyterlab-ring-after-run-all.png"))
    text = notebook_text(page)
    r = pb.ring_allreduce(4, "2 GB", "25 GB/s")
    s = pb.step_time("400 ms", 4, r.lower_bound)
    lesson = [pb.fmt(r.send_per_rank), pb.fmt(r.lower_bound), pb.fmt(s.step), f"{s.speedup:.3g}"]
    assert lesson == ["3 GB", "120 ms", "220 ms", "1.82"]
    for number in lesson:
        assert number in text, f"{number!r} is not in the rendered chapter"
    prose = page.evaluate(f"""() => [...document.querySelectorAll('{NOTEBOOK} .jp-MarkdownCell .myst')]
        .map(e => e.innerText).join('\\n')""")
    assert f"每 rank 发送 {pb.fmt(r.send_per_rank)}" in prose and f"{s.speedup:.3g} 倍" in prose
    for raw in RAW:
        assert raw not in text, f"raw {raw!r} shows in JupyterLab"
    assert not re.search(r"\bch2_\w+", prose), "an {eval} name shows instead of its value"

    # admonitions and dropdowns render; every answer starts closed
    assert page.locator(f"{NOTEBOOK} aside.myst-admonition").count() >= 5
    dropdowns = page.locator(f"{NOTEBOOK} details.myst-dropdown")
    assert dropdowns.count() >= 2
    assert page.locator(f"{NOTEBOOK} details.myst-dropdown[open]").count() == 0
    # glossary terms are links to the glossary notebook's entries, none left unresolved; downloads are links
    terms = glossary_links(page)
    assert {"ring all-reduce", "reduce-scatter", "all-gather", "bucket"} <= {t for t, _ in terms}, terms
    assert all(re.search(r"/files/book/glossary\.md(\?[^#]*)?#term-[\w-]+$", href) for _, href in terms), terms
    assert page.locator(f"{NOTEBOOK} .myst a.hover-link[href='#']").count() == 0, "a {term} left unresolved"
    download = page.locator(f"{NOTEBOOK} .myst a", has_text="02-ring-allreduce.ipynb")
    assert "/files/exercises/lesson/02-ring-allreduce.ipynb" in download.first.get_attribute("href")
    # the scaffolding is collapsed
    assert page.locator(f"{NOTEBOOK} .jp-InputPlaceholder").count() >= 4
    assert "assert ch2_send" not in text

    # the panel stands where the site mounts its calculator, and reacts
    panel = page.locator(f"{NOTEBOOK} .widget-vbox", has_text="ring all-reduce 与步时").first
    panel.scroll_into_view_if_needed()
    assert "220 ms" in panel.inner_text()
    bandwidth = panel.locator(".widget-text", has_text="单向有效带宽").locator("input")
    assert bandwidth.input_value() == "25 GB/s"
    bandwidth.fill("12.5 GB/s")
    bandwidth.press("Enter")
    slower = pb.fmt(pb.ring_allreduce(4, "2 GB", "12.5 GB/s").lower_bound)
    page.wait_for_function("([sel, t]) => [...document.querySelectorAll(sel)].some(e => e.innerText.includes(t))",
                           arg=[f"{NOTEBOOK} .widget-vbox .widget-html-content", slower], timeout=30_000)
    assert slower in panel.inner_text() and slower == "240 ms"
    panel.screenshot(path=str(shots / "jupyterlab-ring-panel.png"))

    stderr = page.locator(f'{NOTEBOOK} .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
    assert stderr.count() == 0, stderr.first.inner_text()
    assert page.locator(f"{NOTEBOOK} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']").count() == 0
    assert page.tab.offsite == []
    assert page.tab.errors == []  # no console error, none about glossary terms either

    # a term's link opens the glossary as a notebook, its entries rendered by jupyterlab-myst
    page.locator(f'{NOTEBOOK} .myst a[href*="glossary.md"][href$="#term-bucket"]').first.click()
    page.wait_for_selector(f'{NOTEBOOK} .myst dt[id^="term-"]', timeout=90_000)
    assert page.url.endswith("/lab/tree/book/glossary.md")
    entries = page.locator(f'{NOTEBOOK} .myst dt[id^="term-"]')
    assert entries.count() == len(glossary_terms()) and page.locator(f"{NOTEBOOK} .myst dt", has_text="bucket").count() == 1
    page.screenshot(path=str(shots / "jupyterlab-glossary-from-term-link.png"))
    assert page.tab.errors == [] and page.tab.offsite == []


def glossary_links(page) -> list:
    """(text, href) of every link of the open notebook's prose that points into glossary.md."""
    return page.evaluate(f"""() => [...document.querySelectorAll('{NOTEBOOK} .myst a')]
        .filter(a => (a.getAttribute('href') || '').includes('glossary.md'))
        .map(a => [a.textContent.trim(), a.getAttribute('href')])""")
