"""The book build's lab cache: a lab's result is reused while nothing it could depend on has changed.

A clean build of the book runs every chapter's labs, and the torchrun drill alone
takes about ten seconds (two agents import torch, two c10d rendezvous rounds).  When ``PB_LAB_CACHE`` names a
folder (the book build sets it, see :mod:`parallel_budget.book.build`),
:func:`parallel_budget.labs.run_lab` first looks there for a successful result
of the same lab, ranks and options, computed with the same *package digest*
(every ``.py`` file of ``parallel_budget``), torch and Python versions; it
returns that result, marked as reused, or runs the lab and stores the result.
Any edit of the package changes the digest, so a stale result is never shown.
Without the variable (a student's notebook, the tests, ``torchrun``) nothing
is cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import asdict, fields
from pathlib import Path

from ...model.units import Q_
from .report import Report, Row
from .result import LabResult

ENV = "PB_LAB_CACHE"
PACKAGE = Path(__file__).resolve().parents[2]


def folder() -> Path | None:
    value = os.environ.get(ENV, "").strip()
    return Path(value) if value else None


def package_digest() -> str:
    """sha256 of every ``.py`` file of the package (paths and contents)."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        h.update(str(path.relative_to(PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _torch_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return "?"


def key(cfg) -> str:
    """What a result depends on: the lab, its ranks and options, the package digest, torch and Python."""
    data = {"lab": cfg.lab, "ranks": cfg.ranks, "options": cfg.options, "package": package_digest(),
            "torch": _torch_version(), "python": sys.version.split()[0], "zygote": bool(cfg.zygote)}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _path(cfg) -> Path | None:
    root = folder()
    return root / f"{cfg.lab}-{key(cfg)}.json" if root else None


def load(cfg) -> LabResult | None:
    """The cached result for ``cfg``, or None (no cache, no entry, or an unreadable one)."""
    path = _path(cfg)
    if path is None or not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        rep = data["report"]
        report = Report(rep["title"], tuple(Row(**r) for r in rep["rows"]), tuple(rep["notes"]), rep["facts"],
                        rep.get("figure", ""))
        kept = {f.name: data[f.name] for f in fields(LabResult) if f.name in data}
        kept.update(report=report, wall_time=Q_(data["wall_time_s"], "s"), run_dir=Path(data["run_dir"]),
                    logs_kept=False, reused_from=data["finished"])
        for name in ("pids", "returncodes", "return_values", "rank_times", "stdouts", "stderrs", "forked"):
            kept[name] = tuple(kept.get(name, ()))
        kept["failures"] = {}
        return LabResult(**kept)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(cfg, result: LabResult) -> None:
    """Keep a successful result (and only the newest one of this lab)."""
    path = _path(cfg)
    if path is None or result.is_failed() or result.report is None:
        return
    data = {f.name: getattr(result, f.name) for f in fields(LabResult)
            if f.name not in ("report", "wall_time", "run_dir", "failures", "reused_from")}
    data.update(wall_time_s=result.wall_time.to("s").magnitude, run_dir=str(result.run_dir),
                finished=time.strftime("%Y-%m-%d %H 时 %M 分"),  # no ASCII colon inside Chinese text
                report={"title": result.report.title, "rows": [asdict(r) for r in result.report.rows],
                        "notes": list(result.report.notes), "facts": result.report.facts,
                        "figure": result.report.figure})
    path.parent.mkdir(parents=True, exist_ok=True)
    for old in path.parent.glob(f"{cfg.lab}-*.json"):
        old.unlink(missing_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, default=str), encoding="utf-8")
    os.replace(tmp, path)
