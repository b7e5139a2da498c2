"""nbgrader ``zip_collect``'s collector, reading a student id only where the LMS wrote it.

nbgrader's own :class:`~nbgrader.plugins.zipcollect.FileNameCollectorPlugin`
applies ``named_regexp`` to a file's whole path below ``extracted/``, and the
extractor unpacks every archive it finds, students' own archives included.
So a late student's ``mallory_late.zip`` holding ``honest0_01-two-rank-update.ipynb``
became ``extracted/.../mallory_late/honest0_01-two-rank-update.ipynb``, which
the pattern read as honest0's notebook: it replaced honest0's submission.

:class:`TopLevelNames` (``c.ZipCollectApp.collector_plugin`` in
``autograde/nbgrader_config.py``) reads a student id only from the top of the
LMS export (the top of ``archive/``, or of one archive in it), as :mod:`.owners`
does: a top-level file by the pattern applied to its own name (``"/" + name``),
or a top-level ``<student>/`` folder and a file directly in it, unless that
file's own name points to another student.  A deeper file (inside a folder or
archive a student uploaded) is skipped with a warning naming it; ``grade`` on
the export keeps such files in the uploader's quarantine instead.
An export that wraps everything in one folder is read below it only when the
instructor says so (``--TopLevelNames.unwrap=True``, as ``grade --unwrap``).
``archive/`` holds the LMS's export only: a student's own zip is late work,
collected with ``grade late.zip --from-student ID``.
"""

from __future__ import annotations

import os
from pathlib import Path

from nbgrader.plugins import FileNameCollectorPlugin
from traitlets import Bool

from .owners import bad_id


def lms_parts(relative: Path, archive_dir: Path, zip_ext) -> tuple:
    """The path parts below the LMS export's root: ``extracted/<x>/`` when ``archive/<x>.zip`` was unpacked there."""
    parts = relative.parts
    if len(parts) > 1:
        names = {p.name for p in archive_dir.iterdir()} if archive_dir.is_dir() else set()
        # nbgrader unpacks archive/<x>.zip (or <x>.tar.gz) into extracted/<x>/ (create_own_folder)
        if any(f"{parts[0]}{ext}" in names or f"{parts[0]}.tar{ext}" in names for ext in zip_ext):
            return parts[1:]
    return parts


class TopLevelNames(FileNameCollectorPlugin):
    """A student id from the LMS's own layout: a top-level ``<student>_<nb>.ipynb`` or a ``<student>/`` folder."""

    unwrap = Bool(False, help="The LMS export wraps everything in one folder: read below it (grade's --unwrap). "
                              "Pass --TopLevelNames.unwrap=True on the command line.").tag(config=True)

    def _dirs(self):
        app = self.parent
        return (Path(app._format_collect_path(app.extracted_directory)).resolve(),
                Path(app._format_collect_path(app.archive_directory)).resolve(),
                list(getattr(app.extractor_plugin_inst, "zip_ext", [".zip", ".gz"])))

    def _skip(self, relative, why: str):
        self.log.warning("Skipped %s: %s. Use `grade <export.zip>` (late work: --from-student ID), which keeps "
                         "such a file in the uploader's quarantine.", relative, why)

    def collect(self, submitted_file: str):
        _, ext = os.path.splitext(submitted_file)
        if ext not in self.valid_ext:
            return None
        extracted, archive, zip_ext = self._dirs()
        try:
            relative = Path(submitted_file).resolve().relative_to(extracted)
        except ValueError:
            return None
        below = lms_parts(relative, archive, zip_ext)
        if self.unwrap and len(below) > 1:  # the instructor said the export has one wrapper folder
            below = below[1:]
        if len(below) == 1:  # <student>_<nb>.ipynb at the top: the pattern on the name alone
            found = self._match("/" + below[0])
            return found if found and found.get("student_id") and found.get("file_id") else None
        if len(below) != 2 or bad_id(below[0]):
            self._skip(relative, "a student id is read only from the top of the LMS export "
                                 "(deeper files come from a student's own folder or archive)")
            return None
        named = self._match("/" + below[1])  # <student>/<file>: the folder says whose; a file named after another is not
        if named and named.get("student_id") not in (None, below[0]):
            self._skip(relative, f"it is in {below[0]}/ but its name points to student {named.get('student_id')}")
            return None
        return {"student_id": below[0], "file_id": named.get("file_id") if named else below[1]}
