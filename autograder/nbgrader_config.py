"""nbgrader configuration for the course (nbgrader 0.9). Run nbgrader from this folder.

The course root is the repository: assignments are authored in ``solutions/<assignment>/``
(nbgrader's *source*) and released to ``exercises/<assignment>/``. Students' submissions, the
autograded copies, the feedback and the gradebook live here, in ``autograder/``, and are never
committed (see ``.gitignore``).

``nbgrader autograde`` and ``nbgrader generate_feedback`` run with the course's preprocessors of
``course_nbgrader.py`` in place of some of nbgrader's: a pasted or deleted test cell, a slow or
stuck cell, a huge output, a warning on stderr or a misnamed notebook never stops the class or
costs a right answer its points, and the feedback shows a student the check's message. This route
trusts the students' code: it runs with the instructor's rights (see the README).
"""

import os
import sys
import warnings

import nbgrader
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearOutput,
    GetGrades,
    LimitOutput,
    OverwriteKernelspec,
    SaveAutoGrades,
)
from sqlalchemy.exc import SAWarning

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import course_nbgrader as course  # noqa: E402 (lives beside this file)
import inert  # noqa: E402 (lives beside this file)

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

c.CourseDirectory.root = os.path.dirname(here)
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "autograder/submitted"
c.CourseDirectory.autograded_directory = "autograder/autograded"
c.CourseDirectory.feedback_directory = "autograder/feedback"
# The gradebook: SQLite beside this file, or the URL in $NLPCOURSE_DB_URL (e.g. PostgreSQL, see the
# README), which the grader, nbgrader and formgrader then all use.
c.CourseDirectory.db_url = os.environ.get("NLPCOURSE_DB_URL") or "sqlite:///" + os.path.join(
    here, "gradebook.db"
)
c.CourseDirectory.course_id = "nlpcourse"
# A PostgreSQL gradebook that cannot be opened: one line naming what is wrong (the driver to
# install, the database that does not exist, the server that does not answer) from nbgrader's
# commands, which otherwise end in "Please see the above traceback for details" or 136-163 lines of
# traceback. In the Jupyter server, which loads this file again at each of formgrader's requests,
# only the driver is checked (postgres.check_for_nbgrader); formgrader's pages say the rest
# (jupyter_server_config.py).
if not c.CourseDirectory.db_url.startswith("sqlite"):
    import postgres  # lives beside this file

    try:
        postgres.check_for_nbgrader(c.CourseDirectory.db_url)
    except postgres.GradebookError as error:
        sys.exit(f"nbgrader_config.py: {error}")

# Students may leave scratch cells; only the graded cells count.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# Autograde: nbgrader's two passes, with the course's preprocessors where nbgrader's lose grades.
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    course.RemoveDuplicateIds,  # a pasted test cell no longer ends the class's run
    OverwriteKernelspec,
    course.RestoreMissingCells,  # deleted test cells are put back
    CheckCellMetadata,
]
c.Autograde.autograde_preprocessors = [
    course.TimeLimitedExecute,  # limits per cell and per notebook, output capped by bytes
    course.StderrIsNotAnError,  # warnings on stderr cost no points
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
c.RestoreMissingCells.add_missing_cells = True  # nbgrader's default is False
c.StderrIsNotAnError.enabled = True  # nbgrader's IgnorePattern is off unless enabled
c.Autograde.pre_convert_hook = course.file_name_check(c.CourseDirectory.source_directory)
# nbgrader 0.9's Gradebook.add_submission builds a submission's rows before adding them to the
# session; SQLAlchemy 2 warns about each ("Object of type <SubmittedAssignment> not in session")
# for every student, although the rows are added just after. Exactly that warning is silenced.
warnings.filterwarnings(
    "ignore", r"Object of type <Submitted\w+> not in session", SAWarning, "nbgrader"
)

# Limits. `python autograder/grading.py timing` runs each solution notebook as the autograder does.
# On 2 cores at load 5, the slowest cell (04-rnn's first test, which imports torch) took 2.7 s and
# the slowest notebook 7 s; with all six assignments at load 25, the slowest cell (05-seq2seq's
# setup, importing torch) took 10.5 s wall-clock (1.4 s of CPU) and the slowest notebook 22 s. So a
# cell may take 60 s and a notebook 180 s: over 5 times the worst seen on a very busy machine, and
# a stuck submission costs the class at most 3 minutes.
c.TimeLimitedExecute.timeout = 60
c.TimeLimitedExecute.notebook_timeout = 180
c.TimeLimitedExecute.max_cell_bytes = 200_000
c.TimeLimitedExecute.max_notebook_bytes = 2_000_000

# Feedback: the visible part of each test cell and the check's message, nothing else.
c.GenerateFeedback.preprocessors = [
    GetGrades,
    course.HideHiddenTests,
    course.StudentFeedback,
    course.OfflineMathJax,  # the page loads MathJax from beside it, not from a CDN
    course.InertContent,  # once more, after GetGrades (the exporter ran it first, issue 40)
    CSSHTMLHeaderPreprocessor,
]
c.OfflineMathJax.folder = os.path.join(c.CourseDirectory.feedback_directory, "mathjax")
# What a student wrote is shown inert on formgrader's pages and in the feedback (issue 40): every
# notebook is cut to what can be shown inert before it is rendered, and the filter nbgrader's
# templates apply to each markdown cell and comment cleans its HTML (course_nbgrader.py, inert.py).
# Formgrader builds its exporter from this configuration, so its pages get the same.
c.HTMLExporter.preprocessors = [course.InertContent]
c.HTMLExporter.filters = {"strip_files_prefix": course.inert_markdown, "clean_html": inert.html}
c.HTMLExporter.sanitize_html = True  # nbconvert's own templates then pass outputs to clean_html
# a notebook a student edited by hand (a cell id that is markup) is checked after this cleaning,
# not before it: nbconvert's own preprocessors run first and would refuse to show it at all
c.HTMLExporter.optimistic_validation = True

# the course's templates first (its MathJax macro), then nbgrader's feedback template
nbgrader_templates = os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions")
c.HTMLExporter.extra_template_basedirs = [
    os.path.join(here, "templates"),
    os.path.join(nbgrader_templates, "formgrader", "templates"),
]
