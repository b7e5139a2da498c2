"""Build the book: ``python -m parallel_budget.book.build [FOLDER] [jupyter-book build options]``.

The same as ``jupyter-book build [FOLDER] [options]`` (FOLDER defaults to the
repository; ``make book`` adds ``-W --keep-going``), except that Sphinx reads -- and myst-nb executes -- pages in parallel: jupyter-book 1's
command line has no ``-j``, but its ``build_sphinx`` takes ``jobs`` and passes
it to Sphinx.  The labs make five chapters take 5-12 s each and mostly wait on
processes, so four readers on two cores finish a clean build well before one.

``PB_BUILD_JOBS`` (default 4) sets the number of readers; 1 reads serially.
Incremental builds re-execute only outdated pages (see :mod:`.builddeps`).
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_JOBS = 4


def jobs_from_env(environ=os.environ) -> int:
    """Readers to use: PB_BUILD_JOBS, a positive integer (default 4)."""
    raw = environ.get("PB_BUILD_JOBS", "").strip()
    if not raw:
        return DEFAULT_JOBS
    if not raw.isdigit() or int(raw) < 1:
        raise SystemExit(f"PB_BUILD_JOBS 需要正整数（并行读取页面的进程数），收到 {raw!r}。例如 PB_BUILD_JOBS=4")
    return int(raw)


def main(argv: list[str] | None = None) -> int:
    import jupyter_book.cli.main as cli
    import jupyter_book.sphinx as jb_sphinx

    args = list(sys.argv[1:] if argv is None else argv)
    jobs = jobs_from_env()
    # jupyter-book's build command imports build_sphinx from this module at call time.
    jb_sphinx.build_sphinx = functools.partial(jb_sphinx.build_sphinx, jobs=jobs)
    if not args or args[0].startswith("-"):  # the book's folder comes first, as for jupyter-book build
        args.insert(0, str(ROOT))
    # The pages' kernels reuse a lab's result while the package is unchanged (parallel_budget.labs.engine.cache).
    os.environ.setdefault("PB_LAB_CACHE", str(Path(args[0]).resolve() / ".lab-cache"))
    try:
        cli.main(["build", *args], standalone_mode=False)
        code = 0
    except SystemExit as exc:  # click's exit
        code = int(exc.code or 0)
    except RuntimeError as exc:  # jupyter-book's "There was an error in building your book"
        print(exc, file=sys.stderr)
        code = 1
    if code:
        forget_environment(args)
    return code


def output_folder(args: list[str]) -> Path:
    """Where jupyter-book writes ``_build``: --path-output, else the book's folder."""
    for i, a in enumerate(args):
        if a == "--path-output" and i + 1 < len(args):
            return Path(args[i + 1])
        if a.startswith("--path-output="):
            return Path(a.split("=", 1)[1])
    return Path(args[0])


def forget_environment(args: list[str]) -> None:
    """After a failed build, drop Sphinx's saved environment: an incremental build would not re-read the
    pages that warned, and would pass.  The next build then reads every page again."""
    doctrees = output_folder(args) / "_build" / ".doctrees"
    if doctrees.is_dir():
        shutil.rmtree(doctrees, ignore_errors=True)
        print(f"build failed: removed {doctrees}, the next build reads every page again", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
