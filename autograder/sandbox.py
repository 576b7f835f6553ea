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
   submission (the class grader starts each one while the submission before it is graded,
   :class:`Ahead`) with resource limits it sets on itself; a cell or call past ``call_seconds`` is
   interrupted, then killed if it ignores that; the whole submission gets ``notebook_seconds``.
5. **grader** (this module): each graded test cell of ``source`` (hidden tests included) runs
   here, in a fresh namespace where every function the student defined is a
   :class:`StudentFunction` proxy, inside :func:`nlpcourse.checks.core.use_caller`. Arguments that
   are objects (a model passed to ``perplexity``, a tagger, a decoder's ``step``) stay here: the
   worker gets a handle, and calling it asks the grader to run the trusted object. A test cell
   earns its points when it raises nothing (nbgrader's rule). Test cells run in notebook order,
   each once the cells before it have run (issue 41: a part's points depend only on its own cells
   and those before it, as with nbgrader). A cell or call that breaks a limit gets 0 for its part
   (status "timed_out" or "limit"), a reason naming the limit and the "needs review" flag; where
   the worker had to be killed, a fresh one runs the cells again, without the cell that hung and
   without charging the student, for the parts still to grade.

What the sandbox leaves open is listed in the README ("What the sandboxed grader closes, and what
it leaves open"). No check runs trusted code beside the student's in the worker today (no autograd
through a student's function); one that must would load it before the student's cells and would
trust that the student's code cannot change it, which inside one interpreter nothing guarantees.

``grade_submission`` is not thread-safe (the checks' caller stack is per process): grade one
submission at a time per process.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import dataclasses
import hashlib
import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autograder import student_view
from autograder.isolation import Isolation, isolation_available
from autograder.notebook import Cell, Part, Program, Rejected, build_program, read_notebook
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
    """The state of grading one submission: the worker, the clocks, the reasons.

    The program runs as nbgrader runs a notebook: cells in order, each test cell once the cells
    before it have run (:meth:`advance`), so a part's points depend only on its own cells and
    those before it. The grader asks for each cell and call itself, decides how long it may take,
    and keeps the time on its own clock (``time.monotonic`` of this process): nothing the
    student's code does in the worker, or writes to the pipe, changes a budget.

    Two budgets of ``notebook_seconds``: the notebook's, charged with the student's cells and
    calls as they first run (as nbgrader's notebook limit counts them; starting Python and the
    course's setup cells before the first student cell are not the student's doing and are not
    charged); and the restarts', charged with the cells run again in a fresh worker after one had
    to be killed, which are not the student's either. A cell or call is interrupted by the worker
    at ``min(call_seconds, notebook time left)`` and killed :data:`GRACE` seconds later."""

    def __init__(
        self,
        program: Program,
        limits: Limits,
        view: Path,
        isolation: Isolation,
        ahead: Worker | None = None,
    ):
        self.program, self.limits, self.view, self.isolation = program, limits, view, isolation
        self.worker: Worker | None = None
        self.ahead = ahead  # a worker started ahead, that has been asked for the setup cells
        self.ran = 0  # how many cells of the program the worker under way has been through
        self.pristine = True  # no code of the student's has run in the worker under way
        self.reached = 0  # how many cells of the program have run once (again: not charged)
        self.given: dict[int, float] = {}  # the seconds each cell had the first time it ran
        self.names: dict[str, str] = {}
        self.cell_errors: dict[str, str] = {}
        self.skipped: set[int] = set()  # cells that broke a limit: left out of every restart
        self.cell_status: dict[str, tuple[PartStatus, str]] = {}  # grade_id -> (status, reason)
        self.used = 0.0  # seconds of the notebook's limit used (the grader's clock)
        self.rerun = 0.0  # seconds spent running cells again after restarts (the grader's clock)
        self.student_seconds = 0.0  # what the student's cells and calls took (= self.used)
        self.reasons: list[str] = list(program.reasons)
        self.needs_review = program.needs_review
        self.unstartable = ""  # why no worker can be started (then no part tries again)
        self.out = ""  # why the parts still to grade cannot be (the notebook's time ran out)
        self.printed = ""  # the start of what the student's code printed, every worker together

    # -- the clock

    def left(self) -> float:
        """Seconds left of the notebook's time limit."""
        return self.limits.notebook_seconds - self.used

    def limit_words(self, seconds: float) -> str:
        """The limit that gave ``seconds``: the one per cell or call, or the notebook's."""
        if seconds < self.limits.call_seconds:
            return f"the notebook's time limit ({self.limits.notebook_seconds:g} s in all)"
        return f"the time limit of {self.limits.call_seconds:g} s per cell or call"

    def charge(self, started: float, seconds: float) -> None:
        """Charge the notebook with the student's cell or call begun at ``started`` (at most the
        ``seconds`` it was given: the grace an interrupted one has to stop is the grader's)."""
        spent = min(max(time.monotonic() - started, 0.0), seconds)
        self.used += spent
        self.student_seconds += spent

    def ran_out(self, where: str) -> None:
        """The notebook's time is used up: no part from here on is graded (as with nbgrader,
        whose notebook limit leaves the cells after it unrun)."""
        if not self.out:
            self.out = (
                f"the notebook's time limit ({self.limits.notebook_seconds:g} s in all) was "
                f"reached {where}; the parts after it were not graded"
            )
            self.reasons.append(self.out)
            self.needs_review = True

    # -- the worker

    def start(self) -> bool:
        """Start a worker, or take the one started ahead (:class:`Ahead`) the first time; False
        (and ``unstartable`` says why) when none could be."""
        ahead, self.ahead = self.ahead, None
        try:
            self.worker = ahead or Worker(self.limits, self.view, self.isolation)
        except OSError as err:
            self.unstartable = f"the sandbox could not start: {err}"
        else:
            try:  # starting Python is not the student's doing: the notebook's time, not charged
                self.worker.started(time.monotonic() + self.limits.notebook_seconds + GRACE)
                self.ran, self.pristine = 0, True
                return True
            except SandboxStop as stop:
                if ahead is not None:  # it broke while it waited: a fresh one, as without it
                    self.worker_printed()
                    return self.start()
                said = self.worker_printed()[-2000:].strip()
                self.unstartable = f"the worker could not start: {stop.reason}" + (
                    f"; it printed: {said}" if said else ""
                )
        self.reasons.append(self.unstartable)
        self.needs_review = True
        return False

    def advance(self, upto: int) -> bool:
        """Run the program's cells up to (not including) cell ``upto``, starting a worker (and
        running again, uncharged, what a killed one had run) where needed. False when they could
        not all run: no worker (``unstartable``) or no time left (``out``)."""
        while self.ran < upto:
            if self.worker is None and not self.start():
                return False
            index = self.ran
            if index in self.skipped:
                self.ran += 1
                continue
            cell = self.program.cells[index]
            again = index < self.reached
            trusted = cell.kind == "setup" and self.pristine
            if trusted:  # the course's code in a worker no student code has touched
                seconds = None
            elif again:
                seconds = min(
                    self.given.get(index, self.limits.call_seconds),
                    self.limits.notebook_seconds - self.rerun,
                )
                if seconds <= 0.01:
                    self.ran_out(
                        f"while the cells were run again after a restart (at the cell "
                        f"{cell.label!r}: restarts may take the notebook's time once more)"
                    )
                    return False
            else:
                if self.left() <= 0.01:
                    self.ran_out(f"before the cell {cell.label!r} ran")
                    return False
                seconds = self.left() if cell.kind == "setup" else self.left_for_one()
                self.given[index] = seconds
            if cell.kind != "setup":
                self.pristine = False
            if not self.run(index, cell, seconds, again):
                continue  # the worker was killed: a fresh one runs the cells again
            self.ran += 1
            self.reached = max(self.reached, self.ran)
        return True

    def left_for_one(self) -> float:
        """Seconds the next cell or call of the student's may run."""
        return min(self.limits.call_seconds, self.left())

    def run(self, index: int, cell: Cell, seconds: float | None, again: bool) -> bool:
        """Run one cell in the worker; False when it broke a limit and the worker was stopped
        (the cell is then left out of every restart, and its part scores 0)."""
        assert self.worker is not None
        started = time.monotonic()
        kill = started + (seconds + GRACE if seconds else self.limits.notebook_seconds + GRACE)
        limit = self.limit_words(seconds) if seconds else "the time the course's setup may take"
        try:
            error = self.worker.run_cell(cell, seconds, kill, f"it ran past {limit}")
        except SandboxStop as stop:
            if seconds and not again:
                self.charge(started, seconds)
            elif seconds:
                self.rerun += min(time.monotonic() - started, seconds)
            self.stop()
            self.skipped.add(index)
            self.reached = max(self.reached, index + 1)
            reason = f"the cell {cell.label!r} was stopped: {stop.reason}"
            self.cell_status.setdefault(cell.grade_id, (stop.status, reason))
            self.reasons.append(reason + "; it was left out and the rest graded")
            self.needs_review = True
            return False
        if seconds and not again:
            self.charge(started, seconds)
        elif seconds:
            self.rerun += min(time.monotonic() - started, seconds)
        if error and not again and cell.label not in self.cell_errors:
            if not (isinstance(error, (tuple, list)) and len(error) == 3):
                error = ("an error", ascii(error)[:200], "")  # not what the worker sends
            type_name, message, where = (str(e)[:4000] for e in error)
            if type_name == CELL_TIMEOUT:  # interrupted: what it defined before is kept
                self.needs_review = True
                self.reasons.append(
                    f"the cell {cell.label!r} ran past {self.limit_words(seconds or 0.0)} and "
                    "was interrupted; what it defined before that was kept"
                )
            else:
                text = f"{type_name}: {message}"[:500] + (f" (at {where})" if where else "")
                self.cell_errors[cell.label] = text
        return True

    def call(self, function: StudentFunction, args: tuple) -> Any:
        if self.worker is None:
            raise SandboxStop("crashed", "no worker is running")
        if self.left() <= 0.01:
            self.ran_out(f"while {function.__name__} was checked")
            raise SandboxStop("timed_out", self.out)
        seconds = self.left_for_one()
        started = time.monotonic()
        try:
            deadline = started + seconds + GRACE
            limit = self.limit_words(seconds)
            return self.worker.call(function.__name__, args, deadline, seconds, limit)
        finally:
            self.charge(started, seconds)

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
        """Run the test cell of ``part`` against the student's functions, once the cells before
        it have run."""
        from nlpcourse.checks.core import use_caller

        for grade_id in part.solution_ids:
            if grade_id in self.cell_status:
                status, reason = self.cell_status[grade_id]
                return PartResult(part.grade_id, 0.0, part.points, status, reason)
        if not self.unstartable and not self.out and self.advance(part.cells_before):
            for grade_id in part.solution_ids:  # a cell of this part broke a limit just now
                if grade_id in self.cell_status:
                    status, reason = self.cell_status[grade_id]
                    return PartResult(part.grade_id, 0.0, part.points, status, reason)
        if self.unstartable:
            return PartResult(part.grade_id, 0.0, part.points, "crashed", self.unstartable)
        if self.out:
            return PartResult(part.grade_id, 0.0, part.points, "timed_out", self.out)
        try:
            assert self.worker is not None
            self.names = self.worker.names(time.monotonic() + GRACE)
        except SandboxStop as stop:
            self.stop()
            self.needs_review = True
            self.reasons.append(f"{part.grade_id}: {stop.reason}")
            return PartResult(part.grade_id, 0.0, part.points, stop.status, stop.reason)
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
            if not stop.alive:
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


# ------------------------------------------------------------------------------ started ahead


def setup_prefix(program: Program) -> list[Cell]:
    """The course's setup cells the program starts with, before any code of the student's and
    any test: the same for every submission of an assignment that added no cell before them."""
    first_test = min((part.cells_before for part in program.parts), default=0)
    prefix: list[Cell] = []
    for cell in program.cells[:first_test]:
        if cell.kind != "setup":
            break
        prefix.append(cell)
    return prefix


class Ahead:
    """The worker for a grader process's next submission, started while the current one is graded
    (issue 40: the grader's overhead per submission).

    Starting Python in the sandbox and running the course's setup cells (its imports) is most of
    what grading one submission costs beyond the student's own code. A worker started ahead does
    both while the grader checks the submission before it, in a sandbox of its own with a user id
    of its own, as a fresh one would (nothing of the student's runs in it before it is taken). It
    is taken only by a submission whose program starts with the same setup cells, under the same
    limits, sandbox and student view (:meth:`key_for`); any other stops it. One per process."""

    def __init__(self) -> None:
        self.key = ""
        self.worker: Worker | None = None
        atexit.register(self.discard)

    @staticmethod
    def key_for(setup: list[Cell], limits: Limits, view: Path, isolation: Isolation) -> str:
        cells = [dataclasses.astuple(cell) for cell in setup]
        return json.dumps([cells, dataclasses.asdict(limits), str(view), isolation.kind])

    def take(self, key: str) -> Worker | None:
        """The worker started ahead for ``key``, or None (one started for another, or one that
        has died while it waited, is stopped: no student pays for a worker they did not use)."""
        worker, self.worker = self.worker, None
        if worker is not None and (self.key != key or worker.process.poll() is not None):
            worker.stop()
            worker = None
        return worker

    def prepare(self, key: str, setup: list[Cell], limits: Limits, view: Path,
                isolation: Isolation) -> None:  # fmt: skip
        """Start the worker of the next submission, and ask it for the ``setup`` cells now."""
        self.discard()
        try:
            worker = Worker(limits, view, isolation)
        except OSError:
            return  # the next submission starts its own, and says why if it cannot
        try:
            for cell in setup:
                worker.ask_ahead(cell)
        except SandboxStop:
            worker.stop()
            return
        self.key, self.worker = key, worker

    def discard(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.worker = None


AHEAD = Ahead()


def _ahead(program: Program, limits: Limits, view: Path, isolation: Isolation) -> Worker | None:
    """The worker started ahead for ``program``, if any; and the next one started."""
    setup = setup_prefix(program)
    key = Ahead.key_for(setup, limits, view, isolation)
    worker = AHEAD.take(key)
    AHEAD.prepare(key, setup, limits, view, isolation)
    return worker


def start_ahead(source: dict, limits: Limits = DEFAULT_LIMITS) -> None:
    """Start the worker of this process's first submission of the assignment ``source`` now (the
    class grader, on each Dask worker as the class starts), as :func:`grade_submission` with
    ``ahead`` starts the next one: the setup cells are the source's for every submission."""
    _ahead(build_program({"cells": []}, source), limits, student_view.cached_view(),
           isolation_available())  # fmt: skip


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
    ahead: bool = False,
) -> SubmissionResult:
    """Grade one submitted notebook against the ``source`` (solutions/) notebook; never raises for
    anything the submission does (see the module docstring). A notebook not named
    ``expected_name`` is graded all the same, and flagged for review with what was expected.
    ``ahead``: take the worker started ahead for this assignment, if any, and start the one for
    the next submission (:class:`Ahead`; the class grader, which grades one submission after
    another in each process)."""
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
    view = student_view.cached_view()
    worker = _ahead(program, limits, view, isolation) if ahead else None
    grader = _Grader(program, limits, view, isolation, worker)
    parts: list[PartResult] = []
    try:
        for part in program.parts:
            parts.append(grader.grade(part))
    finally:
        grader.stop()
        if grader.ahead is not None:  # never needed: no part got as far as running a cell
            grader.ahead.stop()
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
