"""Reading an upload (a folder or a zip archive) without trusting it.

An upload is listed as :class:`Member` records first (name, sizes, kind), so
that every check -- path, size, compression ratio, nesting -- happens before a
byte is written; :func:`copy_member` then streams one member to disk with a
running byte cap.  Nothing here decides whose a file is (:mod:`.owners`).
The limits below are documented in ``autograde/README.md``, section 2.
"""

from __future__ import annotations

import os
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..course import CourseError

MAX_MEMBER_BYTES = 64 * 1024 * 1024  # one file of an upload, uncompressed (a notebook is rarely over 5 MB)
MAX_TOTAL_BYTES = 4 * 1024 * 1024 * 1024  # everything one collection writes to disk
MAX_RATIO = 100  # uncompressed / compressed size of a zip member ...
RATIO_FLOOR = 1024 * 1024  # ... checked for members bigger than this (small files may compress very well)
MAX_MEMBERS = 20_000  # entries in one archive or folder tree (a class of 300 with 10 notebooks is 3,000)
MAX_DEPTH = 8  # path parts below the upload's root; deeper entries are not listed
MAX_NESTING = 0  # archives inside the upload are never opened: they are kept aside, unread
CHUNK = 1024 * 1024

ARCHIVE_SUFFIXES = (".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".whl", ".jar", ".zst")
JUNK = ("__MACOSX", "Thumbs.db", "desktop.ini")  # what zip tools and file managers add; never a submission
_ABSOLUTE = re.compile(r"^(/|[A-Za-z]:)")


@dataclass(frozen=True)
class Member:
    """One entry of an upload: its name as given, its safe path parts (``None`` when the name is unsafe)."""

    name: str
    parts: tuple | None
    size: int
    packed: int
    kind: str  # "file", "dir", "link", "other" (device, fifo), "encrypted"
    ref: object = None  # the ZipInfo or the Path to read it from


def split_name(name: str) -> tuple | None:
    """The path parts of a member name, or ``None`` for an absolute path, ``..``, or a control character."""
    text = name.replace("\\", "/")
    if _ABSOLUTE.match(text) or any(ord(c) < 32 for c in text):
        return None
    parts = tuple(p for p in text.split("/") if p not in ("", "."))
    if ".." in parts or not parts:
        return None
    return parts


def first_part(name: str) -> str:
    """The first path part of a relative name as given (the student folder an unsafe member claims to be in)."""
    if _ABSOLUTE.match(name.replace("\\", "/")):
        return ""
    return next((p for p in name.replace("\\", "/").split("/") if p not in ("", ".")), "")


def is_junk(parts: tuple) -> bool:
    return any(p.startswith(".") or p in JUNK for p in parts)


def is_archive(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def refusal(member: Member) -> str:
    """Why a member must not be written to disk (Chinese), or ``""``: checked before extraction."""
    if member.kind == "link":
        return "是符号链接，可能指向别人的文件，未读取"
    if member.kind == "encrypted":
        return "是加密的压缩项，无法读取"
    if member.kind != "file":
        return "不是普通文件（设备、管道等），未读取"
    if member.size > MAX_MEMBER_BYTES:
        return f"解压后 {member.size} 字节，超过单个文件上限 {MAX_MEMBER_BYTES} 字节，未解压"
    if member.size > RATIO_FLOOR and member.size > MAX_RATIO * max(member.packed, 1):
        return (f"压缩比 {member.size // max(member.packed, 1)}：1 超过上限 {MAX_RATIO}：1"
                f"（{member.packed} 字节解压成 {member.size} 字节，像是压缩炸弹），未解压")
    return ""


def zip_members(archive: Path) -> list[Member]:
    """Every entry of a zip archive, read from its central directory only (nothing is decompressed)."""
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise CourseError(f"{archive} 不是可读的 zip 压缩包（{type(exc).__name__}）。请重新下载或打包后再试。") from None
    if len(infos) > MAX_MEMBERS:
        raise CourseError(f"压缩包 {archive} 有 {len(infos)} 项，超过上限 {MAX_MEMBERS} 项；请分成几个压缩包。")
    out = []
    for info in infos:
        fmt = stat.S_IFMT(info.external_attr >> 16)  # 0 when the archiver stored no Unix file type
        if info.is_dir():
            kind = "dir"
        elif fmt == stat.S_IFLNK:
            kind = "link"
        elif info.flag_bits & 0x1:
            kind = "encrypted"
        elif fmt and fmt != stat.S_IFREG:
            kind = "other"
        else:
            kind = "file"
        out.append(Member(info.filename, split_name(info.filename), info.file_size, info.compress_size, kind, info))
    return out


def folder_members(folder: Path) -> list[Member]:
    """Every entry of a folder tree, without following symbolic links (``MAX_DEPTH`` levels, ``MAX_MEMBERS`` entries)."""
    out: list[Member] = []

    def walk(path: Path, parts: tuple) -> None:
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            if len(out) >= MAX_MEMBERS:
                raise CourseError(f"文件夹 {folder} 里超过 {MAX_MEMBERS} 项；请只放学生的提交。")
            sub = parts + (entry.name,)
            info = entry.stat(follow_symlinks=False)
            name = "/".join(sub)
            if entry.is_symlink():
                out.append(Member(name, sub, 0, 0, "link", Path(entry.path)))
            elif entry.is_dir(follow_symlinks=False):
                out.append(Member(name + "/", sub, 0, 0, "dir", Path(entry.path)))
                if len(sub) < MAX_DEPTH:
                    walk(Path(entry.path), sub)
            else:
                kind = "file" if stat.S_ISREG(info.st_mode) else "other"
                out.append(Member(name, sub, info.st_size, info.st_size, kind, Path(entry.path)))

    walk(folder, ())
    return out


class TooBig(Exception):
    """A member produced more bytes than its cap while being copied."""


def copy_member(source, member: Member, dest: Path, cap: int = MAX_MEMBER_BYTES) -> int:
    """Stream ``member`` of ``source`` (an open ZipFile, or ``None`` for a folder) to ``dest``; return the bytes written.

    Never writes more than ``min(cap, declared size)`` bytes: past that the partial file is removed and
    :class:`TooBig` raised, whatever the archive's headers claim.
    """
    limit = min(cap, member.size)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if source is None:
        fd = os.open(member.ref, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        reader = os.fdopen(fd, "rb")
    else:
        reader = source.open(member.ref)
    written = 0
    try:
        with reader, open(dest, "wb") as out:
            while chunk := reader.read(CHUNK):
                written += len(chunk)
                if written > limit:
                    raise TooBig(f"写出超过 {limit} 字节")
                out.write(chunk)
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    return written


def opened(archive: Path | None):
    """The ZipFile to read members from (a context manager), or a no-op one for a folder."""
    import contextlib

    return zipfile.ZipFile(archive) if archive is not None else contextlib.nullcontext(None)
