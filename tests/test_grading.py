"""Does the grading layer read answers, name mistakes and spot tricks the way the issue asks?"""

from __future__ import annotations

import io
import contextlib

import numpy as np
import pint
import pytest

import parallel_budget as pb
from parallel_budget.answers import checks, diagnose
from parallel_budget.answers.read import AnswerError, read_answer
from parallel_budget.grading.scoring.integrity import passed_without_receipt, scan_source


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
    assert "整数" in _fails(checks.exact, "hang_rank", 2.5, 2)

    class IntLiar(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    assert "IntLiar" not in _fails(checks.exact, "hang_rank", IntLiar(5), 2)  # read as the 5 it holds


@pytest.mark.parametrize("given", [2, 2.0, "2", " 2 ", np.int64(2), np.float32(2.0)])
def test_int_answers_in_any_plain_form_are_accepted(given):
    """Is an integer answer given as 2.0, "2" or a numpy integer read as 2 by both the visible and the hidden check?"""
    with contextlib.redirect_stdout(io.StringIO()) as out:
        checks.kind_is("hang_rank", given, int)
        checks.exact("hang_rank", given, 2)
    assert out.getvalue().count(checks.RECEIPT) == 2


@pytest.mark.parametrize("given, words", [(2.5, "需要整数"), ("two", "字符串"), (True, "布尔值"), (None, "还没有赋值")])
def test_non_integers_get_a_clear_message(given, words):
    """Does a value that is no whole number get a message naming the variable and what is accepted?"""
    message = _fails(checks.kind_is, "hang_rank", given, int)
    assert "hang_rank" in message and words in message and "例如 hang_rank = 2" in message


def test_none_is_a_valid_answer_where_the_prompt_allows_it():
    """Does the visible test accept None where the prompt offers it, and does the hidden test grade it?"""
    with contextlib.redirect_stdout(io.StringIO()) as out:
        checks.kind_is("smallest_stage", None, int, allow_none=True)
        checks.exact("smallest_stage", None, None, allow_none=True)
    assert out.getvalue().count(checks.RECEIPT) == 2
    assert "None 不对" in _fails(checks.exact, "smallest_stage", None, 2, "", True)
    assert "还没有赋值" in _fails(checks.kind_is, "smallest_stage", None, int)


@pytest.mark.parametrize("given", [51.7, "51.7", 45])
def test_percent_written_as_a_bare_number_gets_both_spellings(given):
    """Does efficiency = 51.7 (meant as 51.7 %) get a hint to write 0.517 or "51.7%"?"""
    message = _fails(checks.visible, "efficiency", given, "fraction")
    share = float(given) / 100
    assert f"efficiency = {share:.4g}" in message and f'"{float(given):g}%"' in message


def test_messages_follow_the_unit_suffix():
    """Are values shown in the unit the name carries, and is the bare-number rule the suffix's, not SI's?"""
    bound = diagnose.ring_bound(4, "2 GB", "12.5 GB/s")
    assert "lower_bound_ms = 1920 ms 不对" in _fails(checks.value, "lower_bound_ms", 1920, bound)
    assert "send_per_rank_GB = 24 GB 不对" in _fails(checks.value, "send_per_rank_GB", "24000 MB",
                                                    diagnose.ring_send(4, "2 GB", "12.5 GB/s"))
    with contextlib.redirect_stdout(io.StringIO()) as out:
        checks.visible("lower_bound_ms", 0.24)
    assert "读作 0.24 ms" in out.getvalue()
    message = _fails(checks.visible, "lower_bound_ms", "3 GB")
    assert "按变量名后缀的 ms 理解" in message and "second" not in message


def test_a_number_right_in_another_unit_is_named():
    """Does lower_bound_ms = 0.24 (seconds in an _ms variable) say which unit it was written in?"""
    message = _fails(checks.value, "lower_bound_ms", 0.24, diagnose.ring_bound(4, "2 GB", "12.5 GB/s"))
    assert "按 s 算是对的" in message and "请写 240" in message
    assert "按 MB 算是对的" in _fails(checks.value, "send_per_rank_GB", 3000, diagnose.ring_send(4, "2 GB", "12.5 GB/s"))


def test_buggy_weight_names_the_correct_update_as_such():
    """Does buggy_w = 0.7 (the correct update) get told it is the correct code's result, not the "sum" slip?"""
    expected = diagnose.buggy_weight(1.0, [3, 9], 0.05)
    message = _fails(checks.value, "buggy_w", 0.7, expected)
    assert "正确代码的结果" in message and "没有除以 R" not in message
    assert "没有除以 R" in _fails(checks.value, "buggy_w", 0.4, expected)


def test_failure_renders_as_its_message_only():
    """Does a failed check show in IPython as its two or three lines, with no frame of the package?"""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.user_ns.update(checks=checks, diagnose=diagnose)
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
        shell.run_cell('checks.value("lower_bound_ms", 1920, diagnose.ring_bound(4, "2 GB", "12.5 GB/s"))')
    shown = out.getvalue() + err.getvalue()
    assert "把比特当成了字节" in shown and "lower_bound_ms = 1920 ms" in shown
    assert "Traceback" not in shown and "checks.py" not in shown and "File " not in shown
    assert 2 <= len([line for line in shown.splitlines() if line.strip()]) <= 3


def test_practice_prints_the_graders_feedback_and_does_not_raise():
    """Does the practice self-check print the named mistake (or a tick) and let the next cell run?"""
    bound = diagnose.ring_bound(4, "2 GB", "12.5 GB/s")
    with contextlib.redirect_stdout(io.StringIO()) as out:
        with checks.practice("lower_bound_ms"):
            checks.value("lower_bound_ms", 1920, bound)
        with checks.practice("lower_bound_ms"):
            checks.value("lower_bound_ms", 240, bound)
        with checks.practice("consistent_checkpoint"):
            checks.exact("f()", {}["rank"], True)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(checks.PRACTICE_FAIL) and "把比特当成了字节" in lines[1]
    assert lines[2].startswith(checks.PRACTICE_OK) and checks.RECEIPT not in out.getvalue()
    assert "KeyError" in lines[3]
    with contextlib.redirect_stdout(io.StringIO()) as out:  # outside practice the receipt is the grader's again
        checks.value("lower_bound_ms", 240, bound)
    assert out.getvalue().startswith(checks.RECEIPT)


@pytest.mark.parametrize("source, trick", [
    ("get_ipython().input_transformers_cleanup.append(lambda lines: [])", "skip_tests"),
    ("import builtins\nbuiltins.abs = lambda x: 0", "rebind_builtins"),
    ("isinstance = lambda *a: True", "rebind_builtins"),
    ("from parallel_budget.answers import checks\nchecks.value = print", "rebind_checker"),
    ("import sys\nsys.modules['parallel_budget.answers.checks'] = None", "rebind_checker"),
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


@pytest.mark.parametrize("wrong, mistake", [(503.3, "只算了前向"), (671.1, "ring 里每个 rank"), (8053, "比特"), (4027, "全网")])
def test_tp_send_mistakes_are_named(wrong, mistake):
    """Does a wrong per-layer TP send (NB04 part C) name forward-only, the missing ring factor, bits or the total?"""
    expected = diagnose.tp_send_layer(4, 4096, 5120, 4)
    assert expected.matches(pb.tp_allreduce(4, 4096, 5120, 4, 1).send_per_rank_per_layer)
    assert mistake in _fails(checks.value, "tp_send_per_layer_MB", wrong, expected)


def test_late_rank_mistakes_are_named():
    """Does the late-rank question (NB05 part C) name the mean arrival, the missing comm and the wait counted with comm?"""
    arrivals = ["120 ms", "125 ms", "118 ms", "190 ms"]
    step = diagnose.straggler_step(arrivals, "60 ms")
    assert step.matches(pb.Q_(250, "ms"))
    assert "平均值" in _fails(checks.value, "late_step_ms", 198.25, step)
    assert "漏掉了通信" in _fails(checks.value, "late_step_ms", 190, step)
    wait = diagnose.straggler_wait_of(arrivals, "60 ms", 0)
    assert wait.matches(pb.Q_(70, "ms"))
    assert "把通信时间也算进了等待" in _fails(checks.value, "rank0_wait_ms", 130, wait)


def test_zero_exercise_numbers_are_robust():
    """Does NB03's smallest stage stay 2 if 40 GB is read as GiB or activations are 8 GB, and does activations/D give 1?"""
    assert diagnose.smallest_stage(7e9, 8, "40 GB", "6 GB") == 2
    assert diagnose.smallest_stage(7e9, 8, "40 GiB", "6 GB") == 2
    assert diagnose.smallest_stage(7e9, 8, "40 GB", "8 GB") == 2
    assert diagnose.smallest_stage(7e9, 8, "40 GB", pb.Q_(6 / 8, "GB")) == 1


def test_overlap_is_hidden_only_behind_backward():
    """Is NB02's overlap answer the backward-capped step (95 ms), and is capping at the whole compute (85 ms) named?"""
    comm = pb.ring_allreduce(8, "1 GB", "25 GB/s").lower_bound
    expected = diagnose.overlap_step("600 ms", 8, comm, "10 ms")
    assert expected.matches(pb.Q_(95, "ms"))
    assert "反向传播" in _fails(checks.value, "overlap_step_ms", 85, expected)
    assert "全部藏起来" in _fails(checks.value, "overlap_step_ms", 75, expected)
    assert "完全不重叠" in _fails(checks.value, "overlap_step_ms", 145, expected)


def test_zero3_traffic_is_one_and_a_half_ddp():
    """Is ZeRO-3's per-rank send 1.5x DDP's, and is DDP's (= ZeRO-1/2's) volume named as that slip?"""
    expected = diagnose.zero_send(7e9, 8, 3)
    ddp = diagnose.zero_send(7e9, 8, 0).value
    assert expected.value.to("GB").magnitude == pytest.approx(1.5 * ddp.to("GB").magnitude)
    assert diagnose.zero_send(7e9, 8, 2).matches(ddp) and diagnose.zero_send(7e9, 8, 1).matches(ddp)
    assert "1.5 倍" in _fails(checks.value, "zero3_send_GB", 24.5, expected)
