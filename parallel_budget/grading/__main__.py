"""Command line: ``python -m parallel_budget.grading <command>``.

    release [--assignment A]           solutions/ -> exercises/ (nbgrader generate_assignment)
    check-release [--assignment A]     exit 1 when exercises/ is stale against solutions/
    grade [SUBMISSIONS] [--jobs N]     collect, autograde, feedback, export CSV, integrity report
    export                             rewrite autograde/grades.csv and autograde/integrity.csv

Run ``... <command> --help`` for the options.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

from .course import Course, CourseError


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--jobs 需要正整数,收到 {text!r}。例如 --jobs 4") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"--jobs 至少为 1,收到 {n}。")
    return n


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m parallel_budget.grading", description="课程的 nbgrader 评分命令。")
    parser.add_argument("--root", help="课程仓库根目录(默认:从当前目录向上查找 autograde/nbgrader_config.py)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("release", "从 solutions/ 生成 exercises/"), ("check-release", "检查 exercises/ 是否过期")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--assignment", help="作业名(默认:全部)")
    g = sub.add_parser("grade", help="一条命令评完一个班:收集、自动评分、反馈、导出 CSV、诚信报告")
    g.add_argument("submissions", nargs="?", help="提交所在的文件夹(<学生>/<作业>/*.ipynb 或 <学生>/*.ipynb)"
                   "或 nbgrader zip_collect 压缩包;省略时评 autograde/submitted/")
    g.add_argument("--assignment", help="作业名(只有一个作业时可省略)")
    g.add_argument("--jobs", type=_jobs, default=os.cpu_count() or 1, help="并行评分的进程数(默认:CPU 核数)")
    g.add_argument("--student", action="append", help="只评这个学生(可重复);用于重评一个人")
    g.add_argument("--force", action="store_true", help="重评所有人,即使提交没有变化")
    g.add_argument("--timeout", type=int, help="每个单元的超时秒数(默认按 nbgrader_config.py,30 秒)")
    g.add_argument("--no-sandbox", action="store_true", help="不用沙箱评分(只在无法建立沙箱、且提交可信时使用)")
    sub.add_parser("export", help="重新导出 autograde/grades.csv 和 autograde/integrity.csv")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")

    def _terminate(signum, frame):  # `kill` gets the same clean stop as Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    try:
        course = Course(args.root)
        if args.command == "grade":
            from .runner import grade

            summary = grade(args.submissions, root=course.root, assignment=args.assignment, jobs=args.jobs,
                            students=args.student, force=args.force, timeout=args.timeout,
                            sandbox=not args.no_sandbox)
            return 1 if summary["failed"] else 0
        if args.command == "export":
            from .runner import export

            export(course)
            print(f"已导出 {course.grades_csv} 和 {course.integrity_csv}")
            return 0
        from .release import generate, stale_notebooks

        names = [args.assignment] if args.assignment else course.assignments()
        if args.command == "release":
            for a in names:
                print(f"已生成 {generate(course, a, course.release)}")
            return 0
        stale = {a: stale_notebooks(course, a) for a in names}
        bad = {a: s for a, s in stale.items() if s}
        for a, s in bad.items():
            print(f"exercises/{a} 已过期:{', '.join(s)}。请运行 python -m parallel_budget.grading release", file=sys.stderr)
        return 1 if bad else 0
    except CourseError as exc:
        print(f"错误:{exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("已中断:成绩册保持运行前的状态;再次运行同一命令会接着完成。", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
