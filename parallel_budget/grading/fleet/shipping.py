"""Folders as bytes, for grading on machines that share no filesystem (issue 28, :mod:`.cluster`).

The client packs a student's submission folder; a worker packs the shard it
graded.  A worker is trusted less than the client, so :func:`unpack` takes
only plain files and folders with relative names inside the destination
(no links, devices, absolute paths or ``..``), caps their number and size,
and unpacks into a fresh folder that replaces the destination in one rename:
a half-unpacked shard is never seen (and never reused) by the next run.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path, PurePosixPath

MAX_BYTES = 512 << 20  # a graded shard is a few MB; anything near this is not one
MAX_MEMBERS = 10_000


class UnsafeArchive(ValueError):
    """An archive that would write outside its folder, or is too large; the text says which member."""


def pack(folder: Path, skip: tuple = ()) -> bytes:
    """A gzip'd tar of ``folder``'s files and folders (links left out), minus the relative paths in ``skip``."""
    folder = Path(folder)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink() or any(rel == s or rel.startswith(s + "/") for s in skip):
                continue
            if path.is_file() or path.is_dir():
                tar.add(path, arcname=rel, recursive=False)
    return buf.getvalue()


def _checked(tar: tarfile.TarFile, max_bytes: int) -> list:
    members, total = tar.getmembers(), 0
    if len(members) > MAX_MEMBERS:
        raise UnsafeArchive(f"文件太多（{len(members)} 个，最多 {MAX_MEMBERS} 个）")
    for m in members:
        name = PurePosixPath(m.name)
        if name.is_absolute() or ".." in name.parts or "\\" in m.name or "\0" in m.name:
            raise UnsafeArchive(f"路径 {m.name!r} 不在目标文件夹之内")
        if not (m.isfile() or m.isdir()):
            raise UnsafeArchive(f"{m.name!r} 不是普通文件或文件夹（只接受这两种）")
        total += m.size
        if total > max_bytes:
            raise UnsafeArchive(f"解包后超过 {max_bytes >> 20} MB")
    return members


def unpack(data: bytes, dest: Path, max_bytes: int = MAX_BYTES) -> Path:
    """Unpack :func:`pack`'s bytes so that ``dest`` holds exactly them (replacing what was there)."""
    dest = Path(dest)
    incoming = dest.with_name(f".{dest.name}.incoming")
    shutil.rmtree(incoming, ignore_errors=True)
    incoming.mkdir(parents=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            tar.extractall(incoming, members=_checked(tar, max_bytes), filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        shutil.rmtree(incoming, ignore_errors=True)
        raise UnsafeArchive(f"不是可用的压缩包（{type(exc).__name__}: {exc}）") from None
    except BaseException:
        shutil.rmtree(incoming, ignore_errors=True)
        raise
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(incoming, dest)
    return dest
