"""Does the ring all-reduce model give the lesson's numbers and keep its invariants?"""

import pytest
from hypothesis import given, strategies as st

from parallel_budget import busbw, ring_allreduce


def ms(q):
    return q.to("ms").magnitude


def gb(q):
    return q.to("GB").magnitude


@pytest.mark.parametrize(
    "ranks, grad, bandwidth, send_gb, bound_ms",
    [
        (4, "2 GB", "25 GB/s", 3, 120),  # the worked example
        (4, "2 GB", "12.5 GB/s", 3, 240),  # exercise 1: volume stays, time doubles
        (8, "4 GB", "50 GB/s", 7, 140),  # exercise 2: the unfamiliar configuration
        (4, "2 GB", "25 Gb/s", 3, 960),  # bits for bytes: eight times slower
    ],
)
def test_lesson_numbers(ranks, grad, bandwidth, send_gb, bound_ms):
    """Are the lesson's per-rank send and lower bound reproduced exactly?"""
    r = ring_allreduce(ranks, grad, bandwidth)
    assert gb(r.send_per_rank) == pytest.approx(send_gb)
    assert gb(r.recv_per_rank) == pytest.approx(send_gb)
    assert ms(r.lower_bound) == pytest.approx(bound_ms)


def test_other_fields():
    """Are rounds, chunk and the network total what the ring algorithm implies?"""
    r = ring_allreduce(4, "2 GB", "25 GB/s")
    assert r.steps == 6
    assert gb(r.chunk) == pytest.approx(0.5)
    assert gb(r.total_sent) == pytest.approx(12)
    assert "send_per_rank=3 GB" in repr(r) and "lower_bound=120 ms" in repr(r)


def test_one_rank_sends_nothing():
    r = ring_allreduce(1, "2 GB", "25 GB/s")
    assert r.send_per_rank.magnitude == 0 and r.steps == 0 and r.lower_bound.magnitude == 0


def test_plain_numbers_in_si_units():
    r = ring_allreduce(4, 2e9, 25e9)
    assert ms(r.lower_bound) == pytest.approx(120)


@pytest.mark.parametrize(
    "args, word",
    [((4, "2 GB", "25 GB"), "bandwidth"), ((0, "2 GB", "25 GB/s"), "ranks"), ((4, "-2 GB", "25 GB/s"), "grad"),
     ((2.5, "2 GB", "25 GB/s"), "ranks"), ((4, "2 GB", 0), "bandwidth")],
)
def test_bad_arguments_are_named(args, word):
    with pytest.raises(ValueError, match=word):
        ring_allreduce(*args)


@given(ranks=st.integers(1, 4096), grad=st.floats(1, 1e13))
def test_send_is_below_twice_the_gradient(ranks, grad):
    """Is the per-rank send below 2G for every ring size?"""
    r = ring_allreduce(ranks, grad, 1e9)
    assert r.send_per_rank.magnitude < 2 * grad
    assert r.send_per_rank == r.recv_per_rank


@given(grad=st.floats(1, 1e13))
def test_send_tends_to_twice_the_gradient(grad):
    """Does the per-rank send approach 2G as R grows?"""
    sends = [ring_allreduce(r, grad, 1e9).send_per_rank.magnitude for r in (2, 8, 64, 4096)]
    assert sends == sorted(sends)
    assert sends[-1] == pytest.approx(2 * grad, rel=1e-3)


def test_busbw_matches_nccl_tests_factors():
    """Does busbw use nccl-tests' factors, so 8-rank all-reduce busbw is 1.75x algbw?"""
    assert busbw("10 GB/s", 8).to("GB/s").magnitude == pytest.approx(17.5)
    assert busbw("10 GB/s", 8, "allgather").to("GB/s").magnitude == pytest.approx(8.75)
    assert busbw("10 GB/s", 8, "broadcast").to("GB/s").magnitude == pytest.approx(10)
    with pytest.raises(ValueError, match="collective"):
        busbw("10 GB/s", 8, "gossip")


def test_busbw_of_the_model_equals_link_bandwidth():
    """Reading the ideal ring's own timing through busbw gives back the link bandwidth."""
    r = ring_allreduce(8, "4 GB", "50 GB/s")
    algbw = r.grad / r.lower_bound
    assert busbw(algbw, 8).to("GB/s").magnitude == pytest.approx(50)


@pytest.mark.parametrize("ranks", [1, 2, 3, 4, 7, 8])
def test_ring_schedule_really_all_reduces(ranks):
    """Does replaying ring_schedule leave every rank with the full sum, sending 2(R-1) chunks each?"""
    from parallel_budget import ring_schedule, ring_send_factor

    rounds = ring_schedule(ranks)
    # data[rank][chunk]: a distinct value per rank and chunk, as a set of contributions
    data = [[frozenset({(r, c)}) for c in range(ranks)] for r in range(ranks)]
    sent = [0] * ranks
    for rnd in rounds:
        assert len(rnd) == ranks and sorted(t.src for t in rnd) == list(range(ranks))
        payload = [(t, data[t.src][t.chunk]) for t in rnd]  # everybody sends at once
        for t, value in payload:
            assert t.dst == (t.src + 1) % ranks
            sent[t.src] += 1
            if t.phase == "reduce-scatter":
                data[t.dst][t.chunk] = data[t.dst][t.chunk] | value
            else:
                data[t.dst][t.chunk] = value
    full = [frozenset((r, c) for r in range(ranks)) for c in range(ranks)]
    assert all(data[r] == full for r in range(ranks))
    assert len(rounds) == ring_allreduce(ranks, "1 GB", "1 GB/s").steps
    assert all(s / ranks == pytest.approx(ring_send_factor(ranks)) for s in sent)


def test_ring_schedule_phases_and_bad_input():
    """Are the first R-1 rounds reduce-scatter, the rest all-gather, and is ranks=0 refused in Chinese?"""
    from parallel_budget import ring_schedule

    phases = [rnd[0].phase for rnd in ring_schedule(4)]
    assert phases == ["reduce-scatter"] * 3 + ["all-gather"] * 3
    with pytest.raises(ValueError, match="ring_schedule.*ranks"):
        ring_schedule(0)
