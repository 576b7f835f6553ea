"""The course's nbgrader preprocessors: an honest slip never stops the class or loses a grade.

``autograder/nbgrader_config.py`` puts these classes in the place of nbgrader's own (0.9.6) in
``nbgrader autograde`` and ``nbgrader generate_feedback``. Each one fixes something that happened
when a class was graded with nbgrader's defaults (issue 16 and issue 9 of the course):

* :class:`RemoveDuplicateIds`: a student who pasted a copy of a test cell (or duplicated a solution
  cell) left two cells with one ``grade_id``. nbgrader's ``DeduplicateIds`` keeps the last copy and
  sets the others' ``nbgrader`` metadata to ``{}``, which ``CheckCellMetadata`` then refuses as a
  too-old schema, and that error ends the whole ``autograde`` run: nobody after that student was
  graded (nbgrader issue #1083). Here the earlier copies lose the ``nbgrader`` key altogether, so
  they are plain cells, and the last copy is graded.
* :class:`RestoreMissingCells`: test cells a student deleted are put back (``add_missing_cells``
  on), after the nearest cell of the assignment that is still there, so a right answer earns its
  points. nbgrader's own version fails on a student who deleted the solution cell too.
* :class:`TimeLimitedExecute`: a time limit per cell (``timeout``) *and* per notebook
  (``notebook_timeout``); when a cell ignores the interrupt, or the kernel dies, the cells already
  run keep their outputs (and so their points) and every later cell gets an error saying it was not
  run, where nbgrader would drop the whole notebook. Output is capped by bytes while it arrives
  (``max_cell_bytes``, ``max_notebook_bytes``), not only by lines after the run.
* :class:`StderrIsNotAnError`: nbgrader gives 0 to a test cell that wrote to stderr; a correct
  function that triggers a numpy ``RuntimeWarning``, a ``warnings.warn``, a ``logging.warning`` or
  a torch ``UserWarning`` lost its points. This ``IgnorePattern`` keeps the text, as ordinary
  output, so it costs nothing.
* :class:`HideHiddenTests` and :class:`StudentFeedback` (feedback only): the feedback shows each
  failed check's message (the input, what was expected, what came back, a hint) and the frames of
  the student's own cells, without the checker's traceback, the hidden tests' code, or the
  instructor's paths. The autograded notebook keeps the full tracebacks for the instructor.
* :class:`InertContent` and :func:`inert_markdown` (formgrader's pages and the feedback, issue 40):
  what a student wrote is shown inert. nbgrader's formgrade and feedback templates render a
  markdown cell (and a grader's comment) with ``markdown2html | strip_files_prefix`` and nothing
  after it, so ``c.HTMLExporter.sanitize_html`` never reaches them; the course's configuration
  replaces that filter with one that cleans the HTML (:mod:`inert`), and this preprocessor keeps of
  the notebook only what can be shown inert (outputs, metadata, attachments, raw cells).
* :func:`file_name_check`: before a student is graded, says which notebook was expected and which
  was found, where nbgrader says only "did you forget to run generate_assignment?".

What this route trusts: the student's code runs with the instructor's rights, in the instructor's
kernel, with the test cells run after it in the same interpreter. These classes make honest slips
harmless; they do not defend against a submission that sets out to cheat or to do harm (see the
README's instructor section and issue 11 for the sandboxed grader).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from time import monotonic
from typing import Any

import inert  # lives beside this file (nbgrader_config.py puts this folder on sys.path)
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbconvert.filters.strings import strip_files_prefix
from nbconvert.preprocessors import Preprocessor
from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import (
    ClearHiddenTests,
    DeduplicateIds,
    Execute,
    IgnorePattern,
    NbGraderPreprocessor,
    OverwriteCells,
)
from traitlets import Bool, Integer, Unicode
from traitlets.log import get_logger

NOT_RUN = "GradingStopped"  # the ename of the error put on cells the grader did not run
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def error_output(ename: str, evalue: str) -> NotebookNode:
    """An ``error`` output, as a kernel would send it: nbgrader gives such a test cell 0."""
    return NotebookNode(
        output_type="error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"]
    )


class RemoveDuplicateIds(DeduplicateIds):
    """Keep the nbgrader metadata of the last cell with a given ``grade_id``; earlier copies become
    plain cells (their ``nbgrader`` key is removed, not emptied)."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        seen: set[str] = set()
        for cell in reversed(nb.cells):  # the last copy wins, as in nbgrader
            if not (utils.is_grade(cell) or utils.is_solution(cell) or utils.is_locked(cell)):
                continue
            grade_id = cell.metadata.nbgrader.get("grade_id")
            if grade_id in seen:
                self.log.warning(
                    "Cell with id '%s' exists more than once: grading the last copy; the earlier "
                    "copy runs as a plain cell.",
                    grade_id,
                )
                del cell.metadata["nbgrader"]
            else:
                seen.add(grade_id)
        return nb, resources


class RestoreMissingCells(OverwriteCells):
    """``OverwriteCells`` that puts back deleted test cells, each after the nearest cell of the
    assignment (by ``grade_id``) that comes before it in the source and is still in the
    submission, or first when there is none."""

    add_missing_cells = Bool(True, help="Put test cells a student deleted back.").tag(config=True)

    def add_missing_grade_cells(
        self, nb: NotebookNode, resources: dict
    ) -> tuple[NotebookNode, dict]:
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        order = [cell.name for cell in source_nb.source_cells]  # grade_ids in the source's order
        solutions = {cell.name for cell in source_nb.solution_cells}
        for grade_cell in source_nb.grade_cells:
            present = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
            if grade_cell.name in present:
                continue
            self.log.warning("Test cell %s was deleted: putting it back", grade_cell.name)
            source_cell = source_nb.source_cells[order.index(grade_cell.name)]
            cell = self.missing_cell_transform(
                source_cell, grade_cell.max_score, is_solution=grade_cell.name in solutions
            )
            before = order[: order.index(grade_cell.name)]
            anchors = [i for i, grade_id in enumerate(present) if grade_id in before]
            nb.cells.insert(anchors[-1] + 1 if anchors else 0, cell)
        return nb, resources

    def preprocess_cell(
        self, cell: NotebookNode, resources: dict, cell_index: int
    ) -> tuple[NotebookNode, dict]:
        """Put a test cell handed in as released back to its source quietly. The gradebook's
        checksum is the source's, taken before the hidden tests are cleared, so nbgrader would
        report "Attribute 'checksum' ... has changed!" for every untouched test cell that has
        hidden tests (nbgrader issue #1961); a test cell a student did change is still reported."""
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is not None and utils.is_locked(cell):
            try:
                source = self.gradebook.find_source_cell(
                    grade_id, self.notebook_id, self.assignment_id
                )
            except Exception:  # not in the gradebook: nbgrader's own code says so
                source = None
            if source is not None and source.locked and cell.source == released(source.source):
                cell.source = source.source
        return super().preprocess_cell(cell, resources, cell_index)


def released(source: str) -> str:
    """A test cell's source as students get it: its hidden tests cleared as nbgrader clears them."""
    cell = NotebookNode(source=source, cell_type="code", metadata={})
    try:
        ClearHiddenTests()._remove_hidden_test_region(cell)
    except RuntimeError:  # an unmatched marker: no released form to compare with
        return source
    return str(cell.source)


class TimeLimitedExecute(Execute):
    """nbgrader's ``Execute`` with a limit per cell and per notebook, output capped by bytes, and
    the points of every cell run before a cell that could not be stopped (or a dead kernel)."""

    timeout = Integer(
        60, help="Seconds a cell may run before it is interrupted (0: no limit)."
    ).tag(config=True)
    notebook_timeout = Integer(
        180, help="Seconds a whole notebook may run, kernel start included (0: no limit)."
    ).tag(config=True)
    max_cell_bytes = Integer(
        200_000, help="Bytes of output kept per cell; the rest is cut with a note."
    ).tag(config=True)
    max_notebook_bytes = Integer(
        2_000_000, help="Bytes of output kept per notebook; the rest is cut with a note."
    ).tag(config=True)
    max_error_bytes = Integer(
        20_000, help="Bytes kept of an error (errors are always kept: they decide grades)."
    ).tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: Any = None, km: Any = None) -> Any:
        limit = self.notebook_timeout
        self._deadline = monotonic() + limit if limit and limit > 0 else None
        self._stopped = ""  # why the remaining cells are not run, once a run had to stop
        self._binding = ""  # which limit the current cell runs under, for its message
        self._timed_out = False  # whether the current cell ran past its limit
        self._cell_bytes: dict[int, int] = {}
        self._notebook_bytes = 0
        self._cut: set[int] = set()
        self.shutdown_kernel = "graceful"
        return super().preprocess(nb, resources, km)

    def _get_timeout(self, cell: NotebookNode | None) -> int | None:
        cell_limit = self.timeout if self.timeout and self.timeout > 0 else None
        self._binding = f"the limit of {cell_limit} s per cell" if cell_limit else ""
        if self._deadline is None:
            return cell_limit
        left = max(1, int(self._deadline - monotonic() + 0.999))
        if cell_limit is None or left < cell_limit:
            self._binding = f"the limit of {self.notebook_timeout} s for the whole notebook"
            return left
        return cell_limit

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> Any:
        if cell.cell_type != "code" or not cell.source.strip():
            return cell, resources
        if not self._stopped and self._deadline is not None and monotonic() >= self._deadline:
            self._stopped = (
                f"not run: the notebook reached the grader's limit of {self.notebook_timeout} s "
                "for the whole notebook"
            )
        if self._stopped:
            cell.outputs = [error_output(NOT_RUN, self._stopped)]
            return cell, resources
        self._timed_out = False
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except CellTimeoutError:
            if not self._timed_out:  # the cell finished, but its last output came late: go on
                self.log.warning("Cell %d: its output kept coming after it finished", index)
                return cell, resources
            what = f"this cell ran past {self._binding} and did not stop when interrupted"
            return self._stop(cell, resources, index, what)
        except DeadKernelError:
            what = "the kernel died while this cell ran (os._exit, a crash, or out of memory)"
            return self._stop(cell, resources, index, what)

        for output in cell.outputs:
            if output.output_type == "error" and output.ename == "CellTimeoutError":
                output.evalue = f"this cell ran past {self._binding} and was interrupted"
                output.traceback = [f"CellTimeoutError: {output.evalue}"]
        return cell, resources

    async def _async_handle_timeout(self, timeout: int, cell: NotebookNode | None = None) -> Any:
        self._timed_out = True  # the cell ran past its limit (and is being interrupted)
        return await super()._async_handle_timeout(timeout, cell)

    def _stop(self, cell: NotebookNode, resources: Any, index: int, what: str) -> Any:
        """The kernel cannot go on: keep this cell's outputs with an error, skip the rest."""
        self.log.error("Cell %d: %s; the later cells are not run.", index, what)
        cell.outputs = [*cell.get("outputs", []), error_output(NOT_RUN, what)]
        self._stopped = f"not run: an earlier cell had to be stopped ({what})"
        self.shutdown_kernel = "immediate"  # a kernel that ignores interrupts is killed
        return cell, resources

    def output(
        self, outs: list, msg: dict, display_id: str | None, cell_index: int
    ) -> NotebookNode | None:
        """Take an output from the kernel and keep what fits in the byte budget."""
        count = len(outs)
        out = super().output(outs, msg, display_id, cell_index)
        kept = []
        for new in outs[count:]:
            if self._fit(new, cell_index):
                kept.append(new)
        outs[count:] = kept
        return out

    def _fit(self, out: NotebookNode, cell_index: int) -> bool:
        """Cut ``out`` to the bytes left for its cell and notebook; False to drop it. Errors and
        results are always kept (they decide grades), cut if too long."""
        used = self._cell_bytes.get(cell_index, 0)
        left = min(self.max_cell_bytes - used, self.max_notebook_bytes - self._notebook_bytes)
        left = max(0, left)
        size = len(json.dumps(out))
        if out.output_type == "error":
            if size > self.max_error_bytes:
                keep = self.max_error_bytes // 2
                out.evalue = out.evalue[:keep] + " ... (cut)"
                out.traceback = [*out.traceback[:1], "...", *out.traceback[-1:]]
                out.traceback = [line[-keep:] for line in out.traceback]
            size = min(size, self.max_error_bytes)
        elif size > left:
            note = (
                f"\n[output cut: the grader keeps {self.max_cell_bytes:,} bytes of output per cell "
                f"and {self.max_notebook_bytes:,} per notebook]\n"
            )
            if out.output_type == "stream":
                if cell_index in self._cut:
                    return False
                out.text = out.text.encode()[:left].decode(errors="ignore") + note
            else:  # execute_result or display_data: keep a cut plain-text view only
                text = str(out.get("data", {}).get("text/plain", ""))
                out.data = {"text/plain": text.encode()[:left].decode(errors="ignore") + note}
            self._cut.add(cell_index)
            size = left
        self._cell_bytes[cell_index] = used + size
        self._notebook_bytes += size
        return True


class StderrIsNotAnError(IgnorePattern):
    """``IgnorePattern`` that keeps the text: stderr of a code cell that matches ``pattern`` (by
    default anything) becomes ordinary output, so a warning shows in the feedback but never costs a
    point (nbgrader gives 0 to a test cell that wrote to stderr)."""

    pattern = Unicode(
        r"[\s\S]*", help="stderr text that must not cost points (a regular expression)"
    ).tag(config=True)
    enabled = Bool(True, help="IgnorePattern is off unless enabled").tag(config=True)

    def preprocess_cell(self, cell: NotebookNode, resources: dict, cell_index: int) -> Any:
        if self.pattern and cell.cell_type == "code":
            for output in cell.outputs:
                if (
                    output.output_type == "stream"
                    and output.name == "stderr"
                    and re.search(self.pattern, output.text)
                ):
                    output.name = "stdout"
        return cell, resources


class HideHiddenTests(ClearHiddenTests):
    """``ClearHiddenTests`` for the feedback: the test cells show only their visible part, and a
    student's cell that merely contains the marker does not stop the feedback."""

    enforce_metadata = Bool(False, help="Complain about hidden tests outside test cells").tag(
        config=True
    )

    def preprocess_cell(self, cell: NotebookNode, resources: dict, cell_index: int) -> Any:
        """Clear the hidden tests of the test cells only: hidden tests live nowhere else, and a
        student's cell that holds the marker text (without an END line, which makes nbgrader's
        remover raise) is left as the student wrote it."""
        if utils.is_grade(cell) and not utils.is_solution(cell):
            return super().preprocess_cell(cell, resources, cell_index)
        return cell, resources


# How the class grader's note to the instructor starts (autograder/gradebook_writer.py writes it
# as the automatic comment of a flagged submission, which formgrader shows): never in the feedback.
REVIEW_NOTE = "Needs review: "


class StudentFeedback(NbGraderPreprocessor):
    """Feedback a student can act on: each error shows the frames in the student's own cells and
    the message (for a failed check: input, expected, got, hint); the checker's frames, the test
    cell's own code and the instructor's paths are left out."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        root = Path.cwd().resolve()  # nbgrader runs its converters from the course root
        package = Path(__file__).resolve().parent.parent
        self._paths = sorted(
            {str(p) for p in (root, package, Path(sys.prefix), Path(sys.base_prefix))},
            key=len,
            reverse=True,
        )
        return super().preprocess(nb, resources)

    def _hide_paths(self, text: str) -> str:
        for path in self._paths:
            text = text.replace(path + os.sep, "").replace(path, "")
        return text

    def preprocess_cell(self, cell: NotebookNode, resources: dict, cell_index: int) -> Any:
        meta = cell.metadata.get("nbgrader", {})
        if str(meta.get("comment") or "").startswith(REVIEW_NOTE):  # for the instructor (#45)
            meta["comment"] = None
        if cell.cell_type != "code":
            return cell, resources
        own = f"In[{cell.get('execution_count')}]"
        for output in cell.outputs:
            if output.output_type == "stream":
                output.text = self._hide_paths(output.text)
            elif output.output_type == "error":
                frames = [
                    self._hide_paths(block)
                    for block in output.traceback
                    if ANSI.sub("", block).startswith("Cell In[") and own not in ANSI.sub("", block)
                ]
                output.traceback = [*frames, f"{output.ename}: {self._hide_paths(output.evalue)}"]
        return cell, resources


class InertContent(Preprocessor):
    """Keep of a notebook only what can be shown inert (:func:`inert.inert_notebook`: outputs of
    inert MIME types with their HTML cleaned, no JavaScript or widget state, metadata cut to
    nbgrader's keys, attachments to images, raw cells not written into the page), and escape the
    student's id and names that formgrader's page writes into its HTML as they are. Runs in
    formgrader's exporter and in ``generate_feedback`` (``c.HTMLExporter.preprocessors``), for
    notebooks autograded by either route."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        inert.inert_notebook(nb)
        for key in ("student", "first_name", "last_name"):  # formgrader's navigation bar
            if isinstance(resources.get(key), str):
                resources[key] = inert.escaped(resources[key])
        return nb, resources


def inert_markdown(html: str) -> str:
    """nbconvert's ``strip_files_prefix`` followed by :func:`inert.html`: registered under that
    name (``c.HTMLExporter.filters``), it cleans every markdown cell and comment that nbgrader's
    formgrade and feedback templates render with ``markdown2html | strip_files_prefix``."""
    return inert.html(strip_files_prefix(html))


class OfflineMathJax(NbGraderPreprocessor):
    """Feedback whose formulas render with no network, as the book's pages do: MathJax 3 is copied
    from the ``sphinx-mathjax-offline`` package (installed with the book) to ``folder`` (relative
    to the course root, where nbgrader runs its converters) once, and the page's template
    (``autograder/templates/feedback/mathjax.html.j2``) loads it from there."""

    folder = Unicode("autograder/feedback/mathjax", help="Where MathJax is copied").tag(config=True)
    # the TeX input and the SVG output in one file (no fonts to fetch), and the extension that
    # filters what formulas may do (links, styles, ids; the configuration loads it, issue 40)
    scripts = ("tex-svg-full.js", "ui/safe.js")

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        for script in self.scripts:
            target = Path(self.folder) / script
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(mathjax_source() / script, target)
        config = Path(self.folder) / "course-config.js"  # a file: the page allows no inline script
        if not config.exists() or config.read_text() != MATHJAX_CONFIG:
            config.write_text(MATHJAX_CONFIG)
        return nb, resources


# MathJax's configuration for the feedback pages. A student's formula is hostile (issue 40): the TeX
# packages that make links, styles, ids and classes (html: \href, \style, \cssId, \class), load
# code (require, autoload) or fonts (unicode) are left out, and MathJax's safe extension filters
# what is left (URLs, styles, ids). Formgrader's pages configure the same in their template
# (autograder/jupyter/nbconvert/templates/formgrade/mathjax.html.j2).
MATHJAX_CONFIG = r"""window.MathJax = {
    loader: {load: ['ui/safe']},
    tex: {
        packages: {'[-]': ['html', 'require', 'autoload', 'unicode']},
        inlineMath: [['$', '$'], ['\\(', '\\)']],
        displayMath: [['$$', '$$'], ['\\[', '\\]']],
        processEscapes: true,
        processEnvironments: true,
        tags: 'ams'
    },
    options: {ignoreHtmlClass: 'tex2jax_ignore', processHtmlClass: 'tex2jax_process'}
};
"""


def mathjax_source() -> Path:
    """The MathJax folder that ``sphinx-mathjax-offline`` ships (the book serves the same)."""
    import importlib.util

    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            "sphinx-mathjax-offline is not installed (pip install -r requirements.txt)"
        )
    return Path(spec.origin).parent / "static" / "mathjax"


class ExplainedFailure(logging.Filter):
    """Drops nbgrader's "did you forget to run generate_assignment?" and its traceback for a
    student whose misnamed notebook :func:`file_name_check` already explained, and counts the
    students nbgrader could not grade, for the run's last line."""

    def __init__(self) -> None:
        super().__init__()
        self.explained: set[str] = set()  # submission folders, as nbgrader names them
        self.failed: list[str] = []  # students nbgrader reported an error for
        self.students: list[str] = []  # every student the run started

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if "No notebooks found, did you forget" in text and self.explained:
            return False  # the traceback's record says this too
        match = re.search(r"error processing assignment '[^']*' for student '([^']*)'", text)
        if match:
            self.failed.append(match.group(1))
        if "Please see the the above traceback" in text and self.explained:
            return False
        return True

    def summary(self, assignment: str) -> str:
        graded = len(self.students) - len(set(self.failed))
        line = f"autograde {assignment}: {graded} of {len(self.students)} student(s) graded"
        if self.failed:
            failed = inert.for_terminal(", ".join(sorted(set(self.failed))))
            line += f"; not graded (see the errors above): {failed}"
        return line


def file_name_check(source_directory: str = "solutions") -> Callable[..., None]:
    """A ``pre_convert_hook`` for ``Autograde``: before a student is graded, compare the names of
    the notebooks handed in with the assignment's, and say plainly which file was expected and
    which was found (nbgrader then skips the unknown file and says only "did you forget to run
    generate_assignment?")."""

    report = ExplainedFailure()
    logger = get_logger()
    logger.addFilter(report)
    for handler in logger.handlers:
        handler.addFilter(report)

    def check(assignment: str, student: str, notebooks: list[str]) -> None:
        if not report.students:  # the run's first student: its summary is its last line
            atexit.register(lambda: print(report.summary(assignment), file=sys.stderr))
        report.students.append(student)
        if not notebooks:
            return
        folder = Path(notebooks[0]).parent  # <submitted>/<student>/<assignment>/
        student_id, assignment_id = folder.parent.name, folder.name
        source = Path(source_directory) / assignment_id  # relative to the course root (the cwd)
        expected = sorted(p.name for p in source.glob("*.ipynb"))
        found = sorted(Path(p).name for p in notebooks)
        missing = [name for name in expected if name not in found]
        extra = [name for name in found if name not in expected]
        shown = inert.for_terminal  # names a student chose reach the terminal inert (issue 40)
        if missing:
            report.explained.add(str(folder))
            logger.error(
                "Student '%s', assignment '%s': expected %s, found %s. Rename the handed-in "
                "file to %s (the submission's folder is %s) and run autograde again.",
                shown(student_id),
                assignment_id,
                " and ".join(expected),
                shown(" and ".join(found)),
                " and ".join(missing),
                shown(folder),
            )
        elif extra:
            logger.warning(
                "Student '%s', assignment '%s': not graded, not part of the assignment: %s",
                shown(student_id),
                assignment_id,
                shown(", ".join(extra)),
            )

    return check
