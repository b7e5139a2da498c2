"""The Chinese verdict and assumptions of a plan (:class:`.plan.PlanBudget`).

The verdict answers the lesson's acceptance questions for this plan: does it
fit, is the global batch unchanged, in which unit were the bandwidths read,
what overlaps and what is exposed, which links the groups use, and what costs
the most besides compute.  ``verdict_codes`` names the same reasons without
numbers, so the in-page JavaScript can be checked against Python by code.
Every sentence is built from the same numbers, so none contradicts another:
efficiency is model compute over step time, and when nothing but compute is
on the step, the sentence says the missing share is recomputation.
"""

from __future__ import annotations

from .schedule import SPLIT
from .units import Q_, _trim, fmt, fmt_count, fmt_percent

LINK_ZH = {"intra": "节点内链路", "inter": "跨节点链路"}
WORST_ZH = {"dp": "暴露的 DP/ZeRO 通信", "tp": "TP 通信", "pp": "暴露的 PP 点对点通信", "bubble": "流水线气泡",
            "optimizer": "优化器步"}
SCHEDULE_ZH = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "交错式 1F1B", "interleaved_zb": "交错式零气泡（ZB-1P）",
               "zbv": "零气泡 ZB-V"}


def _t(x) -> str:
    """A time in ms below one second, in s above."""
    x = x if hasattr(x, "to") else Q_(x, "s")
    return fmt(x, "s" if x.to("s").magnitude >= 1 else "ms", digits=3)


def overheads(b) -> dict:
    """Seconds of each overhead on the step besides model compute (exposed communication by group, bubble, optimizer)."""
    out = {g: sum(c.exposed.magnitude for c in b.comm if c.group == g) for g in ("dp", "tp", "pp")}
    out["bubble"] = b.bubble.magnitude
    out["optimizer"] = b.optimizer.magnitude
    return out


def _gather(b):
    """The ZeRO-1/2 parameter all-gather row, when it ends the step exposed."""
    if b.zero_stage in (1, 2) and b.dp > 1 and not b.settings["overlap_param_gather"]:
        return next(c for c in b.comm if c.name == "DP all-gather")
    return None


def verdict_codes(b) -> tuple:
    """Reason codes: fits/too_big, batch, units, measured, overlap, tp_inter?, gather?, flops?, dominant overhead."""
    codes = ["fits" if b.fits else "too_big", "batch", "units", "measured", "overlap"]
    if b.tp > 1 and any(c.group == "tp" and c.link == "inter" for c in b.comm):
        codes.append("tp_inter")
    if _gather(b) is not None:
        codes.append("gather")
    if b.mfu is not None:
        codes.append("flops")
    worst = max(overheads(b).items(), key=lambda kv: kv[1])
    codes.append(f"worst_{worst[0]}" if worst[1] > 0 else "worst_none")
    return tuple(codes)


def _memory(b, verb: str, sign: str) -> str:
    m, mem = b.memory, Q_(b.settings["device_memory"], "B")
    return (f"{verb}：每卡 {fmt(m.total)} {sign} 显存 {fmt(mem)}（模型状态 {fmt(m.states)}，激活 {fmt(m.activations)}，"
            f"临时缓冲 {fmt(m.gather)}，重算工作区 {fmt(m.working)}"
            + (f"；最后一个阶段另有 logits {fmt(m.logits)}" if m.logits.magnitude else "") + "）。")


def _sentence(b, code: str) -> str:
    s = b.settings
    if code == "fits":
        return _memory(b, "放得下", "≤")
    if code == "too_big":
        return _memory(b, "放不下", ">")
    if code == "batch":
        return (f"全局 batch 不变：{s['global_batch']} = dp {b.dp} × micro_batch {b.micro_batch} × "
                f"微批次数 {b.microbatches}。")
    if code == "units":
        intra, inter = Q_(s["intra_bw"], "B/s"), Q_(s["inter_bw"], "B/s")
        return (f"带宽按字节读：节点内 {fmt(intra)}（= {fmt(intra, 'Gb/s', 4)}），"
                f"跨节点 {fmt(inter)}（= {fmt(inter, 'Gb/s', 4)}）；梯度按 {s['grad_reduce_dtype']} 归约"
                f"（每个 {s['grad_bytes']:g} 字节）。")
    if code == "measured":
        return _measured(b)
    if code == "overlap":
        o = overheads(b)
        total = sum(c.time.magnitude for c in b.comm)
        return (f"重叠：通信共 {_t(total)}，与计算重叠 {_t(b.hidden_comm)}，暴露 {_t(b.exposed_comm)}"
                f"（DP {_t(o['dp'])}，TP {_t(o['tp'])}，PP {_t(o['pp'])}）；气泡 {_t(b.bubble)}。")
    if code == "tp_inter":
        return f"TP={b.tp} 超出一个节点（每节点 {s['devices_per_node']} 卡），每层的 TP 通信只能走跨节点链路。"
    if code == "gather":
        g = _gather(b)
        return (f"ZeRO-{b.zero_stage} 更新后参数的 all-gather 要等优化器、优化器要等全部梯度，只能排在这一步最后："
                f"{_t(g.time)} 中暴露 {_t(g.exposed)}；overlap_param_gather=True 让它与下一步的前向重叠。")
    if code == "flops":
        return (f"MFU {fmt_percent(b.mfu)}（只计模型 FLOPs），HFU {fmt_percent(b.hfu)}（连重算一起计）；"
                f"输入的 hfu={s['hfu']:g} 是计算时的速度，通信和气泡把整步平均拉低。")
    recompute = b.compute.magnitude - b.ideal.magnitude - b.optimizer.magnitude
    if code == "worst_none":
        if s["recompute"] == "none":
            return f"步时 {_t(b.step)} 里没有暴露的通信和气泡，全是模型计算；效率 {fmt_percent(b.efficiency)}。"
        return (f"步时 {_t(b.step)} 里没有暴露的通信和气泡，全是计算：模型计算 {_t(b.ideal)}，重算 {_t(recompute)}；"
                f"效率 {fmt_percent(b.efficiency)} = 模型计算 ÷ 步时，差的部分就是重算。")
    key = code[len("worst_"):]
    again = "，".join(x for x in (f"重算 {_t(recompute)}" if s["recompute"] != "none" else "",
                                 f"优化器步 {_t(b.optimizer)}" if b.optimizer.magnitude else "") if x)
    again = f"（其中{again}）" if again else ""
    return (f"步时 {_t(b.step)}：计算 {_t(b.compute)}{again}，最大的额外开销是{WORST_ZH[key]} "
            f"{_t(overheads(b)[key])}；效率 {fmt_percent(b.efficiency)}。")


#: the inputs a user may have measured, in Chinese (plansettings.MEASURABLE)
MEASURED_ZH = {"hfu": "HFU", "compute": "单卡计算时间", "intra_bw": "节点内带宽", "inter_bw": "跨节点带宽",
               "latency": "每轮延迟 α", "peak_flops": "峰值 FLOP/s", "device_memory": "显存"}


def _measured(b) -> str:
    """Which numbers were measured (nccl-tests fits, inputs marked in ``measured``) and which are datasheet values."""
    s = b.settings
    got, sheet = [], []
    for g in ("dp", "tp"):
        fit = s[f"{g}_fit"]
        if fit is not None:
            coll, ranks, _, bw, alpha = fit
            got.append(f"{g.upper()} 组的 α 与带宽（nccl-tests，{ranks} 卡 {coll}：每次调用 "
                       f"{_trim(alpha * 1e6, 3)} µs，总线带宽 {fmt(Q_(bw, 'B/s'), 'GB/s', 3)}）")
    marked = set(s["measured"])
    fitted = s["dp_fit"] is not None and (s["tp_fit"] is not None or b.tp == 1) and b.pp == 1
    for key, zh in MEASURED_ZH.items():
        if key in marked:
            got.append(zh)
        elif key in ("intra_bw", "inter_bw", "latency") and fitted:
            continue  # every group's links come from the fits
        elif key == "compute" or (key in ("peak_flops", "hfu") and s["compute_single"] is not None):
            continue
        else:
            sheet.append(zh)
    if not got:
        return ("全部按数据手册与默认值，没有实测：" + "、".join(sheet) +
                "。用 nccl-tests 的输出（dp_nccl、tp_nccl）和一次实测步时（hfu_from_step）校准。")
    return "实测：" + "；".join(got) + ("。按数据手册：" + "、".join(sheet) + "。" if sheet else "。")


def verdict(b) -> tuple:
    """The reasons, one Chinese sentence each, in the order of :func:`verdict_codes`."""
    return tuple(_sentence(b, code) for code in verdict_codes(b))


def assumptions(b) -> tuple:
    """What the numbers of this plan leave out or simplify."""
    s = b.settings
    shape = "由模型形状推出" if s["params_from_shape"] else "按给定值"
    compute = ("按一张卡实测的整步计算时间均分到所有卡" if s["compute_single"] is not None
               else f"按每卡峰值 {s['peak_flops']:.3g} FLOP/s × HFU {fmt_percent(s['hfu'])} 估算（重算也按这个速度）")
    layer = "、".join(x for x in (
        "有 dropout" if s["dropout"] else "无 dropout",
        f"{'门控（SwiGLU）' if s['gated'] else ''} MLP 宽 {s['ffn']}".strip(),
        "FlashAttention（不存 s×s 矩阵）" if s["flash_attention"] else "注意力存 s×s 矩阵",
        f"{s['kv_heads']} 组 K、V 头" if s["kv_heads"] != s["heads"] else "",
    ) if x)
    sched = SCHEDULE_ZH[s["schedule"]] + (f"（每 rank {b.virtual_stages} 个虚拟阶段）" if b.virtual_stages > 1 else "")
    return (
        f"参数量 {fmt_count(b.params, 4)}，{shape}；TP×PP 均分参数，嵌入层也一样切分；计算也均分到各层。",
        f"激活按 Korthikanti 等（2022）的每层公式（16 位激活，{layer}）；"
        + ("最后一个流水线阶段另存一个微批次的 logits（16 位，加上交叉熵用的 fp32 副本，按 TP 切分词表），"
           if s["logits"] else "不计输出 logits，") + "不含嵌入层的激活。",
        f"流水线调度 {sched}：保存得最多的流水线 rank 峰值时保存 {b.memory.in_flight} 份（阶段×微批次）激活"
        + ("；反向拆成 I（输入梯度）与 W（权重梯度），各按不含重算的反向的一半计，重算归 I，激活一直保存到 W 算完。"
           if s["schedule"] in SPLIT and b.pp > 1 else "。"),
        "ZeRO-3 的临时缓冲按两层参数（正在用的一层 + 预取的一层）和一层未分片的梯度计；通信缓冲与碎片不计。",
        "通信用理想 ring 与 α-β 模型：每一步（ring 的一轮）延迟 α，加上每卡发送量除以带宽；跨节点的组每节点有 g 张卡就用 g 张网卡（NCCL 的几个 ring 从不同网卡出节点），带宽取节点内带宽与 g × 跨节点每卡带宽中较小的一个；点对点发送：节点内的阶段边界走节点内链路，跨节点的边界用一张网卡。",
        f"设备编号 TP 最内、DP 其次、PP 最外；每节点 {s['devices_per_node']} 卡。",
        f"时间线：DP 集合通信在自己的流上一次一个；梯度按 {fmt(Q_(s['bucket'], 'B'), 'MiB')} 的桶跟在反向后面归约"
        f"{'' if s['overlap_grad_reduce'] else '（已关闭重叠：反向结束后才归约，计算等它）'}；ZeRO-1/2 更新后参数的 "
        f"all-gather {'与下一步的前向重叠' if s['overlap_param_gather'] else '排在优化器之后、这一步的最后'}；"
        "ZeRO-3 每层聚合参数并预取一层；TP 通信夹在层内计算之间；PP 异步发送，接收方等待；读数取第一个流水线 rank。",
        f"计算时间{compute}；前向 2P+4·L·s·h FLOPs/词元，反向为前向两倍，重算另加；"
        f"优化器步按显存带宽计：每个要更新的参数读写 {s['optimizer_traffic']:g} 字节，"
        f"÷ {fmt(Q_(s['hbm_bw'], 'B/s'))}，排在梯度归约之后。",
        "气泡 = 第一个流水线 rank 既不计算、自己的通信也不在跑的时间，从时间线读出；"
        "各阶段等长、通信不计时，GPipe 与 1F1B 的气泡占整步的 (p−1)/(m+p−1)（即理想时间的 (p−1)/m），"
        "交错式 1F1B 占 (p−1)/(v·m+p−1)（理想时间的 (p−1)/(v·m)）；零气泡调度用 W 填空档，气泡更小，只从时间线读。",
    )
