"""Chapter 4 (tp-pp): the pipeline bubble and tensor-parallel traffic."""

from __future__ import annotations

from .builders import make
from .core import Param

CHAPTER = "tp-pp"
STAGES = (2, 4, 8, 16)
MICRO = (4, 8, 16, 24, 32, 64)
TP = dict(batch=(1, 2, 4, 8), seq=(1024, 2048, 4096), hidden=(2048, 4096, 5120, 8192))
BUBBLE = "各阶段处理一个微批次的时间相同"


def _tp(batch, seq, hidden):
    return [Param(k, v, TP[k]) for k, v in (("batch", batch), ("seq", seq), ("hidden", hidden))]


QUESTIONS = (
    make("tppp.nb04_bubble", CHAPTER, "NB04 第 A 部分", "bubble_fraction", "bubble",
         [Param("stages", 8, STAGES), Param("micro", 24, MICRO)],
         "一条流水线有 {stages} 个阶段，" + BUBBLE + "，一步送入 {micro} 个微批次。每个阶段空闲的时间占整步的比例是多少？"
         "（变量 bubble_fraction，小数或百分数）",
         "一步共 m + p − 1 个时隙，每个阶段忙 m 个：空闲比例 (p − 1)/(m + p − 1) = ({stages} − 1)/({micro} + {stages} − 1)"
         " = {answer|%}。", kind="fraction"),
    make("tppp.nb04_tp_send", CHAPTER, "NB04 第 C 部分", "tp_send_per_layer_MB", "tp_send_layer",
         _tp(4, 4096, 5120) + [Param("tp", 4, (2, 4, 8))],
         "Megatron 式张量并行，t = {tp}：每层前向两次、反向两次 all-reduce，每次的数据是 b × s × h 的 BF16 激活，"
         "b = {batch}、s = {seq}、h = {hidden}，按理想 ring 计。一层里每个 TP rank 一共发送多少？（变量 tp_send_per_layer_MB）",
         "一次 all-reduce 的数据 b·s·h·2 字节 = {message|MB}，每层四次共 {per_layer|MB}；ring 里每 rank 发送 2(t−1)/t 倍："
         "{answer|MB}。"),
    make("tppp.check_bubble", CHAPTER, "检查自己 1", "bubble_fraction", "bubble",
         [Param("stages", 8, STAGES), Param("micro", 8, MICRO)],
         "{stages} 个阶段、{micro} 个微批次，" + BUBBLE + "。空闲比例是多少？（变量 bubble_fraction，小数或百分数）",
         "(p − 1)/(m + p − 1) = ({stages} − 1)/({micro} + {stages} − 1) = {answer|%}；增加微批次数最直接。",
         kind="fraction"),
    make("tppp.check_tp_step", CHAPTER, "检查自己 2", "tp_per_step_GB", "tp_step",
         _tp(8, 2048, 4096) + [Param("tp", 1, (1, 2, 4, 8)), Param("layers", 32, (16, 32, 48))],
         "张量并行度 t = {tp}，b = {batch}、s = {seq}、h = {hidden}（BF16），{layers} 层；t > 1 时每层前向、反向各两次"
         " all-reduce。每步层内 all-reduce 一共要交换多少数据？（变量 tp_per_step_GB）",
         "t = 1 时不切分，没有层内交换；否则每层四次、每次 {message|MB}，乘以层数：{answer|GB}。"),
)
