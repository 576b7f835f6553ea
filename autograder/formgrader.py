"""The grades after review in formgrader, as a CSV (issue 32).

``python -m autograder grade`` writes ``grades-<assignment>.csv`` from its own results, before any
review. After manual grades and comments in formgrader, this writes the CSV again from nbgrader's
gradebook, manual grades included (the score nbgrader's ``export`` gives), beside the grader's
status and reasons and formgrader's flag::

    .venv/bin/python -m autograder.formgrader csv 01-ngrams   # autograder/grades-01-ngrams.csv

Columns: student, score, max, each graded cell's score (the manual score where one was given),
manual (the cells graded by hand), needs_manual_grade (the cells still to grade by hand),
flagged, status and reasons (the grader's).
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def write_csv(db_url: str, course_id: str, assignment: str, path: Path) -> int:
    """Write the CSV of ``assignment`` from the gradebook at ``db_url``; returns its rows."""
    from nbgrader.api import MissingEntry

    from autograder import gradebook_writer
    from autograder.classgrader import CourseError

    gb = gradebook_writer.open_gradebook(db_url, course_id)
    try:
        recorded = gradebook_writer.recorded(gb, assignment)
        rows, cells = [], None
        try:
            submissions = gb.find_assignment(assignment).submissions
        except MissingEntry:
            raise CourseError(f"no assignment {assignment!r} in the gradebook {db_url}") from None
        for submission in sorted(submissions, key=_student):
            for nb in submission.notebooks:
                grades = sorted(nb.grades, key=lambda g: g.name)
                if cells is None:
                    cells = [g.name for g in grades]
                result = recorded.get(submission.student.id)
                rows.append(
                    [
                        submission.student.id,
                        f"{nb.score:g}",
                        f"{nb.max_score:g}",
                        *("" if g.score is None else f"{g.score:g}" for g in grades),
                        " ".join(g.name for g in grades if g.manual_score is not None),
                        " ".join(g.name for g in grades if g.needs_manual_grade),
                        nb.flagged,
                        result.status if result else "",
                        "; ".join(result.reasons) if result else "",
                    ]
                )
    finally:
        gb.close()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        head = ["student", "score", "max", *(cells or []), "manual", "needs_manual_grade"]
        out.writerow([*head, "flagged", "status", "reasons"])
        out.writerows(rows)
    return len(rows)


def _student(submission: Any) -> str:
    return str(submission.student.id)


def main(argv: Sequence[str] | None = None) -> None:
    from autograder import postgres
    from autograder.classgrader import CourseError, add_course_arguments, load_course

    parser = argparse.ArgumentParser(
        prog="python -m autograder.formgrader",
        description="The grades after review in formgrader, from nbgrader's gradebook.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("csv", help="one row per student, manual grades included")
    add_course_arguments(p)
    p.add_argument("--to", type=Path, help="CSV path (default: <course>/grades-<assignment>.csv)")
    args = parser.parse_args(argv)
    try:
        course = load_course(args.course, db_url=args.db_url)
        postgres.check_gradebook(course.db_url)
        path = args.to or course.config_dir / f"grades-{args.assignment}.csv"
        n = write_csv(course.db_url, course.course_id, args.assignment, path)
    except (CourseError, postgres.GradebookError) as error:
        parser.exit(2, f"{parser.prog}: {error}\n")
    print(f"{args.assignment}: {n} student(s) written to {path}")


if __name__ == "__main__":
    main()
