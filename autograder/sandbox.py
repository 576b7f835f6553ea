"""Grading one submission: the student's code in a sandboxed worker, the checks in the grader.

Issue 11 (the class-scale grader), the part that makes a grade mean what it says. The design's
"Grading" section in one function, :func:`grade_submission`, which the class grader
(:mod:`autograder.classgrader`) runs once per submission, as a Dask task. Its steps, one module
each, as nbgrader composes small preprocessors:

1. **notebook** (:mod:`autograder.notebook`): read the submission safely, and take the code by
   nbgrader metadata, not by position: the course's setup cells from ``solutions/``, the
   student's solution cells by ``grade_id`` (a renamed one found by the functions it defines).
2. **isolation** (:mod:`autograder.isolation`): the sandbox a worker starts in (bubblewrap where
   it works; the fallbacks isolate less, and every result says so in its ``isolation``).
3. **wire** (:mod:`autograder.protocol`, :mod:`autograder.wire`): length-prefixed pickles; what
   a worker sends is read with a restricted unpickler and bounded in bytes, objects, nesting and
   grader time, so no object of the student's ever exists in the grader and no message stalls it.
4. **worker** (:mod:`autograder.worker`, run as :mod:`autograder.student_worker`): one process per
   submission with resource limits it sets on itself; a cell or call past ``call_seconds`` is
   interrupted, then killed if it ignores that; the whole submission gets ``notebook_seconds``.
5. **grader** (this module): each graded test cell of ``source`` (hidden tests included) runs
   here, in a fresh namespace where every function the student defined is a
   :class:`StudentFunction` proxy, inside :func:`nlpcourse.checks.core.use_caller`. Arguments that
   are objects (a model passed to ``perplexity``, a tagger, a decoder's ``step``) stay here: the
   worker gets a handle, and calling it asks the grader to run the trusted object. A test cell
   earns its points when it raises nothing (nbgrader's rule). A cell or call that breaks a limit
   gets 0 for its part (status "timed_out" or "limit"), a reason and the "needs review" flag; the
   worker is restarted, without a cell that hung, for the parts still to grade.

What the sandbox leaves open is listed in the README ("What the sandboxed grader closes, and what
it leaves open"). No check runs trusted code beside the student's in the worker today (no autograd
through a student's function); one that must would load it before the student's cells and would
trust that the student's code cannot change it, which inside one interpreter nothing guarantees.

``grade_submission`` is not thread-safe (the checks' caller stack is per process): grade one
submission at a time per process.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import io
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from autograder import student_view
from autograder.isolation import Isolation, isolation_available
from autograder.notebook import Part, Program, Rejected, build_program, read_notebook
from autograder.protocol import CELL_TIMEOUT
from autograder.results import (
    DEFAULT_LIMITS,
    REVIEWED,
    Limits,
    PartResult,
    PartStatus,
    SubmissionResult,
    overall_status,
    zero_parts,
)
from autograder.worker import GRACE, SandboxStop, Worker

__all__ = [
    "Limits",
    "PartResult",
    "SandboxStop",
    "SubmissionResult",
    "StudentFunction",
    "grade_file",
    "grade_submission",
    "isolation_available",
]


# ------------------------------------------------------------------------------ the proxy


class StudentFunction:
    """Stands for a function of the student's in the grader: calling it goes through the check's
    caller (:func:`nlpcourse.checks.core.call_student`) to the worker."""

    def __init__(self, name: str, grader: _Grader):
        self.__name__ = self.__qualname__ = name
        self._grader = grader

    def __call__(self, *args: Any) -> Any:
        return self._grader.call(self, args)

    def __repr__(self) -> str:
        return f"<your function {self.__name__}>"


class _Grader:
    """The state of grading one submission: the worker, the clock, the reasons."""

    def __init__(self, program: Program, limits: Limits, view: Path, isolation: Isolation):
        self.program, self.limits, self.view, self.isolation = program, limits, view, isolation
        self.worker: Worker | None = None
        self.names: dict[str, str] = {}
        self.cell_errors: dict[str, str] = {}
        self.skipped: set[int] = set()  # cells that broke a limit: left out of every restart
        self.cell_status: dict[str, tuple[PartStatus, str]] = {}  # grade_id -> (status, reason)
        self.spent = 0.0  # wall-clock spent waiting for the worker (the limits count this)
        self._since: float | None = None  # when the wait under way began
        self.student_seconds = 0.0  # the cells' own time (as the worker measured it) and calls
        self.reasons: list[str] = list(program.reasons)
        self.needs_review = program.needs_review
        self.unstartable = ""  # why no worker can be started (then no part tries again)
        self.printed = ""  # the start of what the student's code printed, every worker together

    # -- the clock: a call or cell gets call_seconds, the whole submission notebook_seconds

    def used(self) -> float:
        """Seconds of the notebook's time limit used so far."""
        return self.spent + (time.monotonic() - self._since if self._since is not None else 0.0)

    def deadline(self, trusted: bool = False) -> float:
        """When the wait under way must end: ``call_seconds`` for a cell or call of the student's
        (``trusted=False``) and the grace an interrupted one has to stop, at most what is left of
        ``notebook_seconds``."""
        left = max(0.0, self.limits.notebook_seconds - self.used())
        mine = min(self.limits.call_seconds + GRACE, left)
        return time.monotonic() + (left if trusted else mine)

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        self._since = time.monotonic()
        try:
            yield
        finally:
            self.spent += time.monotonic() - self._since
            self._since = None

    def out_of_time(self) -> bool:
        return self.used() >= self.limits.notebook_seconds - 0.01

    # -- the worker

    def start(self) -> bool:
        """Start a worker and run the program; False when no worker could be made ready."""
        while not self.out_of_time():
            cells = [c for i, c in enumerate(self.program.cells) if i not in self.skipped]
            indices = [i for i in range(len(self.program.cells)) if i not in self.skipped]
            try:
                self.worker = Worker(cells, self.limits, self.view, self.isolation)
            except OSError as err:
                self.unstartable = f"the sandbox could not start: {err}"
                self.reasons.append(self.unstartable)
                self.needs_review = True
                return False
            try:
                with self.timed():
                    names, errors, seconds = self.worker.run_cells(self.deadline)
                self.student_seconds += seconds
            except SandboxStop as stop:
                self.student_seconds += self.limits.call_seconds if self.worker.cell >= 0 else 0
                cell = self.worker.cell
                said = self.worker_printed()[-2000:].strip()
                if not 0 <= cell < len(indices):
                    self.unstartable = f"the worker could not start: {stop.reason}" + (
                        f"; it printed: {said}" if said else ""
                    )
                    self.reasons.append(self.unstartable)
                    self.needs_review = True
                    return False
                bad = self.program.cells[indices[cell]]
                self.skipped.add(indices[cell])
                reason = f"the cell {bad.label!r} was stopped: {stop.reason}"
                self.cell_status.setdefault(bad.grade_id, (stop.status, reason))
                self.reasons.append(reason + "; it was left out and the rest graded")
                self.needs_review = True
                continue
            self.names = names
            for cell, error in zip(cells, errors, strict=False):
                if error and cell.label not in self.cell_errors:
                    if not (isinstance(error, tuple) and len(error) == 3):
                        error = ("an error", repr(error)[:200], "")  # not what the worker sends
                    type_name, message, where = (str(e)[:4000] for e in error)
                    if type_name == CELL_TIMEOUT:  # interrupted: what it defined before is kept
                        self.needs_review = True
                        self.reasons.append(
                            f"the cell {cell.label!r} ran past its time limit "
                            f"({self.limits.call_seconds:g} s) and was interrupted; what it "
                            "defined before that was kept and graded"
                        )
                        continue
                    text = f"{type_name}: {message}"[:500] + (f" (at {where})" if where else "")
                    self.cell_errors[cell.label] = text
            return True
        return False

    def call(self, function: StudentFunction, args: tuple) -> Any:
        if self.worker is None:
            raise SandboxStop("crashed", "no worker is running")
        if self.out_of_time():
            raise SandboxStop(
                "timed_out", f"the notebook's time limit ({self.limits.notebook_seconds:g} s)"
            )
        started = time.monotonic()
        try:
            with self.timed():
                return self.worker.call(function.__name__, args, self.deadline())
        finally:
            self.student_seconds += time.monotonic() - started

    def caller(self, function: Callable, args: tuple) -> Any:
        """The checks' caller: a proxy goes to the worker; anything else runs here as before."""
        if isinstance(function, StudentFunction):
            return function(*args)
        from nlpcourse.checks.core import call_in_process

        return call_in_process(function, args)

    def stop(self) -> None:
        self.worker_printed()

    def worker_printed(self) -> str:
        """Stop the worker (if any) and keep the start of what the student's code printed in it
        (``output_bytes`` characters per submission, as per worker); returns what it printed."""
        if self.worker is None:
            return ""
        self.worker.stop()
        said = self.worker.output.kept.decode("utf-8", "replace")
        self.printed = (self.printed + said)[: self.limits.output_bytes]
        self.worker = None
        return said

    # -- one test cell

    def grade(self, part: Part) -> PartResult:
        """Run the test cell of ``part`` against the student's functions."""
        from nlpcourse.checks.core import use_caller

        for grade_id in part.solution_ids:
            if grade_id in self.cell_status:
                status, reason = self.cell_status[grade_id]
                return PartResult(part.grade_id, 0.0, part.points, status, reason)
        if self.unstartable:
            return PartResult(part.grade_id, 0.0, part.points, "crashed", self.unstartable)
        if self.worker is None and not self.start():
            if self.unstartable:
                return PartResult(part.grade_id, 0.0, part.points, "crashed", self.unstartable)
            reason = f"the notebook's time limit ({self.limits.notebook_seconds:g} s) was reached"
            return PartResult(part.grade_id, 0.0, part.points, "timed_out", reason)
        namespace: dict[str, Any] = {"__name__": "__grader__", "__builtins__": builtins}
        for name, kind in self.names.items():
            if kind == "callable" and isinstance(name, str) and name.isidentifier():
                namespace[name] = StudentFunction(name, self)
        printed = io.StringIO()
        try:
            code = compile(part.test_source, f"<test {part.grade_id}>", "exec")
            with (
                use_caller(self.caller),
                contextlib.redirect_stdout(printed),
                contextlib.redirect_stderr(printed),
            ):
                exec(code, namespace)
        except SandboxStop as stop:
            self.stop()  # a fresh worker for the parts still to grade
            self.needs_review = True
            self.reasons.append(f"{part.grade_id}: {stop.reason}")
            return PartResult(part.grade_id, 0.0, part.points, stop.status, stop.reason)
        except NameError as err:
            return PartResult(part.grade_id, 0.0, part.points, "missing", self._missing(part, err))
        except AssertionError as err:  # CheckFailed
            return PartResult(part.grade_id, 0.0, part.points, "failed", str(err))
        except Exception as err:
            return PartResult(
                part.grade_id, 0.0, part.points, "error", f"{type(err).__name__}: {err}"
            )
        return PartResult(part.grade_id, part.points, part.points, "passed", "")

    def _missing(self, part: Part, err: NameError) -> str:
        name = getattr(err, "name", None) or str(err)
        kind = self.names.get(name)
        if kind is not None:
            return f"{name} is a {kind}, not a function"
        cells = [self.cell_errors[g] for g in part.solution_ids if g in self.cell_errors]
        if cells:
            return f"{name} is not defined: its cell raised {cells[0]}"
        return (
            f"{name} is not defined: no solution cell of the notebook defines it (the cell "
            f"with nbgrader grade_id {part.solution_ids[0] if part.solution_ids else name!r} "
            "must hold it)"
        )


# ------------------------------------------------------------------------------ grading


def grade_submission(
    notebook_bytes: bytes,
    notebook_name: str,
    source: dict,
    *,
    assignment: str,
    student: str,
    limits: Limits = DEFAULT_LIMITS,
    expected_name: str | None = None,
) -> SubmissionResult:
    """Grade one submitted notebook against the ``source`` (solutions/) notebook; never raises for
    anything the submission does (see the module docstring). A notebook not named
    ``expected_name`` is graded all the same, and flagged for review with what was expected."""
    started = time.monotonic()
    checksum = hashlib.sha256(notebook_bytes).hexdigest()
    isolation = isolation_available()
    named: list[str] = []
    if expected_name is not None and notebook_name != expected_name:
        named.append(f"expected the notebook {expected_name}, found {notebook_name}: graded as it")

    try:
        submission = read_notebook(notebook_bytes, limits)
    except Rejected as err:
        tests = [(p.grade_id, p.points) for p in build_program({"cells": []}, source).parts]
        return SubmissionResult(
            assignment, student, notebook_name, checksum, zero_parts(tests, "missing", str(err)),
            "rejected", [*named, str(err)], True, time.monotonic() - started, 0.0,
            isolation.words, "not run",
        )  # fmt: skip
    program = build_program(submission, source)
    grader = _Grader(program, limits, student_view.cached_view(), isolation)
    parts: list[PartResult] = []
    try:
        for part in program.parts:
            parts.append(grader.grade(part))
    finally:
        grader.stop()
    reasons = [*named, *grader.reasons]
    for label, error in grader.cell_errors.items():
        reasons.append(f"the cell {label!r} raised {error}")
    status = overall_status(parts, grader.needs_review or bool(named))
    return SubmissionResult(
        assignment, student, notebook_name, checksum, parts, status, reasons,
        status in REVIEWED, time.monotonic() - started, grader.student_seconds,
        isolation.words, isolation.kind, grader.printed,
    )  # fmt: skip


def grade_file(path: str | Path, source_path: str | Path, **kwargs: Any) -> SubmissionResult:
    """:func:`grade_submission` of a notebook file against a source notebook file."""
    path, source_path = Path(path), Path(source_path)
    source = json.loads(source_path.read_text(encoding="utf-8"))
    kwargs.setdefault("assignment", source_path.parent.name)
    kwargs.setdefault("student", path.parent.name)
    kwargs.setdefault("expected_name", source_path.name)
    return grade_submission(path.read_bytes(), path.name, source, **kwargs)
