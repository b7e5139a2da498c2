"""Whose is each file of an upload: the collection plan, decided before anything is written.

Nothing in an upload chooses whose it is.  A student's id comes from one place only:

* the upload's top-level folder: ``<student>/<notebook>.ipynb`` or
  ``<student>/<assignment>/<notebook>.ipynb`` (plus ``timestamp.txt``);
* the file name of a top-level file, with the LMS pattern nbgrader's
  ``zip_collect`` uses (``FileNameCollectorPlugin.named_regexp``, e.g.
  ``<student>_<notebook>.ipynb``);
* or the instructor: ``--from-student ID`` (:attr:`Intake.owner`) says the
  whole upload is that student's (late work); every file lands in that
  student's submission or in that student's quarantine, whatever it is called.

A folder is unwrapped (read as a wrapper around the class, ``lms-export/``)
only when the instructor says so (``--unwrap``), never by guessing from its
content (its name and content are the uploader's choice): a late student's zip
``mallory/honest0/...`` is mallory's folder, and ``honest0/`` inside it is
quarantined for mallory.  The roster (:func:`.collect.roster`:
``autograde/roster.txt`` or the gradebook's students) names the other
students a folder inside a student's may point to; with ``roster.txt`` an id
that is not on it is not collected at all.

Everything else a student's folder holds -- a file or folder named after
another student, a nested archive, a second copy of a notebook, a file outside
the layout, a member refused by :func:`.archive.refusal` -- is *quarantined*
for that student: kept aside, never placed over anyone's file, reported.  What
cannot be tied to a valid student id is *not collected*.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .archive import Member, first_part, is_archive, is_junk, refusal

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.@-]{0,63}$")
ID_RULE = "只能用字母、数字和 . @ -，以字母或数字开头，最多 64 个字符"

# The trick keys of collection findings (integrity.csv "trick" and "what" columns).
COLLECT_TRICKS = {
    "other_student": "提交里有文件名指向另一位学生的 notebook；已隔离，没有交给那位学生，也没有评分",
    "nested_archive": "提交里有压缩包；压缩包从不解开，已原样隔离",
    "duplicate_notebook": "同一本 notebook 交了多份；只评了一份，其余已隔离",
    "outside_layout": "文件不在约定的位置，或不是这次作业的 notebook；已隔离，没有评分",
    "unsafe_member": "这一项的路径、类型或大小不安全（../、绝对路径、符号链接、压缩炸弹等）；没有解压",
    "unreadable_notebook": "文件不是可读的 notebook（JSON 损坏或 nbformat 版本不明）；已隔离，这本记 0 分",
    "not_collected": "这位学生（或这一项）没有评分：收集时被拒绝",
}


LAYOUTS = ("auto", "folders", "lms")


@dataclass(frozen=True)
class Intake:
    """What the instructor said about an upload: its owner, the layout, whether to unwrap, and the roster.

    ``owner``: the one student the whole upload belongs to (``--from-student``); ``layout``: ``folders``
    (``<student>/...`` only), ``lms`` (top-level ``<student>_<notebook>.ipynb`` only) or ``auto`` (both);
    ``unwrap``: read inside the one top-level folder; ``roster``: the known student ids (None: unknown);
    ``closed``: the roster is the instructor's list (``roster.txt``), so an id not on it is not collected.
    """

    owner: str = ""
    layout: str = "auto"
    unwrap: bool = False
    roster: frozenset | None = None
    closed: bool = False

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise ValueError(f"--layout 只能是 {'、'.join(LAYOUTS)}，收到 {self.layout!r}")
        if self.owner and bad_id(self.owner):
            raise ValueError(f"--from-student 的{bad_id(self.owner)}")


@dataclass(frozen=True)
class Issue:
    """A quarantined or rejected entry: whose (a student id, or the name as given), which member, why (Chinese)."""

    who: str
    member: str
    trick: str
    detail: str
    keep: Member | None = None  # a member safe to copy aside into the quarantine

    def row(self) -> dict:
        return {"who": self.who, "member": self.member, "trick": self.trick, "detail": self.detail}


@dataclass(frozen=True)
class Placement:
    """A member accepted as ``name`` in ``student``'s submission; the lowest ``rank`` wins among copies."""

    member: Member
    student: str
    name: str
    rank: int


@dataclass(frozen=True)
class Plan:
    accepted: tuple
    quarantined: tuple
    rejected: tuple
    students: tuple  # every valid student id the upload names


def shown(text: str) -> str:
    """A name as the instructor can read it in one line (control characters replaced, long names cut)."""
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= 100 else text[:97] + "..."


def bad_id(student: str) -> str:
    """Why a student id is refused (Chinese), or ``""``."""
    if STUDENT_ID.match(student):
        return ""
    return f"学生编号 {shown(student)!r} 不合法（{ID_RULE}）；这位学生没有评分，其他学生照常评分"


def lms_name(filename: str, regexp: str):
    """(student id, file id) read from a file name with the LMS pattern, or ``None``."""
    m = re.match(regexp, "/" + filename) if regexp else None
    if not m or "student_id" not in m.groupdict() or "file_id" not in m.groupdict():
        return None
    return m.group("student_id"), m.group("file_id")


def _wrapper(members, intake: Intake) -> str:
    """The one top-level folder to read inside: only when the instructor said so (``--unwrap``)."""
    safe = [m for m in members if m.parts]
    tops = {m.parts[0] for m in safe}
    if len(tops) != 1 or not any(len(m.parts) > 1 for m in safe):
        return ""
    top = next(iter(tops))
    return top if intake.unwrap else ""  # never guessed: "mallory/honest0/..." is mallory's folder, not a wrapper


def _another(name: str, student: str, assignment: str, intake: Intake) -> bool:
    """Is ``name`` (a folder inside ``student``'s) another student's id: on the roster, or any valid id for an owner?"""
    if name in (student, assignment) or bad_id(name):
        return False
    return name in intake.roster if intake.roster is not None else bool(intake.owner)


def _in_folder(m: Member, student: str, rest: tuple, assignment: str, expected: set, regexp: str,
               intake: Intake = Intake()):
    """A Placement or an Issue for a file ``<student>/<rest...>``."""
    name = rest[-1]
    if len(rest) > 1 and _another(rest[0], student, assignment, intake):
        return Issue(student, shown(m.name), "other_student",
                     f"{shown(m.name)} 在 {student} 的上传里，路径却指向学生 {shown(rest[0])}；没有交给 {shown(rest[0])}", m)
    at_home = len(rest) == 1 or (len(rest) == 2 and rest[0] == assignment)
    rank = 0 if len(rest) == 2 else 1
    if at_home and (name in expected or name == "timestamp.txt"):
        return Placement(m, student, name, rank)
    if is_archive(name):
        return Issue(student, shown(m.name), "nested_archive", f"{shown(m.name)}：压缩包不会被解开", m)
    lms = lms_name(name, regexp) if at_home else None
    if lms and lms[1] in expected:
        if lms[0] == student:
            return Placement(m, student, lms[1], rank + 2)
        return Issue(student, shown(m.name), "other_student",
                     f"{shown(m.name)} 在 {student} 的文件夹里，文件名却指向学生 {shown(lms[0])}；没有交给 {shown(lms[0])}", m)
    where = f"<学生>/<notebook>.ipynb 或 <学生>/{assignment}/<notebook>.ipynb"
    return Issue(student, shown(m.name), "outside_layout",
                 f"{shown(m.name)} 不是 {where}（notebook 只能是：{'、'.join(sorted(expected))}）", m)


def _one(m: Member, parts: tuple, assignment: str, expected: set, regexp: str, intake: Intake = Intake()):
    """A Placement or an Issue for one safe file member (path parts below the layout root)."""
    if intake.owner:
        return _owned(m, parts, assignment, expected, regexp, intake)
    if len(parts) == 1:
        lms = lms_name(parts[0], regexp) if intake.layout != "folders" else None
        if not lms or bad_id(lms[0]):
            return Issue(shown(m.name), shown(m.name), "not_collected",
                         f"顶层文件 {shown(m.name)} 既不在学生文件夹里，也不是 <学生>_<notebook>.ipynb；没有评分")
        student, file_id = lms
        if file_id in expected:
            return Placement(m, student, file_id, 3)
        return Issue(student, shown(m.name), "outside_layout",
                     f"{shown(m.name)} 不是这次作业的 notebook（只能是：{'、'.join(sorted(expected))}）", m)
    if intake.layout == "lms":
        return Issue(shown(m.name), shown(m.name), "not_collected",
                     f"{shown(m.name)} 在文件夹里；--layout lms 只收顶层的 <学生>_<notebook>.ipynb，没有评分")
    return _in_folder(m, parts[0], parts[1:], assignment, expected, regexp, intake)


def _owned(m: Member, parts: tuple, assignment: str, expected: set, regexp: str, intake: Intake):
    """Late work of one student (``--from-student``): this member goes to them or to their quarantine, never elsewhere."""
    owner = intake.owner
    if parts[0] == owner and len(parts) > 1:
        return _in_folder(m, owner, parts[1:], assignment, expected, regexp, intake)
    if len(parts) == 1 and (lms := lms_name(parts[0], regexp)) and lms[0] != owner and lms[1] in expected:
        return Issue(owner, shown(m.name), "other_student",
                     f"{shown(m.name)} 是 {owner} 的上传，文件名却指向学生 {shown(lms[0])}；没有交给 {shown(lms[0])}", m)
    if len(parts) == 1 and lms and lms[1] in expected:
        return Placement(m, owner, lms[1], 3)
    if len(parts) > 1 and parts[0] != assignment and not bad_id(parts[0]) and not is_archive(parts[-1]):
        return Issue(owner, shown(m.name), "other_student",
                     f"{shown(m.name)} 是 {owner} 的上传，路径却在文件夹 {shown(parts[0])}/ 里；没有交给任何人", m)
    return _in_folder(m, owner, parts, assignment, expected, regexp, intake)


def plan(members, assignment: str, notebooks, regexp: str, intake: Intake = Intake()) -> Plan:
    """Decide every member of an upload: accepted, quarantined for a student, or not collected."""
    expected = {f"{nb}.ipynb" for nb in notebooks}
    members = [m for m in members if m.kind != "dir" and not (m.parts and is_junk(m.parts))]
    wrap = _wrapper(members, intake)
    candidates, quarantined, rejected, students, bad = [], [], [], set(), set()
    if intake.unwrap and not wrap:  # said, but not one folder holding everything: read as it is, and say so
        tops = sorted({shown(m.parts[0]) for m in members if m.parts})[:5]
        rejected.append(Issue("--unwrap", "", "not_collected", f"上传的顶层不是唯一的一个文件夹（{'、'.join(tops)}），"
                              "没有拆开；按原样收集"))
    for m in members:
        parts = m.parts[1:] if wrap and m.parts else m.parts
        if not parts:  # unsafe name: belongs to the owner, or to the student folder it claims if that is one
            who = intake.owner or first_part(m.name)
            if who != wrap and not bad_id(who) and not (intake.closed and who not in intake.roster):
                students.add(who)
                quarantined.append(Issue(who, shown(m.name), "unsafe_member",
                                         f"{shown(m.name)}：路径不安全（../、绝对路径或控制字符），没有解压"))
            else:
                rejected.append(Issue(shown(m.name), shown(m.name), "not_collected",
                                      f"{shown(m.name)}：路径不安全（../、绝对路径或控制字符），也不属于任何学生文件夹；没有解压"))
            continue
        if len(parts) > 1 and bad_id(parts[0]) and not intake.owner:
            if parts[0] not in bad:
                bad.add(parts[0])
                rejected.append(Issue(shown(parts[0]), shown(m.name), "not_collected", bad_id(parts[0])))
            continue
        got = _one(m, parts, assignment, expected, regexp, intake)
        who = got.who if isinstance(got, Issue) else got.student
        if intake.closed and who not in intake.roster and getattr(got, "trick", "") != "not_collected":
            got = Issue(shown(who), shown(m.name), "not_collected",  # roster.txt is the class: nobody else is collected
                        f"学生编号 {shown(who)!r} 不在 autograde/roster.txt 里；没有评分（名单上的学生照常评分）")
        if isinstance(got, Issue):
            if got.trick == "not_collected":
                rejected.append(got)
            else:
                students.add(got.who)
                quarantined.append(got)
            continue
        students.add(got.student)
        why = refusal(m)
        if why:
            quarantined.append(Issue(got.student, shown(m.name), "unsafe_member", f"{shown(m.name)}：{why}"))
        else:
            candidates.append(got)
    accepted = _dedupe(candidates, quarantined)
    for issue in list(quarantined):  # what is kept aside is read too: the same refusals apply
        if issue.keep is not None and (why := refusal(issue.keep)):
            quarantined[quarantined.index(issue)] = Issue(issue.who, issue.member, issue.trick,
                                                          f"{issue.detail}；{why}", None)
    return Plan(tuple(accepted), tuple(quarantined), tuple(rejected), tuple(sorted(students)))


def _dedupe(candidates, quarantined) -> list:
    """One member per (student, file): the lowest rank, then the first in the upload; the others quarantined."""
    best: dict = {}
    for c in candidates:
        key = (c.student, c.name)
        if key not in best or c.rank < best[key].rank:
            best[key] = c
    for c in candidates:
        kept = best[(c.student, c.name)]
        if c is not kept:
            quarantined.append(Issue(c.student, shown(c.member.name), "duplicate_notebook",
                                     f"{shown(c.member.name)} 与 {shown(kept.member.name)} 是同一个文件 {c.name}；"
                                     f"评分用的是 {shown(kept.member.name)}", c.member))
    return [c for c in candidates if best[(c.student, c.name)] is c]


def summary_lines(summary: dict) -> list[str]:
    """The grade command's closing lines about collection (Chinese)."""
    lines = []
    if summary.get("not_collected"):
        lines.append("没有评分（收集时被拒绝，其他学生照常评分；命令以非零状态退出）："
                     + "；".join(f"{r['who']}（{r['detail']}）" for r in summary["not_collected"]))
    if summary.get("quarantined"):
        lines.append("已隔离（没有放进任何人的提交，也没有评分；文件在 autograde/quarantine/<学生>/，诚信报告里有记录）："
                     + "；".join(f"{r['who']} {r['member']}（{r['detail']}）" for r in summary["quarantined"]))
    return lines
