"""Lab 8: sharded checkpoints -- a crash between shard writes, and a safe resume.

Every rank keeps one shard of the training state (its slice of a parameter
vector, as in ZeRO/FSDP) and after each step writes ``step-<s>-rank-<r>.pt``
atomically (temporary file, then rename).  At ``crash_step`` rank 0 has written
its shard when the last rank dies halfway through its write: only a ``.tmp``
file is left.  On restart:

* "every rank takes its own newest file" would mix steps; the loader
  :func:`load_shard` refuses a mixed set with a message naming ranks and steps;
* :func:`latest_complete_step` finds the newest step that every shard has, and
  training resumes from there; the final parameters equal an uninterrupted run.

The crash and restart are simulated inside the same processes (state is
discarded and rebuilt from disk), so the lab needs one launch.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

from .report import Report, Row, fmt_diff
from .cli import main
from .runtime import Option

NAME = "checkpoint"
TITLE = "实验 8：分片 checkpoint：崩溃留下混合步数，加载器拒绝，并从共同的最新步恢复"
OPTIONS = {
    "steps": Option(4, "训练总步数", minimum=2, maximum=100),
    "crash_step": Option(3, "在这一步写分片时最后一个 rank 崩溃", minimum=2, maximum=100),
}
SHARD = re.compile(r"^step-(\d+)-rank-(\d+)\.pt$")


class MixedCheckpointError(RuntimeError):
    """Shards from different steps would be loaded together."""


def shard_path(directory, step: int, rank: int) -> Path:
    return Path(directory) / f"step-{step}-rank-{rank}.pt"


def save_shard(directory, step: int, rank: int, world_size: int, shard, crash: bool = False) -> None:
    """Write atomically: a crash leaves only ``*.tmp``, never a half-written shard under its real name."""
    import torch

    final = shard_path(directory, step, rank)
    tmp = final.with_name(final.name + ".tmp")
    with open(tmp, "wb") as f:
        if crash:  # the process dies halfway through the write
            f.write(b"\x00" * 16)
            return
        torch.save({"step": step, "rank": rank, "world_size": world_size, "shard": shard}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)


def scan(directory) -> dict:
    """{rank: sorted steps with a complete shard}; temporary files are ignored."""
    found: dict = {}
    for p in Path(directory).iterdir():
        m = SHARD.match(p.name)
        if m:
            found.setdefault(int(m.group(2)), []).append(int(m.group(1)))
    return {r: sorted(s) for r, s in found.items()}


def latest_complete_step(directory, world_size: int):
    """The newest step for which all ``world_size`` shards exist, or None."""
    found = scan(directory)
    common = None
    for r in range(world_size):
        steps = set(found.get(r, ()))
        common = steps if common is None else common & steps
    return max(common) if common else None


def newest_per_rank(directory, world_size: int) -> dict:
    """What "each rank loads its own newest file" would pick."""
    found = scan(directory)
    return {r: (found[r][-1] if found.get(r) else None) for r in range(world_size)}


def check_same_step(chosen: dict, directory, world_size: int) -> int:
    """Refuse a set of shards from different steps; return the common step."""
    steps = set(chosen.values())
    if len(steps) == 1 and None not in steps:
        return steps.pop()
    listing = "，".join(f"rank {r} 是第 {s} 步" if s is not None else f"rank {r} 没有分片" for r, s in chosen.items())
    good = latest_complete_step(directory, world_size)
    hint = (f"所有分片都齐全的最新一步是第 {good} 步：用 latest_complete_step() 找到它，各 rank 都从这一步恢复。"
            if good is not None else "没有哪一步的分片是齐全的，只能从头训练。")
    raise MixedCheckpointError(f"拒绝加载：这些分片来自不同的训练步（{listing}）。混用会让各 rank 的状态互相矛盾。{hint}")


def load_shard(directory, step: int, rank: int, world_size: int):
    """Load rank's shard of ``step`` after checking step, rank and world size recorded in it."""
    import torch

    path = shard_path(directory, step, rank)
    if not path.exists():
        raise MixedCheckpointError(f"第 {step} 步缺少 rank {rank} 的分片（{path.name}），不能从这一步恢复。")
    data = torch.load(path)
    if (data["step"], data["rank"], data["world_size"]) != (step, rank, world_size):
        raise MixedCheckpointError(
            f"分片 {path.name} 里记录的是第 {data['step']} 步、rank {data['rank']}、{data['world_size']} 个 rank，"
            f"与要加载的第 {step} 步、rank {rank}、{world_size} 个 rank 不符。"
        )
    return data["shard"]


def validate(opts, ranks: int) -> None:
    if opts["crash_step"] > opts["steps"]:
        raise ValueError(
            f"实验 checkpoint 的选项 crash_step={opts['crash_step']} 大于 steps={opts['steps']}。例如 steps=4，crash_step=3"
        )


def _shared_dir(ctx) -> Path:
    run_dir = os.environ.get("PB_LAB_RUN_DIR")
    if run_dir:
        return Path(run_dir) / "checkpoint"
    if ctx.rank == 0:  # torchrun: rank 0 picks a fresh folder and tells the others
        ctx.store.set("checkpoint_dir", tempfile.mkdtemp(prefix="pb_lab_checkpoint_"))
    ctx.store.wait(["checkpoint_dir"])
    return Path(ctx.store.get("checkpoint_dir").decode())


def worker(ctx, opts) -> dict:
    import torch

    dist, R, rank = ctx.dist, ctx.world_size, ctx.rank
    steps, crash_step = opts["steps"], opts["crash_step"]
    bad = R - 1
    root = _shared_dir(ctx)
    n = 4 * R  # parameter vector, rank r owns elements r*4 .. r*4+3

    def train_step(shard, step):
        # Each rank's gradient for its shard depends on data seen by every rank: all-reduce it.
        g = torch.zeros(n, dtype=torch.float64, device=ctx.device)
        g[rank * 4:(rank + 1) * 4] = shard
        dist.all_reduce(g)
        noise = torch.arange(n, dtype=torch.float64, device=ctx.device) * 0.01 * (rank + 1) * step
        dist.all_reduce(noise)
        full = g - 0.1 * (g - noise / R)
        return full[rank * 4:(rank + 1) * 4].clone()

    def initial():
        return torch.arange(rank * 4, (rank + 1) * 4, dtype=torch.float64, device=ctx.device)

    # 1. Uninterrupted reference run.
    ref_dir = root / "reference"
    run_dir = root / "crashed"
    if rank == 0:
        ref_dir.mkdir(parents=True, exist_ok=True)
        run_dir.mkdir(parents=True, exist_ok=True)
    dist.barrier()
    shard = initial()
    for step in range(1, steps + 1):
        shard = train_step(shard, step)
    reference = shard.clone()

    # 2. The crashing run: the last rank dies while writing its shard of crash_step.
    shard = initial()
    saved = {}
    for step in range(1, crash_step + 1):
        shard = train_step(shard, step)
        saved[step] = shard.clone()
        crash = rank == bad and step == crash_step
        save_shard(run_dir, step, rank, R, shard, crash=crash)
        dist.barrier()
    del shard  # the job is gone; everything below comes from disk

    # 3. Restart: the naive choice is refused, the newest complete step is used.
    naive = newest_per_rank(run_dir, R)
    try:
        check_same_step(naive, run_dir, R)
        refused = ""
    except MixedCheckpointError as exc:
        refused = str(exc)
    resume = latest_complete_step(run_dir, R)
    shard = load_shard(run_dir, resume, rank, R).to(ctx.device)
    restored_diff = float((shard - saved[resume]).abs().max())
    for step in range(resume + 1, steps + 1):
        shard = train_step(shard, step)
    final_diff = float((shard - reference).abs().max())
    leftovers = sorted(p.name for p in run_dir.iterdir() if p.name.endswith(".tmp"))
    return {
        "naive": {str(k): v for k, v in naive.items()}, "refused": refused, "resume": resume,
        "restored_diff": restored_diff, "final_diff": final_diff, "tmp_files": leftovers, "dir": str(run_dir),
    }


def summarize(results, opts, ranks) -> Report:
    crash, steps = opts["crash_step"], opts["steps"]
    naive = results[0]["naive"]
    refused = results[0]["refused"]
    resume = results[0]["resume"]
    restored = max(r["restored_diff"] for r in results)
    final = max(r["final_diff"] for r in results)
    mixed = "，".join(f"rank {r}：第 {s} 步" for r, s in naive.items())
    others = "rank 0" if ranks == 2 else f"rank 0..{ranks - 2}"
    expect_refuse = ranks > 1
    rows = (
        Row("崩溃后磁盘上的分片", (f"{others} 有第 {crash} 步，rank {ranks - 1} 只到第 {crash - 1} 步" if expect_refuse
                               else f"rank 0 只到第 {crash - 1} 步"),
            f"各 rank 最新：{mixed}；残留临时文件 {'、'.join(results[0]['tmp_files']) or '无'}",
            "步数混在一起", None),
        Row("“各取自己最新的文件”", "加载器拒绝，并指出共同的最新步" if expect_refuse else "只有 1 个 rank，不会混合",
            refused or "没有拒绝", "拒绝了" if refused else "没有拒绝", bool(refused) == expect_refuse),
        Row("从哪一步恢复", f"第 {crash - 1} 步（所有分片都有的最新一步）", f"第 {resume} 步",
            "一致" if resume == crash - 1 else "不一致", resume == crash - 1),
        Row("恢复出的分片 vs 当时保存的状态", "完全相同", f"最大绝对差 {fmt_diff(restored)}",
            "一致" if restored == 0 else "不一致", restored == 0),
        Row(f"恢复后训练到第 {steps} 步 vs 不中断的参考", "完全相同", f"最大绝对差 {fmt_diff(final)}",
            "一致" if final == 0 else "不一致", final == 0),
    )
    notes = (
        f"{ranks} 个 rank，每个 rank 保存参数的一个分片；第 {crash} 步写分片时 rank {ranks - 1} 崩溃（只留下 .tmp）。",
        "分片先写临时文件再改名，所以崩溃不会留下“看起来完整”的坏文件；但不同 rank 的最新文件仍可能属于不同的步。",
        "完整的 checkpoint 要求所有分片属于同一步；恢复时所有 rank 必须一起退回到这一步，再重新训练之后的步。",
        "分片写在本次运行的日志目录下（checkpoint/crashed）；运行成功后目录会被删除，run_lab(..., keep_logs=True) 可保留。",
    )
    facts = {"naive": naive, "refused": refused, "resume": resume, "restored_diff": restored, "final_diff": final}
    return Report(TITLE, rows, notes, facts)


if __name__ == "__main__":
    main(sys.modules[__name__])
