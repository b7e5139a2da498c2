"""Could every ✓ of a lab have been ✗?  Synthetic measurements, perturbed, through each lab's summarize().

A row marked ✓ must be computed from a measured quantity that is not its prediction.  For the labs
whose rows issue #33 questioned, each test builds a synthetic result that agrees with the model, checks
that it gets its ✓, then perturbs the one measured input the row claims to check (the bucket order and
launch times, the held microbatches, the saved bytes, the resume step...) and asserts that the row turns
✗.  Rows that are derived or set-up must never carry a ✓, whatever the input.

For every other lab, the last test takes a real run's results (``tests/files/lab-results.json``: the
``return_values``, options and ranks of the book build's lab cache, ``.lab-cache/*.json``; regenerate it from
there when a lab's result changes shape) and checks that each ✓ turns ✗ when some measured value changes.
No process is started.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from parallel_budget.labs import overlap, pipeline_schedule, restart_drill
from parallel_budget.labs.engine.emulatedlink import step_parts

# ------------------------------------------------------------------ overlap (emulated link)

OPTS = {"layers": 8, "width": 256, "batch": 64, "bandwidth_gbps": 0.25, "mode": "emulated"}
MS = 1e-3


def _link(numel: int) -> float:
    """Seconds a bucket of ``numel`` float32 spends on the 0.25 GB/s link of 2 ranks (ring lower bound)."""
    return 2 * (2 - 1) / 2 * numel * 4 / 0.25e9


def _bucket(launch: float, start: float, numel: int, first: bool) -> dict:
    return {"launch": launch, "numel": numel, "first_layer": first, "link": (start, start + _link(numel))}


def _overlap(record: list, end_backward: float, t1: float) -> list:
    """Two ranks' results of one emulated configuration with the given buckets (t0 = 0, forward 4 ms)."""
    inside = step_parts(0.0, 4 * MS, t1, record, end_backward)
    cfg = {"cap_mb": 1.0, "mode": "emulated", "buckets": [e["numel"] for e in record], "compute": inside["compute"],
           "forward": 4 * MS, "step": t1, "waiting": t1 - record[-1]["launch"], "comm": inside["comm"],
           "inside": [inside]}
    return [{"params": sum(cfg["buckets"]), "configs": [cfg]}] * 2


def _two_buckets(first_in_last=True, end_backward=10 * MS, all_late=False) -> list:
    """Bucket 1 (300k) launched at 6 ms, bucket 2 (100k, the first layer's) at 10.01 ms; backward ends at 10 ms.

    ``end_backward`` later than 12 ms puts nearly all of the last bucket's link time before the end of backward.
    """
    big, small = 300_000, 100_000
    b1 = 10.01 * MS if all_late else 6 * MS
    first = _bucket(b1, b1, big, not first_in_last)
    last = _bucket(10.01 * MS, max(10.01 * MS, first["link"][1]), small, first_in_last)
    return _overlap([first, last], end_backward, 16 * MS)


def _rows(results) -> dict:
    report = overlap.summarize(results, OPTS, 2)
    return {row.item.strip(" └"): row for row in report.rows}


def test_overlap_rows_tick_a_result_that_matches_the_model():
    """Does the synthetic two-bucket step that DDP should give get ✓ on the hidden and last-bucket rows?"""
    rows = _rows(_two_buckets())
    assert rows["藏在反向后面的通信"].ok is True and rows["最后一个桶（反向结束才就绪）"].ok is True


def test_overlap_last_bucket_row_turns_false_on_a_wrong_bucket_order():
    """If the bucket DDP launched last did not hold the first layer's parameters, is the last-bucket row ✗?"""
    rows = _rows(_two_buckets(first_in_last=False))
    assert rows["最后一个桶（反向结束才就绪）"].ok is False
    assert "不含第一层参数" in rows["最后一个桶（反向结束才就绪）"].measured


def test_overlap_last_bucket_row_turns_false_when_its_link_time_lies_before_backward_ends():
    """If the last bucket crossed the link before the independent end of backward, is the row ✗?"""
    rows = _rows(_two_buckets(end_backward=12.2 * MS))
    assert rows["最后一个桶（反向结束才就绪）"].ok is False


def test_overlap_hidden_row_turns_false_when_nothing_overlaps():
    """If every bucket is launched after backward ended (no overlap), does the hidden row's lower bound fail?"""
    rows = _rows(_two_buckets(all_late=True))
    assert rows["藏在反向后面的通信"].ok is False


def test_overlap_one_bucket_hides_nothing_unless_launched_before_backward_ends():
    """One bucket launched at the end of backward: ✓; launched 3 ms before it: ✗."""
    n = 400_000
    good = _rows(_overlap([_bucket(10.01 * MS, 10.01 * MS, n, True)], 10 * MS, 18 * MS))
    assert good["藏在反向后面的通信"].ok is True
    bad = _rows(_overlap([_bucket(7 * MS, 7 * MS, n, True)], 10 * MS, 18 * MS))
    assert bad["藏在反向后面的通信"].ok is False


def test_overlap_rows_true_by_construction_never_tick():
    """Is the emulated step row (compute + link exposure) never ✓, and does the hidden row say its upper bound is
    by construction?"""
    for results in (_two_buckets(), _two_buckets(first_in_last=False), _two_buckets(all_late=True)):
        report = overlap.summarize(results, OPTS, 2)
        head = report.rows[0]
        assert head.ok is None and "由构造成立" in head.verdict and "实测 DDP 步时" in head.measured
    assert "由构造成立" in _rows(_two_buckets())["藏在反向后面的通信"].verdict


# ------------------------------------------------------------------ pipeline_schedule

P, M, F_MS, B_MS = 3, 4, 5.0, 10.0
PER_MB = 512  # bytes every microbatch saves on stage 0


def _pipeline(held0: dict | None = None, swap: str | None = None) -> list:
    """Per-stage results as the model's timeline would give them; stage 0's peak bytes = held x PER_MB."""
    from parallel_budget.model.parallelism import pipeline_in_flight
    from parallel_budget.model.pipeline import pipeline_timeline

    out = []
    for stage in range(P):
        runs = {}
        for key, _ in pipeline_schedule.SCHEDULES:
            t = pipeline_timeline(P, M, key, f"{F_MS} ms", f"{B_MS} ms")
            actions = [[a.kind, a.microbatch, a.start, a.end] for a in t.actions[stage]]
            if swap == key and stage == 0:  # one backward run before the forward it follows: a wrong order
                i = next(k for k, a in enumerate(actions) if a[0] == "B")
                actions[i - 1][2:], actions[i][2:] = actions[i][2:], actions[i - 1][2:]
                actions.sort(key=lambda a: a[2])
            held = pipeline_in_flight(P, M, key).per_stage[0]
            if held0 and key in held0:
                held = held0[key]
            runs[key] = {"actions": actions, "peak_bytes": held * PER_MB, "bytes_per_microbatch": PER_MB,
                         "grad_diff": 0.0}
        out.append({"runs": runs})
    return out


def _prow(report, label: str, what: str):
    return next(r for r in report.rows if r.item.startswith(label) and what in r.item)


def _summarize(results):
    return pipeline_schedule.summarize(results, {"microbatches": M, "forward_ms": F_MS, "backward_ms": B_MS}, P)


def test_pipeline_rows_tick_the_model_s_own_schedule():
    """Does the timeline the model predicts get ✓ on order and bytes, and no tick on the derived row?"""
    report = _summarize(_pipeline())
    for label in ("GPipe", "1F1B"):
        assert _prow(report, label, "执行顺序").ok is True
        assert _prow(report, label, "激活峰值").ok is True
        assert _prow(report, label, "持有的微批次").ok is None  # derived from the order: never a tick


@pytest.mark.parametrize("key, label", [("gpipe", "GPipe"), ("1f1b", "1F1B")])
def test_pipeline_bytes_row_turns_false_on_a_wrong_held_count(key, label):
    """If stage 0 kept one microbatch's activations fewer than predicted, is its bytes row ✗?"""
    from parallel_budget.model.parallelism import pipeline_in_flight

    wrong = pipeline_in_flight(P, M, key).per_stage[0] - 1
    report = _summarize(_pipeline(held0={key: wrong}))
    assert _prow(report, label, "激活峰值").ok is False


@pytest.mark.parametrize("key, label", [("gpipe", "GPipe"), ("1f1b", "1F1B")])
def test_pipeline_order_row_turns_false_and_the_derived_row_stays_untickable(key, label):
    """A stage that ran its actions in another order: order row ✗, the in-flight row still without a tick."""
    report = _summarize(_pipeline(swap=key))
    assert _prow(report, label, "执行顺序").ok is False
    assert _prow(report, label, "持有的微批次").ok is None


# ------------------------------------------------------------------ restart_drill

DRILL = {"steps": 6, "save_every": 2, "kill_step": 4}


def _drill() -> list:
    """Four workers after a drill that went as planned: killed at step 4, resumed from 2, same weights."""
    starts = [{"rank": r, "node": r // 2, "restart_count": a, "start": 1.0 + a, "pid": 100 + 10 * a + r}
              for a in (0, 1) for r in range(4)]
    workers = []
    for r in range(4):
        workers.append({"rank": r, "node": r // 2, "restart_count": 1, "starts": starts, "resumed_from": 2,
                        "start": 5.0, "joined": 5.5, "loaded": 5.6, "done": {"3": 5.8}, "final_diff": 0.0,
                        "killed": {"step": 4, "rank": 3, "at": 4.0, "attempt": 0}, "forked": True})
    return workers


def _drow(workers, what: str):
    report = restart_drill.summarize(workers, DRILL, 4)
    return next(r for r in report.rows if what in r.item)


def test_restart_drill_rows_tick_a_drill_that_went_as_planned():
    """Do the measured rows tick, and does the victim's own marker show as set-up (no tick)?"""
    w = _drill()
    for what in ("重启计数", "启动了几次", "从哪一步", "权重"):
        assert _drow(w, what).ok is True
    setup = _drow(w, "被杀的 worker")
    assert setup.ok is None and "设定" in setup.verdict and "演练的设定" in setup.item


@pytest.mark.parametrize("what, change", [
    ("从哪一步", lambda w: [x.update(resumed_from=4) for x in w]),  # resumed from a step it never saved whole
    ("权重", lambda w: [x.update(final_diff=1e-6) for x in w]),
    ("启动了几次", lambda w: w[0].update(starts=w[0]["starts"][:6])),
    ("重启计数", lambda w: [x.update(restart_count=0) for x in w]),
])
def test_restart_drill_rows_turn_false_on_a_wrong_measurement(what, change):
    """If the measured resume step, weights, starts or restart count were wrong, does that row turn ✗?"""
    w = copy.deepcopy(_drill())
    change(w)
    assert _drow(w, what).ok is False


def test_restart_drill_set_up_row_is_never_a_tick():
    """A marker that says the drill went otherwise gives ✗; none ever gives ✓."""
    w = copy.deepcopy(_drill())
    for x in w:
        x["killed"] = {"step": 3, "rank": 3, "at": 4.0, "attempt": 0}
    assert _drow(w, "被杀的 worker").ok is False


# ------------------------------------------------------------------ every lab, on recorded results

RECORDED = Path(__file__).parent / "files" / "lab-results.json"  # real runs' return_values (overlap: above)


def _leaf_change(value):
    """How one measured leaf is changed: numbers scaled and shifted, booleans flipped, strings emptied."""
    if isinstance(value, bool):
        return lambda x: not x
    if isinstance(value, (int, float)):
        return lambda x: x * 1.5 + 1
    if isinstance(value, str):
        return lambda x: "" if x else "?"
    return None


def _mutations(value, path=()):
    """(path, change) for each measured leaf, for each list one element short, and for each leaf the same change
    in every element of its innermost list ("*": every step of a rank, so a majority over steps can move too)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _mutations(v, path + (k,))
    elif isinstance(value, list):
        if value:
            yield path, lambda x: x[:-1]
        for i, v in enumerate(value):
            yield from _mutations(v, path + (i,))
        if len(value) > 1:
            seen = set()
            for sub, change in _mutations(value[0]):
                if sub not in seen and "*" not in sub and change is not None:
                    seen.add(sub)
                    yield path + ("*",) + sub, change
    else:
        change = _leaf_change(value)
        if change is not None:
            yield path, change


def _mutated(results, path, change):
    out = copy.deepcopy(results)

    def apply(target, rest):
        key = rest[0]
        keys = range(len(target)) if key == "*" else (key,)
        for k in keys:
            if len(rest) == 1:
                target[k] = change(target[k])
            else:
                apply(target[k], rest[1:])

    if not path:
        return change(out)
    apply(out, path)
    return out


@pytest.mark.parametrize("name", sorted(json.loads(RECORDED.read_text(encoding="utf-8"))))
def test_every_tick_of_a_recorded_run_depends_on_a_measurement(name):
    """For each lab: can every ✓ of a real run's report turn ✗ when one measured value is changed?

    A row whose ✓ followed from the options and the model alone (its prediction compared with itself) would
    survive every such change.  This is weaker than the targeted tests above (a row true by construction for
    any *consistent* measurement can still fail on one changed value), and those hold the labs of issue #33.
    """
    from parallel_budget.labs.engine.config import lab_module

    run = json.loads(RECORDED.read_text(encoding="utf-8"))[name]
    module = lab_module(name)
    results, opts, ranks = run["return_values"], run["options"], run["ranks"]
    base = module.summarize(results, opts, ranks)
    ticked = {row.item for row in base.rows if row.ok is True}
    assert ticked, f"{name}: the recorded run has no ✓ to check"
    flipped = set()
    for path, change in _mutations(results):
        try:
            report = module.summarize(_mutated(results, path, change), opts, ranks)
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError, AttributeError, StopIteration):
            continue  # a result of another shape: the lab refuses it, no row to read
        flipped |= {row.item for row in report.rows if row.item in ticked and row.ok is False}
        if flipped == ticked:
            break
    assert flipped == ticked, f"{name}: these ✓ rows never turn ✗ when a measured value changes: {ticked - flipped}"
