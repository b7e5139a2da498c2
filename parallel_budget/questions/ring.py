"""Chapter 2 (ring-allreduce) and the lesson's exercises 1 and 2: traffic, lower bound, step time."""

from __future__ import annotations

from .builders import make
from .core import Param

CHAPTER = "ring-allreduce"
RANKS = (2, 4, 8, 16, 32)
GRAD = (0.5, 1, 2, 4, 8)
BW = (10, 12.5, 25, 50, 100)
COMPUTE = (300, 400, 600, 800, 1200)
ASSUME = "按理想 ring all-reduce 计（忽略启动延迟，带宽是单向有效带宽，GB 为十进制）。"
SEND = "每 rank 发送 2(R−1)/R × G = {factor|} × {grad} = {answer|GB}；接收同样多，但与发送同时进行，不再另加。"
BOUND = "每 rank 发送 2(R−1)/R × G = {send|GB}，下界 = 发送量 / 单向带宽 = {send|GB} / {bw} = {answer|ms}。"


def _ring(ranks, grad, bw):
    return [Param("ranks", ranks, RANKS), Param("grad", grad, GRAD, "GB"), Param("bw", bw, BW, "GB/s")]


def _exercise(n, which, ranks, grad, bw, source):
    # each exercise has its own names (NB02 parts A and B): no part passes on another part's values
    answer = f"ex{n}_send_per_rank_GB" if which == "send" else f"ex{n}_lower_bound_ms"
    what = "每个 rank 发送多少数据？" if which == "send" else "传输时间的下界是多少？"
    return make(f"ring.ex{n}_{which}", "exercises", source, answer,
                "ring_send" if which == "send" else "ring_bound", _ring(ranks, grad, bw),
                "{ranks} 个 rank，每个 rank 有 {grad} 梯度，单向有效带宽 {bw}。" + ASSUME + what + f"（变量 {answer}）",
                SEND if which == "send" else BOUND)


STEP = [Param("compute", 600, COMPUTE, "ms"), Param("ranks", 8, (2, 4, 8, 16)), Param("grad", 1, (0.5, 1, 2, 4), "GB"),
        Param("bw", 25, (12.5, 25, 50), "GB/s")]  # 100 GB/s: NB02 D's 10 ms last bucket could exceed all comm
STEP_TEXT = ("固定全局 batch：一张卡算完一步要 {compute}，换成 {ranks} 张卡后计算平均分摊。梯度共 {grad}，"
             "用 ring all-reduce 在 {bw} 的单向有效带宽上同步，通信与计算完全不重叠。")
STEP_SOLUTION = "每卡计算 {compute} / {ranks} = {per|ms}，通信下界 {comm|ms}，步时 = {per|ms} + {comm|ms} = {step|ms}"
SPEEDUP = STEP_SOLUTION + "；加速比 = {compute} / {step|ms} = {speedup|}"

QUESTIONS = (
    _exercise(1, "send", 4, 2, 12.5, "练习 1 / NB02 第 A 部分"),
    _exercise(1, "bound", 4, 2, 12.5, "练习 1 / NB02 第 A 部分"),
    _exercise(2, "send", 8, 4, 50, "练习 2 / NB02 第 B 部分"),
    _exercise(2, "bound", 8, 4, 50, "练习 2 / NB02 第 B 部分"),
    make("ring.nb02_step", CHAPTER, "NB02 第 C 部分", "step_ms", "step", STEP,
         STEP_TEXT + "一步要多久？（变量 step_ms）", STEP_SOLUTION + "。",
         fixed={"what": "step"}),
    make("ring.nb02_speedup", CHAPTER, "NB02 第 C 部分", "speedup", "step", STEP,
         STEP_TEXT + "相对一张卡的加速比是多少？（变量 speedup，纯数字）",
         SPEEDUP + "。",
         fixed={"what": "speedup"}),
    make("ring.nb02_efficiency", CHAPTER, "NB02 第 C 部分", "efficiency", "step", STEP,
         STEP_TEXT + "并行效率是多少？（变量 efficiency，0 到 1 的小数或百分数）",
         SPEEDUP + "，效率 = 加速比 / {ranks} = {answer|%}。",
         kind="fraction", fixed={"what": "efficiency"}),
    make("ring.nb02_overlap", CHAPTER, "NB02 第 D 部分", "overlap_step_ms", "overlap_step",
         STEP + [Param("last", 10, (5, 10), "ms")],
         STEP_TEXT.replace("通信与计算完全不重叠。", "")
         + "打开梯度分桶：通信只能藏在反向传播（约占每卡计算的 2/3）后面，最后一个桶的 {last} 总是暴露，"
         "不计启动延迟。一步要多久？（变量 overlap_step_ms）",
         "每卡计算 {per|ms}，其中反向 {backward|ms}；通信 {comm|ms}。能藏住的是通信、反向、通信 − 最后一桶三者中最小的"
         "{hidden|ms}，步时 = {per|ms} + {comm|ms} − {hidden|ms} = {answer|ms}。"),
    make("ring.check_send", CHAPTER, "检查自己 1", "send_per_rank_GB", "ring_send",
         [Param("ranks", 2, RANKS), Param("grad", 2, GRAD, "GB")],
         "只有 {ranks} 个 rank、梯度 {grad} 时，用 ring all-reduce 每个 rank 要发送多少数据？（变量 send_per_rank_GB）",
         SEND),
    make("ring.check_factor", CHAPTER, "检查自己 2", "send_factor", "ring_factor",
         [Param("ranks", 64, (3, 5, 6, 12, 16, 24, 64, 128))],
         "{ranks} 个 rank 做 ring all-reduce 时，每 rank 的发送量是梯度大小的几倍？（变量 send_factor，纯数字）",
         "系数是 2(R−1)/R = 2 × ({ranks} − 1) / {ranks} = {answer|}:R 再大也不超过 2。", kind="number"),
    make("ring.check_full_overlap", CHAPTER, "检查自己 3", "full_overlap_step_ms", "full_overlap",
         [Param("compute", 400, COMPUTE, "ms"), Param("ranks", 4, (2, 4, 8)), Param("grad", 2, (1, 2, 4), "GB"),
          Param("bw", 25, (12.5, 25, 50), "GB/s")],
         "固定全局 batch，单卡一步算 {compute}，{ranks} 张卡，梯度 {grad}，单向有效带宽 {bw}。"
         "如果通信可以完全与反向重叠（可重叠比例为 1，反向约占计算的 2/3），步时是多少？（变量 full_overlap_step_ms）",
         "每卡计算 {per|ms}，反向 {backward|ms}，通信 {comm|ms}；藏住的最多是通信和反向中较小的 {hidden|ms}，"
         "步时 = {per|ms} + {comm|ms} − {hidden|ms} = {answer|ms}。"),
)
