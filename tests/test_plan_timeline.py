"""Does the step timeline schedule DDP, ZeRO-1/2/3, TP and PP the way the frameworks do?

What each rule follows (cited in chapter 6 too):
* PyTorch DDP (Li et al. 2020, VLDB, section 3.2): gradients in buckets (bucket_cap_mb, 25 MiB), each
  all-reduced as soon as it is full, during backward; only the last bucket waits for backward to end.
* Megatron-LM's distributed optimizer (ZeRO-1): reduce-scatter, optimizer step on the shard, all-gather of
  the updated parameters, which ``--overlap-param-gather`` moves behind the next step's forward.
* DeepSpeed ZeRO-2 keeps gradients sharded, so each micro-step's backward reduce-scatters them
  (deepspeedai/DeepSpeed issue #2252).
* FSDP / DeepSpeed ZeRO-3: each layer's parameters gathered before its forward and its backward, the
  next layer's gather issued when a layer starts (one layer of prefetch), gradients reduce-scattered
  after each layer's backward, for every microbatch.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

import parallel_budget as pb
from parallel_budget.model.planstep import AG, AGB, AR, RS, StepSpec, build
from parallel_budget.model.timeline import read

BASE = dict(model="llama2-7b", cluster="a100-40gb", global_batch=32)
FAST = dict(inter_bw="1000 GB/s", intra_bw="1000 GB/s")  # compute-bound: only what must wait is exposed


def spec(**kw):
    d = dict(schedule="1f1b", p=1, v=1, m=4, stage=0, dp=True, layers=8, f=1.0, b=2.0, tf=0.0, tb=0.0, d=0.0,
             buckets=10, grad_bucket=0.01, param_bucket=0.01, layer_gather=0.01, layer_scatter=0.01)
    d.update(kw)
    return StepSpec(**d)


def reading(sp):
    return read(build(sp), 0, 6)


def test_ddp_all_reduce_streams_behind_the_last_backward_and_exposes_the_last_bucket():
    """DDP: one bucketed all-reduce during the last microbatch's backward; only the last bucket is exposed."""
    r = reading(spec(stage=0, grad_bucket=0.01))
    assert r.exposed[AR] == pytest.approx(0.01)  # the last bucket
    assert r.step == pytest.approx(4 * 3.0 + 0.01) and r.comm[AR] == pytest.approx(10 * 0.01)
    slow = reading(spec(stage=0, grad_bucket=0.5))  # 10 buckets of 0.5 s behind a 2 s backward
    # first bucket ready after 0.2 s of the last backward, then 10 × 0.5 s back to back
    assert slow.exposed[AR] == pytest.approx(0.2 + 5.0 - 2.0)
    off = reading(spec(stage=0, grad_bucket=0.01, overlap_grad_reduce=False))
    assert off.exposed[AR] == pytest.approx(0.1)  # all of it, after backward


def test_zero1_gathers_after_the_optimizer_unless_overlapped_with_the_next_forward():
    """ZeRO-1: reduce-scatter as DDP, then the optimizer, then the all-gather, exposed unless overlap_param_gather."""
    r = reading(spec(stage=1))
    assert r.exposed[RS] == pytest.approx(0.01) and r.exposed[AG] == pytest.approx(10 * 0.01)
    assert r.step == pytest.approx(4 * 3.0 + 0.01 + 0.1)
    ov = reading(spec(stage=1, overlap_param_gather=True))
    assert ov.exposed[AG] == pytest.approx(0.01)  # the next forward waits for its first bucket only
    assert ov.step == pytest.approx(0.01 + 4 * 3.0 + 0.01)


def test_zero2_reduce_scatters_every_microbatch():
    """ZeRO-2: a reduce-scatter behind every microbatch's backward, then the all-gather after the optimizer."""
    b = pb.plan_budget(**BASE, **FAST, dp=16, zero_stage=2, micro_batch=1)
    rs = next(c for c in b.comm if c.name == "DP reduce-scatter")
    one = pb.plan_budget(**BASE, **FAST, dp=16, zero_stage=1, micro_batch=1)
    rs1 = next(c for c in one.comm if c.name == "DP reduce-scatter")
    assert b.microbatches == 2 and rs.calls == 2 * rs1.calls and rs.bytes == 2 * rs1.bytes
    assert rs.exposed.magnitude == pytest.approx(rs1.exposed.magnitude)  # only the last microbatch's last bucket
    r = reading(spec(stage=2))
    assert r.comm[RS] == pytest.approx(4 * 10 * 0.01) and r.exposed[RS] == pytest.approx(0.01)


def test_zero3_gathers_every_layer_with_one_layer_of_prefetch():
    """ZeRO-3: the first gather of each forward and backward is exposed, the next layers' hide behind compute."""
    n, m, g = 8, 4, 0.01
    r = reading(spec(stage=3, layers=n, m=m, layer_gather=g, layer_scatter=g))
    assert r.comm[AG] == pytest.approx(m * n * g) and r.comm[AGB] == pytest.approx(m * n * g)
    assert r.exposed[AG] == pytest.approx(m * g) and r.exposed[AGB] == pytest.approx(m * g)
    # each backward's last reduce-scatter delays the next forward's first gather, the last one ends the step
    assert r.exposed[RS] == pytest.approx(m * g)
    assert r.step == pytest.approx(m * 3.0 + 3 * m * g)
    # comm-bound: a layer's gather (0.2 s) longer than its forward (0.125 s) keeps compute waiting
    bound = reading(spec(stage=3, layers=n, m=1, layer_gather=0.2, layer_scatter=0.0))
    assert bound.exposed[AG] == pytest.approx(0.2 + (n - 1) * (0.2 - 1.0 / n))


def test_zero3_exposes_less_than_zero2_although_it_sends_more():
    """On the chapter's example, does ZeRO-3 send more than ZeRO-2 and still expose less (all-gather at the end)?"""
    z2, z3 = (pb.plan_budget(**BASE, dp=16, zero_stage=s) for s in (2, 3))
    assert sum(c.bytes for c in z3.comm) > sum(c.bytes for c in z2.comm)
    assert z3.exposed_comm < z2.exposed_comm and z3.step < z2.step
    z2o = pb.plan_budget(**BASE, dp=16, zero_stage=2, overlap_param_gather=True)
    assert z2o.step < z3.step  # unless ZeRO-2's gather moves behind the next forward


def test_pipeline_messages_wait_on_the_receiver_only():
    """PP: does the first rank receive each microbatch's gradient, and wait only for what it has no work beside?"""
    b = pb.plan_budget(**BASE, dp=2, tp=2, pp=4, zero_stage=1)
    (pp,) = [c for c in b.comm if c.group == "pp"]
    assert pp.calls == b.microbatches and 0 < pp.exposed < pp.time
    inter = pb.plan_budget(**BASE, dp=2, tp=2, pp=4, zero_stage=1, schedule="interleaved")
    (pi,) = [c for c in inter.comm if c.group == "pp"]
    assert pi.calls == 3 * inter.microbatches  # (2v − 1)·m messages on the first rank
    assert inter.bubble < b.bubble and inter.memory.in_flight > b.memory.in_flight


@pytest.mark.parametrize("schedule", ["interleaved_zb", "zbv"])
def test_zero_bubble_plan_reads_its_bubble_and_memory_off_the_timeline(schedule):
    """Does plan_budget run the split backward: I and W blocks on the timeline, a bubble below interleaved 1F1B's
    at the same memory as 1F1B's held microbatches, and the assumption (W = half of backward) stated?"""
    one = pb.plan_budget(**BASE, dp=2, tp=2, pp=4, zero_stage=1, schedule="1f1b")
    inter = pb.plan_budget(**BASE, dp=2, tp=2, pp=4, zero_stage=1, schedule="interleaved")
    zb = pb.plan_budget(**BASE, dp=2, tp=2, pp=4, zero_stage=1, schedule=schedule)
    kinds = {e.tag[0] for e in zb.timeline if e.stream == "compute"}
    assert kinds == {"F", "I", "W", "O"} and zb.virtual_stages == 2  # O: the optimizer step (issue 32 §2)
    w = [e.work for e in zb.timeline if e.stream == "compute" and e.tag[0] == "W"]
    f = [e.work for e in zb.timeline if e.stream == "compute" and e.tag[0] == "F"]
    assert w[0] == pytest.approx(f[0])  # W is half of the (non-recomputed) backward, 2·forward
    assert zb.bubble < inter.bubble < one.bubble and zb.step < inter.step
    assert zb.compute.magnitude == pytest.approx(inter.compute.magnitude)
    assert zb.memory.in_flight == 2 * one.memory.in_flight  # held until W, half a stage each
    assert zb.memory.activations.magnitude == pytest.approx(one.memory.activations.magnitude)
    assert any("I（输入梯度）与 W（权重梯度），各按不含重算的反向的一半计" in a for a in zb.assumptions)
    assert not any("W（权重梯度）" in a for a in inter.assumptions)


def test_timeline_events_carry_what_the_drawing_needs():
    """Does the budget's timeline list every device's events, compute busy for its work, TP after its compute?"""
    b = pb.plan_budget(**BASE, dp=2, tp=2, pp=4, zero_stage=1)
    ev = b.timeline
    assert {e.device for e in ev} == {0, 1, 2, 3}
    assert {e.stream for e in ev} == {"compute", "tp", "dp", "pp_act", "pp_grad"}
    assert max(e.end for e in ev) == pytest.approx(b.step.magnitude)
    first = [e for e in ev if e.device == 0 and e.stream == "compute" and e.tag[0] != "O"]
    assert [e.tag for e in ev if e.device == 0 and e.tag[0] == "O"] == [("O", -1, -1)]  # one optimizer step
    assert len(first) == 2 * b.microbatches and all(e.end - e.start >= e.work * (1 - 1e-12) for e in first)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["gpipe", "1f1b", "interleaved", "interleaved_zb", "zbv"]), st.integers(1, 6), st.integers(1, 9), st.integers(0, 3),
       st.floats(0.1, 3), st.floats(0, 0.5), st.floats(0, 0.3), st.floats(0.001, 0.5), st.integers(1, 12),
       st.booleans(), st.booleans())
def test_every_device_reads_as_compute_exposed_idle(schedule, p, m, stage, f, tf, d, bucket, k, ovg, ovp):
    """For any schedule and durations: on every device step = compute + exposed + idle, and the bound holds?"""
    multi, split = schedule in ("interleaved", "interleaved_zb", "zbv"), schedule in ("interleaved_zb", "zbv")
    v = 2 if multi and p > 1 else 1
    if schedule.startswith("interleaved") and m % max(1, m // p):
        m = p * max(1, m // p)
    if p > 1 and stage >= 2:
        stage = 1
    sp = spec(schedule=schedule, p=p, v=v, m=m, stage=stage, f=f, b=2 * f, tf=tf, tb=tf, d=d, buckets=k,
              grad_bucket=bucket, param_bucket=bucket, layer_gather=bucket, layer_scatter=bucket / 2,
              overlap_grad_reduce=ovg, overlap_param_gather=ovp, w=f if split and p > 1 else 0.0)
    tl = build(sp)
    for dev in range(p):
        r = read(tl, dev, 6)
        assert r.step == pytest.approx(r.compute + sum(r.exposed) + r.idle, rel=1e-9)
        assert all(0 <= x <= c * (1 + 1e-9) + 1e-12 for x, c in zip(r.exposed, r.comm))
        assert r.compute == pytest.approx(m * v * (f + 2 * f))
    fill = 0 if split else p - 1  # zero-bubble schedules may hide the fill behind W
    assert tl.step >= (m * v + fill) * (3 * f + 2 * tf) * (1 - 1e-12)


@pytest.mark.parametrize("sp", [spec(p=4, m=8, stage=1, d=0.05, tf=0.1, tb=0.2),
                                spec(p=4, v=2, m=8, schedule="interleaved", stage=0, d=0.05),
                                spec(stage=3, m=2)])
def test_storing_one_device_reads_the_same_step(sp):
    """Does the search's timeline, which stores only the first rank's events, read exactly like the full one?"""
    full, lean = build(sp), build(sp, keep=0)
    assert read(full, 0, 6) == read(lean, 0, 6)
    assert lean.ev[0] == full.ev[0] and not any(lean.ev[1:]) and (sp.p == 1 or any(full.ev[1:]))
