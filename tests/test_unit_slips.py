"""Do the package, the grader and the page read ambiguous and bits units the same way (issue 22, item 11)?

"mb" is millibits to pint and "mB" millibytes: nobody means them, and a reader who writes them means
megabytes or megabits, which differ 8x.  The package refuses them naming both readings; the grader
says so for an answer variable; a bits unit given for a bytes answer whose number is right in bytes is
the bits/bytes slip.  The page's twins (model.js, practice.js) are held to the same cases by
tests/vectors/calculators.json and tests/vectors/questions.json (node --test tests/js/).
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest

import parallel_budget as pb
from conftest import ROOT
from parallel_budget.answers import checks, diagnose
from parallel_budget.answers.read import AnswerError, read_answer
from parallel_budget.model.units import ambiguous_unit


def _fails(fn, *args) -> str:
    with pytest.raises(AssertionError) as info, contextlib.redirect_stdout(io.StringIO()):
        fn(*args)
    return str(info.value)


@pytest.mark.parametrize("text, readings", [
    ("1006.63 mb", ("MB", "Mb")), ("1006.63 mB", ("MB", "Mb")), ("2 kb", ("kB", "kbit")), ("2kb", ("kB", "kbit")),
    ("3 gb", ("GB", "Gb")), ("3 tb", ("TB", "Tb")), ("25 gb/s", ("GB/s", "Gb/s")), ("100 mbps", ("MB/s", "Mb/s")),
    ("8 kb/s", ("kB/s", "kbit/s")),
])
def test_lower_case_prefixes_are_refused_naming_both_readings(text, readings):
    """Is "mb" (and "kb", "mB", "gb/s") refused with a Chinese message naming the bytes and the bits reading?"""
    kind = "bandwidth" if text.endswith(("/s", "ps")) else "bytes"
    with pytest.raises(ValueError) as info:
        pb.parse(text, kind, arg="x", func="f")
    message = str(info.value)
    assert "f() 的参数 x" in message and "有歧义" in message and repr(text) in message
    for reading in readings:
        assert f"请写 {readings[0]} 或 {readings[1]}" in message and reading in message
    assert ambiguous_unit(text)[1:] == readings


@pytest.mark.parametrize("text, base", [("3 MB", 3e6), ("3 Mb", 3e6 / 8), ("2 kB", 2e3), ("8 kbit", 1e3),
                                         ("2 MiB", 2**21), ("25 Gb/s", 3.125e9), ("400 ms", 0.4), ("2 min", 120)])
def test_unambiguous_units_still_read(text, base):
    """Are MB, Mb, kB, kbit, MiB, Gb/s and ms read as before (and "ms" never taken for an ambiguous unit)?"""
    kind = "bandwidth" if text.endswith("/s") else "time" if text.endswith(("ms", "min")) else "bytes"
    assert pb.parse(text, kind).magnitude == pytest.approx(base)


def test_the_grader_refuses_mb_for_an_answer():
    """Is tp_send_per_layer_MB = "1006.63 mb" refused (not read as 1.3e-7 MB and passed as the right type)?"""
    with pytest.raises(AnswerError) as info:
        read_answer("tp_send_per_layer_MB", "1006.63 mb")
    message = str(info.value)
    assert "变量 tp_send_per_layer_MB" in message and "MB" in message and "Mb" in message and "有歧义" in message
    assert "类型与单位正确" not in _fails(checks.visible, "tp_send_per_layer_MB", "1006.63 mb")


@pytest.mark.parametrize("unit", ["Mb", "Mbit", "Gb"])
def test_bits_for_a_bytes_answer_is_the_bits_slip(unit):
    """Is the right number with a bits unit ("805.3 Mb" for an _MB answer) diagnosed as the bits/bytes slip?"""
    expected = diagnose.tp_send_layer(8, 2048, 4096, 4)
    right_mb = expected.value.to("MB").magnitude
    number = right_mb / 1000 if unit == "Gb" else right_mb
    message = _fails(checks.value, "tp_send_per_layer_MB", f"{number:.6g} {unit}", expected)
    assert diagnose.MISTAKES["bits"] in message
    checks.value("tp_send_per_layer_MB", f"{right_mb * 8:.8g} Mb", expected)  # the right amount, in bits: right


def test_bits_slip_needs_a_bits_unit():
    """A bare number, a bytes unit or a Quantity in bytes is never called the bits slip by bits_slip itself."""
    expected = diagnose.tp_send_layer(8, 2048, 4096, 4)
    eighth = expected.value / 8
    for given in (eighth.to("MB").magnitude, f"{eighth.to('MB').magnitude:.6g} MB", eighth):
        assert diagnose.bits_slip(given, eighth, expected) is None
    assert diagnose.bits_slip(pb.Q_(eighth.to("Mb").magnitude, "Mb"), eighth, expected) == diagnose.MISTAKES["bits"]


def test_the_shared_vectors_hold_these_cases():
    """Do the vectors the page is tested on carry the ambiguous units and the bits slip?"""
    calc = json.loads((ROOT / "tests" / "vectors" / "calculators.json").read_text(encoding="utf-8"))
    ambiguous = [c for c in calc["cases"] if c.get("readings")]
    assert {c["input"]["text"] for c in ambiguous} >= {"1006.63 mb", "1006.63 mB", "2 kb", "25 gb/s"}
    assert all(c["errors"] == ["value"] for c in ambiguous)
    assert any(c["kind"] == "ring" and c["input"] == {"grad": "500 mb"} and c["errors"] == ["grad"] for c in calc["cases"])
    bank = json.loads((ROOT / "tests" / "vectors" / "questions.json").read_text(encoding="utf-8"))
    tp = next(q for q in bank["questions"] if q["question"]["id"] == "tppp.nb04_tp_send")
    cases = {c["text"]: c for c in tp["draws"][0]["cases"]}
    right = next(t for t, c in cases.items() if c["status"] == "ok" and t.endswith(" MB"))
    number = right.split()[0]
    assert cases[f"{number} Mb"]["keys"] == ["bits"]
    assert cases[f"{number} mb"]["status"] == "error"
