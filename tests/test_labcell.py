"""Do chapter labs run for the site and wait for a click in JupyterLab (issue 25)?  No lab runs here: the
runner is a stand-in, so these take well under a second."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("ipywidgets")

from conftest import ROOT  # noqa: E402
from parallel_budget.book import labcell  # noqa: E402

PAGES = sorted((ROOT / "book").glob("*.md"))


class FakeResult:
    def _repr_html_(self):
        return "<table class='pb-lab'>measured</table>"


class Runner:
    """Records its calls; raises ``error`` if given."""

    def __init__(self, error=None):
        self.calls, self.error = [], error

    def __call__(self, name, **options):
        self.calls.append((name, options))
        if self.error is not None:
            raise self.error
        return FakeResult()


def test_the_book_build_runs_the_lab_at_once(monkeypatch):
    """In the book build, does a lab cell run its lab and return the result (the site shows real output)?"""
    monkeypatch.setenv(labcell.BUILD_ENV, "1")
    run = Runner()
    result = labcell.lab_cell(run, "overlap", ranks=2)
    assert isinstance(result, FakeResult) and run.calls == [("overlap", {"ranks": 2})]


def test_jupyterlab_gets_a_button_and_runs_nothing_until_it_is_clicked(monkeypatch):
    """Outside the build, does a lab cell only draw a button, and does a click run the lab and show its table?"""
    monkeypatch.delenv(labcell.BUILD_ENV, raising=False)
    run = Runner()
    cell = labcell.lab_cell(run, "ring_allreduce", ranks=4)
    assert isinstance(cell, labcell.LabButton) and run.calls == []
    assert "application/vnd.jupyter.widget-view+json" in cell._repr_mimebundle_()
    assert cell.button.description == "运行实验" and "中断内核" in cell.status.value
    assert isinstance(cell.click(), FakeResult)
    assert run.calls == [("ring_allreduce", {"ranks": 4})]
    assert "完成" in cell.status.value and not cell.button.disabled
    assert cell.output.outputs and "pb-lab" in cell.output.outputs[0]["data"]["text/html"]


def test_an_interrupted_lab_says_so_and_can_run_again(monkeypatch):
    """Does Kernel → Interrupt during a lab end the click with a Chinese line, the button usable again?"""
    monkeypatch.delenv(labcell.BUILD_ENV, raising=False)
    run = Runner(KeyboardInterrupt())
    cell = labcell.lab_cell(run, "hang")
    assert cell.click() is None
    assert "已中断" in cell.status.value and not cell.button.disabled
    run.error = None
    assert isinstance(cell.click(), FakeResult) and "完成" in cell.status.value


def test_a_failed_lab_shows_its_message_and_what_it_collected(monkeypatch):
    """Does a failed run show the lab's own message (no traceback) and the partial result it carries?"""
    monkeypatch.delenv(labcell.BUILD_ENV, raising=False)
    error = RuntimeError("实验 hang 超过 timeout=60 s 仍未结束")
    error.result = FakeResult()
    cell = labcell.lab_cell(Runner(error), "hang")
    assert cell.click() is None
    assert "实验没有完成" in cell.status.value and "timeout=60" in cell.status.value
    assert "Traceback" not in cell.status.value and cell.output.outputs


def test_a_missing_runner_is_named():
    """Does lab_cell("overlap") (the runner forgotten) say what it needs and show the right call?"""
    with pytest.raises(TypeError, match=r"lab_cell\(\) 需要实验的运行函数和实验名.*例如 lab_cell\(run_lab, 'overlap'\)"):
        labcell.lab_cell("overlap")


def code_cells(text: str) -> list[str]:
    return re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", text, re.S)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_no_page_runs_a_lab_on_run_all(page):
    """Does every lab call of a page go through lab_cell (so Run All in JupyterLab never starts a lab)?"""
    for cell in code_cells(page.read_text(encoding="utf-8")):
        calls = re.findall(r"^(?!\s*#).*\brun_lab\(", cell, re.M)
        assert not calls, f"{page.name}: {calls} runs a lab on Run All; write lab_cell(run_lab, \"...\")"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_every_page_says_first_what_run_all_does(page):
    """Does each page open (right under its title) with the JupyterLab-only tip about Run All and the labs, in
    the words of the zh-CN menus, left out of the site (remove-cell)?"""
    text = page.read_text(encoding="utf-8")
    body = text.split("\n---\n", 1)[1]
    title, rest = body.lstrip("\n").split("\n", 1)
    assert title.startswith("# ")
    tip = labcell.run_all_tip("lab_cell(run_lab" in text)
    assert rest.startswith(f"\n{labcell.TIP_TAG_LINE}\n\n{tip}\n"), f"{page.name}: the tip must follow the title"
    assert "运行 → 运行所有单元格" in tip and ("运行实验" in tip) == ("lab_cell(run_lab" in text)
