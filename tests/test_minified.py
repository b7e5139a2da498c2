"""Does the built site ship the calculators, practice and plan code minified, within its budget, and do the
shipped files still pass the shared vectors (so minification cannot silently break a twin)?"""

from __future__ import annotations

import os
import shutil
import subprocess

from conftest import ROOT
from parallel_budget.book import minified


def test_the_site_ships_the_minified_twins_within_budget(built_site):
    """Is every calculator asset of the built site the minified twin of its readable source, all of them
    (plan.js included) at most minified.BUDGET bytes?"""
    shipped = built_site / "_static" / "calc"
    sizes = minified.shipped_sizes(built_site)
    assert set(sizes) == {p.name for p in minified.assets()}
    for source in minified.assets():
        assert (shipped / source.name).read_text(encoding="utf-8") == minified.minified(source), \
            f"{source.name}: the site does not serve the minified twin of book/_static/calc/{source.name}"
    readable = sum(p.stat().st_size for p in minified.assets())
    assert sum(sizes.values()) <= minified.BUDGET < readable, (sizes, readable)


def test_the_minified_twins_pass_the_shared_vectors(built_site):
    """Does `node --test tests/js/` pass on the site's own (minified) scripts, as it does on the sources?"""
    node = shutil.which("node")
    assert node, "node 20 is needed for the JavaScript tests (apt-get install nodejs)"
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "js").glob("*.test.mjs"))
    env = dict(os.environ, PB_CALC_DIR=str(built_site / "_static" / "calc"))
    proc = subprocess.run([node, "--test", *files], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    tail = "\n".join(proc.stdout.splitlines()[-30:])
    assert proc.returncode == 0 and "# fail 0" in proc.stdout, f"node --test on the shipped files failed:\n{tail}"
    passed = int(next(line for line in proc.stdout.splitlines() if line.startswith("# pass ")).split()[2])
    assert passed >= 500


def test_a_broken_twin_fails_the_node_run(tmp_path):
    """Would a wrong number in a shipped file fail that run (the tests really load PB_CALC_DIR's scripts)?"""
    node = shutil.which("node")
    assert node
    minified.write_minified(tmp_path)
    model = tmp_path / "calc" / "model.js"
    text = model.read_text(encoding="utf-8")
    assert "1e9" in text
    model.write_text(text.replace("1e9", "1e8", 1), encoding="utf-8")
    env = dict(os.environ, PB_CALC_DIR=str(tmp_path / "calc"))
    proc = subprocess.run([node, "--test", "tests/js/model.test.mjs"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0 and "# fail 0" not in proc.stdout
