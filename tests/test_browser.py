"""Do the calculators and the record page work in a real browser, offline and by keyboard?

Debian's chromium (Playwright for Python) against the built site on localhost.
Every page load is intercepted: anything but localhost is refused and fails
the test, and so does any console error or uncaught exception.
"""

from __future__ import annotations

import json
import re

import pytest

import parallel_budget as pb
from parallel_budget.book.calculators import evaluate

pytestmark = pytest.mark.slow


CALC = "book/calculators.html"
RECORD = "book/plan-record.html"


def out(page, kind, key):
    return page.locator(f'.pb-calc[data-calc="{kind}"] [data-out="{key}"]').inner_text()


def svg(page, kind):
    return page.locator(f'.pb-calc[data-calc="{kind}"] svg').inner_html()


def fill(page, kind, **values):
    for name, value in values.items():
        el = page.locator(f"#pb-{kind}-{name}")
        if el.evaluate("e => e.tagName") == "SELECT":
            el.select_option(value)
        else:
            el.fill(value)


def B(x):
    return pb.fmt(pb.Q_(x, "B"))


def S(x):
    return pb.fmt(pb.Q_(x, "s"))


@pytest.mark.parametrize("path", [CALC, RECORD])
def test_every_input_has_a_label(tab, path):
    """Has every input, select and textarea a non-empty <label> pointing at it?"""
    page = tab.open(path)
    page.wait_for_selector(".pb-calc form, .pb-record .pb-status")
    unlabelled = page.evaluate(
        "() => [...document.querySelectorAll('.pb-calc :is(input, select), .pb-record :is(input, select, textarea)')]"
        ".filter(e => ![...e.labels].some(l => l.textContent.trim())).map(e => e.id || e.name)"
    )
    assert page.locator(".pb-calc input, .pb-record input").count() > 5
    assert unlabelled == []


def test_ring_outputs_follow_the_package_and_the_timeline_redraws(tab):
    """Typing the unfamiliar configuration gives the package's numbers and a new SVG?"""
    page = tab.open(CALC)
    assert out(page, "ring", "send_per_rank") == B(3e9)
    before = svg(page, "ring")
    fill(page, "ring", ranks="8", grad="4", bandwidth="50", overlap="0.5")
    r = pb.ring_allreduce(8, "4 GB", "50 GB/s")
    s = pb.step_time("400 ms", 8, r.lower_bound, 0.5)
    assert out(page, "ring", "send_per_rank") == pb.fmt(r.send_per_rank) == "7 GB"
    assert out(page, "ring", "lower_bound") == pb.fmt(r.lower_bound) == "140 ms"
    assert out(page, "ring", "rounds") == str(r.steps)
    assert out(page, "ring", "step") == pb.fmt(s.step)
    assert out(page, "ring", "efficiency") == pb.fmt_percent(s.efficiency)
    assert svg(page, "ring") != before


def test_full_overlap_hides_only_behind_backward(tab):
    """Overlap 1 in the page gives step_time's backward-capped step (153 ms, not 120 ms), drawn in the shared palette?"""
    page = tab.open(CALC)
    fill(page, "ring", overlap="1")
    s = pb.step_time("400 ms", 4, "120 ms", overlap=1)
    assert out(page, "ring", "hidden_comm") == pb.fmt(s.hidden_comm) == "66.7 ms"
    assert out(page, "ring", "backward") == pb.fmt(s.backward)
    assert out(page, "ring", "step") == pb.fmt(s.step) == "153 ms"
    fill(page, "ring", compute="4000", last_bucket="30")
    assert out(page, "ring", "exposed_comm") == "30 ms"
    fill(page, "ring", last_bucket="500")
    assert "最后一个桶" in page.locator('[data-msg="last_bucket"]').inner_text()
    fill(page, "ring", last_bucket="0")
    colour = page.evaluate(
        "() => getComputedStyle(document.querySelector('.pb-calc[data-calc=\"ring\"] rect.pb-x')).fill")
    assert colour == "rgb(230, 159, 0)"  # figures.PALETTE["exposed"], #E69F00
    note = page.locator('.pb-calc[data-calc="ring"] .pb-note').inner_text()
    assert "反向" in note and "最后一个桶" in note


def test_bits_change_the_time_not_the_volume(tab):
    """Does switching GB/s to Gb/s change the lower bound 8x and leave the volume?"""
    page = tab.open(CALC)
    send, bound, before = out(page, "ring", "send_per_rank"), out(page, "ring", "lower_bound"), svg(page, "ring")
    fill(page, "ring", bw_unit="Gb/s")
    assert out(page, "ring", "send_per_rank") == send
    assert out(page, "ring", "lower_bound") == pb.fmt(pb.ring_allreduce(4, "2 GB", "25 Gb/s").lower_bound) != bound
    assert svg(page, "ring") != before


def test_update_flags_a_sum_without_scaling(tab):
    """Does the update calculator flag 'sum' and 'mean_twice' and accept 'mean'?"""
    page = tab.open(CALC)
    fill(page, "update", grads="1, 2, 3, 6", lr="0.5", w0="2")
    for reduction in ("sum", "mean_twice", "mean"):
        fill(page, "update", reduction=reduction)
        r = pb.data_parallel_update(2.0, [1, 2, 3, 6], 0.5, reduction)
        assert out(page, "update", "weights") == ", ".join(f"{w:.6g}" for w in r.weights)
        assert out(page, "update", "reference") == f"{r.reference:.6g}"
        flag = page.locator('.pb-calc[data-calc="update"] [data-out="flag"]')
        assert ("不一致" in flag.inner_text()) == (not r.matches_reference)


def test_zero_rows_bars_and_fit(tab):
    """Are the four ZeRO rows the package's, with the right fit verdicts and new bars?"""
    page = tab.open(CALC)
    before = svg(page, "zero")
    fill(page, "zero", params="7B", dp="8", memory="80")
    table = pb.zero_table("7B", 8)
    for row in table:
        assert out(page, "zero", f"total{row.stage}") == pb.fmt(row.total)
        assert out(page, "zero", f"fits{row.stage}") == ("放得下" if row.fits("80 GB") else "放不下")
    assert "ZeRO-1" in out(page, "zero", "fit") and table.smallest_fitting_stage("80 GB") == 1
    assert "激活" in page.locator('.pb-calc[data-calc="zero"] .pb-note').inner_text()
    for stage in range(4):
        assert out(page, "zero", f"comm{stage}") == pb.fmt(pb.zero_communication("7B", 8, stage).send_per_rank)
    assert "训练状态计算器" in page.locator('.pb-calc[data-calc="zero"] .pb-title').inner_text()
    assert svg(page, "zero") != before


def test_pipeline_both_conventions_and_gantt(tab):
    """Does the pipeline calculator give both bubble conventions and redraw the Gantt chart?"""
    page = tab.open(CALC)
    before = svg(page, "pipeline")
    fill(page, "pipeline", stages="3", microbatches="5", stage_times="5, 20, 5")
    b = pb.pipeline_bubble(3, 5)
    s = pb.pipeline_schedule(["5 ms", "20 ms", "5 ms"], 5)
    assert out(page, "pipeline", "idle_fraction") == pb.fmt_percent(b.idle_fraction)
    assert out(page, "pipeline", "bubble_over_ideal") == pb.fmt_percent(b.bubble_over_ideal)
    assert out(page, "pipeline", "makespan") == pb.fmt(s.makespan)
    assert out(page, "pipeline", "schedule_idle_fraction") == pb.fmt_percent(s.idle_fraction)
    after = svg(page, "pipeline")
    assert after != before
    # one path per stage and colour; each slot is one closed sub-path
    assert after.count("<path") == 6 and after.count("z") == 15


def test_tp_volume_per_layer_and_step(tab):
    """Are the TP all-reduce volumes the package's, starting from the chapter's batch of 8?"""
    page = tab.open(CALC)
    assert page.input_value("#pb-tp-batch") == "8"
    assert out(page, "tp", "send_per_rank_per_step") == pb.fmt(pb.tp_allreduce(8, 2048, 4096, 4, 32).send_per_rank_per_step)
    fill(page, "tp", tp="8", hidden="8192", layers="80")
    r = pb.tp_allreduce(8, 2048, 8192, 8, 80)
    assert out(page, "tp", "per_layer") == pb.fmt(r.per_layer)
    assert out(page, "tp", "per_step") == pb.fmt(r.per_step)
    assert out(page, "tp", "message") == pb.fmt(r.message, "MB")


@pytest.mark.parametrize(
    "kind, field, bad",
    [
        ("ring", "ranks", ""), ("ring", "ranks", "0"), ("ring", "ranks", "-4"), ("ring", "grad", "abc"),
        ("ring", "bandwidth", "1e999"), ("ring", "compute", "1e30"), ("zero", "params", "7 billion"),
        ("update", "grads", "3"), ("pipeline", "stage_times", "10, 10"), ("tp", "hidden", "4095"),
    ],
)
def test_invalid_input_is_flagged_inline(tab, kind, field, bad):
    """Empty, zero, negative, non-numeric or absurd input: a Chinese message by the field, no NaN?"""
    page = tab.open(CALC)
    fill(page, kind, **{field: bad})
    assert evaluate(kind, {field: bad}) == {"errors": [field]}
    msg = page.locator(f'.pb-calc[data-calc="{kind}"] [data-msg="{field}"]').inner_text()
    assert re.search(r"[\u4e00-\u9fff]", msg), msg
    assert page.locator(f"#pb-{kind}-{field}").get_attribute("aria-invalid") == "true"
    box = page.locator(f'.pb-calc[data-calc="{kind}"]').inner_text()
    assert "NaN" not in box and "Infinity" not in box
    assert page.locator(f'.pb-calc[data-calc="{kind}"] .pb-results').inner_text() == ""


def test_url_hash_round_trip(tab):
    """Does a link with the inputs in its hash restore them on a fresh page?"""
    page = tab.open(CALC)
    fill(page, "ring", ranks="8", grad="1.5", grad_unit="GiB", bw_unit="Gb/s")
    fill(page, "zero", params="350M", memory_unit="GiB")
    page.wait_for_function("location.hash.includes('zero.memory_unit=GiB')")
    url = page.url
    assert "ring.ranks=8" in url and "zero.params=350M" in url
    expected = out(page, "ring", "lower_bound"), out(page, "zero", "total3")
    fresh = tab.context.new_page()
    fresh.goto(url)
    fresh.wait_for_selector('.pb-calc[data-calc="zero"] [data-out="total3"]')
    assert fresh.input_value("#pb-ring-ranks") == "8"
    assert fresh.input_value("#pb-ring-grad_unit") == "GiB"
    assert fresh.input_value("#pb-zero-params") == "350M"
    assert (out(fresh, "ring", "lower_bound"), out(fresh, "zero", "total3")) == expected
    fresh.evaluate("location.hash = 'tp.tp=8&tp.hidden=8192'")  # a pasted link on an open page
    fresh.wait_for_function("document.querySelector('#pb-tp-tp').value === '8'")
    assert out(fresh, "tp", "per_step") == pb.fmt(pb.tp_allreduce(8, 2048, 8192, 8, 32).per_step)
    fresh.evaluate("location.hash = 'some-section'")  # a link to a heading leaves the inputs alone
    fresh.wait_for_timeout(100)
    assert fresh.input_value("#pb-tp-tp") == "8"
    fresh.close()


def test_keyboard_only(tab):
    """Can the ring calculator be filled with Tab, typing and arrow keys alone?"""
    page = tab.open(CALC)
    page.focus("#pb-ring-ranks")  # the one programmatic step: where the reader starts
    page.keyboard.press("Control+A")
    page.keyboard.type("8")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "pb-ring-grad"
    page.keyboard.press("Control+A")
    page.keyboard.type("4")
    page.keyboard.press("Tab")  # the unit select
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "pb-ring-bandwidth"
    page.keyboard.press("Control+A")
    page.keyboard.type("50")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "pb-ring-bw_unit"
    page.keyboard.press("ArrowDown")
    assert page.input_value("#pb-ring-bw_unit") == "Gb/s"
    assert out(page, "ring", "send_per_rank") == "7 GB"
    assert out(page, "ring", "lower_bound") == pb.fmt(pb.ring_allreduce(8, "4 GB", "50 Gb/s").lower_bound)
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none", "the focused control shows no focus ring"


def record_page(tab):
    page = tab.open(RECORD)
    page.wait_for_selector(".pb-record .pb-status")
    return page


def test_record_survives_reload(tab):
    """Fill, reload: is everything still there, and is nothing ticked that the learner did not tick?"""
    page = record_page(tab)
    assert "不会发到任何服务器" in page.inner_text("article")  # says where the record lives
    page.fill("#pb-rec-model", "7B")
    page.select_option("#pb-rec-bw_kind", "bits")
    page.fill("#pb-rec-results", "每 rank 发送 7 GB\n下界 140 ms")
    page.check("#pb-rec-c_bits")
    assert "已自动保存" in page.inner_text(".pb-record .pb-status")
    page.reload()
    page.wait_for_selector(".pb-record .pb-status")
    assert page.input_value("#pb-rec-model") == "7B"
    assert page.input_value("#pb-rec-bw_kind") == "bits"
    assert page.input_value("#pb-rec-results") == "每 rank 发送 7 GB\n下界 140 ms"
    assert page.is_checked("#pb-rec-c_bits")
    assert [page.is_checked(f"#pb-rec-{c}") for c in ("c_bw", "c_new", "c_ddp")] == [False] * 3


def test_record_export_import_round_trip(tab, tmp_path):
    """Export JSON and Markdown, clear, import the JSON: same record; a bad file is refused?"""
    page = record_page(tab)
    page.fill("#pb-rec-bandwidth", "25 GB/s")
    page.fill("#pb-rec-uncertain", "跨节点带宽未实测")
    page.check("#pb-rec-c_batch")
    with page.expect_download() as d:
        page.click('.pb-record [data-act="json"]')
    exported = tmp_path / "record.json"
    d.value.save_as(exported)
    data = json.loads(exported.read_text(encoding="utf-8"))
    assert data["format"] == "pb-plan-record" and data["fields"]["bandwidth"] == "25 GB/s"
    with page.expect_download() as d:
        page.click('.pb-record [data-act="md"]')
    md = tmp_path / "record.md"
    d.value.save_as(md)
    text = md.read_text(encoding="utf-8")
    assert "# 并行方案与通信预算" in text and "跨节点带宽未实测" in text
    assert "- [x] 写明了全局 batch 是否不变" in text and "- [ ] 写明了带宽是字节还是比特" in text
    page.click("text=清空记录")
    page.click("text=再点一次确认清空")
    assert page.input_value("#pb-rec-bandwidth") == ""
    page.set_input_files("#pb-rec-import", str(exported))
    page.wait_for_function("document.querySelector('#pb-rec-bandwidth').value === '25 GB/s'")
    assert page.is_checked("#pb-rec-c_batch")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**data, "checks": {"c_batch": "yes"}}), encoding="utf-8")
    page.set_input_files("#pb-rec-import", str(bad))
    page.wait_for_function("document.querySelector('.pb-record .pb-status').textContent.includes('导入失败')")
    assert "c_batch" in page.inner_text(".pb-record .pb-status")
    assert page.input_value("#pb-rec-bandwidth") == "25 GB/s"


@pytest.mark.parametrize("stored", ["{not json", '{"format": "someone-else", "version": 1}', "[1, 2, 3]", '"7B"'])
def test_record_corrupted_storage(tab, stored):
    """A corrupted or foreign localStorage value: a message, a reset, and a page that still works?"""
    page = record_page(tab)
    page.evaluate("v => localStorage.setItem('pb-plan-record-v1', v)", stored)
    page.reload()
    alert = page.locator(".pb-record .pb-alert")
    alert.wait_for(state="visible")
    assert "无法读取" in alert.inner_text()
    page.fill("#pb-rec-model", "13B")
    assert page.evaluate("localStorage.getItem('pb-plan-record-v1')") == stored, "overwrote the old value"
    page.click("text=清除本浏览器里的旧记录并重新开始")
    assert alert.is_hidden()
    page.fill("#pb-rec-model", "13B")
    page.reload()
    page.wait_for_selector(".pb-record .pb-status")
    assert page.input_value("#pb-rec-model") == "13B"


def test_chapter_pages_load_offline(tab, built_site):
    """Do the chapter pages load with nothing but localhost requests and no console errors?"""
    for html in sorted(built_site.glob("book/*.html")):
        tab.open(f"book/{html.name}")


def test_record_by_keyboard(tab):
    """Can the record be filled, ticked and exported with the keyboard alone?"""
    page = record_page(tab)
    page.focus("#pb-rec-model")  # where the reader starts
    page.keyboard.type("7B")
    page.keyboard.press("Tab")
    page.keyboard.type("8")
    active = "document.activeElement.id || document.activeElement.dataset.act"
    for _ in range(20):
        page.keyboard.press("Tab")
        if page.evaluate(active) == "pb-rec-c_bw":
            break
    page.keyboard.press("Space")
    assert page.is_checked("#pb-rec-c_bw")
    for _ in range(20):
        page.keyboard.press("Tab")
        if page.evaluate(active) == "json":
            break
    with page.expect_download() as d:
        page.keyboard.press("Enter")
    data = json.loads(open(d.value.path(), encoding="utf-8").read())
    assert data["fields"]["model"] == "7B" and data["fields"]["ranks"] == "8" and data["checks"]["c_bw"] is True


def test_calculators_work_from_a_file_url(disk_tab):
    """Opened straight from disk (file://), do the calculators still compute?"""
    page = disk_tab.open("book/calculators.html")
    page.locator("#pb-ring-ranks").wait_for()
    assert out(page, "ring", "lower_bound") == pb.fmt(pb.ring_allreduce(4, "2 GB", "25 GB/s").lower_bound)
    fill(page, "ring", bw_unit="Gb/s")
    assert out(page, "ring", "lower_bound") == pb.fmt(pb.ring_allreduce(4, "2 GB", "25 Gb/s").lower_bound)


def test_quantity_fields_take_what_people_type(tab):
    """Does a value with its unit work in any quantity field ("25 Gb/s", "0.5 TB", "1.2 s"), read as the package reads it?"""
    page = tab.open(CALC)
    fill(page, "ring", bandwidth="25 Gb/s")
    assert page.input_value("#pb-ring-bw_unit") == "GB/s"  # the typed unit wins over the select
    assert out(page, "ring", "lower_bound") == pb.fmt_auto(pb.ring_allreduce(4, "2 GB", "25 Gb/s").lower_bound) == "960 ms"
    assert "按你写的 25\u00a0Gb/s 计算" in page.locator("#pb-ring-bandwidth-hint").inner_text()  # number and unit kept together
    fill(page, "ring", bandwidth="25", grad="0.5 TB", compute="1.2 s")
    r = pb.ring_allreduce(4, "0.5 TB", "25 GB/s")
    assert out(page, "ring", "send_per_rank") == pb.fmt_auto(r.send_per_rank) == "750 GB"
    assert out(page, "ring", "step") == pb.fmt_auto(pb.step_time("1.2 s", 4, r.lower_bound).step)
    fill(page, "zero", memory="80 GiB", params="6.738e9")
    assert out(page, "zero", "fits0") == ("放得下" if pb.zero_table(6.738e9, 4)[0].fits("80 GiB") else "放不下")
    assert "读作 67.4 亿" in page.locator("#pb-zero-params-hint").inner_text()
    fill(page, "update", grads="2，6；4")
    assert out(page, "update", "weights") == ", ".join(f"{w:.6g}" for w in pb.data_parallel_update(1, [2, 6, 4], 0.1).weights)


def test_times_are_shown_in_the_unit_their_size_calls_for(tab):
    """Between 1 s and 100 s a time reads "1.12 s" (never "1.12e+03 ms"), and a zero beside "120 ms" reads "0 ms"?"""
    page = tab.open(CALC)
    assert out(page, "ring", "hidden_comm") == "0 ms"
    fill(page, "ring", compute="4000")
    step = pb.step_time("4000 ms", 4, "120 ms").step
    assert out(page, "ring", "step") == pb.fmt_auto(step) == "1.12 s"
    assert "e+" not in page.locator('.pb-calc[data-calc="ring"] .pb-results').inner_text()


@pytest.mark.parametrize("field, typed, words", [
    ("bandwidth", "1e-300", "带宽小于 1 MB/s，不像真实链路"), ("bandwidth", "200 TB/s", "不像真实链路"),
    ("bandwidth", "25 gb/s", "GB/s 或 Gb/s"), ("grad", "500 mb", "MB 或 Mb"), ("compute", "3 h", "不像一步训练的计算"),
])
def test_implausible_or_ambiguous_quantities_are_refused_with_a_reason(tab, field, typed, words):
    """Is a bandwidth under 1 MB/s, a 3-hour step or an ambiguous unit refused with a message saying why?"""
    page = tab.open(CALC)
    fill(page, "ring", **{field: typed})
    assert evaluate("ring", {field: typed}) == {"errors": [field]}
    assert words in page.locator(f'.pb-calc[data-calc="ring"] [data-msg="{field}"]').inner_text()


def test_the_timeline_draws_the_single_device_time(tab):
    """Is the first bar of the ring timeline the one-device compute time (400 ms), as long as the step allows?"""
    page = tab.open(CALC)
    first = page.locator('.pb-calc[data-calc="ring"] svg rect').first
    assert first.locator("title").text_content() == "单卡计算 400 ms"
    fill(page, "ring", compute="1.2 s")
    assert first.locator("title").text_content() == "单卡计算 1.2 s"
