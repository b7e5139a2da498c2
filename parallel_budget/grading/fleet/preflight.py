"""Before grading anyone: can a kernel, started exactly as the shards start theirs, import the course package?

:func:`check` runs a one-cell notebook through :class:`.preprocessors.ResilientExecute`
with the course's configuration (sandbox, limits, warm kernels from the fork server):
the cell imports ``parallel_budget`` and runs one trivial check.  When it cannot,
grading would turn every student into zeros; instead :class:`PreflightError` says why,
in Chinese, before anything is collected or written (``grade`` exits 3).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..sandbox import forkclient, failures, bwrap
from ..course import Course, shard_config

MARK = "preflight-ok"
PROBE = ("import parallel_budget\n"
         "from parallel_budget.answers import checks\n"
         "checks.exact('preflight', 1, 1)\n"
         f"print({MARK!r})\n")
IMPORT = "import parallel_budget.answers.checks"


class PreflightError(RuntimeError):
    """The kernels cannot grade (the message, in Chinese, names the cause); nothing was written."""


def _outputs_text(cell) -> tuple[str, str]:
    """(stdout text, "Ename: evalue" of the first error) of an executed cell."""
    text, error = "", ""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            text += out.get("text", "")
        elif out.get("output_type") == "error" and not error:
            error = f"{out.get('ename', '')}: {str(out.get('evalue', ''))[:300]}"
    return text, error


def import_problem(limits: bwrap.Limits | None) -> str | None:
    """Why a plain Python in the same sandbox cannot import the package (None when it can)."""
    argv = [sys.executable, "-c", IMPORT]
    try:
        if limits is not None:
            argv = bwrap.command(argv, limits)
        env = bwrap.clean_env(dict(os.environ)) if limits is not None else dict(os.environ)
        done = subprocess.run(argv, capture_output=True, timeout=120, stdin=subprocess.DEVNULL, env=env,
                              cwd="/")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return failures.short(exc)
    if done.returncode == 0:
        return None
    lines = [line for line in (done.stderr or b"").decode(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else f"退出码 {done.returncode}"


def _where(use_sandbox: bool) -> str:
    return "沙箱里的内核" if use_sandbox else "内核"


def check(course: Course, timeout: int | None = None, use_sandbox: bool = True) -> None:
    """Raise :class:`PreflightError` unless a kernel started the shards' way imports the package and runs a check."""
    import nbformat

    from ..scoring.preprocessors import ResilientExecute

    where = _where(use_sandbox)
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # as in the workers (shard.worker_init)
    with tempfile.TemporaryDirectory(prefix="pb-preflight-") as tmp:
        cfg = shard_config(course, Path(tmp), timeout, sandbox=use_sandbox)
        executor = ResilientExecute(config=cfg)
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROBE)])
        failures.clear()
        forkclient.forget_failures()  # a fresh attempt, whatever an earlier run in this process saw
        try:
            executor.preprocess(nb, {"metadata": {"path": tmp}})
            error = None
        except Exception as exc:  # the kernel did not start, or nbclient gave up on it
            error = exc
        finally:
            failures.clear()
            forkclient.close_all()  # the grader keeps no sandboxed server of its own
    if error is not None:
        why = import_problem(executor._limits)
        if why:
            raise PreflightError(f"{where}无法导入课程包 parallel_budget：{why}。没有评分，也没有写入任何成绩。")
        raise PreflightError(f"{where}无法启动：{failures.short(error)}。没有评分，也没有写入任何成绩。")
    text, failure = _outputs_text(nb.cells[0])
    if failure:
        what = "无法导入课程包 parallel_budget" if "Import" in failure or "NotFound" in failure else "运行一个简单检查失败"
        raise PreflightError(f"{where}{what}：{failure}。没有评分，也没有写入任何成绩。")
    if MARK not in text:
        raise PreflightError(f"{where}运行一个简单检查后没有给出结果（输出：{text.strip()[:200]!r}）。"
                             "没有评分，也没有写入任何成绩。")
