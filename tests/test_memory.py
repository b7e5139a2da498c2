"""Does the ZeRO table give 16 / 7 / 5.5 / 4 GB and never grow with the stage?"""

import pytest
from hypothesis import given, strategies as st

from parallel_budget import ring_allreduce, zero_communication, zero_memory, zero_table


def test_lesson_table():
    """1e9 parameters, D=4: 16, 7, 5.5, 4 GB?"""
    totals = [row.total.to("GB").magnitude for row in zero_table(1e9, 4)]
    assert totals == pytest.approx([16, 7, 5.5, 4])


def test_breakdown_of_16_bytes():
    row = zero_memory(1e9, 4, 0)
    assert row.bytes_per_param == pytest.approx(16)
    assert [row.param_state.to("GB").magnitude, row.grad_state.to("GB").magnitude,
            row.optim_state.to("GB").magnitude] == pytest.approx([2, 2, 12])


def test_fits_and_smallest_stage():
    """Which is the smallest stage whose resident state fits 6 GB? ZeRO-2."""
    t = zero_table(1e9, 4)
    assert t.smallest_fitting_stage("6 GB") == 2
    assert t.smallest_fitting_stage("3 GB") is None
    assert t[3].fits("4 GB") and not t[2].fits("5 GB")


def test_string_parameter_counts_and_custom_bytes():
    assert zero_memory("7B", 8, 3).total.to("GB").magnitude == pytest.approx(14)
    assert zero_memory(1e9, 1, 0, 4, 4, 8).total.to("GB").magnitude == pytest.approx(16)


@pytest.mark.parametrize("kwargs, word", [({"stage": 4}, "stage"), ({"dp": 0}, "dp"), ({"params": "7 GB"}, "params"),
                                          ({"param_bytes": -2}, "param_bytes")])
def test_bad_arguments(kwargs, word):
    args = {"params": 1e9, "dp": 4, "stage": 1} | kwargs
    with pytest.raises(ValueError, match=word):
        zero_memory(**args)


@given(p=st.floats(1e3, 1e13), d=st.integers(1, 4096))
def test_invariants(p, d):
    """Does ZeRO-3 equal the replica over D, and does no stage add memory?"""
    rows = [r.total.magnitude for r in zero_table(p, d)]
    assert rows[3] == pytest.approx(rows[0] / d)
    assert all(a >= b * (1 - 1e-12) for a, b in zip(rows, rows[1:]))


def test_zero_communication_per_stage():
    """ZeRO-1/2 send what DDP's all-reduce sends (3 GB for 1B bf16 on 4 ranks); ZeRO-3 1.5x (4.5 GB)?"""
    ddp = ring_allreduce(4, "2 GB", "25 GB/s").send_per_rank
    rows = [zero_communication(1e9, 4, s) for s in range(4)]
    assert [r.send_per_rank.to("GB").magnitude for r in rows] == pytest.approx([3, 3, 3, 4.5])
    assert rows[0].send_per_rank.to("B").magnitude == pytest.approx(ddp.to("B").magnitude)
    assert [r.relative_to_ddp for r in rows] == pytest.approx([1, 1, 1, 1.5])
    assert [c for c, _, _ in rows[1].collectives] == ["reduce-scatter", "all-gather"]
    assert [c for c, _, _ in rows[3].collectives].count("all-gather") == 2
    assert rows[3].lower_bound("25 GB/s").to("ms").magnitude == pytest.approx(180)
    assert "1.5x DDP" in repr(rows[3])


def test_zero_communication_bad_arguments():
    with pytest.raises(ValueError, match="stage"):
        zero_communication(1e9, 4, 5)
    with pytest.raises(ValueError, match="dp"):
        zero_communication(1e9, 0, 1)
    with pytest.raises(ValueError, match="bandwidth"):
        zero_communication(1e9, 4, 1).lower_bound("3 GB")


@given(p=st.floats(1e3, 1e13), d=st.integers(1, 4096))
def test_zero_communication_invariants(p, d):
    """ZeRO-1/2 equal DDP, ZeRO-3 is 1.5x, for any model and D."""
    rows = [zero_communication(p, d, s).send_per_rank.to("B").magnitude for s in range(4)]
    assert rows[1] == pytest.approx(rows[0]) and rows[2] == pytest.approx(rows[0])
    assert rows[3] == pytest.approx(1.5 * rows[0])
