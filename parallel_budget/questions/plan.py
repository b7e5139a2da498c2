"""Chapter 6 (plan-builder): what the first pipeline stage of a whole plan holds in activations."""

from __future__ import annotations

from ..model.plan import SHAPES
from .builders import make
from .core import Param

CHAPTER = "plan-builder"
# The chapter's worked example: the model, its global batch and peak FLOP/s stay; the split is drawn.
# Llama 2's options: no dropout, SwiGLU MLP of width 11008, FlashAttention (so no recomputation is needed).
EXAMPLE = {**SHAPES["llama2-7b"], "global_batch": 32, "recompute": "none", "peak_flops": 312e12}

QUESTIONS = (
    make("plan.check_stage_acts", CHAPTER, "检查自己 1", "stage_acts_GB", "stage_acts",
         [Param("dp", 2, (1, 2, 4)), Param("tp", 2, (1, 2, 4)), Param("pp", 4, (2, 4, 8)),
          Param("micro_batch", 1, (1, 2)), Param("seq", 4096, (2048, 4096))],
         "本章例子的模型（Llama 2 7B 的形状）和全局 batch 不变，改用 DP = {dp}、TP = {tp}、PP = {pp}，"
         "微批次大小 {micro_batch}，序列长度 {seq}，不重算，开序列并行，1F1B 调度。"
         "第一个流水线阶段最多同时保存多少激活？（变量 stage_acts_GB）",
         "每个 DP rank 分到 m = {m|} 个微批次；1F1B 下第一阶段最多同时保存 min(p, m) = {flight|} 个微批次的激活"
         "（GPipe 要存全部 {m|} 个）。每个阶段 {layers|} 层。"
         "按 Llama 2 的选项（无 dropout、SwiGLU MLP 宽 f = 11008、FlashAttention），开序列并行时每层每个微批次保存"
         " (16 + 6·f/h)·s·b·h/t 字节，外加 FlashAttention 的 softmax 统计量 4·a·s·b/t 字节，共 {per_layer|MB}："
         "{flight|} × {layers|} × {per_layer|MB} = {answer|GB}。",
         fixed=EXAMPLE),
)
