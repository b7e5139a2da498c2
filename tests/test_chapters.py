"""Does every chapter page carry its goals, figures, computed ({eval}) numbers, answers and misconception
boxes, and is no number in the prose typed by hand?"""

from __future__ import annotations

import re

import pytest

import parallel_budget as pb
from conftest import ROOT

CHAPTERS = ["two-rank-update", "ring-allreduce", "zero-memory", "tp-pp", "debugging"]
PAGES = CHAPTERS + ["plan-builder", "intro", "exercises", "reading-guide", "next-lesson", "glossary"]

# Numbers with a unit that a page may type by hand: the given inputs of its examples, nothing derived.
GIVEN = {
    "intro": {"400 ms"},
    "two-rank-update": set(),
    "ring-allreduce": {"2 GB", "25 GB/s", "25 Gb/s", "400 ms", "1 GB"},
    "zero-memory": {"6 GB"},
    "tp-pp": {"100 GB/s", "12.5 GB/s", "10 ms", "15 ms"},
    "debugging": set(),
    # Product names (Llama 2 7B/70B, A100 40GB, H100 80GB), the unit slip of the acceptance question, the ideal 16×.
    "plan-builder": {"7 B", "70 B", "40 GB", "80 GB", "200 Gb/s", "25 Gb/s", "16 倍"},
    "exercises": {"2 GB", "25 GB/s", "12.5 GB/s", "4 GB", "50 GB/s"},
    "reading-guide": set(),
    "next-lesson": set(),
    "glossary": set(),
}

NUMBER_WITH_UNIT = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(GB/s|Gb/s|GiB|GB|MB|TB|ms|s|%|倍|B)(?![A-Za-z])")

# The eight misconceptions of the issue: (page, words in the box title).
MISCONCEPTIONS = [
    ("ring-allreduce", "Gb/s"),
    ("ring-allreduce", "接收"),
    ("ring-allreduce", "全网总量"),
    ("debugging", "平均做两次"),
    ("zero-memory", "激活"),
    ("tp-pp", "ZeRO"),
    ("debugging", "超时"),
    ("debugging", "最新文件"),
]

FIGURES = {
    "two-rank-update": ["update_outcomes_figure"],
    "ring-allreduce": ["ring_rounds_figure", "step_timeline_figure"],
    "zero-memory": ["zero_bars_figure"],
    "tp-pp": ["pipeline_gantt_figure"],
    "debugging": ["hang_sequence_figure"],
}
CALCS = {
    "two-rank-update": {"update"},
    "ring-allreduce": {"ring"},
    "zero-memory": {"zero"},
    "tp-pp": {"pipeline", "tp"},
    "debugging": set(),
}
PANELS = {
    "two-rank-update": "update_panel",
    "ring-allreduce": "ring_panel",
    "zero-memory": "zero_panel",
    "tp-pp": "pipeline_panel",
    "debugging": "hang_panel",
}


def source(page: str) -> str:
    return (ROOT / "book" / f"{page}.md").read_text(encoding="utf-8")


def code_cells(text: str) -> list[tuple[str, str]]:
    """(options, body) of every {code-cell}."""
    return re.findall(r"```\{code-cell\}[^\n]*\n(---\n.*?\n---\n|(?::[^\n]*\n)*)(.*?)\n```", text, re.S)


def prose(text: str) -> str:
    """The page without front matter, code cells, raw blocks, math, inline code and {eval} roles."""
    text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)
    text = re.sub(r"```\{(?:code-cell|raw|glossary)\}.*?\n```", "", text, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", "", text, flags=re.S)
    text = re.sub(r"\$[^$\n]+\$", "", text)
    text = re.sub(r"\{eval\}`[^`]*`", "", text)
    text = re.sub(r"`[^`\n]*`", "", text)
    return text


@pytest.mark.parametrize("page", PAGES)
def test_no_hand_typed_result_in_prose(page):
    """Is every number with a unit in the prose either computed ({eval}) or one of the page's given inputs?"""
    found = {f"{m.group(1)} {m.group(2)}" for m in NUMBER_WITH_UNIT.finditer(prose(source(page)))}
    typed = found - GIVEN[page]
    assert not typed, f"{page}.md types {sorted(typed)} by hand: compute them from the package and show them with {{eval}}"


def test_the_prose_scan_catches_a_typed_result():
    """Would the scan notice '3 GB' typed into the ring chapter, but not the same text as {eval} or in code?"""
    typed = source("ring-allreduce") + "\n每 rank 发送 3 GB,下界 120 ms。\n"
    found = {f"{m.group(1)} {m.group(2)}" for m in NUMBER_WITH_UNIT.finditer(prose(typed))}
    assert {"3 GB", "120 ms"} <= found - GIVEN["ring-allreduce"]
    assert not NUMBER_WITH_UNIT.search(prose("发送 {eval}`ch2_send`,`x = '3 GB'`,$3\\,GB$"))


CHAPTER_LABS = {
    "two-rank-update": ["two_rank_update"],
    "ring-allreduce": ["ring_allreduce", "overlap"],
    "zero-memory": ["zero_state", "fsdp"],
    "tp-pp": ["tp_pp", "tensor_parallel", "pipeline_schedule"],
    "debugging": ["late_rank", "hang", "checkpoint", "restart_drill"],
}


CHAPTER_EXERCISES = {
    "two-rank-update": "01-two-rank-update",
    "ring-allreduce": "02-ring-allreduce",
    "zero-memory": "03-zero-memory",
    "tp-pp": "04-tp-pp",
    "debugging": "05-debugging",
}


@pytest.mark.parametrize("page, notebook", list(CHAPTER_EXERCISES.items()))
def test_chapter_offers_its_exercise_notebook(built_site, page, notebook):
    """Does each chapter link its released exercise notebook, and does the site ship that file?"""
    assert (ROOT / "exercises" / "lesson" / f"{notebook}.ipynb").is_file()
    html = (built_site / "book" / f"{page}.html").read_text(encoding="utf-8")
    links = re.findall(rf'href="(\.\./_downloads/[0-9a-f]+/{notebook}\.ipynb)"', html)
    assert links, f"{page}: no download link to {notebook}.ipynb"
    assert (built_site / "book" / links[0]).resolve().is_file()


def test_every_lab_is_in_a_chapter():
    """Is every registered lab shown in some chapter?"""
    from parallel_budget.labs.engine.launcher import LABS

    shown = {lab for labs in CHAPTER_LABS.values() for lab in labs}
    assert shown == set(LABS) - {"floor"}


@pytest.mark.parametrize("page", CHAPTERS)
def test_chapter_structure(page):
    """Has the chapter learning goals first, check-yourself answers in dropdowns, an optional-lab section
    and a summary last?"""
    text = source(page)
    body = prose(text)
    assert body.index(":::{admonition} 学习目标") < body.index("\n## "), "goals must open the chapter"
    assert "## 检查自己" in text
    questions = text.split("## 检查自己")[1].split("\n## ")[0]
    assert questions.count(":::{dropdown}") >= 2
    assert "## 选做实验" in text
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[-1] == "小结" and headings[-2] == "选做实验"
    assert "import parallel_budget" in text
    optional = text.split("## 选做实验")[1].split("\n## ")[0]
    for lab in CHAPTER_LABS[page]:
        assert f'lab_cell(run_lab, "{lab}")' in optional, f"{page}: optional lab {lab} has no lab cell"
        assert f"-m parallel_budget.labs." in optional, f"{page}: no torchrun command line"


@pytest.mark.parametrize("page", CHAPTERS)
def test_optional_labs_show_real_output(built_site, page):
    """Does the built chapter show each lab's predicted-vs-measured table, executed at build?"""
    html = (built_site / "book" / f"{page}.html").read_text(encoding="utf-8")
    assert html.count("class='pb-lab'") == len(CHAPTER_LABS[page])
    assert "预测" in html and "实测" in html


@pytest.mark.parametrize("page, title_words", MISCONCEPTIONS)
def test_misconception_boxes(page, title_words):
    """Is each misconception of the lesson in a warning box on its chapter?"""
    titles = re.findall(r":::\{admonition\} (.+)\n:class: warning", source(page))
    assert any(title_words in t for t in titles), f"{page}: no warning box about {title_words!r}; have {titles}"


@pytest.mark.parametrize("page", CHAPTERS)
def test_figures_calculators_and_hidden_panels(page):
    """Does the chapter draw its figures at build, mark its calculators once each, and run its
    ipywidgets panel in a cell the site hides, with the sentence that points to JupyterLab?"""
    text = source(page)
    cells = code_cells(text)
    for fig in FIGURES[page]:
        assert any(fig in body and "remove-input" in opts and "caption:" in opts for opts, body in cells), fig
    kinds = re.findall(r'<div class="pb-calc" data-calc="(\w+)"></div>', text)
    assert set(kinds) == CALCS[page] and len(kinds) == len(set(kinds))
    panel = [(opts, body) for opts, body in cells if PANELS[page] in body]
    assert panel and all(runs_hidden_on_site(opts) for opts, _ in panel)
    assert all("assert" in body for _, body in panel), "the panel cell must check what it shows"
    assert "在 JupyterLab 中打开本章可使用交互面板" in text


def runs_hidden_on_site(opts: str) -> bool:
    """Is a cell executed but hidden on the site (remove-input + remove-output; myst-nb's inline mode
    does not execute a remove-cell) and collapsed in JupyterLab (jupyter.source_hidden)?"""
    return ("remove-input" in opts and "remove-output" in opts and "remove-cell" not in opts
            and re.search(r"^jupyter:\n  source_hidden: true$", opts, re.M) is not None)


def unbound_eval_names(text: str) -> set[str]:
    """{eval} names of a page that its first cell does not bind with ``name = text(...)``
    (or ``a, b = (text(...) for ...)``)."""
    first = code_cells(text)[0][1]
    roles = set(re.findall(r"\{eval\}`([^`]+)`", text))
    targets = re.findall(r"^\s*([A-Za-z_][\w, ]*?) = \(?text\(", first, re.M)  # a = text(..); a, b = (text(..) for ..)
    bound = {name.strip() for t in targets for name in t.split(",")}
    return roles - bound


@pytest.mark.parametrize("page", PAGES)
def test_hidden_cells_assert_or_compute_only_from_the_package(page):
    """Does every page compute its prose numbers from parallel_budget in a hidden first cell, is every
    {eval} name bound there with text(...), and is every cell the site hides also collapsed in JupyterLab?"""
    text = source(page)
    cells = code_cells(text)
    assert runs_hidden_on_site(cells[0][0]) and "text(" in cells[0][1] and "import parallel_budget" in cells[0][1]
    assert "{eval}`" in text, f"{page}: no {{eval}} number"
    missing = unbound_eval_names(text)
    assert not missing, f"{page}: {{eval}} names not bound with text(...) in the first cell: {missing}"
    assert "{glue" not in text and "glue_text" not in text, f"{page}: old glue syntax (run glue_to_eval)"
    for opts, body in cells:
        assert "remove-cell" not in opts, f"{page}: a remove-cell is not executed in inline mode: {body[:60]!r}"
        if "remove-input" in opts:
            assert "source_hidden: true" in opts, f"{page}: hidden on the site but not in JupyterLab: {body[:60]!r}"


def test_the_eval_checks_catch_an_unbound_name_and_a_remove_cell():
    """Would a prose {eval} name that the first cell does not bind, or a remove-cell, be noticed?"""
    text = source("ring-allreduce")
    assert unbound_eval_names(text + "\n发送 {eval}`ch2_sendx`。\n") == {"ch2_sendx"}
    assert unbound_eval_names(source("zero-memory")) == set()  # ch3_z0, ch3_z1, ... = (text(...) for row in t)
    assert "ch3_zz" in unbound_eval_names(source("zero-memory") + "{eval}`ch3_zz`")
    assert runs_hidden_on_site(code_cells(text)[0][0])
    assert not runs_hidden_on_site(":tags: [remove-cell]\n")
    assert not runs_hidden_on_site("---\ntags: [remove-input, remove-output]\n---\n")


GLOSSARY_LINK = re.compile(r"\[([^\]]+)\]\(glossary\.md#([^)]*)\)")


def glossary_block() -> str:
    """The body of the {glossary} directive (the page has more after it: units, the course's words)."""
    return source("glossary").split("```{glossary}")[1].split("\n```")[0]


def glossary_anchors() -> dict:
    """anchor id (as Sphinx makes it: term-KV-cache) -> term, of every entry of book/glossary.md."""
    from sphinx.util.nodes import _make_id

    defined = re.findall(r"^(\S[^\n]*)\n  : \S", glossary_block(), re.M)
    return {_make_id(f"term-{t}"): t for t in defined}


def test_glossary_covers_every_term_link_and_the_issue_terms():
    """Is every glossary link of the book an anchor of a glossary entry, including the terms the issue names,
    and is no term written as a {term} role (JupyterLab cannot resolve it)?"""
    anchors = glossary_anchors()
    used = set()
    for page in PAGES:
        text = source(page)
        assert "{term}" not in text, f"{page}: write [text](glossary.md#term-…), not a {{term}} role"
        used |= {anchor for _, anchor in GLOSSARY_LINK.findall(text)}
    assert used and used <= set(anchors), used - set(anchors)
    assert {"rank", "all-reduce", "DDP", "ZeRO", "TP", "PP", "bucket"} <= set(anchors.values())
    assert len(re.findall(r"^\S[^\n]*\n  \S", glossary_block(), re.M)) == len(anchors), \
        "every glossary definition starts with '  : ' (the definition list mystmd renders)"


def test_toc_lists_the_new_pages_after_the_chapters():
    """Are the exercises, glossary and next-lesson pages in the toc, after the five chapters?"""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert files[:5] == [f"book/{c}" for c in CHAPTERS]
    for page in ("exercises", "glossary", "next-lesson", "reading-guide", "plan-record"):
        assert f"book/{page}" in files[5:]


def test_intro_and_exercises_link_the_plan_record():
    """Do the intro and the exercises point to the page where the learner writes the plan?"""
    for page in ("intro", "exercises"):
        assert "{doc}`plan-record`" in source(page)


# ------------------------------------------------------------------ the built site

def expected_shown() -> dict[str, list[str]]:
    """Numbers each built page must show, computed here from the package."""
    r = pb.ring_allreduce(4, "2 GB", "25 GB/s")
    s = pb.step_time("400 ms", 4, r.lower_bound)
    t = pb.zero_table(1e9, 4)
    u = pb.data_parallel_update(1, [2, 6], 0.1)
    half = pb.ring_allreduce(4, "2 GB", "12.5 GB/s")
    wide = pb.ring_allreduce(8, "4 GB", "50 GB/s")
    return {
        "intro": [fmt_s(s.speedup), pb.fmt(s.step), pb.fmt(t[0].total), pb.fmt(t[3].total)],
        "two-rank-update": [f"{u.aggregated_grad:g}", f"{u.weights[0]:.3g}"],
        "ring-allreduce": [pb.fmt(r.send_per_rank), pb.fmt(r.lower_bound), pb.fmt(r.total_sent),
                           pb.fmt(s.compute_per_rank), pb.fmt(s.step), fmt_s(s.speedup), pb.fmt_percent(s.efficiency)],
        "zero-memory": [pb.fmt(row.total) for row in t],
        "tp-pp": [pb.fmt_percent(pb.pipeline_bubble(4, 8).idle_fraction)],
        "debugging": [f"{pb.data_parallel_update(1, [2, 6], 0.1, 'mean_twice').weights[0]:.3g}"],
        "exercises": [pb.fmt(half.send_per_rank), pb.fmt(half.lower_bound), pb.fmt(wide.send_per_rank),
                      pb.fmt(wide.lower_bound)],
        "reading-guide": [pb.fmt(row.total) for row in t],
    }


def fmt_s(x: float) -> str:
    return f"{x:.3g}"


def shown_by_eval(built_site, page) -> list[str]:
    """The texts myst-nb rendered for the page's {eval} roles."""
    html = (built_site / "book" / f"{page}.html").read_text(encoding="utf-8")
    return re.findall(r'<span class="output text_plain">([^<]*)</span>', html)


@pytest.mark.slow
@pytest.mark.parametrize("page", list(expected_shown()))
def test_built_pages_show_the_package_numbers(built_site, page):
    """Does each built page show, through {eval}, the numbers the package computes for its examples?"""
    shown = shown_by_eval(built_site, page)
    for n in expected_shown()[page]:
        assert n in shown, f"{page}: {n!r} not among the {{eval}} values {shown}"


@pytest.mark.slow
@pytest.mark.parametrize("page", CHAPTERS)
def test_built_chapters_have_figures_dropdowns_and_no_dead_widget(built_site, page):
    """Does each built chapter embed its figures with alt text, render dropdown answers, and show no widget?"""
    html = (built_site / "book" / f"{page}.html").read_text(encoding="utf-8")
    imgs = re.findall(r"<img[^>]*>", html)
    figs = [i for i in imgs if 'alt="' in i and ("_images/" in i or "data:image/png" in i)]
    assert len(figs) >= len(FIGURES[page]), imgs
    assert html.count("<figcaption") >= len(FIGURES[page])
    assert html.count("sd-dropdown") >= 2
    # The panels run in cells the site hides: no widget view may reach the page (nbclient's inert
    # widget-state JSON may, it renders nothing without the widget JavaScript, which is not shipped).
    assert "widget-view" not in html and "@jupyter-widgets/html-manager" not in html
    for kind in CALCS[page]:
        assert f'data-calc="{kind}"' in html


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_built_pages_show_no_unrendered_emphasis(built_site, page):
    """Is every **bold** rendered? CommonMark leaves ** as text when it closes after a full-width mark and before
    a Chinese character ("**问题？**答案"): write "**问题**？答案" instead."""
    html = (built_site / "book" / f"{page}.html").read_text(encoding="utf-8")
    main = re.sub(r"<(script|style|pre)\b.*?</\1>", "", html, flags=re.S)
    assert "**" not in re.sub(r"<[^>]+>", "", main), f"{page}: an emphasis was not rendered"


@pytest.mark.parametrize("page", PAGES + ["calculators"])
def test_pages_read_in_jupyterlab(page):
    """Is nothing on the page that jupyterlab-myst shows as raw text: a calculator mount inside a {raw} html
    block (a plain HTML block renders on the site and stays invisible in JupyterLab), and does every
    sentence about the outputs below say they are the site's (a .md opened in JupyterLab has none yet)?"""
    text = source(page)
    assert not re.search(r"```\{raw\} html\n<div class=\"pb-calc\"", text), f"{page}: pb-calc mount in a raw block"
    for sentence in re.findall(r"[^。\n]*下面的输出[^。\n]*。", prose(text)):
        assert "网站" in sentence and "JupyterLab" in sentence, f"{page}: {sentence!r} promises outputs JupyterLab lacks"
