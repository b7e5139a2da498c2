"""Chapter 5 (debugging): a straggler at the collective."""

from __future__ import annotations

from .builders import make
from .core import Param

CHAPTER = "debugging"
ARRIVALS = {"len": (4,), "each": (100, 105, 110, 115, 120, 125, 130), "late": (40, 60, 70, 90)}
COMM = (20, 40, 60, 80)
TABLE = ("4 个 rank 做数据并行，每一步从开始到调用梯度 all-reduce 之前分别用时 {arrivals}（依 rank 0、1、2、3），"
         "all-reduce 本身传完要 {comm}，计算和通信不重叠。")

QUESTIONS = (
    make("debugging.nb05_slow_rank", CHAPTER, "NB05 第 C 部分 1", "slow_rank", "slow_rank",
         [Param("arrivals", [120, 125, 118, 190], ARRIVALS, "ms")],
         "4 个 rank 做数据并行，每一步从开始到调用梯度 all-reduce 之前分别用时 {arrivals}（依 rank 0、1、2、3）。"
         "哪个 rank 拖慢了所有人？（变量 slow_rank，整数）",
         "集合通信要等每个 rank 都到齐，最后一个到的用时 {last|ms}：它就是 rank {answer|}。",
         kind="int", hint="集合通信要等每个 rank 都到齐：看谁最后到。"),
    make("debugging.nb05_late_step", CHAPTER, "NB05 第 C 部分 2", "late_step_ms", "straggler_step",
         [Param("arrivals", [120, 125, 118, 190], ARRIVALS, "ms"), Param("comm", 60, COMM, "ms")],
         TABLE + "这一步要多久？（变量 late_step_ms）",
         "all-reduce 要等最后一个 rank 在 {last|ms} 到达才开始传，再传 {comm}：步时 = {answer|ms}。"),
    make("debugging.nb05_rank0_wait", CHAPTER, "NB05 第 C 部分 3", "rank0_wait_ms", "straggler_wait",
         [Param("arrivals", [120, 125, 118, 190], ARRIVALS, "ms"), Param("comm", 60, COMM, "ms")],
         TABLE + "rank 0 在 all-reduce 里干等了多久（不算传输本身）？（变量 rank0_wait_ms）",
         "rank 0 到达后要等到最后一个 rank 在 {last|ms} 到达：等待 = {answer|ms}；传输的 {comm} 不算等待。",
         fixed={"rank": 0}),
)
