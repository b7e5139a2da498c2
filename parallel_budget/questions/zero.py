"""Chapter 3 (zero-memory): resident model state per device, activations, ZeRO traffic."""

from __future__ import annotations

from .builders import make
from .core import Param

CHAPTER = "zero-memory"
PARAMS = (1, 1.3, 3, 7, 13)
DP = (2, 4, 8, 16)
STATE = "每个参数的常驻状态按混合精度 Adam 计：参数、梯度各 2 字节，优化器状态 12 字节。"
TABLE = "四行依次为 {z0|GB}、{z1|GB}、{z2|GB}、{z3|GB}（ZeRO-0 到 ZeRO-3）"

QUESTIONS = (
    make("zero.nb03_zero2", CHAPTER, "NB03 第 A 部分", "zero2_GB", "zero_state",
         [Param("params", 7, PARAMS, "× 10⁹"), Param("dp", 8, DP)],
         "一个 {params} 参数的模型，数据并行度 D = {dp}，使用 ZeRO-2。" + STATE
         + "每张卡常驻的模型状态是多少？（变量 zero2_GB）",
         "ZeRO-2 分片梯度和优化器状态，参数每卡一整份：(2 + (2 + 12) / D) × N = {answer|GB}。", fixed={"stage": 2}),
    make("zero.nb03_peak", CHAPTER, "NB03 第 B 部分", "peak_GB", "zero_peak",
         [Param("params", 7, PARAMS, "× 10⁹"), Param("dp", 8, DP), Param("act", 6, (2, 4, 6, 8, 12), "GB")],
         "同样是 {params} 参数、D = {dp}、ZeRO-2，" + STATE + "实测每张卡的激活峰值约 {act}。"
         "每张卡的“模型状态 + 激活”是多少？（变量 peak_GB，不计临时聚合）",
         "ZeRO-2 的常驻状态 {z2|GB}，加上不随 D 缩小的激活 {act}：{answer|GB}。", fixed={"stage": 2}),
    make("zero.nb03_smallest", CHAPTER, "NB03 第 B 部分", "smallest_stage", "smallest_stage",
         [Param("params", 7, PARAMS, "× 10⁹"), Param("dp", 8, DP), Param("act", 6, (2, 4, 6, 8), "GB"),
          Param("memory", 40, (24, 40, 80), "GB")],
         "{params} 参数、D = {dp}，" + STATE + "激活每卡 {act}，每张卡有 {memory} 显存。"
         "把激活算进去，能放下的最小 ZeRO 阶段是几？（变量 smallest_stage，整数 0–3；都放不下写 None）",
         TABLE + "；每行加上激活 {act} 后与 {memory} 比较，最小的放得下的阶段是 {answer|}（None 表示都放不下）。",
         kind="int", hint="逐个阶段算出常驻状态，再加上不随 D 分片的激活，和显存比较。"),
    make("zero.nb03_zero3_send", CHAPTER, "NB03 第 C 部分", "zero3_send_GB", "zero_send",
         [Param("params", 7, PARAMS, "× 10⁹"), Param("dp", 8, DP)],
         "{params} 参数、D = {dp}，参数和梯度都按 BF16（每个 2 字节）传输，集合通信按理想 ring 计。"
         "用 ZeRO-3 时，每张卡每一步一共要发送多少数据？（变量 zero3_send_GB）",
         "ZeRO-3 一步有三次集合通信：前向 all-gather 参数、反向再 all-gather 一次、reduce-scatter 梯度；"
         "每次每 rank 发送 (D−1)/D × 2N 字节，合计 {answer|GB}，是 DDP 的 {ddp|GB} 的 1.5 倍。", fixed={"stage": 3}),
    make("zero.check_stage", CHAPTER, "检查自己 1", "smallest_stage", "smallest_stage",
         [Param("params", 1, PARAMS, "× 10⁹"), Param("dp", 4, DP), Param("memory", 6, (4, 6, 8, 16, 24), "GB")],
         "{params} 参数、D = {dp}，" + STATE + "每张卡最多只能给模型状态留 {memory}。只看常驻状态，"
         "最低需要 ZeRO 的哪一阶段？（变量 smallest_stage，整数 0–3；都放不下写 None）",
         TABLE + "；第一个不超过 {memory} 的阶段是 {answer|}（None 表示哪一行都放不下）。", kind="int", fixed={"act": 0},
         hint="逐行算出每卡常驻状态，找第一个放得下的阶段。"),
    make("zero.check_z1", CHAPTER, "检查自己 2", "zero1_GB", "zero_state",
         [Param("params", 1, PARAMS, "× 10⁹"), Param("dp", 8, DP)],
         "{params} 参数、D = {dp}，" + STATE + "用 ZeRO-1 时每张卡常驻多少？（变量 zero1_GB）",
         "ZeRO-1 只分片优化器状态：(2 + 2 + 12 / D) × N = {answer|GB}；参数和梯度的 4 字节每参数不随 D 变小。",
         fixed={"stage": 1}),
    make("zero.check_z3", CHAPTER, "检查自己 2", "zero3_GB", "zero_state",
         [Param("params", 1, PARAMS, "× 10⁹"), Param("dp", 8, DP)],
         "{params} 参数、D = {dp}，" + STATE + "用 ZeRO-3 时每张卡常驻多少？（变量 zero3_GB）",
         "ZeRO-3 把 16 字节每参数全部分片：16 × N / D = {answer|GB}。", fixed={"stage": 3}),
)
