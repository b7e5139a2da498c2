"""The Chinese verdict and assumptions of a plan (:class:`.plan.PlanBudget`).

The verdict answers the lesson's acceptance questions for this plan: does it
fit, is the global batch unchanged, in which unit were the bandwidths read,
which times overlap, which links the groups use, and what costs the most
besides compute.  ``verdict_codes`` names the same reasons without numbers,
so the in-page JavaScript can be checked against Python by code.
"""

from __future__ import annotations

from .units import Q_, fmt, fmt_percent

LINK_ZH = {"intra": "节点内链路", "inter": "跨节点链路"}
GROUP_ZH = {"dp": "DP", "tp": "TP", "pp": "PP"}


def _t(x) -> str:
    """A time in ms below one second, in s above."""
    return fmt(x, "s" if x.to("s").magnitude >= 1 else "ms", digits=3)


def overheads(b) -> dict:
    """Seconds of each overhead on the step besides compute."""
    out = {"dp": b.exposed_comm.magnitude - sum(c.time.magnitude for c in b.comm if not c.overlappable),
           "tp": sum(c.time.magnitude for c in b.comm if c.group == "tp"),
           "pp": sum(c.time.magnitude for c in b.comm if c.group == "pp"),
           "bubble": b.bubble.magnitude}
    return {k: max(v, 0.0) for k, v in out.items()}


def verdict_codes(b) -> tuple:
    """Reason codes: fits/too_big, batch, units, overlap, tp_inter?, dominant overhead."""
    codes = ["fits" if b.fits else "too_big", "batch", "units", "overlap"]
    if b.tp > 1 and any(c.group == "tp" and c.link == "inter" for c in b.comm):
        codes.append("tp_inter")
    worst = max(overheads(b).items(), key=lambda kv: kv[1])
    codes.append(f"worst_{worst[0]}" if worst[1] > 0 else "worst_none")
    return tuple(codes)


def verdict(b) -> tuple:
    """The reasons, one Chinese sentence each, in the order of :func:`verdict_codes`."""
    s, m = b.settings, b.memory
    mem = Q_(s["device_memory"], "B")
    out = []
    for code in verdict_codes(b):
        if code == "fits":
            out.append(f"放得下：每卡 {fmt(m.total)} ≤ 显存 {fmt(mem)}（模型状态 {fmt(m.states)}，"
                       f"激活 {fmt(m.activations)}，临时 {fmt(m.temporary)}）。")
        elif code == "too_big":
            out.append(f"放不下：每卡 {fmt(m.total)} > 显存 {fmt(mem)}（模型状态 {fmt(m.states)}，"
                       f"激活 {fmt(m.activations)}，临时 {fmt(m.temporary)}）。")
        elif code == "batch":
            out.append(f"全局 batch 不变：{s['global_batch']} = dp {b.dp} × micro_batch {b.micro_batch} × "
                       f"微批次数 {b.microbatches}。")
        elif code == "units":
            intra, inter = Q_(s["intra_bw"], "B/s"), Q_(s["inter_bw"], "B/s")
            out.append(f"带宽按字节读：节点内 {fmt(intra)}（= {fmt(intra, 'Gb/s', 4)}），"
                       f"跨节点 {fmt(inter)}（= {fmt(inter, 'Gb/s', 4)}）。")
        elif code == "overlap":
            dp_comm = sum((c.time for c in b.comm if c.overlappable), Q_(0.0, "s"))
            out.append(f"重叠：DP/ZeRO 通信 {_t(dp_comm)} 中有 {_t(b.hidden_comm)} 藏在反向计算之后；"
                       f"TP、PP 通信和气泡 {_t(b.bubble)} 都不重叠。")
        elif code == "tp_inter":
            out.append(f"TP={b.tp} 超出一个节点（每节点 {s['devices_per_node']} 卡），"
                       "每层的 TP 通信只能走跨节点链路。")
        elif code == "worst_none":
            out.append(f"步时 {_t(b.step)} 全是计算（效率 {fmt_percent(b.efficiency)}）。")
        else:
            key = code[len("worst_"):]
            name = {"dp": "暴露的 DP/ZeRO 通信", "tp": "TP 通信", "pp": "PP 点对点通信", "bubble": "流水线气泡"}[key]
            out.append(f"步时 {_t(b.step)}：计算 {_t(b.compute)}，最大的额外开销是{name} "
                       f"{_t(Q_(overheads(b)[key], 's'))}；效率 {fmt_percent(b.efficiency)}。")
    return tuple(out)


def assumptions(b) -> tuple:
    """What the numbers of this plan leave out or simplify."""
    s = b.settings
    shape = "由模型形状推出" if s["params_from_shape"] else "按给定值"
    compute = ("按一张卡实测的整步计算时间均分到所有卡" if s["compute_single"] is not None
               else f"按每卡峰值 {s['peak_flops']:.3g} FLOP/s × MFU {fmt_percent(s['mfu'])} 估算")
    return (
        f"参数量 {b.params:.4g} {shape}；TP×PP 均分参数，嵌入层也一样切分。",
        "激活按 Korthikanti 等（2022）的每层公式：16 位激活、MLP 宽 4h，不含嵌入与输出 logits。",
        f"流水线调度 {s['schedule']}：第一阶段同时保存 {b.memory.in_flight} 个微批次的激活。",
        "ZeRO-3 的临时聚合按两层完整参数（正在用的一层 + 预取的一层）计；通信缓冲与碎片不计。",
        "通信用理想 ring 与 α-β 模型：每轮延迟 α 加上每卡发送量除以单向有效带宽；跨节点的 ring 按最慢链路计。",
        f"设备编号 TP 最内、DP 其次、PP 最外；每节点 {s['devices_per_node']} 卡。",
        f"只有 DP/ZeRO 通信能藏在反向之后（反向占计算的 {fmt_percent(s['backward_share'])}，"
        f"调度允许重叠 {fmt_percent(s['overlap'])}）；DDP 与 ZeRO-1/2 每步归约一次，只能藏在最后一个微批次的反向后，"
        "ZeRO-3 每个微批次都重新聚合参数；TP、PP 通信在关键路径上。",
        f"计算时间{compute}；前向 2P+4·L·s·h FLOPs/词元，反向为前向两倍；重算另加。",
        "气泡 = (p−1)/m × 一个阶段的计算与 TP 通信；GPipe 与 1F1B 气泡相同，只是激活显存不同。",
    )
