"""Lab 7: four ways to hang a job, each detected quickly, and the fix of each.

The last rank misbehaves:

* ``skip``:  it skips one ``all_reduce`` (a "bad batch, skip this step" branch);
* ``order``: it calls two all-reduces in the other order;
* ``data``:  it runs out of batches one step before the others;
* ``exit``:  it leaves the job early (the process really exits).

Detection is our own bookkeeping (:class:`~parallel_budget.labs.runtime.CallLedger`):
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

``guard=False`` turns the bookkeeping off: the real collectives then pair up
wrongly, and the run ends with gloo's error after ``collective_timeout`` or is
killed by ``run_lab``'s timeout -- never a hung notebook.
"""

from __future__ import annotations

import sys
import time

from .report import Report, Row
from .cli import main
from .runtime import HangDetected, Option

NAME = "hang"
TITLE = "实验 7:四种挂起:在短超时内发现,并验证修复"
VARIANTS = ("skip", "order", "data", "exit")
OPTIONS = {
    "variant": Option("all", "要演示的挂起", choices=("all",) + VARIANTS),
    "detect_timeout": Option(1.0, "检测超时(秒):等其他 rank 到达同一次调用的最长时间", minimum=0.05, maximum=120.0),
    "guard": Option(True, "是否在每次集体通信前核对调用记录(False 时会真的挂住,由超时收场)"),
    "collective_timeout": Option(30.0, "gloo 集体通信自身的超时(秒)", minimum=1.0, maximum=1800.0),
}
LABEL = {
    "skip": "跳过一次 all_reduce",
    "order": "两次 all_reduce 顺序不同",
    "data": "数据先用完",
    "exit": "提前退出",
}
FIX = {
    "skip": "修复:所有 rank 走同样的分支(跳过的 rank 贡献 0)",
    "order": "修复:所有 rank 按同一顺序调用",
    "data": "修复:Join(数据先用完的 rank 用 0 陪跑 all_reduce)",
    "data_drop_last": "修复:drop_last(都只跑最少的批数)",
    "exit": "修复:每步 all_reduce 停止标志,一起停",
}
STEPS = 3


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
                ctx.exit_early({"records": records + [rec], "exited_at_step": step})
            collective(led, f"all_reduce(grad, step={step})", dist.all_reduce, torch.ones(4, device=dev))
        collective(led, "barrier(end)", dist.barrier)

    plan = {
        "skip": [("broken", skip_broken), ("fixed", skip_fixed)],
        "order": [("broken", order_broken), ("fixed", order_fixed)],
        "data": [("broken", data_broken), ("fixed", data_join), ("fixed_drop_last", data_drop_last)],
        "exit": [("fixed", exit_fixed), ("broken", exit_broken)],  # broken last: the rank really exits
    }
    for v in variants:
        for phase, body in plan[v]:
            run_phase(v, phase, body)
    return {"records": records}


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
            check = check_collectives([r["calls"] if r else [] for r in recs])
            msg = next((recs[i]["message"] for i in detected), "(没有 rank 报告)")
            where = {recs[i]["failed_at"] for i in detected}
            ok = bool(detected) and slowest <= T + 2.0 and where == {check.mismatch_at}
            rows.append(Row(
                f"{LABEL[variant]}(rank {bad} 出错)", f"check_collectives:{check.explain()}",
                f"{slowest:.2f} s 内由 rank {', '.join(map(str, detected)) or '无'} 检测到:{msg}",
                "检测到,位置与预测相同,没有挂住" if ok else "没有在预测的位置检测到", ok,
            ))
        else:
            fix = FIX["data_drop_last" if phase == "fixed_drop_last" else variant]
            rows.append(Row(fix, "所有 rank 正常结束", f"{'完成' if completed else '未完成'},用时 {slowest * 1e3:.3g} ms",
                            "完成" if completed else "未完成", completed))
        facts.append({"variant": variant, "phase": phase, "detected_by": detected, "completed": completed,
                      "failed_at": [r["failed_at"] for r in present],
                      "seconds": slowest, "messages": [r["message"] for r in present if r["message"]]})
    notes = (
        f"{ranks} 个 rank,出错的总是 rank {bad};检测超时 detect_timeout = {T:g} s。",
        "预测列由 parallel_budget.check_collectives 根据各 rank 实际进入的调用序列给出第一次分歧的位置;"
        "检测靠自己的记账:每次集体通信前,各 rank 把“第 k 次调用是什么”写进 TCPStore,并等其他 rank 的第 k 条记录;缺席或不一致就报错,不进入真实通信。",
        "跳过、顺序不同、数据先用完都会让第 k 次调用对不上,立即发现;提前退出则要等满 detect_timeout 才能确认对方不会来。",
        "单纯把超时调长只会让这些协议错误更晚暴露;没有记账时(guard=False),错位的调用可能悄悄配对出错误结果,最后才挂住。",
    )
    return Report(TITLE, tuple(rows), notes, {"phases": facts})


if __name__ == "__main__":
    main(sys.modules[__name__])
