"""The site ships its calculators and practice code minified (issue 14; within :data:`BUDGET`).

``book/_static/calc/*.js`` and ``*.css`` stay readable: node's tests and the chapters'
reviewers read those.  At every HTML build, :func:`write_minified` writes a minified twin of
each into a folder beside the output, and :func:`ship_minified` appends that folder to
``html_static_path`` after ``book/_static``, so Sphinx copies the readable files first and the
minified ones over them, before any page is written (the ``?v=`` checksums in the pages are
the shipped files').  The minifier is tdewolff's (``tdewolff-minify``, pinned in
requirements.txt): it renames local variables and drops comments and whitespace, but keeps
every property, string and global name, so ``tests/js`` runs unchanged on the twins
(``PB_CALC_DIR``), and the browser tests run on them as shipped.

    python -m parallel_budget.book.minified [SITE]   # bytes per file and the total, readable vs shipped
"""

from __future__ import annotations

import sys
from pathlib import Path

CALC = Path(__file__).resolve().parents[2] / "book" / "_static" / "calc"
FOLDER = "pb-minified"  # beside the html output: <outdir>/../pb-minified/calc/*
# Bytes of JS + CSS the site ships for calculators, practice and the plan builder.  Raised from 60 000 by
# issue 23 (measured: the plan builder's step timeline, best-first search, three SVG drawings, presets and a
# hint per input made plan.js + planview.js + plan.css 45.9 kB shipped, from 17.7 kB; all assets 86.7 kB).
# Issue 26 then measured 87 502 B before and 93 219 B after it (+5 717 B: units typed in any calculator field
# with plausibility limits and the ambiguous-unit rule in model.js +1.6 kB, charts drawn at their shown width
# and value echoes in ui.js +1.7 kB, try-again, 看解答 and coinciding mistakes in practice.js +1.2 kB,
# dark-mode colours, 24 px targets and the phone layout in calc.css and practice.css +1.2 kB): 96 000.
# Issue 32 (calibration) measured 94 395 B before and 106 219 B after it (+11 824 B: nccltests.js, the nccl-tests
# reader and fit with its Chinese refusals, the verdict on what was measured and the overlap sweep, 8.1 kB;
# the calibration panel and the overlap figure in planview.js +3.2 kB; plan.js, plan.css, record.js +0.5 kB).
# Issue 32 §5 (zero-bubble) measured +3 434 B on its own: the zero-bubble schedules' orders, their refusals and the
# V's stage placement in planschedule.js, the I/W split in plantimeline.js, the menu, hints and assumption text in
# plan.js and planview.js, the W colour in plan.css.  Issue 32 merged (new terms: gradient precision, HBM bandwidth,
# optimizer step, logits, per-boundary PP links, with calibration and zero-bubble): 113 317 B measured, so 114 000.
# Issue 32 §4 (a measured step solves the HFU) measured 113 317 B before and 116 345 B after it (+3 028 B: hfu_from_step's
# bisection, its refusals in Python's words and Python's '.4g' in nccltests.js +2.1 kB, the step and tokens/s inputs and
# the HFU / MFU row in planview.js +0.8 kB, plan.js +0.1 kB): 116 500.
BUDGET = 116_500
MEDIA = {".js": "application/javascript", ".css": "text/css"}


def assets(folder: Path = CALC) -> list:
    """Every calculator, practice and plan script and stylesheet in ``folder``."""
    return sorted(p for p in folder.iterdir() if p.suffix in MEDIA)


def minified(path: Path) -> str:
    """The shipped text of one asset: tdewolff-minify's output, with a clear message when it is missing."""
    try:
        import minify
    except ImportError as exc:  # pragma: no cover - setup installs it
        raise RuntimeError("缺少 tdewolff-minify：请运行 make setup（requirements.txt 里固定了版本）。") from exc
    out = minify.string(MEDIA[path.suffix], path.read_text(encoding="utf-8"))
    if not out.strip():
        raise RuntimeError(f"压缩 {path.name} 得到空文件")
    return out + "\n"


def minified_sizes(source: Path = CALC) -> dict:
    """{name: bytes} each asset of ``source`` has once minified (what the site ships), nothing written."""
    return {p.name: len(minified(p).encode("utf-8")) for p in assets(source)}


def write_minified(dest: Path, source: Path = CALC) -> dict:
    """Write the minified twin of every asset of ``source`` to ``dest/calc/``; return {name: bytes}."""
    out = dest / "calc"
    out.mkdir(parents=True, exist_ok=True)
    sizes = {}
    for path in assets(source):
        text = minified(path)
        target = out / path.name
        data = text.encode("utf-8")
        if not target.is_file() or target.read_bytes() != data:
            target.write_bytes(data)
        sizes[path.name] = len(data)
    for stale in set(p.name for p in assets(out)) - set(sizes):
        (out / stale).unlink()
    return sizes


def ship_minified(app) -> None:
    """``builder-inited``: minify into <outdir>/../pb-minified and let it override book/_static/calc."""
    source = Path(app.srcdir) / "book" / "_static" / "calc"
    if app.builder.format != "html" or not source.is_dir():
        return
    dest = Path(app.outdir).parent / FOLDER
    write_minified(dest, source)
    app.config.html_static_path = [*app.config.html_static_path, str(dest)]


def shipped_sizes(site: Path) -> dict:
    """{name: bytes} of the calculator assets a built site serves."""
    return {p.name: p.stat().st_size for p in assets(site / "_static" / "calc")}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    readable = {p.name: p.stat().st_size for p in assets()}
    if argv:
        shipped = shipped_sizes(Path(argv[0]))
    else:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            shipped = write_minified(Path(tmp))
    for name in readable:
        print(f"{name:14} {readable[name]:7d} B readable  {shipped.get(name, 0):7d} B shipped")
    total = sum(shipped.values())
    print(f"{'total':14} {sum(readable.values()):7d} B readable  {total:7d} B shipped (budget {BUDGET} B)")
    return 0 if total <= BUDGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
