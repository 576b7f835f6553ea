"""The class's grades from nbgrader's gradebook, after review: the one CSV (issues 32 and 45).

Every score the course shows is read from the gradebook by
:func:`autograder.gradebook_writer.class_grades`: manual grades from formgrader, the late penalty
(the due date of ``nbgrader db assignment add --duedate``, the student's extension and nbgrader's
``LateSubmissionPlugin``) and the grader's status and reasons. ``python -m autograder grade``
writes this CSV at the end of each run, and so does::

    .venv/bin/python -m autograder.formgrader csv 01-ngrams   # autograder/grades-01-ngrams.csv

so a later grader run never undoes a review. Columns: student, score (as ``nbgrader export``
gives it: the raw score less the late penalty, never below 0), max, raw_score, late_penalty, each
graded cell's score (the manual score where one was given), manual (the cells graded by hand),
needs_manual_grade (the cells still to grade by hand), flagged, review ("open", "resolved" or
empty), status (the grader's, or "not submitted", "handed in, not graded", "graded by nbgrader"),
reasons, isolation, timestamp, duedate (extension included), extension. Every cell passes through
:func:`autograder.inert.for_csv`: a student's text can neither break the file nor run as a
spreadsheet formula.

Extensions: nbgrader stores one per student and assignment but has no command for it; this gives
one and recomputes the student's late penalty at once::

    .venv/bin/python -m autograder.formgrader extend 01-ngrams ana --days 2
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autograder import gradebook_writer
from autograder.gradebook_writer import ClassRow


def header(cells: Sequence[str]) -> list[str]:
    """The CSV's columns (see the module docstring)."""
    return [
        "student", "score", "max", "raw_score", "late_penalty", *cells, "manual",
        "needs_manual_grade", "flagged", "review", "status", "reasons", "isolation", "timestamp",
        "duedate", "extension",
    ]  # fmt: skip


def number(value: float | None) -> str:
    """A score as the CSVs write it: ``8``, ``7.5``; empty when there is none."""
    return "" if value is None else f"{value:g}"


def csv_row(row: ClassRow, cells: Sequence[str]) -> list[str]:
    """One student's line (before :func:`for_csv`)."""
    return [
        row.student, number(row.score), number(row.max_score), number(row.raw_score),
        number(row.late_penalty), *(number(row.cells.get(c)) for c in cells), " ".join(row.manual),
        " ".join(row.needs_manual_grade), str(row.flagged), row.review, row.status,
        "; ".join(row.reasons), row.isolation, row.timestamp, row.duedate, row.extension,
    ]  # fmt: skip


def write_rows(path: Path, head: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Write a CSV (UTF-8, every cell made inert), replacing ``path`` only once it is whole."""
    from autograder.inert import for_csv

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.part")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow([for_csv(h) for h in head])
        out.writerows([for_csv(str(cell)) for cell in row] for row in rows)
    tmp.replace(path)


def read_class(course: Any, assignment: str) -> tuple[dict[str, float], list[ClassRow]]:
    """The graded cells of ``assignment`` (grade_id: points, in the source notebook's order) and
    the class's rows from the course's gradebook: its students, and those with a folder in
    ``submitted/`` not yet in the gradebook."""
    from autograder.course import CourseError

    gb = gradebook_writer.open_gradebook(course.db_url, course.course_id)
    try:
        return gradebook_writer.class_grades(
            gb, assignment, handed_in(course, assignment), source_order(course, assignment)
        )
    except KeyError as error:
        raise CourseError(f"{error.args[0]}: {course.db_url}") from None
    finally:
        gb.close()


def handed_in(course: Any, assignment: str) -> list[str]:
    """The students with a folder ``submitted/<student>/<assignment>``."""
    top = course.folder(course.coursedir.submitted_directory, ".", ".")
    if not top.is_dir():
        return []
    return sorted(p.name for p in top.iterdir() if (p / assignment).is_dir())


def source_order(course: Any, assignment: str) -> list[str]:
    """The grade_ids of the assignment's source notebook, in order ([] when it is not there)."""
    import json

    from autograder.course import grade_ids

    folder = course.folder(course.coursedir.source_directory, ".", assignment)
    order: list[str] = []
    for path in sorted(folder.glob("*.ipynb")) if folder.is_dir() else []:
        order += [gid for gid, _, _ in grade_ids(json.loads(path.read_text(encoding="utf-8")))]
    return order


def write_csv(course: Any, assignment: str, path: Path) -> int:
    """Write the class CSV of ``assignment`` from the gradebook; returns its rows."""
    cells, rows = read_class(course, assignment)
    write_rows(path, header(list(cells)), [csv_row(row, list(cells)) for row in rows])
    return len(rows)


def extend(course: Any, assignment: str, student: str, **duration: float) -> ClassRow:
    """Grant ``student`` an extension of ``duration`` (``days=``, ``hours=``, ``minutes=``;
    none: remove it) and recompute their late penalty as ``nbgrader autograde`` computes it.
    Returns the student's row after."""
    from nbgrader.api import MissingEntry

    from autograder.course import CourseError

    gb = gradebook_writer.open_gradebook(course.db_url, course.course_id)
    try:
        try:
            gb.grant_extension(assignment, student, **duration)
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            raise CourseError(
                f"no submission of {assignment!r} by {student!r} in the gradebook: grade it first"
            ) from None
        for nb in submission.notebooks:
            nb.late_submission_penalty = gradebook_writer.late_penalty(
                course.config, student, nb, submission
            )
        gb.db.commit()
        _, rows = gradebook_writer.class_grades(gb, assignment)
    finally:
        gb.close()
    return next(r for r in rows if r.student == student)


def main(argv: Sequence[str] | None = None) -> None:
    from autograder import postgres
    from autograder.course import CourseError, add_course_arguments, load_course

    parser = argparse.ArgumentParser(
        prog="python -m autograder.formgrader",
        description="The class's grades after review, from nbgrader's gradebook.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("csv", help="one row per student, manual grades and late penalties included")
    add_course_arguments(p)
    p.add_argument("--to", type=Path, help="CSV path (default: <course>/grades-<assignment>.csv)")
    p = sub.add_parser("extend", help="give a student more time; their late penalty recomputed")
    add_course_arguments(p)
    p.add_argument("student")
    for unit in ("days", "hours", "minutes"):
        p.add_argument(f"--{unit}", type=float, default=0.0)
    args = parser.parse_args(argv)
    try:
        course = load_course(args.course, db_url=args.db_url)
        postgres.check_gradebook(course.db_url)
        if args.command == "extend":
            row = extend(
                course, args.assignment, args.student,
                days=args.days, hours=args.hours, minutes=args.minutes,
            )  # fmt: skip
            print(
                f"{args.assignment}: {row.student} due {row.duedate or '(no due date)'}, "
                f"{row.seconds_late / 3600:.1f} h late, score {number(row.score)} of "
                f"{number(row.max_score)} (late penalty {number(row.late_penalty)})"
            )
            return
        path = args.to or course.config_dir / f"grades-{args.assignment}.csv"
        n = write_csv(course, args.assignment, path)
    except (CourseError, postgres.GradebookError) as error:
        parser.exit(2, f"{parser.prog}: {error}\n")
    print(f"{args.assignment}: {n} student(s) written to {path}")


if __name__ == "__main__":
    main()
