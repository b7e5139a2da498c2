"""Book build times in a temporary copy of the repository (issue 16: clean <= 60 s, prose edit <= 15 s).

    PYTHONPATH=$PWD python benchmarks/bench_build.py                # clean, no-op, prose, package edits
    PYTHONPATH=$PWD python benchmarks/bench_build.py --fresh-clone  # also `make book` in a fresh git clone

Each figure is one `python -m parallel_budget.book.build <copy> -W --keep-going` (what `make book`
runs), with the pages myst-nb executed.  The machine is shared: the load average and the CPU time
of the build (user + sys of its process tree) are printed beside the wall time; read them together.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IGNORE = shutil.ignore_patterns("_build", ".git", ".venv", "venv", "node_modules", "__pycache__", ".pytest_cache",
                                ".hypothesis", ".ipynb_checkpoints")
TARGETS = {"clean": 60.0, "prose edit (intro)": 15.0, "prose edit (lab chapter)": 15.0}


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def build(copy: Path, label: str) -> tuple[float, set[str]]:
    env = dict(os.environ, PYTHONPATH=str(copy), PYDEVD_DISABLE_FILE_VALIDATION="1")
    load = os.getloadavg()[0]
    cpu0, t0 = children_cpu(), time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "parallel_budget.book.build", str(copy), "-W", "--keep-going"],
                          cwd=copy, env=env, capture_output=True, text=True, timeout=1800)
    wall, cpu = time.monotonic() - t0, children_cpu() - cpu0
    if proc.returncode != 0:
        sys.exit(f"{label}: build failed\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    executed = set(re.findall(r"book/([\w-]+)\.md: Executed notebook", proc.stdout + proc.stderr))
    target = TARGETS.get(label)
    verdict = "" if target is None else ("  ok" if wall <= target else f"  MISSED (target {target:g} s)")
    print(f"{label:<28} {wall:7.1f} s wall {cpu:7.1f} s cpu   load {load:4.1f}   "
          f"{len(executed):2d} page(s) executed{verdict}", flush=True)
    return wall, executed


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path}: {old!r} not found"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def fresh_clone(tmp: Path) -> None:
    """`make book` in a fresh clone of the committed tree (pip's cache stays warm)."""
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PB_SITE")}
    env["PATH"] = ":".join(p for p in env.get("PATH", "").split(":") if "/.venv/" not in p)
    t0 = time.monotonic()
    proc = subprocess.run(["make", "book"], cwd=clone, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"fresh clone: make book failed\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    print(f"{'make book, fresh clone':<28} {wall:7.1f} s wall   {'ok' if wall <= 150 else 'MISSED (target 150 s)'}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fresh-clone", action="store_true", help="also time `make book` in a fresh git clone")
    args = ap.parse_args(argv)
    print(f"{os.cpu_count()} CPUs, PB_BUILD_JOBS={os.environ.get('PB_BUILD_JOBS', '4 (default)')}")
    with tempfile.TemporaryDirectory(prefix="pb-bench-build-") as tmp:
        copy = Path(tmp) / "repo"
        shutil.copytree(ROOT, copy, ignore=IGNORE, symlinks=True)
        build(copy, "clean")
        build(copy, "no-op")
        edit(copy / "book" / "intro.md", "读完本课，", "读完本课之后，")
        build(copy, "prose edit (intro)")
        edit(copy / "book" / "tp-pp.md", "\n## ", "\n本段为基准测试所加。\n\n## ")
        build(copy, "prose edit (lab chapter)")
        units = copy / "parallel_budget" / "model" / "units.py"
        units.write_text(units.read_text(encoding="utf-8") + "\n# benchmark edit\n", encoding="utf-8")
        build(copy, "package edit (model/units)")
        runner = copy / "parallel_budget" / "grading" / "runner.py"
        runner.write_text(runner.read_text(encoding="utf-8") + "\n# benchmark edit\n", encoding="utf-8")
        build(copy, "package edit (grading)")
        if args.fresh_clone:
            fresh_clone(Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
