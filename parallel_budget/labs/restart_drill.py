"""Lab 12: a failure drill under torchrun -- a worker is killed, torchrun restarts the group, training resumes.

``run_lab("restart_drill")`` starts one driver process, which plays the
cluster: it hosts a ``TCPStore`` on a port the kernel picks and starts two
torchrun agents on this machine as two nodes::

    python -m parallel_budget.labs.engine.forkrun --nnodes=2 --nproc-per-node=2 --max-restarts=1 \\
        --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:<port> --rdzv-conf=is_host=false \\
        --start-method=fork --run-path .../forkrun.py ...

:mod:`.forkrun` is torchrun's own ``main()`` in a process that imported torch and
the workers' modules first; with ``--run-path`` and ``--start-method=fork``
torchrun forks each worker from its agent instead of starting an interpreter
that imports torch (eight of them, about 1.5 CPU-s each, on two cores).  A driver forked by
the labs' zygote forks the two agents too (:func:`before_join`, :mod:`.engine.agents`).

Each of the 4 workers trains the small FSDP2 job of :mod:`.dcptrain` and saves
a Distributed Checkpoint every ``save_every`` steps.  At the start of step
``kill_step`` the last worker sends itself SIGKILL (once per run: a marker file
says it happened; sending it to itself makes the kill land at a known step; the
report shows that marker as the drill's set-up, not as a finding).  The victim's
agent sees the failed worker at its next poll and terminates its other local
workers at once (torch's ``elastic/multiprocessing/api.py``: ``_poll`` then
``close()``), without waiting for any collective timeout, and restarts the group
(``TORCHELASTIC_RESTART_COUNT`` = 1); the other node's workers fail on the lost
peer, or their agent restarts on seeing a node waiting to re-rendezvous.  A
collective timeout (NCCL's watchdog) matters only for a hang in which no process
exits.  The new
workers find the newest complete checkpoint by DCP's metadata
(:mod:`.dcpcheck`), load it, redo the lost steps and finish.  At the end each
worker trains the same job from scratch without interruption, in memory, and
compares the final weights.  The driver reports the restart count, the step
resumed from and the time lost, then makes sure every agent and worker ended
(it adopts orphans as a subreaper and sweeps by an environment marker).

The same module is the worker: under ``torchrun`` (``TORCHELASTIC_RUN_ID``
set) it trains; rank 0 of the last attempt prints the report.  Run it yourself
with restarts allowed, e.g. ``torchrun --nproc-per-node=2 --max-restarts=1 -m
parallel_budget.labs.restart_drill``; across machines the checkpoint folder
must be shared (``PB_LAB_RUN_DIR``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from .engine import forkrun
from .engine.cli import main
from .engine.report import Report, Row, fmt_diff
from .engine.runtime import Option, quiet_torch_warnings

NAME = "restart_drill"
TITLE = "实验 12：torchrun 故障演练：杀掉一个 worker，torchrun 重启整组，从最新的完整 checkpoint 继续"
DEFAULT_RANKS = 1  # the driver; the workers are torchrun's
DEFAULT_TIMEOUT = 120.0  # two agents import torch, two c10d rounds: ~7 s idle, ~15-20 s on a busy two-core machine
NODES, PER_NODE = 2, 2
OPTIONS = {
    "steps": Option(6, "训练总步数", minimum=2, maximum=50),
    "save_every": Option(2, "每隔几步保存一次 checkpoint", minimum=1, maximum=50),
    "kill_step": Option(4, "第几步开始时杀掉最后一个 worker", minimum=2, maximum=50),
    "width": Option(32, "每层宽度（须能被 worker 数整除）", minimum=8, maximum=1024),
    "deadline_s": Option(100.0, "两个 torchrun 代理最多运行多久（秒），超时全部终止", minimum=10.0, maximum=1800.0),
}
STRESS_OPTIONS = {"steps": 3, "kill_step": 2, "save_every": 1}
_FORKED: list = []  # the driver's agents, forked by before_join and waiting for their command line
LAYERS = 2
TOL = 1e-12
MARK = "PB_LAB_DRILL_ID"


def _under_torchrun() -> bool:
    return bool(os.environ.get("TORCHELASTIC_RUN_ID"))


def validate(opts, ranks: int) -> None:
    if opts["kill_step"] > opts["steps"]:
        raise ValueError(
            f"实验 restart_drill 的选项 kill_step={opts['kill_step']} 大于 steps={opts['steps']}。"
            f"可接受：2 到 steps 之间，例如 steps=6，kill_step=4"
        )
    workers = ranks if _under_torchrun() else NODES * PER_NODE
    if not _under_torchrun() and ranks != 1:
        raise ValueError(
            f"实验 restart_drill 的 ranks 只能是 1（收到 {ranks}）：run_lab 只启动一个驱动进程，"
            f"由它启动两个 torchrun 代理、共 {NODES * PER_NODE} 个 worker。例如 run_lab(\"restart_drill\")"
        )
    if opts["width"] % workers:
        raise ValueError(
            f"实验 restart_drill 的选项 width={opts['width']} 不能被 worker 数 {workers} 整除：FSDP2 要把每层均分。"
            f"可接受：{workers} 的倍数（8 到 1024），例如 width={workers * 8}"
        )


def _clock() -> float:
    """Seconds since boot: comparable across processes, and with a process's own start time."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _process_start() -> float:
    """When this process started, on :func:`_clock`'s scale (from /proc/self/stat)."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")


def _drill_dir() -> Path:
    base = os.environ.get("PB_LAB_RUN_DIR")
    if base:
        return Path(base) / "drill"
    run = os.environ.get("TORCHELASTIC_RUN_ID", "none")
    return Path(tempfile.gettempdir()) / f"pb_lab_restart_drill_{run}"


def _write_json(path: Path, data) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ------------------------------------------------------------------ the workers (under torchrun)

def train(ctx, opts) -> dict:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh

    from .engine import dcptrain as T
    from .engine.dcpcheck import latest_complete, step_dir

    from .engine import agents

    agents.die_with_parent()  # torchrun's workers run in sessions of their own: never outlive the agent
    quiet_torch_warnings()
    t_start, t_joined = _process_start(), _clock()
    R, rank, dev = ctx.world_size, ctx.rank, ctx.device
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    steps, every, kill, w = opts["steps"], opts["save_every"], opts["kill_step"], opts["width"]
    rows = T.global_rows(R)
    drill = _drill_dir()
    ckpt = drill / "checkpoints"
    if rank == 0:
        ckpt.mkdir(parents=True, exist_ok=True)
    ctx.dist.barrier()
    with open(drill / "starts.jsonl", "a") as f:  # one short line per worker start (O_APPEND)
        f.write(json.dumps({"rank": rank, "node": int(os.environ.get("GROUP_RANK", "0")), "restart_count": attempt,
                            "start": t_start, "pid": os.getpid()}) + "\n")
    coord = ctx.dist.new_group(backend="gloo") if ctx.backend != "gloo" else None
    mesh = init_device_mesh(dev.type, (R,))
    model, opt = T.build(mesh, w, LAYERS, dev)
    resume, verdict, skipped = latest_complete(ckpt)
    if resume is not None:
        st = T.state(model, opt, 0)
        dcp.load(st, checkpoint_id=verdict.path, process_group=coord)
        T.restore(model, opt, st)
    t_loaded = _clock()
    marker = drill / "killed.json"
    done = {}
    try:
        for s in range((resume or 0) + 1, steps + 1):
            if s == kill and rank == R - 1 and not marker.exists():
                _write_json(marker, {"step": s, "rank": rank, "at": _clock(), "attempt": attempt})
                os.kill(os.getpid(), signal.SIGKILL)
            T.train_step(model, opt, s, rows, w, rank, R, dev)
            if s % every == 0 or s == steps:
                dcp.save(T.state(model, opt, s), checkpoint_id=str(step_dir(ckpt, s)), process_group=coord)
            done[s] = _clock()
    except RuntimeError as exc:  # a peer died: leave with one line, torchrun restarts the group
        print(f"rank {rank}：第 {s} 步的集合通信失败（{type(exc).__name__}，有 worker 已经退出），"
              "交给 torchrun 重启整组。", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    final = T.full_params(model)
    ref_model, ref_opt = T.build(mesh, w, LAYERS, dev)  # the same job, uninterrupted, in memory
    for s in range(1, steps + 1):
        T.train_step(ref_model, ref_opt, s, rows, w, rank, R, dev)
    out = {
        "rank": rank, "world": R, "attempt": attempt, "node": int(os.environ.get("GROUP_RANK", "0")),
        "starts": [json.loads(line) for line in (drill / "starts.jsonl").read_text().splitlines() if line.strip()], "restart_count": attempt, "resumed_from": resume,
        "skipped": [[s, v.reason] for s, v in skipped], "start": t_start, "joined": t_joined, "loaded": t_loaded,
        "done": {str(k): v for k, v in done.items()}, "final_diff": T.max_diff(final, T.full_params(ref_model)),
        "killed": json.loads(marker.read_text()) if marker.exists() else None,
        "max_restarts": os.environ.get("TORCHELASTIC_MAX_RESTARTS"), "pid": os.getpid(),
        "forked": os.environ.get(forkrun.AGENT_PID) == str(os.getppid()),  # a fork of its agent
    }
    _write_json(drill / f"result-{rank}.json", out)
    if not os.environ.get("PB_LAB_RUN_DIR"):  # started by torchrun directly: the folder is ours to remove
        ctx.dist.barrier()
        if rank == 0:
            shutil.rmtree(drill, ignore_errors=True)
    return out


# ------------------------------------------------------------------ the driver (under run_lab)

def _agent_argv(port: int, run_id: str, log_dir: Path, opts: dict) -> list:
    from .engine.runtime import options_to_argv

    return [sys.executable, "-m", forkrun.__name__, f"--nnodes={NODES}", f"--nproc-per-node={PER_NODE}",
            "--max-restarts=1", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={run_id}",
            "--rdzv-conf=is_host=false", "--local-addr=127.0.0.1", "--monitor-interval=0.1",
            f"--log-dir={log_dir}", "--start-method=fork", "--run-path", forkrun.__file__, NAME, *options_to_argv(opts)]


def _shown(argv: list) -> str:
    """The agents' command line as the report shows it: ``python``, no port, no temporary folder, no lab options."""
    masks = {"--rdzv-endpoint=": "127.0.0.1:<端口>", "--log-dir=": "<运行目录>/elastic"}
    end = argv.index("--run-path") + 2
    shown = ["python", *argv[1:end - 1], f"parallel_budget/labs/{Path(argv[end - 1]).name}", argv[end]]
    return " ".join(next((k + v for k, v in masks.items() if a.startswith(k)), a) for a in shown)


def _agent_env(mark: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in (
        "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
        "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RUN_ID")}
    env[MARK] = mark
    env["OMP_NUM_THREADS"] = "1"
    # torchrun 2.13 shares one TCPStore across rendezvous rounds, and a restarted group can read the previous
    # round's keys (pytorch/pytorch#135712): every round gets a fresh store instead.
    env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    # Two pretend nodes on one machine would put two workers on each GPU, which nccl refuses: the drill's
    # workers use the CPU (gloo) here; on a real cluster run the module under your own torchrun (nccl).
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def before_join(opts) -> None:
    """The driver, forked by the zygote, still with one thread: fork the agents, to wait for their command line."""
    from .engine import agents

    if not _under_torchrun() and agents.can_fork_agents():
        _FORKED[:] = agents.fork_waiting(NODES, forkrun.agent)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def drive(ctx, opts) -> dict:
    import torch.distributed as dist

    from .engine import agents

    agents.become_subreaper()
    signal.signal(signal.SIGTERM, _raise_interrupt)  # the launcher's SIGTERM still runs the clean-up below
    drill = _drill_dir()
    drill.mkdir(parents=True, exist_ok=True)
    store = dist.TCPStore("127.0.0.1", 0, None, is_master=True, wait_for_workers=False, multi_tenant=True)
    mark = f"{os.getpid()}-{os.environ.get('PB_LAB_RUN_ID', '')}"
    run_id = f"pb-drill-{os.getpid()}"
    argv = _agent_argv(store.port, run_id, drill / "elastic", opts)
    env = _agent_env(mark)
    t0 = _clock()
    procs, codes, timed_out = [], [], False
    forked, _FORKED[:] = list(_FORKED), []
    try:
        procs = [forked[n].go(argv, env, drill / f"agent-{n}.log", (MARK, "PB_LAB_RUN_ID", "PB_LAB_RUN_DIR"))
                 if forked else agents.start(argv, env, drill / f"agent-{n}.log") for n in range(NODES)]
        deadline = time.monotonic() + opts["deadline_s"]
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.05)
        timed_out = any(p.poll() is None for p in procs)
    finally:
        for agent in forked:
            agent.abandon()  # one that never got its command line exits without starting
        leftovers = agents.stop(procs or forked, MARK, mark, grace=2.0)  # within the launcher's 3 s before SIGKILL
        codes = [p.returncode for p in procs]
        del store
    t_end = _clock()
    results = []
    for r in range(NODES * PER_NODE):
        f = drill / f"result-{r}.json"
        results.append(json.loads(f.read_text()) if f.exists() else None)
    logs = {n: (drill / f"agent-{n}.log").read_text(errors="replace")[-4000:] for n in range(NODES)}
    if timed_out or any(c != 0 for c in codes) or None in results:
        raise RuntimeError(
            f"torchrun 演练没有正常结束：代理退出码 {codes}{'（超时）' if timed_out else ''}。"
            f"代理 0 的日志最后几行：\n{logs[0][-1500:]}\n代理 1：\n{logs[1][-1500:]}"
        )
    return {"driver": True, "workers": results, "agent_codes": codes, "wall": t_end - t0, "t0": t0,
            "leftovers": leftovers, "still_marked": agents.marked(MARK, mark),
            "argv": _shown(argv), "agents_forked": bool(forked)}


def worker(ctx, opts) -> dict:
    return train(ctx, opts) if _under_torchrun() else drive(ctx, opts)


# ------------------------------------------------------------------ the report

def _agent_origin(driver: dict) -> str:
    return ("；这里的两个代理不是新启动的解释器，而是驱动进程在建组之前 fork 出来的（驱动本身由已经导入 torch 的实验 zygote "
            "fork 而来），省去了各自导入 torch 的时间，命令行、环境和会话与上面的命令相同") if driver.get("agents_forked") else ""


def summarize(results, opts, ranks) -> Report:
    from ..model.recovery import resume_point
    from ..model.units import Q_, fmt

    driver = results[0] if results and results[0] and results[0].get("driver") else None
    workers = driver["workers"] if driver else results
    kill, every, steps = opts["kill_step"], opts["save_every"], opts["steps"]
    # every worker saved the steps that are multiples of save_every; killed at the start of kill_step
    point = resume_point(range(every, steps + 1, every), reached=kill - 1)
    want_resume = point.step
    w0 = workers[0]
    killed = w0["killed"] or {}
    rows = []
    victim_node = next((w["node"] for w in workers if w["rank"] == len(workers) - 1), None)
    per_node = {}
    for w in workers:
        per_node.setdefault(w["node"], set()).add(w["restart_count"])
    counts = "；".join(f"节点 {n}：{'/'.join(map(str, sorted(c)))}" for n, c in sorted(per_node.items()))
    ok = per_node.get(victim_node) == {1} and all(c <= {0, 1} for c in per_node.values())
    rows.append(Row("torchrun 的重启计数（最后一轮 worker 的 TORCHELASTIC_RESTART_COUNT）",
                    f"被杀 worker 所在的节点 {victim_node}：1（--max-restarts=1 用掉一次）；另一个节点 0 或 1",
                    counts, "一致" if ok else "不一致", ok))
    starts = w0.get("starts", [])
    want_starts = 2 * len(workers)
    ok = len(starts) == want_starts
    rows.append(Row("worker 进程一共启动了几次", f"{want_starts} 次（{len(workers)} 个 worker × 2 轮：首次 + 重启一次）",
                    f"{len(starts)} 次", "一致" if ok else "不一致", ok))
    # Set-up, not a finding: the victim writes this marker itself just before it sends itself SIGKILL.
    # It can show that the drill did not go as planned (✗), never confirm a prediction (no ✓).
    as_planned = killed.get("step") == kill and killed.get("attempt") == 0
    rows.append(Row("被杀的 worker（演练的设定）", f"rank {len(workers) - 1}，第 {kill} 步开始时（SIGKILL）",
                    f"rank {killed.get('rank')}，第 {killed.get('step')} 步，第 {killed.get('attempt', -1) + 1} 次尝试"
                    if killed else "没有记录",
                    "设定，不是检验：这条记录由被杀的 worker 自己在 SIGKILL 之前写下" if as_planned
                    else "演练没有按设定进行", None if as_planned else False))
    resumed = {w["resumed_from"] for w in workers}
    ok = resumed == {want_resume}
    rows.append(Row("从哪一步的 checkpoint 继续", f"第 {want_resume} 步（resume_point：每 {every} 步保存一次，第 {kill} 步前最新的完整一份）"
                    if want_resume else "从头开始（被杀前没有完整的 checkpoint）",
                    "、".join(f"第 {s} 步" if s else "从头" for s in sorted(resumed, key=lambda v: v or 0)),
                    "一致" if ok else "不一致", ok))
    redo = list(range((want_resume or 0) + 1, kill))  # point.lost_steps of them
    if killed:
        start = min(w["start"] for w in workers)
        joined = max(w["joined"] for w in workers)
        loaded = max(w["loaded"] for w in workers)
        back = max(w["done"].get(str(kill - 1), loaded) for w in workers) if redo else loaded
        lost = back - killed["at"]
        parts = (f"检测并重启 {start - killed['at']:.2f} s、进程启动与建组 {joined - start:.2f} s、"
                 f"加载 {loaded - joined:.2f} s" + (f"、重做第 {redo[0]}–{redo[-1]} 步 {back - loaded:.2f} s" if redo else ""))
        rows.append(Row("损失的时间（从被杀到回到被杀时的进度）", f"重启开销 + 重做 {point.lost_steps} 步",
                        f"{lost:.2f} s：{parts}", "", None))
    else:
        lost = None
    diff = max(w["final_diff"] for w in workers)
    rows.append(Row(f"训练到第 {steps} 步的权重 vs 同样的作业不中断地训练", "相同", f"最大绝对差 {fmt_diff(diff)}",
                    "一致" if diff <= TOL else "不一致", diff <= TOL))
    facts = {"restart_counts": [w["restart_count"] for w in workers], "starts": len(starts), "resumed_from": sorted(resumed, key=lambda v: v or 0),
             "killed": killed, "final_diff": diff, "time_lost": lost, "forked": all(w.get("forked") for w in workers)}
    if driver:
        ok = driver["agent_codes"] == [0] * NODES and not driver["still_marked"]
        rows.append(Row("结束后的进程", f"{NODES} 个代理都以 0 退出，没有留下任何 worker",
                        f"代理退出码 {driver['agent_codes']}；结束时强制清理 {len(driver['leftovers'])} 个，仍在的 "
                        f"{len(driver['still_marked'])} 个", "一致" if ok else "不一致", ok))
        facts.update(agent_codes=driver["agent_codes"], leftovers=driver["leftovers"], wall=driver["wall"],
                     agents_forked=driver.get("agents_forked", False))
    notes = (
        (f"两个 torchrun 代理在本机扮演两个节点：{driver['argv']}（forkrun 先导入 worker 要用的模块，再调用 torchrun 自己的 "
         f"main()，参数即 torchrun 的参数{_agent_origin(driver)}）；c10d 汇合点是驱动进程在运行时拿到的端口上的 "
         f"TCPStore，整个演练 {fmt(Q_(driver['wall'], 's'), 's', 3)}。一台机器扮演两个节点时 worker 一律用 CPU（gloo），"
         "在 GPU 集群上请用自己的 torchrun 直接运行本模块（nccl）。" if driver else
         "在 torchrun 下直接运行：重启次数取决于你给的 --max-restarts。torchrun 不等幸存 worker 的集合通信超时，"
         "用 nccl 时也一样：一个 worker 失败退出，它的代理立刻终止本节点其余的 worker 并重启（torch 的 "
         "elastic/multiprocessing/api.py：_poll 发现失败即 close()）；其他节点的代理看到有节点在等待重新汇合，"
         "也重启自己的 worker。集合通信超时（本实验 30 s，nccl 上由 watchdog 执行）只在没有任何进程退出的挂起中起作用。"),
        f"{len(workers)} 个 worker 用 FSDP2 训练一个 fp64 小模型，每 {every} 步用 torch.distributed.checkpoint 保存一次；"
        f"第 {kill} 步开始时，最后一个 worker 给自己发 SIGKILL（只在第一次尝试时，由一个标记文件保证）。",
        "被杀 worker 所在节点的代理发现它退出，立刻终止本节点其余的 worker，重新汇合并重启（--max-restarts=1）；"
        "另一个节点的 worker 的集合通信因对端断开而失败，或者它的代理先看到有节点在等待重新汇合，同样重启；"
        "新的 worker 按 DCP 元数据找到最新的完整 checkpoint 加载，重做丢掉的步，再训练到最后。",
        "重启计数是每个代理自己记的：worker 失败的节点记一次失败（1）；另一个节点若先看到有节点在等待重新汇合，"
        "按成员变化重启，不计数（0），若先看到自己的 worker 报错，也记一次（1）。",
        "torch 2.13 的 c10d 汇合默认让各轮共用一个 TCPStore，重启后的 worker 可能读到上一轮的地址（pytorch/pytorch#135712）；"
        "驱动给代理设了 TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1，每轮用新的 store。自己用 torchrun 做这个演练时也请这样设。",
        "损失的时间按开机以来的时钟（CLOCK_BOOTTIME）计：被杀时刻、新进程的启动时刻（/proc）、建组、加载完、重做完。"
        + ("worker 由 torchrun 从已经导入 torch 的代理 fork 出来（--run-path 加 --start-method=fork），启动只要几毫秒；"
           "大头是检测并重启：torchrun 的 c10d 汇合在等其他节点时每秒才查一次状态，每轮汇合约 1 s。" if driver else
           "每个 worker 是一个新的 Python 进程，进程启动（导入 torch）在小机器上占大头。"),
        "对照：每个 worker 最后在内存里把同一个作业不中断地从头训练一遍，比较最终权重。",
    )
    return Report(TITLE, tuple(rows), notes, facts)


if __name__ == "__main__":
    main(sys.modules[__name__])
