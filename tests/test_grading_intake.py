"""Collection that cannot impersonate (issue 22, items 2, 4, 9, 10 of the review).

Unit tests of :func:`parallel_budget.grading.intake.collect.collect` on small folders and zips (no
kernel runs), and one end-to-end grade run where one student's upload names two others.
"""

from __future__ import annotations

import csv
import json
import struct
import zipfile

import nbformat
import pytest

from grading_helpers import course_copy, notebook_total, scores

from parallel_budget.grading.intake import archive, synthetic
from parallel_budget.grading.scoring import integrity
from parallel_budget.grading.intake.collect import collect, intake_rows
from parallel_budget.grading.course import Course

NB1, NB3 = "01-two-rank-update", "03-zero-memory"
ONE = [NB1]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return Course(course_copy(tmp_path_factory.mktemp("course"), [NB1, NB3]))


@pytest.fixture()
def fresh(course, tmp_path):
    """The module's course with empty submitted/ and quarantine/ folders."""
    import shutil

    for folder in (course.submitted, course.autograde / "quarantine"):
        shutil.rmtree(folder, ignore_errors=True)
    return course


def _nb(course, name=NB1, tag="") -> bytes:
    nb = synthetic.submission(course, "lesson")[name]
    nb.setdefault("metadata", {})["tag"] = tag  # tells copies apart
    return json.dumps(nb).encode()


def _zip(path, members: dict):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _tag(course, student, name=NB1):
    return json.loads((course.submitted / student / "lesson" / f"{name}.ipynb").read_bytes())["metadata"]["tag"]


def _tricks(result, kind="quarantined"):
    return {(i.who, i.trick) for i in getattr(result, kind)}


def test_a_file_named_after_another_student_is_quarantined(fresh, tmp_path):
    """Does mallory/honest2_03-… stay mallory's, kept aside, while honest2 keeps their own notebook?"""
    up = _zip(tmp_path / "class.zip", {
        f"honest2/{NB3}.ipynb": _nb(fresh, NB3, "honest2"),
        f"mallory/{NB1}.ipynb": _nb(fresh, NB1, "mallory"),
        f"mallory/honest2_{NB3}.ipynb": _nb(fresh, NB3, "forged"),
    })
    got = collect(fresh, up, "lesson")
    assert got.students == ("honest2", "mallory")
    assert _tag(fresh, "honest2", NB3) == "honest2"
    assert not (fresh.submitted / "mallory" / "lesson" / f"{NB3}.ipynb").exists()
    assert _tricks(got) == {("mallory", "other_student")} and not got.not_collected
    kept = fresh.autograde / "quarantine" / "mallory" / "lesson" / "mallory" / f"honest2_{NB3}.ipynb"
    assert json.loads(kept.read_bytes())["metadata"]["tag"] == "forged"


def test_a_forged_file_never_gives_a_notebook_to_a_student_who_lacks_it(fresh, tmp_path):
    """Is honest1, who handed in no 03, still without one when mallory's folder holds honest1_03?"""
    up = tmp_path / "in"
    synthetic.write_student(up, "honest1", "lesson", {NB1: json.loads(_nb(fresh))})
    (up / "mallory").mkdir()
    (up / "mallory" / f"honest1_{NB3}.ipynb").write_bytes(_nb(fresh, NB3, "forged"))
    (up / "mallory" / f"{NB1}.ipynb").write_bytes(_nb(fresh))
    got = collect(fresh, up, "lesson")
    assert not (fresh.submitted / "honest1" / "lesson" / f"{NB3}.ipynb").exists()
    assert ("mallory", "other_student") in _tricks(got)


def test_a_nested_archive_is_kept_aside_unopened(fresh, tmp_path):
    """Is mallory/extra.zip ⊃ honest1/01 never unpacked over honest1?"""
    inner = _zip(tmp_path / "extra.zip", {f"honest1/{NB1}.ipynb": _nb(fresh, NB1, "forged")}).read_bytes()
    up = _zip(tmp_path / "class.zip", {
        f"honest1/{NB1}.ipynb": _nb(fresh, NB1, "honest1"),
        f"mallory/{NB1}.ipynb": _nb(fresh),
        "mallory/extra.zip": inner,
    })
    got = collect(fresh, up, "lesson")
    assert _tag(fresh, "honest1") == "honest1"
    assert _tricks(got) == {("mallory", "nested_archive")}
    assert (fresh.autograde / "quarantine" / "mallory" / "lesson" / "mallory" / "extra.zip").read_bytes() == inner


def test_two_copies_of_one_notebook_keep_the_folder_one_and_report_the_other(fresh, tmp_path):
    """dup/01 and dup_01: is the folder copy graded, the other kept aside and reported, whatever the order?"""
    for order in ([f"dup_{NB1}.ipynb", f"dup/{NB1}.ipynb"], [f"dup/{NB1}.ipynb", f"dup_{NB1}.ipynb"]):
        up = _zip(tmp_path / "class.zip", {name: _nb(fresh, NB1, name) for name in order})
        got = collect(fresh, up, "lesson")
        assert _tag(fresh, "dup") == f"dup/{NB1}.ipynb"
        assert _tricks(got) == {("dup", "duplicate_notebook")}
        assert f"dup_{NB1}.ipynb" in got.quarantined[0].member


def test_a_deeper_notebook_is_outside_the_layout_not_another_students(fresh, tmp_path):
    """Is mallory/x/honest1/01 (the old any-depth reading) mallory's quarantined file, not honest1's?"""
    up = _zip(tmp_path / "class.zip", {f"mallory/x/honest1/{NB1}.ipynb": _nb(fresh, NB1, "forged"),
                                       f"mallory/{NB1}.ipynb": _nb(fresh), "mallory/notes.txt": b"hi"})
    got = collect(fresh, up, "lesson")
    assert got.students == ("mallory",) and not (fresh.submitted / "honest1").exists()
    assert [i.trick for i in got.quarantined] == ["outside_layout", "outside_layout"]


def test_lms_file_names_at_the_top_and_in_one_wrapper_folder_when_told(fresh, tmp_path):
    """Are <student>_<nb>.ipynb files read at the top level, and inside a single wrapper folder with --unwrap only?"""
    got = collect(fresh, _zip(tmp_path / "a.zip", {f"s1_{NB1}.ipynb": _nb(fresh, NB1, "s1")}), "lesson")
    assert got.students == ("s1",) and _tag(fresh, "s1") == "s1"
    wrapped = _zip(tmp_path / "b.zip", {f"lms-export/s2_{NB1}.ipynb": _nb(fresh, NB1, "s2"),
                                        f"lms-export/s3_{NB1}.ipynb": _nb(fresh, NB1, "s3")})
    got = collect(fresh, wrapped, "lesson")  # not told: lms-export/ is a folder like any student's
    assert not (fresh.submitted / "s2").exists() and _tricks(got) == {("lms-export", "other_student")}
    got = collect(fresh, wrapped, "lesson", unwrap=True)
    assert {"s2", "s3"} <= set(got.students) and _tag(fresh, "s3") == "s3" and not got.quarantined


def _claim_size(path, name: str, size: int) -> None:
    """Make the central directory of a zip claim ``size`` uncompressed bytes for member ``name``."""
    data = bytearray(path.read_bytes())
    at = data.find(b"PK\x01\x02")
    while data[at + 46:at + 46 + len(name)] != name.encode():
        at = data.find(b"PK\x01\x02", at + 4)
    data[at + 24:at + 28] = struct.pack("<I", size)
    path.write_bytes(bytes(data))


def test_a_zip_bomb_is_refused_before_extraction(fresh, tmp_path):
    """A member declared 1.5 GB, a 70 MB member of zeros, a 5 MB member at 1000:1: refused, nothing big written."""
    up = tmp_path / "bomb.zip"
    with zipfile.ZipFile(up, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"ok/{NB1}.ipynb", _nb(fresh))
        zf.writestr(f"bomb/{NB1}.ipynb", b"tiny")
        with zf.open(f"zeros/{NB1}.ipynb", "w") as fh:
            for _ in range(70):
                fh.write(bytes(1024 * 1024))
        zf.writestr(f"ratio/{NB1}.ipynb", bytes(5 * 1024 * 1024))
    _claim_size(up, f"bomb/{NB1}.ipynb", 1_500_000_000)  # the central directory now says 1.5 GB
    assert up.stat().st_size < 2_000_000
    got = collect(fresh, up, "lesson")
    assert got.students == ("ok",)
    assert {(i.who, i.trick) for i in got.quarantined} == {("bomb", "unsafe_member"), ("zeros", "unsafe_member"),
                                                           ("ratio", "unsafe_member")}
    assert "压缩比" in next(i.detail for i in got.quarantined if i.who == "ratio")
    biggest = max(p.stat().st_size for p in fresh.autograde.rglob("*") if p.is_file())
    assert biggest < 1024 * 1024
    assert {r.who for r in got.not_collected} == {"bomb", "zeros", "ratio"}  # nothing left to grade for them


def test_the_running_cap_stops_a_member_that_lies_about_its_size(tmp_path):
    """Does copy_member stop at the cap and remove the partial file, whatever the size it was told?"""
    src = tmp_path / "big"
    src.write_bytes(bytes(3 * archive.CHUNK))
    member = archive.Member("big", ("big",), 10 ** 9, 10 ** 9, "file", src)
    with pytest.raises(archive.TooBig):
        archive.copy_member(None, member, tmp_path / "out" / "big", cap=archive.CHUNK)
    assert not (tmp_path / "out" / "big").exists()


@pytest.mark.parametrize("name", [f"../{NB1}.ipynb", f"/etc/{NB1}.ipynb", f"C:\\x\\{NB1}.ipynb"])
def test_an_unsafe_top_level_member_costs_only_itself(fresh, tmp_path, name):
    """Is a ../ or absolute member refused and listed, and everyone else collected?"""
    got = collect(fresh, _zip(tmp_path / "c.zip", {name: _nb(fresh), f"s1/{NB1}.ipynb": _nb(fresh)}), "lesson")
    assert got.students == ("s1",)
    assert [r.trick for r in got.not_collected] == ["not_collected"] and not got.quarantined
    assert not (fresh.autograde / f"{NB1}.ipynb").exists() and not (fresh.root / f"{NB1}.ipynb").exists()


def test_an_unsafe_member_inside_a_student_folder_is_quarantined_for_that_student(fresh, tmp_path):
    up = _zip(tmp_path / "c.zip", {f"mallory/../../{NB1}.ipynb": _nb(fresh), f"mallory/{NB1}.ipynb": _nb(fresh)})
    got = collect(fresh, up, "lesson")
    assert got.students == ("mallory",) and _tricks(got) == {("mallory", "unsafe_member")}
    assert not (fresh.root.parent / f"{NB1}.ipynb").exists()


@pytest.mark.parametrize("bad", ["with space", "accenté", "x" * 65])
def test_a_bad_student_id_costs_only_that_student(fresh, tmp_path, bad):
    """Is a student id with a space, an accent or 65 characters listed as not graded, the others collected?"""
    up = tmp_path / "in"
    for student in (bad, "good"):
        (up / student / "lesson").mkdir(parents=True)
        (up / student / "lesson" / f"{NB1}.ipynb").write_bytes(_nb(fresh))
    got = collect(fresh, up, "lesson")
    assert got.students == ("good",)
    assert len(got.not_collected) == 1 and "不合法" in got.not_collected[0].detail


def test_a_symlink_in_a_folder_is_not_followed(fresh, tmp_path):
    """Is mallory/01 -> honest/01 (or a secret) never read?"""
    up = tmp_path / "in"
    (up / "honest").mkdir(parents=True)
    (up / "honest" / f"{NB1}.ipynb").write_bytes(_nb(fresh, NB1, "honest"))
    (up / "mallory").mkdir()
    (up / "mallory" / f"{NB1}.ipynb").symlink_to(up / "honest" / f"{NB1}.ipynb")
    got = collect(fresh, up, "lesson")
    assert got.students == ("honest",) and _tricks(got) == {("mallory", "unsafe_member")}


def test_nbformat_3_is_converted_to_4_and_scans_clean(fresh, tmp_path):
    """Is a v3 notebook stored as v4, with its test cells where the integrity scan looks for them?"""
    v4 = synthetic.submission(fresh, "lesson")[NB1]
    v3 = nbformat.writes(nbformat.convert(nbformat.reads(json.dumps(v4), as_version=4), 3), version=3)
    assert json.loads(v3)["nbformat"] == 3 and "worksheets" in json.loads(v3)
    up = tmp_path / "in"
    (up / "old").mkdir(parents=True)
    (up / "old" / f"{NB1}.ipynb").write_text(v3, encoding="utf-8")
    got = collect(fresh, up, "lesson")
    stored = json.loads((fresh.submitted / "old" / "lesson" / f"{NB1}.ipynb").read_text(encoding="utf-8"))
    assert got.students == ("old",) and stored["nbformat"] == 4
    release = {c["metadata"]["nbgrader"]["grade_id"]: ("".join(c["source"]), c["metadata"]["nbgrader"].get("grade", False))
               for c in v4["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")}
    assert not [f for f in integrity.compare_cells("old", NB1, stored, release) if f.trick == "deleted_test_cell"]


def test_a_broken_notebook_is_quarantined_with_a_reason(fresh, tmp_path):
    up = _zip(tmp_path / "c.zip", {f"s1/{NB1}.ipynb": b"{not json", f"s1/{NB3}.ipynb": _nb(fresh, NB3),
                                   f"s2/{NB1}.ipynb": b'{"cells": []}'})
    got = collect(fresh, up, "lesson")
    assert got.students == ("s1",)
    assert _tricks(got) == {("s1", "unreadable_notebook"), ("s2", "unreadable_notebook")}
    assert "不是可读的 notebook" in got.quarantined[0].detail
    assert [r.who for r in got.not_collected] == ["s2"]


def test_findings_reach_integrity_rows(fresh, tmp_path):
    """Are quarantined and refused entries integrity.csv rows (intake_rows, used by gradebook.export)?"""
    up = _zip(tmp_path / "c.zip", {f"mallory/{NB1}.ipynb": _nb(fresh), f"mallory/honest_{NB1}.ipynb": _nb(fresh),
                                   f"bad id/{NB1}.ipynb": _nb(fresh)})
    collect(fresh, up, "lesson")
    rows = {(r[0], r[4]) for r in intake_rows(fresh)}
    assert rows == {("mallory", "other_student"), ("bad id", "not_collected")}


@pytest.mark.slow
def test_grade_run_with_an_impersonator_leaves_honest_scores_unchanged(tmp_path):
    """End to end: mallory's forged and nested files change nobody's score; integrity.csv and the CLI report them."""
    from parallel_budget.grading.__main__ import main

    course = Course(course_copy(tmp_path / "course", ONE))
    right = synthetic.submission(course, "lesson")[NB1]
    honest = {"honest0": right, "honest1": right}
    wrong = synthetic.submission(course, "lesson", empty=True)[NB1]
    with zipfile.ZipFile(tmp_path / "class.zip", "w") as zf:
        for s, nb in honest.items():
            zf.writestr(f"{s}/lesson/{NB1}.ipynb", json.dumps(nb))
        zf.writestr(f"mallory/{NB1}.ipynb", json.dumps(wrong))
        zf.writestr(f"mallory/honest0_{NB1}.ipynb", json.dumps(wrong))
        zf.writestr("mallory/extra.zip", _zip(tmp_path / "x.zip", {f"honest1/{NB1}.ipynb": json.dumps(wrong)}).read_bytes())
        zf.writestr(f"bad id/{NB1}.ipynb", json.dumps(honest["honest0"]))
    rc = main(["--root", str(course.root), "grade", str(tmp_path / "class.zip"), "--jobs", "2", "--timeout", "5"])
    assert rc == 1  # "bad id" was not graded
    sc = scores(course.gradebook)
    full = notebook_total({k: (v[1], v[1]) for k, v in sc.items()}, "honest0", NB1)
    assert notebook_total(sc, "honest0", NB1) == notebook_total(sc, "honest1", NB1) == full > 0
    assert notebook_total(sc, "mallory", NB1) < full
    with open(course.integrity_csv, encoding="utf-8") as fh:
        rows = {(r["student_id"], r["trick"]) for r in csv.DictReader(fh)}
    assert {("mallory", "other_student"), ("mallory", "nested_archive"), ("bad id", "not_collected")} <= rows
