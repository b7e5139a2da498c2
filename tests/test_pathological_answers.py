"""Is a student's answer parsed, never evaluated, in trusted code, and does a pathological one cost only its cell?"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pint
import pytest
from pint.util import ParserHelper

from grading_helpers import ROOT, course_copy, flags, notebook_total, scores

from parallel_budget.grading.intake import synthetic
from parallel_budget.grading.scoring import integrity, overrun, trusted
from parallel_budget.answers import plain
from parallel_budget.answers.read import AnswerError, Unevaluated, read_answer
from parallel_budget.grading.course import Course

NB3 = "03-zero-memory"
# Each of these costs pint minutes to hours (or its recursion limit) when it is evaluated as an expression.
EXPRESSIONS = ["9**9**9 GB", "2**9999999 MB", "1 GB * 10**10**10", "(" * 500 + "1" + ")" * 500 + " GB",
               "1 " + "(" * 500 + "GB" + ")" * 500, "1" * 5000 + " GB", "1 GB" + "*1" * 3000, "1 GB/s" * 2000]
BAD_NUMBERS = ["1e99999999 GB", "9" * 40 + "e9999 GB", "1e400 GB", "\u0661 GB", "1_000 GB", "inf GB"]
# Names a student's (fake) Quantity may carry into the grader's plain data.
UNIT_TEXTS = ["(9**9**9*byte)**1.0", "(byte)**9999999.0", "(" * 90 + "byte" + ")" * 90, " * ".join(["(gigabyte)**1.0"] * 8),
              "(__import__)**1.0", "(byte)**1e308"]


@pytest.fixture()
def pint_parses(monkeypatch):
    """Every string pint's parser is handed while the test runs."""
    seen = []
    original = ParserHelper.from_string

    def spy(cls, text, *args, **kwargs):
        seen.append(text)
        return original(text, *args, **kwargs)

    monkeypatch.setattr(ParserHelper, "from_string", classmethod(spy))
    return seen


def _only_names(seen):
    """pint's inputs that are not a unit name or a dimension of the course's tables (an expression a student typed)."""
    return [t for t in seen if not re.fullmatch(r"[A-Za-zµ]*(/[A-Za-z]+)?|\[[a-z]+\]( / \[[a-z]+\])?", t or "")]


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_an_expression_is_refused_by_the_grammar_without_reaching_pint(text, pint_parses):
    """Is a typed expression refused with a Chinese message, pint never parsing it?"""
    with pytest.raises(Unevaluated) as info:
        read_answer("peak_GB", text)
    assert "peak_GB" in str(info.value) and len(str(info.value)) < 400  # never echoes 5 000 characters
    assert _only_names(pint_parses) == []


@pytest.mark.parametrize("text", BAD_NUMBERS)
def test_a_number_outside_the_grammar_is_refused_at_once(text, pint_parses):
    """Is a number that is too long, infinite or not ASCII refused, with pint parsing nothing typed?"""
    with pytest.raises(AnswerError, match="peak_GB"):
        read_answer("peak_GB", text)
    assert _only_names(pint_parses) == []


@pytest.mark.parametrize("text, gb", [("32.25 GB", 32.25), ("32250 MB", 32.25), ("3.225e1GB", 32.25),
                                      ("258 Gb", 32.25), ("30.04 GiB", 32.255), (" 32.25 GB ", 32.25)])
def test_honest_spellings_still_read_and_pint_sees_only_names(text, gb, pint_parses):
    """Do the course's spellings still read, with pint given only a number and a unit of the table?"""
    assert read_answer("peak_GB", text).to("GB").magnitude == pytest.approx(gb, rel=1e-3)
    assert _only_names(pint_parses) == []


@pytest.mark.parametrize("text", ["1006.63 mb", "2 kb/s", "1006.63 mB"])
def test_ambiguous_units_are_still_refused_with_both_readings(text):
    """Is "mb"/"kb" still refused naming both readings (bytes and bits)?"""
    with pytest.raises(AnswerError) as info:
        read_answer("x_MB" if "/s" not in text else "x_GBps", text)
    assert re.search(r"[MkG]B.*[Mk](b|bit)", str(info.value))


@pytest.mark.parametrize("units_text", UNIT_TEXTS)
def test_a_forged_quantity_in_plain_data_is_opaque_and_never_parsed(units_text, pint_parses):
    """Does a kernel's Quantity with an expression for a unit decode as an opaque object, unparsed?"""
    value = plain.load(json.dumps({"peak_GB": {"__pb__": "quantity", "magnitude": 1, "units": units_text}}))["peak_GB"]
    assert isinstance(value, plain.UnreadQuantity)
    with pytest.raises(Unevaluated):
        read_answer("peak_GB", value)
    assert _only_names(pint_parses) == []


def test_a_quantity_of_another_registry_is_rebuilt_from_its_names():
    """Is a Quantity of any registry read by its unit names, and one with unknown units refused?"""
    other = pint.UnitRegistry()
    assert read_answer("peak_GB", other.Quantity(32.25, "gigabyte")).to("GB").magnitude == pytest.approx(32.25)
    assert read_answer("x_GBps", other.Quantity(25, "Gbit/s")).to("GB/s").magnitude == pytest.approx(3.125)
    with pytest.raises(AnswerError, match="单位表"):
        read_answer("peak_GB", other.Quantity(3, "parsec"))


def test_deeply_nested_plain_data_reads_as_nothing():
    """Does a 4 MB export of nested lists read as no answers rather than raise in the grader?"""
    assert plain.load('{"a": ' + "[" * 200_000 + "]" * 200_000 + "}") == {}


def _run(source):
    return trusted.run(source, {"peak_GB": "32.25 GB"}, ["peak_GB"])


def test_a_runaway_check_costs_its_cell_and_the_next_check_runs(monkeypatch):
    """Does work past the deadline give this cell an overrun error (0 points) and leave the next check alone?"""
    monkeypatch.setattr(overrun, "CHECK_CPU_S", 0.3)
    monkeypatch.setattr(overrun.bounded, "__defaults__", (0.3, overrun.CHECK_MEMORY_BYTES))
    out = _run("try:\n    while True:\n        pass\nexcept Exception:\n    pass\n")
    assert [o["ename"] for o in out if o["output_type"] == "error"] == [overrun.OVERRUN]
    ok = _run('from parallel_budget.answers import checks\nchecks.visible("peak_GB", peak_GB)\n')
    assert not [o for o in ok if o["output_type"] == "error"]


def test_memory_past_the_bound_costs_its_cell():
    """Does a check that allocates past the bound get an overrun error, and the grader's own limit come back?"""
    import resource

    before = resource.getrlimit(resource.RLIMIT_AS)
    out = _run(f"x = bytearray({overrun.CHECK_MEMORY_BYTES * 3})\n")
    assert [o["ename"] for o in out if o["output_type"] == "error"] == [overrun.OVERRUN]
    assert resource.getrlimit(resource.RLIMIT_AS) == before


@pytest.mark.parametrize("source, trick", [("x = bytearray(2**40)\n", "check_overrun"),
                                           ("from parallel_budget.answers import checks\n"
                                            "checks.visible('peak_GB', '2**9999999 GB')\n", "unread_answer")])
def test_an_overrun_or_an_unread_answer_is_an_integrity_row(source, trick):
    """Does runtime_findings turn an overrun cell, or an expression typed as an answer, into its row?"""
    cell = {"cell_type": "code", "metadata": {"nbgrader": {"grade": True, "grade_id": "test_peak"}},
            "outputs": [dict(o) for o in _run(source)]}
    found = integrity.runtime_findings("s", "nb", {"cells": [cell]})
    assert [(f.cell, f.trick) for f in found] == [("test_peak", trick)]


FAKE_QUANTITY = '''
class _Units:
    _d = {"9**9**9*byte": 1}

class Quantity:
    __module__ = "pint.forged"
    _magnitude = 32.25
    _units = _Units()

peak_GB = Quantity()
smallest_stage = 2
'''


@pytest.mark.slow
def test_two_pathological_students_under_two_jobs_cost_only_their_cell(tmp_path):
    """End to end: two students whose answers pint would evaluate for hours, two honest ones, --jobs 2.

    Each pathological student loses the one test cell that reads the answer, with a row in integrity or
    the check's message; every other score is exactly the honest one; the command ends well inside its time.
    """
    course = Course(course_copy(tmp_path / "course", [NB3]))
    folder = tmp_path / "class"
    honest = synthetic.submission(course, "lesson")
    for s in ("honest0", "honest1"):
        synthetic.write_student(folder, s, "lesson", honest)
    typed = synthetic.submission(course, "lesson", {"answer_peak": 'peak_GB = "9**9**9 GB"\nsmallest_stage = 2\n'})
    synthetic.write_student(folder, "typed", "lesson", typed)
    forged = synthetic.submission(course, "lesson", {"answer_peak": FAKE_QUANTITY})
    synthetic.write_student(folder, "forged", "lesson", forged)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "parallel_budget.grading", "--root", str(course.root), "grade",
                           str(folder), "--jobs", "2", "--timeout", "20"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    sc = scores(course.gradebook)
    full = notebook_total({k: (v[1], v[1]) for k, v in sc.items()}, "honest0", NB3)
    assert notebook_total(sc, "honest0", NB3) == notebook_total(sc, "honest1", NB3) == full > 0
    for s in ("typed", "forged"):
        lost = {k[2] for k, v in sc.items() if k[0] == s and k[1] == NB3 and k[2].startswith("test_") and v[0] != v[1]}
        assert lost == {"test_peak"}, (s, lost)
    assert took < 600, took  # minutes at most, where evaluating either answer took pint hours
    found = flags(course.gradebook)
    assert {("typed", NB3, "test_peak", "unread_answer"), ("forged", NB3, "test_peak", "unread_answer")} <= found
    assert not {f for f in found if f[0].startswith("honest")}


@pytest.mark.parametrize("text", ["32.25", " 32.25 ", "3.225e1"])
def test_a_bare_number_in_a_string_is_in_the_names_unit(text):
    """`peak_GB = "32.25"` means 32.25 GB, as `peak_GB = 32.25` does: never 32.25 bytes."""
    assert read_answer("peak_GB", text).to("GB").magnitude == pytest.approx(32.25)
    assert read_answer("step_ms", text).to("ms").magnitude == pytest.approx(32.25)
