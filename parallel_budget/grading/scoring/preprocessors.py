"""nbgrader preprocessors the course's ``nbgrader_config.py`` puts in autograde.

* :class:`ResilientExecute` -- nbgrader's ``Execute``, except that a kernel that
  dies (``os._exit``, a segfault) or stops answering does not drop the whole
  notebook: the cell gets an error output naming what happened (so it scores
  0), a fresh kernel replays the cells before it, and grading continues with
  the next cell.  Questions the student did not break keep their score.
  Kernels are forked from a warm fork server (:mod:`.forkserver`) unless
  ``c.ResilientExecute.fork_kernels = False``.
  With per-student numbers (``c.Variants.enabled``) a varied test cell expects
  the values of the student whose submission folder it is (:mod:`.student_numbers`).
  One student's notebooks, cells and restarts together get at most
  ``c.ResilientExecute.student_budget`` seconds (:mod:`.bounds`): a cell is cut
  when the budget runs out, and it and every later cell get an error output
  (:data:`.bounds.OVER_BUDGET`) that scores 0.
* :class:`LimitOutputSize` -- caps the lines of a cell's stream output and the
  characters of every output (nbgrader's ``LimitOutput``, which it replaces,
  only counts lines, so one 100 MB line passed, and its English mark went
  unreported: a million short lines were never flagged).
"""

from __future__ import annotations

import copy
import math
import time

from jupyter_core.utils import run_sync
from nbclient.client import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from traitlets import Bool, Dict, Float, Integer

from nbgrader.preprocessors import NbGraderPreprocessor
from nbgrader.preprocessors.execute import Execute, UnresponsiveKernelError

from .. import bounds
from ..sandbox import failures
from ..intake import student_numbers
from . import trusted
from .integrity import KERNEL_DIED, TIMED_OUT



def _error_output(ename: str, text: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=text, traceback=[f"{ename}: {text}"])


class ResilientExecute(Execute):
    """Execute every cell; survive kernel deaths by restarting and replaying."""

    max_kernel_restarts = Integer(
        3, help="Kernel restarts allowed per notebook before the remaining cells are marked failed."
    ).tag(config=True)

    fork_kernels = Bool(
        True, help="Fork each kernel from a process that has already imported ipykernel and the course "
                   "package (parallel_budget.grading.sandbox.forkserver) instead of starting Python afresh."
    ).tag(config=True)

    sandbox = Bool(
        True, help="Run every kernel in a bubblewrap sandbox (parallel_budget.grading.sandbox.bwrap): no network, "
                   "a read-only system, only its own scratch space, resource limits."
    ).tag(config=True)

    sandbox_limits = Dict(
        help="Overrides of parallel_budget.grading.sandbox.bwrap.Limits, e.g. {'memory_bytes': 4 * 10**9}."
    ).tag(config=True)

    trusted_checks = Bool(
        True, help="Run test cells in the grader on the answers' plain values (parallel_budget.grading.scoring.trusted), "
                   "never in the student's kernel."
    ).tag(config=True)

    max_output_chars = Integer(
        2_000_000, help="Characters of output kept per cell while it runs; the rest is dropped (endless output)."
    ).tag(config=True)

    student_budget = Float(
        bounds.STUDENT_BUDGET_S, help="Seconds one student's grading may take in all (every notebook, cell and kernel "
                                      "restart); what has not run by then scores 0, with an integrity row. 0: no budget."
    ).tag(config=True)

    student_started = Float(
        None, allow_none=True, help="time.monotonic() when this student's grading began (the grade command sets it "
                                    "per student); None: when this preprocessor was made."
    ).tag(config=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        began = time.monotonic() if self.student_started is None else self.student_started
        self._deadline = began + self.student_budget if self.student_budget > 0 else math.inf
        if self.sandbox or self.fork_kernels:
            from ..sandbox.bwrap import Limits
            from ..sandbox.warmkernels import kernel_manager_class

            limits = Limits.from_config(self.sandbox_limits) if self.sandbox else None
            self.kernel_manager_class = kernel_manager_class(limits, fresh=not self.fork_kernels)
        self._limits = Limits.from_config(self.sandbox_limits) if self.sandbox else None

    async def async_start_new_kernel(self, **kwargs):
        from ..sandbox.forkclient import launches

        try:  # no student code has run in this kernel yet: a failure here is the grader's (issue 22)
            await super().async_start_new_kernel(**kwargs)
        except Exception as exc:
            raise failures.fail(f"内核无法启动（{failures.short(exc)}）") from exc
        launches["forked" if getattr(self.km.provisioner, "warm", False) else "fresh"] += 1

    start_new_kernel = run_sync(async_start_new_kernel)  # nbclient binds the name to its own coroutine

    async def async_start_new_kernel_client(self):
        try:
            return await super().async_start_new_kernel_client()
        except Exception as exc:
            raise failures.fail(f"内核启动后没有回应（{failures.short(exc)}）") from exc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    def output(self, outs, msg, display_id, cell_index):
        """Keep at most ``max_output_chars`` of a running cell's output in memory (the grader's)."""
        content = msg.get("content", {})
        size = len(str(content.get("text", ""))) + sum(len(str(v)) for v in content.get("data", {}).values())
        self._output_chars = getattr(self, "_output_chars", {})
        used = self._output_chars.get(id(outs), 0)
        if used + size > self.max_output_chars and msg.get("msg_type") in ("stream", "display_data", "execute_result"):
            if used <= self.max_output_chars:
                self._output_chars[id(outs)] = self.max_output_chars + 1
                outs.append(NotebookNode(output_type="stream", name="stdout",
                                         text=f"\n... 输出过长，已截断（超过 {self.max_output_chars} 个字符的部分没有保存）...\n"))
            return None
        self._output_chars[id(outs)] = used + size
        return super().output(outs, msg, display_id, cell_index)

    def _left(self) -> float:
        """Seconds left of the student's budget."""
        return self._deadline - time.monotonic()

    def _get_timeout(self, cell):
        """The cell timeout, cut to what is left of the student's budget."""
        timeout, left = super()._get_timeout(cell), self._left()
        if left == math.inf:
            return timeout
        return max(1, math.ceil(min(timeout or math.inf, left)))

    def _out_of_budget(self, cells) -> None:
        why = f"超出每名学生的评分时间预算 {self.student_budget:g} s：本单元没有运行（或没有运行完），记 0 分。"
        for cell in cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [_error_output(bounds.OVER_BUDGET, why)], None

    def preprocess(self, nb, resources=None, km=None):
        NotebookClient.__init__(self, nb, km)
        self._variant = self._variant_of(resources)
        self._output_chars = {}
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        start, restarts, broken = 0, 0, set()
        cells = self.nb.cells
        while start <= len(cells):
            current = None
            if self._left() <= 0:
                self._out_of_budget(cells[start:])
                break
            try:
                with self.setup_kernel():
                    info = self.wait_for_reply(self.kc.kernel_info())
                    self.nb.metadata["language_info"] = info["content"]["language_info"]
                    if self._variant:  # the graded copy shows the numbers of the submission folder's id
                        self.wait_for_reply(self.kc.execute(student_numbers.kernel_code(self._variant["student"]),
                                                            silent=True, store_history=False))
                    for index in range(start):  # replay what ran before the death, outputs discarded
                        if self._left() <= 0:
                            break
                        if cells[index].cell_type == "code" and index not in broken and not self._checked_here(cells[index]):
                            current = index
                            self.execute_cell(copy.deepcopy(cells[index]), index, store_history=False)
                    for index in range(start, len(cells)):
                        current = index
                        if self._left() <= 0:
                            self._out_of_budget(cells[index:])
                            break
                        self.preprocess_cell(cells[index], resources, index)
                        if self._left() <= 0 and any(o.get("ename") == TIMED_OUT for o in cells[index].get("outputs", [])):
                            self._out_of_budget([cells[index]])  # cut by the budget, not by its own time limit
                break
            except (DeadKernelError, UnresponsiveKernelError, CellTimeoutError, RuntimeError) as exc:
                if current is None or (isinstance(exc, RuntimeError) and "Kernel" not in str(exc)):
                    raise
                restarts += 1
                if isinstance(exc, CellTimeoutError):  # it ran past the time limit, then stopped answering
                    ename, what = TIMED_OUT, ("单元运行超时，中断后内核也没有在时限内回应（例如死循环或停不下来的输出）；"
                                              "本单元记 0 分，其后的单元在新内核中继续评分。")
                else:
                    ename, what = KERNEL_DIED, ("内核在运行这个单元时退出或失去响应（例如调用了 os._exit 或陷入无法中断的循环）；"
                                                "本单元记 0 分，其后的单元在新内核中继续评分。")
                broken.add(current)
                if current >= start:
                    cells[current].outputs = [_error_output(ename, what)]
                    cells[current].execution_count = None  # whether it was set depends on timing
                    start = current + 1
                self.log.warning("Kernel died in cell %d (%s); restarting (%d)", current, type(exc).__name__, restarts)
                if restarts > self.max_kernel_restarts:
                    for cell in cells[start:]:
                        if cell.cell_type == "code":
                            cell.outputs = [_error_output(KERNEL_DIED, "内核反复退出，后面的单元没有运行。")]
                            cell.execution_count = None
                    break
        self.set_widgets_metadata()
        return self.nb, self.resources


    def _variant_of(self, resources) -> dict | None:
        """Per-student numbers (``c.Variants.enabled``): whose, from nbgrader's id of the submission folder."""
        info = (resources or {}).get("nbgrader", {})
        if not (self.trusted_checks and student_numbers.enabled(self.config) and info.get("student")):
            return None
        return {"course": student_numbers.course_id(self.config), "assignment": info.get("assignment", ""),
                "notebook": info.get("notebook", ""), "student": info["student"],
                "peers": list(self.config.get("Variants", {}).get("peers", []))}

    def _checked_here(self, cell) -> bool:
        return self.trusted_checks and trusted.is_test_cell(cell)

    def preprocess_cell(self, cell, resources, index):
        if not self._checked_here(cell):
            return super().preprocess_cell(cell, resources, index)
        try:
            names = trusted.free_names(cell.source)
        except SyntaxError:
            cell.outputs, cell.execution_count = [trusted._error("测试单元无法解析。")], None
            return cell, resources
        values = {}
        if names:  # the kernel hands over the answers as plain data; it never sees the test
            msg_id = self.kc.execute("", silent=True, store_history=False,
                                     user_expressions={"answers": trusted.export_expression(names)})
            reply = self.wait_for_reply(msg_id, cell)
            values = trusted.read_export((reply or {}).get("content", {}))
        host = trusted.FunctionHost(self._launch_function_host, self._student_cells(index),
                                    max(1.0, min(float(self.timeout or 30), self._left())))
        swap = None
        if self._variant and (gid := (cell.metadata.get("nbgrader", {}) or {}).get("grade_id")):
            v = self._variant
            swap = student_numbers.Swap(v["course"], v["assignment"], v["notebook"], v["student"], gid, v["peers"],
                                 student_numbers.RECORDED)
        try:
            cell.outputs = trusted.run(cell.source, values, names, host, swap)
        finally:
            host.close()
        cell.execution_count = None
        return cell, resources

    def _student_cells(self, index) -> list:
        return [c.source for c in self.nb.cells[:index] if c.cell_type == "code" and not trusted.is_test_cell(c)]

    def _launch_function_host(self, fd):
        import os
        import sys

        from ..sandbox.forkclient import ForkServerError, launch

        try:  # a used sandbox that fails is replaced by a fresh one (forkclient.launch), under a uid of its own
            return launch(self._limits, "functions", [sys.executable, "-m", "parallel_budget.grading.sandbox.fnhost"],
                          dict(os.environ), None, fd=fd)
        except (ForkServerError, OSError, ValueError) as exc:
            # a fresh sandbox failed before any student code ran in it: the grader's failure, not the student's
            failures.fail(f"无法启动运行函数答案的沙箱进程（{failures.short(exc)}）")
            raise trusted.FunctionFailed("无法启动运行函数答案的沙箱进程。") from None


class LimitOutputSize(NbGraderPreprocessor):
    """Cut a code cell's stream output to ``max_lines`` lines and every text output to ``max_chars`` characters.

    It replaces nbgrader's ``LimitOutput`` (which counts lines only and marks a cut in English): every cut
    ends with one Chinese line, ``输出过长,已截断``, which the integrity scan reports as ``huge_output``.
    """

    max_chars = Integer(20000, help="Characters kept of each output (stream text or text/plain).").tag(config=True)
    max_lines = Integer(300, help="Lines kept of a cell's stream output, all streams together.").tag(config=True)

    def _cut(self, text: str) -> str:
        if len(text) <= self.max_chars:
            return text
        return text[: self.max_chars] + f"\n... 输出过长，已截断（共 {len(text)} 个字符）...\n"

    def _cut_lines(self, outputs) -> list:
        left, kept = self.max_lines, []
        for output in outputs:
            if output.output_type == "stream":
                if left <= 0:
                    continue
                lines = output.text.splitlines(keepends=True)
                if len(lines) > left:
                    output.text = "".join(lines[:left]) + f"\n... 输出过长，已截断（共 {len(lines)} 行，只保留前 {left} 行）...\n"
                left -= len(lines)
            kept.append(output)
        return kept

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type != "code":
            return cell, resources
        cell.outputs = self._cut_lines(cell.outputs)
        for output in cell.outputs:
            if output.output_type == "stream":
                output.text = self._cut(output.text)
            elif output.output_type in ("execute_result", "display_data"):
                data = output.get("data", {})
                for key in list(data):
                    if isinstance(data[key], str):
                        data[key] = self._cut(data[key])
            elif output.output_type == "error":
                output.traceback = [self._cut(t) for t in output.traceback[:100]]
                output.evalue = self._cut(output.evalue)
        return cell, resources
