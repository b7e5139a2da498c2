"""Do trusted checks run in the grader on plain values only, and can nothing from a kernel fake a pass?"""

from __future__ import annotations

import os

import json

import pytest

from parallel_budget.answers import plain
from parallel_budget.grading.scoring import trusted
from parallel_budget.grading.sandbox.bwrap import Limits, unavailable
from parallel_budget.model.units import Q_

TEST = '''"""检查 send_per_rank_GB。"""
from parallel_budget.answers import checks, diagnose
checks.visible("send_per_rank_GB", send_per_rank_GB)
### BEGIN HIDDEN TESTS
checks.value("send_per_rank_GB", send_per_rank_GB, diagnose.ring_send(4, "2 GB", "12.5 GB/s"))
### END HIDDEN TESTS
'''
FUNCTION_TEST = '''from parallel_budget.answers import checks
good = [{"rank": r, "step": 1} for r in range(4)]
checks.exact("ok", consistent_checkpoint(good, 4), True)
checks.exact("mixed", consistent_checkpoint([{"rank": 0, "step": 1}, {"rank": 1, "step": 2}], 2), False)
'''


def test_free_names_are_the_answers_only():
    """Does the export ask for the answer variables, not for imports, locals or builtins?"""
    assert trusted.free_names(TEST) == ["send_per_rank_GB"]
    assert trusted.free_names(FUNCTION_TEST) == ["consistent_checkpoint"]
    expr = trusted.export_expression(["send_per_rank_GB"])
    assert "diagnose" not in expr and "ring_send" not in expr and "HIDDEN" not in expr


class Liar(float):
    def __eq__(self, other):
        return True

    __hash__ = float.__hash__

    def __float__(self):
        return 3.0


def test_plain_data_round_trip_ignores_lies():
    """Is a lying float read as what it holds, a Quantity as magnitude and unit, an object as its type?"""
    class Unit:
        def __float__(self):
            return 240.0

    text = plain.dump({"a": Liar(99), "b": Q_(3, "GB"), "c": Unit(), "d": [1, "x", {"k": (2, None)}], "f": len},
                      ["a", "b", "c", "d", "f", "missing"])
    got = plain.load(text)
    assert got["a"] == 99.0 and type(got["a"]) is float
    assert got["b"] == Q_(3, "GB")
    assert type(got["c"]).__name__ == "Unit" and isinstance(got["c"], plain.Opaque)
    assert got["d"] == [1, "x", {"k": (2, None)}]
    assert isinstance(got["f"], plain.Function) and "missing" not in got


@pytest.mark.parametrize("bad", ["[1, 2]", "{\"x\": {\"__pb__\": \"quantity\", \"magnitude\": \"3\", \"units\": \"GB\"}}",
                                 "x" * 10, json.dumps({"__import__('os')": 1}), "{\"x\": " * 50 + "1" + "}" * 50])
def test_malformed_exports_read_as_nothing_usable(bad):
    """Does a kernel that sends junk get no value it could pass with?"""
    got = plain.load(bad)
    assert all(isinstance(v, plain.Opaque) for v in got.values())


def test_the_check_runs_here_and_names_the_mistake():
    """Right value: receipts; wrong value: an AssertionError naming the slip; missing: a clear message."""
    ok = trusted.run(TEST, {"send_per_rank_GB": 3.0}, ["send_per_rank_GB"])
    assert [o.output_type for o in ok] == ["stream"] and ok[0].text.count("✔ 检查通过") == 2
    wrong = trusted.run(TEST, {"send_per_rank_GB": 24.0}, ["send_per_rank_GB"])
    assert wrong[-1].output_type == "error" and "比特" in wrong[-1].evalue
    missing = trusted.run(TEST, {}, ["send_per_rank_GB"])
    assert missing[-1].output_type == "error" and "没有定义" in missing[-1].evalue
    opaque = trusted.run(TEST, {"send_per_rank_GB": plain.load(plain.dump({"x": Liar(99)}, ["x"]))["x"]},
                         ["send_per_rank_GB"])
    assert opaque[-1].output_type == "error"


def test_an_unanswered_answer_crosses_as_the_sentinel_and_scores_zero(monkeypatch):
    """Does `...` (a released answer cell left as is) reach the grader as `...` and fail "还没有作答", even where the
    checks would only show a line (as in a student's notebook)?"""
    from parallel_budget.answers import checks

    sent = plain.load(plain.dump({"send_per_rank_GB": ..., "f": ...}, ["send_per_rank_GB", "f"]))
    assert sent == {"send_per_rank_GB": ..., "f": ...} and plain.decode(plain.encode(...)) is ...
    monkeypatch.setattr(checks, "_ipython", lambda: object())  # lenient outside the grader's strict block
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    out = trusted.run(TEST, sent, ["send_per_rank_GB"])
    assert out[-1].output_type == "error" and "send_per_rank_GB 还没有作答" in out[-1].evalue
    assert "✔" not in "".join(o.get("text", "") for o in out)


@pytest.mark.skipif(unavailable() is not None and not os.environ.get("CI"), reason="needs bubblewrap (never skipped on CI)")
def test_function_answers_run_in_a_sandboxed_host():
    """Is the student's function exercised on hidden cases in a fresh sandboxed interpreter, results as plain data?"""
    import os
    import sys

    from parallel_budget.grading.sandbox.forkclient import server

    cells = ["import os\nSEEN = os.listdir('/')\n",
             "def consistent_checkpoint(shards, world_size):\n"
             "    assert 'work' not in SEEN or not os.path.exists('/work/main/solutions')\n"
             "    ranks = sorted(s['rank'] for s in shards)\n"
             "    return ranks == list(range(world_size)) and len({s['step'] for s in shards}) == 1\n"]

    def launch(fd):
        return server(Limits(), role="functions").launch([sys.executable, "-m", "parallel_budget.grading.sandbox.fnhost"],
                                                         dict(os.environ), None, fd=fd)

    host = trusted.FunctionHost(launch, cells, timeout=20)
    try:
        out = trusted.run(FUNCTION_TEST, {"consistent_checkpoint": plain.Function()}, ["consistent_checkpoint"], host)
    finally:
        host.close()
    assert [o.output_type for o in out] == ["stream"] and out[0].text.count("✔ 检查通过") == 2
    broken = trusted.FunctionHost(launch, ["def consistent_checkpoint(s, w):\n    import os\n    os._exit(3)\n"], 20)
    try:
        out = trusted.run(FUNCTION_TEST, {"consistent_checkpoint": plain.Function()}, ["consistent_checkpoint"], broken)
    finally:
        broken.close()
    assert out[-1].output_type == "error" and "意外退出" in out[-1].evalue
