"""The course's one nbgrader configuration (nbgrader==0.9.6).

Directories map onto the repository (paths relative to the repository root):

    solutions/<assignment>/            source (instructor version, with solutions and hidden tests)
    exercises/<assignment>/            release (generated, committed; students open it without nbgrader)
    autograde/submitted/<student>/<assignment>/
    autograde/autograded/<student>/<assignment>/
    autograde/feedback/<student>/<assignment>/
    autograde/gradebook.db

Plain nbgrader commands read it from this folder: ``.venv/bin/python -m parallel_budget.grading
nbgrader <args>`` runs ``nbgrader <args>`` here with the venv's tools on PATH.  The course's own
commands (``python -m parallel_budget.grading grade|feedback|export|formgrader``) read it from anywhere.
"""

import os

c = get_config()  # noqa: F821  (provided by traitlets when the file is loaded)

_here = os.path.dirname(os.path.abspath(__file__))
_root = os.path.dirname(_here)

c.CourseDirectory.course_id = "parallel-budget"
c.CourseDirectory.root = _root
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = os.path.join("autograde", "submitted")
c.CourseDirectory.autograded_directory = os.path.join("autograde", "autograded")
c.CourseDirectory.feedback_directory = os.path.join("autograde", "feedback")
c.CourseDirectory.solution_directory = os.path.join("autograde", "solution")
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(_here, "gradebook.db")

# A header notebook (name, collaborators) is prepended to every released notebook.
c.IncludeHeaderFooter.header = os.path.join(_here, "header.ipynb")

# Practice self-checks: `python -m parallel_budget.grading release` puts an unscored, read-only
# practice cell after every test cell with hidden tests (the grader's own value checks, printed,
# not scored). For a graded release without value feedback set this to False and release again;
# test cells and grading are the same either way (parallel_budget/grading/release.py).
c.PracticeCheck.enabled = True

# Per-student numbers: set this to True, then release again, and every student gets numbers of their
# own (seeded by course id, assignment, notebook, student id and question; parallel_budget/questions/variants.py).
# The notebook shows each student their numbers; the grader computes each student's expected values
# from the submission folder's student id and reports answers that fit a classmate's numbers as
# possible_copying. False (the default): everyone gets the book's numbers (autograde/README.md, 5.4).
c.Variants.enabled = False

# Chinese stubs in the released notebooks. A code solution region becomes this comment and one
# `name = ...` line per answer it assigns (`return ...` in a function body): `...` is the sentinel
# the checks report as "还没有作答" without stopping Run All in the student's notebook, and that
# scores 0 in grading (parallel_budget/grading/scoring/answer_stubs.py puts AnswerStubs in ClearSolutions' place).
from parallel_budget.grading.scoring.answer_stubs import release_preprocessors  # noqa: E402

c.GenerateAssignment.preprocessors = release_preprocessors()
c.ClearSolutions.code_stub = {"python": "# 在这里写你的答案：把每个 ... 换成你的结果（可以先写几行中间计算）"}
c.ClearSolutions.text_stub = "在这里写你的回答。"

# Grading: short cell timeout (an infinite loop costs at most this), kernel deaths
# restart the kernel instead of dropping the notebook, huge outputs are cut.
c.Execute.timeout = 30
c.Execute.startup_timeout = 60
# Kernels are forked from a warm fork server (parallel_budget/grading/sandbox/forkserver.py);
# set this to False to start every kernel from scratch, as stock nbgrader does.
c.ResilientExecute.fork_kernels = True
# Per-student wall budget: all of one student's notebooks, cells, kernel restarts and replays together
# (parallel_budget/grading/bounds.py). What has not run when it is spent scores 0, with a time_budget row.
c.ResilientExecute.student_budget = 300
# Once a notebook's last cell has finished there is nothing left to save: kill the kernel.
c.Execute.shutdown_kernel = "immediate"
c.Autograde.autograde_preprocessors = [
    "parallel_budget.grading.scoring.preprocessors.ResilientExecute",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbconvert.preprocessors.CoalesceStreamsPreprocessor",  # stdout chunking depends on timing; feedback must not
    "parallel_budget.grading.scoring.preprocessors.LimitOutputSize",  # lines and characters (replaces nbgrader's LimitOutput)
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
# nbgrader registers these preprocessors without enabling them, and a plain nbconvert
# preprocessor is off by default: without this line stream merging silently never runs.
c.CoalesceStreamsPreprocessor.enabled = True
c.LimitOutputSize.max_lines = 300
c.LimitOutputSize.max_chars = 20000

# The grade command ignores nbgrader's own export location and writes
# autograde/grades.csv; this keeps `nbgrader export` in the same place.
c.CsvExportPlugin.to = os.path.join(_here, "grades.csv")

# zip_collect: an archive holding <student_id>/<notebook>.ipynb or <student_id>_<notebook>.ipynb
# (student ids without "_" or "/").  The collector reads an id only at the top of the LMS export, never from a
# deeper folder or a student's own archive (parallel_budget.grading.intake.zipnames); grade applies the same rules.
c.FileNameCollectorPlugin.named_regexp = r".*/(?P<student_id>[^/_]+)[/_](?P<file_id>[^/_][^/]*\.ipynb)$"
c.TopLevelNames.named_regexp = c.FileNameCollectorPlugin.named_regexp
c.ZipCollectApp.collector_plugin = "parallel_budget.grading.intake.zipnames.TopLevelNames"
