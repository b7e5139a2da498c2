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


def test_overlap_hides_at_most_the_compute():
    """Can overlap hide more communication than there is compute? It must not."""
    s = step_time("400 ms", 4, "120 ms", overlap=1.0)
    assert s.hidden_comm.to("ms").magnitude == pytest.approx(100)
    assert s.exposed_comm.to("ms").magnitude == pytest.approx(20)
    assert s.step.to("ms").magnitude == pytest.approx(120)


def test_partial_overlap():
    s = step_time("400 ms", 4, "120 ms", overlap=0.5)
    assert s.step.to("ms").magnitude == pytest.approx(160)


@pytest.mark.parametrize("kwargs, word", [({"overlap": 1.2}, "overlap"), ({"overlap": -0.1}, "overlap"),
                                          ({"comm": "3 GB"}, "comm"), ({"ranks": 0}, "ranks")])
def test_bad_arguments(kwargs, word):
    args = {"compute_single": "400 ms", "ranks": 4, "comm": "120 ms", "overlap": 0.0} | kwargs
    with pytest.raises(ValueError, match=word):
        step_time(**args)


@given(t=st.floats(1e-4, 100), r=st.integers(1, 1024), c=st.floats(0, 100), f=st.floats(0, 1))
def test_step_never_shorter_than_compute_per_rank(t, r, c, f):
    """Is a step never shorter than compute/R, and speedup never above R?"""
    s = step_time(t, r, c, f)
    assert s.step.to("s").magnitude >= t / r * (1 - 1e-12)
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
