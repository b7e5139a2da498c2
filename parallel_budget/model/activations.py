"""Activation memory of a transformer layer (Korthikanti et al. 2022), with documented options.

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

The paper's layer (the defaults here) has dropout, an MLP of width 4h with GeLU
and multi-head attention that stores the s×s scores.  Term by term, in units of
s·b·h bytes:

* kept whole under TP (split by t only with sequence parallelism): the two
  norms' inputs (4), the QKV input (2), the MLP input (2), and one 1-byte dropout
  mask after attention and one after the MLP (2) -- together the paper's 10;
* split by t under TP: Q (2), K and V (4·kv_heads/heads, so 4 without grouped-query
  attention), the output projection's input (2) and the MLP inside: 2·f/h for the
  first matmul's output and 2·f/h for the GeLU output (16 when f = 4h) -- the 24;
* the attention core, split by t: softmax output (2·a·s/h), its dropout mask
  (a·s/h) and the dropout output (2·a·s/h) -- the 5·a·s/h.

Options (each documented where it changes a term):

* ``dropout=False``: no dropout masks (−2) and the softmax output is used
  directly, so the core keeps 2·a·s/h instead of 5·a·s/h;
* ``ffn`` and ``gated=True`` (SwiGLU): the gate and up projections' outputs
  (2·2·f/h) and their product, the down projection's input (2·f/h), i.e. 6·f/h,
  with the SiLU recomputed in backward as Megatron-LM's fused ``bias_swiglu``
  does (an unfused implementation also keeps silu(gate), 2·f/h more);
* ``flash_attention=True``: FlashAttention (Dao et al. 2022; Llama used the
  xformers kernel built on the same backward) stores no s×s matrix, only the
  softmax statistics, a·s·b fp32 values (4·a/h); its dropout mask is regenerated;
* ``kv_heads``: grouped-query attention keeps K and V for kv_heads heads only.

Selective recomputation drops the attention core (recomputed in backward);
full recomputation keeps only the layer input (2).  Embedding, final norm and
output-logit activations are left out, as in the paper's per-layer count.
Recomputation also needs a working set while backward recomputes: one layer's
attention core (/t) for selective, one whole layer's activations for full;
:func:`activation_memory` reports it separately as ``working``.
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


def layer_terms(seq, hidden, heads, ffn=None, gated=False, dropout=True, flash_attention=False, kv_heads=None) -> tuple:
    """(whole, split, core) coefficients of s·b·h bytes for one layer (see the module's table).

    ``whole`` stays whole under TP unless sequence parallel; ``split`` and ``core``
    are divided by t.  Plain floats; the arguments are already validated.
    """
    h = float(hidden)
    f = 4.0 * h if ffn is None else float(ffn)
    kv = heads if kv_heads is None else kv_heads
    whole = 8.0 + (2.0 if dropout else 0.0)
    split = 4.0 + 4.0 * kv / heads + (6.0 if gated else 4.0) * f / h
    if flash_attention:
        core = 4.0 * heads / h
    else:
        core = (5.0 if dropout else 2.0) * heads * seq / h
    return whole, split, core


def layer_activation_bytes(seq: int, micro_batch: int, hidden: int, heads: int, tp: int = 1,
                           sequence_parallel: bool = False, recompute: str = "none", ffn=None, gated=False,
                           dropout=True, flash_attention=False, kv_heads=None) -> tuple:
    """(stored, working) bytes of one layer for one micro-batch, plain floats (Table 2 above).

    Arguments are already validated; :func:`activation_memory` is the checked,
    unit-carrying entry point.
    """
    whole, split, core = layer_terms(seq, hidden, heads, ffn, gated, dropout, flash_attention, kv_heads)
    sbh = float(seq) * float(micro_batch) * float(hidden)
    t = float(tp)
    sp = sequence_parallel and tp > 1
    kept = sbh * (whole / t if sp else whole)
    full_layer = kept + sbh * (split + core) / t
    if recompute == "none":
        return full_layer, 0.0
    if recompute == "selective":
        return kept + sbh * split / t, sbh * core / t
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
    options: tuple = ()  # (name, value) of the options that differ from the paper's layer

    def __repr__(self) -> str:
        opts = "".join(f", {k}={v!r}" for k, v in self.options)
        return (
            f"ActivationMemory(s={self.seq}, b={self.micro_batch}, h={self.hidden}, a={self.heads}, "
            f"tp={self.tp}, sequence_parallel={self.sequence_parallel}, recompute={self.recompute!r}{opts}: "
            f"per_layer={fmt(self.per_layer, 'MB', 4)}, working={fmt(self.working, 'MB', 4)})"
        )


def _flag(value, arg: str, func: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{func}() 的参数 {arg} 只能是 True 或 False，收到 {value!r}。例如 {arg}=False")
    return value


def activation_memory(seq, micro_batch, hidden, heads, tp=1, sequence_parallel=False, recompute="none", *,
                      ffn=None, gated=False, dropout=True, flash_attention=False, kv_heads=None) -> ActivationMemory:
    """Bytes one layer keeps for backward, per Korthikanti et al. 2022, Table 2, with the module's options.

    >>> fmt(activation_memory(2048, 1, 4096, 32).per_layer, "MB")
    '956 MB'
    >>> fmt(activation_memory(2048, 1, 4096, 32, recompute="full").per_layer, "MB")
    '16.8 MB'
    >>> fmt(activation_memory(4096, 1, 4096, 32, ffn=11008, gated=True, dropout=False,
    ...                       flash_attention=True).per_layer, "MB")  # Llama 2 7B's layer
    '539 MB'
    """
    func = "activation_memory"
    s = as_count(seq, arg="seq", func=func)
    b = as_count(micro_batch, arg="micro_batch", func=func)
    h = as_count(hidden, arg="hidden", func=func)
    a = as_count(heads, arg="heads", func=func)
    t = as_count(tp, arg="tp", func=func)
    _flag(sequence_parallel, "sequence_parallel", func)
    r = _recompute(recompute, func)
    f = None if ffn is None else as_count(ffn, arg="ffn", func=func)
    kv = a if kv_heads is None else as_count(kv_heads, arg="kv_heads", func=func)
    opts = {"gated": _flag(gated, "gated", func), "dropout": _flag(dropout, "dropout", func),
            "flash_attention": _flag(flash_attention, "flash_attention", func)}
    if h % a or a % t:
        raise ValueError(
            f"{func}() 的参数 heads={a} 要整除 hidden={h}，且能被 tp={t} 整除（每个 TP rank 分到整数个头）。"
        )
    if a % kv:
        raise ValueError(f"{func}() 的参数 kv_heads={kv} 要整除 heads={a}（每组查询头共享一组 K、V）。")
    stored, working = layer_activation_bytes(s, b, h, a, t, sequence_parallel, r, f, kv_heads=kv, **opts)
    shown = tuple((k, v) for k, v, default in (("ffn", f, None), ("gated", opts["gated"], False),
                                               ("dropout", opts["dropout"], True),
                                               ("flash_attention", opts["flash_attention"], False),
                                               ("kv_heads", kv_heads, None)) if v != default)
    return ActivationMemory(s, b, h, a, t, sequence_parallel, r, Q_(stored, "B"), Q_(working, "B"), shown)
