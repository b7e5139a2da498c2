"""Activation memory of a transformer layer (Korthikanti et al. 2022).

"Reducing Activation Recomputation in Large Transformer Models" (Korthikanti,
Casper, Lym, McAfee, Andersch, Shoeybi, Catanzaro; MLSys 2023, arXiv:2205.05198)
counts the bytes one transformer layer keeps for backward, with 16-bit
activations, sequence length s, micro-batch b, hidden size h, a attention heads
and tensor-parallel degree t (their section 4 and Table 2):

=================================  ======================================
no parallelism                      s·b·h·(34 + 5·a·s/h)
tensor parallel                     s·b·h·(10 + 24/t + 5·a·s/(h·t))
tensor + sequence parallel          s·b·h·(34 + 5·a·s/h) / t
selective recomputation, TP         s·b·h·(10 + 24/t)
selective recomputation, TP + SP    34·s·b·h / t
full recomputation                  2·s·b·h  (only the layer input; / t with SP)
=================================  ======================================

The 34 assumes the paper's layer: an MLP of width 4h with GeLU and dropout,
fp16/bf16 activations and 1-byte dropout masks; a gated MLP or another width
changes it.  Embedding, final norm and output-logit activations are left out,
as in the paper's per-layer count.  Recomputation also needs a working set while
backward recomputes: one layer's attention core (5·a·s²·b/t bytes) for
selective, one whole layer's activations for full; :func:`activation_memory`
reports it separately as ``working``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pint

from .units import Q_, as_count, fmt

RECOMPUTE = ("none", "selective", "full")


def _recompute(value, func: str) -> str:
    key = str(value).lower() if isinstance(value, str) else value
    if key not in RECOMPUTE:
        raise ValueError(
            f"{func}() 的参数 recompute 只能是 \"none\"、\"selective\"、\"full\"，收到 {value!r}。"
            '例如 recompute="selective"'
        )
    return key


def layer_activation_bytes(seq: int, micro_batch: int, hidden: int, heads: int, tp: int = 1,
                           sequence_parallel: bool = False, recompute: str = "none") -> tuple:
    """(stored, working) bytes of one layer for one micro-batch, plain floats (Table 2 above).

    Arguments are already validated; :func:`activation_memory` is the checked,
    unit-carrying entry point.
    """
    s, b, h, a, t = float(seq), float(micro_batch), float(hidden), float(heads), float(tp)
    sbh = s * b * h
    core = 5 * a * s * s * b  # softmax, its dropout mask and output, attention over values
    sp = sequence_parallel and tp > 1
    if sp:
        full_layer = (34 * sbh + core) / t
    else:
        full_layer = sbh * (10 + 24 / t) + core / t
    if recompute == "none":
        return full_layer, 0.0
    if recompute == "selective":
        return full_layer - core / t, core / t
    return (2 * sbh / t if sp else 2 * sbh), full_layer


@dataclass(frozen=True)
class ActivationMemory:
    """Activation bytes of one transformer layer for one micro-batch (Korthikanti et al. 2022)."""

    seq: int
    micro_batch: int
    hidden: int
    heads: int
    tp: int
    sequence_parallel: bool
    recompute: str
    per_layer: pint.Quantity  # kept for backward
    working: pint.Quantity  # extra while one layer is recomputed (0 without recomputation)

    def __repr__(self) -> str:
        return (
            f"ActivationMemory(s={self.seq}, b={self.micro_batch}, h={self.hidden}, a={self.heads}, "
            f"tp={self.tp}, sequence_parallel={self.sequence_parallel}, recompute={self.recompute!r}: "
            f"per_layer={fmt(self.per_layer, 'MB', 4)}, working={fmt(self.working, 'MB', 4)})"
        )


def activation_memory(seq, micro_batch, hidden, heads, tp=1, sequence_parallel=False,
                      recompute="none") -> ActivationMemory:
    """Bytes one layer keeps for backward, per Korthikanti et al. 2022, Table 2.

    >>> fmt(activation_memory(2048, 1, 4096, 32).per_layer, "MB")
    '956 MB'
    >>> fmt(activation_memory(2048, 1, 4096, 32, recompute="full").per_layer, "MB")
    '16.8 MB'
    """
    func = "activation_memory"
    s = as_count(seq, arg="seq", func=func)
    b = as_count(micro_batch, arg="micro_batch", func=func)
    h = as_count(hidden, arg="hidden", func=func)
    a = as_count(heads, arg="heads", func=func)
    t = as_count(tp, arg="tp", func=func)
    if not isinstance(sequence_parallel, bool):
        raise ValueError(f"{func}() 的参数 sequence_parallel 只能是 True 或 False，收到 {sequence_parallel!r}。")
    r = _recompute(recompute, func)
    if h % a or a % t:
        raise ValueError(
            f"{func}() 的参数 heads={a} 要整除 hidden={h}，且能被 tp={t} 整除（每个 TP rank 分到整数个头）。"
        )
    stored, working = layer_activation_bytes(s, b, h, a, t, sequence_parallel, r)
    return ActivationMemory(s, b, h, a, t, sequence_parallel, r, Q_(stored, "B"), Q_(working, "B"))
