"""Chapter 1 (two-rank-update): one data-parallel SGD step."""

from __future__ import annotations

from .builders import make
from .core import Param

CHAPTER = "two-rank-update"
GRADS = {"len": (2, 3, 4), "each": (1, 2, 3, 4, 5, 6, 8, 9, 10, 12)}
W = (0.5, 1, 2)
LR = (0.01, 0.05, 0.1, 0.2)

QUESTIONS = (
    make("update.check_weight", CHAPTER, "检查自己 1", "updated_w", "dp_weight",
         [Param("w", 1, W), Param("grads", [1, 2, 6], GRADS), Param("lr", 0.1, LR)],
         "每个 rank 的样本数相同，本地梯度依次为 {grads}，参数都从 w = {w} 开始，学习率 {lr}。"
         "做一次正确的数据并行 SGD 更新后，w 是多少？（变量 updated_w）",
         "all-reduce 求平均得到聚合梯度 {mean|}；每个 rank 都做 w − lr × 平均梯度 = {w} − {lr} × {mean|} = {answer|}。"
         "各 rank 结果相同，也与单进程在全部样本上算出的结果相同。"),
    make("update.nb01_updated_w", CHAPTER, "NB01 第 A 部分", "updated_w", "dp_weight",
         [Param("w", 1.0, W), Param("grads", [3, 9], GRADS), Param("lr", 0.05, LR)],
         "所有 rank 都从 w = {w} 开始，学习率 {lr}，样本数相同、损失按样本取平均；各 rank 的本地梯度是 {grads}。"
         "一次数据并行 SGD 更新之后，每个 rank 上的 w 是多少？（变量 updated_w）",
         "平均梯度 = {mean|}，更新后 w = {w} − {lr} × {mean|} = {answer|}。"),
    make("update.nb01_buggy_w", CHAPTER, "NB01 第 B 部分", "buggy_w", "buggy_weight",
         [Param("w", 1.0, W), Param("grads", [3, 9], GRADS), Param("lr", 0.05, LR)],
         "同步函数先用 op=\"mean\" 的 all-reduce 求平均，又把结果除以 world_size。所有 rank 从 w = {w} 开始，"
         "学习率 {lr}，本地梯度是 {grads}。用这段有问题的代码更新一次，w 变成多少？（变量 buggy_w）",
         "平均梯度是 {mean|}，再除以 R 一次后变小；SGD 更新 w = {w} − {lr} × 平均梯度 / R = {answer|}。"
         "各 rank 仍然一致，但对 SGD 来说有效学习率只剩原来的 1/R，所以和单卡对不上。"),
)
