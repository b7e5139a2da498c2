"""Command line: ``python -m parallel_budget.grading <command>``.

    release [--assignment A]           solutions/ -> exercises/ (nbgrader generate_assignment)
    check-release [--assignment A]     exit 1 when exercises/ is stale against solutions/
    grade [SUBMISSIONS] [--jobs N]     collect, autograde, feedback, export CSV, integrity report
          [--cluster ADDRESS|local:N]  (the shards on a Dask cluster)
    export                             rewrite autograde/grades.csv and autograde/integrity.csv
    formgrader [--port P]              JupyterLab at the course root with formgrader (manual grading)
    feedback [--student ID]            rewrite feedback HTML from the gradebook (after manual grading)
    numbers STUDENT...                 a student's per-student numbers (c.Variants.enabled), as their notebook shows them
    nbgrader ARGS...                   stock nbgrader (collect, zip_collect, list, ...) in autograde/,
                                       with this venv's tools on PATH

Run ``... <command> --help`` for the options.

Exit codes of ``grade`` (also in ``autograde/README.md``):

    0    every student was graded (or skipped as unchanged)
    1    some students were not graded (listed with their reasons; nothing written for them,
         their earlier grades kept; rerunning the same command grades them), or the command
         stopped on an unexpected error (a log file is named)
    2    bad command line or course configuration (the message says what is accepted)
    3    preflight refused: a kernel started the way the grader starts them cannot import the
         course package or run a check; nothing was collected or written
    130  interrupted (Ctrl-C or kill); batches already merged stay, rerunning finishes the rest
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import sysconfig
import time
import traceback
from pathlib import Path

from .course import Course, CourseError
from .results.csp import SERVER_POLICY

# Jupyter config (labconfig/page_config.json) enabling nbgrader's instructor tools in formgrader's JupyterLab.
INSTRUCTOR_JUPYTER_CONFIG = Path(__file__).resolve().parent / "jupyter_config"


# What the release command adds after naming the edition it wrote (release.edition).
SWITCH = {
    "practice": "仓库里提交的 exercises/ 就是这一版。正式考核要发正式评分版：在 autograde/nbgrader_config.py 里设 "
                "c.PracticeCheck.enabled = False 后重新发布（autograde/README.md 第 1 节）。",
    "graded": "这是正式评分版：不要把它提交进仓库（仓库里的 exercises/ 是自学版），发给学生后把设置改回 "
              "c.PracticeCheck.enabled = True 并重新发布。",
}


GRADE_EXIT_CODES = """grade 的退出码：
  0    所有学生都已评分（或因提交未变而跳过）
  1    有学生未评分（摘要里逐一列出原因；没有为他们写入成绩，原有成绩不变；再运行同一命令会评完他们），
       或命令因意外错误中止（会给出日志文件）
  2    命令行或课程配置有误（消息里说明错在哪、接受什么）
  3    预检未通过：按评分方式启动的内核无法导入课程包或运行检查；什么都没有收集，也没有写入
  130  被中断（Ctrl-C 或 kill）；已合并的批次保留，再运行同一命令会接着完成"""


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--jobs 需要正整数，收到 {text!r}。例如 --jobs 4") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"--jobs 至少为 1，收到 {n}。")
    return n


def _cluster(text: str) -> str:
    from .fleet.cluster import parse_target

    try:
        return parse_target(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def own_tools() -> None:
    """Put this interpreter's scripts folder first on PATH: nbgrader runs ``alembic`` (and workers
    inherit the environment), so the command works from a shell where the venv is not activated."""
    folders = [sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]
    rest = os.environ.get("PATH", "").split(os.pathsep)
    os.environ["PATH"] = os.pathsep.join(dict.fromkeys(f for f in folders + rest if f))


def _log_failure(course_root) -> str:
    """Write the traceback of the current exception to a log file; return its path for the one-line message."""
    folder = Path(course_root) / "autograde" / ".work" / "logs" if course_root else Path.cwd()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"command-{time.strftime('%Y%m%d-%H%M%S')}.log"
        path.write_text(traceback.format_exc(), encoding="utf-8")
    except OSError:
        return "（无法写日志）"
    return str(path)


def formgrader(course, port: int | None, browser: bool, extra=()) -> int:
    """Replace this process by JupyterLab rooted at the course root, with formgrader and our extension."""
    args = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={course.root}",
            "--ServerApp.jpserver_extensions={'parallel_budget.grading.results.formgrader': True}",
            "--ip=127.0.0.1",
            # JupyterLab's own pages: no plugin, no <base>, framed only by itself (formgrader's pages get
            # the strict policy of .csp from the extension).
            "--ServerApp.tornado_settings=" + json.dumps({"headers": {"Content-Security-Policy": SERVER_POLICY}})]
    if port:
        args.append(f"--port={port}")
    if not browser:
        args.append("--no-browser")
    if os.geteuid() == 0:
        args.append("--allow-root")
    args.extend(a for a in extra if a != "--")
    os.chdir(course.autograde)  # nbgrader reads nbgrader_config.py from the current folder
    # The students' JupyterLab hides nbgrader's instructor tools (scripts/setup.sh); this config folder,
    # searched before the venv's, enables them again for the instructor.
    os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
        p for p in (str(INSTRUCTOR_JUPYTER_CONFIG), os.environ.get("JUPYTER_CONFIG_PATH", "")) if p)
    print(f"formgrader：{course.root} 下的 JupyterLab，打开后在 Nbgrader → Formgrader（Ctrl-C 停止）。", flush=True)
    os.execv(sys.executable, args)
    return 0  # not reached


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m parallel_budget.grading", description="课程的 nbgrader 评分命令。",
                                     epilog=GRADE_EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", help="课程仓库根目录（默认：从当前目录向上查找 autograde/nbgrader_config.py）")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("release", "从 solutions/ 生成 exercises/"), ("check-release", "检查 exercises/ 是否过期")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--assignment", help="作业名（默认：全部）")
    g = sub.add_parser("grade", help="一条命令评完一个班：收集、自动评分、反馈、导出 CSV、诚信报告",
                       epilog=GRADE_EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    g.add_argument("submissions", nargs="?", help="提交所在的文件夹（<学生>/<作业>/*.ipynb 或 <学生>/*.ipynb）"
                   "或 nbgrader zip_collect 压缩包；省略时评 autograde/submitted/")
    g.add_argument("--assignment", help="作业名（只有一个作业时可省略）")
    g.add_argument("--jobs", type=_jobs, default=os.cpu_count() or 1, help="并行评分的进程数（默认：CPU 核数）")
    g.add_argument("--cluster", type=_cluster, metavar="ADDRESS|local:N",
                   help="在 Dask 集群上评分：调度器地址（dask scheduler 打印的地址，例如 tcp://10.0.0.5:8786），"
                   "或 local:N（本机 N 个 worker 进程）；见 autograde/README.md 第 7 节")
    g.add_argument("--student", action="append", help="只评这个学生（可重复）；用于重评一个人")
    g.add_argument("--from-student", metavar="ID", default="",
                   help="这份上传只属于这位学生（迟交）：文件只进他/她的提交，指向别人的文件隔离在他/她名下")
    g.add_argument("--layout", choices=("auto", "folders", "lms"), default="auto",
                   help="上传的布局：folders（<学生>/…）、lms（顶层 <学生>_<notebook>.ipynb）或 auto（两者，默认）")
    g.add_argument("--unwrap", action="store_true", help="上传只有一个顶层文件夹、它是外包的一层（例如 lms-export/）时，读它里面")
    g.add_argument("--force", action="store_true", help="重评所有人，即使提交没有变化")
    g.add_argument("--timeout", type=int, help="每个单元的超时秒数（默认按 nbgrader_config.py，30 秒）")
    g.add_argument("--no-sandbox", action="store_true", help="不用沙箱评分（只在无法建立沙箱、且提交可信时使用）")
    sub.add_parser("export", help="重新导出 autograde/grades.csv 和 autograde/integrity.csv")
    fb = sub.add_parser("feedback", help="按成绩册重写反馈 HTML（在 formgrader 里人工评分之后）")
    fb.add_argument("--assignment", help="作业名（只有一个作业时可省略）")
    fb.add_argument("--student", action="append", help="只重写这个学生的反馈（可重复）")
    nu = sub.add_parser("numbers", help="打印学生的个人数字（c.Variants.enabled 时 notebook 里显示的那些）")
    nu.add_argument("students", nargs="+", help="学生编号（nbgrader 的 student id，即提交文件夹的名字）")
    nu.add_argument("--assignment", help="作业名（只有一个作业时可省略）")
    nb = sub.add_parser("nbgrader", help="在 autograde/ 里运行 nbgrader 原生命令（collect、zip_collect、list……），"
                        "PATH 已包含本环境的工具")
    nb.add_argument("nbgrader_args", nargs=argparse.REMAINDER, help="原样交给 nbgrader，例如 zip_collect lesson")
    f = sub.add_parser("formgrader", help="在课程根目录启动 JupyterLab 和 formgrader，做人工评分")
    f.add_argument("--port", type=int, help="端口（默认：JupyterLab 自己选一个空闲端口）")
    f.add_argument("--no-browser", action="store_true", help="不自动打开浏览器")
    f.add_argument("lab_args", nargs=argparse.REMAINDER, help="其余参数原样交给 jupyter lab（写在 -- 之后）")
    args = parser.parse_args(argv)
    own_tools()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")

    def _terminate(signum, frame):  # `kill` gets the same clean stop as Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    course = None
    from .fleet.preflight import PreflightError

    try:
        course = Course(args.root)
        if args.command == "nbgrader":
            os.chdir(course.autograde)  # nbgrader reads nbgrader_config.py from the current folder
            os.execv(sys.executable, [sys.executable, "-m", "nbgrader", *args.nbgrader_args])
        if args.command == "formgrader":
            return formgrader(course, args.port, not args.no_browser, args.lab_args)
        if args.command == "grade":
            from .runner import grade

            summary = grade(args.submissions, root=course.root, assignment=args.assignment, jobs=args.jobs,
                            students=args.student, force=args.force, timeout=args.timeout,
                            sandbox=not args.no_sandbox, cluster=args.cluster, owner=args.from_student,
                            layout=args.layout, unwrap=args.unwrap)
            return 1 if summary["failed"] or summary.get("not_collected") else 0
        if args.command == "feedback":
            from .runner import rewrite_feedback

            done = rewrite_feedback(course.root, args.assignment, args.student)
            print(f"已按成绩册重写 {len(done)} 个学生的反馈：{course.feedback}")
            return 0
        if args.command == "numbers":
            from .intake.student_numbers import numbers_text

            print(numbers_text(course, args.students, args.assignment))
            return 0
        if args.command == "export":
            from .runner import export

            export(course)
            print(f"已导出 {course.grades_csv} 和 {course.integrity_csv}")
            return 0
        from .course import load_config
        from .release import edition, edition_text, generate, stale_notebooks

        names = [args.assignment] if args.assignment else course.assignments()
        cfg = load_config(course)
        if args.command == "release":
            for a in names:
                print(f"已生成{edition_text(cfg)}：{generate(course, a, course.release)}")
            print(SWITCH[edition(cfg)])
            return 0
        stale = {a: stale_notebooks(course, a) for a in names}
        bad = {a: s for a, s in stale.items() if s}
        for a, s in bad.items():
            print(f"exercises/{a} 与按当前设置生成的{edition_text(cfg)}不同：{'、'.join(s)}。"
                  "请运行 python -m parallel_budget.grading release", file=sys.stderr)
        return 1 if bad else 0
    except PreflightError as exc:
        print(f"评分前的预检未通过：{exc}", file=sys.stderr)
        return 3
    except CourseError as exc:
        print(f"错误：{exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("已中断：已经合并的批次留在成绩册里，其余学生的成绩保持运行前的状态；再次运行同一命令会接着完成。",
              file=sys.stderr)
        return 130
    except Exception as exc:  # anything else: one line here, the traceback in a log file
        log = _log_failure(course.root if course else None)
        print(f"错误：{args.command} 没有完成（{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else '无说明'}）。"
              f"详情见 {log}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
