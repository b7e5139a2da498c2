"""Collect submissions into ``autograde/submitted/<student>/<assignment>/``.

A folder (``<student>/<assignment>/*.ipynb`` or ``<student>/*.ipynb``) or an
nbgrader ``zip_collect`` archive; student ids are checked so that no id can
name a path outside the course.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from pathlib import Path

from .course import Course, CourseError, load_config

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.@-]{0,63}$")


def digest_folder(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(folder)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def check_student(student: str, where) -> str:
    if not STUDENT_ID.match(student):
        raise CourseError(f"学生编号 {student!r}（来自 {where}）不合法：只能用字母、数字和 . @ -，且以字母或数字开头。")
    return student


def _collect_zip(course: Course, archive: Path, assignment: str, into: Path) -> None:
    from nbgrader.plugins import ExtractorPlugin, FileNameCollectorPlugin

    cfg = load_config(course)
    work = Path(tempfile.mkdtemp(prefix="zip-", dir=course.work))
    try:
        (work / "archive").mkdir()
        shutil.copy(archive, work / "archive" / archive.name)
        ExtractorPlugin(config=cfg).extract(str(work / "archive"), str(work / "extracted"))
        collector = FileNameCollectorPlugin(config=cfg)
        found = 0
        for path in sorted((work / "extracted").rglob("*.ipynb")):
            info = collector.collect(str(path))
            if not info:
                continue
            student = check_student(info["student_id"], archive.name)
            dest = into / student / assignment / Path(info["file_id"]).name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, dest)
            found += 1
        if not found:
            raise CourseError(f"压缩包 {archive} 里没有形如 <学生>/<notebook>.ipynb 或 <学生>_<notebook>.ipynb 的文件。")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def collect(course: Course, source, assignment: str) -> list[str]:
    """Copy submissions into ``autograde/submitted``; return the students found there."""
    course.submitted.mkdir(parents=True, exist_ok=True)
    if source is not None:
        source = Path(source).resolve()
        incoming = Path(tempfile.mkdtemp(prefix="collect-", dir=course.work))
        try:
            if source.is_file() and source.suffix == ".zip":
                _collect_zip(course, source, assignment, incoming)
            elif source.is_dir() and source != course.submitted.resolve():
                for student_dir in sorted(p for p in source.iterdir() if p.is_dir() and not p.name.startswith(".")):
                    student = check_student(student_dir.name, source)
                    folder = student_dir / assignment if (student_dir / assignment).is_dir() else student_dir
                    dest = incoming / student / assignment
                    dest.mkdir(parents=True)
                    for path in folder.iterdir():
                        if path.is_file() and (path.suffix == ".ipynb" or path.name == "timestamp.txt"):
                            shutil.copy(path, dest / path.name)
                    if (student_dir / "timestamp.txt").is_file() and not (dest / "timestamp.txt").exists():
                        shutil.copy(student_dir / "timestamp.txt", dest / "timestamp.txt")
            elif not source.exists():
                raise CourseError(f"找不到提交：{source}。请给一个文件夹（<学生>/<作业>/*.ipynb）或 zip 压缩包。")
            elif source != course.submitted.resolve():
                raise CourseError(f"{source} 既不是文件夹也不是 .zip 压缩包。")
            for student_dir in sorted(incoming.iterdir()):
                target = course.submitted / student_dir.name / assignment
                if target.exists():
                    shutil.rmtree(target)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(student_dir / assignment), str(target))
        finally:
            shutil.rmtree(incoming, ignore_errors=True)
    students = []
    for p in sorted(course.submitted.iterdir()):
        if p.is_dir() and (p / assignment).is_dir():
            students.append(check_student(p.name, course.submitted))
    return students
