"""Gradebook files an LMS imports: Canvas and Moodle (issue 45 §5).

``python -m autograder lms <assignment> --to canvas`` (or ``moodle``) writes
``autograder/lms/<assignment>-<lms>.csv`` from the gradebook as it is now, through the course's one
reader of grades (:func:`autograder.formgrader.read_class`): the score is what ``nbgrader export``
gives (manual grades, late penalties and extensions included). A student with no submission gets
0, as ``nbgrader export`` gives; a student who handed in but is not graded yet gets an empty cell
(no grade is imported) and is listed by the command, and so is every submission whose review is
still open. The student's nbgrader id is the LMS's login: give students the LMS login as their
nbgrader id (``nbgrader db student import``), or edit the file.

The column layouts, as the LMSs document them:

* **Canvas**, "How do I import grades in the Gradebook?" (Canvas Instructor Guide,
  https://community.canvaslms.com/t5/Instructor-Guide/How-do-I-import-grades-in-the-Gradebook/ta-p/807):
  the columns ``Student`` ("Last, First"), ``ID`` (Canvas's own user id), ``SIS User ID``,
  ``SIS Login ID`` and ``Section``, then one column per assignment; a second row ``Points
  Possible`` as Canvas's own export writes it. A column named after an assignment that does not
  exist yet is created on import (Canvas asks). Canvas matches a row by ``ID``, else by ``SIS
  User ID`` or ``SIS Login ID``: the nbgrader id goes in ``SIS Login ID`` (``--id-column`` names
  another), the others are left empty.
* **Moodle**, "Grade import" (Moodle docs, https://docs.moodle.org/en/Grade_import, CSV file):
  one header row, a column that identifies the user, which is mapped at import ("Map from" this
  column "Map to" username, ID number or email address), and a column per grade item, mapped to
  the item. The columns are those of Moodle's own grade export (``First name``, ``Last name``,
  ``ID number``, ``Email address``) with ``Username`` (the nbgrader id) added, and the
  assignment's column; map ``Username`` to username.

Every cell passes through :func:`autograder.inert.for_csv` (no formula runs in a spreadsheet).
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autograder.gradebook_writer import NOT_GRADED, ClassRow

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_POINTS = "Points Possible"  # Canvas's second row: each assignment's points
MOODLE_COLUMNS = ["First name", "Last name", "ID number", "Email address", "Username"]
LAYOUTS = ("canvas", "moodle")


def _score(row: ClassRow) -> str:
    """The cell an LMS imports: the score; empty (no grade) when handed in but not graded."""
    return "" if row.status == NOT_GRADED else f"{row.score:g}"


def canvas(assignment: str, rows: Sequence[ClassRow], max_score: float, id_column: str) -> list:
    """Canvas's gradebook-import rows (header and ``Points Possible`` included)."""
    if id_column not in CANVAS_COLUMNS[1:4]:
        raise ValueError(f"the id goes in one of {CANVAS_COLUMNS[1:4]}, not {id_column!r}")
    out = [[*CANVAS_COLUMNS, assignment], [CANVAS_POINTS, "", "", "", "", f"{max_score:g}"]]
    for row in rows:
        name = ", ".join(n for n in (row.last_name, row.first_name) if n) or row.student
        ids = {column: (row.student if column == id_column else "") for column in CANVAS_COLUMNS}
        out.append([name, ids["ID"], ids["SIS User ID"], ids["SIS Login ID"], "", _score(row)])
    return out


def moodle(assignment: str, rows: Sequence[ClassRow]) -> list:
    """Moodle's grade-import rows (header included)."""
    out = [[*MOODLE_COLUMNS, assignment]]
    for row in rows:
        out.append([row.first_name, row.last_name, "", row.email, row.student, _score(row)])
    return out


def write(course: Any, assignment: str, kind: str, path: Path, id_column: str = "SIS Login ID"):
    """Write the ``kind`` ("canvas" or "moodle") file of ``assignment``; returns the rows that
    need the instructor's eye (not graded yet, or a review still open)."""
    from autograder.formgrader import read_class, write_rows

    cells, rows = read_class(course, assignment)
    max_score = sum(cells.values())
    table = (
        canvas(assignment, rows, max_score, id_column)
        if kind == "canvas"
        else moodle(assignment, rows)
    )
    write_rows(path, table[0], table[1:])
    return [r for r in rows if r.status == NOT_GRADED or r.review == "open"]


def read_scores(path: Path, kind: str, id_column: str = "SIS Login ID") -> dict[str, float]:
    """The scores a file of :func:`write` gives, by student id (empty cells left out): what an
    LMS would import, read back (the tests use it)."""
    with open(path, encoding="utf-8", newline="") as f:
        table = list(csv.reader(f))
    head, body = table[0], table[1:]
    if kind == "canvas":
        body = [r for r in body if r[0] != CANVAS_POINTS]
        key = head.index(id_column)
    else:
        key = head.index("Username")
    return {r[key]: float(r[-1]) for r in body if r[-1] != ""}


def main(argv: Sequence[str] | None = None) -> None:
    from autograder import postgres
    from autograder.course import CourseError, add_course_arguments, load_course
    from autograder.inert import for_terminal

    parser = argparse.ArgumentParser(
        prog="python -m autograder lms",
        description="A gradebook-import CSV for Canvas or Moodle, from nbgrader's gradebook.",
    )
    add_course_arguments(parser)
    parser.add_argument("--to", choices=LAYOUTS, required=True, help="the LMS")
    parser.add_argument("--file", type=Path, help="default: <course>/lms/<assignment>-<lms>.csv")
    parser.add_argument("--id-column", default="SIS Login ID", help="Canvas: the id's column")
    args = parser.parse_args(argv)
    try:
        course = load_course(args.course, db_url=args.db_url)
        postgres.check_gradebook(course.db_url)
        path = args.file or course.config_dir / "lms" / f"{args.assignment}-{args.to}.csv"
        look = write(course, args.assignment, args.to, path, args.id_column)
    except (CourseError, postgres.GradebookError, ValueError) as error:
        parser.exit(2, f"{parser.prog}: {error}\n")
    print(f"{args.assignment}: {args.to} file written to {path}")
    for row in look:
        why = (
            "handed in, not graded: no grade in the file"
            if row.status == NOT_GRADED
            else ("its review is still open in formgrader")
        )
        print(f"  look at {for_terminal(row.student)}: {why}")
