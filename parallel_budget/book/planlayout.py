"""What the plan builder's three drawings show, as plain data: one layout, two renderers.

:func:`timeline_layout`, :func:`memory_layout` and :func:`scaling_layout` turn a
:class:`~parallel_budget.PlanBudget` (or a :class:`~parallel_budget.PlanScaling`)
into lanes, blocks and marks with their labels.  :mod:`.planfigures` draws them
with matplotlib for the chapter and JupyterLab; ``book/_static/calc/plantimeline.js``
(the timeline) and ``plan.js`` (memory, scaling) compute the same layouts and
``planview.js`` draws them as SVG, held to this module by ``tests/vectors/plan.json``
(:mod:`.plan_vectors`).  No formula here: only which events are shown, merged and
labelled.

Timeline: a lane per stream (compute, TP, DP, PP) for at most four pipeline
ranks (the first two and the last two), blocks for the events, and marks: the
exposed part of each collective (compute waits for it) and the idle time
(the bubble).  Consecutive blocks of one kind closer than 1/200 of the step are
merged when they belong to one microbatch (ZeRO-3's per-layer events); then a
block still shorter than 1/100 of the step joins the one before it (hundreds of
microbatches; a forward and a backward merged are drawn as computing): a drawing has at most a few hundred blocks
per lane, and the hover text gives the count and the total.  Marks shorter than
1/2000 of the step (under a pixel) are dropped; TP blocks are exposed as a whole
(compute waits for them), so the TP lane has no marks.
"""

from __future__ import annotations

from ..model.planstep import ROWS
from ..model.timeline import exposed_spans
from ..model.units import Q_, fmt

STREAM_ZH = {"compute": "计算", "tp": "TP", "dp": "DP", "pp": "PP"}
ROW_ZH = {"dp_allreduce": "DP all-reduce", "dp_reduce_scatter": "DP reduce-scatter", "dp_all_gather": "DP all-gather",
          "dp_all_gather_backward": "DP all-gather（反向）", "tp": "TP 集合通信", "pp": "PP 点对点"}
SHORT = {"dp_allreduce": "AR", "dp_reduce_scatter": "RS", "dp_all_gather": "AG", "dp_all_gather_backward": "AG"}
MERGE = 200  # blocks closer than step / MERGE (3 px of a 600-px drawing) merge
NARROW = 200  # a compute block shorter than step / NARROW joins the one before (a zero-bubble F, I or W is ~1 %)
MEMORY = (("param_state", "参数"), ("grad_state", "梯度"), ("optim_state", "优化器状态"), ("activations", "激活"),
          ("gather", "临时缓冲"), ("working", "重算工作区"))


def t_(seconds: float) -> str:
    """A duration as the builder prints it: ms below one second, s above."""
    return fmt(Q_(seconds, "s"), "s" if abs(seconds) >= 1 else "ms")


def shown_devices(p: int) -> list:
    return list(range(p)) if p <= 4 else [0, 1, p - 2, p - 1]


def _stream_of(row: int) -> str:
    name = ROWS[row]
    return name if name in ("tp", "pp") else "dp"


#: Compute blocks: forward, backward, and the zero-bubble schedules' two halves of a backward.
COMPUTE_ZH = {"F": "前向", "B": "反向", "I": "反向（输入梯度 I）", "W": "反向（权重梯度 W）"}


def _what(e, zero3: bool) -> tuple:
    """(kind, short label, hover text without duration) of one event."""
    kind, k, j = e.tag
    if e.stream == "compute" and kind == "O":
        return "O", "Opt", "优化器步"
    if e.stream == "compute":
        where = f"第 {k + 1} 层" if zero3 else f"阶段 {k}"
        return (kind if kind in ("F", "W") else "B", f"{kind}{j}", f"{COMPUTE_ZH[kind]} {where} 微批次 {j}")
    name = ROW_ZH[ROWS[e.row]]
    if e.stream.startswith("pp"):
        return "pp", "", f"{name}：阶段 {k} 收到微批次 {j} 的{'激活' if e.stream == 'pp_act' else '梯度'}"
    if e.stream == "tp":
        return "tp", "", f"{name}：微批次 {j}"
    return "dp", SHORT[ROWS[e.row]], f"{name}" + (f"：微批次 {j}" if j >= 0 else "")


def _merge(blocks: list, gap: float, narrow: float) -> list:
    """Merge consecutive [start, end, kind, label, what, count, busy] blocks closer than ``gap``: first those of
    one kind with the same label (one microbatch's layers), then, of what that gives, a block shorter than
    ``narrow`` into the one before it (then a forward merged with a backward becomes kind "C", computing)."""
    return _merge_pass(_merge_pass(blocks, gap, 0.0), gap, narrow)


def _merge_pass(blocks: list, gap: float, narrow: float) -> list:
    out = []
    for b in blocks:
        last = out[-1] if out else None
        alone = "O" in (last[2], b[2]) if last else False  # the optimizer step stays its own block
        if last and not alone and b[0] - last[1] <= gap and ((last[2] == b[2] and last[3] == b[3]) or
                                                              b[1] - b[0] < narrow):
            last[1] = max(last[1], b[1])
            last[5] += b[5]
            last[6] += b[6]
            if last[3] != b[3]:
                last[3] = ""
            if last[2] != b[2]:  # a backward's two halves (I, W) are still a backward
                last[2], last[4] = ("B", "反向") if {last[2], b[2]} <= {"B", "W"} else ("C", "前向与反向")
        else:
            out.append(list(b))
    return out


def _spans(spans: list, gap: float) -> list:
    out = []
    for s, e in spans:
        if out and s - out[-1][1] <= gap:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def timeline_layout(b) -> dict:
    """Lanes, blocks and marks of one step (seconds), from :attr:`PlanBudget.timeline`."""
    events = b.timeline
    step = b.step.magnitude
    gap, narrow, tiny = step / MERGE, step / NARROW, step / 2000
    zero3 = b.zero_stage == 3 and b.dp > 1
    lanes, blocks, marks = [], [], []
    by_device = {d: [] for d in shown_devices(b.pp)}
    for e in events:
        if e.device in by_device:
            by_device[e.device].append(e)
    for d, own in by_device.items():
        streams = ["compute"] + [s for s in ("tp", "dp", "pp") if any(e.stream.startswith(s) for e in own)]
        spans, idle = exposed_spans(own, d, step)
        for stream in streams:
            lane = len(lanes)
            label = f"rank {d} {STREAM_ZH[stream]}" if b.pp > 1 else STREAM_ZH[stream]
            lanes.append({"device": d, "stream": stream, "label": label})
            raw = []
            for e in sorted((e for e in own if e.stream.startswith(stream)), key=lambda e: (e.start, e.end)):
                kind, short, what = _what(e, zero3)
                raw.append([e.start, e.end, kind, short, what, 1, e.work])
            for s, e, kind, short, what, count, busy in _merge(raw, gap, narrow):
                title = f"{what}：{t_(busy)}" if count == 1 else f"{what} 等 {count} 段：共 {t_(busy)}"
                blocks.append({"lane": lane, "start": s, "end": e, "kind": kind, "label": short, "title": title})
            if stream == "compute":
                for s, e in _spans([x for x in idle if x[1] - x[0] > tiny], gap):
                    marks.append({"lane": lane, "start": s, "end": e, "kind": "idle", "title": f"等待（气泡）：{t_(e - s)}"})
            elif stream != "tp":  # TP blocks are exposed as a whole: compute waits for them
                mine = [(s, e) for s, e, r in spans if e - s > tiny and _stream_of(r) == stream]
                for s, e in _spans(mine, gap):
                    marks.append({"lane": lane, "start": s, "end": e, "kind": "exposed",
                                  "title": f"暴露的 {STREAM_ZH[stream]} 通信：{t_(e - s)}"})
    return {"step": step, "lanes": lanes, "blocks": blocks, "marks": marks}


def memory_layout(b) -> dict:
    """The memory bar: parts (key, label, bytes), their total and the device's memory."""
    m = b.memory
    parts = [{"key": k, "label": label, "bytes": getattr(m, k).magnitude} for k, label in MEMORY]
    # the logits: on the first rank when it is the last stage, else what the last stage holds beyond the first
    parts.append({"key": "logits", "label": "logits（最后一个阶段）",
                  "bytes": max(0.0, m.total.magnitude - sum(p["bytes"] for p in parts))})
    return {"parts": parts, "total": m.total.magnitude, "capacity": b.settings["device_memory"], "fits": b.fits}


def scaling_layout(sc) -> dict:
    """The scaling curve's points: x, devices, speedup, efficiency, fits."""
    return {"over": sc.over, "points": [{"x": p.x, "devices": p.devices, "speedup": p.speedup,
                                         "efficiency": p.efficiency, "fits": p.fits} for p in sc.points]}
