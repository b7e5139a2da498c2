"""What does the possible-copying comparison cost a grading process? (per-student numbers, c.Variants.enabled)

Plays the grader's hook (``parallel_budget.grading.intake.student_numbers.Swap``) for students whose every
varied, non-integer answer is wrong in a way no named mistake explains, so each answer is compared
with every classmate's variant.  Prints the first student of a process (caches cold) and the mean
of the next ones (caches warm), for a class of ``--students``.

    .venv/bin/python benchmarks/bench_variants.py --students 300
"""

from __future__ import annotations

import argparse
import time


def one(student_numbers, variants, student: str, peers: list) -> int:
    compared = 0
    for nb, scenarios in variants.SCENARIOS.items():
        for scenario in scenarios:
            for gid, _ in scenario.tests:
                swap = student_numbers.Swap("parallel-budget", "lesson", nb, student, gid, peers, [])
                if swap.q.kind != "int":
                    swap.value(swap.q.answer, 12345.678, None, swap.q.kind)
                    compared += 1
    return compared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=10, help="warm students timed after the first")
    args = parser.parse_args()
    from parallel_budget.grading.intake import student_numbers
    from parallel_budget.questions import variants

    peers = [f"s{i:03d}" for i in range(args.students)]
    t = time.perf_counter()
    answers = one(student_numbers, variants, "x000", peers)
    cold = time.perf_counter() - t
    t = time.perf_counter()
    for i in range(args.repeat):
        one(student_numbers, variants, f"x{i + 1:03d}", peers)
    warm = (time.perf_counter() - t) / args.repeat
    print(f"{args.students} classmates, {answers} wrong answers per student compared with each of them")
    print(f"first student of a grading process (caches cold): {cold:.2f} s")
    print(f"each further student (caches warm):              {warm:.3f} s")


if __name__ == "__main__":
    main()
