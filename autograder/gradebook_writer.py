"""Writing one graded submission into nbgrader's gradebook, in one transaction (issue 11).

The class grader (:mod:`autograder.classgrader`) grades submissions on Dask workers; only its
coordinator calls :func:`record`, once per result, so the gradebook has one writer. ``record``
writes what ``nbgrader autograde`` 0.9.6 writes for a submission (its ``Autograde.init_assignment``
and the ``SaveAutoGrades`` and ``AssignLatePenalties`` preprocessors):

* the student (created if new) and the submitted assignment with its timestamp, mirroring every
  notebook, grade cell and solution cell of the assignment, as ``Gradebook.add_submission`` does;
* each test cell's ``auto_score``, and ``needs_manual_grade`` set when the cell had a manual score
  or has no automatic one (nbgrader's rule);
* each solution cell's ``auto_comment``: "No response." when the student left it as handed out;
* the late-submission penalty of the configured ``LateSubmissionPlugin``.

nbgrader commits after each of these steps; here they are one transaction, together with a row of
the grader's own table ``autograder_results`` keyed by (assignment, student) that holds the
checksum of the graded file, the status, the reasons and the review flag. A result is therefore
recorded whole or not at all: a coordinator killed mid-run loses only the submissions in flight,
and a re-run grades again exactly those whose row is missing or whose file has changed. nbgrader
ignores the extra table (``nbgrader export``, ``generate_feedback`` and formgrader read only their
own). "Needs review" also sets nbgrader's own ``flagged`` mark on the submitted notebook, which
formgrader shows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from nbgrader.api import (
    Comment,
    Grade,
    Gradebook,
    MissingEntry,
    Student,
    SubmittedAssignment,
    SubmittedNotebook,
)
from nbgrader.preprocessors import AssignLatePenalties
from sqlalchemy import (
    Boolean,
    Column,
    Float,
    MetaData,
    String,
    Table,
    Text,
    delete,
    select,
)
from traitlets.config import Config

from autograder import lock

metadata = MetaData()
results_table = Table(
    "autograder_results",
    metadata,
    Column("assignment", String(128), primary_key=True),
    Column("student", String(128), primary_key=True),
    Column("notebook", String(1024), nullable=False),  # the file name handed in
    Column("checksum", String(64), nullable=False),  # sha256 of the graded file's bytes
    Column("status", String(32), nullable=False),
    Column("needs_review", Boolean, nullable=False),
    Column("score", Float, nullable=False),
    Column("max_score", Float, nullable=False),
    Column("reasons", Text, nullable=False),  # JSON list of strings
    Column("parts", Text, nullable=False),  # JSON list of PartResult dicts
    Column("isolation", Text, nullable=False),
    Column("seconds", Float, nullable=False),
    Column("student_seconds", Float, nullable=False),
    Column("graded_at", String(32), nullable=False),  # UTC, ISO 8601
)


@dataclass
class Recorded:
    """A row of ``autograder_results``: what the grader last recorded for a student."""

    assignment: str
    student: str
    notebook: str
    checksum: str
    status: str
    needs_review: bool
    score: float
    max_score: float
    reasons: list[str]
    parts: list[dict]
    isolation: str
    seconds: float
    student_seconds: float
    graded_at: str


@lock.one_writer_at_a_time  # the grader's table created once (issue 32)
def open_gradebook(db_url: str, course_id: str) -> Gradebook:
    """nbgrader's gradebook at ``db_url``, with the grader's table created if missing."""
    gb = Gradebook(db_url, course_id)
    metadata.create_all(bind=gb.engine)
    return gb


def recorded(gb: Gradebook, assignment: str) -> dict[str, Recorded]:
    """Every student's last recorded result for ``assignment``, by student id (none in a gradebook
    only ``nbgrader autograde`` wrote: it has no table of the grader's)."""
    from sqlalchemy import inspect

    if not inspect(gb.engine).has_table(results_table.name):
        return {}
    rows = gb.db.execute(select(results_table).where(results_table.c.assignment == assignment))
    out = {}
    for row in rows.mappings():
        values = dict(row)
        values["reasons"] = json.loads(values["reasons"])
        values["parts"] = json.loads(values["parts"])
        out[values["student"]] = Recorded(**values)
    gb.db.rollback()  # end the read transaction: SQLite would otherwise hold its lock
    return out


def _submission(gb: Gradebook, assignment: str, student: str) -> SubmittedAssignment:
    """The student's submitted assignment, created in the session (not committed) with a row for
    every notebook, grade cell and solution cell, as ``Gradebook.add_submission`` makes it."""
    try:
        return gb.find_submission(assignment, student)
    except MissingEntry:
        pass
    try:
        student_row = gb.find_student(student)
    except MissingEntry:
        student_row = Student(id=student)
        gb.db.add(student_row)
    assignment_row = gb.find_assignment(assignment)
    with gb.db.no_autoflush:  # the rows are added together, as one submission
        submission = SubmittedAssignment(assignment=assignment_row, student=student_row)
        for notebook in assignment_row.notebooks:
            nb = SubmittedNotebook(notebook=notebook, assignment=submission)
            for grade_cell in notebook.grade_cells:
                Grade(cell_id=grade_cell.id, notebook=nb)
            for solution_cell in notebook.solution_cells:
                Comment(cell_id=solution_cell.id, notebook=nb)
            for task_cell in notebook.task_cells:
                Comment(cell_id=task_cell.id, notebook=nb)
                Grade(cell_id=task_cell.id, notebook=nb)
        gb.db.add(submission)
    gb.db.flush()
    return submission


@lock.one_writer_at_a_time  # a new student created once (issue 32)
def record(
    gb: Gradebook,
    result: dict[str, Any],
    *,
    notebook_id: str,
    timestamp: str | None,
    unanswered: set[str],
    config: Config,
) -> None:
    """Write one graded submission (a ``SubmissionResult`` as a dict) in one transaction.

    ``notebook_id`` is the assignment's notebook name without ``.ipynb`` (the student's file may be
    misnamed; the grades belong to the assignment's notebook). ``timestamp`` is the submission's
    ``timestamp.txt``, if any. ``unanswered`` holds the grade_ids of solution cells the student left
    as handed out ("No response."). ``config`` supplies the late-submission plugin. Raises, with
    nothing written, if the gradebook refuses the result.
    """
    assignment, student = result["assignment"], result["student"]
    try:
        submission = _submission(gb, assignment, student)
        before = _checksum(gb, assignment, student)
        unchanged = before == result["checksum"]  # regraded, same file: the review stands (#32)
        stopped = {p["grade_id"] for p in result["parts"] if p.get("status") in STOPPED}
        if timestamp:
            submission.timestamp = timestamp_utc(timestamp)
        nb = next(n for n in submission.notebooks if n.name == notebook_id)
        points = {part["grade_id"]: float(part["points"]) for part in result["parts"]}
        answers = {cell.name for cell in nb.notebook.solution_cells}
        for grade in nb.grades:
            if grade.name in points:  # a test cell: the check's score
                grade.auto_score = points[grade.name]
            elif grade.name in unanswered:  # a graded answer left as handed out: 0, as nbgrader
                grade.auto_score = 0.0
            elif grade.name in answers:  # a graded answer: graded by hand
                grade.auto_score = None
            else:  # a test cell the result does not mention: not passed
                grade.auto_score = 0.0
            reviewed = unchanged and grade.manual_score is not None
            needs = grade.manual_score is not None or grade.auto_score is None
            grade.needs_manual_grade = not reviewed and (needs or grade.name in stopped)
        if before and not unchanged and any(g.manual_score is not None for g in nb.grades):
            result["reasons"] = [*result["reasons"], CHANGED]
        note = REVIEW_NOTE + "; ".join(result["reasons"])  # formgrader's, never the feedback's
        why = note if result["needs_review"] else None
        for comment in nb.comments:  # formgrader shows auto_comment in each comment box (#32)
            comment.auto_comment = "No response." if comment.name in unanswered else why
        nb.flagged = nb.flagged if unchanged else bool(result["needs_review"])
        gb.db.flush()
        nb.late_submission_penalty = late_penalty(config, student, nb, submission)

        gb.db.execute(
            delete(results_table).where(
                results_table.c.assignment == assignment, results_table.c.student == student
            )
        )
        gb.db.execute(
            results_table.insert().values(
                assignment=assignment,
                student=student,
                notebook=result["notebook"],
                checksum=result["checksum"],
                status=result["status"],
                needs_review=bool(result["needs_review"]),
                score=sum(float(p["points"]) for p in result["parts"]),
                max_score=float(nb.max_score),  # the assignment's, whatever the result lists
                reasons=json.dumps(list(result["reasons"])),
                parts=json.dumps(list(result["parts"])),
                isolation=str(result.get("isolation", "")),
                seconds=float(result.get("seconds", 0.0)),
                student_seconds=float(result.get("student_seconds", 0.0)),
                graded_at=datetime.now(UTC).isoformat(timespec="seconds"),
            )
        )
        gb.db.commit()
    except BaseException:
        gb.db.rollback()
        raise


# The automatic comment of a flagged submission starts so: formgrader shows it in the comment
# boxes; the course's StudentFeedback (course_nbgrader.py, which nbgrader loads as a plain module
# and so keeps its own copy, tested equal) leaves it out of the student's feedback (issue 45).
REVIEW_NOTE = "Needs review: "
# Parts stopped by a limit need a manual grade (issue 32): the student's answer may be right.
STOPPED = ("timed_out", "limit")
CHANGED = "the file changed since it was reviewed: graded anew; the manual grades kept, to review"


def _checksum(gb: Gradebook, assignment: str, student: str) -> str | None:
    """The checksum of the file last recorded for the student, if any."""
    return gb.db.execute(
        select(results_table.c.checksum).where(
            results_table.c.assignment == assignment, results_table.c.student == student
        )
    ).scalar()


def timestamp_utc(text: str) -> datetime:
    """A ``timestamp.txt`` as nbgrader reads it (naive UTC)."""
    from nbgrader.utils import parse_utc

    return parse_utc(text.strip())


def late_penalty(
    config: Config, student: str, nb: SubmittedNotebook, submission: SubmittedAssignment
) -> float | None:
    """The penalty ``AssignLatePenalties`` would assign (None when on time or no plugin says so):
    the student's due date includes their extension, as nbgrader's ``total_seconds_late`` does."""
    seconds_late = submission.total_seconds_late
    if not seconds_late or seconds_late <= 0:
        return None
    assigner = AssignLatePenalties(config=config)
    assigner.init_plugin()
    penalty = assigner.plugin_inst.late_submission_penalty(student, nb.score, seconds_late)
    if penalty is None:
        return None
    return assigner._check_late_penalty(nb, penalty)


# ------------------------------------------------------------------ the class's grades, read back


@dataclass
class ClassRow:
    """One student's grade of an assignment as the gradebook holds it now: after review (manual
    grades), late penalty and extension included. Every course output that shows a score (the
    CSVs, the class report, the LMS files, the demo's table) is made from these rows, so they
    agree with each other and with ``nbgrader export`` (issue 45)."""

    student: str
    last_name: str
    first_name: str
    email: str
    submitted: bool  # a submission is recorded in the gradebook
    timestamp: str  # when it was handed in (UTC, ISO 8601), "" when unknown
    duedate: str  # the student's due date (UTC, ISO 8601, extension included), "" when none
    extension: str  # the extension granted, in words ("2 days, 0:00:00"), "" when none
    seconds_late: float
    raw_score: float  # the sum of the cells' scores, manual scores where given
    late_penalty: float
    score: float  # what ``nbgrader export`` gives: max(0, raw_score - late_penalty)
    max_score: float
    cells: dict[str, float | None]  # each graded cell's score, by grade_id (None: ungraded)
    manual: list[str]  # cells graded by hand
    needs_manual_grade: list[str]  # cells still to grade by hand
    flagged: bool  # formgrader's flag
    status: str  # the grader's status, or what the gradebook says when the grader has none
    reasons: list[str]  # the grader's reasons (instructor-facing)
    review: str  # "open", "resolved" or "" (never asked for)
    parts: list[dict] = field(default_factory=list)  # the grader's per-part results, if any
    notebook: str = ""  # the file name handed in, as the grader recorded it
    isolation: str = ""  # how the grader isolated the student's code


NOT_SUBMITTED = "not submitted"  # no submission in the gradebook: nbgrader export gives 0
NOT_GRADED = "handed in, not graded"  # a file in submitted/ but nothing recorded: run again
NBGRADER = "graded by nbgrader"  # graded by nbgrader autograde (the plain route): no grader row


def _utc(value: Any) -> str:
    return value.isoformat(sep=" ", timespec="seconds") if value is not None else ""


def class_grades(
    gb: Gradebook, assignment: str, handed_in: Iterable[str] = (), order: Sequence[str] = ()
) -> tuple[dict[str, float], list[ClassRow]]:
    """The graded cells of ``assignment`` with their points (by grade_id: those in ``order`` first,
    in that order, e.g. the source notebook's, then the others by name; the gradebook keeps no
    order) and
    one row per student of the gradebook, sorted by id, plus one per student in ``handed_in``
    (those with a folder in ``submitted/``) who is not in it yet. A student with no submission
    scores 0, as ``nbgrader export`` gives, and their status says why."""
    try:
        assignment_row = gb.find_assignment(assignment)
    except MissingEntry:
        raise KeyError(f"no assignment {assignment!r} in the gradebook") from None
    points = {
        cell.name: float(cell.max_score)
        for notebook in assignment_row.notebooks
        for cell in notebook.grade_cells
    }
    names = [c for c in order if c in points] + sorted(set(points) - set(order))
    cells = {name: points[name] for name in names}
    results = recorded(gb, assignment)
    by_student = {s.student.id: s for s in assignment_row.submissions}
    students = {s.id: s for s in gb.students}
    handed = set(handed_in)
    rows = []
    for student_id in sorted(set(students) | handed):
        person = students.get(student_id)
        names = (
            (person.last_name or "", person.first_name or "", person.email or "")
            if person is not None
            else ("", "", "")
        )
        submission = by_student.get(student_id)
        if submission is None:
            status = NOT_GRADED if student_id in handed else NOT_SUBMITTED
            rows.append(
                ClassRow(
                    student_id,
                    *names,
                    False,
                    "",
                    _utc(assignment_row.duedate),
                    "",
                    0.0,
                    0.0,
                    0.0,
                    0.0,
                    float(assignment_row.max_score),
                    dict.fromkeys(cells),
                    [],
                    [],
                    False,
                    status,
                    [],
                    "",
                )  # fmt: skip
            )
            continue
        grades = {g.name: g for nb in submission.notebooks for g in nb.grades}
        flagged = any(nb.flagged for nb in submission.notebooks)
        to_grade = [c for c in cells if c in grades and grades[c].needs_manual_grade]
        result = results.get(student_id)
        asked = bool(result and result.needs_review) or flagged or bool(to_grade)
        penalty = float(submission.late_submission_penalty or 0.0)
        rows.append(
            ClassRow(
                student=student_id,
                last_name=names[0],
                first_name=names[1],
                email=names[2],
                submitted=True,
                timestamp=_utc(submission.timestamp),
                duedate=_utc(submission.duedate),
                extension=str(submission.extension) if submission.extension else "",
                seconds_late=float(submission.total_seconds_late or 0.0),
                raw_score=float(submission.score),
                late_penalty=penalty,
                score=max(0.0, float(submission.score) - penalty),
                max_score=float(submission.max_score),
                cells={c: (grades[c].score if c in grades else None) for c in cells},
                manual=[c for c in cells if c in grades and grades[c].manual_score is not None],
                needs_manual_grade=to_grade,
                flagged=flagged,
                status=result.status if result else NBGRADER,
                reasons=list(result.reasons) if result else [],
                review=("open" if flagged or to_grade else "resolved") if asked else "",
                parts=list(result.parts) if result else [],
                notebook=result.notebook if result else "",
                isolation=result.isolation if result else "",
            )
        )
    gb.db.rollback()  # end the read transaction: SQLite would otherwise hold its lock
    return cells, rows
