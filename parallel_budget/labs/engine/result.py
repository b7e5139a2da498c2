"""What a lab run gives back: :class:`LabResult` (a table in a notebook) and the errors that carry it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pint

from ...model.units import fmt
from .report import Report, render_html, render_text


@dataclass(frozen=True)
class LabResult:
    """One run: per-rank results and logs, predicted-vs-measured rows, wall time.

    ``return_values[rank]`` is what that rank's ``worker()`` published;
    ``failures[rank]`` a message for each rank that failed.  In a notebook the
    result shows as a table (``_repr_html_``); ``text()`` is the same table as
    plain text and ``table()`` returns the rows.
    """

    lab: str
    ranks: int
    options: dict
    run_id: str
    run_dir: Path
    master_port: int
    pids: tuple  # process ids of the ranks (all reaped when the result exists)
    wall_time: pint.Quantity
    returncodes: tuple
    return_values: tuple
    rank_times: tuple  # per rank {"join": s, "work": s} (None if it did not finish)
    stdouts: tuple  # last lines of each rank's stdout
    stderrs: tuple
    failures: dict
    timed_out: bool
    report: Report | None
    environment: dict = field(default_factory=dict)  # torch version, backend, device (from rank 0)
    logs_kept: bool = True  # False: run_dir was deleted after the successful run
    forked: tuple = ()  # per rank: True if it was forked from the zygote, False if started as python -m
    reused_from: str = ""  # when the book build's lab cache supplied this result: when it was run (see .cache)

    def is_failed(self) -> bool:
        return bool(self.failures) or self.timed_out

    @property
    def rows(self) -> tuple:
        return self.report.rows if self.report else ()

    @property
    def facts(self) -> dict:
        return self.report.facts if self.report else {}

    def table(self) -> list:
        """The rows as dicts with the Chinese column names (for pandas or a test)."""
        from .report import HEADERS

        return [dict(zip(HEADERS, r.cells())) for r in self.rows]

    def environment_line(self) -> str:
        return environment_line(self.environment)

    def _headline(self) -> str:
        state = "失败" if self.is_failed() else "完成"
        logs = f"日志：{self.run_dir}" if self.logs_kept else "日志已删除（run_lab(..., keep_logs=True) 可保留）"
        if self.reused_from:
            logs = f"本书构建时复用了同一份代码此前的一次运行（{self.reused_from}，构建的实验缓存）"
        return (
            f"{self.ranks} 个 rank，{state}，墙钟时间 {fmt(self.wall_time, 's', 3)}；{self.environment_line()}；{logs}"
        )

    def text(self) -> str:
        title = self.report.title if self.report else f"实验 {self.lab}"
        notes = self.report.notes if self.report else ()
        figure = self.report.figure if self.report else ""
        body = render_text(title, self.rows, notes, extra=self._headline(), figure=figure)
        if self.failures:
            body += "\n" + "\n".join(self.failures.values())
        return body

    def _repr_html_(self) -> str:
        title = self.report.title if self.report else f"实验 {self.lab}"
        notes = self.report.notes if self.report else ()
        figure = self.report.figure if self.report else ""
        return render_html(title, self.rows, notes, extra=self._headline(), figure=figure)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return (
            f"LabResult(lab={self.lab!r}, ranks={self.ranks}, failed={self.is_failed()}, "
            f"wall_time={fmt(self.wall_time, 's', 3)}, rows={len(self.rows)})"
        )


def environment_line(env: dict) -> str:
    """``torch 2.13.0+cpu,后端 gloo,设备 cpu``: what the source lesson asks to pin and report."""
    if not env:
        return "环境未知（没有 rank 报告）"
    return f"torch {env.get('torch', '?')}，后端 {env.get('backend', '?')}，设备 {env.get('device', '?')}"


class LabError(RuntimeError):
    """A lab run failed; ``.result`` holds what was collected (logs, return codes)."""

    def __init__(self, message: str, result: LabResult):
        super().__init__(message)
        self.result = result


class LabTimeout(LabError, TimeoutError):
    """The overall timeout passed; every process was killed."""
