"""A wheel of the course package, shipped with the site (issue 13: a downloaded notebook runs).

A notebook downloaded from the site needs ``parallel_budget``.  Every build puts
``downloads/parallel_budget-<version>-py3-none-any.whl`` at the site's root, built
offline from the repository (``pip wheel --no-deps --no-build-isolation --no-index``),
so a student installs it with ``pip install <that file>`` and no network.  The wheel is
rebuilt only when the package or ``pyproject.toml`` changed (a digest beside it).
A page links it as ``[…](../downloads/<wheel>)``; :class:`DownloadLinks` checks the name.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

logger = logging.getLogger(__name__)

FOLDER = "downloads"
DIGEST_FILE = ".wheel-digest"


def wheel_name(version: str) -> str:
    return f"parallel_budget-{version}-py3-none-any.whl"


def source_digest(repo: Path) -> str:
    """SHA-256 over pyproject.toml and every package file (path and bytes), caches excluded."""
    h = hashlib.sha256()
    files = [repo / "pyproject.toml"] + sorted(
        p for p in (repo / "parallel_budget").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    )
    for p in files:
        h.update(str(p.relative_to(repo)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def build_wheel(repo: Path, out_dir: Path, python: str = sys.executable, timeout: float = 300) -> Path:
    """Build the course package's wheel into ``out_dir`` (offline); return its path.

    The build runs in a temporary copy, so the repository gets no ``build/`` or ``*.egg-info``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    digest = source_digest(repo)
    stamp = out_dir / DIGEST_FILE
    existing = sorted(out_dir.glob("parallel_budget-*.whl"))
    if existing and stamp.is_file() and stamp.read_text().strip() == digest:
        return existing[-1]
    with tempfile.TemporaryDirectory(prefix="pb-wheel-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        shutil.copy(repo / "pyproject.toml", src)
        shutil.copytree(repo / "parallel_budget", src / "parallel_budget",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        built = Path(tmp) / "wheel"
        proc = subprocess.run(
            [python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
             "-w", str(built), str(src)],
            capture_output=True, text=True, timeout=timeout,
        )
        wheels = sorted(built.glob("parallel_budget-*.whl"))
        if proc.returncode != 0 or len(wheels) != 1:
            raise RuntimeError(f"课程包的 wheel 构建失败（pip wheel 退出码 {proc.returncode}）：\n{proc.stderr[-2000:]}")
        for old in existing:
            old.unlink()
        target = out_dir / wheels[0].name
        shutil.copy(wheels[0], target)
    stamp.write_text(digest + "\n")
    return target


def project_version(repo: Path) -> str:
    """The version pyproject.toml gives the package (the wheel's name carries it)."""
    import tomllib

    return tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


# A prose link into the site's downloads/ folder, relative to the page: [名字](../downloads/<file>).
DOWNLOAD_LINK = re.compile(rf"^(?:\.\./)*{FOLDER}/([^/#?]+)$")


class DownloadLinks(SphinxPostTransform):
    """``[…](../downloads/<wheel>)`` -> a plain link to the wheel the build ships; any other file warns.

    The wheel is written after the pages (``build-finished``), so myst-parser finds no such file
    and would report a missing reference; this resolves the link first, checking its name against
    the version in pyproject.toml, so a stale name fails a ``-W`` build instead of a reader's click.
    """

    default_priority = 5  # before myst-parser's link resolver (9)

    def run(self, **kwargs) -> None:
        docname = self.env.docname
        for node in list(self.document.findall(addnodes.pending_xref)):
            target = node.get("reftarget") or ""
            m = DOWNLOAD_LINK.match(target)
            if node.get("refdomain") or not m:
                continue
            where = posixpath.normpath(posixpath.join(posixpath.dirname(docname), target))
            want = wheel_name(project_version(Path(self.env.srcdir)))
            if where != f"{FOLDER}/{want}":
                logger.warning(f"download link {target!r}: the site ships only {FOLDER}/{want}", location=node)
                node.replace_self(nodes.inline(node.astext(), node.astext()))
                continue
            uri = posixpath.relpath(where, posixpath.dirname(docname) or ".")
            ref = nodes.reference("", "", internal=False, refuri=uri, classes=["pb-download"])
            ref += node.children
            node.replace_self(ref)
