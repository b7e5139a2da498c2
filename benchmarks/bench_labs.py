"""Wall time and CPU seconds of each lab, ranks forked from the zygote beside plain ``python -m`` ranks.

Each lab runs at its default number of ranks (2; 4 for ``ring_allreduce``, ``checkpoint`` and
``pipeline_schedule``; one driver for ``restart_drill``).  The floor is two ranks that import torch, join a
gloo group and exit (``run_lab("floor")``), measured in the same round.  Targets: issue 6's labs, on plain
``python -m`` ranks, at most 10 s and at most 3x the floor; forked from the zygote, at most 10 s and the floor
far below the plain one.  Issue 27's labs at most 15 s each, ``restart_drill`` included (two torchrun
agents import torch and fork two rounds of four workers; the book build also reuses its result while the
package is unchanged, ``labs/engine/cache.py``).  With more than one round, the median wall time of each lab
over the rounds closes the timing.
The stress mode runs every lab N times in a row (a lab's ``STRESS_RUNS`` caps N, its ``STRESS_OPTIONS``
lighten it, as in tests/test_labs_reliability.py) in each launch mode, with the CPU seconds of all its
processes (``getrusage`` of this process and its reaped children; each lab's zygote is ended after its N
runs so that its own CPU, one import of torch, is counted too), then pairs of labs at once, counting
failures, port collisions and survivors.

    PYTHONPATH=$PWD python benchmarks/bench_labs.py                      # 2 rounds of timing
    PYTHONPATH=$PWD python benchmarks/bench_labs.py --rounds 0 --stress 20  # the CI stress, both modes

Timings on a shared 2-core machine are noisy: read both rounds and the load average.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from parallel_budget.labs import LABS, LaunchConfig, live_processes, run_lab
from parallel_budget.labs.engine import zygoteclient
from parallel_budget.labs.engine.config import lab_module
from parallel_budget.labs.engine.launcher import launch

LIMIT_S = 10.0
LIMIT_X = 3.0
ISSUE_27 = {"fsdp": 15.0, "tensor_parallel": 15.0, "pipeline_schedule": 15.0, "checkpoint": 15.0,
            "overlap": 15.0, "restart_drill": 15.0}  # None would mean: reported, no target
MODES = {"zygote": True, "plain": False}


def _run(name: str, log_dir: str, forked: bool, stress: bool = False):
    options = getattr(lab_module(name), "STRESS_OPTIONS", {}) if stress else {}
    return launch(LaunchConfig(lab=name, log_dir=log_dir, zygote=forked, options=options), check=False)


def _cpu() -> float:
    """CPU seconds of this process and of every child it has reaped."""
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                   resource.getrusage(resource.RUSAGE_CHILDREN)))


def timing(rounds: int, log_dir: str, labs) -> bool:
    """Each round, in both modes: floor at the start, middle and end (ratios use the median), then every lab."""
    ok = True
    every = {}  # (mode, lab) -> wall time of each round
    for rnd in range(1, rounds + 1):
        walls, floors, joins = {}, {}, {}
        for mode, forked in MODES.items():
            _run("floor", log_dir, forked)  # warm: the zygote starts once per process, not once per lab
            fl = [_run("floor", log_dir, forked).wall_time.to("s").magnitude]
            for i, name in enumerate(labs):
                if i == len(labs) // 2:
                    fl.append(_run("floor", log_dir, forked).wall_time.to("s").magnitude)
                r = _run(name, log_dir, forked)
                ok &= not r.is_failed() and all(f == forked for f in r.forked)
                times = [t for t in r.rank_times if t]
                walls[mode, name] = r.wall_time.to("s").magnitude
                joins[mode, name] = (max(t["join"] for t in times), max(t["work"] for t in times), r.ranks)
            fl.append(_run("floor", log_dir, forked).wall_time.to("s").magnitude)
            floors[mode] = fl
            zygoteclient.close_all()
        fz, fp = statistics.median(floors["zygote"]), statistics.median(floors["plain"])
        print(f"\nround {rnd}: floor (2 ranks join gloo and exit) forked from the zygote {fz:.2f} s, as python -m "
              f"{fp:.2f} s (medians of {', '.join(f'{f:.2f}' for f in floors['plain'])} s: start, middle, end); "
              f"load average {os.getloadavg()[0]:.1f}")
        print(f"{'lab':<17} {'ranks':>5} {'zygote s':>9} {'join s':>7} {'work s':>7} {'python -m s':>12} {'x floor':>8}"
              f" {'join s':>7}  target (<= {LIMIT_S:g} s; python -m <= {LIMIT_X:g}x floor; issue 27's labs <= 15 s)")
        for name in labs:
            wz, wp = walls["zygote", name], walls["plain", name]
            if name in ISSUE_27:
                limit = ISSUE_27[name]
                hit = limit is None or (wz <= limit and wp <= limit)
            else:
                hit = wz <= LIMIT_S and wp <= LIMIT_S and wp <= LIMIT_X * fp
            ok &= hit
            jz, work, ranks = joins["zygote", name]
            verdict = "no target" if ISSUE_27.get(name, 0) is None else "ok" if hit else "MISSED"
            print(f"{name:<17} {ranks:>5} {wz:9.2f} {jz:7.2f} {work:7.2f} {wp:12.2f} {wp / fp:8.2f}"
                  f" {joins['plain', name][0]:7.2f}  {verdict}")
        for key, wall in walls.items():
            every.setdefault(key, []).append(wall)
    if rounds > 1:
        print(f"\nmedian wall time of {rounds} rounds (s): lab, zygote, python -m")
        for name in labs:
            print(f"{name:<17} {statistics.median(every['zygote', name]):9.2f} {statistics.median(every['plain', name]):12.2f}")
    return ok


def stress(n: int, log_dir: str, labs, modes) -> bool:
    total_bad = 0
    summary = {}
    for mode in modes:
        forked = MODES[mode]
        print(f"\nstress, {mode} ({'ranks forked from the zygote' if forked else 'every rank its own python -m'}): "
              f"every lab {n} times in a row; load average {os.getloadavg()[0]:.1f}")
        wall_all = cpu_all = 0.0
        for name in labs:
            fails = left = 0
            walls = []
            cpu0, t0 = _cpu(), time.monotonic()
            runs = min(n, getattr(lab_module(name), "STRESS_RUNS", n))
            for _ in range(runs):
                r = _run(name, log_dir, forked, stress=True)
                fails += r.is_failed() or any(f != forked for f in r.forked)
                left += len(live_processes(r.run_id))
                walls.append(r.wall_time.to("s").magnitude)
            zygoteclient.close_all()  # its CPU (one import of torch) is counted once reaped
            cpu, wall = _cpu() - cpu0, time.monotonic() - t0
            wall_all += wall
            cpu_all += cpu
            total_bad += fails + left
            print(f"{name:<17} runs {runs:2d}  failures {fails}  survivors {left}  wall {wall:6.1f} s (median "
                  f"{statistics.median(walls):.2f}, max {max(walls):.2f})  CPU {cpu:6.1f} s ({cpu / runs:.2f} s per run)")
        summary[mode] = (wall_all, cpu_all)
        print(f"{mode}: {len(labs)} labs x {n} runs: wall {wall_all:.0f} s, CPU {cpu_all:.0f} s")
    if len(summary) == 2:
        (wz, cz), (wp, cp) = summary["zygote"], summary["plain"]
        print(f"\nzygote / python -m: wall {wz:.0f} / {wp:.0f} s ({wz / wp:.0%}), CPU {cz:.0f} / {cp:.0f} s ({cz / cp:.0%})")
    pairs = list(zip(labs[::2], labs[1::2]))
    collisions = pair_fail = 0
    for a, b in pairs:
        with ThreadPoolExecutor(2) as pool:
            rs = [f.result() for f in [pool.submit(run_lab, x, log_dir=log_dir, check=False) for x in (a, b)]]
        pair_fail += sum(r.is_failed() for r in rs)
        collisions += rs[0].master_port == rs[1].master_port
        collisions += sum(any("Address already in use" in e for e in r.stderrs) for r in rs)
        total_bad += sum(len(live_processes(r.run_id)) for r in rs)
    print(f"two labs at once: {len(pairs)} pairs, failures {pair_fail}, port collisions {collisions}")
    print(f"total: failures or survivors {total_bad + pair_fail}, port collisions {collisions}")
    return total_bad + pair_fail + collisions == 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2, help="timing rounds (each measures its own floors)")
    p.add_argument("--stress", type=int, default=0, help="also run every lab N times in a row")
    p.add_argument("--modes", default="zygote,plain", help="stress launch modes: zygote, plain or both")
    p.add_argument("--labs", default=",".join(LABS), help="comma-separated subset")
    args = p.parse_args(argv)
    labs = [x for x in args.labs.split(",") if x]
    modes = [m for m in args.modes.split(",") if m]
    if not set(modes) <= set(MODES):
        p.error(f"--modes: zygote, plain or zygote,plain, not {args.modes!r}")
    import torch.distributed  # noqa: F401 - the launcher's own import, outside every measurement

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench_labs_") as log_dir:
        ok = timing(args.rounds, log_dir, labs) if args.rounds else True
        if args.stress:
            ok &= stress(args.stress, log_dir, labs, modes)
    print(f"\nbenchmark finished in {time.monotonic() - t0:.0f} s: {'all targets met' if ok else 'SOME TARGET MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
