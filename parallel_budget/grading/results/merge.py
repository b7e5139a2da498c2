"""Merging graded shards into the live course gradebook, in place (issue 17).

The course gradebook may be open in formgrader while the grade command runs,
so it is never replaced as a file (an open server would keep writing to the
deleted inode).  Every finished shard is merged into the live file inside ONE
SQLite write transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``): a Ctrl-C or a
``kill -9`` leaves the gradebook as it was (SQLite rolls the journal back) or
fully merged, never half.

Rows are matched by their natural keys (student and assignment; notebook;
cell) and updated in place, so the ids an open formgrader page holds stay
valid.  What an instructor enters is never overwritten: manual score, extra
credit, manual comment, the flag and an extension are read from the live file
after the write lock is taken, so a mark saved during the run is kept.  The
one exception is a manual mark on an answer cell whose answer changed since
the mark was given (the shard reports it in ``marks.json``): if the mark is
still the one given, it is cleared and the cell is listed as needing a manual
re-grade.  Integrity findings that are new for a notebook set nbgrader's
``flagged`` on the submitted notebook; an instructor's unflag survives a
re-grade that finds nothing new.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

DEFINITION_TABLES = ("course", "assignment", "notebook", "base_cell", "source_cell", "grade_cells",
                     "solution_cells", "task_cells")
NOT_FLAGGED = {"missing_notebook"}  # nothing to look at in a notebook that was never handed in
RUN_TABLE = ("CREATE TABLE IF NOT EXISTS pb_run (run_id TEXT PRIMARY KEY, assignment TEXT NOT NULL,"
             " stale TEXT NOT NULL, regrade TEXT NOT NULL)")
PB_TABLES = (  # the course's own tables, next to nbgrader's in the same file
    "CREATE TABLE IF NOT EXISTS pb_submission (student_id TEXT NOT NULL, assignment TEXT NOT NULL,"
    " digest TEXT NOT NULL, PRIMARY KEY (student_id, assignment))",
    "CREATE TABLE IF NOT EXISTS pb_integrity (student_id TEXT NOT NULL, assignment TEXT NOT NULL,"
    " notebook TEXT, cell TEXT, trick TEXT NOT NULL, detail TEXT)",
    RUN_TABLE,
    # nbgrader indexes grade and comment by (cell_id, notebook_id) only: without these, finding one
    # student's rows scans the whole table and a merge of a large class holds the lock for seconds
    "CREATE INDEX IF NOT EXISTS pb_submitted_notebook ON submitted_notebook (assignment_id)",
    "CREATE INDEX IF NOT EXISTS pb_grade_notebook ON grade (notebook_id)",
    "CREATE INDEX IF NOT EXISTS pb_comment_notebook ON comment (notebook_id)",
    "CREATE INDEX IF NOT EXISTS pb_integrity_student ON pb_integrity (student_id, assignment)",
)

_MARKS_SQL = (  # CROSS JOIN keeps this order (student first): SQLite would otherwise scan all grades
    "SELECT n.name, bc.name, {cols} FROM assignment a CROSS JOIN submitted_assignment sa ON sa.assignment_id = a.id "
    "CROSS JOIN submitted_notebook sn ON sn.assignment_id = sa.id CROSS JOIN {t} ON {t}.notebook_id = sn.id "
    "JOIN notebook n ON sn.notebook_id = n.id JOIN base_cell bc ON {t}.cell_id = bc.id "
    "WHERE sa.student_id = ? AND a.name = ?")


@dataclass(frozen=True)
class MergeReport:
    """What one merge did: students merged, feedback to rewrite, marks cleared for a re-grade."""

    run_id: str
    students: tuple = ()
    stale: tuple = ()          # students whose feedback must be rewritten from the live gradebook
    regrade: tuple = ()        # (student, notebook, cell) whose manual mark was cleared
    flagged: tuple = field(default=())  # (student, notebook) newly flagged
    locked_seconds: float = 0.0  # how long the write lock was held (formgrader's saves wait up to 5 s)


def key(notebook: str, cell: str) -> str:
    return f"{notebook}/{cell}"


def manual_marks(con: sqlite3.Connection, student: str, assignment: str) -> dict:
    """{"notebook/cell": [manual_score, extra_credit, manual_comment]} of what an instructor entered."""
    out: dict = {}
    for nb, cell, score, extra in con.execute(
            _MARKS_SQL.format(t="grade", cols="grade.manual_score, grade.extra_credit"), (student, assignment)):
        if score is not None or extra is not None:
            out[key(nb, cell)] = [score, extra, None]
    for nb, cell, text in con.execute(_MARKS_SQL.format(t="comment", cols="comment.manual_comment"),
                                      (student, assignment)):
        if text:
            out.setdefault(key(nb, cell), [None, None, None])[2] = text
    return out


def apply_marks(con: sqlite3.Connection, student: str, assignment: str, marks: dict) -> None:
    """Write ``{"notebook/cell": [score, extra, comment]}`` into a (shard's) gradebook, for its feedback."""
    target = ("SELECT {t}.id FROM {t} JOIN submitted_notebook sn ON {t}.notebook_id = sn.id "
              "JOIN notebook n ON sn.notebook_id = n.id JOIN submitted_assignment sa ON sn.assignment_id = sa.id "
              "JOIN assignment a ON sa.assignment_id = a.id JOIN base_cell bc ON {t}.cell_id = bc.id "
              "WHERE sa.student_id = ? AND a.name = ? AND n.name = ? AND bc.name = ?")
    for k, (score, extra, comment) in marks.items():
        nb, cell = k.split("/", 1)
        args = (student, assignment, nb, cell)
        con.execute(f"UPDATE grade SET manual_score = ?, extra_credit = ? WHERE id IN ({target.format(t='grade')})",
                    (score, extra, *args))
        con.execute(f"UPDATE comment SET manual_comment = ? WHERE id IN ({target.format(t='comment')})",
                    (comment, *args))


def read_marks(gradebook: Path, student: str, assignment: str) -> dict:
    if not gradebook.exists():
        return {}
    con = sqlite3.connect(str(gradebook), timeout=30)
    try:
        return manual_marks(con, student, assignment)
    except sqlite3.OperationalError:
        return {}
    finally:
        con.close()


def _rows(con, sql, args=()):
    cur = con.execute(sql, args)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def _definitions(con) -> dict:
    return {t: {r["id"]: r for r in _rows(con, f"SELECT * FROM {t}")} for t in DEFINITION_TABLES}


def definitions_digest(path: Path) -> str:
    """Changes when the assignments, notebooks or cells in the gradebook change (not when marks do)."""
    import hashlib

    if not path.exists():
        return "none"
    con = sqlite3.connect(str(path), timeout=30)
    try:
        text = json.dumps({t: sorted(map(sorted, (r.items() for r in rows.values())))
                           for t, rows in _definitions(con).items()}, sort_keys=True, default=str)
    except sqlite3.OperationalError:
        text = "empty"
    finally:
        con.close()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _insert(con, table, row):
    cols = ", ".join(row)
    con.execute(f"INSERT INTO {table} ({cols}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))


def _sync_definitions(con, base: dict) -> None:
    """Bring the assignment's notebooks and cells (from ``generate_assignment`` on a copy) into the live file."""
    live = _definitions(con)
    for table in DEFINITION_TABLES:
        for rid, row in base[table].items():
            if live[table].get(rid) != row:
                con.execute(f"DELETE FROM {table} WHERE id = ?", (rid,))
                _insert(con, table, row)


class _Shard:
    """One student's graded rows, read from the shard's own gradebook."""

    def __init__(self, folder: Path, student: str, assignment: str):
        con = sqlite3.connect(str(folder / "gradebook.db"))
        try:
            self.student = _rows(con, "SELECT * FROM student WHERE id = ?", (student,))
            self.submission = _rows(con, "SELECT sa.* FROM submitted_assignment sa JOIN assignment a ON "
                                         "sa.assignment_id = a.id WHERE sa.student_id = ? AND a.name = ?",
                                    (student, assignment))
            ids = [s["id"] for s in self.submission]
            marks = ",".join("?" * len(ids))
            self.notebooks = _rows(con, f"SELECT * FROM submitted_notebook WHERE assignment_id IN ({marks})", ids)
            nb_ids = [n["id"] for n in self.notebooks]
            marks = ",".join("?" * len(nb_ids))
            self.grades = _rows(con, f"SELECT * FROM grade WHERE notebook_id IN ({marks})", nb_ids)
            self.comments = _rows(con, f"SELECT * FROM comment WHERE notebook_id IN ({marks})", nb_ids)
            self.digest = _rows(con, "SELECT * FROM pb_submission WHERE student_id = ? AND assignment = ?",
                                (student, assignment))
            self.findings = _rows(con, "SELECT * FROM pb_integrity WHERE student_id = ? AND assignment = ?",
                                  (student, assignment))
        finally:
            con.close()
        path = folder / "marks.json"
        info = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        self.applied, self.cleared = info.get("applied", {}), info.get("cleared", {})


def _one(con, shard: _Shard, student: str, assignment: str, names: dict) -> tuple:
    """Merge one student; return (feedback stale?, cleared keys, newly flagged notebooks)."""
    live_marks = manual_marks(con, student, assignment)
    final = {k: v for k, v in live_marks.items() if shard.cleared.get(k) != v}
    cleared = sorted(k for k in live_marks if k not in final)
    old_findings = {(r["notebook"], r["cell"], r["trick"]) for r in _rows(
        con, "SELECT * FROM pb_integrity WHERE student_id = ? AND assignment = ?", (student, assignment))}
    new_findings = {(r["notebook"], r["cell"], r["trick"]) for r in shard.findings if r["trick"] not in NOT_FLAGGED}
    to_flag = {nb for nb, _, _ in new_findings - old_findings}

    for row in shard.student:
        con.execute("INSERT OR IGNORE INTO student (id) VALUES (?)", (row["id"],))
    ids = {}
    for row in shard.submission:
        got = con.execute("SELECT id FROM submitted_assignment WHERE assignment_id = ? AND student_id = ?",
                          (row["assignment_id"], student)).fetchone()
        if got:
            con.execute("UPDATE submitted_assignment SET timestamp = ? WHERE id = ?", (row["timestamp"], got[0]))
            ids[row["id"]] = got[0]
        else:
            _insert(con, "submitted_assignment", row)
            ids[row["id"]] = row["id"]
    flagged = []
    for row in shard.notebooks:
        nb_name = names["notebook"][row["notebook_id"]]
        flag = nb_name in to_flag
        sa = ids[row["assignment_id"]]
        got = con.execute("SELECT id, flagged FROM submitted_notebook WHERE assignment_id = ? AND notebook_id = ?",
                          (sa, row["notebook_id"])).fetchone()
        if got:
            con.execute("UPDATE submitted_notebook SET late_submission_penalty = ?, flagged = ? WHERE id = ?",
                        (row["late_submission_penalty"], bool(got[1]) or flag, got[0]))
            ids[row["id"]] = got[0]
        else:
            _insert(con, "submitted_notebook", dict(row, assignment_id=sa, flagged=flag))
            ids[row["id"]] = row["id"]
        if flag:
            flagged.append((student, nb_name))
    for table, manual in (("grade", ("manual_score", "extra_credit")), ("comment", ("manual_comment",))):
        for row in getattr(shard, table + "s"):
            nb = ids[row["notebook_id"]]
            k = key(names["notebook"][names["cell"][row["cell_id"]]], names["cell_name"][row["cell_id"]])
            mark = final.get(k)
            values = dict(zip(("manual_score", "extra_credit", "manual_comment"), mark or (None, None, None)))
            got = con.execute(f"SELECT id FROM {table} WHERE notebook_id = ? AND cell_id = ?",
                              (nb, row["cell_id"])).fetchone()
            if table == "grade":
                auto = {"auto_score": row["auto_score"]}
                if k in cleared or mark is None or mark[0] is None:
                    auto["needs_manual_grade"] = row["needs_manual_grade"]
            else:
                auto = {"auto_comment": row["auto_comment"]}
            if got:
                sets = dict(auto)
                if k in cleared or mark is None:  # a kept mark is not even rewritten
                    sets.update({m: values[m] for m in manual})
                con.execute(f"UPDATE {table} SET {', '.join(c + ' = ?' for c in sets)} WHERE id = ?",
                            (*sets.values(), got[0]))
            else:
                _insert(con, table, dict(row, notebook_id=nb, **{m: values[m] for m in manual}))
    con.execute("DELETE FROM pb_integrity WHERE student_id = ? AND assignment = ?", (student, assignment))
    con.execute("DELETE FROM pb_submission WHERE student_id = ? AND assignment = ?", (student, assignment))
    for row in shard.findings:
        _insert(con, "pb_integrity", row)
    for row in shard.digest:
        _insert(con, "pb_submission", row)
    stale = final != shard.applied
    return stale, cleared, flagged


def _names(con) -> dict:
    return {"notebook": dict(con.execute("SELECT id, name FROM notebook")),
            "cell": dict(con.execute("SELECT id, notebook_id FROM base_cell")),
            "cell_name": dict(con.execute("SELECT id, name FROM base_cell"))}


def merge(gradebook: Path, base_db: Path, shards: dict, assignment: str, run_id: str | None = None) -> MergeReport:
    """Merge ``{student: shard folder}`` into ``gradebook`` in one transaction; see the module docstring."""
    run_id = run_id or uuid.uuid4().hex
    src = sqlite3.connect(str(base_db))
    try:
        base = _definitions(src)
    finally:
        src.close()
    loaded = {s: _Shard(Path(folder), s, assignment) for s, folder in sorted(shards.items())}
    con = sqlite3.connect(str(gradebook), timeout=60, isolation_level=None)
    try:
        for stmt in PB_TABLES:  # a gradebook nbgrader made (e.g. by `nbgrader collect`) lacks them
            con.execute(stmt)
        con.execute("BEGIN IMMEDIATE")  # the write lock: formgrader's saves wait (briefly) until COMMIT
        locked = time.monotonic()
        try:
            _sync_definitions(con, base)
            names = _names(con)
            stale, regrade, flagged = [], [], []
            for student, shard in loaded.items():
                is_stale, cleared, flags = _one(con, shard, student, assignment, names)
                if is_stale or cleared:
                    stale.append(student)
                regrade.extend((student, *k.split("/", 1)) for k in cleared)
                flagged.extend(flags)
            con.execute("INSERT INTO pb_run (run_id, assignment, stale, regrade) VALUES (?, ?, ?, ?)",
                        (run_id, assignment, json.dumps(stale), json.dumps(regrade, ensure_ascii=False)))
            con.execute("COMMIT")
            locked = time.monotonic() - locked
        except BaseException:
            con.execute("ROLLBACK")
            raise
    finally:
        con.close()
    return MergeReport(run_id, tuple(loaded), tuple(stale), tuple(map(tuple, regrade)), tuple(flagged),
                       round(locked, 3))


def finished_run(gradebook: Path, run_id: str) -> MergeReport | None:
    """The report of a merge that committed (so an interrupted run can finish placing files), else None."""
    if not gradebook.exists():
        return None
    con = sqlite3.connect(str(gradebook), timeout=30)
    try:
        row = con.execute("SELECT stale, regrade FROM pb_run WHERE run_id = ?", (run_id,)).fetchone()
    except sqlite3.OperationalError:
        row = None
    finally:
        con.close()
    if row is None:
        return None
    return MergeReport(run_id, (), tuple(json.loads(row[0])), tuple(map(tuple, json.loads(row[1]))))
