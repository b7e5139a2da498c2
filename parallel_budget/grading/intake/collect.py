"""Collect submissions into ``autograde/submitted/<student>/<assignment>/``.

The upload (a folder, ``<student>/<assignment>/*.ipynb`` or ``<student>/*.ipynb``,
or a zip archive, e.g. from an LMS) is listed and checked first
(:mod:`.archive`), every member is given to one student or kept aside
(:mod:`.owners`), and only then are the accepted members streamed to disk.
Notebooks of another nbformat version are converted to v4 with nbformat.

What is kept aside lands in ``autograde/quarantine/<student>/<assignment>/``
with a manifest ``autograde/quarantine/<student>/<assignment>.json``; entries
that belong to nobody (a bad student id, an unsafe top-level member) are listed
in ``autograde/quarantine/_rejected/<assignment>.json``.  Both reach
``integrity.csv`` through :func:`intake_rows`, and the grade command's summary
through :class:`Collected`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import zlib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from . import archive as arc
from .. import bounds
from ..course import Course, CourseError, load_config
from .owners import COLLECT_TRICKS, Intake, Issue, bad_id, plan, shown

ROSTER = "roster.txt"  # autograde/roster.txt: one student id a line (# starts a comment); the class, closed
REJECTED = "_rejected"  # a folder name no student id can have (ids start with a letter or a digit)
_VERSION_TAIL = re.compile(rb'"nbformat"\s*:\s*(\d+)')


@dataclass(frozen=True)
class Collected:
    """What collection found: the students to grade, and the entries kept aside or refused (:class:`.owners.Issue`)."""

    students: tuple
    quarantined: tuple = ()
    not_collected: tuple = ()


def digest_folder(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(folder)).encode())
            with path.open("rb") as f:  # in chunks: a big submission never sits whole in the grader's memory
                hashlib.file_digest(f, lambda: h)
    return h.hexdigest()[:16]


def quarantine_root(course: Course) -> Path:
    return course.autograde / "quarantine"


def upgrade(path: Path) -> str:
    """Rewrite a notebook of another nbformat version as v4 (nbformat); return why it cannot be read, or ``""``."""
    import nbformat

    try:
        raw = path.read_bytes()
        version = json.loads(raw).get("nbformat")
        if version not in (1, 2, 3, 4):
            raise ValueError("nbformat")
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
    except Exception as exc:  # not JSON, not UTF-8, no or unknown nbformat version
        return f"不是可读的 notebook（{type(exc).__name__}）；只收 .ipynb 文件（JSON，nbformat 1 到 4）"
    if version != 4:
        nbformat.write(nb, str(path))
    return ""


def says_v4(path: Path) -> bool:
    """Does the notebook's tail say nbformat 4 (nbformat writes it last)?  Reads 4 KB, never the whole file."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - 4096))
            found = _VERSION_TAIL.findall(fh.read())
    except OSError:
        return False
    return bool(found) and found[-1] == b"4"


def needs_upgrade(path: Path) -> bool:
    """A notebook to read and convert now: not saying v4, and under the cap (an oversized one is the shard's to
    report, unread: bounds.notebook_too_big).  A v4 notebook that is not valid JSON is the shard's too (invalid_notebook)."""
    return not says_v4(path) and not bounds.notebook_too_big(path)


def upgrade_in_place(folder: Path) -> None:
    """Convert the notebooks of a submission folder that say they are not v4 (read only their tail, else whole)."""
    for path in sorted(folder.glob("*.ipynb")):
        if needs_upgrade(path):
            upgrade(path)  # an unreadable one is left for the shard to report (invalid_notebook)


def roster(course: Course) -> tuple:
    """(known student ids or None, closed): ``autograde/roster.txt`` (closed), else the gradebook's students (open)."""
    path = course.autograde / ROSTER
    if path.is_file():
        ids = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if line and bad_id(line):
                raise CourseError(f"autograde/{ROSTER} 第 {number} 行：{bad_id(line)}")
            if line:
                ids.append(line)
        return frozenset(ids), True
    if course.gradebook.is_file():
        import sqlite3

        try:
            con = sqlite3.connect(f"file:{course.gradebook}?mode=ro", uri=True)
            try:
                ids = frozenset(row[0] for row in con.execute("SELECT id FROM student"))
            finally:
                con.close()
        except sqlite3.Error:
            ids = frozenset()
        return (ids or None), False
    return None, False


def _lms_regexp(course: Course) -> str:
    return str(load_config(course).FileNameCollectorPlugin.get("named_regexp", ""))


def _stage(zf, issue_or_place, dest: Path, budget: list) -> str:
    """Copy one member to ``dest`` within what is left of the run's byte budget; return why it failed, or ``""``."""
    member = issue_or_place.keep if isinstance(issue_or_place, Issue) else issue_or_place.member
    try:
        budget[0] -= arc.copy_member(zf, member, dest, min(arc.MAX_MEMBER_BYTES, budget[0]))
    except arc.TooBig:
        return f"超过上限（单个文件 {arc.MAX_MEMBER_BYTES} 字节，一次收集共 {arc.MAX_TOTAL_BYTES} 字节），没有解压"
    except (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, OSError, EOFError) as exc:
        return f"读不出来（{type(exc).__name__}），没有解压"
    return ""


def _free(path: Path) -> Path:
    """``path``, or ``path`` with a number added when that name is taken (two quarantined files of one name)."""
    n = 1
    out = path
    while out.exists():
        out = path.with_name(f"{path.stem}.{n}{path.suffix}")
        n += 1
    return out


def _gather(course: Course, source: Path, zipped: bool, assignment: str, work: Path, intake: Intake):
    """Plan and stage an upload in ``work/<student>/{submitted,quarantine}``; return (students, quarantined, rejected)."""
    members = arc.zip_members(source) if zipped else arc.folder_members(source)
    decided = plan(members, assignment, course.notebooks(assignment), _lms_regexp(course), intake)
    quarantined, budget = list(decided.quarantined), [arc.MAX_TOTAL_BYTES]
    with arc.opened(source if zipped else None) as zf:
        for place in decided.accepted:
            dest = work / place.student / "submitted" / place.name
            why = _stage(zf, place, dest, budget)
            if not why and dest.suffix == ".ipynb" and needs_upgrade(dest) and (why := upgrade(dest)):
                aside = _free(work / place.student / "quarantine" / Path(*place.member.parts))
                aside.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(dest), str(aside))
                quarantined.append(Issue(place.student, shown(place.member.name), "unreadable_notebook",
                                         f"{shown(place.member.name)} {why}"))
            elif why:
                quarantined.append(Issue(place.student, shown(place.member.name), "unsafe_member",
                                         f"{shown(place.member.name)}：{why}"))
        for i, issue in enumerate(quarantined):
            if issue.keep is not None:
                why = _stage(zf, issue, _free(work / issue.who / "quarantine" / Path(*issue.keep.parts)), budget)
                if why:
                    quarantined[i] = Issue(issue.who, issue.member, issue.trick, f"{issue.detail}；{why}")
    return decided.students, quarantined, list(decided.rejected)


def _write_json(path: Path, rows: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rows, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def _replace(src: Path, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    if src.is_dir():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(src), str(dest))


def _place(course: Course, work: Path, assignment: str, students, quarantined: list, rejected: list) -> None:
    """Move each named student's staged submission and quarantine into place; write the manifests."""
    qroot = quarantine_root(course)
    for student in students:
        mine = [q.row() for q in quarantined if q.who == student]
        _replace(work / student / "quarantine", qroot / student / assignment)
        if mine:
            _write_json(qroot / student / f"{assignment}.json", mine)
        else:
            (qroot / student / f"{assignment}.json").unlink(missing_ok=True)
        staged = work / student / "submitted"
        if any(staged.glob("*.ipynb")):
            _replace(staged, course.submitted / student / assignment)
        else:
            kept = "（autograde/submitted 里原有的提交保持不变）" if (course.submitted / student / assignment).is_dir() else ""
            rejected.append(Issue(student, "", "not_collected", f"这次上传里没有可评分的 notebook{kept}"))
    _write_json(qroot / REJECTED / f"{assignment}.json", [r.row() for r in rejected])


def collect(course: Course, source, assignment: str, owner: str = "", layout: str = "auto",
            unwrap: bool = False) -> Collected:
    """Copy submissions into ``autograde/submitted``; return who is there to grade and what was refused.

    ``owner`` (``--from-student``): the whole upload is that student's late work; ``layout`` and ``unwrap``:
    what the instructor says the upload is (:class:`.owners.Intake`); the roster comes from :func:`roster`.
    """
    known, closed = roster(course)
    try:
        intake = Intake(owner=owner or "", layout=layout, unwrap=unwrap, roster=known, closed=closed)
    except ValueError as exc:
        raise CourseError(str(exc)) from None
    if owner and source is None:
        raise CourseError("--from-student 要和一份上传一起用，例如：grade late.zip --from-student ID")
    if owner and closed and owner not in known:
        raise CourseError(f"--from-student {owner} 不在 autograde/{ROSTER} 里：先把这位学生加进名单。")
    course.submitted.mkdir(parents=True, exist_ok=True)
    quarantined, rejected = [], []
    if source is not None:
        source = Path(source).resolve()
        if not source.exists():
            raise CourseError(f"找不到提交：{source}。请给一个文件夹（<学生>/<作业>/*.ipynb）或 zip 压缩包。")
        zipped = source.is_file() and source.suffix.lower() == ".zip"
        if not zipped and not source.is_dir():
            raise CourseError(f"{source} 既不是文件夹也不是 .zip 压缩包。")
        if zipped or source != course.submitted.resolve():
            course.work.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix="collect-", dir=course.work))
            try:
                students, quarantined, rejected = _gather(course, source, zipped, assignment, work, intake)
                _place(course, work, assignment, students, quarantined, rejected)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    found = []
    for p in sorted(course.submitted.iterdir()):
        if p.is_dir() and (p / assignment).is_dir():
            if bad_id(p.name):  # put there by another tool (nbgrader collect): never graded under that name
                rejected.append(Issue(shown(p.name), "", "not_collected", f"autograde/submitted 里的{bad_id(p.name)}"))
                continue
            upgrade_in_place(p / assignment)
            found.append(p.name)
    return Collected(tuple(found), tuple(quarantined), tuple(rejected))


def intake_rows(course: Course) -> list:
    """integrity.csv rows (student, assignment, file, cell, trick, what, evidence) of every collection manifest."""
    rows = []
    root = quarantine_root(course)
    for path in sorted(root.glob("*/*.json")) if root.is_dir() else []:
        assignment = path.stem
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for e in entries:
            rows.append([e["who"], assignment, e["member"], "", e["trick"], COLLECT_TRICKS.get(e["trick"], e["trick"]),
                         e["detail"]])
    return rows
