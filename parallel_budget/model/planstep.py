"""The events of one training step of a DP × TP × PP × ZeRO plan, scheduled as the frameworks do.

:func:`build` turns a :class:`StepSpec` (durations in seconds, from
:mod:`.plan`) into a :class:`.timeline.Timeline` of one data-parallel
replica's pipeline: p devices, one per stage, each with its compute, TP, DP
and point-to-point lanes.  Every DP replica and every TP rank does the same, so
these p devices stand for all of them.

* Compute: the forward (F) and backward (B) of each stage and microbatch, in
  the order of the pipeline schedule (:mod:`.schedule`); B includes the
  recomputed forward.  With p = 1 this is gradient accumulation: F, B, F, B, …
  The zero-bubble schedules split B into I (input gradient: the recomputed
  forward, if any, and ``b − w`` seconds; the next stage's gradient message and
  the TP collectives go with it) and W (weight gradient, ``w`` seconds, no
  collective, nobody waits for it); the gradient buckets fill during W.
* TP (Megatron-LM): after each F and B, its tensor-parallel collectives on the
  TP lane (two all-reduces per layer in forward, two in backward, the forward's
  two again under full recomputation; all-gathers and reduce-scatters of the
  same volume with sequence parallelism; Megatron-LM's extra all-gather of
  the sequence-sharded input for the weight gradients, overlapped with
  backward, is left out).  They sit between the layers' matrix
  multiplications, so compute waits for them.
* PP: each F's output goes to the next stage, each B's input gradient to the
  previous one, one message each, on the receiving device's lane for that link
  (none between two stages of one rank: ZB-V's turn, as torch's ``_add_send_recv``);
  the receiver's compute waits for it, the sender's does not (asynchronous send,
  as in torch.distributed.pipelining).
* DDP: one all-reduce of the gradients per step, in buckets, during the last
  microbatch's backward of each stage: bucket k is ready after k/K of that
  backward, so the buckets stream behind it and only the last one, ready when
  backward ends, is exposed (all of them when communication is the slower).
* ZeRO-1 (Megatron-LM's distributed optimizer): a reduce-scatter in the same
  buckets, then the optimizer step on the shard, then the all-gather of the
  updated parameters.  That all-gather needs the optimizer, which needs every
  gradient: it ends the step, exposed, unless ``overlap_param_gather``
  (Megatron-LM's ``--overlap-param-gather``) moves it to the start of the next
  step, where the first forward waits for each bucket before using it.
* ZeRO-2: gradients are sharded, so each microbatch's backward reduce-scatters
  its gradients (DeepSpeed), in buckets behind that backward; then as ZeRO-1.
* ZeRO-3 (FSDP, DeepSpeed stage 3): parameters are sharded, so each layer is
  all-gathered before its forward and again before its backward, with the next
  layer's all-gather issued when a layer starts (one layer of prefetch), and its
  gradients are reduce-scattered after its backward, for every microbatch.
* One DP lane per device: DP collectives run one at a time, in the order they
  are issued (their link is shared).  ``overlap_grad_reduce=False`` starts each
  gradient collective only after its backward and makes compute wait for it.
* Optimizer: a fused Adam step on the compute lane once every gradient of the
  device is reduced (HBM-bound, :func:`.planterms.optimizer_time`); ZeRO-1/2's
  parameter all-gather waits for it.
* PP messages: each boundary r → r+1 has its own duration (``boundary``): the
  node's link when both devices share a node, the network otherwise.
* Not modelled: data loading, kernels slowed down by
  communication running beside them, unequal stages.
"""

from __future__ import annotations

from dataclasses import dataclass

from .schedule import pipeline_order, stage_rank
from .timeline import COMPUTE, DP, NSTREAMS, PP_ACT, PP_GRAD, Timeline

#: Rows of the plan's communication table, in this order (index = row of the events).
ROWS = ("dp_allreduce", "dp_reduce_scatter", "dp_all_gather", "dp_all_gather_backward", "tp", "pp")
AR, RS, AG, AGB, TPR, PPR = range(len(ROWS))


@dataclass(frozen=True)
class StepSpec:
    """Everything the step's events need, in seconds (one device; one stage chunk and microbatch)."""

    schedule: str
    p: int  # pipeline ranks
    v: int  # stages (chunks) per rank
    m: int  # microbatches
    stage: int  # ZeRO stage (0: DDP)
    dp: bool  # more than one data-parallel replica
    layers: int  # layers per stage chunk
    f: float  # forward compute of one chunk and microbatch
    b: float  # backward compute (with recomputation) of one chunk and microbatch
    tf: float  # TP collectives of that forward
    tb: float  # TP collectives of that backward
    d: float  # one point-to-point message
    buckets: int  # gradient buckets per chunk (DDP, ZeRO-1/2)
    grad_bucket: float  # one bucket's all-reduce (DDP) or reduce-scatter (ZeRO-1/2)
    param_bucket: float  # one bucket's all-gather of updated parameters (ZeRO-1/2)
    layer_gather: float  # ZeRO-3: all-gather of one layer's parameters
    layer_scatter: float  # ZeRO-3: reduce-scatter of one layer's gradients
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = False
    optimizer: float = 0.0  # the optimizer step on this device's shard
    boundary: tuple = ()  # one point-to-point message from rank r to rank r+1 (mod p); empty: d everywhere
    w: float = 0.0  # zero-bubble schedules: the weight-gradient part (W) of b; the rest of b is I


def _zero3(sp: StepSpec, tl: Timeline) -> None:
    """ZeRO-3 on one device (no pipeline): per-layer gathers with one layer of prefetch, per-layer reduce-scatter."""
    put = tl.put
    n = sp.layers
    fl, bl, tfl, tbl, g, r = sp.f / n, sp.b / n, sp.tf / n, sp.tb / n, sp.layer_gather, sp.layer_scatter
    hold = 0.0  # compute may not start before this (blocking reduce-scatters)
    for j in range(sp.m):
        ready = put(0, DP, g, hold, row=AG, tag=("AG", 0, j))  # issued when the forward starts: exposed
        for layer in range(n):
            hold = put(0, COMPUTE, fl, max(ready, hold), row=TPR, tag=("F", layer, j), tp=tfl)
            if layer + 1 < n:  # prefetch: the next layer's gather is issued when this layer starts
                ready = put(0, DP, g, tl.last_start, row=AG, tag=("AG", layer + 1, j))
        ready = put(0, DP, g, hold, row=AGB, tag=("AGB", n - 1, j))
        for layer in range(n - 1, -1, -1):
            out = put(0, COMPUTE, bl, max(ready, hold), row=TPR, tag=("B", layer, j), tp=tbl)
            began = tl.last_start
            if layer:
                ready = put(0, DP, g, began, row=AGB, tag=("AGB", layer - 1, j))
            hold = out
            done = put(0, DP, r, out, row=RS, tag=("RS", layer, j))
            if not sp.overlap_grad_reduce:
                hold = done
    _optimizer(sp, tl, 0)


def _optimizer(sp: StepSpec, tl: Timeline, r: int) -> float:
    """The optimizer step of device r, after its compute and its gradients' reduction; returns its end."""
    if not sp.optimizer:
        return 0.0
    ready = tl.free[r * NSTREAMS + DP]
    return tl.put(r, COMPUTE, sp.optimizer, ready, row=-1, tag=("O", -1, -1))


def build(sp: StepSpec, keep=None) -> Timeline:
    """The step's events, each put after what it depends on (``keep``: store only that device's)."""
    p, v, m = sp.p, sp.v, sp.m
    tl = Timeline(p, keep)
    if sp.dp and sp.stage == 3:
        _zero3(sp, tl)
        return tl
    put = tl.put
    order = pipeline_order(sp.schedule, p, m, v)
    stages = p * v
    act = [-1.0] * (stages * m)  # arrival of stage k's input activation for microbatch j, at k*m + j
    grad = [-1.0] * (stages * m)
    hold = [0.0] * p  # compute may not start before this (blocking collectives)
    zero12 = sp.dp and sp.stage in (1, 2)
    k_b, f, b, tf, tb = sp.buckets, sp.f, sp.b, sp.tf, sp.tb
    msg = sp.boundary or (sp.d,) * p  # message from rank r to rank r+1 (mod p)
    gathered = {}
    if zero12 and sp.overlap_param_gather:  # the previous step's update, gathered while this step starts
        for r in range(p):
            for c in range(v):
                last = put(r, DP, k_b * sp.param_bucket, 0.0, row=AG, tag=("AG", c * p + r, -1))
                gathered[r, c] = (tl.last_start + sp.param_bucket, last)
    reduce_row, each_mb = (AR if sp.stage == 0 else RS), sp.stage == 2
    reduce_here = sp.dp and sp.stage < 3
    rank_of = [stage_rank(sp.schedule, p, k) for k in range(stages)]
    vee = sp.schedule == "zbv"

    def lane(src, dst, kind):
        """The receiver's lane for a message: one per link.  In ZB-V both arms use each link, so the lane is
        the direction (from the lower rank: PP_ACT, from the higher: PP_GRAD), each fed by one sender in order."""
        return (PP_ACT if src < dst else PP_GRAD) if vee else kind

    def hop(src, dst):
        """One message between neighbouring ranks: the link of boundary a → a+1 (mod p) that joins them."""
        return msg[src] if dst == (src + 1) % p else msg[dst]

    def reduce(r, k, j, began, out):
        """The gradient buckets of stage k, filled by the backward (or W) that ran from ``began`` to ``out``."""
        if reduce_here and (each_mb or j == m - 1):
            a = sp.grad_bucket
            if sp.overlap_grad_reduce:  # bucket q is ready after q/K of this backward
                put(r, DP, k_b * a, began + (out - began) / k_b, out + a, reduce_row, ("R", k, j))
            else:
                hold[r] = put(r, DP, k_b * a, out, 0.0, reduce_row, ("R", k, j))

    ptr = [0] * p
    left = sum(len(o) for o in order)
    sweep = list(range(p)) + list(range(p - 2, 0, -1))
    while left:
        moved = left
        for r in sweep:
            ops, i_op = order[r], ptr[r]
            while i_op < len(ops):
                k, kind, j = ops[i_op]
                if kind == "F":
                    ready = act[k * m + j] if k else 0.0
                    if ready < 0:
                        break
                    if ready < hold[r]:
                        ready = hold[r]
                    if j == 0 and gathered:  # wait for each bucket of the gathered parameters
                        first, last = gathered[r, k // p]
                        out = put(r, COMPUTE, f, max(ready, first), last + f / k_b, TPR, ("F", k, j), tf)
                    else:
                        out = put(r, COMPUTE, f, ready, 0.0, TPR, ("F", k, j), tf)
                    if k + 1 < stages:
                        nxt = rank_of[k + 1]
                        act[(k + 1) * m + j] = out if nxt == r else put(nxt, lane(r, nxt, PP_ACT), hop(r, nxt), out,
                                                                         0.0, PPR, ("P", k + 1, j))
                elif kind == "W":  # weight gradient: its own I came before it on this rank
                    out = put(r, COMPUTE, sp.w, hold[r], 0.0, TPR, ("W", k, j))
                    reduce(r, k, j, tl.last_start, out)
                else:  # "B", or "I" (input gradient) of a split backward
                    ready = grad[k * m + j] if k + 1 < stages else 0.0
                    if ready < 0:
                        break
                    split = kind == "I"
                    out = put(r, COMPUTE, b - sp.w if split else b, max(ready, hold[r]), 0.0, TPR, (kind, k, j), tb)
                    began = tl.last_start
                    if k:
                        prv = rank_of[k - 1]
                        grad[(k - 1) * m + j] = out if prv == r else put(prv, lane(r, prv, PP_GRAD), hop(r, prv), out,
                                                                         0.0, PPR, ("P", k - 1, j))
                    if not split:
                        reduce(r, k, j, began, out)
                i_op += 1
                left -= 1
            ptr[r] = i_op
        if left == moved:  # cannot happen for the schedules of .schedule
            raise RuntimeError("流水线调度出现了循环依赖")
    for r in range(p):
        done = _optimizer(sp, tl, r)
        if zero12 and not sp.overlap_param_gather:  # after the optimizer, which needs every reduce-scatter
            put(r, DP, v * k_b * sp.param_bucket, done, row=AG, tag=("AG", -1, -1))
    return tl
