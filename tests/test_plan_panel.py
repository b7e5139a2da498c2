"""Does the JupyterLab plan panel recompute through plan_budget, draw its figures and show Chinese messages?"""

import pytest

pytest.importorskip("ipywidgets")
matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import parallel_budget as pb  # noqa: E402
from parallel_budget.book import planlayout  # noqa: E402
from parallel_budget.book.plan_panel import GROUPS, plan_panel  # noqa: E402
from parallel_budget.model.units import fmt  # noqa: E402

KW = dict(model="llama2-7b", cluster="a100-40gb", global_batch=32)


def test_panel_shows_the_package_numbers_and_follows_inputs():
    """Does the panel show plan_budget's memory, exposed collectives and verdict, and recompute when TP changes?"""
    p = plan_panel(drawings=False)
    b = pb.plan_budget(**KW, dp=16, zero_stage=2)
    assert p.ok and fmt(b.memory.total) in p.result.value and b.verdict[0] in p.result.value
    assert "DP all-gather（更新后的参数" in p.result.value and "暴露" in p.result.value
    p.controls["dp"].value, p.controls["tp"].value = 8, 2
    b2 = pb.plan_budget(**KW, dp=8, tp=2, zero_stage=2)
    assert fmt(b2.memory.total) in p.result.value and "TP all-gather + reduce-scatter" in p.result.value
    best = pb.search_plans(devices=16, **KW).best
    assert f"DP={best.dp} TP={best.tp} PP={best.pp} ZeRO-{best.zero_stage}" in p.result.value


def test_inputs_come_in_groups_with_the_advanced_ones_folded():
    """Are the controls grouped model / batch / cluster / plan, with the advanced group in a closed accordion?"""
    p = plan_panel(drawings=False)
    assert [g for g, _ in GROUPS] == ["模型", "batch", "集群", "方案", "高级"]
    assert sorted(k for _, keys in GROUPS for k in keys) == sorted(p.controls)
    accordion = [c for c in p.children if c.__class__.__name__ == "Accordion"]
    assert len(accordion) == 1 and accordion[0].selected_index is None


def test_panel_draws_the_three_figures():
    """Does the panel draw the timeline, the memory bar and the scaling curve of the current plan?"""
    p = plan_panel()
    outputs = p.drawings.outputs
    assert p.ok and len(outputs) == 3 and all("image/png" in o["data"] for o in outputs)


def test_bits_are_read_as_bits():
    """Does "200 Gb/s" give the same plan as "25 GB/s", and the verdict say so?"""
    p = plan_panel(inter_bw="200 Gb/s", drawings=False)
    assert p.ok and "跨节点 25 GB/s（= 200 Gb/s）" in p.result.value


@pytest.mark.parametrize("control, bad, word", [
    ("inter_bw", "25 GB", "“跨节点带宽，每卡"), ("device_memory", "80", "device_memory"), ("tp", 3, "tp=3"),
    ("micro_batch", 3, "global_batch=32"), ("pp", 2, "zero_stage=2 不能与 pp=2 同用"),
])
def test_bad_input_shows_the_chinese_message(control, bad, word):
    """Does a wrong unit or an impossible split show the package's message naming it, not a traceback?"""
    p = plan_panel(drawings=False)
    p.controls[control].value = bad
    if control == "device_memory":  # a bare number is read as bytes: 80 B does not fit
        assert p.ok and "放不下" in p.result.value
        return
    assert not p.ok and word in p.result.value and "输入有误" in p.result.value


def test_new_terms_are_inputs_of_the_panel():
    """Do gradient precision, HBM bandwidth and the logits switch reach plan_budget, and is the optimizer shown?"""
    p = plan_panel(drawings=False)
    assert "优化器步" in p.result.value
    p.controls["grad_reduce_dtype"].value = "fp32"
    b = pb.plan_budget(**KW, dp=16, zero_stage=2, grad_reduce_dtype="fp32")
    assert fmt(b.memory.total) in p.result.value and "fp32 归约" in p.result.value
    p.controls["logits"].value = False
    assert fmt(pb.plan_budget(**KW, dp=16, zero_stage=2, grad_reduce_dtype="fp32", logits=False).memory.total) \
        in p.result.value
    p.controls["hbm_bw"].value = "3.35 TB/s"
    fast = pb.plan_budget(**KW, dp=16, zero_stage=2, grad_reduce_dtype="fp32", logits=False, hbm_bw="3.35 TB/s")
    assert p.ok and planlayout.t_(fast.optimizer.magnitude) in p.result.value


def test_pasted_nccl_tests_output_calibrates_the_dp_group():
    """Does nccl-tests output in the DP box give plan_budget(dp_nccl=...)'s step and the measured verdict?"""
    from parallel_budget.book import planlayout

    text = pb.nccl_tests_text("reduce-scatter", 16, "60 us", "40 GB/s")
    p = plan_panel(drawings=False, dp_nccl=text)
    b = pb.plan_budget(model="llama2-7b", cluster="a100-40gb", global_batch=32, dp=16, zero_stage=2, dp_nccl=text)
    assert planlayout.t_(b.step.magnitude) in p.result.value and "实测：DP 组" in p.result.value
    p.controls["dp_nccl"].value = "hello"
    assert "第 1 行" in p.result.value


def test_measured_step_gives_the_hfu_hfu_from_step_solves():
    """Does a measured step give pb.hfu_from_step's HFU and MFU, the plan at that HFU and the verdict marking HFU as
    measured; do tokens/s alone give the same; are a bare number, bad tokens/s and a too short step refused?"""
    p = plan_panel(drawings=False, step="8.2 s")
    f = pb.hfu_from_step("8.2 s", **KW, dp=16, zero_stage=2)
    assert p.ok and f"8.2 s → {pb.fmt_percent(f.hfu)} / {pb.fmt_percent(f.mfu)}" in p.result.value
    assert "<b>实测：HFU。" in p.result.value and planlayout.t_(f.budget.step.magnitude) in p.result.value
    p.controls["step"].value = ""
    p.controls["tokens_per_s"].value = str(32 * 4096 / 8.2)
    assert p.ok and f"→ {pb.fmt_percent(f.hfu)} / {pb.fmt_percent(f.mfu)}" in p.result.value
    p.controls["tokens_per_s"].value = "fast"
    assert not p.ok and "“实测每秒词元数（可留空）”需要一个正数" in p.result.value
    p.controls["tokens_per_s"].value = ""
    p.controls["step"].value = "8.2"
    assert not p.ok and "要写上单位" in p.result.value
    p.controls["step"].value = "500 ms"
    assert not p.ok and "比 hfu=1（计算跑满峰值）时模型的步时" in p.result.value
    p.controls["step"].value = ""
    assert p.ok and "实测步时 → HFU" not in p.result.value and "没有实测：HFU" in p.result.value
