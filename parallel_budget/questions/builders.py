"""Expected answers of the bank's questions, by builder name, from ``diagnose`` and package calls.

Each builder takes the question's arguments (numbers in the units the
question's parameters carry: ``grad`` in GB, ``compute`` in ms ...) and returns
the :class:`~parallel_budget.answers.diagnose.Expected` the grader checks
against, or, for an ``int`` question, the right integer.  The page's twin of
each builder has the same name in ``book/_static/calc/practice.js``.

``EXTRA`` builds the intermediate values a worked solution shows.
"""

from __future__ import annotations

from ..answers import diagnose
from ..answers.diagnose import Expected
from ..model.communication import ring_allreduce, ring_send_factor
from ..model.memory import zero_memory
from ..model.parallelism import tp_allreduce
from ..model.steptime import step_time, straggler_wait
from ..model.units import Q_
from ..model.update import data_parallel_update


def _gb(x):
    return Q_(x, "GB")


def _ms(x):
    return Q_(x, "ms")


def _ring(a):
    return a["ranks"], _gb(a["grad"]), Q_(a.get("bw", 25), "GB/s")


def _comm(a):
    return ring_allreduce(*_ring(a)).lower_bound


def ring_factor(a) -> Expected:
    """2(R-1)/R, with the two classic slips: the factor 2 or the (R-1)/R dropped."""
    f = ring_send_factor(a["ranks"])
    return Expected(f, None, (("ring_fraction", 2.0), ("factor2", f / 2)))


def full_overlap(a) -> Expected:
    """Step time when every byte may overlap (overlap=1) but only behind backward."""
    right = step_time(_ms(a["compute"]), a["ranks"], _comm(a), 1.0)
    return Expected(right.step, "ms", (
        ("overlap_all", right.compute_per_rank),
        ("overlap_compute", step_time(_ms(a["compute"]), a["ranks"], _comm(a), 1.0, backward_share=1.0).step),
        ("no_overlap", step_time(_ms(a["compute"]), a["ranks"], _comm(a)).step),
    ))


def tp_step(a) -> Expected:
    """Bytes all TP all-reduces of one step carry (forward and backward, every layer)."""
    c = tp_allreduce(a["batch"], a["seq"], a["hidden"], a["tp"], a["layers"])
    s = c.per_step
    return Expected(s, "GB", (("tp_forward_only", s / 2), ("bits", Q_(s.to("bit").magnitude, "B"))))


PLAN = ("layers", "hidden", "heads", "seq", "vocab", "ffn", "gated", "dropout", "flash_attention", "global_batch",
        "recompute", "peak_flops", "dp", "tp", "pp", "micro_batch")


def _plan(a) -> dict:
    return {k: a[k] for k in PLAN} | {"zero_stage": 1}


def _extra_plan(a):
    from ..model.activations import layer_activation_bytes
    from ..model.plan import plan_budget

    b = plan_budget(**_plan(a), schedule="1f1b")
    stored, _ = layer_activation_bytes(a["seq"], a["micro_batch"], a["hidden"], a["heads"], a["tp"], a["tp"] > 1,
                                       a["recompute"], a["ffn"], a["gated"], a["dropout"], a["flash_attention"])
    return {"m": b.microbatches, "flight": b.memory.in_flight, "layers": a["layers"] // a["pp"], "per_layer": stored}


def slow_rank(a) -> int:
    return straggler_wait(_ms_list(a["arrivals"])).slowest


def _ms_list(xs):
    return [_ms(x) for x in xs]


BUILDERS = {
    "ring_send": lambda a: diagnose.ring_send(*_ring(a)),
    "ring_bound": lambda a: diagnose.ring_bound(*_ring(a)),
    "ring_factor": ring_factor,
    "dp_weight": lambda a: diagnose.dp_weight(a["w"], a["grads"], a["lr"]),
    "buggy_weight": lambda a: diagnose.buggy_weight(a["w"], a["grads"], a["lr"]),
    "step": lambda a: diagnose.step(_ms(a["compute"]), a["ranks"], _comm(a), a["what"]),
    "overlap_step": lambda a: diagnose.overlap_step(_ms(a["compute"]), a["ranks"], _comm(a), _ms(a["last"])),
    "full_overlap": full_overlap,
    "zero_state": lambda a: diagnose.zero_state(a["params"] * 1e9, a["dp"], a["stage"]),
    "zero_peak": lambda a: diagnose.zero_peak(a["params"] * 1e9, a["dp"], a["stage"], _gb(a["act"])),
    "zero_send": lambda a: diagnose.zero_send(a["params"] * 1e9, a["dp"], a["stage"]),
    "smallest_stage": lambda a: diagnose.smallest_stage(a["params"] * 1e9, a["dp"], _gb(a["memory"]), _gb(a["act"])),
    "bubble": lambda a: diagnose.bubble(a["stages"], a["micro"]),
    "tp_send_layer": lambda a: diagnose.tp_send_layer(a["batch"], a["seq"], a["hidden"], a["tp"]),
    "tp_step": tp_step,
    "straggler_step": lambda a: diagnose.straggler_step(_ms_list(a["arrivals"]), _ms(a["comm"])),
    "straggler_wait": lambda a: diagnose.straggler_wait_of(_ms_list(a["arrivals"]), _ms(a["comm"]), a["rank"]),
    "slow_rank": slow_rank,
    "stage_acts": lambda a: diagnose.stage_activations(**_plan(a)),
}


def _si(q) -> float:
    from .core import magnitude

    return magnitude(q)


def _extra_step(a):
    s = step_time(_ms(a["compute"]), a["ranks"], _comm(a), a.get("overlap", 0.0), last_bucket=_ms(a.get("last", 0)))
    return {"comm": _si(s.exposed_comm + s.hidden_comm), "per": _si(s.compute_per_rank),
            "hidden": _si(s.hidden_comm), "backward": _si(s.backward), "speedup": s.speedup, "step": _si(s.step)}


def _extra_zero(a):
    rows = [zero_memory(a["params"] * 1e9, a["dp"], s).total for s in range(4)]
    return {f"z{s}": _si(t) for s, t in enumerate(rows)}


def _extra_tp(a):
    c = tp_allreduce(a["batch"], a["seq"], a["hidden"], a["tp"], a.get("layers", 1))
    return {"message": _si(c.message), "per_layer": _si(c.per_layer)}


def _extra_wait(a):
    w = straggler_wait(_ms_list(a["arrivals"]), _ms(a.get("comm", 0)))
    return {"last": _si(max(w.arrivals))}


EXTRA = {
    "ring_send": lambda a: {"factor": ring_send_factor(a["ranks"])},
    "ring_bound": lambda a: {"send": _si(ring_allreduce(*_ring(a)).send_per_rank)},
    "dp_weight": lambda a: {"mean": data_parallel_update(a["w"], a["grads"], a["lr"]).aggregated_grad},
    "buggy_weight": lambda a: {"mean": data_parallel_update(a["w"], a["grads"], a["lr"]).aggregated_grad},
    "step": _extra_step,
    "overlap_step": lambda a: _extra_step({**a, "overlap": 1.0}),
    "full_overlap": lambda a: _extra_step({**a, "overlap": 1.0}),
    "zero_state": _extra_zero,
    "zero_peak": _extra_zero,
    "smallest_stage": _extra_zero,
    "zero_send": lambda a: {"ddp": _si(diagnose.zero_send(a["params"] * 1e9, a["dp"], 0).value)},
    "tp_send_layer": _extra_tp,
    "tp_step": _extra_tp,
    "straggler_step": _extra_wait,
    "straggler_wait": _extra_wait,
    "slow_rank": _extra_wait,
    "stage_acts": _extra_plan,
}


def make(id, chapter, source, answer, builder, params, prompt, solution, kind=None, fixed=None, hint=""):
    """A :class:`~.core.Question` whose expected value and solution values come from ``builder``."""
    from .core import Question

    return Question(id=id, chapter=chapter, source=source, answer=answer, kind=kind, params=tuple(params),
                    builder=builder, build=BUILDERS[builder], prompt_text=prompt, solution_text=solution,
                    fixed=dict(fixed or {}), extra=EXTRA.get(builder), hint=hint)
