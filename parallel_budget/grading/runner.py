"""The one grading command: collect, autograde in parallel shards, merge, feedback, export.

Design (issue 7): nbgrader's gradebook is one SQLite file and not safe for
concurrent writers, so no two processes ever write the same database.

1. *Collect* a folder (``<student>/<assignment>/*.ipynb`` or ``<student>/*.ipynb``)
   or an nbgrader zip_collect archive into ``autograde/submitted/``.
2. *Base*: a copy of the course gradebook updated with the assignment from
   ``solutions/`` (``generate_assignment``), and a *template* = the base without
   any submission.  Both are keyed by the course gradebook's and the source's
   digests, so a rerun reuses them.
3. *Shards*: every student is graded by a worker process in its own tiny
   nbgrader course under ``autograde/.work/shards/<student>/`` with a copy of
   the template: autograde notebook by notebook (a broken notebook only fails
   itself), receipt check and integrity scan (:mod:`.integrity`), feedback.  A
   finished shard writes ``done.json``; ``--jobs N`` workers run shards in
   parallel.  A student whose grading fails is reported and left out of the
   merge; the others are unaffected.
4. *Merge* the finished shards into a staging copy of the base (per student:
   delete the old submission, insert the shard's rows, keep manual scores and
   comments), write a journal, then ``os.replace`` it over the course
   gradebook: the gradebook is either the old one or the fully merged one.
5. *Place* each student's autograded and feedback folders, export
   ``autograde/grades.csv`` and ``autograde/integrity.csv``, clean up.

An interrupted run leaves finished shards (reused by the next run) and, if it
died after the replace, a journal the next run completes first.  Students whose
submission digest is unchanged since they were last graded are skipped, so
rerunning the command after adding late submissions grades only those;
``--student`` re-grades chosen students and ``--force`` everyone.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import sqlite3
import tempfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path

from .course import Course, CourseError, load_config, shard_config

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.@-]{0,63}$")
PB_TABLES = (
    "CREATE TABLE IF NOT EXISTS pb_submission (student_id TEXT NOT NULL, assignment TEXT NOT NULL,"
    " digest TEXT NOT NULL, PRIMARY KEY (student_id, assignment))",
    "CREATE TABLE IF NOT EXISTS pb_integrity (student_id TEXT NOT NULL, assignment TEXT NOT NULL,"
    " notebook TEXT, cell TEXT, trick TEXT NOT NULL, detail TEXT)",
)
SUBMISSION_TABLES = ("submitted_assignment", "submitted_notebook", "grade", "comment")
log = logging.getLogger("parallel_budget.grading")


# ------------------------------------------------------------------ collect

def _digest_folder(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(folder)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _check_student(student: str, where) -> str:
    if not STUDENT_ID.match(student):
        raise CourseError(f"学生编号 {student!r}(来自 {where})不合法:只能用字母、数字和 . @ -,且以字母或数字开头。")
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
            student = _check_student(info["student_id"], archive.name)
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
                    student = _check_student(student_dir.name, source)
                    folder = student_dir / assignment if (student_dir / assignment).is_dir() else student_dir
                    dest = incoming / student / assignment
                    dest.mkdir(parents=True)
                    for path in folder.iterdir():
                        if path.is_file() and (path.suffix == ".ipynb" or path.name == "timestamp.txt"):
                            shutil.copy(path, dest / path.name)
                    if (student_dir / "timestamp.txt").is_file() and not (dest / "timestamp.txt").exists():
                        shutil.copy(student_dir / "timestamp.txt", dest / "timestamp.txt")
            elif not source.exists():
                raise CourseError(f"找不到提交:{source}。请给一个文件夹(<学生>/<作业>/*.ipynb)或 zip 压缩包。")
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
            students.append(_check_student(p.name, course.submitted))
    return students


# --------------------------------------------------------------- gradebook

def _connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(str(path), timeout=30)
    for stmt in PB_TABLES:
        con.execute(stmt)
    return con


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.exists() else "none"


def _columns(con, table, schema="main"):
    return [row[1] for row in con.execute(f"PRAGMA {schema}.table_info({table})")]


def _delete_submission(con, student: str, assignment_name: str) -> None:
    sub = ("SELECT sa.id FROM submitted_assignment sa JOIN assignment a ON sa.assignment_id = a.id "
           "WHERE sa.student_id = ? AND a.name = ?")
    nbs = f"SELECT id FROM submitted_notebook WHERE assignment_id IN ({sub})"
    con.execute(f"DELETE FROM grade WHERE notebook_id IN ({nbs})", (student, assignment_name))
    con.execute(f"DELETE FROM comment WHERE notebook_id IN ({nbs})", (student, assignment_name))
    con.execute(f"DELETE FROM submitted_notebook WHERE assignment_id IN ({sub})", (student, assignment_name))
    con.execute("DELETE FROM submitted_assignment WHERE id IN (" + sub + ")", (student, assignment_name))
    con.execute("DELETE FROM pb_integrity WHERE student_id = ? AND assignment = ?", (student, assignment_name))
    con.execute("DELETE FROM pb_submission WHERE student_id = ? AND assignment = ?", (student, assignment_name))


def _manual_marks(con, student, assignment_name):
    """Manual scores, extra credit and manual comments an instructor entered, keyed by (notebook, cell)."""
    q = ("SELECT n.name, {t}.cell_id, {cols} FROM {t} JOIN submitted_notebook sn ON {t}.notebook_id = sn.id "
         "JOIN notebook n ON sn.notebook_id = n.id JOIN submitted_assignment sa ON sn.assignment_id = sa.id "
         "JOIN assignment a ON sa.assignment_id = a.id WHERE sa.student_id = ? AND a.name = ?")
    grades = con.execute(q.format(t="grade", cols="grade.manual_score, grade.extra_credit"), (student, assignment_name)).fetchall()
    comments = con.execute(q.format(t="comment", cols="comment.manual_comment"), (student, assignment_name)).fetchall()
    return grades, comments


def _restore_marks(con, student, assignment_name, grades, comments):
    target = ("(SELECT sn.id FROM submitted_notebook sn JOIN notebook n ON sn.notebook_id = n.id "
              "JOIN submitted_assignment sa ON sn.assignment_id = sa.id JOIN assignment a ON sa.assignment_id = a.id "
              "WHERE sa.student_id = ? AND a.name = ? AND n.name = ?)")
    for nb, cell, manual, extra in grades:
        if manual is not None or extra is not None:
            con.execute(f"UPDATE grade SET manual_score = ?, extra_credit = ? WHERE cell_id = ? AND notebook_id = {target}",
                        (manual, extra, cell, student, assignment_name, nb))
    for nb, cell, text in comments:
        if text:
            con.execute(f"UPDATE comment SET manual_comment = ? WHERE cell_id = ? AND notebook_id = {target}",
                        (text, cell, student, assignment_name, nb))


def merge_shard(con: sqlite3.Connection, shard_db: Path, student: str, assignment_name: str) -> None:
    """Replace ``student``'s submission in ``con`` by the one graded in ``shard_db``."""
    grades, comments = _manual_marks(con, student, assignment_name)
    _delete_submission(con, student, assignment_name)
    con.execute("ATTACH DATABASE ? AS s", (str(shard_db),))
    try:
        cols = ", ".join(_columns(con, "student"))
        con.execute(f"INSERT OR IGNORE INTO student ({cols}) SELECT {cols} FROM s.student WHERE id = ?", (student,))
        sub = ("SELECT sa.id FROM s.submitted_assignment sa JOIN s.assignment a ON sa.assignment_id = a.id "
               "WHERE sa.student_id = ? AND a.name = ?")
        where = {
            "submitted_assignment": f"id IN ({sub})",
            "submitted_notebook": f"assignment_id IN ({sub})",
            "grade": f"notebook_id IN (SELECT id FROM s.submitted_notebook WHERE assignment_id IN ({sub}))",
            "comment": f"notebook_id IN (SELECT id FROM s.submitted_notebook WHERE assignment_id IN ({sub}))",
        }
        for table in SUBMISSION_TABLES:
            cols = ", ".join(_columns(con, table))
            con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM s.{table} WHERE {where[table]}",
                        (student, assignment_name))
        for table in ("pb_submission", "pb_integrity"):
            cols = ", ".join(_columns(con, table))
            con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM s.{table} WHERE student_id = ? AND assignment = ?",
                        (student, assignment_name))
        con.commit()
    finally:
        con.execute("DETACH DATABASE s")
    _restore_marks(con, student, assignment_name, grades, comments)
    con.commit()


def graded_digests(course: Course, assignment: str) -> dict:
    if not course.gradebook.exists():
        return {}
    con = sqlite3.connect(str(course.gradebook))
    try:
        return dict(con.execute("SELECT student_id, digest FROM pb_submission WHERE assignment = ?", (assignment,)))
    except sqlite3.OperationalError:
        return {}
    finally:
        con.close()


# -------------------------------------------------------------------- base

def _quiet_app_logs():
    for name in ("traitlets", "nbgrader", "GenerateAssignment", "Autograde", "GenerateFeedback"):
        logging.getLogger(name).setLevel(logging.WARNING)


def prepare_base(course: Course, assignment: str) -> tuple[str, Path]:
    """Key and folder of the base gradebook (course gradebook + assignment) and its template."""
    source_digest = course.source_digest(assignment)
    key = hashlib.sha256(f"{_file_digest(course.gradebook)}:{source_digest}:{assignment}".encode()).hexdigest()[:16]
    folder = course.work / "base" / key
    if (folder / "template.db").exists():
        return key, folder
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    base = folder / "base.db"
    if course.gradebook.exists():
        shutil.copy(course.gradebook, base)
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory

    cfg = load_config(course)
    cfg.CourseDirectory.db_url = "sqlite:///" + str(base)
    cfg.CourseDirectory.release_directory = str((folder / "release").relative_to(course.root))
    coursedir = CourseDirectory(config=cfg)
    coursedir.assignment_id = assignment
    app = GenerateAssignment(coursedir=coursedir, config=cfg)
    app.force = True
    _quiet_app_logs()
    app.start()
    con = _connect(base)
    con.commit()
    con.close()
    template = folder / "template.tmp"
    shutil.copy(base, template)
    con = _connect(template)
    for table in ("grade", "comment", "submitted_notebook", "submitted_assignment", "student", "pb_integrity", "pb_submission"):
        con.execute(f"DELETE FROM {table}")
    con.commit()
    con.execute("VACUUM")
    con.close()
    os.replace(template, folder / "template.db")
    return key, folder


def release_cells(base: Path, assignment: str) -> dict:
    """{notebook: {grade_id: (source, is_test)}} of the release generated with the base gradebook."""
    out: dict = {}
    for path in sorted((base / "release" / assignment).glob("*.ipynb")):
        cells = {}
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade_id"):
                src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                cells[meta["grade_id"]] = (src, bool(meta.get("grade")) and not meta.get("solution"))
        out[path.stem] = cells
    return out


# ------------------------------------------------------------------ worker

def grade_student(task: dict) -> dict:
    """Grade one student in a shard of their own (runs in a worker process)."""
    import nbformat

    from . import forkserver, integrity

    started = time.monotonic()
    kernels_before = dict(forkserver.launches)
    course = Course(task["root"])
    student, assignment = task["student"], task["assignment"]
    shard = Path(task["shard"])
    result = {"student": student, "ok": False, "errors": [], "findings": 0, "seconds": 0.0}
    try:
        if shard.exists():
            shutil.rmtree(shard)
        (shard / "solutions" / assignment).mkdir(parents=True)
        shutil.copy(task["template"], shard / "gradebook.db")
        submitted = shard / "autograde" / "submitted" / student / assignment
        shutil.copytree(course.submitted / student / assignment, submitted)
        cfg = shard_config(course, shard, task.get("timeout"))
        from nbgrader.converters import Autograde, GenerateFeedback
        from nbgrader.coursedir import CourseDirectory

        _quiet_app_logs()
        findings: list = []
        failed: list = []
        graded: list = []
        sources = task["release_cells"]
        for nb in task["notebooks"]:
            path = submitted / f"{nb}.ipynb"
            if not path.exists():
                findings.append(integrity.Finding(student, nb, "", "missing_notebook"))
                continue
            try:
                submitted_nb = json.loads(path.read_text(encoding="utf-8"))
                nbformat.validate(nbformat.from_dict(submitted_nb))
            except Exception as exc:  # invalid JSON or not a notebook
                findings.append(integrity.Finding(student, nb, "", "invalid_notebook", type(exc).__name__))
                path.unlink()  # nbgrader then scores it as missing (0), the other notebooks are unaffected
                failed.append(nb)
                continue
            findings.extend(integrity.compare_cells(student, nb, submitted_nb, sources.get(nb, {})))
            if integrity.drop_duplicate_grade_cells(submitted_nb):  # nbgrader would fail the whole notebook
                path.write_text(json.dumps(submitted_nb, ensure_ascii=False), encoding="utf-8")
            graded.append(nb)

        def autograde(notebook_id):
            coursedir = CourseDirectory(config=cfg)
            coursedir.assignment_id, coursedir.student_id, coursedir.notebook_id = assignment, student, notebook_id
            app = Autograde(coursedir=coursedir, config=cfg)
            app.force, app.create_student = True, True
            app.start()

        if graded:
            try:  # one nbgrader call for the whole submission (cheaper) ...
                autograde("*")
            except Exception:  # ... and notebook by notebook when any failed, so one failure costs only itself
                for nb in graded:
                    try:
                        autograde(nb)
                    except Exception as exc:
                        findings.append(integrity.Finding(student, nb, "", "grading_failed", type(exc).__name__))
                        failed.append(nb)
        _post_grade(shard, student, assignment, task, findings, failed)
        coursedir = CourseDirectory(config=cfg)
        coursedir.assignment_id, coursedir.student_id = assignment, student
        if any((shard / "autograde" / "autograded" / student / assignment).glob("*.ipynb")):
            fb = GenerateFeedback(coursedir=coursedir, config=cfg)
            fb.force = True
            fb.start()
        result.update(ok=True, findings=len(findings), failed=failed)
    except Exception:
        result["errors"].append(traceback.format_exc(limit=6))
    result["seconds"] = round(time.monotonic() - started, 3)
    result["kernels"] = {k: v - kernels_before.get(k, 0) for k, v in forkserver.launches.items()}
    if result["ok"]:
        done = dict(result, digest=task["digest"], base=task["base"])
        (shard / "done.tmp").write_text(json.dumps(done, ensure_ascii=False))
        os.replace(shard / "done.tmp", shard / "done.json")
    return result


def _post_grade(shard, student, assignment, task, findings, failed):
    """Receipt check, runtime findings, zeros for failed cells; store flags and digest."""
    from . import integrity

    con = _connect(shard / "gradebook.db")
    row = con.execute("SELECT sa.id FROM submitted_assignment sa JOIN assignment a ON sa.assignment_id = a.id "
                      "WHERE sa.student_id = ? AND a.name = ?", (student, assignment)).fetchone()
    if row is None:  # every notebook was missing or invalid: make nbgrader create the zero submission
        con.close()
        from nbgrader.api import Gradebook

        with Gradebook("sqlite:///" + str(shard / "gradebook.db")) as gb:
            gb.update_or_create_student(student)
            gb.update_or_create_submission(assignment, student)
        con = _connect(shard / "gradebook.db")
    graded = shard / "autograde" / "autograded" / student / assignment
    score_sql = ("UPDATE grade SET auto_score = 0, needs_manual_grade = 0 WHERE cell_id IN "
                 "(SELECT bc.id FROM base_cell bc JOIN notebook n ON bc.notebook_id = n.id WHERE n.name = ? AND bc.name = ?) "
                 "AND notebook_id IN (SELECT sn.id FROM submitted_notebook sn JOIN notebook n ON sn.notebook_id = n.id "
                 "JOIN submitted_assignment sa ON sn.assignment_id = sa.id WHERE sa.student_id = ? AND n.name = ?)")
    for nb in task["notebooks"]:
        path = graded / f"{nb}.ipynb"
        if path.exists():
            autograded = json.loads(path.read_text(encoding="utf-8"))
            findings.extend(integrity.runtime_findings(student, nb, autograded))
            for gid in integrity.passed_without_receipt(autograded):
                findings.append(integrity.Finding(student, nb, gid, "no_receipt"))
                con.execute(score_sql, (nb, gid, student, nb))
        # test cells that never produced a score (deleted, or the notebook failed) score 0
        con.execute(
            "UPDATE grade SET auto_score = 0, needs_manual_grade = 0 WHERE auto_score IS NULL AND cell_id IN "
            "(SELECT id FROM grade_cells WHERE cell_type = 'code') AND notebook_id IN (SELECT sn.id FROM submitted_notebook sn "
            "JOIN notebook n ON sn.notebook_id = n.id JOIN submitted_assignment sa ON sn.assignment_id = sa.id "
            "WHERE sa.student_id = ? AND n.name = ?)", (student, nb))
    con.executemany(
        "INSERT INTO pb_integrity (student_id, assignment, notebook, cell, trick, detail) VALUES (?, ?, ?, ?, ?, ?)",
        [(f.student, assignment, f.notebook, f.cell, f.trick, f.detail) for f in findings])
    con.execute("INSERT OR REPLACE INTO pb_submission (student_id, assignment, digest) VALUES (?, ?, ?)",
                (student, assignment, task["digest"]))
    con.commit()
    con.close()


def _worker_init(log_dir: str):
    """Worker set-up: ignore Ctrl-C (the parent handles it), send kernel chatter to a log file."""
    import warnings

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    warnings.filterwarnings("ignore")
    fd = os.open(os.path.join(log_dir, f"worker-{os.getpid()}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)  # kernels inherit it; the student's stderr never reaches the instructor's terminal
    os.close(fd)


# ------------------------------------------------------------------ driver

@contextlib.contextmanager
def _locked(course: Course):
    course.work.mkdir(parents=True, exist_ok=True)
    fh = open(course.work / "lock", "w")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        raise CourseError("另一个评分命令正在运行(autograde/.work/lock 被占用);请等它结束再运行。") from None
    try:
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def _journal_path(course):
    return course.work / "journal.json"


def _place_and_finish(course: Course, journal: dict) -> None:
    """After the gradebook replace: move each student's folders into place, export, clean."""
    assignment = journal["assignment"]
    for student, shard in journal["students"].items():
        shard = Path(shard)
        for kind, dest_root in (("autograded", course.autograded), ("feedback", course.feedback)):
            src = shard / "autograde" / kind / student / assignment
            dest = dest_root / student / assignment
            if src.exists():
                if dest.exists():
                    shutil.rmtree(dest)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(src), str(dest))
            elif dest.exists() and not (shard / "done.json").exists():
                continue  # already moved by an earlier, interrupted attempt
    export(course)
    for shard in journal["students"].values():
        shutil.rmtree(shard, ignore_errors=True)
    _journal_path(course).unlink()


def _finish_pending(course: Course) -> bool:
    path = _journal_path(course)
    if not path.exists():
        return False
    journal = json.loads(path.read_text(encoding="utf-8"))
    if _file_digest(course.gradebook) == journal["gradebook"]:
        log.warning("上次评分在写入成绩册之后中断,现在补完反馈文件和导出。")
        _place_and_finish(course, journal)
        return True
    path.unlink()  # the replace never happened: the old gradebook stands, shards are reused
    return False


def export(course: Course) -> None:
    """Write autograde/grades.csv (nbgrader's CSV export) and autograde/integrity.csv."""
    if not course.gradebook.exists():
        return
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    from .integrity import TRICKS

    tmp = course.grades_csv.with_suffix(".tmp")
    plugin = CsvExportPlugin(config=load_config(course))
    plugin.to = str(tmp)
    with Gradebook("sqlite:///" + str(course.gradebook)) as gb:
        plugin.export(gb)
    os.replace(tmp, course.grades_csv)
    con = _connect(course.gradebook)
    rows = con.execute("SELECT student_id, assignment, notebook, cell, trick, detail FROM pb_integrity "
                       "ORDER BY student_id, assignment, notebook, cell, trick, detail").fetchall()
    con.close()
    tmp = course.integrity_csv.with_suffix(".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["student_id", "assignment", "notebook", "cell", "trick", "what", "evidence"])
        for student, assignment, nb, cell, trick, detail in rows:
            w.writerow([student, assignment, nb, cell, trick, TRICKS.get(trick, trick), detail])
    os.replace(tmp, course.integrity_csv)


def _run_pool(tasks: list, jobs: int, report, log_dir: Path) -> list:
    results = []
    pending = list(tasks)
    attempts = {t["student"]: 0 for t in tasks}
    while pending:
        batch, pending = pending, []
        pool = ProcessPoolExecutor(max_workers=max(1, min(jobs, len(batch))), mp_context=get_context("spawn"),
                                   initializer=_worker_init, initargs=(str(log_dir),))
        try:
            futures = {pool.submit(grade_student, t): t for t in batch}
            for fut in as_completed(futures):
                task = futures[fut]
                try:
                    res = fut.result()
                except BrokenProcessPool:
                    attempts[task["student"]] += 1
                    if attempts[task["student"]] < 2:
                        pending.append(task)
                        continue
                    res = {"student": task["student"], "ok": False, "errors": ["评分进程意外退出"], "seconds": 0.0}
                results.append(res)
                report(res)
        except BaseException:
            for proc in list(getattr(pool, "_processes", {}).values()):
                with contextlib.suppress(Exception):
                    proc.terminate()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
    return results


def grade(submissions=None, *, root=None, assignment=None, jobs=None, students=None, force=False,
          timeout=None, quiet=False) -> dict:
    """Grade a class end to end. Returns a summary dict (graded, skipped, failed, seconds)."""
    started = time.monotonic()
    course = Course(root)
    assignments = course.assignments()
    assignment = assignment or (assignments[0] if len(assignments) == 1 else None)
    if assignment not in assignments:
        raise CourseError(f"请用 --assignment 指定作业,可用:{', '.join(assignments)}")
    jobs = jobs or os.cpu_count() or 1
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    with _locked(course):
        _finish_pending(course)
        found = collect(course, submissions, assignment)
        if students:
            missing = sorted(set(students) - set(found))
            if missing:
                raise CourseError(f"autograde/submitted 里没有这些学生的提交:{', '.join(missing)}")
        key, base = prepare_base(course, assignment)
        source = course.source_digest(assignment)
        before = graded_digests(course, assignment)
        todo = []
        for student in found:
            digest = _digest_folder(course.submitted / student / assignment) + ":" + source
            if students and student not in students:
                continue
            if not students and not force and before.get(student) == digest:
                continue
            todo.append((student, digest))
        cells = release_cells(base, assignment)
        notebooks = course.notebooks(assignment)
        shards = course.work / "shards"
        tasks, reused = [], []
        for student, digest in todo:
            shard = shards / student
            done = shard / "done.json"
            if done.exists():
                info = json.loads(done.read_text(encoding="utf-8"))
                if info.get("digest") == digest and info.get("base") == key:
                    reused.append(info)
                    continue
            tasks.append(dict(root=str(course.root), student=student, assignment=assignment, shard=str(shard),
                              template=str(base / "template.db"), digest=digest, base=key, notebooks=notebooks,
                              release_cells=cells, timeout=timeout))
        say(f"评分 {assignment}:{len(found)} 份提交,{len(tasks)} 份待评分,{len(reused)} 份沿用上次中断前的结果,"
            f"{len(found) - len(todo)} 份未变跳过;{jobs} 个并行进程。")

        def report(res):
            if not res["ok"]:
                say(f"  ✗ {res['student']}:评分失败(其他学生不受影响)\n    " + "\n    ".join(res["errors"])[-1500:])

        logs = course.work / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        results = _run_pool(tasks, jobs, report, logs) + reused
        ok = sorted((r for r in results if r["ok"]), key=lambda r: r["student"])
        failed = sorted(r["student"] for r in results if not r["ok"])
        if ok:
            staging = course.work / "staging.db"
            shutil.copy(base / "base.db", staging)
            con = _connect(staging)
            for r in ok:
                merge_shard(con, shards / r["student"] / "gradebook.db", r["student"], assignment)
            con.commit()
            con.close()
            journal = {"assignment": assignment, "gradebook": _file_digest(staging),
                       "students": {r["student"]: str(shards / r["student"]) for r in ok}}
            tmp = _journal_path(course).with_suffix(".tmp")
            tmp.write_text(json.dumps(journal, ensure_ascii=False))
            os.replace(tmp, _journal_path(course))
            os.replace(staging, course.gradebook)
            _place_and_finish(course, journal)
        else:
            export(course)
        shutil.rmtree(course.work / "base", ignore_errors=True)
    kernels = {kind: sum(r.get("kernels", {}).get(kind, 0) for r in results) for kind in ("forked", "fresh")}
    summary = {"graded": [r["student"] for r in ok], "failed": failed, "kernels": kernels,
               "skipped": len(found) - len(todo), "seconds": round(time.monotonic() - started, 2)}
    say(f"完成:评分 {len(ok)} 人,失败 {len(failed)} 人{('(' + ', '.join(failed) + ')') if failed else ''},"
        f"用时 {summary['seconds']} s(内核:{kernels['forked']} 个从预热进程 fork,{kernels['fresh']} 个全新启动)。"
        f"成绩:{course.grades_csv.relative_to(course.root)};"
        f"诚信报告:{course.integrity_csv.relative_to(course.root)};反馈:{course.feedback.relative_to(course.root)}/")
    return summary
