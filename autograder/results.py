"""What grading one submission produces, and what it may use: plain data, defined once.

The class grader (:mod:`autograder.classgrader`) maps its command-line flags onto
:class:`Limits`, records :class:`SubmissionResult` in the gradebook and writes it to the CSV; the
sandbox (:mod:`autograder.sandbox`) makes them. Statuses and isolation kinds are ``Literal`` types,
so a misspelt one is a type error, not a silent branch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, get_args

# How one graded test cell ended.
PartStatus = Literal["passed", "failed", "error", "timed_out", "crashed", "limit", "missing"]
# How a whole submission ended, the first that applies: "rejected" (the file could not be read;
# every part 0), "timed_out" (a part or cell ran past a time limit), "crashed" (the worker died,
# broke its memory or CPU limit, or could not start), "needs_review" (graded, but something to look
# at), "zero" (graded, no points), "graded". ``needs_review`` is true exactly for the first four.
Status = Literal["rejected", "timed_out", "crashed", "needs_review", "zero", "graded"]
STATUSES: tuple[Status, ...] = get_args(Status)
REVIEWED: frozenset[Status] = frozenset({"rejected", "timed_out", "crashed", "needs_review"})
# How the student's code was isolated: bubblewrap, unshare, rlimits alone, or not run at all.
IsolationKind = Literal["bubblewrap", "unshare", "none", "not run"]


def limit(default: float, unit: str, what: str) -> Any:
    """A field of :class:`Limits` with the unit and meaning the command's ``--help`` shows."""
    return field(default=default, metadata={"unit": unit, "help": what})


@dataclass(frozen=True)
class Limits:
    """What one submission may use; every limit can be changed (the CLI maps flags onto them)."""

    memory_mb: int = limit(2048, "MB", "address space of the worker (RLIMIT_AS)")
    processes: int = limit(256, "processes", "processes and threads of the worker's user")
    file_size_mb: int = limit(64, "MB", "the largest file the worker may write; its disk space")
    output_bytes: int = limit(1_000_000, "bytes", "student stdout+stderr kept, the rest dropped")
    cpu_seconds: int = limit(600, "s", "CPU time of the worker (RLIMIT_CPU)")
    call_seconds: float = limit(60.0, "s", "one cell or call of a student's function")
    notebook_seconds: float = limit(180.0, "s", "the whole submission's time in student code")
    submission_mb: int = limit(100, "MB", "the notebook file; larger ones are rejected")
    notebook_cells: int = limit(5_000, "cells", "cells of the notebook; more are rejected")

    @classmethod
    def described(cls) -> list[tuple[str, type, Any, str, str]]:
        """``(name, type, default, unit, meaning)`` of every limit, for the command line."""
        kinds = {"int": int, "float": float}
        return [
            (f.name, kinds[str(f.type)], f.default, f.metadata["unit"], f.metadata["help"])
            for f in fields(cls)
        ]


DEFAULT_LIMITS = Limits()


@dataclass
class PartResult:
    """One graded test cell."""

    grade_id: str  # the test cell's grade_id, e.g. "test_count_ngrams"
    points: float  # earned
    max_points: float
    status: PartStatus
    message: str  # what the student may see: the check's message or the reason; never test code


@dataclass
class SubmissionResult:
    """The grade of one submission: plain data (picklable; JSON with :meth:`as_dict`)."""

    assignment: str
    student: str
    notebook: str  # the file name, e.g. "ngrams.ipynb"
    checksum: str  # sha256 of the submitted notebook's bytes
    parts: list[PartResult]
    status: Status
    reasons: list[str]  # why, in words
    needs_review: bool
    seconds: float  # wall-clock of the whole grading of this submission
    student_seconds: float  # wall-clock spent inside the student's code (cells + calls)
    isolation: str  # how the student's code was isolated, in words
    isolation_kind: IsolationKind = "not run"
    output: str = ""  # the start of what the student's code printed while graded

    @property
    def score(self) -> float:
        return sum(part.points for part in self.parts)

    @property
    def max_score(self) -> float:
        return sum(part.max_points for part in self.parts)

    def as_dict(self) -> dict:
        return asdict(self)


def zero_parts(
    tests: list[tuple[str, float]], status: PartStatus, message: str
) -> list[PartResult]:
    """Every test cell ``(grade_id, points)`` with 0 points, one status and one message."""
    return [PartResult(grade_id, 0.0, points, status, message) for grade_id, points in tests]


def overall_status(parts: list[PartResult], review: bool) -> Status:
    """The submission's status from its parts and whether something asks for review."""
    statuses = {part.status for part in parts}
    if "timed_out" in statuses:
        return "timed_out"
    if statuses & {"crashed", "limit"}:
        return "crashed"
    if review:
        return "needs_review"
    if sum(part.points for part in parts) == 0:
        return "zero"
    return "graded"
