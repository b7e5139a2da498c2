"""How long does the merge hold the gradebook's write lock? (formgrader's saves wait that long)

Grades one student of the full lesson for real, then clones that shard into N
students and merges them into a gradebook the way the grade command does
(one transaction).  Prints the time inside the transaction for a first merge
(every row inserted) and a re-merge (every row updated in place).  nbgrader's
SQLAlchemy engine waits up to 5 s for a lock, so a save in formgrader during
the merge is delayed, not lost, while this stays below that.

    .venv/bin/python benchmarks/bench_merge.py --students 300
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _clone(shard: Path, dest: Path, old: str, new: str) -> None:
    shutil.copytree(shard, dest)
    con = sqlite3.connect(str(dest / "gradebook.db"))
    con.execute("UPDATE student SET id = ? WHERE id = ?", (new, old))
    con.execute("UPDATE submitted_assignment SET student_id = ? WHERE student_id = ?", (new, old))
    for table in ("pb_submission", "pb_integrity"):
        con.execute(f"UPDATE {table} SET student_id = ? WHERE student_id = ?", (new, old))
    for table, parent in (("submitted_assignment", None), ("submitted_notebook", "assignment_id"), ("grade", "notebook_id"),
                          ("comment", "notebook_id")):
        for (rid,) in con.execute(f"SELECT id FROM {table}").fetchall():
            fresh = uuid.uuid4().hex
            con.execute(f"UPDATE {table} SET id = ? WHERE id = ?", (fresh, rid))
            child = {"submitted_assignment": ("submitted_notebook", "assignment_id"),
                     "submitted_notebook": [("grade", "notebook_id"), ("comment", "notebook_id")]}.get(table, [])
            for ctable, col in ([child] if isinstance(child, tuple) else child):
                con.execute(f"UPDATE {ctable} SET {col} = ? WHERE {col} = ?", (fresh, rid))
    con.commit()
    con.close()


def main() -> None:
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from grading_helpers import course_copy

    from parallel_budget.grading.intake import synthetic
    from parallel_budget.grading.results import merge
    from parallel_budget.grading import runner
    from parallel_budget.grading.course import Course

    ap = argparse.ArgumentParser()
    ap.add_argument("--students", type=int, default=300)
    n = ap.parse_args().students
    tmp = Path(tempfile.mkdtemp(prefix="bench-merge-"))
    try:
        course = Course(course_copy(tmp / "course"))
        synthetic.write_student(tmp / "in", "seed", "lesson", synthetic.submission(course, "lesson"))
        runner.grade(tmp / "in", root=course.root, jobs=1, quiet=True)  # makes the gradebook
        key, base = runner.prepare_base(course, "lesson")
        shard = tmp / "seed-shard"
        task = dict(root=str(course.root), student="seed", assignment="lesson", shard=str(shard),
                    template=str(base / "template.db"), digest="x", base=key, notebooks=course.notebooks("lesson"),
                    release_cells=runner.release_cells(base, "lesson"), timeout=None, marks={})
        from parallel_budget.grading.fleet.shard import grade_student

        assert grade_student(task)["ok"]
        shards = {}
        for i in range(n):
            name = f"b{i:04d}"
            _clone(shard, tmp / "shards" / name, "seed", name)
            shards[name] = str(tmp / "shards" / name)
        rows = sum(sqlite3.connect(str(tmp / "shards" / s / "gradebook.db")).execute(
            "SELECT (SELECT COUNT(*) FROM grade) + (SELECT COUNT(*) FROM comment)").fetchone()[0] for s in list(shards)[:1])
        for label in ("first merge (insert)", "re-merge (update in place)"):
            started = time.monotonic()
            report = merge.merge(course.gradebook, base / "base.db", shards, "lesson")
            print(f"{label}: {n} students x {rows} grade/comment rows: write lock held {report.locked_seconds:.2f} s, "
                  f"{time.monotonic() - started:.2f} s with reading the shards")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
