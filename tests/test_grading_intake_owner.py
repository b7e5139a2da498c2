"""Can an upload choose whose submission a file lands in (a wrapper guess, zip_collect names, late work)?"""

from __future__ import annotations

import csv
import itertools
import json
import os
import subprocess
import sys
import zipfile

import pytest

from grading_helpers import ROOT, course_copy, notebook_total, scores

from parallel_budget.grading.intake import synthetic
from parallel_budget.grading.intake.archive import Member
from parallel_budget.grading.intake.collect import ROSTER, collect, roster
from parallel_budget.grading.course import Course, CourseError
from parallel_budget.grading.intake.owners import Intake, plan

NB1 = "01-two-rank-update"
REGEXP = r".*/(?P<student_id>[^/_]+)[/_](?P<file_id>[^/_][^/]*\.ipynb)$"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return Course(course_copy(tmp_path_factory.mktemp("course"), [NB1]))


@pytest.fixture()
def fresh(course):
    """The module's course with honest0's own submission in place, and no roster."""
    import shutil

    for folder in (course.submitted, course.autograde / "quarantine"):
        shutil.rmtree(folder, ignore_errors=True)
    (course.autograde / ROSTER).unlink(missing_ok=True)
    collect(course, _zip(course.work / "own.zip", {f"honest0/lesson/{NB1}.ipynb": _nb(course, "honest0")}), "lesson")
    assert _tag(course, "honest0") == "honest0"
    return course


def _nb(course, tag: str) -> bytes:
    nb = synthetic.submission(course, "lesson")[NB1]
    nb.setdefault("metadata", {})["tag"] = tag
    return json.dumps(nb).encode()


def _zip(path, members: dict):
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _tag(course, student):
    path = course.submitted / student / "lesson" / f"{NB1}.ipynb"
    return json.loads(path.read_bytes())["metadata"]["tag"] if path.exists() else None


def _tricks(result):
    return {(i.who, i.trick) for i in result.quarantined}


def test_the_reproduced_attack_a_late_zip_with_one_folder_leaves_the_classmate_alone(fresh, tmp_path):
    """The red team's zip: one top folder holding a classmate's folder.  Was it taken for a wrapper (38 -> 0)?"""
    late = _zip(tmp_path / "late.zip", {f"late/honest0/lesson/{NB1}.ipynb": _nb(fresh, "forged"),
                                        f"late/mallory/lesson/{NB1}.ipynb": _nb(fresh, "mallory")})
    got = collect(fresh, late, "lesson")
    assert _tag(fresh, "honest0") == "honest0" and _tag(fresh, "mallory") is None
    assert {t for _, t in _tricks(got)} == {"outside_layout"} and {w for w, _ in _tricks(got)} == {"late"}


def test_late_work_from_a_named_student_lands_only_in_their_submission(fresh, tmp_path):
    """With --from-student, does every file go to that student or to their quarantine, whatever it is called?"""
    late = _zip(tmp_path / "late.zip", {f"mallory/lesson/{NB1}.ipynb": _nb(fresh, "mallory"),
                                        f"honest0/lesson/{NB1}.ipynb": _nb(fresh, "forged1"),
                                        f"honest0_{NB1}.ipynb": _nb(fresh, "forged2"),
                                        f"mallory/honest0_{NB1}.ipynb": _nb(fresh, "forged3"),
                                        f"x/honest0/{NB1}.ipynb": _nb(fresh, "forged4")})
    got = collect(fresh, late, "lesson", owner="mallory")
    assert got.students == ("honest0", "mallory") and _tag(fresh, "mallory") == "mallory"
    assert _tag(fresh, "honest0") == "honest0"
    assert _tricks(got) == {("mallory", "other_student")} and len(got.quarantined) == 4
    bare = collect(fresh, _zip(tmp_path / "bare.zip", {f"{NB1}.ipynb": _nb(fresh, "bare")}), "lesson", owner="m2")
    assert "m2" in bare.students and _tag(fresh, "m2") == "bare"


def test_zip_collect_names_inside_a_single_folder_are_the_folders_not_the_names(fresh, tmp_path):
    """The zip_collect variant: mallory/honest0_<nb>.ipynb.  Is it quarantined for mallory, unwrapped only when told?"""
    up = _zip(tmp_path / "v.zip", {f"mallory/honest0_{NB1}.ipynb": _nb(fresh, "forged")})
    got = collect(fresh, up, "lesson")
    assert _tag(fresh, "honest0") == "honest0" and _tricks(got) == {("mallory", "other_student")}
    export = _zip(tmp_path / "e.zip", {f"export/honest1_{NB1}.ipynb": _nb(fresh, "h1")})
    assert "honest1" in collect(fresh, export, "lesson", unwrap=True).students and _tag(fresh, "honest1") == "h1"


def test_layouts_named_on_the_command_line(fresh, tmp_path):
    """Does --layout folders refuse top-level LMS names, and --layout lms refuse folders?"""
    up = _zip(tmp_path / "l.zip", {f"s1_{NB1}.ipynb": _nb(fresh, "s1"), f"s2/{NB1}.ipynb": _nb(fresh, "s2")})
    got = collect(fresh, up, "lesson", layout="folders")
    assert _tag(fresh, "s1") is None and _tag(fresh, "s2") == "s2"
    got = collect(fresh, up, "lesson", layout="lms")
    assert _tag(fresh, "s1") == "s1" and any(r.trick == "not_collected" for r in got.not_collected)
    got = collect(fresh, up, "lesson", unwrap=True)  # two top-level entries: nothing to unwrap, and it says so
    assert any(r.who == "--unwrap" for r in got.not_collected) and _tag(fresh, "s2") == "s2"
    with pytest.raises(CourseError):
        collect(fresh, up, "lesson", layout="guess")


def test_a_roster_file_is_the_class(fresh, tmp_path):
    """With autograde/roster.txt, is an id not on it not collected, and a bad line named?"""
    (fresh.autograde / ROSTER).write_text("# class\nhonest0\nmallory  # late\n", encoding="utf-8")
    assert roster(fresh) == (frozenset({"honest0", "mallory"}), True)
    got = collect(fresh, _zip(tmp_path / "r.zip", {f"eve/{NB1}.ipynb": _nb(fresh, "eve"),
                                                   f"mallory/{NB1}.ipynb": _nb(fresh, "mallory")}), "lesson")
    assert _tag(fresh, "eve") is None and _tag(fresh, "mallory") == "mallory"
    assert any(r.who == "eve" and r.trick == "not_collected" for r in got.not_collected)
    with pytest.raises(CourseError, match="--from-student eve"):
        collect(fresh, tmp_path / "r.zip", "lesson", owner="eve")
    (fresh.autograde / ROSTER).write_text("honest0\nbad id\n", encoding="utf-8")
    with pytest.raises(CourseError, match="第 2 行"):
        roster(fresh)


def test_a_folder_named_after_a_rostered_classmate_is_other_student(fresh, tmp_path):
    """With the gradebook's students as roster, is mallory/honest0/... reported as pointing to honest0?"""
    intake = Intake(roster=frozenset({"honest0", "mallory"}))
    m = Member(f"mallory/honest0/lesson/{NB1}.ipynb", ("mallory", "honest0", "lesson", f"{NB1}.ipynb"), 10, 10, "file")
    decided = plan([m], "lesson", [NB1], REGEXP, intake)
    assert not decided.accepted and [(i.who, i.trick) for i in decided.quarantined] == [("mallory", "other_student")]


SHAPES = ["{nb}", "lesson/{nb}", "{o}/{nb}", "{o}/lesson/{nb}", "{o}_{nb}", "{v}/{nb}", "{v}/lesson/{nb}", "{v}_{nb}",
          "{o}/{v}_{nb}", "{o}/{v}/{nb}", "{v}/{o}_{nb}", "w/{v}/{nb}", "w/{v}_{nb}", "w/{o}/{nb}", "{o}_{v}_{nb}",
          "{v}/{v}_{nb}", "lesson/{v}_{nb}", "{o}/lesson/{v}_{nb}"]
REGEXPS = [REGEXP, r"(?P<student_id>[^/_]+)_(?P<file_id>.+\.ipynb)$", r".*_(?P<student_id>[^_/]+)_(?P<file_id>[^_/]+)$",
           r".*/(?P<student_id>[^/]+)/(?P<file_id>[^/]+)$"]


@pytest.mark.parametrize("regexp", REGEXPS)
@pytest.mark.parametrize("layout, unwrap", list(itertools.product(("auto", "folders", "lms"), (False, True))))
def test_no_upload_of_one_owner_places_a_file_for_anyone_else(regexp, layout, unwrap):
    """For every shape, pattern and layout: does late work of "mal" only ever land in, or be kept aside for, mal?"""
    members = [Member(s.format(o="mal", v="vic", nb=f"{NB1}.ipynb"), tuple(s.format(o="mal", v="vic", nb=f"{NB1}.ipynb")
                                                                        .split("/")), 10, 10, "file") for s in SHAPES]
    decided = plan(members, "lesson", [NB1], regexp, Intake(owner="mal", layout=layout, unwrap=unwrap))
    assert {p.student for p in decided.accepted} <= {"mal"}
    assert {i.who for i in decided.quarantined} <= {"mal"}
    files = [r for r in decided.rejected if r.who != "--unwrap"]  # --unwrap with many tops adds one line saying so
    assert len(decided.accepted) + len(decided.quarantined) + len(files) == len(SHAPES)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_single_top_folder_is_never_unwrapped_by_a_guess(shape):
    """Without --unwrap, is every file under one top folder X placed for X or kept aside for X?"""
    name = "X/" + shape.format(o="mal", v="vic", nb=f"{NB1}.ipynb")
    decided = plan([Member(name, tuple(name.split("/")), 10, 10, "file")], "lesson", [NB1], REGEXP, Intake())
    assert {p.student for p in decided.accepted} | {i.who for i in decided.quarantined} <= {"X"}


def _zip_collect(course, *args):
    env = dict(os.environ, PATH=os.pathsep.join([str(ROOT / ".venv" / "bin"), os.environ.get("PATH", "")]))
    return subprocess.run([sys.executable, "-m", "parallel_budget.grading", "--root", str(course.root), "nbgrader",
                           "zip_collect", "lesson", "--force", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)


def test_nbgrader_zip_collect_reads_ids_only_at_the_top_of_the_export(tmp_path):
    """nbgrader zip_collect with the course's collector: does a student's own zip inside the export stay theirs?"""
    course = Course(course_copy(tmp_path / "course", [NB1]))
    archive = course.root / "downloaded" / "lesson" / "archive"
    nb = json.dumps(synthetic.submission(course, "lesson")[NB1]).encode()
    inner = _zip(tmp_path / "mallory_late.zip", {f"honest0_{NB1}.ipynb": b'{"forged": 1}'})
    _zip(archive / "export.zip", {f"honest0_{NB1}.ipynb": nb, f"honest1/{NB1}.ipynb": nb,
                                  f"mallory/honest1_{NB1}.ipynb": b'{"forged": 2}',
                                  "mallory_late.zip": inner.read_bytes()})
    proc = _zip_collect(course)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = {p.relative_to(course.submitted).as_posix(): p.read_bytes() for p in course.submitted.rglob("*.ipynb")}
    assert got == {f"honest0/lesson/{NB1}.ipynb": nb, f"honest1/lesson/{NB1}.ipynb": nb}
    assert "Skipped" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_the_documented_late_work_procedure_cannot_touch_a_classmate(tmp_path):
    """End to end: the class is graded; mallory's late zip carries honest0's folder and name.  Do scores hold?"""
    from parallel_budget.grading.__main__ import main

    course = Course(course_copy(tmp_path / "course", [NB1]))
    right = json.dumps(synthetic.submission(course, "lesson")[NB1])
    wrong = json.dumps(synthetic.submission(course, "lesson", empty=True)[NB1])
    _zip(tmp_path / "class.zip", {f"honest0/lesson/{NB1}.ipynb": right, f"honest1/lesson/{NB1}.ipynb": right})
    assert main(["--root", str(course.root), "grade", str(tmp_path / "class.zip"), "--jobs", "2", "--timeout", "10"]) == 0
    before = scores(course.gradebook)
    _zip(tmp_path / "late.zip", {f"late/mallory/lesson/{NB1}.ipynb": right, f"late/honest0/lesson/{NB1}.ipynb": wrong,
                                 f"late/honest1_{NB1}.ipynb": wrong})
    rc = main(["--root", str(course.root), "grade", str(tmp_path / "late.zip"), "--from-student", "mallory", "--unwrap",
               "--jobs", "2", "--timeout", "10"])
    assert rc == 0
    after = scores(course.gradebook)
    for s in ("honest0", "honest1"):
        assert notebook_total(after, s, NB1) == notebook_total(before, s, NB1) > 0
    assert notebook_total(after, "mallory", NB1) == notebook_total(before, "honest0", NB1)
    with open(course.integrity_csv, encoding="utf-8") as fh:
        rows = {(r["student_id"], r["trick"]) for r in csv.DictReader(fh)}
    assert ("mallory", "other_student") in rows and not {r for r in rows if r[0].startswith("honest")}
