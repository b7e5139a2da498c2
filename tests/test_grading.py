"""Does the grading layer read answers, name mistakes and spot tricks the way the issue asks?"""

from __future__ import annotations

import io
import contextlib

import pint
import pytest

import parallel_budget as pb
from parallel_budget.grading import checks, diagnose
from parallel_budget.grading.answers import AnswerError, read_answer
from parallel_budget.grading.integrity import passed_without_receipt, scan_source


def _fails(fn, *args):
    with pytest.raises(AssertionError) as info, contextlib.redirect_stdout(io.StringIO()):
        fn(*args)
    return str(info.value)


@pytest.mark.parametrize("given", [3, 3.0, "3 GB", "3000 MB", "3e9 B", "24 Gb", pb.Q_(3, "GB"),
                                   pint.UnitRegistry().Quantity(3, "gigabyte")])
def test_answer_forms_are_converted(given):
    """Is a number read in the name's unit, and a string or any registry's Quantity converted?"""
    assert read_answer("send_per_rank_GB", given).to("GB").magnitude == pytest.approx(3)


@pytest.mark.parametrize("given, words", [("3 s", "时间"), ("3 GB/s", "带宽"), (True, "布尔值"), ([3], "list"),
                                          (None, "还没有赋值"), ("three", "数字开头")])
def test_wrong_dimension_or_type_is_explained(given, words):
    """Does a wrong dimension or type get a Chinese message naming the variable and an example?"""
    with pytest.raises(AnswerError) as info:
        read_answer("send_per_rank_GB", given)
    assert "send_per_rank_GB" in str(info.value) and words in str(info.value)


def test_lying_objects_are_read_as_what_they_hold():
    """Are __eq__ and __float__ of a student's object never trusted?"""

    class Liar(float):
        def __eq__(self, other):
            return True

        __hash__ = float.__hash__

        def __float__(self):
            return 3.0

    class Fake:
        def __float__(self):
            return 3.0

    assert read_answer("x_GB", Liar(99)).to("GB").magnitude == 99
    with pytest.raises(AnswerError):
        read_answer("x_GB", Fake())
    message = _fails(checks.value, "send_per_rank_GB", Liar(99), diagnose.ring_send(4, "2 GB", "12.5 GB/s"))
    assert "99 GB 不对" in message


@pytest.mark.parametrize("wrong, mistake", [
    (24, "比特"), (6, "接收量"), (12, "全网"), (3e9 / 2**30, "GiB"), (4, "(R-1)/R"), (1.5, "系数 2"),
])
def test_send_mistakes_are_named(wrong, mistake):
    """Does a wrong per-rank send (lesson exercise 1) name the slip that produces it?"""
    expected = diagnose.ring_send(4, "2 GB", "12.5 GB/s")
    assert expected.matches(pb.ring_allreduce(4, "2 GB", "12.5 GB/s").send_per_rank)
    assert mistake in _fails(checks.value, "send_per_rank_GB", wrong, expected)


@pytest.mark.parametrize("wrong, mistake", [(1920, "比特"), (480, "接收量"), (960, "全网"), (120, "系数 2")])
def test_bound_mistakes_are_named(wrong, mistake):
    """Does a wrong lower bound name bits, receive, network total or the factor 2?"""
    assert mistake in _fails(checks.value, "lower_bound_ms", wrong, diagnose.ring_bound(4, "2 GB", "12.5 GB/s"))


def test_exercise_two_values_and_other_mistakes():
    """Are 7 GB / 140 ms right for exercise 2, and are averaging twice, activations/D and the bubble convention named?"""
    with contextlib.redirect_stdout(io.StringIO()) as out:
        checks.value("send_per_rank_GB", "7 GB", diagnose.ring_send(8, "4 GB", "50 GB/s"))
        checks.value("lower_bound_ms", 140, diagnose.ring_bound(8, "4 GB", "50 GB/s"))
    assert out.getvalue().count(checks.RECEIPT) == 2
    assert "平均做了两次" in _fails(checks.value, "updated_w", 0.85, diagnose.dp_weight(1.0, [3, 9], 0.05))
    peak = diagnose.zero_peak(7e9, 8, 2, "6 GB")
    assert "激活" in _fails(checks.value, "peak_GB", 27, peak)
    assert "(p-1)/m" in _fails(checks.value, "bubble_fraction", 7 / 24, diagnose.bubble(8, 24), "fraction")
    assert diagnose.smallest_stage(7e9, 8, "32 GB", "6 GB") == 3
    assert diagnose.smallest_stage(7e9, 8, "32 GB") == 2


def test_exact_checks_do_not_call_student_methods():
    """Does a truthy object or an int subclass fail an exact check instead of fooling it?"""

    class Truthy:
        def __eq__(self, other):
            return True

        def __bool__(self):
            return True

    assert "True 或 False" in _fails(checks.exact, "ok", Truthy(), True)
    assert "整数" in _fails(checks.exact, "hang_rank", "2", 2)


@pytest.mark.parametrize("source, trick", [
    ("get_ipython().input_transformers_cleanup.append(lambda lines: [])", "skip_tests"),
    ("import builtins\nbuiltins.abs = lambda x: 0", "rebind_builtins"),
    ("isinstance = lambda *a: True", "rebind_builtins"),
    ("from parallel_budget.grading import checks\nchecks.value = print", "rebind_checker"),
    ("import sys\nsys.modules['parallel_budget.grading.checks'] = None", "rebind_checker"),
    ("text = open('../../solutions/lesson/02.ipynb').read()", "read_files"),
    ("import os\nos._exit(0)", "kill_kernel"),
    ("class A(float):\n    def __eq__(self, o):\n        return True", "lying_object"),
    ("exec('x = 1')", "dynamic_code"),
    ("x = (", "read_files"),  # syntax error: falls back to text patterns
])
def test_scan_finds_tricks(source, trick):
    """Does the static scan name each trick (with a text fallback when the code does not parse)?"""
    if source == "x = (":
        source = "x = (\nopen('gradebook.db')"
    assert trick in {t for t, _ in scan_source(source)}


def test_scan_leaves_honest_code_alone():
    """Is an honest answer, even one that uses the package, left unflagged?"""
    code = "import parallel_budget as pb\nr = pb.ring_allreduce(8, '4 GB', '50 GB/s')\nsend_per_rank_GB = r.send_per_rank\n%time x = 1"
    assert scan_source(code) == []


def test_receipts_count_every_check_call():
    """Is a passing test cell with fewer receipts than check calls reported?"""
    def cell(stdout):
        return {"cell_type": "code", "source": 'checks.visible("x", x)\nchecks.value("x", x, e)',
                "metadata": {"nbgrader": {"grade": True, "solution": False, "grade_id": "test_x"}},
                "outputs": [{"output_type": "stream", "name": "stdout", "text": stdout}]}
    two = f"{checks.RECEIPT}:a\n{checks.RECEIPT}:b\n"
    assert passed_without_receipt({"cells": [cell(two)]}) == []
    assert passed_without_receipt({"cells": [cell(two.split(chr(10))[0])]}) == ["test_x"]
