"""Do the JupyterLab panels recompute through the package and show Chinese messages for bad input?"""

import pytest

pytest.importorskip("ipywidgets")

import parallel_budget as pb  # noqa: E402
from parallel_budget.book import widgets  # noqa: E402
from parallel_budget.model.units import fmt, fmt_percent  # noqa: E402


def test_ring_panel_starts_at_the_lesson_example_and_follows_inputs():
    """Does the ring panel show 3 GB / 120 ms / 220 ms and recompute when R or bandwidth change?"""
    p = widgets.ring_panel()
    for value in ("3 GB", "12 GB", "120 ms", "220 ms", "1.82 倍", "45.5%"):
        assert f"<b>{value}</b>" in p.result.value
    p.controls["ranks"].value = 8
    p.controls["grad"].value = "4 GB"
    p.controls["bandwidth"].value = "50 GB/s"
    r = pb.ring_allreduce(8, "4 GB", "50 GB/s")
    assert f"<b>{fmt(r.send_per_rank)}</b>" in p.result.value
    assert f"<b>{fmt(r.lower_bound, digits=4)}</b>" in p.result.value


def test_ring_panel_overlap_and_bits():
    """Does overlap shorten the step as step_time says, and does Gb/s give the eight-times-longer bound?"""
    p = widgets.ring_panel(overlap=0.5)
    s = pb.step_time("400 ms", 4, "120 ms", 0.5)
    assert f"<b>{fmt(s.step, digits=4)}</b>" in p.result.value
    p.controls["bandwidth"].value = "25 Gb/s"
    assert "<b>960 ms</b>" in p.result.value


@pytest.mark.parametrize(
    "make, control, bad, label",
    [
        (widgets.ring_panel, "bandwidth", "25 GB", "单向有效带宽"),
        (widgets.ring_panel, "bandwidth", "25", "单向有效带宽"),  # no unit: not silently 25 B/s
        (widgets.ring_panel, "grad", "two", "梯度总量 G"),
        (widgets.ring_panel, "last_bucket", "500 ms", "最后一个桶的通信时间"),  # more than all the communication
        (widgets.update_panel, "grads", "2, x", "各 rank 本地梯度"),
        (widgets.zero_panel, "params", "lots", "参数个数 P"),
        (widgets.zero_panel, "device_memory", "80", "每卡可用显存"),
        (widgets.pipeline_panel, "stage_times", "10, 10 kg", "各阶段每微批次时间"),
        (widgets.tp_panel, "bandwidth", "fast", "单向有效带宽"),
    ],
)
def test_bad_input_shows_a_message_in_the_panels_words(make, control, bad, label):
    """Does a bad field show a Chinese message naming the field as the panel labels it, with none of the
    package's or pint's jargon (function names, [information] / [time], byte / second, SI bare numbers)?"""
    p = make()
    assert p.ok
    p.controls[control].value = bad
    assert not p.ok
    assert "输入有误" in p.result.value and f"“{label}”" in p.result.value
    assert "<table>" not in p.result.value
    for jargon in ("()", "[information]", "[time]", "byte", "second", "纯数字", f"参数 {control}"):
        assert jargon not in p.result.value, (jargon, p.result.value)


def test_ring_panel_has_the_calculators_backward_ratio_and_last_bucket():
    """Does the ring panel offer what its prose and the site's calculator offer: the backward/forward time
    ratio (backward's share r/(1+r)) and the always-exposed last bucket, recomputed through step_time?"""
    p = widgets.ring_panel(overlap=1.0)
    assert {"backward_ratio", "last_bucket"} <= set(p.controls)
    assert p.controls["backward_ratio"].description == "反向耗时是前向的几倍"
    p.controls["backward_ratio"].value = 1.0
    s = pb.step_time("400 ms", 4, "120 ms", 1.0, backward_share=0.5)
    assert f"<b>{fmt(s.step, digits=4)}</b>" in p.result.value
    p.controls["backward_ratio"].value = 4.0  # backward 80 ms of 100 ms: the last bucket now limits what hides
    p.controls["last_bucket"].value = "60 ms"
    s = pb.step_time("400 ms", 4, "120 ms", 1.0, backward_share=0.8, last_bucket="60 ms")
    assert s.exposed_comm.to("ms").magnitude == pytest.approx(60)  # not 40: the last bucket stays exposed
    assert f"<b>{fmt(s.step, digits=4)}</b>" in p.result.value and f"<b>{fmt(s.exposed_comm, digits=4)}</b>" in p.result.value


def test_lists_take_full_width_commas():
    """Do list fields read 2，6 and 10 ms、15 ms (full-width separators a Chinese keyboard types)?"""
    assert widgets.update_panel(grads="2，6").ok
    p = widgets.pipeline_panel("10 ms，10 ms、15 ms", 8)
    assert f"<b>{fmt(pb.pipeline_schedule(['10 ms', '10 ms', '15 ms'], 8).makespan)}</b>" in p.result.value


def test_update_panel_reductions():
    """Do mean / sum / mean_twice give 0.6 / 0.2 / 0.8 and say whether they match one process?"""
    p = widgets.update_panel()
    assert "<b>0.6, 0.6</b>" in p.result.value and "<b>是</b>" in p.result.value
    for reduction in ("sum", "mean_twice"):
        p.controls["reduction"].value = reduction
        w = pb.data_parallel_update(1, [2, 6], 0.1, reduction).weights[0]
        assert f"<b>{w:.6g}, {w:.6g}</b>" in p.result.value and "否" in p.result.value


def test_zero_panel_rows_and_fit():
    """Does the ZeRO panel list the four rows with each one's per-rank traffic (as the calculator does), and
    the lowest stage that fits?"""
    p = widgets.zero_panel()
    assert all(f"<b>{fmt(r.total)}</b>" in p.result.value for r in pb.zero_table(1e9, 4))
    assert "<b>4.5 GB</b><td><b>1.5 倍</b>" in p.result.value.replace("</td>", "")  # ZeRO-3: 1.5x DDP's 3 GB
    assert "<b>ZeRO-1</b>" in p.result.value
    p.controls["device_memory"].value = "1 GB"
    assert "都放不下" in p.result.value


def test_pipeline_and_tp_panels():
    """Do the pipeline and TP panels show schedule and tp_allreduce results?"""
    p = widgets.pipeline_panel("10 ms, 10 ms, 10 ms, 15 ms", 8)
    s = pb.pipeline_schedule(["10 ms", "10 ms", "10 ms", "15 ms"], 8)
    assert f"<b>{fmt(s.makespan)}</b>" in p.result.value
    assert f"<b>{fmt_percent(s.idle_fraction)}</b>" in p.result.value
    assert f"<b>{fmt_percent(pb.pipeline_bubble(4, 8).idle_fraction)}</b>" in p.result.value
    t = widgets.tp_panel()
    c = pb.tp_allreduce(8, 2048, 4096, 4, 32)
    assert f"<b>{fmt(c.send_per_rank_per_step)}</b>" in t.result.value
    t.controls["tp"].value = 3  # 4096 is not divisible by 3
    assert not t.ok and "整除" in t.result.value


def test_hang_panel():
    """Does the hang panel point at the rank that stopped and recover when sequences agree?"""
    p = widgets.hang_panel()
    assert "rank 2" in p.result.value and "第 3 次" in p.result.value
    p.controls["rank2"].value = "all_reduce, all_reduce, all_reduce"
    assert "协议一致" in p.result.value
