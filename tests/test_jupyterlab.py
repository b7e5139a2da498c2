"""Do the chapters read in JupyterLab as on the site, and as a student finds them (issues 13, 25)?

The first tests read files only (a second).  The three browser tests drive a real JupyterLab from this venv with
Playwright and Debian's chromium, localhost only, on one server (about 2-3 minutes together on the loaded
2-core machine): double-click a chapter, Run All, read the prose, click a lab and interrupt it; read a chapter
and the glossary, close them, and find every file as it was; see the Chinese interface without nbgrader's
instructor tools.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import jupytext
import psutil
import pytest
from jupytext.config import load_jupytext_configuration_file

import parallel_budget as pb
from conftest import ROOT
from jupyterlab_server import (NO_WINDOWING, NOTEBOOK, jupyterlab, menu, open_by_double_click, prose, prose_blocks,
                               run_all)
from serve import Tab

RAW = ["{glue", ":::", "{term}", "{eval}", "{download}", "{raw}", "pb-calc", "pb-practice", "glue_text", "remove-input"]
PAGES = sorted((ROOT / "book").glob("*.md"))
VENV = ROOT / ".venv"
# nbgrader's instructor tools, hidden for students (scripts/setup.sh) and enabled by the formgrader command.
INSTRUCTOR_TOOLS = json.loads((ROOT / "parallel_budget" / "grading" / "jupyter_config" / "labconfig" /
                               "page_config.json").read_text(encoding="utf-8"))["disabledExtensions"]
CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"
STRAY_SPACE = re.compile(f"[{CJK}]\\s+[{CJK}]")


def stray_spaces(blocks) -> list[str]:
    """Whitespace between two Chinese characters (or full-width punctuation) inside a rendered block (paragraph,
    list item, ...): what a line break inside a Chinese paragraph of the source becomes in the browser
    ("互连， 单向有效带宽").  Each finding comes with its neighbourhood."""
    return [block[max(0, m.start() - 12):m.end() + 12] for block in blocks for m in STRAY_SPACE.finditer(block)]


def test_stray_space_checker_catches_a_wrapped_line():
    """Would the rendered-text check catch a space left by wrapping a Chinese line, and pass Latin words?"""
    assert stray_spaces(["节点之间的互连，\n单向有效带宽"]) == ["节点之间的互连，\n单向有效带宽"]
    assert stray_spaces(["每 rank 发送 3 GB，然后 all-gather。", "第一段。", "第二段。"]) == []


# ------------------------------------------------------------------ files: reading a chapter rewrites nothing

def jupyterlab_save(text: str, config) -> str:
    """What jupytext writes back after JupyterLab opened and ran a page: the kernelspec and language of the
    kernel it started, jupyterlab-myst's {eval} values in each Markdown cell, ipywidgets' state."""
    nb = jupytext.reads(text, fmt="md:myst")
    kernel = json.loads((VENV / "share" / "jupyter" / "kernels" / "python3" / "kernel.json").read_text())
    nb.metadata["kernelspec"] = {"display_name": kernel["display_name"], "language": kernel["language"],
                                 "name": "python3"}
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.2", "file_extension": ".py"}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.metadata["user_expressions"] = [{"expression": "ch2_send", "result": {"status": "ok"}}]
        else:
            cell.outputs, cell.execution_count = [{"output_type": "stream", "name": "stdout", "text": "x"}], 1
    return jupytext.writes(nb, fmt="md:myst", config=config)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_saving_a_page_in_jupyterlab_writes_back_the_same_bytes(page):
    """Would JupyterLab's save (autosave included) of a page that was opened and run write back exactly the
    file (book/jupytext.toml: no jupytext version, no user_expressions; the venv's kernelspec; every YAML
    block as jupytext writes it)?  A long caption must be wrapped as jupytext wraps it: run
    `.venv/bin/jupytext --to myst book/<page>.md` once."""
    config = load_jupytext_configuration_file(str(ROOT / "book" / "jupytext.toml"))
    text = page.read_text(encoding="utf-8")
    saved = jupyterlab_save(text, config)
    if saved != text:
        import difflib

        diff = "\n".join(difflib.unified_diff(text.splitlines(), saved.splitlines(), "file", "saved", lineterm="", n=0))
        pytest.fail(f"{page.name}: a save in JupyterLab would rewrite it:\n{diff[:3000]}")


def test_the_venv_ships_the_students_jupyterlab_settings():
    """Does setup.sh put in the venv (never in $HOME): chapters open as notebooks, the zh-CN interface, kernels
    that end with their tab (a notebook's at once, any other within minutes), and nbgrader's instructor tools
    hidden?"""
    overrides = json.loads((VENV / "share" / "jupyter" / "lab" / "settings" / "overrides.json").read_text())
    assert overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]["markdown"] == "Jupytext Notebook"
    assert overrides["@jupyterlab/translation-extension:plugin"]["locale"] == "zh_CN"
    assert overrides["@jupyterlab/notebook-extension:tracker"]["kernelShutdown"] is True
    page_config = json.loads((VENV / "etc" / "jupyter" / "labconfig" / "page_config.json").read_text())
    assert {k for k, v in page_config["disabledExtensions"].items() if v} >= set(INSTRUCTOR_TOOLS)
    assert set(INSTRUCTOR_TOOLS) >= {"@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:formgrader",
                                     "@jupyter/nbgrader:validate-assignment"}
    assert not any(INSTRUCTOR_TOOLS.values()), "the formgrader command's page config must enable them"
    server = json.loads((VENV / "etc" / "jupyter" / "jupyter_server_config.d" / "parallel_budget.json").read_text())
    culling = server["MappingKernelManager"]
    assert 0 < culling["cull_idle_timeout"] <= 300 and culling["cull_connected"] is False  # closed tabs only


# ------------------------------------------------------------------ JupyterLab in a browser

@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a copy of book/ and exercises/ (running a chapter must not touch the repository);
    the test user's settings: every cell in the page, autosave after 2 s (the venv's is 5 s)."""
    tmp = tmp_path_factory.mktemp("jupyterlab")
    root = tmp / "root"
    for folder in ("book", "exercises"):
        shutil.copytree(ROOT / folder, root / folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    settings = {**NO_WINDOWING, "@jupyterlab/docmanager-extension:plugin": {"autosaveInterval": 2}}
    # the venv's culling of kernels no tab is connected to, after 4 s instead of 60 s idle
    culling = ("--MappingKernelManager.cull_idle_timeout=4", "--MappingKernelManager.cull_interval=2")
    with jupyterlab(root, tmp / "user", user_settings=settings, args=culling) as server:
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
        lab.end_sessions()  # each test starts with no kernel of an earlier one (see Lab.end_sessions)


def shots_dir(tmp: Path) -> Path:
    """Screenshots go to PB_SHOTS (if set) and the test's temporary folder."""
    return Path(os.environ.get("PB_SHOTS") or tmp)


def glossary_terms() -> set[str]:
    text = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    block = text.split("```{glossary}")[1].split("\n```")[0]
    return set(re.findall(r"^(\S[^\n]*)\n  \S", block, re.M))


def glossary_links(page) -> list:
    """(text, href) of every link of the open notebook's prose that points into glossary.md."""
    return page.evaluate(f"""() => [...document.querySelectorAll('{NOTEBOOK} .myst a')]
        .filter(a => (a.getAttribute('href') || '').includes('glossary.md'))
        .map(a => [a.textContent.trim(), a.getAttribute('href')])""")


def lab_ranks(lab) -> list:
    """Live rank processes of any lab started under the JupyterLab server (its kernels' children)."""
    found = []
    for p in psutil.Process(lab.process.pid).children(recursive=True):
        try:
            if "PB_LAB_RUN_ID" in p.environ() and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def lab_panel(page, name: str):
    """The button panel of lab ``name`` (its code cell's output)."""
    cell = page.locator(f"{NOTEBOOK} .jp-CodeCell", has_text=f'lab_cell(run_lab, "{name}")')
    return cell.locator(".pb-lab-button")


def wait_for_text(page, locator, text: str, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while text not in locator.inner_text():
        assert time.monotonic() < deadline, f"{text!r} never appeared: {locator.inner_text()!r}"
        page.wait_for_timeout(250)


def numbers_in(text: str) -> bool:
    """Does the ring chapter's prose show its numbers (and no {eval} name)?"""
    return "每 rank 发送 3 GB" in text and "1.82 倍" in text and not re.search(r"\bch2_\w+", text)


@pytest.mark.slow
def test_ring_chapter_numbers_first_labs_on_click(lab, page, tmp_path):
    """Double-click the ring chapter: does it open as a notebook that says what Run All does; after Run All do
    the numbers (3 GB, 120 ms, 220 ms, 1.82) show with nothing raw, no lab having run, the panel reacting
    (backward ratio too), no stray space in the Chinese; does a lab run on its button, and after an
    interrupted lab do the numbers stay and no rank live on?"""
    shots = shots_dir(tmp_path)
    open_by_double_click(page, lab, "book", "ring-allreduce.md")
    assert page.locator(".jp-FileEditor:visible").count() == 0, "the chapter opened as a text file"
    assert "运行 → 运行所有单元格" in prose(page) and not numbers_in(prose(page))
    page.screenshot(path=str(shots / "jupyterlab-ring-opened.png"))

    run_all(page, lab)
    page.wait_for_function(f"""() => [...document.querySelectorAll('{NOTEBOOK} .jp-MarkdownCell .myst')]
        .some(e => e.textContent.includes('每 rank 发送 3 GB'))""", timeout=60_000)
    text = prose(page)
    r = pb.ring_allreduce(4, "2 GB", "25 GB/s")
    s = pb.step_time("400 ms", 4, r.lower_bound)
    lesson = [pb.fmt(r.send_per_rank), pb.fmt(r.lower_bound), pb.fmt(s.step), f"{s.speedup:.3g}"]
    assert lesson == ["3 GB", "120 ms", "220 ms", "1.82"]
    assert all(number in text for number in lesson) and numbers_in(text)
    notebook = page.evaluate(f"() => document.querySelector('{NOTEBOOK} .jp-Notebook').innerText")
    for raw in RAW:
        assert raw not in notebook, f"raw {raw!r} shows in JupyterLab"
    found = stray_spaces(prose_blocks(page))
    assert found == [], f"a space between Chinese characters (a line break of the source?): {found}"
    page.screenshot(path=str(shots / "jupyterlab-ring-after-run-all.png"))

    # Run All drew the labs' buttons and ran no lab
    assert lab_panel(page, "ring_allreduce").count() == 1 and lab_panel(page, "overlap").count() == 1
    assert page.locator(f"{NOTEBOOK} .pb-lab").count() == 0 and lab_ranks(lab) == []

    # admonitions and dropdowns render; every answer starts closed; the scaffolding is collapsed
    assert page.locator(f"{NOTEBOOK} aside.myst-admonition").count() >= 5
    assert page.locator(f"{NOTEBOOK} details.myst-dropdown").count() >= 2
    assert page.locator(f"{NOTEBOOK} details.myst-dropdown[open]").count() == 0
    assert page.locator(f"{NOTEBOOK} .jp-InputPlaceholder").count() >= 4 and "assert ch2_send" not in notebook
    # glossary terms are links to the glossary notebook's entries, none left unresolved
    terms = glossary_links(page)
    assert {"ring all-reduce", "reduce-scatter", "all-gather", "bucket"} <= {t for t, _ in terms}, terms
    assert all(re.search(r"/files/book/glossary\.md(\?[^#]*)?#term-[\w-]+$", href) for _, href in terms), terms
    assert page.locator(f"{NOTEBOOK} .myst a.hover-link[href='#']").count() == 0, "a {term} left unresolved"

    # the panel stands where the site mounts its calculator, has the calculator's controls, and reacts
    panel = page.locator(f"{NOTEBOOK} .widget-vbox", has_text="ring all-reduce 与步时").first
    panel.scroll_into_view_if_needed()
    assert "220 ms" in panel.inner_text() and "反向耗时是前向的几倍" in panel.inner_text()
    bandwidth = panel.locator(".widget-text", has_text="单向有效带宽").locator("input")
    assert bandwidth.input_value() == "25 GB/s"
    bandwidth.fill("12.5 GB/s")
    bandwidth.press("Enter")
    wait_for_text(page, panel, "240 ms", 30)
    assert pb.fmt(pb.ring_allreduce(4, "2 GB", "12.5 GB/s").lower_bound) == "240 ms"
    bandwidth.fill("25 GB")
    bandwidth.press("Enter")
    wait_for_text(page, panel, "输入有误", 30)
    assert "“单向有效带宽”需要带宽" in panel.inner_text() and "[information]" not in panel.inner_text()
    panel.screenshot(path=str(shots / "jupyterlab-ring-panel.png"))

    # a lab runs when its button is clicked, and shows the measured table
    ring = lab_panel(page, "ring_allreduce")
    ring.locator("button").click()
    wait_for_text(page, ring, "完成", 120)
    assert ring.locator(".pb-lab").count() == 1 and "实测" in ring.inner_text()
    # an interrupted lab: every rank ends, the prose keeps its numbers, Run All still works
    overlap = lab_panel(page, "overlap")
    overlap.locator("button").click()
    deadline = time.monotonic() + 60
    while not lab_ranks(lab):
        assert "完成" not in overlap.inner_text() and time.monotonic() < deadline, "no rank of the lab started"
        page.wait_for_timeout(100)
    menu(page, "内核", "中断内核")
    wait_for_text(page, overlap, "已中断", 60)
    deadline = time.monotonic() + 15
    while lab_ranks(lab):
        assert time.monotonic() < deadline, f"ranks outlived the interrupt: {lab_ranks(lab)}"
        page.wait_for_timeout(250)
    assert numbers_in(prose(page))
    run_all(page, lab)
    assert numbers_in(prose(page)) and lab_ranks(lab) == []
    page.screenshot(path=str(shots / "jupyterlab-ring-lab-interrupted.png"))

    stderr = page.locator(f'{NOTEBOOK} .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
    assert stderr.count() == 0, stderr.first.inner_text()
    assert page.locator(f"{NOTEBOOK} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']").count() == 0
    assert page.tab.offsite == [] and page.tab.errors == []


def wait_until_saved(page, timeout: float = 90) -> None:
    """Wait until every open notebook's kernel is idle (starting one changes the notebook's metadata) and no
    open document is unsaved (the test's autosave runs every 2 s)."""
    deadline = time.monotonic() + timeout
    while page.evaluate("""() => [...jupyterapp.shell.widgets('main')].some(w => w.context?.model?.dirty
            || (w.sessionContext && w.sessionContext.session?.kernel?.status !== 'idle'))"""):
        assert time.monotonic() < deadline, "a document stayed unsaved past autosave"
        page.wait_for_timeout(500)
    page.wait_for_timeout(2500)  # and one autosave period more: nothing becomes unsaved again


def close_tab(page) -> None:
    """文件 → 关闭标签页 on the document in front; fail if JupyterLab asks anything (e.g. to save)."""
    menu(page, "文件", "关闭标签页")
    page.wait_for_timeout(1500)
    dialog = page.locator(".jp-Dialog")
    assert dialog.count() == 0, f"closing asked: {dialog.first.inner_text()}"


@pytest.mark.slow
def test_reading_changes_no_file_and_closing_ends_the_kernels(lab, page, tmp_path):
    """Open a chapter and Run All, follow an exercise link and a glossary link (both open inside JupyterLab, the
    glossary at the term), Run All in the glossary, wait past autosave and close every tab: no question asked, every file of the book
    byte for byte as in the repository, and no kernel left running?"""
    open_by_double_click(page, lab, "book", "ring-allreduce.md")
    run_all(page, lab)
    page.wait_for_function(f"""() => [...document.querySelectorAll('{NOTEBOOK} .jp-MarkdownCell .myst')]
        .some(e => e.textContent.includes('每 rank 发送 3 GB'))""", timeout=60_000)

    # the exercise notebook opens in JupyterLab (it is not downloaded)
    page.locator(f"{NOTEBOOK} .myst a", has_text="02-ring-allreduce.ipynb").first.click()
    page.wait_for_function("() => jupyterapp.shell.currentWidget?.context?.path === "
                           "'exercises/lesson/02-ring-allreduce.ipynb'", timeout=60_000)
    page.wait_for_selector(f"{NOTEBOOK} .jp-Cell", timeout=60_000)
    wait_until_saved(page)
    close_tab(page)

    # a term's link opens the glossary notebook, its entries rendered by jupyterlab-myst, at that term
    # (far down the page: parallel-budget-anchors scrolls there once it is rendered)
    page.locator(f'{NOTEBOOK} .myst a[href*="glossary.md"][href$="#term-reduce-scatter"]').first.click()
    term = page.locator(f'{NOTEBOOK} .myst dt[id="term-reduce-scatter"]')
    term.wait_for(timeout=90_000)
    assert page.url.endswith("/lab/tree/book/glossary.md")
    page.wait_for_function("""sel => { const box = document.querySelector(sel).getBoundingClientRect();
        return box.top >= 0 && box.bottom <= window.innerHeight; }""",
                           arg=f'{NOTEBOOK} .myst dt[id="term-reduce-scatter"]', timeout=15_000)
    assert page.locator(f'{NOTEBOOK} .myst dt[id^="term-"]').count() == len(glossary_terms())
    run_all(page, lab)
    found = stray_spaces(prose_blocks(page))
    assert found == [], f"a space between Chinese characters (a line break of the source?): {found}"
    page.screenshot(path=str(shots_dir(tmp_path) / "jupyterlab-glossary-from-term-link.png"))

    wait_until_saved(page)
    while page.evaluate("() => [...jupyterapp.shell.widgets('main')].filter(w => w.context).length") > 0:
        page.evaluate("() => jupyterapp.shell.activateById([...jupyterapp.shell.widgets('main')].find(w => w.context).id)")
        close_tab(page)
    deadline = time.monotonic() + 30
    while lab.api("kernels"):
        assert time.monotonic() < deadline, f"kernels outlived their tabs: {lab.api('kernels')}"
        page.wait_for_timeout(500)
    changed = [str(p.relative_to(lab.root)) for p in sorted((lab.root / "book").rglob("*"))
               if p.is_file() and ".ipynb_checkpoints" not in p.parts
               and p.read_bytes() != (ROOT / p.relative_to(lab.root)).read_bytes()]
    assert changed == [], f"reading rewrote {changed}"
    # JupyterLab's debugger asks a closing notebook's kernel for its state; a kernel shut down with its tab
    # cancels that request (a console message of JupyterLab's own, nothing the page shows)
    errors = [e for e in page.tab.errors if "Could not restore the debugger state: Canceled future" not in e]
    assert page.tab.offsite == [] and errors == []


@pytest.mark.slow
def test_students_jupyterlab_is_chinese_without_instructor_tools(lab, page, tmp_path):
    """Are the File menu and the restart dialog Chinese, and are nbgrader's create-assignment, formgrader,
    courses and Validate absent for a student (the formgrader command has them: test_formgrader.py)?"""
    shots = shots_dir(tmp_path)
    open_by_double_click(page, lab, "exercises/lesson", "02-ring-allreduce.ipynb")
    page.wait_for_function("() => jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel", timeout=90_000)
    menu(page, "文件")
    items = page.locator(".lm-Menu-itemLabel").all_inner_texts()
    assert {"新建", "关闭标签页", "保存全部"} <= set(items), items
    page.screenshot(path=str(shots / "jupyterlab-file-menu.png"))
    page.keyboard.press("Escape")
    menu(page, "内核", "重启内核…")
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(timeout=30_000)
    assert "重启内核？" in dialog.inner_text() and "所有变量都将丢失" in dialog.inner_text()
    page.screenshot(path=str(shots / "jupyterlab-restart-dialog.png"))
    dialog.locator("button", has_text="取消").click()

    for plugin in INSTRUCTOR_TOOLS:
        assert page.evaluate("p => jupyterapp.hasPlugin(p) && jupyterapp.isPluginActivated(p)", plugin) is False, plugin
    for command in ("nbgrader:open-formgrader", "nbgrader:open-create-assignment", "nbgrader:open-course-list"):
        assert page.evaluate("c => jupyterapp.commands.hasCommand(c)", command) is False, command
    toolbar = page.locator(f"{NOTEBOOK} .jp-NotebookPanel-toolbar").inner_text()
    assert "Validate" not in toolbar and "验证" not in toolbar
    assert page.tab.offsite == [] and page.tab.errors == []
