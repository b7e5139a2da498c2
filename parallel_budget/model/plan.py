"""A whole parallel plan: memory, communication and step time of one DP x TP x PP x ZeRO split.

:func:`plan_budget` puts the course's formulas together for one plan and says,
in Chinese, whether it fits and what its step is made of; :func:`search_plans`
tries every (dp, tp, pp, zero_stage, micro_batch) split of ``devices`` and
returns those that fit, fastest first.  Each term comes from the module that
owns its formula (see :mod:`.planterms`):

* model states per ZeRO stage, on the 1/(tp·pp) shard of the parameters
  (:func:`.memory.zero_memory`; ZeRO paper, Rajbhandari et al. 2020, Table 1);
* activations per layer (:mod:`.activations`, Korthikanti et al. 2022, Table 2:
  s·b·h·(34 + 5·a·s/h) bytes, 34·s·b·h with selective and 2·s·b·h with full
  recomputation, divided by t with TP and sequence parallel), times the layers
  of one stage, times the microbatches in flight (GPipe: all m; 1F1B: at most p);
* ZeRO-3's temporary gather: two layers' full parameters (the one in use and
  the one prefetched), plus the working set of recomputation;
* DP traffic (:func:`.memory.zero_communication`): all-reduce for DDP,
  reduce-scatter + all-gather for ZeRO-1/2 (same volume), about 1.5x for
  ZeRO-3 (parameters gathered in forward and again in backward);
* Megatron TP: 2 + 2 all-reduces of b·s·h per layer and microbatch
  (:func:`.parallelism.tp_allreduce`), on the intra-node link when TP fits in a node;
* PP point-to-point: each microbatch's activation forward and its gradient
  backward, b·s·h·2 bytes (divided by t with sequence parallel);
* α-β time of every collective on its link;
* gradient accumulation: DDP and ZeRO-1/2 reduce once per step, so only the
  last microbatch's backward can hide that traffic; ZeRO-3 gathers and
  reduce-scatters every layer for every microbatch (m times the volume), behind
  every microbatch's backward;
* overlap: only DP/ZeRO traffic hides, behind the backward share of compute
  (:func:`.steptime.step_time`); TP and PP traffic sit on the critical path;
* the bubble by schedule, (p-1)/m of a stage's work (:func:`.parallelism.pipeline_bubble`);
* step = compute + exposed communication + bubble; tokens/s = global batch · seq / step;
  efficiency = compute without recomputation / step.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType

import pint

from . import planterms as T
from .activations import _recompute
from .parallelism import PIPELINE_SCHEDULES
from .planreport import assumptions, verdict, verdict_codes  # noqa: F401 (verdict_codes re-exported)
from .units import Q_, as_bandwidth, as_bytes, as_count, as_fraction, as_params, as_positive, as_time

#: Public model shapes for worked examples (Touvron et al. 2023, Llama 2, Table 1 / config.json).
SHAPES = {
    "llama2-7b": {"layers": 32, "hidden": 4096, "heads": 32, "seq": 4096, "vocab": 32000, "ffn": 11008, "gated": True},
}
FUNC = "plan_budget"


@dataclass(frozen=True)
class Collective:
    """One kind of collective of the plan: bytes one device sends per step, and its α-β time."""

    name: str  # e.g. "DP all-reduce"
    what: str  # what it moves (梯度, 参数, 激活)
    group: str  # "dp", "tp" or "pp"
    ranks: int
    link: str  # "intra" or "inter"
    calls: int  # per step
    bytes: pint.Quantity
    time: pint.Quantity
    overlappable: bool  # may hide behind backward


@dataclass(frozen=True)
class PlanMemory:
    """Per-device memory: resident model states, stored activations, temporary buffers."""

    param_state: pint.Quantity
    grad_state: pint.Quantity
    optim_state: pint.Quantity
    states: pint.Quantity
    activations: pint.Quantity
    gather: pint.Quantity  # ZeRO-3 all-gathered layers
    working: pint.Quantity  # recomputation working set
    temporary: pint.Quantity
    total: pint.Quantity
    in_flight: int  # microbatches whose activations the first stage holds


@dataclass(frozen=True)
class PlanBudget:
    """Memory, communication and step time of one plan (per device, one step)."""

    settings: MappingProxyType  # the validated inputs (read-only), SI floats, for the report
    dp: int
    tp: int
    pp: int
    zero_stage: int
    micro_batch: int
    microbatches: int  # per DP replica and step
    params: float
    memory: PlanMemory
    comm: tuple  # Collective, ...
    compute: pint.Quantity
    ideal: pint.Quantity  # compute without recomputation
    hidden_comm: pint.Quantity
    exposed_comm: pint.Quantity
    bubble: pint.Quantity
    step: pint.Quantity
    tokens_per_s: pint.Quantity
    efficiency: float
    fits: bool

    @property
    def devices(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def verdict(self) -> tuple:
        """The reasons, in Chinese: fit, batch, units, overlap, links, the biggest overhead."""
        return verdict(self)

    @property
    def assumptions(self) -> tuple:
        """What the model simplifies, in Chinese (for the chapter and the record page)."""
        return assumptions(self)

    def __repr__(self) -> str:
        from .units import fmt, fmt_percent

        return (
            f"PlanBudget(dp={self.dp}, tp={self.tp}, pp={self.pp}, zero_stage={self.zero_stage}, "
            f"micro_batch={self.micro_batch}, microbatches={self.microbatches}: memory={fmt(self.memory.total, digits=4)} "
            f"({'fits' if self.fits else 'does not fit'}), step={fmt(self.step, digits=4)}, "
            f"exposed_comm={fmt(self.exposed_comm, digits=4)}, bubble={fmt(self.bubble, digits=4)}, "
            f"efficiency={fmt_percent(self.efficiency)})"
        )


def _bool(value, arg: str, func: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{func}() 的参数 {arg} 只能是 True 或 False，收到 {value!r}。例如 {arg}=True")
    return value


def _choice(value, arg: str, options, func: str) -> str:
    key = str(value).lower().replace("-", "") if isinstance(value, str) else value
    if key not in options:
        shown = "、".join(f'"{o}"' for o in options)
        raise ValueError(f"{func}() 的参数 {arg} 只能是 {shown}，收到 {value!r}。例如 {arg}=\"{options[-1]}\"")
    return key


def settings(*, layers, hidden, heads, seq, vocab, global_batch, params=None, ffn=None, gated=False,
             tied_embeddings=False, schedule="1f1b", recompute="none", sequence_parallel=True,
             param_bytes=2, grad_bytes=2, optim_bytes=12, devices_per_node=8, device_memory="80 GB",
             intra_bw="150 GB/s", inter_bw="25 GB/s", latency="10 us", compute=None, peak_flops=None,
             mfu=0.4, overlap=1.0, backward_share=T.BACKWARD_SHARE, func=FUNC) -> dict:
    """Validate everything but the split itself; SI floats (bytes, B/s, s, FLOP/s)."""
    s = {
        "layers": as_count(layers, arg="layers", func=func), "hidden": as_count(hidden, arg="hidden", func=func),
        "heads": as_count(heads, arg="heads", func=func), "seq": as_count(seq, arg="seq", func=func),
        "vocab": as_count(vocab, arg="vocab", func=func),
        "global_batch": as_count(global_batch, arg="global_batch", func=func),
        "gated": _bool(gated, "gated", func), "tied_embeddings": _bool(tied_embeddings, "tied_embeddings", func),
        "schedule": _choice(schedule, "schedule", PIPELINE_SCHEDULES, func),
        "recompute": _recompute(recompute, func),
        "sequence_parallel": _bool(sequence_parallel, "sequence_parallel", func),
        "param_bytes": as_positive(param_bytes, arg="param_bytes", func=func),
        "grad_bytes": as_positive(grad_bytes, arg="grad_bytes", func=func),
        "optim_bytes": as_positive(optim_bytes, arg="optim_bytes", func=func, allow_zero=True),
        "devices_per_node": as_count(devices_per_node, arg="devices_per_node", func=func),
        "device_memory": as_bytes(device_memory, arg="device_memory", func=func).magnitude,
        "intra_bw": as_bandwidth(intra_bw, arg="intra_bw", func=func).magnitude,
        "inter_bw": as_bandwidth(inter_bw, arg="inter_bw", func=func).magnitude,
        "latency": as_time(latency, arg="latency", func=func).magnitude,
        "overlap": as_fraction(overlap, arg="overlap", func=func),
        "backward_share": as_fraction(backward_share, arg="backward_share", func=func),
    }
    s["ffn"] = 4 * s["hidden"] if ffn is None else as_count(ffn, arg="ffn", func=func)
    for arg in ("intra_bw", "inter_bw", "device_memory"):
        if s[arg] == 0:
            raise ValueError(f"{func}() 的参数 {arg} 必须大于 0。例如 {arg}=\"25 GB/s\"" if "bw" in arg
                             else f"{func}() 的参数 {arg} 必须大于 0。例如 {arg}=\"80 GB\"")
    if s["hidden"] % s["heads"]:
        raise ValueError(f"{func}() 的参数 heads={s['heads']} 必须整除 hidden={s['hidden']}。例如 hidden=4096 配 heads=32")
    shape = T.model_params(s["layers"], s["hidden"], s["ffn"], s["gated"], s["vocab"], s["tied_embeddings"])
    s["params"] = shape if params is None else as_params(params, func=func)
    s["params_from_shape"] = params is None
    if (compute is None) == (peak_flops is None):
        raise ValueError(
            f"{func}() 需要 compute（一张卡算完整个全局 batch 的实测时间，如 \"120 s\"）或 peak_flops（每卡峰值 "
            f"FLOP/s，如 312e12，配合 mfu）二者之一，收到 compute={compute!r}，peak_flops={peak_flops!r}。"
        )
    s["compute_single"] = None if compute is None else as_time(compute, arg="compute", func=func).magnitude
    s["peak_flops"] = None if peak_flops is None else as_positive(peak_flops, arg="peak_flops", func=func)
    s["mfu"] = as_fraction(mfu, arg="mfu", func=func)
    if s["mfu"] == 0 or (s["compute_single"] is not None and s["compute_single"] == 0):
        raise ValueError(f"{func}() 的参数 mfu 与 compute 必须大于 0。例如 mfu=0.4")
    return s


def _split_error(s: dict, dp: int, tp: int, pp: int, mb: int) -> str:
    """Why this split is impossible for the model and batch, or ''."""
    if s["layers"] % pp:
        return f"pp={pp} 不能整除 layers={s['layers']}：每个流水线阶段要分到整数层。"
    if s["heads"] % tp:
        return f"tp={tp} 不能整除 heads={s['heads']}：每个 TP rank 要分到整数个注意力头。"
    if s["global_batch"] % (dp * mb):
        return (f"global_batch={s['global_batch']} 不是 dp×micro_batch={dp}×{mb} 的整数倍："
                "全局 batch 要保持不变，每个副本要分到整数个微批次。")
    return ""


def _core(s: dict, dp: int, tp: int, pp: int, stage: int, mb: int) -> dict:
    """Every number of one plan, in SI floats (the JavaScript twin computes the same)."""
    n = dp * tp * pp
    m = s["global_batch"] // (dp * mb)
    layers = s["layers"] // pp
    sp = s["sequence_parallel"] and tp > 1
    shard = s["params"] / (tp * pp)
    per_node, lat = s["devices_per_node"], s["latency"]
    bw = {"intra": s["intra_bw"], "inter": s["inter_bw"]}
    # memory
    p_st, g_st, o_st, states = T.zero_state(shard, dp, stage, s["param_bytes"], s["grad_bytes"], s["optim_bytes"])
    stored, working = T.activations(s["seq"], mb, s["hidden"], s["heads"], tp, sp, s["recompute"])
    flight = T.in_flight(pp, m, s["schedule"])
    acts = stored * layers * flight
    gather = 2 * T.layer_params(s["hidden"], s["ffn"], s["gated"]) / tp * s["param_bytes"] if stage == 3 and dp > 1 else 0.0
    total = states + acts + gather + working
    # communication
    comm = []
    dp_link = T.link(tp, dp, per_node)
    per_mb = m if stage == 3 else 1  # ZeRO-3 gathers and reduce-scatters for every microbatch
    for coll, what, sent in T.zero_collectives(shard, dp, stage, s["param_bytes"], s["grad_bytes"]):
        calls = layers * m if stage == 3 else 1
        sent *= per_mb
        t = T.alpha_beta(calls, T.rounds(coll, dp), lat, sent, bw[dp_link])
        comm.append((f"DP {coll}", what, "dp", dp, dp_link, calls, sent, t, True))
    if tp > 1:
        tp_link = T.link(1, tp, per_node)
        sent = T.tp_send(mb, s["seq"], s["hidden"], tp, layers) * m
        calls = 4 * layers * m
        name = "TP all-gather + reduce-scatter" if sp else "TP all-reduce"
        per_call = T.rounds("all-reduce", tp)
        comm.append((name, "激活", "tp", tp, tp_link, calls, sent, T.alpha_beta(calls, per_call, lat, sent, bw[tp_link]), False))
    if pp > 1:
        pp_link = T.link(tp * dp, pp, per_node)
        sent = 2 * m * mb * s["seq"] * s["hidden"] * T.ACT_BYTES / (tp if sp else 1)
        calls = 2 * m
        comm.append(("PP send/recv", "激活与其梯度", "pp", pp, pp_link, calls, sent,
                     T.alpha_beta(calls, 1, lat, sent, bw[pp_link]), False))
    # time
    model_flops, run_flops = T.train_flops(s["params"], s["global_batch"] * s["seq"], s["layers"], s["seq"],
                                           s["hidden"], s["recompute"])
    if s["compute_single"] is not None:
        ideal = s["compute_single"] / n
    else:
        ideal = model_flops / (n * s["peak_flops"] * s["mfu"])
    compute = ideal * run_flops / model_flops
    dp_time = sum(c[7] for c in comm if c[8])
    critical = sum(c[7] for c in comm if not c[8])
    tp_time = sum(c[7] for c in comm if c[2] == "tp")
    # Stages 0-2 reduce once per step, after the last microbatch: only its backward can hide them.
    window = compute if stage == 3 else compute / m
    hidden = T.hidden_behind_backward(window, n, dp_time, s["overlap"], s["backward_share"])
    bubble = T.bubble_over_ideal(pp, m) * (compute + tp_time)
    exposed = dp_time - hidden + critical
    step = compute + exposed + bubble
    return {
        "m": m, "param_state": p_st, "grad_state": g_st, "optim_state": o_st, "states": states,
        "activations": acts, "gather": gather, "working": working, "temporary": gather + working,
        "total": total, "in_flight": flight, "comm": comm, "compute": compute, "ideal": ideal,
        "hidden_comm": hidden, "exposed_comm": exposed, "bubble": bubble, "step": step,
        "tokens_per_s": s["global_batch"] * s["seq"] / step, "efficiency": ideal / step,
        "fits": total <= s["device_memory"],
    }


_B, _S = Q_(1.0, "B").units, Q_(1.0, "s").units
_PER_S = (1 / Q_(1.0, "s")).units


def _budget(s: dict, dp: int, tp: int, pp: int, stage: int, mb: int, c: dict) -> PlanBudget:
    mem = PlanMemory(
        *(Q_(c[k], _B) for k in ("param_state", "grad_state", "optim_state", "states", "activations", "gather",
                                 "working", "temporary", "total")),
        in_flight=c["in_flight"],
    )
    comm = tuple(Collective(name, what, group, ranks, lk, calls, Q_(sent, _B), Q_(t, _S), ov)
                 for name, what, group, ranks, lk, calls, sent, t, ov in c["comm"])
    return PlanBudget(
        settings=MappingProxyType(s), dp=dp, tp=tp, pp=pp, zero_stage=stage, micro_batch=mb, microbatches=c["m"], params=s["params"],
        memory=mem, comm=comm, compute=Q_(c["compute"], _S), ideal=Q_(c["ideal"], _S),
        hidden_comm=Q_(c["hidden_comm"], _S), exposed_comm=Q_(c["exposed_comm"], _S), bubble=Q_(c["bubble"], _S),
        step=Q_(c["step"], _S), tokens_per_s=Q_(c["tokens_per_s"], _PER_S), efficiency=c["efficiency"],
        fits=c["fits"],
    )


def plan_budget(*, dp=1, tp=1, pp=1, zero_stage=0, micro_batch=1, **kw) -> PlanBudget:
    """Memory, communication and step time of one plan.

    Model: ``layers``, ``hidden``, ``heads``, ``seq``, ``vocab`` (``ffn``
    default 4·hidden, ``gated`` for a SwiGLU MLP, ``tied_embeddings``;
    ``params`` overrides the count derived from the shape).  Batch:
    ``global_batch`` sequences per step, ``micro_batch`` per microbatch; the
    global batch stays fixed, so each replica runs global_batch/(dp·micro_batch)
    microbatches.  Plan: ``dp``, ``tp``, ``pp``, ``zero_stage`` (0-3),
    ``schedule`` ("gpipe" | "1f1b"), ``recompute`` ("none" | "selective" |
    "full"), ``sequence_parallel``.  Bytes per parameter: ``param_bytes``,
    ``grad_bytes``, ``optim_bytes``.  Cluster: ``devices_per_node``,
    ``device_memory``, ``intra_bw``, ``inter_bw`` (one-way effective bandwidth
    per device, bytes or bits with units: "25 GB/s", "200 Gb/s"), ``latency``
    (α per ring round).  Compute: ``compute`` (one device's measured compute
    for the whole global batch) or ``peak_flops`` and ``mfu``.  Overlap:
    ``overlap`` (share of DP traffic the schedule may overlap) and
    ``backward_share`` (the compute that can hide it, default 2/3).

    >>> b = plan_budget(**SHAPES["llama2-7b"], global_batch=64, dp=16, zero_stage=1, peak_flops=312e12)
    >>> b.fits, b.microbatches  # no recomputation: 104 GB of activations
    (False, 4)
    >>> plan_budget(**SHAPES["llama2-7b"], global_batch=64, dp=16, zero_stage=1, peak_flops=312e12,
    ...             recompute="selective").fits
    True
    """
    s = settings(**kw)
    dp = as_count(dp, arg="dp", func=FUNC)
    tp = as_count(tp, arg="tp", func=FUNC)
    pp = as_count(pp, arg="pp", func=FUNC)
    mb = as_count(micro_batch, arg="micro_batch", func=FUNC)
    if isinstance(zero_stage, bool) or zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"{FUNC}() 的参数 zero_stage 只能是 0、1、2、3，收到 {zero_stage!r}。例如 zero_stage=1")
    why = _split_error(s, dp, tp, pp, mb)
    if why:
        raise ValueError(f"{FUNC}() 的切分不可行：{why}")
    return _budget(s, dp, tp, pp, int(zero_stage), mb, _core(s, dp, tp, pp, int(zero_stage), mb))


@dataclass(frozen=True)
class PlanSearch:
    """Every split of ``devices`` that fits, fastest first; iterate or index it like a tuple.

    The search computes every number of every candidate; the fitting plans are
    wrapped into :class:`PlanBudget` (pint Quantities) when first read.
    """

    devices: int
    candidates: int  # splits that were possible for this model and batch
    found: tuple  # ((dp, tp, pp, zero_stage, micro_batch), numbers), fastest first
    settings: MappingProxyType

    @cached_property
    def plans(self) -> tuple:
        """PlanBudget, ordered by step time, then bytes sent, then memory."""
        return tuple(_budget(dict(self.settings), *split, c) for split, c in self.found)

    def __iter__(self):
        return iter(self.plans)

    def __len__(self) -> int:
        return len(self.found)

    def __getitem__(self, i):
        return self.plans[i]

    @property
    def best(self):
        return _budget(dict(self.settings), *self.found[0][0], self.found[0][1]) if self.found else None


splits = T.splits  # every possible split of a device count (planterms)


def search_plans(*, devices, **kw) -> PlanSearch:
    """Every (dp, tp, pp, zero_stage, micro_batch) split of ``devices`` that fits, by step time.

    Takes :func:`plan_budget`'s keywords except the split itself; ZeRO stages
    above 0 are tried only when dp > 1 (with one replica there is nothing to
    shard).  Ties on step time go to the plan that sends fewer bytes, then to
    the one that needs less memory, then to the smaller (dp, tp, pp, stage, micro_batch).
    """
    n = as_count(devices, arg="devices", func="search_plans")
    for k in ("dp", "tp", "pp", "zero_stage", "micro_batch"):
        if k in kw:
            raise ValueError(f"search_plans() 自己枚举 {k}，不要传入它；其余参数与 plan_budget() 相同。")
    s = settings(**kw, func="search_plans")
    found, count = [], 0
    for split in T.splits(s, n):
        count += 1
        c = _core(s, *split)
        if c["fits"]:
            found.append(((c["step"], sum(x[6] for x in c["comm"]), c["total"], split), split, c))
    found.sort(key=lambda x: x[0])
    return PlanSearch(n, count, tuple((split, c) for _, split, c in found), MappingProxyType(s))
