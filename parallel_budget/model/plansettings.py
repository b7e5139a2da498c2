"""The inputs of a plan, validated once: presets, model shape, batch, cluster, compute, overlap options.

:func:`settings` turns :func:`.plan.plan_budget`'s keywords (everything but the
split) into SI floats, ints and flags, with a Chinese message naming any bad
argument, what was given and what is accepted.  Presets (``model=``,
``cluster=``, :mod:`.presets`) fill in keywords first; the caller's override them.
"""

from __future__ import annotations

from . import planterms as T
from .activations import _recompute
from .calibration import as_fit
from .presets import preset
from .schedule import MULTI, SCHEDULES
from .units import as_bandwidth, as_bytes, as_count, as_fraction, as_params, as_positive, as_time

FUNC = "plan_budget"


def _bool(value, arg: str, func: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{func}() 的参数 {arg} 只能是 True 或 False，收到 {value!r}。例如 {arg}=True")
    return value


def _choice(value, arg: str, options, func: str) -> str:
    key = str(value).lower().replace("-", "") if isinstance(value, str) else value
    if key not in options:
        shown = "、".join(f'"{o}"' for o in options)
        raise ValueError(f"{func}() 的参数 {arg} 只能是 {shown}，收到 {value!r}。例如 {arg}=\"{options[1]}\"")
    return key


DEFAULTS = dict(
    params=None, ffn=None, kv_heads=None, gated=False, dropout=True, flash_attention=False, tied_embeddings=False,
    schedule="1f1b", virtual_stages=None, recompute="none", sequence_parallel=True, param_bytes=2, grad_bytes=None,
    optim_bytes=12, devices_per_node=8, device_memory="80 GiB", intra_bw="150 GB/s", inter_bw="25 GB/s",
    latency="5 us", bucket="25 MiB", compute=None, peak_flops=None, hfu=0.4, overlap_grad_reduce=True,
    overlap_param_gather=False,
    # third edition: terms that pull the bound down (kept last so other additions merge)
    grad_reduce_dtype="bf16", hbm_bw="2039 GB/s", optimizer_traffic=28, logits=True,
    # calibration (calibration.py): measured numbers in place of datasheet ones
    dp_nccl=None, tp_nccl=None, measured=(),
)
#: Bytes per gradient element held and reduced: Megatron-LM with --bf16 keeps fp32 main gradients and reduces them
#: in fp32 unless --grad-reduce-in-bf16; PyTorch DDP under AMP reduces fp32 gradients too.
GRAD_DTYPES = {"bf16": 2, "fp32": 4}
REQUIRED = ("layers", "hidden", "heads", "seq", "vocab", "global_batch")


def _inputs(kw: dict, func: str) -> dict:
    """Presets first, then the caller's keywords; unknown keywords are refused by name."""
    model, cluster = kw.pop("model", None), kw.pop("cluster", None)
    out = dict(DEFAULTS)
    for kind, name in (("model", model), ("cluster", cluster)):
        if name is not None:
            out.update(preset(kind, name, func))
    for k in kw:
        if k == "mfu":
            raise ValueError(f"{func}() 没有参数 mfu：计算速度的输入是 hfu（硬件 FLOPs 利用率，重算也按这个速度算，"
                             "见 Korthikanti 等 2022 第 5 节）；MFU 是结果，读 .mfu。例如 hfu=0.4")
        if k not in DEFAULTS and k not in REQUIRED:
            raise ValueError(f"{func}() 没有参数 {k}。可用的参数见 help({func})。")
    out.update(kw)
    missing = [k for k in REQUIRED if k not in out]
    if missing:
        raise ValueError(f"{func}() 缺少参数 {', '.join(missing)}：给出模型形状，或用预设，例如 model=\"llama2-7b\"。")
    return out


def _third(a: dict, func: str) -> dict:
    """Gradient precision, optimizer step (HBM traffic and bandwidth) and the logits switch."""
    dtype = _choice(a["grad_reduce_dtype"], "grad_reduce_dtype", tuple(GRAD_DTYPES), func)
    g = GRAD_DTYPES[dtype] if a["grad_bytes"] is None else as_positive(a["grad_bytes"], arg="grad_bytes", func=func)
    hbm = as_bandwidth(a["hbm_bw"], arg="hbm_bw", func=func).magnitude
    if hbm == 0:
        raise ValueError(f'{func}() 的参数 hbm_bw 必须大于 0。例如 hbm_bw="1555 GB/s"（A100 40GB 的显存带宽）')
    return {"grad_reduce_dtype": dtype, "grad_bytes": g, "hbm_bw": hbm,
            "optimizer_traffic": as_positive(a["optimizer_traffic"], arg="optimizer_traffic", func=func,
                                             allow_zero=True),
            "logits": _bool(a["logits"], "logits", func)}


def settings(func=FUNC, **kw) -> dict:
    """Validate everything but the split itself; SI floats (bytes, B/s, s, FLOP/s)."""
    a = _inputs(kw, func)
    cnt = {k: as_count(a[k], arg=k, func=func) for k in (*REQUIRED, "devices_per_node")}
    s = {**cnt,
         **{k: _bool(a[k], k, func) for k in ("gated", "dropout", "flash_attention", "tied_embeddings",
                                              "sequence_parallel", "overlap_grad_reduce", "overlap_param_gather")},
         "schedule": _choice(a["schedule"], "schedule", SCHEDULES, func),
         "recompute": _recompute(a["recompute"], func),
         "param_bytes": as_positive(a["param_bytes"], arg="param_bytes", func=func),
         "optim_bytes": as_positive(a["optim_bytes"], arg="optim_bytes", func=func, allow_zero=True),
         "device_memory": as_bytes(a["device_memory"], arg="device_memory", func=func).magnitude,
         "intra_bw": as_bandwidth(a["intra_bw"], arg="intra_bw", func=func).magnitude,
         "inter_bw": as_bandwidth(a["inter_bw"], arg="inter_bw", func=func).magnitude,
         "latency": as_time(a["latency"], arg="latency", func=func).magnitude,
         "bucket": as_bytes(a["bucket"], arg="bucket", func=func).magnitude,
         "hfu": as_fraction(a["hfu"], arg="hfu", func=func)}
    s.update(_third(a, func))
    s["ffn"] = 4 * s["hidden"] if a["ffn"] is None else as_count(a["ffn"], arg="ffn", func=func)
    s["kv_heads"] = s["heads"] if a["kv_heads"] is None else as_count(a["kv_heads"], arg="kv_heads", func=func)
    v = a["virtual_stages"]
    s["virtual_stages"] = (2 if s["schedule"] in MULTI else 1) if v is None else as_count(
        v, arg="virtual_stages", func=func)
    if s["schedule"] not in MULTI and s["virtual_stages"] != 1:
        raise ValueError(f"{func}() 的参数 virtual_stages={s['virtual_stages']} 只用于 schedule=\"interleaved\"、"
                         "\"interleaved_zb\" 或 \"zbv\"；"
                         f"{s['schedule']} 每个 rank 只有一个阶段。")
    for arg, example in (("intra_bw", '"150 GB/s"'), ("inter_bw", '"25 GB/s"'), ("device_memory", '"80 GiB"'),
                         ("bucket", '"25 MiB"')):
        if s[arg] == 0:
            raise ValueError(f"{func}() 的参数 {arg} 必须大于 0。例如 {arg}={example}")
    if s["hidden"] % s["heads"] or s["heads"] % s["kv_heads"]:
        raise ValueError(f"{func}() 的参数 heads={s['heads']} 必须整除 hidden={s['hidden']}，"
                         f"且能被 kv_heads={s['kv_heads']} 整除。例如 hidden=4096 配 heads=32")
    shape = T.model_params(s["layers"], s["hidden"], s["ffn"], s["gated"], s["vocab"], s["tied_embeddings"],
                           s["kv_heads"] / s["heads"])
    s["params"] = shape if a["params"] is None else as_params(a["params"], func=func)
    s["params_from_shape"] = a["params"] is None
    compute, peak = a["compute"], a["peak_flops"]
    if (compute is None) == (peak is None):
        raise ValueError(
            f"{func}() 需要 compute（一张卡算完整个全局 batch、不重算的实测时间，如 \"120 s\"）或 peak_flops（每卡峰值 "
            f"FLOP/s，如 312e12，配合 hfu）二者之一，收到 compute={compute!r}，peak_flops={peak!r}。"
            "也可以用集群预设，例如 cluster=\"a100-40gb\"。"
        )
    s["compute_single"] = None if compute is None else as_time(compute, arg="compute", func=func).magnitude
    s["peak_flops"] = None if peak is None else as_positive(peak, arg="peak_flops", func=func)
    if s["hfu"] == 0 or s["compute_single"] == 0:
        raise ValueError(f"{func}() 的参数 hfu 与 compute 必须大于 0。例如 hfu=0.4")
    s.update(_calibration(a, s, func))
    return s


#: inputs a user may mark as measured (``measured=("hfu", …)``); the nccl-tests fits mark themselves
MEASURABLE = ("hfu", "compute", "intra_bw", "inter_bw", "latency", "peak_flops", "device_memory", "dp_nccl", "tp_nccl")


def _calibration(a: dict, s: dict, func: str) -> dict:
    """Fitted α per ring round and bus bandwidth of the DP and TP groups (None: datasheet), and what was measured."""
    out = {}
    measured = a["measured"]
    if isinstance(measured, str) or not all(isinstance(m, str) for m in measured):
        raise ValueError(f"{func}() 的参数 measured 应是输入名的元组，例如 measured=(\"hfu\",)，收到 {measured!r}。")
    unknown = [m for m in measured if m not in MEASURABLE]
    if unknown:
        raise ValueError(f"{func}() 的参数 measured 里有 {unknown}：只能标 {'、'.join(MEASURABLE)}。")
    names = set(measured)
    for group in ("dp", "tp"):
        try:
            fit = as_fit(a[f"{group}_nccl"], f"{group}_nccl", func)
        except ValueError as e:
            raise ValueError(f"{func}() 的参数 {group}_nccl 不能用：{e}") from None
        out[f"{group}_fit"] = None if fit is None else (
            fit.collective, fit.ranks, fit.step_latency.to("s").magnitude, fit.bus_bandwidth.to("B/s").magnitude,
            fit.alpha.to("s").magnitude)
        if fit is not None:
            names.add(f"{group}_nccl")
    out["measured"] = tuple(m for m in MEASURABLE if m in names)
    return out
