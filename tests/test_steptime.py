"""Does the step-time model give the lesson's speedup and respect overlap limits?"""

import pytest
from hypothesis import given, strategies as st

from parallel_budget import ring_allreduce, step_time


def test_lesson_example():
    """400 ms on one device vs 4 x 100 ms + 120 ms exposed: 220 ms, 1.82x, 45.5%?"""
    s = step_time("400 ms", 4, ring_allreduce(4, "2 GB", "25 GB/s").lower_bound)
    assert s.compute_per_rank.to("ms").magnitude == pytest.approx(100)
    assert s.exposed_comm.to("ms").magnitude == pytest.approx(120)
    assert s.step.to("ms").magnitude == pytest.approx(220)
    assert round(s.speedup, 2) == 1.82
    assert round(s.efficiency * 100, 1) == 45.5
    assert s.is_comm_bound()
    assert "220 ms" in repr(s) and "45.5%" in repr(s)


def test_overlap_hides_at_most_the_backward():
    """Full overlap on 4 ranks: only backward (2/3 of 100 ms) hides, so 153.3 ms, not 120 ms?"""
    s = step_time("400 ms", 4, "120 ms", overlap=1.0)
    assert s.backward_share == pytest.approx(2 / 3)
    assert s.backward.to("ms").magnitude == pytest.approx(200 / 3)
    assert s.hidden_comm.to("ms").magnitude == pytest.approx(200 / 3)
    assert s.exposed_comm.to("ms").magnitude == pytest.approx(120 - 200 / 3)
    assert s.step.to("ms").magnitude == pytest.approx(100 + 120 - 200 / 3)
    assert s.step.to("ms").magnitude > 120


def test_backward_share_one_is_the_old_compute_cap():
    """With backward_share=1 the cap is the whole compute: 120 ms."""
    s = step_time("400 ms", 4, "120 ms", overlap=1.0, backward_share=1.0)
    assert s.hidden_comm.to("ms").magnitude == pytest.approx(100)
    assert s.step.to("ms").magnitude == pytest.approx(120)


def test_last_bucket_is_always_exposed():
    """A 30 ms last bucket stays exposed even when backward could hide it."""
    s = step_time("400 ms", 4, "60 ms", overlap=1.0, last_bucket="30 ms")
    assert s.hidden_comm.to("ms").magnitude == pytest.approx(30)
    assert s.exposed_comm.to("ms").magnitude == pytest.approx(30)
    assert step_time("400 ms", 4, "60 ms", overlap=1.0).exposed_comm.magnitude == pytest.approx(0)
    with pytest.raises(ValueError, match="last_bucket"):
        step_time("400 ms", 4, "60 ms", last_bucket="61 ms")


def test_partial_overlap():
    """Half of 120 ms is 60 ms, under the 66.7 ms backward window: 160 ms."""
    s = step_time("400 ms", 4, "120 ms", overlap=0.5)
    assert s.step.to("ms").magnitude == pytest.approx(160)


def test_positional_and_keyword_calls_still_work():
    """Old calls (4 positional arguments, overlap= keyword) keep their meaning."""
    assert step_time("400 ms", 4, "120 ms", 0.5).step == step_time("400 ms", 4, "120 ms", overlap=0.5).step
    assert step_time(compute_single="400 ms", ranks=4, comm="120 ms").step.to("ms").magnitude == pytest.approx(220)


@pytest.mark.parametrize("kwargs, word", [({"overlap": 1.2}, "overlap"), ({"overlap": -0.1}, "overlap"),
                                          ({"comm": "3 GB"}, "comm"), ({"ranks": 0}, "ranks"),
                                          ({"backward_share": 1.5}, "backward_share"),
                                          ({"last_bucket": "1 GB"}, "last_bucket")])
def test_bad_arguments(kwargs, word):
    args = {"compute_single": "400 ms", "ranks": 4, "comm": "120 ms", "overlap": 0.0} | kwargs
    with pytest.raises(ValueError, match=word):
        step_time(**args)


@given(t=st.floats(1e-4, 100), r=st.integers(1, 1024), c=st.floats(0, 100), f=st.floats(0, 1),
       b=st.floats(0, 1), last=st.floats(0, 1))
def test_step_never_shorter_than_compute_per_rank(t, r, c, f, b, last):
    """Is a step never shorter than compute/R, nor than forward + the last bucket, and speedup never above R?"""
    s = step_time(t, r, c, f, b, c * last)
    assert s.step.to("s").magnitude >= t / r * (1 - 1e-12)
    assert s.hidden_comm.to("s").magnitude <= b * t / r * (1 + 1e-12) + 1e-15
    assert s.exposed_comm.to("s").magnitude >= c * last * (1 - 1e-12) - 1e-15
    assert s.speedup <= r * (1 + 1e-12)
    assert 0 < s.efficiency <= 1 + 1e-12


def test_straggler_everybody_waits_for_the_last_rank():
    """Does every rank wait at the collective until the slowest one arrives?"""
    from parallel_budget import straggler_wait

    s = straggler_wait(["20 ms", "220 ms", "30 ms"], comm="5 ms")
    assert s.slowest == 1
    assert [w.to("ms").magnitude for w in s.waits] == pytest.approx([200, 0, 190])
    assert s.step.to("ms").magnitude == pytest.approx(225)
    assert "rank 1" in repr(s)
    with pytest.raises(ValueError, match="arrivals"):
        straggler_wait([])
    with pytest.raises(ValueError, match=r"arrivals\[1\]"):
        straggler_wait(["20 ms", "2 GB"])
