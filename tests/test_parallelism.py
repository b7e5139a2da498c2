"""Do the pipeline and tensor-parallel formulas hold, in closed form and by schedule?"""

import pytest
from hypothesis import given, strategies as st

from parallel_budget import (pipeline_bubble, pipeline_bubble_over_ideal, pipeline_in_flight, pipeline_schedule,
                             tp_allreduce)


def test_bubble_conventions():
    """4 stages, 8 microbatches: idle 3/11 and bubble/ideal 3/8?"""
    b = pipeline_bubble(4, 8)
    assert b.idle_fraction == pytest.approx(3 / 11)
    assert float(b) == pytest.approx(3 / 11)
    assert pipeline_bubble_over_ideal(4, 8) == pytest.approx(3 / 8)
    assert pipeline_bubble(1, 8).idle_fraction == 0


@given(p=st.integers(1, 16), m=st.integers(1, 64))
def test_schedule_agrees_with_closed_form(p, m):
    """Does simulating equal stages give (p-1)/(m+p-1)?"""
    s = pipeline_schedule([0.01] * p, m)
    assert s.idle_fraction == pytest.approx(pipeline_bubble(p, m).idle_fraction, abs=1e-9)
    assert s.makespan.to("s").magnitude == pytest.approx(0.01 * (m + p - 1))


def test_slowest_stage_sets_the_pace():
    s = pipeline_schedule(["10 ms", "20 ms"], 4)
    assert s.makespan.to("ms").magnitude == pytest.approx(10 + 20 * 4)
    assert s.idle_fraction > pipeline_bubble(2, 4).idle_fraction


def test_tp_volume():
    """b=8, s=2048, h=4096, bf16: one all-reduce moves 128 MiB-ish, four per layer."""
    t = tp_allreduce(8, 2048, 4096, 4, 32)
    msg = 8 * 2048 * 4096 * 2
    assert t.message.to("B").magnitude == msg
    assert t.per_layer.to("B").magnitude == 4 * msg
    assert t.per_step.to("B").magnitude == 4 * msg * 32
    assert t.send_per_rank_per_step.to("B").magnitude == pytest.approx(4 * msg * 32 * 2 * 3 / 4)
    assert tp_allreduce(8, 2048, 4096, 1, 32).per_step.magnitude == 0


@pytest.mark.parametrize("args, word", [((8, 2048, 4096, 3, 32), "hidden"), ((8, 2048, 4096, 0, 32), "tp"),
                                        ((8, 2048, 4096, 2, 32, -1), "bytes_per_elem")])
def test_tp_bad_arguments(args, word):
    with pytest.raises(ValueError, match=word):
        tp_allreduce(*args)


def test_bad_pipeline_arguments():
    with pytest.raises(ValueError, match="microbatches"):
        pipeline_bubble(4, 0)
    with pytest.raises(ValueError, match="stage_times"):
        pipeline_schedule("10 ms", 4)


def test_tp_lower_bound_scales_with_bandwidth():
    """Is the TP per-step bound the per-rank send over bandwidth, eight times longer at 1/8 the bandwidth?"""
    c = tp_allreduce(8, 2048, 4096, 4, 32)
    fast, slow = c.lower_bound("100 GB/s"), c.lower_bound("12.5 GB/s")
    assert fast.to("s").magnitude == pytest.approx(c.send_per_rank_per_step.to("B").magnitude / 100e9)
    assert slow.to("s").magnitude == pytest.approx(8 * fast.to("s").magnitude)
    assert tp_allreduce(8, 2048, 4096, 1, 32).lower_bound("1 GB/s").magnitude == 0
    with pytest.raises(ValueError, match="bandwidth"):
        c.lower_bound("100 GB")
    with pytest.raises(ValueError, match="大于 0"):
        c.lower_bound(0)


def _simulated_peak(p, m, schedule):
    """Peak in-flight microbatches per stage, by replaying each stage's op order."""
    peaks = []
    for i in range(p):
        if schedule == "gpipe":
            ops = ["F"] * m + ["B"] * m
        else:  # 1F1B: warm-up forwards, then one forward one backward, then cool-down backwards
            warm = min(p - i - 1, m)
            ops = ["F"] * warm
            for _ in range(m - warm):
                ops += ["F", "B"]
            ops += ["B"] * warm
        live = peak = 0
        for op in ops:
            live += 1 if op == "F" else -1
            peak = max(peak, live)
        assert live == 0
        peaks.append(peak)
    return tuple(peaks)


@given(p=st.integers(1, 16), m=st.integers(1, 64))
def test_in_flight_matches_replayed_schedules(p, m):
    """GPipe holds m microbatches on each stage; 1F1B at most p - i, never more than p."""
    for schedule in ("gpipe", "1f1b"):
        r = pipeline_in_flight(p, m, schedule)
        assert r.per_stage == _simulated_peak(p, m, schedule)
    assert pipeline_in_flight(p, m, "1f1b").peak == min(p, m)
    assert pipeline_in_flight(p, m, "gpipe").peak == m


def test_in_flight_activations_and_bad_schedule():
    """4 stages, 8 microbatches, 1 GB each: GPipe 8 GB, 1F1B 4 GB on the first stage."""
    assert pipeline_in_flight(4, 8, "gpipe", "1 GB").activations.to("GB").magnitude == pytest.approx(8)
    assert pipeline_in_flight(4, 8, "1F1B", "1 GB").activations.to("GB").magnitude == pytest.approx(4)
    with pytest.raises(ValueError, match="schedule"):
        pipeline_in_flight(4, 8, "zb-h1")
