"""Is the course written in its own words: no run of 12 characters copied from the source lesson?

The source lesson is not in this repository (its sentences are not ours to publish).
``tests/files/lesson-shingles.txt`` holds a 48-bit hash of every run of ``RUN`` characters of it,
so the check needs only the hashes. A run is counted after normalising both sides the same way:
NFKC (full-width to ASCII), lower case, whitespace and punctuation dropped, and a Latin word or a
number counted as one character ("ring all-reduce" is a term of the field, not thirteen copied
letters). The lesson's title is the course's title and is exempt.

Regenerate the hashes (only when the source lesson changes)::

    .venv/bin/python tests/test_originality.py /path/to/source-lesson.txt

Set ``PB_SOURCE_LESSON`` to the lesson's path to check that the stored hashes are its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHINGLES = ROOT / "tests" / "files" / "lesson-shingles.txt"
RUN = 12


def tokens(text: str) -> tuple:
    """The characters a run is counted in: Han characters one by one, a Latin word or number as one."""
    text = unicodedata.normalize("NFKC", text).lower().replace("−", "-").replace("×", "x")
    out = re.findall(r"[a-z0-9]+|\S", text)
    return tuple(t for t in out if not unicodedata.category(t[0]).startswith(("P", "S")))


def digest(window) -> str:
    return hashlib.sha256("\u241f".join(window).encode("utf-8")).hexdigest()[:12]


def windows(toks: tuple):
    return (toks[i:i + RUN] for i in range(len(toks) - RUN + 1))


def lesson_hashes(lesson: str) -> list:
    """Hashes of every run of the lesson, its title's own runs left out."""
    title = {digest(w) for w in windows(tokens(lesson.split("\n", 1)[0]))}
    return sorted({digest(w) for w in windows(tokens(lesson))} - title)


def stored() -> set:
    lines = SHINGLES.read_text(encoding="utf-8").split("\n")
    return {line for line in lines if re.fullmatch(r"[0-9a-f]{12}", line)}


def copied(text: str, hashes: set) -> list:
    """The runs of ``text`` (at least RUN characters, as tokens joined) that the lesson also has."""
    toks, found, i = tokens(text), [], 0
    while i <= len(toks) - RUN:
        if digest(toks[i:i + RUN]) in hashes:
            j = i + RUN
            while j < len(toks) and digest(toks[j - RUN + 1:j + 1]) in hashes:
                j += 1
            found.append("".join(toks[i:j]))
            i = j
        else:
            i += 1
    return found


def course_texts():
    """The book's pages, the notebooks, the question bank and every string of the package and scripts."""
    from typography import js_strings, python_strings

    for p in sorted((ROOT / "book").glob("*.md")):
        yield p.name, p.read_text(encoding="utf-8")
    for p in sorted((ROOT / "solutions" / "lesson").glob("*.ipynb")) + sorted((ROOT / "exercises" / "lesson").glob("*.ipynb")):
        nb = json.loads(p.read_text(encoding="utf-8"))
        yield p.name, "\n".join("".join(c["source"]) for c in nb["cells"])
    for p in sorted((ROOT / "parallel_budget").rglob("*.py")):
        yield str(p.relative_to(ROOT)), "\n".join(s for _, s in python_strings(p, docstrings=True))
    for p in sorted((ROOT / "book" / "_static" / "calc").glob("*.js")):
        yield p.name, "\n".join(s for _, s in js_strings(p))
    from parallel_budget import questions

    for q in questions.QUESTIONS.values():
        for seed in (0, 1):
            params = q.generate(seed)
            yield q.id, q.prompt(params) + "\n" + q.solution(params) + "\n" + q.hint


def test_the_check_would_find_a_copied_sentence():
    """Does a run of 12 characters shared with a text count, with spacing, punctuation and width ignored?"""
    source = "春天的河水涨得很快，渡口的老船夫每天早上都要把小船拴得更牢一些。"
    hashes = set(lesson_hashes("标题\n" + source))
    assert copied("他说：渡口的老船夫，每天早上都要把小船拴牢。", hashes)
    assert not copied("老船夫每天都把船拴在渡口，河水涨得快。", hashes)
    assert len(tokens("ring all-reduce 的 2 GB")) == 6


def test_stored_hashes_are_the_lessons():
    """Are the stored hashes present, and the source lesson's own when it is at hand?"""
    hashes = stored()
    assert len(hashes) > 1000
    path = os.environ.get("PB_SOURCE_LESSON")
    if path:
        assert hashes == set(lesson_hashes(Path(path).read_text(encoding="utf-8")))


def test_no_run_of_twelve_characters_is_copied_from_the_source_lesson():
    """Does no page, notebook, question or message share a run of 12 characters with the source lesson?"""
    hashes = stored()
    found = {name: runs for name, text in course_texts() if (runs := copied(text, hashes))}
    assert found == {}, found


if __name__ == "__main__":
    lesson = Path(sys.argv[1]).read_text(encoding="utf-8")
    header = ("# 48-bit hashes of every 12-character run of the source lesson (tests/test_originality.py);"
              " regenerate with: python tests/test_originality.py LESSON.txt")
    SHINGLES.write_text(header + "\n" + "\n".join(lesson_hashes(lesson)) + "\n", encoding="utf-8")
    print(f"wrote {SHINGLES}")
