"""Wall time of each lab for 2 ranks beside the floor measured in the same run.

The floor is two processes that import torch, join a gloo group and exit
(``run_lab("floor")``).  Target (issue 6): every lab at most 10 s and at most
3x the floor.  Also an opt-in stress mode: every lab N times in a row and
pairs of labs at once, counting failures, port collisions and survivors.

    PYTHONPATH=$PWD python benchmarks/bench_labs.py              # 2 rounds of timing
    PYTHONPATH=$PWD python benchmarks/bench_labs.py --stress 20  # full stress

Timings on a shared 2-core machine are noisy: read both rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from parallel_budget.labs import LABS, live_processes, run_lab

LIMIT_S = 10.0
LIMIT_X = 3.0


def timing(rounds: int, log_dir: str, labs) -> bool:
    """Each round: floor runs at the start, middle and end; the ratio uses their median (x floor),
    and, stricter, their smallest (x min)."""
    ok = True

    def floor_run():
        return run_lab("floor", log_dir=log_dir).wall_time.to("s").magnitude

    for rnd in range(1, rounds + 1):
        floors = [floor_run()]
        rows = []
        for i, name in enumerate(labs):
            if i == len(labs) // 2:
                floors.append(floor_run())
            r = run_lab(name, log_dir=log_dir)
            times = [t for t in r.rank_times if t]
            rows.append((name, r.wall_time.to("s").magnitude, max(t["join"] for t in times), max(t["work"] for t in times)))
        floors.append(floor_run())
        floor, low = statistics.median(floors), min(floors)
        print(f"\nround {rnd}: floor (import torch + join gloo, 2 ranks) = {floor:.2f} s, median of "
              f"{', '.join(f'{f:.2f}' for f in floors)} s (start, middle, end); load average {os.getloadavg()[0]:.1f}")
        print(f"{'lab':<16} {'wall s':>7} {'x floor':>8} {'x min':>6} {'join s':>7} {'work s':>7}"
              f"  target (<= {LIMIT_S:g} s, <= {LIMIT_X:g}x floor)")
        for name, wall, join, work in rows:
            hit = wall <= LIMIT_S and wall <= LIMIT_X * floor
            ok &= hit
            print(f"{name:<16} {wall:7.2f} {wall / floor:8.2f} {wall / low:6.2f} {join:7.2f} {work:7.2f}"
                  f"  {'ok' if hit else 'MISSED'}")
    return ok


def stress(n: int, log_dir: str, labs) -> bool:
    print(f"\nstress: every lab {n} times in a row (2 ranks)")
    total_fail = total_left = 0
    for name in labs:
        fails = left = 0
        walls = []
        for i in range(n):
            r = run_lab(name, log_dir=log_dir, check=False)
            fails += r.is_failed()
            left += len(live_processes(r.run_id))
            walls.append(r.wall_time.to("s").magnitude)
        total_fail += fails
        total_left += left
        print(f"{name:<16} runs {n}  failures {fails}  survivors {left}  wall median {statistics.median(walls):.2f} s"
              f"  max {max(walls):.2f} s")
    pairs = list(zip(labs[::2], labs[1::2]))
    collisions = pair_fail = 0
    for a, b in pairs:
        with ThreadPoolExecutor(2) as pool:
            rs = [f.result() for f in [pool.submit(run_lab, x, log_dir=log_dir, check=False) for x in (a, b)]]
        pair_fail += sum(r.is_failed() for r in rs)
        collisions += rs[0].master_port == rs[1].master_port
        collisions += sum(any("Address already in use" in e for e in r.stderrs) for r in rs)
        total_left += sum(len(live_processes(r.run_id)) for r in rs)
    print(f"two labs at once: {len(pairs)} pairs, failures {pair_fail}, port collisions {collisions}")
    print(f"total: failures {total_fail + pair_fail}, survivors {total_left}, port collisions {collisions}")
    return total_fail + pair_fail + total_left + collisions == 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2, help="timing rounds (each measures its own floor)")
    p.add_argument("--stress", type=int, default=0, help="also run every lab N times in a row")
    p.add_argument("--labs", default=",".join(LABS), help="comma-separated subset")
    args = p.parse_args(argv)
    labs = [x for x in args.labs.split(",") if x]
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench_labs_") as log_dir:
        ok = timing(args.rounds, log_dir, labs) if args.rounds else True
        if args.stress:
            ok &= stress(args.stress, log_dir, labs)
    print(f"\nbenchmark finished in {time.monotonic() - t0:.0f} s: {'all targets met' if ok else 'SOME TARGET MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
