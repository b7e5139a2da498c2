"""Is a Distributed Checkpoint complete?  Asked of DCP's own metadata, not of file names.

``torch.distributed.checkpoint.save`` has every rank write its shard files
(``__<rank>_0.distcp``) and then, only after every rank reported its writes,
the coordinator commits ``.metadata`` (written to a temporary name, then
renamed).  A checkpoint is complete when that file exists and everything it
describes is on disk: :func:`inspect` reads it with DCP's ``FileSystemReader``
and checks that each storage item's file holds the bytes the metadata points
at and that the chunks of each tensor add up to the whole tensor.
:func:`latest_complete` walks ``step-<n>`` folders newest first (the name only
orders them) and returns the first complete one, with the reason each newer one
was skipped.  Importing this module does not import torch.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

STEP_DIR = re.compile(r"^step-(\d+)$")


@dataclass(frozen=True)
class Verdict:
    """What :func:`inspect` found in one checkpoint folder."""

    path: str
    complete: bool
    reason: str  # Chinese, empty when complete
    files: tuple  # names in the folder, sorted
    tensors: int = 0  # tensors the metadata describes
    storage_files: tuple = ()  # files the metadata points into


def step_dir(root, step: int) -> Path:
    return Path(root) / f"step-{step}"


def inspect(path) -> Verdict:
    """Check one checkpoint folder against its ``.metadata`` (see the module docstring)."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    path = Path(path)
    files = tuple(sorted(p.name for p in path.iterdir())) if path.is_dir() else ()
    try:
        meta = FileSystemReader(str(path)).read_metadata()
    except Exception as exc:  # noqa: BLE001 - DCP raises what the file system raised
        return Verdict(str(path), False, f"DCP 读不到元数据（{type(exc).__name__}）：.metadata 没有提交", files)
    storage = meta.storage_data or {}
    needed: dict = {}
    for info in storage.values():
        needed[info.relative_path] = max(needed.get(info.relative_path, 0), info.offset + info.length)
    for name, size in sorted(needed.items()):
        f = path / name
        if not f.exists():
            return Verdict(str(path), False, f"元数据指向的分片文件 {name} 不存在", files)
        if f.stat().st_size < size:
            return Verdict(str(path), False, f"分片文件 {name} 只有 {f.stat().st_size} B，元数据要求至少 {size} B", files)
    tensors = 0
    for fqn, md in meta.state_dict_metadata.items():
        if isinstance(md, TensorStorageMetadata):
            tensors += 1
            covered = sum(math.prod(c.sizes) for c in md.chunks)
            if covered != math.prod(md.size):
                return Verdict(str(path), False, f"张量 {fqn} 的分块只覆盖 {covered} / {math.prod(md.size)} 个元素", files)
    return Verdict(str(path), True, "", files, tensors, tuple(sorted(needed)))


def latest_complete(root) -> tuple:
    """(step, Verdict) of the newest complete ``step-<n>`` folder under ``root`` (or (None, None)), and the skipped ones."""
    steps = sorted((int(m.group(1)) for p in Path(root).iterdir() if (m := STEP_DIR.match(p.name))), reverse=True)
    skipped = []
    for s in steps:
        v = inspect(step_dir(root, s))
        if v.complete:
            return s, v, tuple(skipped)
        skipped.append((s, v))
    return None, None, tuple(skipped)
