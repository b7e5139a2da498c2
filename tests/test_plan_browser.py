"""Does the plan builder work in a real browser, offline, and can the record page import its plan?

Debian's chromium (Playwright) against the built site on localhost; every other host is refused and
fails the test, and so does any console error (the ``tab`` fixture, tests/serve.py:Tab).
"""

from __future__ import annotations

import json

import pytest

import parallel_budget as pb
from parallel_budget.book import plan_vectors as pv

pytestmark = pytest.mark.slow

BUILDER = "book/plan-builder.html"
RECORD = "book/plan-record.html"


def t_(seconds: float) -> str:
    q = pb.Q_(seconds, "s")
    return pb.fmt(q, "s" if seconds >= 1 else "ms")


def builder(tab, hash_=""):
    page = tab.open(BUILDER + hash_)
    page.wait_for_selector('.pb-calc[data-calc="plan"] [data-out="step"]')
    return page


def out(page, key):
    return page.inner_text(f'.pb-calc[data-calc="plan"] [data-out="{key}"]')


def test_defaults_show_the_package_numbers_and_draw_both_charts(tab):
    """Does the builder start at the chapter's plan with Python's step, memory, verdict and two SVGs?"""
    page = builder(tab)
    want = pv.evaluate({})["out"]
    assert out(page, "step") == t_(want["step"])
    assert out(page, "total").endswith(pb.fmt(pb.Q_(want["memory"]["total"], "B")))
    assert out(page, "fits") == "放得下"
    codes = page.eval_on_selector_all('[data-out="verdict"] li', "els => els.map(e => e.dataset.code)")
    assert codes == want["codes"]
    labels = page.eval_on_selector_all('.pb-calc[data-calc="plan"] svg', "els => els.map(e => e.getAttribute('aria-label'))")
    assert len(labels) == 2 and labels[0].startswith("每卡显存") and labels[1].startswith("一步的时间线")
    assert page.locator('.pb-calc[data-calc="plan"] svg rect').count() >= 10
    assert page.evaluate("typeof window.PBCalc") == "undefined", "ui.js loaded on a page without other calculators"


def test_bits_change_the_time_and_the_url_keeps_the_inputs(tab, base_url):
    """Does Gb/s give Python's slower step, land in the URL, and come back from that URL in a new tab?"""
    page = builder(tab)
    page.select_option("#pb-plan-inter_unit", "Gb/s")
    want = pv.evaluate({"inter_unit": "Gb/s"})["out"]
    page.wait_for_function(f"document.querySelector('[data-out=\"step\"]').textContent === {json.dumps(t_(want['step']))}")
    page.wait_for_function("location.hash.includes('plan.inter_unit=Gb%2Fs')")
    url = page.url
    other = tab.context.new_page()
    other.goto(url)
    other.wait_for_selector('[data-out="step"]')
    assert other.input_value("#pb-plan-inter_unit") == "Gb/s"
    assert other.inner_text('[data-out="step"]') == t_(want["step"])
    other.close()


def test_invalid_split_names_the_field_and_hides_results(tab):
    """Does tp=3 (32 heads) show a Chinese message on the TP field and no results, and recover when fixed?"""
    page = builder(tab)
    page.fill("#pb-plan-tp", "3")
    page.wait_for_selector("#pb-plan-tp[aria-invalid]")
    assert "不能整除 heads=32" in page.inner_text('[data-msg="tp"]')
    assert page.locator('[data-out="step"]').count() == 0
    page.fill("#pb-plan-tp", "2")
    page.fill("#pb-plan-dp", "8")
    want = pv.evaluate({"tp": "2", "dp": "8"})["out"]
    page.wait_for_function(f"(document.querySelector('[data-out=\"step\"]') || {{}}).textContent === {json.dumps(t_(want['step']))}")


def test_search_lists_python_order_and_adopts_a_plan(tab):
    """Does the search button list search_plans' best splits in order, and does 采用 load one into the form?"""
    page = builder(tab)
    page.fill("#pb-plan-devices", "64")
    page.fill("#pb-plan-global_batch", "512")
    page.click('[data-act="search"]')
    page.wait_for_selector('[data-out="search"]')
    want = pv.evaluate({"devices": "64", "global_batch": "512"}, search=True)["out"]["search"]
    assert f"试了 {want['candidates']} 种切分，放得下 {len(want['plans'])} 种" in out(page, "search")
    rows = page.eval_on_selector_all(".pb-search tbody tr", "rs => rs.map(r => [...r.cells].slice(0, 5).map(c => +c.textContent))")
    assert rows == [p[:5] for p in want["plans"][:10]]
    ms = float(page.get_attribute(".pb-search", "data-ms"))
    print(f"browser search of 64 devices: {ms:.2f} ms")  # measured; benchmarks/bench_plan.py prints the figures
    page.click('.pb-search tbody tr:nth-child(2) [data-act="use"]')
    second = want["plans"][1]
    assert [int(page.input_value(f"#pb-plan-{k}")) for k in pv.SPLIT] == second[:5]
    page.wait_for_function(f"document.querySelector('[data-out=\"step\"]').textContent === {json.dumps(t_(second[5]))}")


def test_record_page_imports_the_plan_and_exports_it(tab, tmp_path):
    """Does 送到记录页 then 从方案构建器导入 fill the record's plan fields and the empty conditions, saved and exported?"""
    page = tab.open(RECORD)
    page.wait_for_selector(".pb-record .pb-status")
    page.click('[data-act="plan"]')
    assert "没有导入" in page.inner_text(".pb-record .pb-status")
    page.fill("#pb-rec-overlap", "我自己写的")
    page = builder(tab)
    page.click('[data-act="send"]')
    page.wait_for_selector('[data-out="sent"] a')
    page.click('[data-out="sent"] a')
    page.wait_for_selector(".pb-record .pb-status")
    page.click('[data-act="plan"]')
    page.wait_for_function("document.querySelector('#pb-rec-plan_numbers').value.startsWith('DP=16')")
    want = pv.evaluate({})["out"]
    assert t_(want["step"]) in page.input_value("#pb-rec-plan_numbers")
    assert page.input_value("#pb-rec-plan_verdict").startswith("放得下")
    assert "Korthikanti" in page.input_value("#pb-rec-plan_assumptions")
    assert "#plan." in page.input_value("#pb-rec-plan_link") or page.input_value("#pb-rec-plan_link").endswith(BUILDER)
    assert page.input_value("#pb-rec-bw_kind") == "bytes" and page.input_value("#pb-rec-batch") == "same"
    assert page.input_value("#pb-rec-overlap") == "我自己写的", "a field the reader filled was overwritten"
    assert "已导入方案构建器的方案" in page.inner_text(".pb-record .pb-status")
    with page.expect_download() as d:
        page.click('.pb-record [data-act="json"]')
    d.value.save_as(tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert data["fields"]["plan_numbers"].startswith("DP=16") and data["fields"]["plan_verdict"]
    with page.expect_download() as d:
        page.click('.pb-record [data-act="md"]')
    d.value.save_as(tmp_path / "r.md")
    md = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert "## 方案构建器导入的方案" in md and "DP=16" in md
    page.reload()
    page.wait_for_selector(".pb-record .pb-status")
    assert page.input_value("#pb-rec-plan_numbers").startswith("DP=16"), "the import was not saved"


def test_corrupted_plan_in_storage_is_refused(tab):
    """Does a foreign value under the builder's key leave the record untouched, with a Chinese reason?"""
    page = tab.open(RECORD)
    page.wait_for_selector(".pb-record .pb-status")
    page.evaluate("localStorage.setItem('pb-plan-builder-v1', '{\"format\": \"pb-plan\", \"version\": 1, \"numbers\": 3}')")
    page.click('[data-act="plan"]')
    assert "没有导入：方案的内容不完整" in page.inner_text(".pb-record .pb-status")
    assert page.input_value("#pb-rec-plan_numbers") == ""


def test_every_control_is_labelled_and_the_search_works_by_keyboard(tab):
    """Has every input and select of the builder a label, and does Enter on the focused search button search?"""
    page = builder(tab)
    unlabelled = page.evaluate(
        "() => [...document.querySelectorAll('.pb-calc[data-calc=\"plan\"] :is(input, select)')]"
        ".filter(e => !document.querySelector(`label[for=\"${e.id}\"]`)).map(e => e.name)"
    )
    assert unlabelled == []
    page.focus('[data-act="search"]')
    page.keyboard.press("Enter")
    page.wait_for_selector('[data-out="search"]')
    assert page.locator(".pb-search tbody tr").count() == 10


def test_builder_and_record_import_work_from_file_urls(disk_tab):
    """Opened straight from disk (file://), does the builder compute and the record page import its plan?"""
    page = disk_tab.open("book/plan-builder.html")
    page.wait_for_selector('[data-out="step"]')
    assert page.inner_text('[data-out="step"]') == t_(pv.evaluate({})["out"]["step"])
    page.click('[data-act="send"]')
    page.click('[data-out="sent"] a')
    page.wait_for_selector(".pb-record .pb-status")
    page.click('[data-act="plan"]')
    page.wait_for_function("document.querySelector('#pb-rec-plan_numbers').value.startsWith('DP=16')")
