"""A downloaded notebook runs (issue 13): does the site ship a wheel of the course package, and does a
fresh venv that installs it from the site import the package and run a downloaded notebook's setup cells?"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import ROOT
from parallel_budget.book import wheel

pytestmark = pytest.mark.slow


def site_wheel(built_site: Path) -> Path:
    import parallel_budget

    path = built_site / wheel.FOLDER / wheel.wheel_name(parallel_budget.__version__)
    assert path.is_file(), f"the site has no {path.relative_to(built_site)}"
    return path


def test_the_site_ships_the_package_wheel(built_site):
    """Is the wheel in the site's downloads/, holding every module of the package and no tests?"""
    import zipfile

    names = set(zipfile.ZipFile(site_wheel(built_site)).namelist())
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "parallel_budget").rglob("*.py") if "__pycache__" not in p.parts}
    assert modules <= names, sorted(modules - names)[:5]
    assert not any(n.startswith(("tests/", "book/", "solutions/")) for n in names)


def test_a_fresh_venv_runs_a_downloaded_notebook_from_the_site_wheel(built_site, tmp_path):
    """In a new venv (no course package; the heavy dependencies borrowed read-only from this venv), does
    `pip install <the site's wheel>` work offline, import parallel_budget from the venv, and run the
    package cells of a notebook downloaded from the site?"""
    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # pint, ipywidgets ... from this venv, as a plain path: its .pth files (the editable install of the
    # repository) are not processed there, so the package can only come from the wheel.
    (site / "borrowed_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_NO_INDEX"] = "1"
    check = subprocess.run([str(py), "-c", "import parallel_budget"], env=env, capture_output=True, text=True,
                           cwd=tmp_path)  # not the repository: python -c puts the working folder on sys.path
    assert check.returncode != 0, "the fresh venv already sees parallel_budget before the wheel is installed"

    install = subprocess.run([str(py), "-m", "pip", "install", "--no-index", "--no-deps", "-q", str(site_wheel(built_site))],
                             env=env, capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr

    html = (built_site / "book" / "ring-allreduce.html").read_text(encoding="utf-8")
    link = re.search(r'href="(\.\./_downloads/[0-9a-f]+/02-ring-allreduce\.ipynb)"', html).group(1)
    notebook = json.loads((built_site / "book" / link).read_text(encoding="utf-8"))
    cells = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]

    def imports_only(code: str) -> bool:
        lines = [ln for ln in code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        return bool(lines) and all(re.match(r"(from|import)\s", ln) for ln in lines)

    setup = [c for c in cells if "parallel_budget" in c and imports_only(c)]
    assert setup, "the downloaded notebook has no cell that imports parallel_budget"
    program = "\n".join(setup) + (
        "\nimport parallel_budget as pb\nprint(pb.__file__)\n"
        "print(pb.fmt(pb.ring_allreduce(4, '2 GB', '25 GB/s').send_per_rank))\n"
    )
    run = subprocess.run([str(py), "-c", program], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    where, value = run.stdout.strip().splitlines()[-2:]
    assert Path(where).is_relative_to(venv), f"parallel_budget came from {where}, not the fresh venv"
    assert value == "3 GB"


def test_the_wheel_is_rebuilt_only_when_the_package_changes(tmp_path):
    """Does build_wheel reuse the wheel while the sources are unchanged, and rebuild it after an edit?"""
    import shutil

    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(ROOT / "pyproject.toml", repo)
    shutil.copytree(ROOT / "parallel_budget", repo / "parallel_budget", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "downloads"
    first = wheel.build_wheel(repo, out)
    stamp = first.stat().st_mtime_ns
    assert wheel.build_wheel(repo, out) == first and first.stat().st_mtime_ns == stamp
    units = repo / "parallel_budget" / "model" / "units.py"
    units.write_text(units.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    again = wheel.build_wheel(repo, out)
    import zipfile

    assert zipfile.ZipFile(again).read("parallel_budget/model/units.py").endswith(b"# edited\n")
    assert not (repo / "build").exists() and not list(repo.glob("*.egg-info"))


def test_the_exercises_page_links_the_shipped_wheel_with_an_install_line(built_site):
    """Does the page that lists the notebooks link the site's wheel (the href reaching the shipped file) and
    say in one line how to install it with pip?"""
    from html import unescape
    from urllib.parse import urljoin

    page = built_site / "book" / "exercises.html"
    html = page.read_text(encoding="utf-8")
    shipped = site_wheel(built_site)
    hrefs = [unescape(h) for h in re.findall(r'<a class="pb-download reference external" href="([^"]+)"', html)]
    assert len(hrefs) == 1, hrefs
    target = Path(urljoin(page.as_uri(), hrefs[0]).removeprefix("file://"))
    assert target.resolve() == shipped.resolve()
    assert f"pip install {shipped.name}" in re.sub(r"<[^>]+>", "", html)
    for n in range(1, 6):  # the five notebooks are downloads of this page too
        assert re.search(rf'href="\.\./_downloads/[0-9a-f]+/0{n}-[\w-]+\.ipynb"', html), n


def test_a_download_link_naming_another_file_fails_the_build(tmp_path):
    """Does a link into downloads/ that is not the wheel this version ships warn (so -W fails) and stay dead-free?"""
    from sphinx.cmd.build import build_main

    src = tmp_path / "src"
    (src / "book").mkdir(parents=True)
    (src / "pyproject.toml").write_text('[project]\nname = "parallel-budget"\nversion = "9.9.9"\n', encoding="utf-8")
    (src / "conf.py").write_text('extensions = ["myst_parser"]\nexclude_patterns = ["_build"]\n'
                                 "def setup(app):\n    from parallel_budget.book import wheel\n"
                                 "    app.add_post_transform(wheel.DownloadLinks)\n", encoding="utf-8")
    (src / "index.md").write_text("# 首页\n\n```{toctree}\nbook/page\n```\n", encoding="utf-8")
    good, old = wheel.wheel_name("9.9.9"), wheel.wheel_name("0.0.1")
    (src / "book" / "page.md").write_text(f"# 页\n\n[新]({'../downloads/' + good})，[旧](../downloads/{old})。\n", encoding="utf-8")
    warnings = tmp_path / "warnings.txt"
    code = build_main(["-q", "-W", "--keep-going", "-w", str(warnings), "-b", "html", str(src), str(tmp_path / "html")])
    text = warnings.read_text(encoding="utf-8")
    assert code != 0 and old in text and good in text and text.count("WARNING") == 1, text
    html = (tmp_path / "html" / "book" / "page.html").read_text(encoding="utf-8")
    assert f'href="../downloads/{good}"' in html and f'href="../downloads/{old}"' not in html
