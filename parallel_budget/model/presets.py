"""Named models and clusters for the plan builder: ``plan_budget(model="llama2-7b", cluster="a100-40gb", …)``.

Models (public configurations; Touvron et al. 2023, "Llama 2", Table 1 and the
released ``config.json``): the shape, and the training options that change
activation memory (:mod:`.activations`).  Llama 2 has no dropout and a SwiGLU
MLP, and like Llama 1 it was trained with a memory-efficient attention kernel
that stores no s×s matrix (Touvron et al. 2023a, section 2.4: xformers, with
FlashAttention's backward), hence ``flash_attention=True``.  The 70B model uses
grouped-query attention with 8 key/value heads.

Clusters: one node of 8 SXM cards, nominal figures from NVIDIA's data sheets.
Bandwidths are one way per device: NVLink's total (both directions) halved, and
one InfiniBand port per device (400 Gb/s NDR on DGX H100, 200 Gb/s HDR on DGX
A100).  Peak is dense BF16 (without sparsity); ``hbm_bw`` is the
memory bandwidth of the card (1,555 GB/s for A100 40GB, 3.35 TB/s for H100 SXM),
which bounds the optimizer step (:func:`.planterms.optimizer_time`).  "80 GB" and "40 GB" cards hold
80 GiB and 40 GiB.  Measured effective bandwidth (nccl-tests' busbw) is lower:
replace these with your own measurements.
"""

from __future__ import annotations

MODELS = {
    "llama2-7b": {"layers": 32, "hidden": 4096, "heads": 32, "seq": 4096, "vocab": 32000, "ffn": 11008,
                  "gated": True, "dropout": False, "flash_attention": True},
    "llama2-70b": {"layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "seq": 4096, "vocab": 32000,
                   "ffn": 28672, "gated": True, "dropout": False, "flash_attention": True},
}
CLUSTERS = {
    "a100-40gb": {"devices_per_node": 8, "device_memory": "40 GiB", "intra_bw": "300 GB/s", "inter_bw": "25 GB/s",
                  "peak_flops": 312e12, "hbm_bw": "1555 GB/s"},
    "h100-80gb": {"devices_per_node": 8, "device_memory": "80 GiB", "intra_bw": "450 GB/s", "inter_bw": "50 GB/s",
                  "peak_flops": 989e12, "hbm_bw": "3.35 TB/s"},
}
PRESETS = {"model": MODELS, "cluster": CLUSTERS}


def preset(kind: str, name, func: str = "preset") -> dict:
    """The keywords of a named model (``kind="model"``) or cluster (``kind="cluster"``); a copy."""
    table = PRESETS.get(kind)
    if table is None:
        raise ValueError(f"{func}() 的预设种类只能是 \"model\" 或 \"cluster\"，收到 {kind!r}。")
    key = name.lower().strip() if isinstance(name, str) else name
    if key not in table:
        shown = "、".join(f'"{k}"' for k in table)
        raise ValueError(f"{func}() 的参数 {kind} 不认识 {name!r}。可用：{shown}。例如 {kind}=\"{next(iter(table))}\"")
    return dict(table[key])
