"""Closed-form tests, before any timeline: when can DP communication hide behind compute, and could TP's?

Data parallel (DDP, ZeRO-1/2/3, FSDP).  The gradients (or ZeRO-3's gathered
parameters) of N parameters leave a device during the backward of a microbatch
of T tokens, which takes (FLOPs per parameter and token) · N · T / (peak · HFU)
seconds: 4 for a backward (2/3 of 6N per token), 6 with full recomputation
(8N per token: the forward runs again).  The collective sends
(bytes per parameter) · N / B, with B the group's bus bandwidth per device
(:func:`.planterms.group_bandwidth`).  N cancels, and the communication hides
when

    T  >  (peak · HFU / B) · (bytes sent per parameter) / (FLOPs per parameter and token).

Bytes sent per parameter: a ring all-reduce (DDP) sends 2(R−1)/R of the
gradient (2 bytes per parameter in 16 bits, 4 in fp32); a reduce-scatter
(ZeRO-1/2) half of that; ZeRO-3 all-gathers the parameters again for the
backward and reduce-scatters the gradients, (R−1)/R · (param + grad bytes).
With α, each call of m bytes costs rounds · α more: the bandwidth a bucket
really sees is m·share / (rounds·α + m·share/B), and the threshold grows by
that factor (``latency``, ``message``).  Attention FLOPs (4·s·h per token and
layer in forward) and the first and last bucket are left out: the criterion is
the rule of thumb the timeline refines (:mod:`.planstep`).

Tensor parallel (Megatron-LM).  A layer's forward on one device multiplies
(layer weights / t) by every token, 2 FLOPs each, and then all-reduces two
s·b·h activations over the t devices (2(t−1)/t of them sent, 2 bytes each).
Both grow with the tokens, so their ratio does not depend on the batch:
matmul / collective = (layer params / t) · B / (peak · HFU · 4(t−1)/t · h) in
the bandwidth limit.  Above 1 the collectives could hide behind the next
matmul if overlapped (Megatron-LM's ``--tp-comm-overlap``, Transformer
Engine's userbuffers); the plan model keeps them exposed, as Megatron-LM does
without that flag.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pint

from .planterms import group_bandwidth, layer_params, rounds, share, train_flops
from .units import Q_, as_bandwidth, as_bytes, as_count, as_fraction, as_positive, as_time

FUNC = "overlap_threshold"
#: FLOPs per parameter and token of the backward: 2/3 of 6N, or 6 with full recomputation (8N per token)
BACKWARD_FLOPS = {"none": 4.0, "selective": 4.0, "full": 6.0}


@dataclass(frozen=True)
class OverlapThreshold:
    """Tokens per microbatch and device above which the DP collectives of one backward can hide behind it."""

    tokens: float  # the threshold
    flops_per_byte: float  # peak · hfu / effective bandwidth
    bytes_per_param: float  # sent per parameter during that backward
    flops_per_param: float  # per parameter and token of that backward
    collective: str  # what is hidden: "all-reduce", "reduce-scatter", "all-gather + reduce-scatter"
    bandwidth: pint.Quantity  # the group's bus bandwidth per device
    effective_bandwidth: pint.Quantity  # after α per call (= bandwidth when latency is 0)

    def hides(self, tokens: float) -> bool:
        return tokens > self.tokens


def overlap_threshold(peak_flops, bandwidth, *, hfu=0.4, ranks=16, zero_stage=0, grad_bytes=2, param_bytes=2,
                      recompute="none", latency="0 s", message=None, attention=0.0) -> OverlapThreshold:
    """Tokens per microbatch per device above which DP communication hides behind the backward (see module doc).

    ``bandwidth``: the DP group's bus bandwidth per device (e.g. "200 GB/s": 8 devices per node, one 25 GB/s port
    each); ``latency``: α per ring round, with ``message`` the bytes of one call (the gradient bucket, or ZeRO-3's
    one layer of parameters); ``attention``: the backward's attention FLOPs per parameter and token, added to the
    4 (or 6) of its matrix multiplications (:func:`plan_threshold` passes 8·L·s·h/N, 12·L·s·h/N with recomputation).

    >>> round(overlap_threshold(312e12, "200 GB/s", ranks=16).tokens)
    585
    """
    f = FUNC
    peak = as_positive(peak_flops, arg="peak_flops", func=f)
    bw = as_bandwidth(bandwidth, arg="bandwidth", func=f).to("B/s").magnitude
    rate = as_fraction(hfu, arg="hfu", func=f)
    r = as_count(ranks, arg="ranks", func=f, minimum=2)
    if isinstance(zero_stage, bool) or zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"{f}() 的参数 zero_stage 只能是 0、1、2、3，收到 {zero_stage!r}。例如 zero_stage=0")
    if recompute not in BACKWARD_FLOPS:
        raise ValueError(f"{f}() 的参数 recompute 只能是 \"none\"、\"selective\"、\"full\"，收到 {recompute!r}。")
    if peak == 0 or rate == 0 or bw == 0:
        raise ValueError(f"{f}() 的 peak_flops、hfu、bandwidth 都必须大于 0。例如 overlap_threshold(312e12, \"200 GB/s\")")
    g = as_positive(grad_bytes, arg="grad_bytes", func=f)
    p = as_positive(param_bytes, arg="param_bytes", func=f)
    if zero_stage == 0:
        coll, sent, calls = "all-reduce", share("all-reduce", r) * g, (("all-reduce", g),)
    elif zero_stage < 3:
        coll, sent, calls = "reduce-scatter", share("reduce-scatter", r) * g, (("reduce-scatter", g),)
    else:
        coll = "all-gather + reduce-scatter"
        sent, calls = share("all-gather", r) * (p + g), (("all-gather", p), ("reduce-scatter", g))
    alpha = as_time(latency, arg="latency", func=f).magnitude
    eff = bw
    if alpha > 0:
        if message is None:
            raise ValueError(f"{f}() 给了 latency 就要给 message（一次调用的字节数，如梯度桶 \"25 MiB\"）。")
        m = as_bytes(message, arg="message", func=f).to("B").magnitude
        if m == 0:
            raise ValueError(f"{f}() 的参数 message 必须大于 0。例如 message=\"25 MiB\"")
        # per parameter: each call moves m/bytes parameters and pays rounds·α on top of its bytes
        busy = sum(rounds(c, r) * alpha * b / m + share(c, r) * b / bw for c, b in calls)
        eff = sent / busy
    ratio = peak * rate / eff
    fpp = BACKWARD_FLOPS[recompute] + as_positive(attention, arg="attention", func=f, allow_zero=True)
    return OverlapThreshold(ratio * sent / fpp, ratio, sent, fpp, coll, Q_(bw, "B/s"), Q_(eff, "B/s"))


@dataclass(frozen=True)
class TpOverlap:
    """A layer's matmul time over its TP collectives' time (forward; backward has twice both)."""

    ratio: float  # > 1: the collectives could hide behind the matmuls if overlapped
    matmul: pint.Quantity  # per layer, microbatch and device
    collective: pint.Quantity
    exposed_in_model: bool = True  # the plan model keeps TP exposed (Megatron-LM without --tp-comm-overlap)


def tp_overlap(hidden, tp, peak_flops, bandwidth, *, hfu=0.4, ffn=None, gated=False, kv_ratio=1.0, tokens=4096,
               latency="0 s") -> TpOverlap:
    """Matmul time of one layer's forward on one device over its two TP all-reduces (see module doc).

    >>> round(tp_overlap(4096, 8, 312e12, "300 GB/s", ffn=11008, gated=True).ratio, 1)
    4.2
    """
    f = "tp_overlap"
    h = as_count(hidden, arg="hidden", func=f)
    t = as_count(tp, arg="tp", func=f, minimum=2)
    peak = as_positive(peak_flops, arg="peak_flops", func=f) * as_fraction(hfu, arg="hfu", func=f)
    bw = as_bandwidth(bandwidth, arg="bandwidth", func=f).to("B/s").magnitude
    if peak == 0 or bw == 0:
        raise ValueError(f"{f}() 的 peak_flops、hfu、bandwidth 都必须大于 0。")
    n = as_count(tokens, arg="tokens", func=f)
    width = 4 * h if ffn is None else as_count(ffn, arg="ffn", func=f)
    mm = 2.0 * layer_params(h, width, gated, kv_ratio) / t * n / peak
    one = rounds("all-reduce", t) * as_time(latency, arg="latency", func=f).magnitude + \
        share("all-reduce", t) * n * h * 2 / bw
    return TpOverlap(mm / (2 * one), Q_(mm, "s"), Q_(2 * one, "s"))


def plan_threshold(b, seq=None) -> OverlapThreshold:
    """:func:`overlap_threshold` for a plan (:class:`.plan.PlanBudget`): its DP group, link or fit, buckets, compute.

    The message is the plan's gradient bucket (DDP, ZeRO-1/2) or one layer's gradients (ZeRO-3); with a measured
    ``compute`` the rate is the model's FLOPs over it (hfu 1).  The backward's attention FLOPs are counted at the
    plan's sequence length (or ``seq``): 8·L·s·h per token, 12·L·s·h when recomputation repeats the attention.
    """
    s = b.settings
    seq = s["seq"] if seq is None else seq
    attention = (8.0 if s["recompute"] == "none" else 12.0) * s["layers"] * seq * s["hidden"] / s["params"]
    fit = s["dp_fit"]
    bw = fit[3] if fit else group_bandwidth(b.tp, b.dp, s["devices_per_node"], s["intra_bw"], s["inter_bw"])
    lat = fit[2] if fit else s["latency"]
    grads = s["params"] / (b.tp * b.pp) * s["grad_bytes"] / b.virtual_stages
    msg = grads / math.ceil(grads / s["bucket"]) if b.zero_stage < 3 else grads * b.virtual_stages / s["layers"]
    peak, hfu = s["peak_flops"], s["hfu"]
    if peak is None:
        model, _, _ = train_flops(s["params"], s["global_batch"] * s["seq"], s["layers"], s["seq"], s["hidden"], "none")
        peak, hfu = model / s["compute_single"], 1.0
    return overlap_threshold(peak, bw, hfu=hfu, ranks=max(b.dp, 2), zero_stage=b.zero_stage,
                             grad_bytes=s["grad_bytes"], param_bytes=s["param_bytes"], recompute=s["recompute"],
                             latency=lat, message=msg, attention=attention)
