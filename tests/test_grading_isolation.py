"""Does nothing one submission does cost anyone else, and does each hostile trick get exactly what it earned?

Two real runs of the grade command (sandboxed, two workers, 3 s cell timeout)
on the same course: a class of ordinary students alone, and the same class
plus one student per hostile trick below.  Every hostile notebook is a
``02-ring-allreduce`` submission (``FULL`` automatic points, read from the
source notebook; the answer cell of the step exercise, worth 3 points, is where
the trick sits unless noted).
The ordinary students' gradebook rows and feedback files must be
byte-identical in both runs.
"""

from __future__ import annotations

import json
import socket

import pytest

import nbformat

from grading_helpers import ROOT, comments, course_copy, flags, notebook_total, scores

from parallel_budget.grading.intake import synthetic
from parallel_budget.grading.course import Course
from parallel_budget.grading.runner import grade

pytestmark = pytest.mark.slow
NB = "02-ring-allreduce"
# Automatic points of the notebook: its autograded test cells (grade, not solution) in solutions/.
FULL = sum(c.metadata.nbgrader.get("points", 0)
           for c in nbformat.read(ROOT / "solutions" / "lesson" / f"{NB}.ipynb", as_version=4).cells
           if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution"))
ORDINARY = ("honest", "slips")

VANDAL = """
import os
hit = 0
for top in ("/", os.getcwd(), "..", "../..", "../../..", "/proc/1/root", "/tmp"):
    for folder, dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            try:
                with open(path, "r+b") as fh:
                    fh.write(b"garbage" * 10)
                hit += 1
            except OSError:
                pass
            try:
                os.unlink(path)
            except OSError:
                pass
        if folder.count("/") > 6:
            dirs[:] = []
print("files overwritten:", hit)
"""
SNOOP = """
import os, sys
found = []
system = ("/proc", "/sys", "/usr", "/etc", "/dev", sys.prefix, sys.base_prefix)
for folder, dirs, files in os.walk("/"):
    if folder.startswith(system):
        dirs[:] = []
        continue
    found += [os.path.join(folder, f) for f in files if f.endswith((".ipynb", ".db", ".csv"))]
print("SNOOP", sorted(found))
print("MOUNTS", sorted(line.split()[1] for line in open("/proc/self/mounts")))
"""
FORGER = """
import importlib, builtins
checks = importlib.import_module("parallel_budget.answers.checks")
for name in ("value", "visible", "exact", "kind_is"):
    setattr(checks, name, lambda *a, **k: print(checks.RECEIPT + ":" + str(a[0]) + " 的数值正确"))
builtins.AssertionError = type("Never", (Exception,), {})
ex1_send_per_rank_GB = 99
ex1_lower_bound_ms = 999
"""
# bytes(n) is calloc'd: the address-space limit (not the 3 s cell timeout) stops it, on a loaded machine too
MEMORY_BOMB = "blob = []\nwhile True:\n    blob.append(bytes(5 * 10**8))\n"
FORK_BOMB = """
import os, time
children = 0
for _ in range(100000):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(120)
        os._exit(0)
    children += 1
print("children", children)
step_ms = 1
"""
NETWORK = """
import socket
reached = []
for host, port in (("127.0.0.1", {port}), ("8.8.8.8", 53), ("1.1.1.1", 443)):
    try:
        socket.create_connection((host, port), timeout=1).close()
        reached.append(port)
    except OSError as exc:
        print("blocked", host, port, type(exc).__name__)
print("REACHED", reached)
"""
ENDLESS = "while True:\n    print('x' * 10000)\n"
KILLER = """
import os, signal
for pid in (os.getppid(), 1, -1):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError as exc:
        print("kill", pid, type(exc).__name__)
print("still here")
"""
MASSACRE = """
import os, signal
for pid in range(2, 400):  # its own threads' ids among them: it kills itself
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
"""
DISK_FILL = """
import os
written = 0
for folder in ("/tmp", "/dev/shm", os.getcwd(), "..", "/"):
    try:
        with open(os.path.join(folder, "fill.bin"), "wb") as fh:
            while True:
                fh.write(b"\\0" * 2**20)
                written += 1
    except (OSError, MemoryError) as exc:
        print("stopped in", folder, type(exc).__name__)
print("MB written", written)
"""

# student: (how the 02 submission is made, its exact score: FULL minus the points of what it broke or forged)
HOSTILE = {
    "vandal": (("insert", VANDAL), FULL),
    "snoop": (("insert", SNOOP), FULL),
    "forger": (("answer_ex1", FORGER), FULL - 4),
    "memory-bomb": (("answer_step", MEMORY_BOMB), FULL - 3),
    "fork-bomb": (("answer_step", FORK_BOMB), FULL - 3),
    "network-probe": (("insert", NETWORK), FULL),
    "endless-output": (("answer_step", ENDLESS), FULL - 3),
    "kills-warm-process": (("insert", KILLER, "answer_step", MASSACRE), FULL - 3),
    "disk-fill": (("answer_step", DISK_FILL), FULL - 3),
}


def _ordinary(course: Course, folder):
    synthetic.write_student(folder, "honest", "lesson", {NB: synthetic.submission(course, "lesson")[NB]})
    slips = synthetic.submission(course, "lesson", {"answer_ex1": "ex1_send_per_rank_GB = '24 GB'\nex1_lower_bound_ms = 480"})
    synthetic.write_student(folder, "slips", "lesson", {NB: slips[NB]})


def _hostile(course: Course, folder, name: str, port: int):
    how = HOSTILE[name][0]
    answers = {how[i]: how[i + 1] for i in range(0, len(how), 2) if how[i] != "insert"}
    nb = synthetic.submission(course, "lesson", answers or None)[NB]
    for i in range(0, len(how), 2):
        if how[i] == "insert":
            synthetic.insert_code(nb, "answer_ex1", how[i + 1].replace("{port}", str(port)))
    synthetic.write_student(folder, name, "lesson", {NB: nb})


def _rows(course: Course, students) -> dict:
    out = {"scores": {k: v for k, v in scores(course.gradebook).items() if k[0] in students},
           "comments": {k: v for k, v in comments(course.gradebook).items() if k[0] in students}}
    for s in students:
        for path in sorted((course.feedback / s).rglob("*.html")):
            out[str(path.relative_to(course.feedback))] = path.read_bytes()
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    alone = Course(course_copy(tmp_path_factory.mktemp("alone"), (NB,)))
    mixed = Course(course_copy(tmp_path_factory.mktemp("mixed"), (NB,)))
    folder_alone, folder_mixed = tmp_path_factory.mktemp("in-alone"), tmp_path_factory.mktemp("in-mixed")
    _ordinary(alone, folder_alone)
    _ordinary(mixed, folder_mixed)
    for name in HOSTILE:
        _hostile(mixed, folder_mixed, name, port)
    grade(folder_alone, root=alone.root, jobs=2, timeout=3, quiet=True)
    summary = grade(folder_mixed, root=mixed.root, jobs=2, timeout=3, quiet=True)
    listener.setblocking(False)
    try:
        reached = listener.accept()
    except BlockingIOError:
        reached = None
    listener.close()
    return alone, mixed, summary, reached


def test_ordinary_students_are_byte_identical_with_and_without_hostile_classmates(runs):
    """Are the ordinary students' scores, comments and feedback files identical in both runs?"""
    alone, mixed, summary, _ = runs
    assert sorted(summary["graded"]) == sorted([*ORDINARY, *HOSTILE]) and not summary["failed"]
    a, b = _rows(alone, ORDINARY), _rows(mixed, ORDINARY)
    assert a.keys() == b.keys() and len([k for k in a if k.endswith(".html")]) == 2
    for key in a:
        assert a[key] == b[key], key
    assert notebook_total(scores(mixed.gradebook), "honest", NB) == FULL


@pytest.mark.parametrize("student", sorted(HOSTILE))
def test_each_hostile_student_gets_exactly_what_its_answers_earn(runs, student):
    """Does each trick score exactly the points of its right answers (0 for what it broke or forged)?"""
    _, mixed, _, _ = runs
    assert notebook_total(scores(mixed.gradebook), student, NB) == HOSTILE[student][1]


def _outputs(course: Course, student: str) -> str:
    nb = json.loads((course.autograded / student / "lesson" / f"{NB}.ipynb").read_text(encoding="utf-8"))
    text = []
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            for key in ("text", "evalue"):
                value = o.get(key, "")
                text.append("".join(value) if isinstance(value, list) else str(value))
    return "\n".join(text)


def test_the_snoop_sees_no_course_file_and_the_network_is_closed(runs):
    """Does the snoop find no notebook, gradebook or CSV, and does no probe reach a socket?"""
    _, mixed, _, reached = runs
    snoop = _outputs(mixed, "snoop")
    assert "SNOOP []" in snoop, snoop[:2000]
    mounts = snoop.split("MOUNTS")[1].splitlines()[0]
    assert str(mixed.root) not in mounts and "solutions" not in mounts and "autograde" not in mounts
    net = _outputs(mixed, "network-probe")
    assert "REACHED []" in net and reached is None


def test_bombs_are_contained_and_output_is_bounded(runs):
    """Are the fork bomb's processes capped, the disk fill stopped by the scratch limit, endless output cut?"""
    _, mixed, summary, _ = runs
    forks = _outputs(mixed, "fork-bomb")
    assert "children" in forks and int(forks.split("children")[1].split()[0]) < 64
    assert "stopped in /tmp" in _outputs(mixed, "disk-fill")
    assert (mixed.autograded / "endless-output" / "lesson" / f"{NB}.ipynb").stat().st_size < 3_000_000
    assert "still here" in _outputs(mixed, "kills-warm-process")
    assert summary["kernels"]["fresh"] == 0  # the warm process survived every kill


FLAGGED = {"vandal": "read_files", "snoop": "read_files", "forger": "rebind_checker", "memory-bomb": "resource_limit",
           "fork-bomb": "spawn_processes", "network-probe": "network", "endless-output": "timeout",
           "kills-warm-process": "kill_kernel", "disk-fill": "read_files"}


def test_every_offender_has_an_integrity_row_and_is_listed_in_the_summary(runs):
    """Does the summary list each hostile student, and integrity.csv name the trick, and no ordinary student?"""
    _, mixed, summary, _ = runs
    fl = flags(mixed.gradebook)
    for student, trick in FLAGGED.items():
        assert trick in {f[3] for f in fl if f[0] == student}, student
        assert student in summary["offenders"], student
    assert not set(ORDINARY) & set(summary["offenders"])


def test_forgery_is_reported_and_unsandboxed_runs_say_so(runs, tmp_path):
    """Is the forger flagged, and does --no-sandbox leave an 'unsandboxed' row for every student?"""
    _, mixed, _, _ = runs
    assert "rebind_checker" in {f[3] for f in flags(mixed.gradebook) if f[0] == "forger"}
    course = Course(course_copy(tmp_path / "course", (NB,)))
    folder = tmp_path / "in"
    _ordinary(course, folder)
    summary = grade(folder, root=course.root, jobs=1, timeout=3, quiet=True, sandbox=False)
    assert summary["sandbox"] is False
    assert {(f[0], f[3]) for f in flags(course.gradebook) if f[3] == "unsandboxed"} == {(s, "unsandboxed") for s in ORDINARY}
    assert notebook_total(scores(course.gradebook), "honest", NB) == FULL
