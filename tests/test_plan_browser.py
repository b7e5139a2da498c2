"""Does the plan builder work in a real browser, offline, on a desktop and on a phone, and can the record
page import its plan?

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
ROOT_SEL = '.pb-calc[data-calc="plan"]'


def t_(seconds: float) -> str:
    q = pb.Q_(seconds, "s")
    return pb.fmt(q, "s" if seconds >= 1 else "ms")


def builder(tab, hash_=""):
    page = tab.open(BUILDER + hash_)
    page.wait_for_selector(f'{ROOT_SEL} [data-out="step"]')
    return page


def out(page, key):
    return page.inner_text(f'{ROOT_SEL} [data-out="{key}"]')


def test_defaults_show_the_package_numbers_and_draw_three_charts(tab):
    """Does the builder start at the chapter's plan with Python's step, memory, verdict and three SVG drawings?"""
    page = builder(tab)
    want = pv.evaluate({})["out"]
    assert out(page, "step") == t_(want["step"])
    assert out(page, "total").startswith(pb.fmt(pb.Q_(want["memory"]["total"], "B")))
    codes = page.eval_on_selector_all('[data-out="verdict"] li', "els => els.map(e => e.dataset.code)")
    assert codes == want["codes"]
    labels = page.eval_on_selector_all(f"{ROOT_SEL} svg", "els => els.map(e => e.getAttribute('aria-label'))")
    assert len(labels) == 3 and labels[0].startswith("一步的时间线") and labels[1].startswith("每卡显存")
    assert labels[2].startswith("加速比与效率")
    page.click(f"{ROOT_SEL} details.pb-overlap summary")  # the overlap sweep is drawn when its box is opened
    page.wait_for_selector('[data-out="threshold"]')
    label = page.eval_on_selector(f"{ROOT_SEL} details.pb-overlap svg", "e => e.getAttribute('aria-label')")
    assert label.startswith("暴露的梯度通信")
    from parallel_budget.book.nccl_vectors import _overlap_case
    th = round(_overlap_case({})["layout"]["threshold"])
    assert f"{th:,}" in out(page, "threshold")
    lay = pv.layouts({})["timeline"]  # every block and mark hovers with Python's text and duration
    titles = page.eval_on_selector_all(f"{ROOT_SEL} svg >> nth=0 >> rect > title", "ts => ts.map(t => t.textContent)")
    assert sorted(titles) == sorted(x["title"] for x in lay["blocks"] + lay["marks"])
    assert page.evaluate("typeof window.PBCalc") == "undefined", "ui.js loaded on a page without other calculators"


def test_pasted_nccl_tests_output_calibrates_the_dp_group(tab):
    """Does pasting nccl-tests output give Python's calibrated step and a verdict saying what was measured, and does
    a broken table name its line without showing a result?"""
    from parallel_budget.book.nccl_vectors import SAMPLE

    page = builder(tab)
    text = pb.nccl_tests_text("reduce-scatter", 16, "60 us", "40 GB/s")
    page.click(f"{ROOT_SEL} summary >> text=用实测校准")
    page.fill("#pb-plan-dp_nccl", text)
    want = pv.evaluate({"dp_nccl": text})["out"]
    page.wait_for_function(f"document.querySelector('[data-out=\"step\"]').textContent === {json.dumps(t_(want['step']))}")
    assert page.inner_text('[data-code="measured"]').startswith("实测：DP 组的 α 与带宽（nccl-tests，16 卡 reduce-scatter")
    page.click(f"{ROOT_SEL} details.pb-overlap summary")
    page.wait_for_selector('[data-out="threshold"]')
    assert "阈值" in out(page, "threshold")
    page.fill("#pb-plan-dp_nccl", SAMPLE.replace("float", "floaty", 1).replace("#       size", "#       size", 1))
    page.wait_for_selector("#pb-plan-dp_nccl[aria-invalid]")
    assert "第 24 行" in page.inner_text('[data-msg="dp_nccl"]')
    assert page.locator('[data-out="step"]').count() == 0


def test_measured_step_solves_the_hfu_python_gives(tab):
    """Does typing a measured step give the HFU and MFU pb.hfu_from_step solves, mark HFU as measured in the
    verdict, and does a step shorter than the model can go name the field in Chinese and hide the result?"""
    from parallel_budget.book.nccl_vectors import fitted
    from parallel_budget.model.planreport import verdict_codes

    page = builder(tab)
    page.click(f"{ROOT_SEL} summary >> text=用实测校准")
    page.fill("#pb-plan-measured_step", "8.2")
    page.wait_for_selector(f'{ROOT_SEL} [data-out="hfu_fit"] [data-hfu]')
    b, f = fitted({"measured_step": "8.2"})
    assert float(page.get_attribute("[data-hfu]", "data-hfu")) == pytest.approx(f.hfu, rel=1e-9)
    assert float(page.get_attribute("[data-mfu]", "data-mfu")) == pytest.approx(f.mfu, rel=1e-9)
    assert f"{pb.fmt_percent(f.hfu)} / {pb.fmt_percent(f.mfu)}" in out(page, "hfu_fit")
    assert out(page, "step") == t_(b.step.magnitude)
    measured = next(v for c, v in zip(verdict_codes(b), b.verdict) if c == "measured")
    assert measured.startswith("实测：HFU") and page.inner_text('[data-code="measured"]') == measured
    page.fill("#pb-plan-measured_step", "0.5")
    page.wait_for_selector("#pb-plan-measured_step[aria-invalid]")
    with pytest.raises(ValueError) as e:
        fitted({"measured_step": "0.5"})
    assert page.inner_text('[data-msg="measured_step"]') == f"实测步时（s）：{e.value}"
    assert page.locator(f'{ROOT_SEL} [data-out="step"]').count() == 0


def test_presets_fill_the_fields_and_an_edit_makes_them_custom(tab):
    """Does choosing Llama 2 70B and H100 nodes fill shape and cluster, and does editing a field say 自定义?"""
    page = builder(tab)
    page.select_option("#pb-plan-model", "llama2-70b")
    page.select_option("#pb-plan-cluster", "h100-80gb")
    assert [page.input_value(f"#pb-plan-{k}") for k in ("layers", "hidden", "kv_heads", "ffn")] == ["80", "8192", "8", "28672"]
    assert [page.input_value(f"#pb-plan-{k}") for k in ("device_memory", "inter_bw", "peak_tflops")] == ["80", "50", "989"]
    page.click(f"{ROOT_SEL} details.pb-sub summary >> text=模型形状")  # the shape is folded under the preset
    page.fill("#pb-plan-layers", "40")
    assert page.input_value("#pb-plan-model") == "custom"
    page.fill("#pb-plan-layers", "80")
    assert page.input_value("#pb-plan-model") == "llama2-70b"


def test_unknown_preset_in_the_link_is_a_chinese_message(tab):
    """Does a shared link with a preset that does not exist show a message on that field and no result?"""
    page = tab.open(BUILDER + "#plan.model=llama3-8b")
    page.wait_for_selector("#pb-plan-model[aria-invalid]")
    assert "模型预设" in page.inner_text('[data-msg="model"]')
    assert page.locator('[data-out="step"]').count() == 0


def test_bits_change_the_time_and_the_url_keeps_the_inputs(tab):
    """Does Gb/s give Python's slower step, land in the URL, and come back from that URL in a new tab?"""
    page = builder(tab)
    page.select_option("#pb-plan-inter_unit", "Gb/s")
    want = pv.evaluate({"inter_unit": "Gb/s"})["out"]
    page.wait_for_function(f"document.querySelector('[data-out=\"step\"]').textContent === {json.dumps(t_(want['step']))}")
    page.wait_for_function("location.hash.includes('plan.inter_unit=Gb%2Fs')")
    other = tab.context.new_page()
    other.goto(page.url)
    other.wait_for_selector('[data-out="step"]')
    assert other.input_value("#pb-plan-inter_unit") == "Gb/s"
    assert other.inner_text('[data-out="step"]') == t_(want["step"])
    other.close()


def test_invalid_split_names_the_field_and_hides_results(tab):
    """Does tp=3 (32 heads) show a Chinese message on the TP field and no results, and ZeRO-3 with PP its own?"""
    page = builder(tab)
    page.fill("#pb-plan-tp", "3")
    page.wait_for_selector("#pb-plan-tp[aria-invalid]")
    assert "不能整除 heads=32" in page.inner_text('[data-msg="tp"]')
    assert page.locator('[data-out="step"]').count() == 0
    page.fill("#pb-plan-tp", "1")
    page.fill("#pb-plan-pp", "2")
    page.wait_for_selector("#pb-plan-zero_stage[aria-invalid]")
    assert "DeepSpeed" in page.inner_text('[data-msg="zero_stage"]')
    page.select_option("#pb-plan-zero_stage", "1")
    want = pv.evaluate({"pp": "2", "zero_stage": "1"})["out"]
    page.wait_for_function(f"(document.querySelector('[data-out=\"step\"]') || {{}}).textContent === {json.dumps(t_(want['step']))}")


def test_search_lists_python_order_and_adopts_a_plan(tab):
    """Does the search button list search_plans' ten fastest in order, and does 采用 load one into the form?"""
    page = builder(tab)
    page.fill("#pb-plan-devices", "64")
    page.fill("#pb-plan-global_batch", "512")
    page.click('[data-act="search"]')
    page.wait_for_selector('[data-out="search"]')
    want = pv.evaluate({"devices": "64", "global_batch": "512"}, search=True)["out"]["search"]
    assert f"试了 {want['candidates']} 种切分，放得下 {want['fits']} 种" in out(page, "search")
    rows = page.eval_on_selector_all(".pb-search tbody tr", "rs => rs.map(r => [...r.cells].slice(0, 5).map(c => +c.textContent))")
    assert rows == [p[:5] for p in want["plans"]]
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
    assert page.input_value("#pb-rec-bw_kind") == "bytes" and page.input_value("#pb-rec-batch") == "same"
    assert page.input_value("#pb-rec-measured").startswith("全部按数据手册与默认值，没有实测")
    assert page.input_value("#pb-rec-overlap") == "我自己写的", "a field the reader filled was overwritten"
    with page.expect_download() as d:
        page.click('.pb-record [data-act="json"]')
    d.value.save_as(tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert data["fields"]["plan_numbers"].startswith("DP=16") and data["fields"]["plan_verdict"]
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


def test_every_control_is_labelled_hinted_and_grouped(tab):
    """Has every input a label and a one-line hint, in groups model/batch/cluster/plan with advanced folded?"""
    page = builder(tab)
    report = page.evaluate(
        """() => {
          const root = document.querySelector('.pb-calc[data-calc="plan"]');
          const controls = [...root.querySelectorAll('input, select')];
          return {
            unlabelled: controls.filter(e => !root.querySelector(`label[for="${e.id}"]`)).map(e => e.name),
            unhinted: controls.filter(e => !e.name.endsWith('_unit') && !document.getElementById(e.id + '-hint')).map(e => e.name),
            groups: [...root.querySelectorAll('.pb-group')].map(g => [g.tagName, (g.querySelector('legend, summary') || {}).textContent]),
            folded: [...root.querySelectorAll('details.pb-group')].map(d => d.open),
          };
        }"""
    )
    assert report["unlabelled"] == [] and report["unhinted"] == []
    assert [t for _, t in report["groups"]][:4] == ["模型", "batch", "集群", "方案"]
    assert report["groups"][4][0] == "DETAILS" and report["folded"] == [False, False]
    assert report["groups"][5][1].startswith("用实测校准")  # the calibration box, folded too
    page.focus('[data-act="search"]')
    page.keyboard.press("Enter")
    page.wait_for_selector('[data-out="search"]')
    assert page.locator(".pb-search tbody tr").count() == 10


OVERFLOW = """() => {
  const root = document.querySelector('.pb-calc[data-calc="plan"]');
  const bad = [], small = [], tiny = [];
  const rootBox = root.getBoundingClientRect();
  if (rootBox.right > document.documentElement.clientWidth + 1) bad.push(['root', rootBox.right]);
  for (const el of root.querySelectorAll('*')) {
    const box = el.getBoundingClientRect();
    if (!box.width || el.closest('.pb-scroll') && !el.classList.contains('pb-scroll')) continue;  // tables scroll in their box
    if (el.closest('option, title')) continue;
    const parent = el.parentElement.getBoundingClientRect();
    if (box.width > parent.width + 1 || box.left < parent.left - 1 || box.right > parent.right + 1)
      bad.push([el.tagName, el.className && el.className.baseVal !== undefined ? el.className.baseVal : el.className, el.textContent.slice(0, 30), Math.round(box.left - parent.left), Math.round(box.right - parent.right)]);
  }
  for (const t of root.querySelectorAll('svg text')) {
    const px = parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a;
    if (px < 11) small.push([t.textContent, px]);
  }
  for (const b of root.querySelectorAll('button, summary')) {
    const r = b.getBoundingClientRect();
    if (r.height < 44 || r.width < 44) tiny.push([b.textContent, r.width, r.height]);
  }
  return { bad, small, tiny };
}"""


@pytest.mark.parametrize("width", [1280, 390])
def test_nothing_is_wider_than_its_box_on_desktop_and_phone(browser, base_url, width):
    """At 1280 and 390 px: is no element wider than its container, do tables scroll inside their box, are
    buttons big enough to tap and chart text at least 11 px, after a search and with a pipeline plan, the
    calibration boxes and the overlap figure open?"""
    from serve import Tab

    t = Tab(browser, base_url, viewport={"width": width, "height": 900})
    try:
        page = t.open(BUILDER + "#plan.dp=2&plan.tp=2&plan.pp=4&plan.zero_stage=1")
        page.wait_for_selector(f'{ROOT_SEL} [data-out="step"]')
        page.click('[data-act="search"]')
        page.wait_for_selector(".pb-search tbody tr")
        page.click(f"{ROOT_SEL} details.pb-group summary")
        page.click(f'{ROOT_SEL} [data-act="axis"][data-axis="inter_bw"]')
        page.click(f"{ROOT_SEL} summary >> text=用实测校准")  # the paste boxes and the overlap figure, open
        page.click(f"{ROOT_SEL} details.pb-overlap summary")
        page.wait_for_selector('[data-out="threshold"]')
        report = page.evaluate(OVERFLOW)
        assert report["bad"] == [], report["bad"][:10]
        assert report["small"] == [], report["small"][:10]
        assert report["tiny"] == [], report["tiny"][:10]
        scroll = page.eval_on_selector_all(".pb-scroll", "bs => bs.map(b => [b.scrollWidth > b.clientWidth, getComputedStyle(b).overflowX])")
        assert scroll and all(o == "auto" for _, o in scroll)
        if width == 390:
            assert any(wide for wide, _ in scroll), "no table is wider than a phone: the scroll boxes are untested"
    finally:
        t.check()


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


CHAPTER_FIGURES = """() => [...document.querySelectorAll('.cell_output > figure')].map((box) => {
  const img = box.querySelector('img'), r = img.getBoundingClientRect(), pic = img.closest('picture');
  return { alt: img.alt, phone: !!pic && img.currentSrc === pic.querySelector('source').srcset, natural: img.naturalWidth,
           shown: r.width, box: box.clientWidth, scroll: box.scrollWidth, right: r.right, page: document.documentElement.clientWidth };
})"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [390, 1280])
def test_chapter_6_figures_fit_a_phone_without_sideways_scrolling(browser, base_url, width, scheme):
    """At 390 px: does every chapter-6 figure show its phone variant whole, inside its box (no sideways scroll),
    at 85 % of its own size or more (so its 8.5-pt text stays >= 11 px)?  At 1280 px: the wide variant?"""
    from serve import Tab

    from parallel_budget.book.figures import DPI, MIN_FONT_PT

    share = 11 / (MIN_FONT_PT * DPI / 72)
    t = Tab(browser, base_url, viewport={"width": width, "height": 900}, color_scheme=scheme)
    try:
        page = t.open(BUILDER)
        page.wait_for_function("s => document.documentElement.dataset.theme === s", arg=scheme)
        page.wait_for_function("() => [...document.querySelectorAll('.cell_output > figure img')].every((i) => i.complete && i.naturalWidth)")
        figs = page.evaluate(CHAPTER_FIGURES)
        assert len(figs) >= 6 and all(f["alt"] for f in figs)
        for f in figs:
            assert f["phone"] == (width == 390), f
            assert f["scroll"] <= f["box"] + 1 and f["right"] <= f["page"] + 1, f  # nothing to scroll sideways
            assert f["shown"] >= share * f["natural"] - 0.5, f  # text not shrunk below 11 px
            if width == 390 and scheme == "light":
                assert f["shown"] == pytest.approx(f["natural"], abs=1), f  # at its own size (dark pads it)
    finally:
        t.check()


def test_zero_bubble_schedules_in_the_menu_price_as_python(tab):
    """Does the schedule menu offer ZB-1P and ZB-V, each priced as plan_budget prices it, with W drawn in its own
    colour and named in the legend, and a ZB-V with 3 stages per rank refused in Chinese on that field?"""
    page = builder(tab, "#plan.dp=2&plan.tp=2&plan.pp=4&plan.zero_stage=1")
    options = page.eval_on_selector_all("#pb-plan-schedule option", "os => os.map(o => [o.value, o.textContent])")
    assert ["interleaved_zb", "交错式零气泡（ZB-1P）"] in options and ["zbv", "零气泡 ZB-V"] in options
    base = {"dp": "2", "tp": "2", "pp": "4", "zero_stage": "1"}
    page.click(f"{ROOT_SEL} details.pb-sub summary >> text=流水线调度与序列并行")  # folded under 方案
    for schedule in ("interleaved_zb", "zbv"):
        page.select_option("#pb-plan-schedule", schedule)
        want = pv.evaluate({**base, "schedule": schedule})["out"]
        page.wait_for_function("s => document.querySelector('[data-out=\"step\"]').textContent === s", arg=t_(want["step"]))
        assert page.locator(f"{ROOT_SEL} svg >> nth=0 >> rect.pb-w").count() > 0
        assert "权重梯度 W" in page.inner_text(f"{ROOT_SEL} .pb-legend >> nth=0")
    page.fill("#pb-plan-virtual_stages", "3")
    page.wait_for_selector("#pb-plan-virtual_stages[aria-invalid]")
    assert "ScheduleZBVZeroBubble" in page.inner_text('[data-msg="virtual_stages"]')
