"""Does the one-line overlap test predict what the timeline shows, and does the TP ratio follow its formula?"""

import math

import pytest

import parallel_budget as pb
from parallel_budget.book.overlapfigure import overlap_layout, self_consistent_threshold

KW = dict(model="llama2-7b", cluster="a100-40gb", global_batch=16, dp=16, micro_batch=1)


def _dp_exposed(stage: int, seq: int, dtype: str = "bf16") -> float:
    """Exposed DP communication of the gradient phase (ZeRO-1/2's end-of-step gather excluded) at seq tokens."""
    b = pb.plan_budget(**KW, zero_stage=stage, seq=seq, grad_reduce_dtype=dtype)
    return sum(c.exposed.to("s").magnitude for c in b.comm
               if c.group == "dp" and not (stage in (1, 2) and c.name == "DP all-gather"))


def _threshold(stage: int, dtype: str = "bf16"):
    s = pb.plan_budget(**KW, zero_stage=stage, seq=512, grad_reduce_dtype=dtype).settings
    grads = s["params"] * s["grad_bytes"]
    msg = grads / math.ceil(grads / s["bucket"]) if stage < 3 else grads / s["layers"]
    bw = pb.model.planterms.group_bandwidth(1, 16, 8, s["intra_bw"], s["inter_bw"])
    return pb.overlap_threshold(s["peak_flops"], bw, hfu=s["hfu"], ranks=16, zero_stage=stage,
                                grad_bytes=s["grad_bytes"], latency=s["latency"], message=msg)


@pytest.mark.parametrize("stage, dtype", [(0, "bf16"), (2, "bf16"), (3, "bf16"), (2, "fp32")])
def test_timeline_switches_where_the_formula_says(stage, dtype):
    """Sweeping tokens per microbatch, does exposed DP communication go from growing to flat within 10 % of the threshold?

    With ``grad_reduce_dtype="fp32"`` the wire carries 4 B per gradient: the threshold (and the switch) doubles."""
    th = _threshold(stage, dtype).tokens
    exposed = lambda seq: _dp_exposed(stage, seq, dtype)  # noqa: E731
    floor = exposed(int(2 * th))  # the first/last bucket or layer: exposed whatever the batch
    below = [exposed(int(th * f)) for f in (0.5, 0.7, 0.85)]
    assert below[0] > below[1] > below[2] > floor * 1.5  # growing as tokens shrink below the threshold
    assert exposed(int(th * 1.3)) == pytest.approx(floor, rel=0.05)  # near its floor above it
    lo, hi = int(th * 0.5), int(th * 2)  # the switch: the fewest tokens at which the exposure is back at its floor
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if exposed(mid) <= floor * 1.5 else (mid, hi)
    assert abs(hi - th) <= 0.1 * th, (hi, th)
    # counting the backward's attention FLOPs at the swept length (plan_threshold, a fixed point) lands closer still
    exact = self_consistent_threshold(pb.plan_budget(**KW, zero_stage=stage, seq=512, grad_reduce_dtype=dtype))
    assert abs(hi - exact) <= 0.03 * exact, (hi, exact)
    if dtype == "fp32":  # plan_threshold counts the reduce dtype's bytes on the wire
        assert exact == pytest.approx(2 * self_consistent_threshold(pb.plan_budget(**KW, zero_stage=stage, seq=512)),
                                      rel=0.05)


def test_threshold_of_the_chapter_cluster():
    """Is the bandwidth-only threshold (peak·hfu/B)·(2(R−1)/R·2 B)/(4 FLOPs) = 585 tokens, 8× more with bits for bytes?"""
    th = pb.overlap_threshold(312e12, "200 GB/s", hfu=0.4, ranks=16)
    assert th.flops_per_byte == pytest.approx(624)
    assert th.tokens == pytest.approx(624 * (2 * 15 / 16) * 2 / 4)
    assert pb.overlap_threshold(312e12, "25 GB/s", ranks=16).tokens == pytest.approx(8 * th.tokens)
    assert pb.overlap_threshold(312e12, "200 GB/s", ranks=16, zero_stage=2).tokens == pytest.approx(th.tokens / 2)
    assert pb.overlap_threshold(312e12, "200 GB/s", ranks=16, zero_stage=3).tokens == pytest.approx(th.tokens)
    assert pb.overlap_threshold(312e12, "200 GB/s", ranks=16, recompute="full").tokens == pytest.approx(
        th.tokens * 4 / 6)
    assert th.hides(600) and not th.hides(500)


def test_latency_raises_the_threshold():
    """Does α per round with a 25 MiB message lower the effective bandwidth and raise the threshold?"""
    th = pb.overlap_threshold(312e12, "200 GB/s", ranks=16, latency="5 us", message="25 MiB")
    per_call = 30 * 5e-6 + 2 * 15 / 16 * 25 * 2 ** 20 / 200e9
    assert th.effective_bandwidth.to("B/s").magnitude == pytest.approx(2 * 15 / 16 * 25 * 2 ** 20 / per_call)
    assert th.tokens > pb.overlap_threshold(312e12, "200 GB/s", ranks=16).tokens


def test_bad_inputs_are_refused():
    """Are a latency without a message, a bad stage and a zero bandwidth refused in Chinese?"""
    with pytest.raises(ValueError, match="message"):
        pb.overlap_threshold(312e12, "200 GB/s", latency="5 us")
    with pytest.raises(ValueError, match="zero_stage"):
        pb.overlap_threshold(312e12, "200 GB/s", zero_stage=4)
    with pytest.raises(ValueError, match="大于 0"):
        pb.overlap_threshold(312e12, "0 GB/s")


def test_tp_ratio_is_matmul_over_collective():
    """Is the TP ratio (layer params/t · 2 FLOPs) / (peak·hfu) over two all-reduces of s·h·2 bytes, batch-free?"""
    r = pb.tp_overlap(4096, 8, 312e12, "300 GB/s", ffn=11008, gated=True, tokens=4096)
    layer = 4 * 4096 ** 2 + 3 * 4096 * 11008
    mm = 2 * layer / 8 * 4096 / (312e12 * 0.4)
    coll = 2 * (2 * 7 / 8) * 4096 * 4096 * 2 / 300e9
    assert r.ratio == pytest.approx(mm / coll)
    assert r.exposed_in_model
    assert pb.tp_overlap(4096, 8, 312e12, "300 GB/s", ffn=11008, gated=True, tokens=512).ratio == pytest.approx(r.ratio)
    assert pb.tp_overlap(4096, 2, 312e12, "300 GB/s").ratio > pb.tp_overlap(4096, 8, 312e12, "300 GB/s").ratio


def test_overlap_layout_marks_the_switch_of_its_own_sweep():
    """Does the figure's sweep stay near its floor above the marked threshold and grow below it (25 Gb/s mistake too)?"""
    for bw in ("25 GB/s", "25 Gb/s"):
        b = pb.plan_budget(model="llama2-7b", cluster="a100-40gb", global_batch=32, dp=16, zero_stage=3, inter_bw=bw)
        L = overlap_layout(b)
        floor = L["exposed"][-1]
        above = [x for t, x in zip(L["tokens"], L["exposed"]) if t > 1.1 * L["threshold"]]
        below = [x for t, x in zip(L["tokens"], L["exposed"]) if t < 0.9 * L["threshold"]]
        assert above and below and max(above) <= 1.01 * floor and min(below) > 1.5 * floor
        assert below == sorted(below, reverse=True)
    assert overlap_layout(pb.plan_budget(model="llama2-7b", cluster="a100-40gb", global_batch=32, tp=16))["tokens"] == []


def test_overlap_figure_marks_each_threshold_in_chinese():
    """Does the chapter's overlap figure draw both curves' thresholds and Chinese axis labels, text ≥ 8.5 pt?"""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from parallel_budget.book import overlapfigure
    from parallel_budget.book.figures import MIN_FONT_PT

    kw = dict(model="llama2-7b", cluster="a100-40gb", global_batch=32, dp=16, zero_stage=3)
    panels = [(bw, overlap_layout(pb.plan_budget(**kw, inter_bw=bw))) for bw in ("25 GB/s", "25 Gb/s")]
    fig = overlapfigure.overlap_figure(panels)
    drawn = [t for ax in fig.axes for t in ax.texts + [ax.xaxis.label, ax.yaxis.label]]
    words = "\n".join(t.get_text() for t in drawn)
    for _, L in panels:
        assert f"阈值 {L['threshold']:,.0f}" in words
    assert "每个微批次的词元数" in words and "暴露的梯度通信" in words
    assert min(t.get_fontsize() for t in drawn) >= MIN_FONT_PT
    assert fig.get_size_inches()[0] <= 7.5
