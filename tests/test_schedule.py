"""Are the plan builder's pipeline schedules PyTorch's, and is their bubble the papers'?

Outside checks, each citing its source:
* torch.distributed.pipelining (torch 2.13): ``_schedule_visualizer.get_schedule_ops`` builds the action
  lists of ``ScheduleGPipe``, ``Schedule1F1B`` and ``ScheduleInterleaved1F1B`` without any device.  It is a
  private module: these tests pin what it returns, including one quirk (below).
* Narayanan et al. 2021 (arXiv:2104.04473), section 2.2: the bubble is (p−1)/m of the ideal time for
  1F1B and (p−1)/(v·m) for the interleaved schedule; GPipe's (Huang et al. 2019) is (p−1)/m too.
"""

from __future__ import annotations

import pytest

from parallel_budget.model import schedule as S
from parallel_budget.model.planstep import StepSpec, build
from parallel_budget.model.timeline import read

torch_vis = pytest.importorskip("torch.distributed.pipelining._schedule_visualizer")
from torch.distributed.pipelining.schedules import (  # noqa: E402
    Schedule1F1B,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
    _ComputationType,
)

KIND = {_ComputationType.FORWARD: "F", _ComputationType.FULL_BACKWARD: "B"}


def torch_order(cls, p, m, v=None):
    """PyTorch's actions per rank as (stage, "F"/"B", microbatch), without idle slots and gradient reductions."""
    return [tuple((a.stage_index, KIND[a.computation_type], a.microbatch_index) for a in rank
                  if a is not None and a.computation_type in KIND)
            for rank in torch_vis.get_schedule_ops(cls, p, m, v)]


# Each get_schedule_ops call builds mocks (about 0.1 s): a few shapes of each kind, m below, at and above p.
CASES = [(2, 1), (2, 5), (3, 3), (4, 2), (4, 4), (4, 7), (4, 12), (8, 8), (8, 16)]


@pytest.mark.parametrize("p, m", CASES)
def test_gpipe_is_torch_schedule_gpipe(p, m):
    """Is every rank's GPipe order (all forwards, then all backwards) the one ScheduleGPipe runs?"""
    assert list(S.pipeline_order("gpipe", p, m)) == torch_order(ScheduleGPipe, p, m)


@pytest.mark.parametrize("p, m", [(p, m) for p, m in CASES if m >= p])
def test_1f1b_is_torch_schedule_1f1b(p, m):
    """Is every rank's 1F1B order PyTorch's, min(m, p − r) warm-up forwards first?

    Pinned quirk of torch 2.13: ``Schedule1F1B._get_pipeline_order`` (what get_schedule_ops returns)
    numbers the last rank's forwards from 1 (F1 … Fm), while its runtime ``_step_microbatches`` and
    every other rank run F0 … F(m−1).  We follow the runtime; if PyTorch fixes the order, this test
    says so and the shift goes.
    """
    ours, theirs = S.pipeline_order("1f1b", p, m), torch_order(Schedule1F1B, p, m)
    assert list(ours[:-1]) == theirs[:-1]
    shifted = tuple((k, kind, j + 1 if kind == "F" else j) for k, kind, j in ours[-1])
    assert theirs[-1] == shifted
    assert [sum(1 for _ in _until_first_b(o)) for o in ours] == [min(m, p - r) for r in range(p)]


def _until_first_b(ops):
    for op in ops:
        if op[1] == "B":
            return
        yield op


@pytest.mark.parametrize("p, m, v", [(2, 1, 2), (2, 4, 3), (2, 6, 2), (3, 3, 2), (3, 9, 3), (4, 2, 2),
                                     (4, 8, 2), (4, 10, 2), (4, 12, 3), (5, 5, 2)])
def test_interleaved_is_torch_schedule_interleaved_1f1b(p, m, v):
    """Is every rank's interleaved order, stage by stage, the one ScheduleInterleaved1F1B runs?"""
    assert list(S.pipeline_order("interleaved", p, m, v)) == torch_order(ScheduleInterleaved1F1B, p, m, v)


def test_interleaved_refuses_what_torch_refuses():
    """Does the Chinese reason name the rule torch enforces (m a multiple of the rounds) and the layer split?"""
    with pytest.raises(ValueError):
        torch_vis.get_schedule_ops(ScheduleInterleaved1F1B, 4, 10 + 1, 2)  # m = 11, rounds = 2
    assert "ScheduleInterleaved1F1B" in S.interleave_problem(32, 4, 2, 11)
    assert "pp×virtual_stages=4×3=12" in S.interleave_problem(32, 4, 3, 8)
    assert S.interleave_problem(32, 4, 2, 8) == "" and S.interleave_problem(32, 4, 2, 10) == ""


@pytest.mark.parametrize("schedule, v", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("interleaved", 4)])
def test_first_rank_holds_the_most_activations(schedule, v):
    """Does the first rank hold the most (stage, microbatch) activations: m for GPipe, min(p, m) for 1F1B?"""
    for p in (2, 4, 8):
        for m in (1, 4, 8, 16, 32):
            if schedule == "interleaved" and (m % max(1, m // p) or v < 2):
                continue
            held = [S.in_flight(o) for o in S.pipeline_order(schedule, p, m, v)]
            assert held[0] == max(held) == S.peak_in_flight(schedule, p, m, v)
            if schedule == "gpipe":
                assert held == [m] * p
            if schedule == "1f1b":
                assert held == [min(p - r, m) for r in range(p)]


def _spec(schedule, p, m, v, f, b):
    return StepSpec(schedule, p, v, m, 0, False, 1, f, b, 0.0, 0.0, 0.0, 1, 0.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("schedule, v", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("interleaved", 3)])
@pytest.mark.parametrize("p, m", [(2, 4), (4, 8), (4, 16), (8, 8), (8, 32)])
@pytest.mark.parametrize("f, b", [(1.0, 2.0), (1.0, 1.0), (1.0, 3.5)])
def test_bubble_read_off_the_timeline_is_narayanans(schedule, v, p, m, f, b):
    """With equal stages and free messages, is the first rank's idle time (p−1)/(v·m) of its work?"""
    r = read(build(_spec(schedule, p, m, v, f, b)), 0, 6)
    work = m * v * (f + b)
    assert r.compute == pytest.approx(work)
    assert r.idle == pytest.approx((p - 1) / (v * m) * work, rel=1e-12)
    assert r.step == pytest.approx(r.compute + r.idle)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p, m", [(2, 4), (4, 8), (4, 32), (8, 8), (3, 2)])
def test_chapter_4_and_chapter_6_read_the_same_schedule(schedule, p, m):
    """Are chapter 4's in-flight counts and idle share (p−1)/(m+p−1) what chapter 6's timeline reads?"""
    import parallel_budget as pb

    assert pb.pipeline_in_flight(p, m, schedule).per_stage == tuple(
        S.in_flight(o) for o in S.pipeline_order(schedule, p, m))
    r = read(build(_spec(schedule, p, m, 1, 1.0, 2.0)), 0, 6)
    assert r.idle / r.step == pytest.approx(pb.pipeline_bubble(p, m).idle_fraction, rel=1e-12)
    assert r.idle / r.compute == pytest.approx(pb.pipeline_bubble(p, m).bubble_over_ideal, rel=1e-12)


def test_torch_pipelining_reduces_fsdp_gradients_once_after_the_last_microbatch():
    """Does torch's pipeline stage keep FSDP's parameters and gradients unsharded until the step's last backward?

    Chapter 6 says so where it refuses ZeRO-2/3 with a pipeline: PyTorch combines them by not resharding and
    not reducing between microbatches (torch/distributed/pipelining/stage.py, torch 2.13).
    """
    import inspect

    from torch.distributed.pipelining import stage

    between = inspect.getsource(stage._PipelineStageBase.backward_maybe_with_nosync)
    assert "set_requires_gradient_sync(False)" in between and "set_reshard_after_backward(False)" in between
    last = inspect.getsource(stage._PipelineStageBase.perform_reduce_grad)
    assert "set_requires_gradient_sync(True)" in last and "post_backward()" in last


# --- Zero-bubble schedules (Qi et al. 2024, arXiv:2401.10241): backward split into I (input grad) and W (weights).

from torch.distributed.pipelining.schedules import (  # noqa: E402
    ScheduleInterleavedZeroBubble,
    ScheduleZBVZeroBubble,
)

SPLIT_KIND = {**KIND, _ComputationType.BACKWARD_INPUT: "I", _ComputationType.BACKWARD_WEIGHT: "W"}


def torch_split_order(cls, p, m, v):
    return [tuple((a.stage_index, SPLIT_KIND[a.computation_type], a.microbatch_index) for a in rank
                  if a is not None and a.computation_type in SPLIT_KIND)
            for rank in torch_vis.get_schedule_ops(cls, p, m, v)]


@pytest.mark.parametrize("p, m, v", [(2, 1, 2), (2, 4, 3), (3, 9, 3), (4, 2, 2), (4, 8, 2), (4, 10, 2),
                                     (4, 12, 3), (8, 16, 2)])
def test_interleaved_zb_is_torch_schedule_interleaved_zero_bubble(p, m, v):
    """Is every rank's F, I, W order the one ScheduleInterleavedZeroBubble (ZB-1P) runs?"""
    ours = S.pipeline_order("interleaved_zb", p, m, v)
    assert list(ours) == torch_split_order(ScheduleInterleavedZeroBubble, p, m, v)
    assert {kind for o in ours for _, kind, _ in o} == {"F", "I", "W"}


@pytest.mark.parametrize("p, m", [(2, 1), (2, 3), (3, 2), (3, 5), (4, 4), (4, 7), (4, 16), (8, 8), (8, 20)])
def test_zbv_is_torch_schedule_zbv_zero_bubble(p, m):
    """Is every rank's order ScheduleZBVZeroBubble's, stages r and 2p−1−r on rank r (the V)?"""
    ours = S.pipeline_order("zbv", p, m, 2)
    assert list(ours) == torch_split_order(ScheduleZBVZeroBubble, p, m, 2)
    for r, ops in enumerate(ours):
        assert {k for k, _, _ in ops} == {r, 2 * p - 1 - r}
        assert all(S.stage_rank("zbv", p, k) == r for k, _, _ in ops)


def test_zero_bubble_refuses_what_torch_refuses():
    """Do the Chinese reasons name torch's rules: ZB-V has exactly 2 stages per rank, ZB-1P needs whole rounds?"""
    with pytest.raises(ValueError):
        torch_vis.get_schedule_ops(ScheduleZBVZeroBubble, 4, 8, 3)
    with pytest.raises(ValueError):
        torch_vis.get_schedule_ops(ScheduleInterleavedZeroBubble, 4, 11, 2)
    assert "ScheduleZBVZeroBubble" in S.schedule_problem("zbv", 32, 4, 3, 8)
    assert "2×pp=2×3=6" in S.schedule_problem("zbv", 32, 3, 2, 8)
    assert "ScheduleInterleavedZeroBubble" in S.schedule_problem("interleaved_zb", 32, 4, 2, 11)
    assert S.schedule_problem("zbv", 32, 4, 2, 7) == S.schedule_problem("interleaved_zb", 32, 4, 2, 8) == ""


@pytest.mark.parametrize("schedule, v", [("interleaved_zb", 2), ("interleaved_zb", 3), ("zbv", 2)])
def test_split_backward_holds_activations_until_w(schedule, v):
    """Is a microbatch's activation held from its F to its W (I frees nothing), no more than 1F1B-like counts?"""
    for p, m in ((2, 4), (4, 8), (4, 16), (8, 16)):
        for ops in S.pipeline_order(schedule, p, m, v):
            held = peak = 0
            for _, kind, _ in ops:
                held += {"F": 1, "I": 0, "W": -1}[kind]
                peak = max(peak, held)
            assert held == 0 and S.in_flight(ops) == peak
        assert S.peak_in_flight(schedule, p, m, v) == max(S.in_flight(o) for o in S.pipeline_order(schedule, p, m, v))


def _split_spec(schedule, p, m, v, f, b, w, d=0.0):
    return StepSpec(schedule, p, v, m, 0, False, 1, f, b, 0.0, 0.0, d, 1, 0.0, 0.0, 0.0, 0.0, w=w)


@pytest.mark.parametrize("schedule, v", [("interleaved_zb", 2), ("interleaved_zb", 3), ("zbv", 2)])
@pytest.mark.parametrize("p, m", [(2, 4), (4, 8), (4, 16), (8, 16), (8, 32)])
def test_zero_bubble_leaves_only_the_warm_up(schedule, v, p, m):
    """With F = I = W (the case the schedules are built for) and free messages, is each rank idle only
    (p−1)·F, the forwards the last rank must wait for, against interleaved 1F1B's (p−1)/(v·m) of the work?"""
    f = 1.0
    split = [read(build(_split_spec(schedule, p, m, v, f, 2 * f, f)), d, 6) for d in range(p)]
    loop = read(build(_spec("interleaved", p, m, v, f, 2 * f)), 0, 6)
    for r in split:
        assert r.compute == pytest.approx(m * v * 3 * f)
        assert r.idle == pytest.approx((p - 1) * f, rel=1e-12)
        assert r.step == pytest.approx(r.compute + r.idle)
    assert loop.idle == pytest.approx((p - 1) / (v * m) * m * v * 3 * f) and loop.idle > split[0].idle


def test_zbv_turn_sends_nothing_and_links_keep_their_order():
    """Does the V's turn (stages p−1 → p, one rank) send no message, while every other boundary sends one?"""
    from parallel_budget.model.timeline import events

    p, m = 4, 8
    ev = [e for e in events(build(_split_spec("zbv", p, m, 2, 1.0, 2.0, 1.0, d=0.1))) if e.stream.startswith("pp")]
    assert len(ev) == 2 * (2 * p - 2) * m  # activations and gradients over 2p−2 cross-rank boundaries
    per_stage = [sum(1 for e in ev if e.tag[1] == k) for k in range(2 * p)]  # messages arriving for stage k
    # each stage gets its input from k − 1 and its gradient from k + 1, but nothing crosses the turn
    assert per_stage == [m] + [2 * m] * (p - 2) + [m, m] + [2 * m] * (p - 2) + [m]
    assert all(e.device == S.stage_rank("zbv", p, e.tag[1]) for e in ev)
    r = read(build(_split_spec("zbv", p, m, 2, 1.0, 2.0, 1.0, d=0.1)), 0, 6)
    assert r.idle < read(build(_spec("interleaved", p, m, 2, 1.0, 2.0)), 0, 6).idle
