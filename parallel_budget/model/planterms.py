"""The terms of a parallel plan's budget, in plain floats (SI units), for :mod:`.plan`.

Every term calls the module that owns its formula; this module only decides
which formula applies to which group of devices and adds them up.  The calls
are cached: a search over every split of 64 devices evaluates a few thousand
candidates but only a few hundred distinct (stage, degree) combinations.

Devices are numbered with tensor parallel innermost, then data parallel, then
pipeline parallel (Megatron-LM's default order).  A group of ``size`` devices
``stride`` apart stays inside a node when ``stride * size`` divides the devices
per node; otherwise its ring crosses nodes and the inter-node link, the slowest
link of the ring, sets its time.

Time of a collective (α-β model): ``calls * rounds * latency + bytes / bandwidth``,
where ``bytes`` is what one device sends per step and ``rounds`` is 2(R-1) for a
ring all-reduce, R-1 for a reduce-scatter or an all-gather, 1 for a
point-to-point send.
"""

from __future__ import annotations

from functools import lru_cache

from .activations import layer_activation_bytes
from .communication import ring_send_factor
from .memory import zero_communication, zero_memory
from .parallelism import pipeline_bubble, pipeline_in_flight, tp_allreduce
from .steptime import BACKWARD_SHARE, step_time

ACT_BYTES = 2  # 16-bit activations, as in Korthikanti et al.


@lru_cache(maxsize=4096)
def zero_state(shard_params: float, dp: int, stage: int, p: float, g: float, o: float) -> tuple:
    """(param, grad, optimizer, total) bytes per device: memory.zero_memory."""
    z = zero_memory(shard_params, dp, stage, p, g, o)
    return tuple(float(q.to("B").magnitude) for q in (z.param_state, z.grad_state, z.optim_state, z.total))


@lru_cache(maxsize=4096)
def zero_collectives(shard_params: float, dp: int, stage: int, p: float, g: float) -> tuple:
    """((collective, what, bytes sent per device), ...) of one step: memory.zero_communication."""
    if dp == 1:
        return ()
    z = zero_communication(shard_params, dp, stage, p, g)
    return tuple((c, w, float(b.to("B").magnitude)) for c, w, b in z.collectives)


@lru_cache(maxsize=4096)
def in_flight(stages: int, microbatches: int, schedule: str) -> int:
    """Peak microbatches whose activations the first stage holds: parallelism.pipeline_in_flight."""
    return pipeline_in_flight(stages, microbatches, schedule).peak


@lru_cache(maxsize=4096)
def bubble_over_ideal(stages: int, microbatches: int) -> float:
    """(p-1)/m, the same for GPipe and 1F1B: parallelism.pipeline_bubble."""
    return pipeline_bubble(stages, microbatches).bubble_over_ideal


@lru_cache(maxsize=4096)
def tp_send(micro_batch: int, seq: int, hidden: int, tp: int, layers: int) -> float:
    """Bytes each TP rank sends for one microbatch through ``layers`` layers: parallelism.tp_allreduce."""
    r = tp_allreduce(micro_batch, seq, hidden, tp, layers, ACT_BYTES)
    return float(r.send_per_rank_per_step.to("B").magnitude)


@lru_cache(maxsize=4096)
def activations(seq: int, micro_batch: int, hidden: int, heads: int, tp: int, sp: bool, recompute: str) -> tuple:
    """(stored, working) bytes of one layer and microbatch: activations.layer_activation_bytes."""
    return layer_activation_bytes(seq, micro_batch, hidden, heads, tp, sp, recompute)


@lru_cache(maxsize=4096)
def hidden_behind_backward(compute: float, ranks: int, comm: float, overlap: float, backward_share: float) -> float:
    """Seconds of overlappable communication hidden behind backward: steptime.step_time."""
    if comm == 0:
        return 0.0
    s = step_time(compute * ranks, ranks, comm, overlap, backward_share)
    return float(s.hidden_comm.to("s").magnitude)


@lru_cache(maxsize=256)
def rounds(collective: str, ranks: int) -> int:
    """Ring rounds of one collective: 2(R-1) for all-reduce (ring_send_factor · R), R-1 otherwise."""
    if collective == "all-reduce":
        return round(ring_send_factor(ranks) * ranks)
    if collective == "send":
        return 1
    return ranks - 1


def alpha_beta(calls: float, rounds_per_call: int, latency: float, sent: float, bandwidth: float) -> float:
    """calls · rounds · α + bytes / β (seconds)."""
    return calls * rounds_per_call * latency + sent / bandwidth


def link(stride: int, size: int, per_node: int) -> str:
    """'intra' when a group of ``size`` devices ``stride`` apart stays in one node, else 'inter'."""
    span = stride * size
    return "intra" if size == 1 or (span <= per_node and per_node % span == 0) else "inter"


def layer_params(hidden: int, ffn: int, gated: bool) -> float:
    """Weights of one transformer layer: 4h² (Q, K, V, O) + 2 or 3 (gated) · h · ffn; norms and biases ignored."""
    return 4.0 * hidden * hidden + (3 if gated else 2) * hidden * ffn


def model_params(layers: int, hidden: int, ffn: int, gated: bool, vocab: int, tied: bool) -> float:
    """layers · layer_params + (1 or 2) · vocab · h (input embedding, and output head unless tied)."""
    return layers * layer_params(hidden, ffn, gated) + (1 if tied else 2) * vocab * hidden


def train_flops(params: float, tokens: float, layers: int, seq: int, hidden: int, recompute: str) -> tuple:
    """(model FLOPs, executed FLOPs) of one step.

    Forward: 2·P per token for the matrix multiplications plus 4·s·h per token
    and layer for attention scores and values (Narayanan et al. 2021, eq. 3
    without the vocabulary refinement); backward costs twice forward.
    Selective recomputation repeats the attention part of forward; full
    recomputation repeats the whole forward.
    """
    attention = 4.0 * layers * seq * hidden * tokens
    forward = 2.0 * params * tokens + attention
    model = 3 * forward
    extra = {"none": 0.0, "selective": attention, "full": forward}[recompute]
    return model, model + extra


def divisors(n: int) -> list:
    return [d for d in range(1, n + 1) if n % d == 0]


def splits(s: dict, devices: int):
    """Every possible (dp, tp, pp, zero_stage, micro_batch) of ``devices`` for these settings."""
    for tp in divisors(devices):
        if s["heads"] % tp:
            continue
        for pp in divisors(devices // tp):
            if s["layers"] % pp:
                continue
            dp = devices // (tp * pp)
            if s["global_batch"] % dp:
                continue
            for mb in divisors(s["global_batch"] // dp):
                for stage in (0, 1, 2, 3) if dp > 1 else (0,):
                    yield dp, tp, pp, stage, mb


def cache_clear() -> None:
    """Forget cached package calls (benchmarks measure a cold search with it)."""
    for f in (zero_state, zero_collectives, in_flight, bubble_over_ideal, tp_send, activations,
              hidden_behind_backward, rounds):
        f.cache_clear()
