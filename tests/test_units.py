"""Does the unit layer read bytes, bits, times and bandwidths the way the course defines them?"""

import pytest
from hypothesis import given, strategies as st

from parallel_budget import Q_, as_bandwidth, as_bytes, as_params, as_time, fmt, fmt_percent
from parallel_budget.model.units import as_count, as_fraction


def test_decimal_binary_and_bits_are_distinct():
    """Is GB 1e9 bytes, GiB 2**30 bytes and Gb 1e9 bits?"""
    assert as_bytes("1 GB").magnitude == 1e9
    assert as_bytes("1 GiB").magnitude == 2**30
    assert as_bytes("1 Gb").magnitude == 1e9 / 8
    assert as_bandwidth("25 Gb/s").to("GB/s").magnitude == pytest.approx(3.125)


@pytest.mark.parametrize(
    "text, seconds",
    [("400 ms", 0.4), ("0.12 s", 0.12), ("100 us", 1e-4), ("1 min", 60), (0.25, 0.25)],
)
def test_times(text, seconds):
    """Are times with and without units read in seconds?"""
    assert as_time(text).to("s").magnitude == pytest.approx(seconds)


def test_plain_numbers_are_si_base_units():
    """Is a plain number read as bytes, bytes/s or seconds?"""
    assert as_bytes(2e9) == Q_(2e9, "B")
    assert as_bandwidth(25e9).to("GB/s").magnitude == pytest.approx(25)
    assert as_time(0.4).to("ms").magnitude == pytest.approx(400)


def test_foreign_pint_quantity_is_converted():
    """Is a Quantity from another pint registry accepted when its unit is known here?"""
    import pint

    other = pint.UnitRegistry()
    assert as_time(other.Quantity(400, "ms")).to("s").magnitude == pytest.approx(0.4)


@pytest.mark.parametrize(
    "func, value, words",
    [
        (as_bandwidth, "25 GB", ["带宽", "25 GB", "GB/s"]),
        (as_bytes, "25 GB/s", ["25 GB/s", "数据量"]),
        (as_time, "2 GB", ["2 GB", "时间"]),
        (as_bytes, "2 KB", ["KB", "kB", "KiB"]),
        (as_bytes, "2 parsecs", ["parsecs"]),
        (as_bytes, "", ["空"]),
        (as_bytes, "GB", ["数字开头"]),
        (as_bytes, -1, ["负"]),
        (as_bytes, float("nan"), ["有限"]),
        (as_time, True, ["True"]),
        (as_time, [1], ["list"]),
    ],
)
def test_bad_values_raise_one_clear_value_error(func, value, words):
    """Does a wrong dimension, unknown unit or bad number name what was given and what is accepted?"""
    with pytest.raises(ValueError) as info:
        func(value, arg="x", func="f")
    message = str(info.value)
    assert "f() 的参数 x" in message
    for word in words:
        assert word in message
    assert "可用单位" in message or "例如" in message


@pytest.mark.parametrize("value", [0, -2, 2.5, "4", True, float("inf")])
def test_counts_must_be_whole_and_positive(value):
    """Are ranks < 1, fractions, strings and bools refused as counts?"""
    with pytest.raises(ValueError, match="ranks"):
        as_count(value, arg="ranks", func="ring_allreduce")


def test_count_accepts_integral_float():
    assert as_count(4.0, arg="ranks") == 4


@pytest.mark.parametrize("value", [-0.1, 1.5, float("nan"), "0.5"])
def test_overlap_outside_unit_interval_is_refused(value):
    with pytest.raises(ValueError, match="overlap"):
        as_fraction(value, arg="overlap", func="step_time")


@pytest.mark.parametrize("text, n", [("7B", 7e9), ("1.3e9", 1.3e9), ("350M", 3.5e8), (1e9, 1e9), ("12k", 12e3)])
def test_parameter_counts(text, n):
    """Are '7B', '1.3e9' and '350M' read as parameter counts?"""
    assert as_params(text) == pytest.approx(n)


@pytest.mark.parametrize("text", ["7 GB", "-3", "abc", "0"])
def test_bad_parameter_counts(text):
    with pytest.raises(ValueError, match="params"):
        as_params(text)


def test_formatting_uses_course_units():
    """Does prose formatting give decimal GB, ms and percentages?"""
    assert fmt(Q_(3e9, "B")) == "3 GB"
    assert fmt(Q_(0.12, "s")) == "120 ms"
    assert fmt(Q_(25e9, "B/s")) == "25 GB/s"
    assert fmt(Q_(2**31, "B"), "GiB") == "2 GiB"
    assert fmt_percent(0.454545) == "45.5%"


units_bytes = st.sampled_from(["B", "kB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "b", "Mb", "Gb"])


@given(x=st.floats(min_value=0, max_value=1e6, allow_nan=False), unit=units_bytes)
def test_bytes_round_trip(x, unit):
    """Does converting to bytes and back give the same value?"""
    q = as_bytes(f"{x!r} {unit}")
    assert q.to(unit).magnitude == pytest.approx(x, rel=1e-12, abs=1e-12)


@given(x=st.floats(min_value=0, max_value=1e6, allow_nan=False), unit=st.sampled_from(["s", "ms", "us", "ns", "min", "h"]))
def test_time_round_trip(x, unit):
    q = as_time(f"{x!r} {unit}")
    assert q.to(unit).magnitude == pytest.approx(x, rel=1e-12, abs=1e-12)
