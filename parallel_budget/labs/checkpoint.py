"""Lab 8: Distributed Checkpoint -- a rank dies mid-save, DCP's metadata says which checkpoint is whole.

``ranks`` processes (default 4) train a small FSDP2 model (:mod:`.dcptrain`) and
save model and optimizer state after every step with
``torch.distributed.checkpoint.save``: each rank writes its own shard file,
then the coordinator commits ``.metadata``.  At ``crash_step`` the last rank
writes its shard and dies (``os._exit``, as a killed process would: no
goodbye); the others' save fails, so DCP never commits that step's metadata.

The job is restarted on half the ranks (a new process group; 4 -> 2), as after
losing a node:

* loading the crashed step with ``dcp.load`` is refused by DCP itself;
* :func:`.dcpcheck.latest_complete` finds the newest step whose metadata is
  committed and describes files that are all there;
* ``dcp.load`` reads it into the smaller job's shards (resharding: each rank
  now holds 1/2 instead of 1/4, what ``zero_memory(P, 2, 3)`` says), the state
  equals the one saved, and training resumes to ``steps``;
* the final parameters equal an uninterrupted run on all ranks (fp64; only the
  order of floating-point sums differs with the number of ranks).

The crash and the restart happen inside the same launch: the survivors leave
the broken group and form a new one, which is what a restarted job would do.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from .engine.cli import main
from .engine.report import Report, Row, fmt_diff
from .engine.runtime import Option, quiet_torch_warnings

NAME = "checkpoint"
TITLE = "实验 8：分布式 checkpoint（DCP）：一个 rank 在保存途中死掉，DCP 的元数据说明哪一份是完整的"
DEFAULT_RANKS = 4
OPTIONS = {
    "steps": Option(4, "训练总步数", minimum=2, maximum=50),
    "crash_step": Option(3, "在这一步保存时最后一个 rank 死掉", minimum=2, maximum=50),
    "width": Option(32, "每层宽度（须能被 rank 数整除）", minimum=8, maximum=1024),
    "layers": Option(2, "层数", minimum=1, maximum=16),
}
TOL = 1e-12
FAILED: tuple = (Exception,)  # worker() adds DCP's CheckpointException, a BaseException


def validate(opts, ranks: int) -> None:
    if opts["crash_step"] > opts["steps"]:
        raise ValueError(
            f"实验 checkpoint 的选项 crash_step={opts['crash_step']} 大于 steps={opts['steps']}。"
            f"可接受：2 到 steps 之间，例如 steps=4，crash_step=3"
        )
    if ranks < 2:
        raise ValueError("实验 checkpoint 需要 2 到 8 个 rank：一个 rank 死掉后，剩下的要重新组成一个作业。例如 ranks=4")
    if opts["width"] % ranks:
        raise ValueError(
            f"实验 checkpoint 的选项 width={opts['width']} 不能被 ranks={ranks} 整除：FSDP2 要把每层均分给各 rank。"
            f"可接受：{ranks} 的倍数（8 到 1024），例如 width={ranks * 8}"
        )


def _shared_dir(ctx, name: str) -> Path:
    run_dir = os.environ.get("PB_LAB_RUN_DIR")
    if run_dir:
        return Path(run_dir) / name
    if ctx.rank == 0:  # torchrun: rank 0 picks a fresh folder and tells the others
        ctx.store.set(f"{name}_dir", tempfile.mkdtemp(prefix=f"pb_lab_{name}_"))
    ctx.store.wait([f"{name}_dir"])
    return Path(ctx.store.get(f"{name}_dir").decode())


def _writer(path, on_written=None):
    """DCP's FileSystemWriter; ``on_written`` runs once this rank's shard is on disk (before the commit)."""
    from torch.distributed.checkpoint import FileSystemWriter

    class Writer(FileSystemWriter):
        def write_data(self, plan, planner):
            fut = super().write_data(plan, planner)
            if on_written is not None:
                fut.wait()
                on_written()
            return fut

    return Writer(str(path))


def quiet_dcp_loader():
    """While DCP is expected to refuse: its loader logs each missing metadata file with a traceback (root logger)."""
    import contextlib
    import logging

    @contextlib.contextmanager
    def quiet():
        logs = [logging.getLogger(), logging.getLogger("torch.distributed.checkpoint")]
        old = [log.level for log in logs]
        for log in logs:
            log.setLevel(logging.CRITICAL)
        try:
            yield
        finally:
            for log, level in zip(logs, old):
                log.setLevel(level)

    return quiet()


def _short(exc: BaseException) -> str:
    """``Type: first line`` without source locations or peer addresses; a CheckpointException shows its first cause."""
    import re

    failures = getattr(exc, "failures", None)
    if isinstance(failures, dict) and failures:
        rank, (cause, _) = sorted(failures.items())[0]
        return f"{type(exc).__name__}（rank {rank}：{_short(cause)}）"
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = re.sub(r"\[[^\]]*\.(cc|cpp|h|hpp):\d+\]\s*", "", lines[0] if lines else "")
    text = re.sub(r"\s*\[?[0-9a-f.:]+\]?:\d+", "", text)
    text = re.sub(r"'[^']*/([^/']+)'", r"'\1'", text)  # a path: its last part only
    text = text.split(". ")[0]
    if len(text) > 110 and "; " in text[:110]:  # whole clauses only
        text = text[:text[:110].rindex("; ")]
    return f"{type(exc).__name__}: {text[:110]}"


def worker(ctx, opts) -> dict:
    import torch.distributed.checkpoint as dcp
    from torch.distributed import PrefixStore
    from torch.distributed.device_mesh import init_device_mesh

    from .engine import dcptrain as T
    from .engine.dcpcheck import inspect, latest_complete, step_dir

    from torch.distributed.checkpoint.api import CheckpointException

    global FAILED
    FAILED = (Exception, CheckpointException)
    quiet_torch_warnings()
    dist, R, rank, dev = ctx.dist, ctx.world_size, ctx.rank, ctx.device
    steps, crash, w, L = opts["steps"], opts["crash_step"], opts["width"], opts["layers"]
    rows = T.global_rows(R)
    root = _shared_dir(ctx, "checkpoint")
    # DCP coordinates over gloo (on a GPU node the model's collectives use nccl, whose peers do not notice a death).
    coord = dist.new_group(backend="gloo") if ctx.backend != "gloo" else None
    mesh = init_device_mesh(dev.type, (R,))

    model, opt = T.build(mesh, w, L, dev)  # 1. the uninterrupted run on all ranks
    for s in range(1, steps + 1):
        T.train_step(model, opt, s, rows, w, rank, R, dev)
    reference = T.full_params(model)

    model, opt = T.build(mesh, w, L, dev)  # 2. the same, saving every step; the last rank dies at crash_step
    saved, failure = {}, ""
    victim = R - 1
    for s in range(1, crash + 1):
        T.train_step(model, opt, s, rows, w, rank, R, dev)
        saved[s] = T.full_params(model)
        dying = rank == victim and s == crash
        hook = (lambda: ctx.exit_early({"role": "victim", "step": crash})) if dying else None
        try:
            dcp.save(T.state(model, opt, s), storage_writer=_writer(step_dir(root, s), hook), process_group=coord)
        except FAILED as exc:  # the group broke under the save: what a survivor sees
            failure = _short(exc)
            break
    dist.destroy_process_group()  # 3. the job is gone; the survivors start a new, smaller one
    new_world = max(1, R // 2)
    if rank >= new_world:
        return {"role": "left", "failure": failure}
    # A survivor may learn of the death only when a receive of the broken save times out (ctx.timeout), while
    # another saw the closed connection at once and waits here: the new group waits twice that for it.
    dist.init_process_group(ctx.backend, store=PrefixStore("restart", ctx.store), rank=rank, world_size=new_world,
                            timeout=2 * ctx.timeout)
    mesh = init_device_mesh(dev.type, (new_world,))
    coord = dist.new_group(backend="gloo") if ctx.backend != "gloo" else None
    model, opt = T.build(mesh, w, L, dev)
    crashed = inspect(step_dir(root, crash))
    try:
        with quiet_dcp_loader():
            dcp.load(T.state(model, opt, 0), checkpoint_id=str(step_dir(root, crash)), process_group=coord)
        refused = ""
    except FAILED as exc:  # DCP refuses the uncommitted checkpoint
        refused = _short(exc)
    resume, verdict, skipped = latest_complete(root)
    st = T.state(model, opt, 0)
    dcp.load(st, checkpoint_id=verdict.path, process_group=coord)
    loaded_step = T.restore(model, opt, st)
    restored_diff = T.max_diff(T.full_params(model), saved[resume])
    held = T.local_bytes(model, opt)
    for s in range(resume + 1, steps + 1):
        T.train_step(model, opt, s, rows, w, rank, new_world, dev)
    final_diff = T.max_diff(T.full_params(model), reference)
    if rank == 0 and not os.environ.get("PB_LAB_RUN_DIR"):  # torchrun: the temporary folder is ours to remove
        shutil.rmtree(root, ignore_errors=True)
    return {
        "role": "restarted", "failure": failure, "new_world": new_world,
        "crashed": {"files": list(crashed.files), "complete": crashed.complete, "reason": crashed.reason},
        "refused": refused, "resume": resume, "loaded_step": loaded_step,
        "skipped": [[s, v.reason] for s, v in skipped], "metadata_tensors": verdict.tensors,
        "storage_files": list(verdict.storage_files),
        "params": sum(p.numel() for p in model.parameters()), "held": held,
        "restored_diff": restored_diff, "final_diff": final_diff,
    }


def summarize(results, opts, ranks) -> Report:
    from ..model.memory import zero_memory
    from ..model.recovery import resume_point
    from ..model.units import fmt

    crash, steps = opts["crash_step"], opts["steps"]
    back = [r for r in results if r and r.get("role") == "restarted"]
    r0 = back[0]
    n = r0["new_world"]
    files = r0["crashed"]["files"]
    shards = [f for f in files if f.endswith(".distcp")]
    ok = len(shards) == ranks and ".metadata" not in files and not r0["crashed"]["complete"]
    rows = [Row(f"第 {crash} 步的 checkpoint 文件夹（rank {ranks - 1} 写完分片后死掉）",
                f"{ranks} 个分片文件都在，没有 .metadata（协调者没有提交）", "、".join(files) or "（空）",
                "一致" if ok else "不一致", ok)]
    failed = [r.get("failure") for r in results if r and r.get("role") != "victim"]
    ok = all(failed)
    rows.append(Row("其余 rank 的 dcp.save", "失败（少了一个 rank，收集不齐各 rank 的写入结果）",
                    failed[0] if failed and failed[0] else "没有失败", "一致" if ok else "不一致", ok))
    ok = bool(r0["refused"])
    rows.append(Row(f"重启后 dcp.load 第 {crash} 步", "DCP 拒绝：没有元数据", r0["refused"] or "没有拒绝",
                    "拒绝了" if ok else "没有拒绝", ok))
    # DCP committed the metadata of every step before crash_step; training had finished crash_step
    point = resume_point({r: range(1, crash) for r in range(ranks)}, reached=crash)
    want = point.step
    skipped = "；".join(f"第 {s} 步：{why}" for s, why in r0["skipped"])
    ok = r0["resume"] == want == r0["loaded_step"]
    rows.append(Row("按 DCP 元数据找到的最新完整 checkpoint", f"第 {want} 步（resume_point；元数据已提交，所指的分片文件都在）",
                    f"第 {r0['resume']} 步（读回的 step = {r0['loaded_step']}，元数据描述 {r0['metadata_tensors']} 个张量）；"
                    + (f"跳过{skipped}" if skipped else "没有跳过"), "一致" if ok else "不一致", ok))
    P = r0["params"]
    mem = zero_memory(P, n, 3, param_bytes=8, grad_bytes=8, optim_bytes=16)
    for key, label, q in (("params", "参数", mem.param_state), ("moments", " Adam 动量", mem.optim_state)):
        got = [r["held"][key] for r in back]
        ok = all(g == q.to("B").magnitude for g in got)
        rows.append(Row(f"在 {n} 个 rank 上加载（重新分片）：每 rank 的{label}",
                        f"{fmt(q, 'kB', 4)}（zero_memory(P, {n}, 3)，原来 {ranks} 个 rank 时是它的 {n}/{ranks}）",
                        " / ".join(f"{fmt(_b(g), 'kB', 4)}" for g in got), "一致" if ok else "不一致", ok))
    restored = max(r["restored_diff"] for r in back)
    rows.append(Row(f"加载出的参数 vs 第 {want} 步保存时", "完全相同", f"最大绝对差 {fmt_diff(restored)}",
                    "一致" if restored == 0 else "不一致", restored == 0))
    final = max(r["final_diff"] for r in back)
    rows.append(Row(f"在 {n} 个 rank 上续训到第 {steps} 步（重做 {point.lost_steps} 步）vs 不中断的 {ranks} rank 训练",
                    "相同（只差浮点求和顺序）",
                    f"最大绝对差 {fmt_diff(final)}", "一致" if final <= TOL else "不一致", final <= TOL))
    notes = (
        f"{ranks} 个 rank 用 FSDP2 训练一个 fp64 小模型（P = {P} 个参数），每步之后用 torch.distributed.checkpoint.save "
        "保存分片的模型与 Adam 状态：每个 rank 写自己的分片文件，全部写完后协调者（rank 0）才提交 .metadata。",
        f"第 {crash} 步保存时，rank {ranks - 1} 写完自己的分片就退出（os._exit，像被杀掉一样不打招呼）；"
        "其余 rank 的保存因此失败，这一步的元数据永远不会出现。",
        f"重启：幸存的前 {n} 个 rank 离开坏掉的进程组，组成一个新的 {n} rank 作业（相当于少了一台机器后重启）。",
        "完整与否只看 DCP 自己的元数据：.metadata 已提交、它指向的分片文件都在且够长、每个张量的分块拼得回整个张量"
        "（parallel_budget.labs.engine.dcpcheck）；文件夹名 step-N 只用来排序。",
        "分片写在本次运行的日志目录下（checkpoint/step-N）；运行成功后目录会被删除，run_lab(..., keep_logs=True) 可保留。",
    )
    facts = {k: r0[k] for k in ("refused", "resume", "loaded_step", "skipped", "crashed", "params")}
    facts.update(restored_diff=restored, final_diff=final, failures=failed, new_world=n,
                 held=[r["held"] for r in back], predicted_held={"params": mem.param_state.to("B").magnitude,
                                                                  "moments": mem.optim_state.to("B").magnitude})
    return Report(TITLE, tuple(rows), notes, facts)


def _b(n):
    from ..model.units import Q_

    return Q_(n, "B")


if __name__ == "__main__":
    main(sys.modules[__name__])
