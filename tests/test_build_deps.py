"""Never stale (issue 16): does a change to the package re-execute exactly the pages that import it,
and does a prose edit re-execute only its own page?"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from parallel_budget.book import builddeps

PKG = ROOT / "parallel_budget"


def deps(page: str) -> set[str]:
    text = (ROOT / "book" / f"{page}.md").read_text(encoding="utf-8")
    return {str(p.relative_to(PKG)) for p in builddeps.page_dependencies(text, PKG)}


def test_a_page_depends_on_the_model_it_imports_and_not_on_grading():
    """Does the intro (which imports pb and pages) depend on every model module, and on no lab or grader?"""
    intro = deps("intro")
    assert {"__init__.py", "model/units.py", "model/memory.py", "model/communication.py", "book/pages.py"} <= intro
    assert not any(p.startswith(("labs/", "grading/")) for p in intro), intro
    assert "book/figures.py" not in intro


def test_a_chapter_with_labs_depends_on_every_lab_module():
    """Does a chapter that calls run_lab depend on all of labs/ (the launcher imports labs by name)?"""
    ring = deps("ring-allreduce")
    labs = {str(p.relative_to(PKG)) for p in (PKG / "labs").rglob("*.py")}
    assert labs <= ring
    assert {"book/figures.py", "book/widgets.py", "model/steptime.py"} <= ring
    assert not any(p.startswith("grading/") for p in ring)


def test_imports_are_followed_relative_and_absolute(tmp_path):
    """Are `from .x import`, `from ..y import` and `from pkg.a import mod` followed, and an unparsable
    import line answered with the whole package?"""
    pkg = tmp_path / "parallel_budget"
    (pkg / "a").mkdir(parents=True)
    (pkg / "b").mkdir()
    (pkg / "__init__.py").write_text("from .a.x import f\n")
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("def f():\n    from ..b import y\n")
    (pkg / "b" / "__init__.py").write_text("")
    (pkg / "b" / "y.py").write_text("import os\n")
    (pkg / "b" / "z.py").write_text("")
    (pkg / "c.py").write_text("")
    got = {str(p.relative_to(pkg)) for p in builddeps.page_dependencies("import parallel_budget as pb\n", pkg)}
    assert got == {"__init__.py", "a/__init__.py", "a/x.py", "b/__init__.py", "b/y.py"}
    got = {str(p.relative_to(pkg)) for p in builddeps.page_dependencies("from parallel_budget import c\n", pkg)}
    assert "c.py" in got and "b/z.py" not in got
    assert builddeps.page_dependencies("print('no package here')\n", pkg) == set()
    everything = builddeps.page_dependencies("from parallel_budget.a import (\n    x,\n)\n", pkg)
    assert everything == set(builddeps.package_files(pkg))


# ------------------------------------------------------------------ real incremental builds

PROBE_TOC = """format: jb-book
root: book/intro
chapters:
  - file: book/reading-guide
  - file: book/glossary
"""


def build(copy: Path) -> tuple[set[str], str]:
    """Build the copy incrementally (without -W: the probe book leaves out pages the intro links to);
    return the pages myst-nb executed and the log."""
    env = dict(os.environ, PYTHONPATH=str(copy), PYDEVD_DISABLE_FILE_VALIDATION="1")
    proc = subprocess.run([sys.executable, "-m", "parallel_budget.book.build", str(copy)], cwd=copy, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    executed = set(re.findall(r"book/([\w-]+)\.md: Executed notebook", proc.stdout + proc.stderr))
    return executed, proc.stdout


def shown(copy: Path, page: str) -> list[str]:
    html = (copy / "_build" / "html" / "book" / f"{page}.html").read_text(encoding="utf-8")
    return re.findall(r'<span class="output text_plain">([^<]*)</span>', html)


@pytest.mark.slow
def test_a_formula_edit_reaches_the_page_and_a_prose_edit_runs_one_page(tmp_path):
    """In a copy of the repo: does editing the ZeRO formula re-execute the pages that import the model and
    show the new number; does a prose edit re-execute only its page; does a grading edit or nothing at all
    re-execute no page?"""
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "_config.yml", copy)
    shutil.copytree(ROOT / "book", copy / "book")
    shutil.copytree(PKG, copy / "parallel_budget", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "_toc.yml").write_text(PROBE_TOC, encoding="utf-8")

    executed, _ = build(copy)
    assert executed == {"intro", "reading-guide", "glossary"}
    assert shown(copy, "reading-guide")[0] == "16 GB"

    executed, _ = build(copy)
    assert executed == set(), "a no-op rebuild executed pages"

    memory = copy / "parallel_budget" / "model" / "memory.py"
    text = memory.read_text(encoding="utf-8")
    assert text.count("optim_bytes=12)") == 2  # zero_memory and zero_table defaults
    # A longer text: Python trusts a .pyc whose source has the same size and mtime second.
    memory.write_text(text.replace("optim_bytes=12)", "optim_bytes=13 )"), encoding="utf-8")
    executed, _ = build(copy)
    assert executed == {"intro", "reading-guide", "glossary"}  # all three import the model
    assert shown(copy, "reading-guide")[0] == "17 GB", shown(copy, "reading-guide")
    assert "17 GB" in shown(copy, "intro")

    guide = copy / "book" / "reading-guide.md"
    before = guide.read_text(encoding="utf-8")
    assert before.count("读两份材料") == 1, "the prose edit below needs its anchor in the reading guide"
    guide.write_text(before.replace("读两份材料", "读两份材料,边读边记"), encoding="utf-8")
    executed, _ = build(copy)
    assert executed == {"reading-guide"}
    html = (copy / "_build" / "html" / "book" / "reading-guide.html").read_text(encoding="utf-8")
    assert "边读边记" in html

    runner = copy / "parallel_budget" / "grading" / "runner.py"
    runner.write_text(runner.read_text(encoding="utf-8") + "\n# an edit no page depends on\n", encoding="utf-8")
    executed, _ = build(copy)
    assert executed == set(), "a grading edit re-executed pages that do not import grading"


def test_build_jobs_and_a_failed_build_forgets_its_environment(tmp_path, monkeypatch):
    """Does PB_BUILD_JOBS set the readers (default 4, a clear message for nonsense), and does a failed
    build remove the saved Sphinx environment so the next build reports the same warnings again?"""
    from parallel_budget.book import build

    assert build.jobs_from_env({}) == build.DEFAULT_JOBS == 4
    assert build.jobs_from_env({"PB_BUILD_JOBS": "2"}) == 2
    with pytest.raises(SystemExit, match="PB_BUILD_JOBS 需要正整数"):
        build.jobs_from_env({"PB_BUILD_JOBS": "two"})
    assert build.output_folder(["book", "--path-output", str(tmp_path)]) == tmp_path
    assert build.output_folder([str(tmp_path / "src"), "-W"]) == tmp_path / "src"
    doctrees = tmp_path / "_build" / ".doctrees"
    doctrees.mkdir(parents=True)
    (doctrees / "environment.pickle").write_bytes(b"x")
    build.forget_environment(["src", "--path-output", str(tmp_path)])
    assert not doctrees.exists() and (tmp_path / "_build").is_dir()
