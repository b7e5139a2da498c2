"""nbgrader preprocessors the course's ``nbgrader_config.py`` puts in autograde.

* :class:`ResilientExecute` -- nbgrader's ``Execute``, except that a kernel that
  dies (``os._exit``, a segfault) or stops answering does not drop the whole
  notebook: the cell gets an error output naming what happened (so it scores
  0), a fresh kernel replays the cells before it, and grading continues with
  the next cell.  Questions the student did not break keep their score.
  Kernels are forked from a warm fork server (:mod:`.forkserver`) unless
  ``c.ResilientExecute.fork_kernels = False``.
* :class:`LimitOutputSize` -- caps the characters of every output of a cell
  (nbgrader's ``LimitOutput`` only counts lines, so one 100 MB line passes).
"""

from __future__ import annotations

import copy

from jupyter_core.utils import run_sync
from nbclient.client import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from traitlets import Bool, Integer

from nbgrader.preprocessors import NbGraderPreprocessor
from nbgrader.preprocessors.execute import Execute, UnresponsiveKernelError

KERNEL_DIED = "KernelDied"


def _error_output(ename: str, text: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=text, traceback=[f"{ename}: {text}"])


class ResilientExecute(Execute):
    """Execute every cell; survive kernel deaths by restarting and replaying."""

    max_kernel_restarts = Integer(
        3, help="Kernel restarts allowed per notebook before the remaining cells are marked failed."
    ).tag(config=True)

    fork_kernels = Bool(
        True, help="Fork each kernel from a process that has already imported ipykernel and the course "
                   "package (parallel_budget.grading.forkserver) instead of starting Python afresh."
    ).tag(config=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.fork_kernels:
            from .forkserver import kernel_manager_class

            self.kernel_manager_class = kernel_manager_class()

    async def async_start_new_kernel(self, **kwargs):
        from .forkserver import ForkedKernel, launches

        await super().async_start_new_kernel(**kwargs)
        forked = isinstance(getattr(self.km.provisioner, "process", None), ForkedKernel)
        launches["forked" if forked else "fresh"] += 1

    start_new_kernel = run_sync(async_start_new_kernel)  # nbclient binds the name to its own coroutine

    def preprocess(self, nb, resources=None, km=None):
        NotebookClient.__init__(self, nb, km)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        start, restarts, broken = 0, 0, set()
        cells = self.nb.cells
        while start <= len(cells):
            current = None
            try:
                with self.setup_kernel():
                    info = self.wait_for_reply(self.kc.kernel_info())
                    self.nb.metadata["language_info"] = info["content"]["language_info"]
                    for index in range(start):  # replay what ran before the death, outputs discarded
                        if cells[index].cell_type == "code" and index not in broken:
                            current = index
                            self.execute_cell(copy.deepcopy(cells[index]), index, store_history=False)
                    for index in range(start, len(cells)):
                        current = index
                        self.preprocess_cell(cells[index], resources, index)
                break
            except (DeadKernelError, UnresponsiveKernelError, CellTimeoutError, RuntimeError) as exc:
                if current is None or (isinstance(exc, RuntimeError) and "Kernel" not in str(exc)):
                    raise
                restarts += 1
                what = "内核在运行这个单元时退出或失去响应(例如调用了 os._exit 或陷入无法中断的循环);本单元记 0 分,其后的单元在新内核中继续评分。"
                broken.add(current)
                if current >= start:
                    cells[current].outputs = [_error_output(KERNEL_DIED, what)]
                    cells[current].execution_count = None  # whether it was set depends on timing
                    start = current + 1
                self.log.warning("Kernel died in cell %d (%s); restarting (%d)", current, type(exc).__name__, restarts)
                if restarts > self.max_kernel_restarts:
                    for cell in cells[start:]:
                        if cell.cell_type == "code":
                            cell.outputs = [_error_output(KERNEL_DIED, "内核反复退出,后面的单元没有运行。")]
                            cell.execution_count = None
                    break
        self.set_widgets_metadata()
        return self.nb, self.resources


class LimitOutputSize(NbGraderPreprocessor):
    """Cut every text output of a code cell to ``max_chars`` characters."""

    max_chars = Integer(20000, help="Characters kept of each output (stream text or text/plain).").tag(config=True)

    def _cut(self, text: str) -> str:
        if len(text) <= self.max_chars:
            return text
        return text[: self.max_chars] + f"\n... 输出过长,已截断(共 {len(text)} 个字符) ...\n"

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type != "code":
            return cell, resources
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
