"""Benchmark of the grade command (issues 5, 7 and 12). Prints figures; asserts nothing.

    python benchmarks/bench_grading.py [--students 60] [--jobs 2] [--floor-students 10]
    python benchmarks/bench_grading.py --cluster local:2 [--students 20] [--jobs 2]

In one run, in throw-away copies of the course:

1. floor: plain ``nbgrader autograde`` (one process, serial, stock kernels started
   from scratch) of a one-notebook assignment whose notebook is empty, for
   ``--floor-students`` students: seconds per notebook = kernel start-up plus
   nbgrader's own overhead.  The course's grade command forks warm kernels
   (``parallel_budget.grading.sandbox.forkserver``), so it runs below this floor;
2. unsandboxed: ``grade --jobs 1 --no-sandbox`` of a synthetic class
   (``classroom.write_class``: right answers, classic slips, blank notebooks) x all notebooks;
3. sandboxed: ``grade --jobs 1`` (every kernel in bubblewrap, trusted checks) of the same class;
4. parallel: ``grade --jobs N`` (sandboxed) of the same class.

It prints seconds per notebook for the floor, unsandboxed and sandboxed (targets: sandboxed at
most 1.3x unsandboxed and at most 0.5x the floor), the --jobs N ratio, the time extrapolated
linearly to 300 students x all notebooks (target: at most 10 minutes), the kernel counts, and
whether all runs produced the same CSV.

With ``--cluster ADDRESS|local:N`` (issue 28) it runs only ``grade --jobs N`` and ``grade --cluster``
of the same class, one after the other, and prints seconds per notebook of both (target: the
cluster within 1.2x of the local pool), whether their CSVs are identical, and the core-hours that
10 000 students x all notebooks would take at the cluster's measured cost per notebook
(wall seconds x worker processes / notebooks).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from parallel_budget.grading.intake import synthetic  # noqa: E402
from parallel_budget.grading.course import Course  # noqa: E402
from parallel_budget.grading.runner import grade  # noqa: E402


def course_copy(dest: Path) -> Course:
    (dest / "autograde").mkdir(parents=True)
    for name in ("nbgrader_config.py", "header.ipynb"):
        shutil.copy(ROOT / "autograde" / name, dest / "autograde" / name)
    for folder in ("solutions", "exercises"):
        shutil.copytree(ROOT / folder, dest / folder)
    return Course(dest)


def floor(tmp: Path, students: int) -> float:
    """Seconds per notebook of plain nbgrader autograding an empty notebook."""
    course = tmp / "floor"
    (course / "source" / "empty").mkdir(parents=True)
    nb = {"cells": [], "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    (course / "source" / "empty" / "empty.ipynb").write_text(json.dumps(nb))
    (course / "nbgrader_config.py").write_text("c = get_config()\nc.CourseDirectory.course_id = 'floor'\n")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    nbgrader = [sys.executable, "-m", "nbgrader"]
    subprocess.run(nbgrader + ["generate_assignment", "empty", "--force"], cwd=course, env=env, check=True, capture_output=True)
    for i in range(students):
        dest = course / "submitted" / f"f{i:03d}" / "empty"
        dest.mkdir(parents=True)
        shutil.copy(course / "release" / "empty" / "empty.ipynb", dest / "empty.ipynb")
    start = time.monotonic()
    subprocess.run(nbgrader + ["autograde", "empty", "--force"], cwd=course, env=env, check=True, capture_output=True)
    return (time.monotonic() - start) / students


def cluster_run(tmp: Path, incoming: Path, n: int, notebooks: int, jobs: int, target: str) -> None:
    """``--jobs`` against ``--cluster`` on the same class; seconds per notebook and the 10 000-student projection."""
    times, csvs = {}, {}
    for label, options in (("jobs", {"jobs": jobs}), ("cluster", {"cluster": target})):
        course = course_copy(tmp / label)
        start = time.monotonic()
        summary = grade(incoming, root=course.root, quiet=True, **options)
        times[label] = time.monotonic() - start
        csvs[label] = course.grades_csv.read_text(encoding="utf-8")
        assert not summary["failed"], summary
    workers = int(target.split(":", 1)[1]) if target.startswith("local:") else jobs
    per = {label: t / n for label, t in times.items()}
    core_seconds = times["cluster"] * workers / n
    print(f"machine: {os.cpu_count()} cores; class: {n // notebooks} students x {notebooks} notebooks = {n} notebooks")
    print(f"grade --jobs {jobs}: {per['jobs']:.3f} s/notebook; grade --cluster {target}: {per['cluster']:.3f} s/notebook "
          f"= {per['cluster'] / per['jobs']:.2f}x (target <= 1.2x); CSV identical: {csvs['jobs'] == csvs['cluster']}")
    print(f"cost on the cluster: {core_seconds:.2f} core-s/notebook ({workers} workers); 10 000 students x {notebooks} "
          f"notebooks: {10_000 * notebooks * core_seconds / 3600:.1f} core-hours")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--floor-students", type=int, default=10)
    parser.add_argument("--cluster", help="only --jobs N against --cluster ADDRESS|local:N (issue 28)")
    args = parser.parse_args()
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        tmp = Path(tmp)
        template = course_copy(tmp / "template")
        notebooks = len(template.notebooks("lesson"))
        incoming = tmp / "class"
        synthetic.write_class(template, "lesson", incoming, args.students)
        n = args.students * notebooks
        if args.cluster:
            return cluster_run(tmp, incoming, n, notebooks, args.jobs, args.cluster)
        per_floor = floor(tmp, args.floor_students)
        times = {}
        csvs = {}
        kernels = {}
        runs = (("unsandboxed", 1, False), ("sandboxed", 1, True), ("parallel", args.jobs, True))
        for label, jobs, sandboxed in runs:
            course = course_copy(tmp / label)
            start = time.monotonic()
            summary = grade(incoming, root=course.root, jobs=jobs, quiet=True, sandbox=sandboxed)
            times[label] = time.monotonic() - start
            csvs[label] = course.grades_csv.read_text(encoding="utf-8")
            kernels[label] = summary["kernels"]
            assert not summary["failed"], summary
        per = {label: times[label] / n for label in times}
        ratio = times["sandboxed"] / times["parallel"]
        print(f"machine: {os.cpu_count()} cores; class: {args.students} students x {notebooks} notebooks = {n} notebooks")
        print(f"floor (nbgrader autograde, empty notebook, serial): {per_floor:.2f} s/notebook")
        print(f"grade --jobs 1 --no-sandbox: {per['unsandboxed']:.2f} s/notebook = {per['unsandboxed'] / per_floor:.2f}x floor")
        print(f"grade --jobs 1 (sandboxed, trusted checks): {per['sandboxed']:.2f} s/notebook = "
              f"{per['sandboxed'] / per['unsandboxed']:.2f}x unsandboxed (target <= 1.3x) = "
              f"{per['sandboxed'] / per_floor:.2f}x floor (target <= 0.5x)")
        print(f"sandboxed --jobs 1: {times['sandboxed']:.1f} s; --jobs {args.jobs}: {times['parallel']:.1f} s; "
              f"ratio {ratio:.2f}x")
        print(f"extrapolated 300 students x {notebooks} notebooks, sandboxed, --jobs {args.jobs}: "
              f"{times['parallel'] * 300 / args.students / 60:.1f} min (target <= 10 min)")
        print("kernels (forked from the warm fork server / started from scratch): "
              + "; ".join(f"{label} {k['forked']} / {k['fresh']}" for label, k in kernels.items()))
        print(f"all runs' CSV identical: {len(set(csvs.values())) == 1}")


if __name__ == "__main__":
    main()
