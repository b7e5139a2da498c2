"""Is every string a reader sees typeset as Chinese should be, in one vocabulary?

What a reader sees: the built pages (running text, program output, form placeholders), the figures'
matplotlib text, the JupyterLab panels, the lab reports, the in-page scripts' strings, the question
bank's prompts, worked solutions and feedback, the grader's messages, the notebooks. The rules and
extractors are in ``typography.py``; they read sources and outputs, not a list of known strings, so a
string added anywhere is checked. The vocabulary is ``parallel_budget.book.terms.TERMS`` (the
glossary shows the same list).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from conftest import ROOT
from typography import (
    ATTRIBUTES, html_texts, js_strings, markdown_prose, markup_text, notebook_texts, python_strings,
    template_text, violations,
)

bs4 = pytest.importorskip("bs4")

from parallel_budget.book.terms import TERMS  # noqa: E402

PACKAGE = ROOT / "parallel_budget"
SCRIPTS = sorted((ROOT / "book" / "_static" / "calc").glob("*.js"))
CHAPTERS = sorted((ROOT / "book").glob("*.md"))
NOTEBOOKS = (sorted((ROOT / "solutions" / "lesson").glob("*.ipynb")) + sorted((ROOT / "exercises" / "lesson").glob("*.ipynb"))
             + sorted((ROOT / "autograde").glob("*.ipynb")))
SEEDS = (0, 1, 5, 77)


def pages(site):
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.parts and "genindex" not in p.name)


def report(found: dict, limit: int = 40) -> str:
    lines = [f"{where}: {hit!r}" for where, hits in found.items() for hit in hits]
    return f"{len(lines)} slips:\n" + "\n".join(lines[:limit])


def collect(items, **kw) -> dict:
    """{where: [slips]} of (where, text) pairs."""
    found = {}
    for where, text in items:
        hits = violations(text, **kw)
        if hits:
            found.setdefault(where, []).extend(hits)
    return found


# ---------------------------------------------------------------- the rules themselves


@pytest.mark.parametrize("text", [
    "rank 0 算出的梯度是 2,rank 1 算出的是 6",      # chapter 1, between a number and a Latin word
    "把 D 从 4 增加到 8,ZeRO-1 和 ZeRO-3",
    "保持不变C:A、B 任选其一",
    "取 M,all-reduce 按理想 ring 计",             # $h=5120$,all-reduce with the math as M
    "实验 3:DDP 分桶与重叠",
    "输入有误:bandwidth 需要带宽",
    "更新后的 参数",
    "ring all-reduce,4 个 rank,每轮",
    "reduce-scatter:3 轮,边传边加",
    "时间(ms)",
    "把全网总量当成每 rank;",
    "A:rank 2 的网卡带宽太低",
    "h = 4096(BF16),32 层",
    "两个阶段。\n每一轮",                          # a line break inside a paragraph shows as a space
])
def test_the_rules_catch_the_slips_the_review_found(text):
    """Would each slip the second review quoted (issues 24 and 26) be reported?"""
    assert violations(text), text


@pytest.mark.parametrize("text", [
    "读完本章，你能够 (R-1)/R",
    "最多同时保存 min(p, m) 个微批次",              # a formula's arguments
    "torch 2.13.0+cpu, gloo",
    "日志已删除（run_lab(..., keep_logs=True) 可保留）",
    "（Rajbhandari 等，2020）",
    "项目      预测      实测",                       # a terminal table's columns
    "路径 C:/data 与 http://x",
])
def test_the_rules_leave_code_formulas_and_tables_alone(text):
    """Are a call's commas, an English aside, a path and aligned table columns left alone?"""
    assert not violations(text, table="项目" in text), text


# ---------------------------------------------------------------- sources


def test_package_strings():
    """Does every string constant of the package and the grading config (messages, labels, lab reports, bank
    templates, code stubs) pass?"""
    sources = sorted(PACKAGE.rglob("*.py")) + sorted((ROOT / "autograde").glob("*.py"))
    found = collect(((f"{p.relative_to(ROOT)}:{n}", s) for p in sources for n, s in python_strings(p)), breaks=True)
    assert found == {}, report(found)


def test_grading_templates():
    """Do the feedback and formgrader templates (their text and their scripts' strings) pass?"""
    items = []
    for p in sorted(PACKAGE.rglob("*.j2")):
        items.append((str(p.relative_to(ROOT)), template_text(p)))
        items += [(f"{p.relative_to(ROOT)}:{n}", s) for n, s in js_strings(p)]
    assert items
    found = collect(items)
    assert found == {}, report(found)


def test_scripts():
    """Does every string of the calculators, practice boxes, plan builder and record page pass?"""
    found = collect(((f"{p.name}:{n}", s) for p in SCRIPTS for n, s in js_strings(p)), breaks=True)
    assert found == {}, report(found)


def test_markdown_pages():
    """Does the prose of every page source pass (JupyterLab renders the source, not the site)?"""
    found = collect((f"{p.name}:{n}", t) for p in CHAPTERS for n, t in markdown_prose(p.read_text(encoding="utf-8")))
    assert found == {}, report(found)


def test_notebooks():
    """Do the solution and released notebooks' Markdown, code strings and comments pass?"""
    found = collect((f"{p.relative_to(ROOT)} cell {i}", t) for p in NOTEBOOKS for i, t in notebook_texts(p))
    assert found == {}, report(found)


def bank_texts():
    """Prompt, worked solution and hint of every question for a few seeds, and the feedback to the right
    answer, to every named mistake and to unreadable input: what a student reads in a box or a notebook."""
    from parallel_budget import questions
    from parallel_budget.questions import core

    for qid, q in questions.QUESTIONS.items():
        for seed in SEEDS:
            params = q.generate(seed)
            yield f"{qid}#{seed} prompt", q.prompt(params)
            yield f"{qid}#{seed} solution", q.solution(params)
            if q.hint:
                yield f"{qid} hint", q.hint
            exp = q.expected(params)
            answers = ["abc", "-1", "1e400", "50%"]
            if q.kind == "int":
                answers += [str(exp), "7", "None"]
            else:
                unit = core.answer_unit(q)
                for v in (exp.value, *(v for _, v in exp.mistakes)):
                    answers.append(core.show(core.magnitude(v), unit) if unit else f"{core.magnitude(v):.6g}")
            for a in answers:
                yield f"{qid}#{seed} feedback to {a!r}", core.check(q, params, a)["message"]


def test_question_bank_and_grader_feedback():
    """Does every question's text and every feedback the grader gives for it pass?"""
    found = collect(bank_texts(), breaks=True)
    assert found == {}, report(found)


def test_lab_reports_render_in_chinese_typography():
    """Does a report of every lab (title, headline with the environment, option errors) pass, without torch?"""
    from parallel_budget.labs import LABS, LabResult, Report, Row
    from parallel_budget.labs.engine.config import lab_module
    from parallel_budget.labs.engine.runtime import validate_options
    from parallel_budget.model.units import Q_

    items = []
    for name in LABS:
        mod = lab_module(name)
        rows = (Row("项目", "预测", "实测", "结论", True),)
        for logs_kept in (True, False):
            r = LabResult(name, 2, {}, "run", Path("/tmp/run"), 0, (1, 2), Q_(1.5, "s"), (0, 0), (None, None),
                          (None, None), ("", ""), ("", ""), {}, False, Report(mod.TITLE, rows, ("备注",)),
                          {"torch": "2.13.0+cpu", "backend": "gloo", "device": "cpu"}, logs_kept)
            items += [(f"{name} text", r.text()), (f"{name} html", markup_text(r._repr_html_()))]
        try:
            validate_options(name, mod.OPTIONS, {"no_such_option": 1})
        except ValueError as exc:
            items.append((f"{name} options", str(exc)))
    found = collect(items, table=True)
    assert found == {}, report(found)


# ---------------------------------------------------------------- figures and panels, as the chapters make them


def chapter_cells(path: Path) -> list:
    """The code cells of a MyST page, without their option headers; cells that run a lab are left out."""
    cells = re.findall(r"^```\{code-cell\}[^\n]*\n(.*?)^```\s*$", path.read_text(encoding="utf-8"), re.M | re.S)
    out = []
    for cell in cells:
        cell = re.sub(r"\A---\n.*?\n---\n", "", cell, flags=re.S)
        if "run_lab(" not in cell:
            out.append(cell)
    return out


def shown_values(source: str, namespace: dict) -> list:
    """Run a cell; return the value of its last expression (what the page shows) and every value bound."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<cell>", "exec"), namespace)
    shown = [eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)] if last else []
    return shown + list(namespace.values())


def figure_texts(fig) -> list:
    from matplotlib.text import Text

    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def widget_texts(w, seen=None) -> list:
    """Every string an ipywidgets tree shows, and each text field's message for an input it cannot read."""
    seen = set() if seen is None else seen
    if id(w) in seen:
        return []
    seen.add(id(w))
    out = []
    for attr in ("description", "placeholder", "tooltip"):
        if isinstance(getattr(w, attr, None), str):
            out.append(getattr(w, attr))
    if isinstance(getattr(w, "value", None), str):
        out.append(markup_text(w.value) if "<" in w.value else w.value)
    out += [str(o[0] if isinstance(o, tuple) else o) for o in getattr(w, "options", ()) or ()]
    for child in getattr(w, "children", ()):
        out += widget_texts(child, seen)
    controls, result = getattr(w, "controls", None), getattr(w, "result", None)
    if isinstance(controls, dict) and result is not None:
        for c in controls.values():
            if type(c).__name__ in ("Text", "Textarea"):
                old, c.value = c.value, "abc"
                out.append(markup_text(result.value))
                c.value = old
    return out


def page_outputs():
    """Figures, panels and HTML the chapters' cells produce (labs left out: their output is on the built site)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    for path in CHAPTERS:
        namespace: dict = {}
        seen: set = set()
        for cell in chapter_cells(path):
            for value in shown_values(cell, namespace):
                if id(value) in seen:
                    continue
                seen.add(id(value))
                if isinstance(value, Figure):
                    yield from ((f"{path.name} figure", t) for t in figure_texts(value))
                elif hasattr(value, "_repr_html_") and type(value).__name__ == "HTML":
                    yield f"{path.name} html", markup_text(value.data)
                elif type(value).__module__.startswith(("ipywidgets", "parallel_budget.book")) and hasattr(value, "children"):
                    yield from ((f"{path.name} panel", t) for t in widget_texts(value))


def test_figures_panels_and_cell_outputs():
    """Does the text of every figure and panel the chapters make, with each panel's error message, pass?"""
    items = list(page_outputs())
    assert any(" figure" in w for w, _ in items) and any(" panel" in w for w, _ in items)
    found = collect(items, breaks=True)
    assert found == {}, report(found)


# ---------------------------------------------------------------- the built site


def test_built_pages(built_site):
    """Does what every built page shows (text, program output, placeholders and titles) pass?"""
    found = {}
    for page in pages(built_site):
        for kind, text in html_texts(page.read_text(encoding="utf-8")):
            hits = violations(text, table=(kind == "pre"))
            if hits:
                found.setdefault(f"{page.relative_to(built_site)} ({kind})", []).extend(hits)
    assert found == {}, report(found)


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


def test_every_closing_quote_has_an_opening_one(built_site):
    """Is every ” on every built page preceded by its “ (no ASCII quote rendered as ”…”)?"""
    found = {}
    for page in pages(built_site):
        text = "\n".join(t for kind, t in html_texts(page.read_text(encoding="utf-8")) if kind == "text")
        bad = unopened_closing_quotes(text)
        if bad:
            found[str(page.relative_to(built_site))] = bad[:3]
    assert found == {}, found


# ---------------------------------------------------------------- one term each


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


@functools.lru_cache(maxsize=None)
def prose_texts() -> tuple:
    """The Markdown prose of the pages and notebooks."""
    return tuple([(p.name, prose(p)) for p in CHAPTERS]
                 + [(f"{p.name} cell {i}", t) for p in NOTEBOOKS for i, t in notebook_texts(p)])


@functools.lru_cache(maxsize=None)
def everywhere_texts() -> tuple:
    """Every reader-facing text but the glossary's own list of avoided words (terms.py)."""
    return prose_texts() + tuple(
        [(f"{p.relative_to(ROOT)}:{n}", s) for p in sorted(PACKAGE.rglob("*.py")) if p.name != "terms.py"
         for n, s in python_strings(p)]
        + [(f"{p.name}:{n}", s) for p in SCRIPTS for n, s in js_strings(p)]
        + list(bank_texts()))


@pytest.mark.parametrize("term", TERMS, ids=lambda t: t.use)
def test_one_term_each(term):
    """Does no text use the form the course avoids (terms.TERMS, shown in the glossary)?"""
    items = everywhere_texts() if term.scope == "everywhere" else prose_texts()
    found = {where: hits for where, text in items if (hits := term.find(text))}
    assert found == {}, f"write {term.use}: {found}"


def test_the_site_names_each_avoided_word_once_in_the_glossary(built_site):
    """Does an avoided form (集体通信 …) appear on the site only in the glossary's list, once?"""
    terms = [t for t in TERMS if t.scope == "everywhere"]
    counts = {t.use: [] for t in terms}
    glossary = (built_site / "book" / "glossary.html").read_text(encoding="utf-8")
    listed = bs4.BeautifulSoup(glossary, "html.parser").select_one("table.pb-terms")
    assert listed is not None, "the glossary shows no table of the course's words"
    for page in pages(built_site):
        soup = bs4.BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        for tag in soup(["script", "style"]):
            tag.decompose()
        table = soup.select_one("table.pb-terms")
        inside = table.get_text(" ") if table is not None else ""
        if table is not None:
            table.decompose()
        rest = soup.get_text(" ") + " ".join(str(t.get(a, "")) for t in soup.find_all(True) for a in ATTRIBUTES)
        for t in terms:
            counts[t.use] += [f"{page.name}: {hit}" for hit in t.find(rest)]
            if inside:
                assert len(t.find(inside)) == 1 and t.use in inside, (t.use, inside)
    assert counts == {t.use: [] for t in terms}, counts
    assert "集体通信" in listed.get_text() and "集合通信" in listed.get_text()


def test_the_glossary_explains_device_and_host_memory():
    """Does the glossary say what 显存 and 内存 each mean, and why the title says 内存?"""
    text = prose(ROOT / "book" / "glossary.md")
    entry = next(line for line in text.splitlines() if "显存与内存" in line)
    assert "显存是" in entry and "主机" in entry and "标题" in entry


def test_the_lesson_says_once_which_lesson_of_the_series_it_is():
    """Does the introduction say this is lesson 5 of a series, and no other page restate it differently?"""
    intro = prose(ROOT / "book" / "intro.md")
    assert re.search(r"系列课程的第 5 课", intro)
    for p in CHAPTERS:
        assert not re.search(r"第 [0-46-9] 课(?!”)", prose(p)) or "本系列" in prose(p), p.name
