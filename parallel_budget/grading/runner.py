"""The one grading command: collect, autograde in parallel shards, merge, feedback, export.

This module is the orchestration (lock, worker pool, journal, placing the
results); the steps live in :mod:`.collect`, :mod:`.gradebook` (base, merge,
export), :mod:`.shard` (one student) and :mod:`.feedback`.

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
4. *Merge* the finished shards into the live ``autograde/gradebook.db`` in one
   SQLite transaction (:mod:`.merge`): rows are updated in place, so an open
   formgrader keeps working; manual marks, flags and extensions entered in
   formgrader (also during the run) are kept, except a manual mark whose
   answer changed, which is cleared and listed for a manual re-grade.  A
   journal written before the transaction names the run; the merge records
   the run id in the same transaction, so the next run knows whether it
   committed.
5. *Place* each student's autograded and feedback folders, rewrite the feedback
   of students whose marks changed while they were graded, export
   ``autograde/grades.csv`` and ``autograde/integrity.csv``, clean up.

An interrupted run leaves finished shards (reused by the next run) and, if it
died after the merge committed, a journal the next run completes first.  Students whose
submission digest is unchanged since they were last graded are skipped, so
rerunning the command after adding late submissions grades only those;
``--student`` re-grades chosen students and ``--force`` everyone.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import time
import uuid
from pathlib import Path

from .intake.collect import collect, digest_folder
from .intake.owners import summary_lines as collection_lines
from .sandbox import hostlog
from .fleet import lifeline, preflight
from .intake import student_numbers
from .fleet.batches import BATCH_SECONDS, BATCH_STUDENTS, Batcher
from .course import Course, CourseError, load_config
from .results.feedback import course_feedback, install_mathjax, task_marks
from .results.gradebook import export, graded_digests, prepare_base, release_cells, snapshot
from .results.merge import MergeReport, finished_run, merge
from .fleet.pool import registry, run_local
from .sandbox.bwrap import unavailable as sandbox_unavailable

__all__ = ["collect", "export", "grade", "merge"]
log = logging.getLogger("parallel_budget.grading")
UNSANDBOXED = ("!!!!!!!! 警告：--no-sandbox，本次评分没有沙箱隔离。学生代码以评分者身份运行，能读写评分者能读写的一切"
               "（包括成绩册和其他学生的提交）、能联网。只在可信的提交上这样做。诚信报告里每个学生都有一行 unsandboxed。 !!!!!!!!")


@contextlib.contextmanager
def _locked(course: Course):
    course.work.mkdir(parents=True, exist_ok=True)
    fh = open(course.work / "lock", "w")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        raise CourseError("另一个评分命令正在运行（autograde/.work/lock 被占用）；请等它结束再运行。") from None
    try:
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def _journal_path(course):
    return course.work / "journal.json"


def _place_and_finish(course: Course, journal: dict, report: MergeReport) -> None:
    """After the merge committed: move each student's folders into place, fix stale feedback, export, clean."""
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
    for student in report.stale:  # a mark changed while they were graded: feedback from the live gradebook
        course_feedback(course, student, assignment)
    export(course)
    _set_unfinished(course, assignment, _unfinished(course, assignment) - set(journal["students"]))
    for shard in journal["students"].values():
        shutil.rmtree(shard, ignore_errors=True)
    _journal_path(course).unlink()


def _finish_pending(course: Course) -> bool:
    path = _journal_path(course)
    if not path.exists():
        return False
    journal = json.loads(path.read_text(encoding="utf-8"))
    report = finished_run(course.gradebook, journal.get("run", ""))
    if report is not None:
        log.warning("上次评分在写入成绩册之后中断，现在补完反馈文件和导出。")
        _place_and_finish(course, journal, report)
        return True
    path.unlink()  # the merge never committed: the gradebook is as it was, shards are reused
    return False


def _merge(course: Course, base: Path, ok: list, assignment: str) -> MergeReport:
    """Journal, then merge every finished shard into the live gradebook in one transaction, then place."""
    shards = {r["student"]: str(course.work / "shards" / r["student"]) for r in ok}
    journal = {"assignment": assignment, "run": uuid.uuid4().hex, "students": shards}
    tmp = _journal_path(course).with_suffix(".tmp")
    tmp.write_text(json.dumps(journal, ensure_ascii=False))
    os.replace(tmp, _journal_path(course))
    if not course.gradebook.exists():  # the first run: nobody can have it open yet
        snapshot(base / "base.db", course.gradebook.with_suffix(".tmp"))
        os.replace(course.gradebook.with_suffix(".tmp"), course.gradebook)
    report = merge(course.gradebook, base / "base.db", shards, assignment, journal["run"])
    _place_and_finish(course, journal, report)
    return report


def class_ids(base: Path, found) -> list[str]:
    """Every student id of this run and of the course gradebook (per-student numbers: copying is checked against them)."""
    import sqlite3

    ids = set(found)
    con = sqlite3.connect(str(base / "base.db"))
    try:
        ids.update(row[0] for row in con.execute("SELECT id FROM student"))
    except sqlite3.OperationalError:
        pass
    finally:
        con.close()
    return sorted(ids)


def grade(submissions=None, *, root=None, assignment=None, jobs=None, students=None, force=False,
          timeout=None, quiet=False, sandbox=True, batch_students=BATCH_STUDENTS, batch_seconds=BATCH_SECONDS,
          cluster=None, owner="", layout="auto", unwrap=False) -> dict:
    """Grade a class end to end. Returns a summary dict (graded, skipped, failed, not_graded, seconds, ...).

    Every kernel runs in a bubblewrap sandbox (:mod:`.bwrap`); where none can be had this
    refuses with a sentence saying how to enable one, unless ``sandbox=False`` (``--no-sandbox``).
    Before anything is collected or written, :func:`.preflight.check` starts one kernel the shards'
    way (:class:`.preflight.PreflightError` when it cannot grade).  Finished students are merged
    in batches (:mod:`.batches`); ``failed`` lists the students *not graded* (nothing written for
    them, earlier grades kept, graded by the next plain run), ``not_graded`` their reasons.
    ``cluster`` (a Dask scheduler address or ``local:N``) grades the shards there (:mod:`.cluster`),
    whose workers are checked (sandbox, package, version) instead of this machine.
    """
    started = time.monotonic()
    if sandbox and not cluster and (why := sandbox_unavailable()):
        raise CourseError("无法建立评分沙箱，拒绝评分：" + why)
    if cluster:
        from .fleet.cluster import require_reachable

        require_reachable(cluster)  # an unreachable scheduler is named at once, before the base is prepared
    course = Course(root)
    assignments = course.assignments()
    assignment = assignment or (assignments[0] if len(assignments) == 1 else None)
    if assignment not in assignments:
        raise CourseError(f"请用 --assignment 指定作业，可用：{'、'.join(assignments)}")
    jobs = jobs or os.cpu_count() or 1
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    with _locked(course):
        if ended := lifeline.end_leftovers(registry(course.work / "logs")):  # a killed run's workers
            say(f"结束了上一次被中断的评分留下的 {ended} 个评分进程。")
        if not cluster:  # a cluster's workers are checked by cluster.run_cluster before any shard
            preflight.check(course, timeout, sandbox)
        _finish_pending(course)
        collected = collect(course, submissions, assignment, owner, layout, unwrap)  # owner: --from-student
        found = list(collected.students)
        if students:
            missing = sorted(set(students) - set(found))
            if missing:
                raise CourseError(f"autograde/submitted 里没有这些学生的提交：{'、'.join(missing)}")
        key, base = prepare_base(course, assignment)
        source = course.source_digest(assignment)
        before = graded_digests(course, assignment)
        unfinished = _unfinished(course, assignment)  # asked for earlier and not graded: never "unchanged"
        todo, unchanged = [], 0
        for student in found:
            digest = digest_folder(course.submitted / student / assignment) + ":" + source + ("" if sandbox else ":unsandboxed")
            if students and student not in students:
                continue
            if not students and not force and before.get(student) == digest and student not in unfinished:
                unchanged += 1
                continue
            todo.append((student, digest))
        not_selected = len(found) - len(todo) - unchanged
        cells = release_cells(base, assignment)
        peers = class_ids(base, found) if student_numbers.enabled(load_config(course)) else []
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
                              release_cells=cells, timeout=timeout, sandbox=sandbox,
                              marks=task_marks(course, student, assignment), peers=peers))
        if not sandbox:
            say(UNSANDBOXED)
        skipped = f"{unchanged} 份与上次评分时相同，跳过" if unchanged else ""
        if not_selected:
            skipped += ("," if skipped else "") + f"{not_selected} 份不在 --student 之列，未动"
        say(f"评分 {assignment}：{len(found)} 份提交，{len(tasks)} 份待评分，{len(reused)} 份沿用上次中断前的结果"
            f"{(',' + skipped) if skipped else ''}；{f'Dask 集群 {cluster}' if cluster else f'{jobs} 个并行进程'}。")

        logs = course.work / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        hostlog.prune(logs)  # earlier runs' worker and student logs

        _set_unfinished(course, assignment, (unfinished & set(found)) | {student for student, _ in todo})
        install_mathjax(course.feedback)

        def merge_batch(batch):
            return _merge(course, base, sorted(batch, key=lambda r: r["student"]), assignment)

        def report(res):
            if res["ok"]:
                batcher.add(res)
                return
            path = logs / f"{res['student']}.log"
            path.write_text("\n".join(res["errors"]), encoding="utf-8")
            say(f"  ✗ {res['student']}：未评分：{_reason(res)}（没有写入成绩，原有成绩不变；详情见 {path.relative_to(course.root)}）")

        batcher = Batcher(merge_batch, batch_students, batch_seconds)
        try:
            for info in reused:
                batcher.add(info)
            if cluster:
                from .fleet.cluster import run_cluster

                results = run_cluster(tasks, cluster, report, logs) + reused
            else:
                results = run_local(tasks, jobs, report, logs) + reused
            merges = batcher.close()
        except BaseException:
            batcher.abandon()
            raise
        if not merges:
            export(course)
        shutil.rmtree(course.work / "base", ignore_errors=True)
    ok = sorted((r for r in results if r["ok"]), key=lambda r: r["student"])
    not_graded = {r["student"]: _reason(r) for r in sorted(results, key=lambda r: r["student"]) if not r["ok"]}
    kernels = {kind: sum(r.get("kernels", {}).get(kind, 0) for r in results) for kind in ("forked", "fresh")}
    summary = {"graded": [r["student"] for r in ok], "failed": sorted(not_graded), "not_graded": not_graded,
               "retried": sorted(r["student"] for r in results if r.get("retried")), "batches": len(merges),
               "kernels": kernels, "sandbox": sandbox,
               "offenders": {r["student"]: r["tricks"] for r in ok if r.get("tricks")},
               "quarantined": [q.row() for q in collected.quarantined],
               "not_collected": [r.row() for r in collected.not_collected],
               "skipped": unchanged, "not_selected": not_selected,
               "regrade": [x for m in merges for x in m.regrade], "flagged": [x for m in merges for x in m.flagged],
               "seconds": round(time.monotonic() - started, 2)}
    say(summary_text(course, summary))
    return summary


def _reason(res: dict) -> str:
    last = next((line for line in reversed("\n".join(res.get("errors", [])).splitlines()) if line.strip()), "")
    return res.get("reason") or last.strip()[:200] or "原因不明"


def _unfinished_path(course: Course) -> Path:
    return course.work / "unfinished.json"


def _unfinished(course: Course, assignment: str) -> set:
    """Students whose grading was asked for and has not been merged yet (not graded, or interrupted)."""
    path = _unfinished_path(course)
    if not path.exists():
        return set()
    return set(json.loads(path.read_text(encoding="utf-8")).get(assignment, []))


def _set_unfinished(course: Course, assignment: str, students: set) -> None:
    path = _unfinished_path(course)
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    data[assignment] = sorted(students)
    path.with_suffix(".tmp").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    os.replace(path.with_suffix(".tmp"), path)


def rewrite_feedback(root=None, assignment=None, students=None) -> list[str]:
    """Rewrite feedback from the live gradebook (after manual grading in formgrader); return the students."""
    course = Course(root)
    assignments = course.assignments()
    assignment = assignment or (assignments[0] if len(assignments) == 1 else None)
    if assignment not in assignments:
        raise CourseError(f"请用 --assignment 指定作业，可用：{'、'.join(assignments)}")
    done = []
    with _locked(course):
        install_mathjax(course.feedback)
        graded = sorted(p.parent.name for p in course.autograded.glob(f"*/{assignment}") if p.is_dir())
        for student in students or graded:
            if student not in graded:
                raise CourseError(f"{student} 还没有评过分（autograde/autograded/{student}/{assignment} 不存在）。")
            course_feedback(course, student, assignment)
            done.append(student)
    return done


def summary_text(course: Course, summary: dict) -> str:
    """The closing lines of a grade run, in Chinese."""
    failed, kernels = summary["failed"], summary["kernels"]
    reasons = summary.get("not_graded", {})
    listed = "；".join(f"{s}：{reasons.get(s) or '原因见日志'}" for s in failed)
    lines = [f"完成：评分 {len(summary['graded'])} 人，未评分 {len(failed)} 人{f'（{listed}）' if failed else ''}，"
             f"用时 {summary['seconds']} s（内核：{kernels['forked']} 个从预热进程 fork，{kernels['fresh']} 个全新启动）。"]
    if failed:
        lines.append("未评分的学生没有写入任何成绩（成绩册里原有的成绩不变），日志在 autograde/.work/logs/；"
                     "问题解决后再运行同一命令（不必加 --force）会评完他们。"
                     + (f"其余 {len(summary['graded'])} 人已评分，不受影响。" if summary["graded"] else ""))
    if summary.get("retried"):
        lines.append("评分进程意外退出时正在评的学生，已各自在新的评分进程里单独重评："
                     + "、".join(summary["retried"]))
    if summary["flagged"]:
        lines.append(f"已在 formgrader 里标记（Flagged）{len(summary['flagged'])} 本，诚信报告里有原因："
                     + "、".join(f"{s} {nb}" for s, nb in summary["flagged"]))
    if summary["regrade"]:
        lines.append("需要重新人工评分（答案改过，原来的人工分和评语已清除）："
                     + "、".join(f"{s} {nb}/{cell}" for s, nb, cell in summary["regrade"]))
    if summary.get("offenders"):
        lines.append("诚信报告里有记录的学生（其余学生不受影响）："
                     + "；".join(f"{s}({'、'.join(t)})" for s, t in sorted(summary["offenders"].items())))
    lines.extend(collection_lines(summary))
    lines.append(f"成绩：{course.grades_csv.relative_to(course.root)}；"
                 f"诚信报告：{course.integrity_csv.relative_to(course.root)}；反馈：{course.feedback.relative_to(course.root)}/")
    if not summary.get("sandbox", True):
        lines.append(UNSANDBOXED)
    return "\n".join(lines)
