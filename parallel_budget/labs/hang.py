"""Lab 7: four ways to hang a job, each detected quickly, and the fix of each.

The last rank misbehaves:

* ``skip``:  it skips one ``all_reduce`` (a "bad batch, skip this step" branch);
* ``order``: it calls two all-reduces in the other order;
* ``data``:  it runs out of batches one step before the others;
* ``exit``:  it leaves the job early (the process really exits).

Detection is our own bookkeeping (:class:`~parallel_budget.labs.engine.runtime.CallLedger`):
before each collective a rank writes "my k-th call is <label>" to the store
and waits at most ``detect_timeout`` seconds for every other rank's k-th
entry.  A missing rank or a different label raises ``HangDetected`` naming
the ranks and the calls -- before anyone enters the real collective, so
nothing blocks and the process group stays usable for the next variant.

Fixes, run on the same process group: ``skip`` keeps the same branches on
every rank (the skipping rank all-reduces zeros); ``order`` uses one order;
``data`` uses ``torch.distributed.algorithms.Join`` (with a minimal Joinable
that all-reduces one gradient per batch, as DDP does; DDP itself would cost a
``torch._dynamo`` import, over a second on this machine), and
alternatively drop_last (every rank runs the smallest batch count);
``exit`` agrees on stopping with an all-reduce of a stop flag.

Beside the ledger, PyTorch's own diagnosis (``torch_diagnosis=True``), each on a
fresh gloo group that is used for nothing else:

* ``TORCH_DISTRIBUTED_DEBUG=DETAIL``: groups created under it are wrapped in
  ``ProcessGroupWrapper``, which compares every collective's fingerprint (op,
  shapes, dtypes) across ranks before running it.  The ``order`` bug with
  tensors of different shapes is refused on every rank with a message naming
  both collectives.  Two swapped collectives of the *same* shape pass this check
  and pair silently: only bookkeeping of what each call means (the ledger)
  catches that.
* ``dist.monitored_barrier(timeout=..., wait_all_ranks=True)`` (gloo only):
  rank 0 names every rank that did not arrive in time, here the last rank,
  which arrives late.
* On NCCL neither applies as is: the tool there is the flight recorder
  (``TORCH_NCCL_TRACE_BUFFER_SIZE``, ``TORCH_NCCL_DUMP_ON_TIMEOUT``,
  ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``; analysed with ``torchfrtrace``); the
  report lists these names (torch 2.13's).

``guard=False`` turns the bookkeeping off: the real collectives then pair up
wrongly, and the run ends with gloo's error after ``collective_timeout`` or is
killed by ``run_lab``'s timeout -- never a hung notebook.
"""

from __future__ import annotations

import sys
import time

from .engine.report import Report, Row
from .engine.cli import main
from .engine.runtime import HangDetected, Option

NAME = "hang"
TITLE = "实验 7：四种挂起：在短超时内发现，并验证修复"
VARIANTS = ("skip", "order", "data", "exit")
OPTIONS = {
    "variant": Option("all", "要演示的挂起", choices=("all",) + VARIANTS),
    "detect_timeout": Option(1.0, "检测超时（秒）：等其他 rank 到达同一次调用的最长时间", minimum=0.05, maximum=120.0),
    "guard": Option(True, "是否在每次集合通信前核对调用记录（False 时会真的挂住，由超时收场）"),
    "collective_timeout": Option(30.0, "gloo 集合通信自身的超时（秒）", minimum=1.0, maximum=1800.0),
    "torch_diagnosis": Option(True, "是否同时演示 PyTorch 自带的诊断：TORCH_DISTRIBUTED_DEBUG=DETAIL 与 monitored_barrier"),
}
# What to use on NCCL instead (environment variables of the pinned torch 2.13.0).
NCCL_FLIGHT_RECORDER = (
    "TORCH_NCCL_TRACE_BUFFER_SIZE=2000（飞行记录器保留的事件数，0 为关闭；新名 TORCH_FR_BUFFER_SIZE）",
    "TORCH_NCCL_DUMP_ON_TIMEOUT=1(watchdog 超时时把记录写盘；需 TORCH_NCCL_ENABLE_MONITORING=1)",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/path/prefix（每个 rank 的记录文件前缀）",
    "torchfrtrace <记录目录>（合并各 rank 的记录，指出第一个不一致的集合通信）",
)
LABEL = {
    "skip": "跳过一次 all_reduce",
    "order": "两次 all_reduce 顺序不同",
    "data": "数据先用完",
    "exit": "提前退出",
}
FIX = {
    "skip": "修复：所有 rank 走同样的分支（跳过的 rank 贡献 0）",
    "order": "修复：所有 rank 按同一顺序调用",
    "data": "修复：Join（数据先用完的 rank 用 0 陪跑 all_reduce）",
    "data_drop_last": "修复：drop_last（都只跑最少的批数）",
    "exit": "修复：每步 all_reduce 停止标志，一起停",
}
STEPS = 3
# The tensors behind the labels of the calls below, so the prediction can tell a silent pairing
# (same operation, same shape) from a mismatch (another operation or shape).
SHAPES = {"grad": (4,), "loss": (1,), "stop flag": (1,), "batch count": (1,)}


def signature(label: str) -> tuple:
    """``"all_reduce(grad, step=1)"`` -> ``("all_reduce(grad, step=1)", (4,))``; a barrier has shape ()."""
    op, _, rest = label.partition("(")
    what = rest.split(",")[0].rstrip(")").strip()
    return label, (() if op == "barrier" else SHAPES.get(what))


def worker(ctx, opts) -> dict:
    import torch

    dist, R, rank = ctx.dist, ctx.world_size, ctx.rank
    bad = R - 1
    dev = ctx.device
    T = opts["detect_timeout"]
    guard = opts["guard"]
    variants = VARIANTS if opts["variant"] == "all" else (opts["variant"],)
    records = []
    current = {}  # the phase being run (exit_early must report it too)

    def collective(led, label, fn, *args):
        if guard and led is not None:
            led.enter(label)
        fn(*args)

    def run_phase(variant, phase, body):
        led = ctx.ledger(f"{variant}/{phase}", T) if guard else None
        t0 = ctx.now()
        rec = {"variant": variant, "phase": phase, "detected": False, "completed": False, "message": "",
               "failed_at": None, "calls": []}
        current.update(rec=rec, led=led)
        try:
            body(led)
            rec["completed"] = True
        except HangDetected as exc:
            rec["detected"] = True
            rec["message"] = str(exc)
            rec["failed_at"] = led.count - 1
            ctx.log(str(exc))
        rec["seconds"] = ctx.now() - t0
        rec["calls"] = list(led.calls) if led is not None else []
        records.append(rec)
        if led is not None:
            led.mark_exit()
        return rec

    # --- skip
    def skip_broken(led):
        for step in range(STEPS):
            grad = torch.ones(4, device=dev)
            if rank == bad and step == 1:  # "this batch looks bad, skip the step"
                continue
            collective(led, f"all_reduce(grad, step={step})", dist.all_reduce, grad)
        collective(led, "barrier(end)", dist.barrier)

    def skip_fixed(led):
        for step in range(STEPS):
            grad = torch.ones(4, device=dev)
            if rank == bad and step == 1:
                grad.zero_()  # same branch structure: contribute nothing, but take part
            collective(led, f"all_reduce(grad, step={step})", dist.all_reduce, grad)
        collective(led, "barrier(end)", dist.barrier)

    # --- order
    def order_broken(led):
        grad, loss = torch.ones(4, device=dev), torch.ones(1, device=dev)
        calls = [("all_reduce(grad)", grad), ("all_reduce(loss)", loss)]
        if rank == bad:
            calls.reverse()  # logging code placed before the gradient sync on one rank
        for label, t in calls:
            collective(led, label, dist.all_reduce, t)

    def order_fixed(led):
        grad, loss = torch.ones(4, device=dev), torch.ones(1, device=dev)
        for label, t in (("all_reduce(grad)", grad), ("all_reduce(loss)", loss)):
            collective(led, label, dist.all_reduce, t)

    # --- data: the last rank has one batch fewer
    def batches():
        return STEPS - 1 if rank == bad else STEPS

    def data_broken(led):
        for i in range(batches()):
            collective(led, f"all_reduce(grad, batch={i})", dist.all_reduce, torch.ones(4, device=dev))
        collective(led, "barrier(epoch end)", dist.barrier)

    def data_join(led):
        from torch.distributed.algorithms.join import Join, Joinable, JoinHook

        class Shadow(JoinHook):
            def __init__(self, sync):
                self.sync = sync

            def main_hook(self):  # a rank out of data mirrors the others' all-reduce with zeros
                dist.all_reduce(torch.zeros(4, device=dev))

        class GradSync(Joinable):
            """What DDP does for Join, reduced to one gradient all-reduce per batch."""

            def __init__(self):
                super().__init__()

            def all_reduce(self, grad):
                Join.notify_join_context(self)
                dist.all_reduce(grad)

            def join_hook(self, **kwargs):
                return Shadow(self)

            @property
            def join_device(self):
                return ctx.device

            @property
            def join_process_group(self):
                return dist.group.WORLD

        sync = GradSync()
        with Join([sync]):
            for _ in range(batches()):
                sync.all_reduce(torch.ones(4, device=dev))
        collective(led, "barrier(epoch end)", dist.barrier)

    def data_drop_last(led):
        n = torch.tensor([batches()], device=dev)
        collective(led, "all_reduce(batch count, MIN)", dist.all_reduce, n, dist.ReduceOp.MIN)
        for i in range(int(n)):
            collective(led, f"all_reduce(grad, batch={i})", dist.all_reduce, torch.ones(4, device=dev))
        collective(led, "barrier(epoch end)", dist.barrier)

    # --- exit
    def exit_fixed(led):
        for step in range(STEPS):
            stop = torch.tensor([1 if (rank == bad and step == 1) else 0], device=dev)
            collective(led, f"all_reduce(stop flag, MAX, step={step})", dist.all_reduce, stop, dist.ReduceOp.MAX)
            if int(stop):
                break  # everybody leaves at the same step
            collective(led, f"all_reduce(grad, step={step})", dist.all_reduce, torch.ones(4, device=dev))
        collective(led, "barrier(end)", dist.barrier)

    def exit_broken(led):
        for step in range(STEPS):
            if rank == bad and step == 1:
                rec = dict(current["rec"], calls=list(led.calls) if led is not None else [], seconds=0.0)
                ctx.exit_early({"records": records + [rec], "exited_at_step": step,
                                "diagnosis": current.get("diagnosis")})
            collective(led, f"all_reduce(grad, step={step})", dist.all_reduce, torch.ones(4, device=dev))
        collective(led, "barrier(end)", dist.barrier)

    diagnosis = torch_diagnosis(ctx, T) if (opts["torch_diagnosis"] and guard) else None
    current["diagnosis"] = diagnosis

    plan = {
        "skip": [("broken", skip_broken), ("fixed", skip_fixed)],
        "order": [("broken", order_broken), ("fixed", order_fixed)],
        "data": [("broken", data_broken), ("fixed", data_join), ("fixed_drop_last", data_drop_last)],
        "exit": [("fixed", exit_fixed), ("broken", exit_broken)],  # broken last: the rank really exits
    }
    for v in variants:
        for phase, body in plan[v]:
            run_phase(v, phase, body)
    return {"records": records, "diagnosis": diagnosis}


def torch_diagnosis(ctx, T: float) -> dict:
    """PyTorch's own view of two of the bugs, on fresh groups used for nothing else.

    Returns, for this rank, ``{"detail": {...}, "monitored": {...}}`` with
    ``raised`` and the first line(s) of torch's message.
    """
    import os
    from datetime import timedelta

    import torch

    dist, R, rank = ctx.dist, ctx.world_size, ctx.rank
    bad = R - 1
    out = {}
    # 1. TORCH_DISTRIBUTED_DEBUG=DETAIL wraps groups created while it is set.
    old = os.environ.get("TORCH_DISTRIBUTED_DEBUG")
    os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
    dist.set_debug_level_from_env()
    try:
        g = dist.new_group(backend="gloo", timeout=timedelta(seconds=max(10 * T, 5.0)))
    finally:
        if old is None:
            os.environ.pop("TORCH_DISTRIBUTED_DEBUG", None)
        else:
            os.environ["TORCH_DISTRIBUTED_DEBUG"] = old
        dist.set_debug_level_from_env()
    grad, loss = torch.ones(4), torch.ones(1)
    first = loss if rank == bad else grad  # the order bug, tensors of different shapes
    try:
        dist.all_reduce(first, group=g)
        out["detail"] = {"raised": False, "message": ""}
    except RuntimeError as exc:
        out["detail"] = {"raised": True, "message": _first_lines(str(exc))}
    # 2. monitored_barrier: the last rank arrives after the timeout.
    m = dist.new_group(backend="gloo", timeout=timedelta(seconds=max(10 * T, 5.0)))
    if rank == bad:
        time.sleep(1.5 * T)
    t0 = time.monotonic()
    try:
        dist.monitored_barrier(group=m, timeout=timedelta(seconds=T), wait_all_ranks=True)
        out["monitored"] = {"raised": False, "message": "", "seconds": time.monotonic() - t0}
    except RuntimeError as exc:
        out["monitored"] = {"raised": True, "message": _first_lines(str(exc)), "seconds": time.monotonic() - t0}
    dist.barrier()  # on the default group: everybody is past the demonstration
    return out


def _first_lines(text: str, limit: int = 500) -> str:
    """torch's message without its C++ stack and without the long TensorOptions dump."""
    import re

    head = text.split("Exception raised from")[0].strip()
    head = re.sub(r", TensorDeviceTypes=TensorOptions\(.*?\(nullopt\)\)\)", ")", head)
    return head if len(head) <= limit else head[: limit - 1] + "…"


def summarize(results, opts, ranks) -> Report:
    from ..model.protocol import check_collectives

    T = opts["detect_timeout"]
    bad = ranks - 1
    rows, facts = [], []
    by_rank = [{(r["variant"], r["phase"]): r for r in res["records"]} for res in results]
    for key in by_rank[0]:
        variant, phase = key
        recs = [b.get(key) for b in by_rank]
        present = [r for r in recs if r is not None]
        detected = [i for i, r in enumerate(recs) if r is not None and r["detected"]]
        completed = all(r is not None and r["completed"] for r in recs)
        slowest = max(r["seconds"] for r in present)
        if phase == "broken":
            check = check_collectives([[signature(c) for c in r["calls"]] if r else [] for r in recs])
            msg = next((recs[i]["message"] for i in detected), "（没有 rank 报告）")
            where = {recs[i]["failed_at"] for i in detected}
            ok = bool(detected) and slowest <= T + 2.0 and where == {check.mismatch_at}
            rows.append(Row(
                f"{LABEL[variant]}（rank {bad} 出错）", f"check_collectives：{check.explain()}",
                f"{slowest:.2f} s 内由 rank {'、'.join(map(str, detected)) or '无'} 检测到：{msg}",
                "检测到，位置与预测相同，没有挂住" if ok else "没有在预测的位置检测到", ok,
            ))
        else:
            fix = FIX["data_drop_last" if phase == "fixed_drop_last" else variant]
            rows.append(Row(fix, "所有 rank 正常结束", f"{'完成' if completed else '未完成'}，用时 {slowest * 1e3:.3g} ms",
                            "完成" if completed else "未完成", completed))
        facts.append({"variant": variant, "phase": phase, "detected_by": detected, "completed": completed,
                      "failed_at": [r["failed_at"] for r in present],
                      "seconds": slowest, "messages": [r["message"] for r in present if r["message"]]})
    diag = [res.get("diagnosis") for res in results]
    if diag and all(diag):
        detail = [d["detail"] for d in diag]
        mon0 = diag[0]["monitored"]
        ok_detail = all(d["raised"] and "mismatch" in d["message"] for d in detail)
        rows.append(Row(
            f"PyTorch 自带：TORCH_DISTRIBUTED_DEBUG=DETAIL（顺序不同，且两个张量形状不同；rank {bad} 出错）",
            "每个 rank 在进入真实通信前报错，并写出各自的集合通信（操作、形状、类型）",
            f"rank 0 的报错：{detail[0]['message'] or '（没有报错）'}",
            "PyTorch 也检测到了" if ok_detail else "PyTorch 没有报错", ok_detail,
        ))
        ok_mon = mon0["raised"] and f"Ranks {bad} " in mon0["message"] + " "
        rows.append(Row(
            f"PyTorch 自带：monitored_barrier（gloo；rank {bad} 晚到 {1.5 * T:g} s）",
            f"rank 0 等满 timeout = {T:g} s 后点名 rank {bad}",
            f"{mon0['seconds']:.2f} s 后 rank 0 报错：{mon0['message'] or '（没有报错）'}",
            "点名正确" if ok_mon else "没有点名", ok_mon,
        ))
        facts.append({"variant": "torch", "phase": "diagnosis", "detail": detail, "monitored": [d["monitored"] for d in diag]})
    notes = (
        f"{ranks} 个 rank，出错的总是 rank {bad}；检测超时 detect_timeout = {T:g} s。",
        "预测列由 parallel_budget.check_collectives 根据各 rank 实际进入的调用序列（连同张量形状）给出第一次分歧的位置，"
        "并说出不加记账时会怎样：缺席的 rank 让其他 rank 等到超时；操作和形状都相同的错位调用悄悄配对；操作或形状不同则取决于后端。"
        "检测靠自己的记账：每次集合通信前，各 rank 把“第 k 次调用是什么”写进 TCPStore，并等其他 rank 的第 k 条记录；缺席或不一致就报错，不进入真实通信。",
        "跳过、顺序不同、数据先用完都会让第 k 次调用对不上，立即发现；提前退出则要等满 detect_timeout 才能确认对方不会来。",
        "单纯把超时调长只会让这些协议错误更晚暴露；没有记账时（guard=False），错位的调用可能悄悄配对出错误结果，最后才挂住。",
        "PyTorch 自带的两种诊断（最后两行）各用一个只为演示新建的 gloo 组：TORCH_DISTRIBUTED_DEBUG=DETAIL 在每次集合通信前比对各 rank 的"
        "操作、形状和类型，代价是每次都多一次检查，只在排错时打开；它比对的是“指纹”，两个形状相同的张量换了顺序，它照样放行，"
        "结果悄悄配错。monitored_barrier 只有 gloo 支持，由 rank 0 点名没按时到达的 rank。",
        "NCCL 上改用飞行记录器（torch 2.13 的环境变量）：" + "；".join(NCCL_FLIGHT_RECORDER) + "。"
        "此外 NCCL 的 watchdog 会在进程组超时（init_process_group 的 timeout）后中止进程，作业不会无限期挂住。",
    )
    return Report(TITLE, tuple(rows), notes, {"phases": facts})


if __name__ == "__main__":
    main(sys.modules[__name__])
