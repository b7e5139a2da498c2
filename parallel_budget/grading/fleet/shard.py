"""Grading one student (runs in a worker process of :mod:`.runner`).

Every student is graded in a throw-away nbgrader course of their own under
``autograde/.work/shards/<student>/`` with a copy of the template gradebook:
each notebook is validated and compared with the release (:mod:`.integrity`),
autograded (a broken notebook only fails itself), receipts are checked, test
cells that never produced a score get 0, and feedback is written
(:mod:`.feedback`).  A finished shard writes ``done.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
import traceback
from pathlib import Path

from .. import bounds
from ..sandbox import failures
from ..scoring import integrity
from ..intake import student_numbers
from ..course import Course, quiet_app_logs, shard_config
from ..results.feedback import write_feedback
from ..results.gradebook import connect, max_scores


def grade_student(task: dict) -> dict:
    """Grade one student in a shard of their own (runs in a worker process)."""
    import nbformat

    from ..sandbox import forkclient

    started = time.monotonic()
    kernels_before = dict(forkclient.launches)
    failures.clear()
    forkclient.new_student()  # new sandboxes (fresh /tmp, home, uids) for this student; failed starts tried again
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
        shutil.copytree(task.get("submission") or course.submitted / student / assignment, submitted)  # a cluster ships it
        cfg = shard_config(course, shard, task.get("timeout"), sandbox=task.get("sandbox", True))
        cfg.Variants.peers = list(task.get("peers", []))  # per-student numbers: whose variants to compare with
        cfg.ResilientExecute.student_started = started  # the per-student time budget counts from here
        student_numbers.RECORDED.clear()
        from nbgrader.converters import Autograde
        from nbgrader.coursedir import CourseDirectory

        quiet_app_logs()
        findings: list = [] if task.get("sandbox", True) else [integrity.Finding(student, "", "", "unsandboxed")]
        failed: list = []
        graded: list = []
        sources = task["release_cells"]
        points = max_scores(Path(task["template"]), assignment)
        for nb in task["notebooks"]:
            path = submitted / f"{nb}.ipynb"
            if not path.exists():
                findings.append(integrity.Finding(student, nb, "", "missing_notebook"))
                continue
            try:
                if too_big := bounds.notebook_too_big(path):  # checked before reading a byte of it
                    findings.append(integrity.Finding(student, nb, "", "oversized_notebook", too_big))
                    raise _Dropped
                submitted_nb = json.loads(path.read_text(encoding="utf-8"))
                capped = _capped_cells(student, nb, submitted_nb)  # before anything parses or validates a cell
                nbformat.validate(nbformat.from_dict(submitted_nb))
            except Exception as exc:  # too big, invalid JSON or not a notebook
                if not isinstance(exc, _Dropped):
                    findings.append(integrity.Finding(student, nb, "", "invalid_notebook", type(exc).__name__))
                path.unlink()  # nbgrader then scores it as missing (0), the other notebooks are unaffected
                failed.append(nb)
                continue
            scanned = integrity.compare_cells(student, nb, submitted_nb, sources.get(nb, {}))
            findings.extend(capped + scanned)
            findings.extend(integrity.edited_points(student, nb, submitted_nb, points.get(nb, {})))
            dropped = integrity.drop_duplicate_grade_cells(submitted_nb)  # nbgrader would fail the whole notebook
            if dropped or capped or any(f.trick == "unscannable_cell" for f in scanned):  # grade what was kept
                path.write_text(json.dumps(submitted_nb, ensure_ascii=False), encoding="utf-8")
            del submitted_nb
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
                failures.check()  # the grader's failure (kernel start, sandbox): the student is not graded
                for nb in graded:
                    try:
                        autograde(nb)
                    except Exception as exc:
                        failures.check()
                        findings.append(integrity.Finding(student, nb, "", "grading_failed", type(exc).__name__))
                        failed.append(nb)
            failures.check()
        findings.extend(_copying(student))
        _post_grade(shard, student, assignment, task, findings, _budget(cfg))
        write_feedback(cfg, shard, student, assignment, task.get("marks"))
        result.update(ok=True, findings=len(findings), failed=failed,
                      tricks=sorted({f.trick for f in findings} - {"missing_notebook", "unsandboxed"}))
    except failures.InfrastructureError as exc:
        result.update(infra=True, reason=f"评分环境故障（不是学生代码的问题）：{exc}")
        result["errors"].append(traceback.format_exc(limit=6))
    except Exception as exc:
        result["reason"] = f"评分出错：{failures.short(exc)}"
        result["errors"].append(traceback.format_exc(limit=6))
    forkclient.close_all()  # nothing this student's code left running outlives their grading
    result["seconds"] = round(time.monotonic() - started, 3)
    result["kernels"] = {k: v - kernels_before.get(k, 0) for k, v in forkclient.launches.items()}
    if result["ok"]:
        done = dict(result, digest=task["digest"], base=task["base"])
        (shard / "done.tmp").write_text(json.dumps(done, ensure_ascii=False))
        os.replace(shard / "done.tmp", shard / "done.json")
    return result


class _Dropped(Exception):
    """A notebook that is not graded at all (its finding is already recorded)."""


def _capped_cells(student: str, notebook: str, nb) -> list:
    """``oversized_cell`` findings of the cells :func:`.bounds.cap_cells` replaced in ``nb``."""
    return [integrity.Finding(student, notebook, gid or f"第 {index + 1} 个单元", "oversized_cell",
                              f"{chars} 个字符，上限 {bounds.MAX_CELL_CHARS}")
            for index, gid, chars in bounds.cap_cells(nb)]


def _budget(cfg) -> float:
    return float(cfg.ResilientExecute.get("student_budget", bounds.STUDENT_BUDGET_S))


def _copying(student: str) -> list:
    """``possible_copying`` and ``book_answer`` findings of this student's grading (once each, even if a notebook was graded twice)."""
    seen, out = set(), []
    for item in student_numbers.RECORDED:
        finding = integrity.Finding(student, item["notebook"], item["cell"], student_numbers.trick_of(item),
                                    student_numbers.finding_detail(item))
        if finding not in seen:
            seen.add(finding)
            out.append(finding)
    student_numbers.RECORDED.clear()
    return out


def _post_grade(shard, student, assignment, task, findings, budget):
    """Receipt check, runtime findings, zeros for failed and capped cells; store flags and digest."""
    con = connect(shard / "gradebook.db")
    row = con.execute("SELECT sa.id FROM submitted_assignment sa JOIN assignment a ON sa.assignment_id = a.id "
                      "WHERE sa.student_id = ? AND a.name = ?", (student, assignment)).fetchone()
    if row is None:  # every notebook was missing or invalid: make nbgrader create the zero submission
        con.close()
        from nbgrader.api import Gradebook

        with Gradebook("sqlite:///" + str(shard / "gradebook.db")) as gb:
            gb.update_or_create_student(student)
            gb.update_or_create_submission(assignment, student)
        con = connect(shard / "gradebook.db")
    graded = shard / "autograde" / "autograded" / student / assignment
    score_sql = ("UPDATE grade SET auto_score = 0, needs_manual_grade = 0 WHERE cell_id IN "
                 "(SELECT bc.id FROM base_cell bc JOIN notebook n ON bc.notebook_id = n.id WHERE n.name = ? AND bc.name = ?) "
                 "AND notebook_id IN (SELECT sn.id FROM submitted_notebook sn JOIN notebook n ON sn.notebook_id = n.id "
                 "JOIN submitted_assignment sa ON sn.assignment_id = sa.id WHERE sa.student_id = ? AND n.name = ?)")
    for nb in task["notebooks"]:
        path = graded / f"{nb}.ipynb"
        if path.exists():
            autograded = json.loads(path.read_text(encoding="utf-8"))
            findings.extend(integrity.runtime_findings(student, nb, autograded, budget))
            for gid in integrity.passed_without_receipt(autograded):
                findings.append(integrity.Finding(student, nb, gid, "no_receipt"))
                con.execute(score_sql, (nb, gid, student, nb))
        # test cells that never produced a score (deleted, or the notebook failed) score 0
        con.execute(
            "UPDATE grade SET auto_score = 0, needs_manual_grade = 0 WHERE auto_score IS NULL AND cell_id IN "
            "(SELECT id FROM grade_cells WHERE cell_type = 'code') AND notebook_id IN (SELECT sn.id FROM submitted_notebook sn "
            "JOIN notebook n ON sn.notebook_id = n.id JOIN submitted_assignment sa ON sn.assignment_id = sa.id "
            "WHERE sa.student_id = ? AND n.name = ?)", (student, nb))
    for f in findings:  # a graded cell that was too big or unreadable to scan did not run: 0
        if f.trick in ("oversized_cell", "unscannable_cell"):
            con.execute(score_sql, (f.notebook, f.cell, student, f.notebook))
    con.executemany(
        "INSERT INTO pb_integrity (student_id, assignment, notebook, cell, trick, detail) VALUES (?, ?, ?, ?, ?, ?)",
        [(f.student, assignment, f.notebook, f.cell, f.trick, f.detail) for f in findings])
    con.execute("INSERT OR REPLACE INTO pb_submission (student_id, assignment, digest) VALUES (?, ?, ?)",
                (student, assignment, task["digest"]))
    con.commit()
    con.close()


def worker_init(log_dir: str):
    """Worker set-up: ignore Ctrl-C (the parent handles it), send kernel chatter to a log file."""
    import warnings

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    warnings.filterwarnings("ignore")
    fd = os.open(os.path.join(log_dir, f"worker-{os.getpid()}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)  # kernels inherit it; the student's stderr never reaches the instructor's terminal
    os.close(fd)
