"""The class report: what the class got right, and which mistakes it made (issue 45).

``python -m autograder report <assignment>`` reads the gradebook as it is now (manual grades and
late penalties included, through :func:`autograder.formgrader.read_class`, the one reader of
grades) and the message of each part of each submission, and writes, in
``autograder/reports/`` (or ``--to FOLDER``):

* ``<assignment>.html``: one offline page (no script, no link out; the figure is embedded as a PNG
  data URI): for each graded part its mean, median and share of full marks, the score distribution
  (a matplotlib figure), the mistakes the checks named across the class ("likely mistake: you left
  out the end symbol '</s>' ...: 14 of 40 submissions") and the cases most often failed; a row
  per student with their parts; the flagged submissions with their reasons;
* ``<assignment>.json``: the same data;
* ``<assignment>-parts.csv``, ``-mistakes.csv``, ``-cases.csv``, ``-students.csv``: the same
  tables, for a spreadsheet.

Where the messages come from, for either route:

* graded by ``python -m autograder grade``: the per-part results the grader records beside the
  gradebook (``autograder_results.parts``: each part's status and the check's message);
* graded by ``nbgrader autograde``: the autograded notebook's test cells, whose error output is
  the check's message (``CheckFailed: ...``).

A named mistake is read only from a check's wrong-answer message (``<name> gives a wrong answer
on case ...``), from its last lines (``likely mistake: ...``, or ``likely mistake, one of
these ...`` followed by ``  - ...`` lines: each counted); the case from its ``on case N of M
(label)``. Everything that comes from a submission (ids, reasons, messages) is hostile: it is
escaped for HTML and made inert for CSV (:mod:`autograder.inert`).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from autograder.gradebook_writer import NOT_GRADED, ClassRow

MISTAKE = "likely mistake: "
ONE_OF = "likely mistake, one of these"
WRONG = " gives a wrong answer on case "
CASE = re.compile(r"on case (\d+ of \d+(?: \(.*\))?):$")
ORDER_NOTE = " (cases run smallest first)"  # what a wrong-answer message adds after its case
TOP_CASES = 5  # the cases shown per part, most failed first
REVIEW_STATUSES = ("rejected", "timed_out", "crashed", "needs_review", NOT_GRADED)


# ------------------------------------------------------------------------ reading the messages


def named_mistakes(message: str) -> list[str]:
    """The mistakes a check's wrong-answer message names ([] for any other message)."""
    lines = message.splitlines()
    if not lines or WRONG not in lines[0]:
        return []
    for i in reversed(range(len(lines))):  # the check writes its advice last
        if lines[i].startswith(MISTAKE):
            return [lines[i][len(MISTAKE) :].strip()]
        if lines[i].startswith(ONE_OF):
            return [line[4:].strip() for line in lines[i + 1 :] if line.startswith("  - ")]
    return []


def failed_case(message: str) -> str:
    """The case a check's message says failed ("3 of 28 (an empty sentence)"), or "".

    The last line of the form ``on case ...:`` (or the first line of a wrong answer) is the
    check's: a student's exception text comes before it in a ``raised`` message."""
    lines = message.splitlines()
    if lines and WRONG in lines[0]:
        found = CASE.search(lines[0].replace(ORDER_NOTE, ""))
        return found.group(1) if found else ""
    for line in reversed(lines):
        found = CASE.fullmatch(line.strip())
        if found:
            return found.group(1)
    return ""


def notebook_messages(path: Path) -> dict[str, str]:
    """The message of each test cell of an autograded notebook (nbgrader's route): its error
    output's value, by grade_id; a cell with no error output is absent."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return {}
    out = {}
    for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
        meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell, dict) else {}
        gid = meta.get("grade_id") if isinstance(meta, dict) else None
        if not gid or not meta.get("grade"):
            continue
        for output in cell.get("outputs", []):
            if isinstance(output, dict) and output.get("output_type") == "error":
                out[str(gid)] = str(output.get("evalue", ""))
    return out


# ------------------------------------------------------------------------------ the report


@dataclass
class PartSummary:
    """One graded part across the class (the students with a submission)."""

    grade_id: str
    points: float
    graded: int  # submissions with a score for this part
    mean: float | None
    median: float | None
    full_marks: float | None  # the share of graded submissions with full marks
    distribution: dict[str, int]  # score -> submissions
    mistakes: list[tuple[str, int, list[str]]]  # (mistake, submissions, students), most first
    cases: list[tuple[str, int]]  # (case, submissions), most failed first
    ungraded: int = 0  # submissions still to grade by hand on this part


@dataclass
class ClassReport:
    """Everything the report shows; JSON as it is."""

    assignment: str
    submitted: int
    students: int
    max_score: float
    mean: float | None
    median: float | None
    parts: list[PartSummary]
    rows: list[dict[str, Any]]  # per student: student, score, max, late_penalty, parts, status
    flagged: list[dict[str, Any]]  # student, status, review, reasons
    totals: list[float] = field(default_factory=list)


def messages_of(course: Any, assignment: str, row: ClassRow, notebooks: Sequence[str]) -> dict:
    """Each part's message for a student: the grader's recorded parts, else the autograded
    notebook nbgrader wrote."""
    if row.parts:
        return {str(p.get("grade_id")): str(p.get("message") or "") for p in row.parts}
    out: dict[str, str] = {}
    if course is None:
        return out
    folder = course.folder(course.coursedir.autograded_directory, row.student, assignment)
    for name in notebooks:
        out.update(notebook_messages(folder / f"{name}.ipynb"))
    return out


def build(
    assignment: str,
    cells: dict[str, float],
    rows: Sequence[ClassRow],
    messages: dict[str, dict[str, str]],
) -> ClassReport:
    """The report of ``assignment`` from the gradebook's rows and each student's part messages
    (``{student: {grade_id: message}}``)."""
    submitted = [r for r in rows if r.submitted]
    parts = []
    for gid, points in cells.items():
        scores = [float(r.cells[gid]) for r in submitted if r.cells.get(gid) is not None]
        named: dict[str, list[str]] = {}
        cases: Counter = Counter()
        for r in submitted:
            score = r.cells.get(gid)
            if score is not None and score >= points:
                continue  # full marks: any message is not a mistake
            message = messages.get(r.student, {}).get(gid, "")
            for mistake in dict.fromkeys(named_mistakes(message)):
                named.setdefault(mistake, []).append(r.student)
            case = failed_case(message)
            if case:
                cases[case] += 1
        mistakes = sorted(((m, len(s), s) for m, s in named.items()), key=lambda t: (-t[1], t[0]))
        parts.append(
            PartSummary(
                gid,
                points,
                len(scores),
                statistics.fmean(scores) if scores else None,
                statistics.median(scores) if scores else None,
                sum(s >= points for s in scores) / len(scores) if scores else None,
                {f"{k:g}": v for k, v in sorted(Counter(scores).items())},
                mistakes,
                cases.most_common(TOP_CASES),
                ungraded=sum(1 for r in submitted if r.cells.get(gid) is None),
            )  # fmt: skip
        )
    totals = [r.score for r in submitted]
    table = [
        {
            "student": r.student, "score": r.score, "max": r.max_score,
            "late_penalty": r.late_penalty, "parts": {g: r.cells.get(g) for g in cells},
            "status": r.status, "review": r.review,
        }
        for r in rows
    ]  # fmt: skip
    flagged = [
        {"student": r.student, "status": r.status, "review": r.review, "reasons": r.reasons}
        for r in rows
        if r.flagged or r.review == "open" or r.status in REVIEW_STATUSES
    ]
    return ClassReport(
        assignment, len(submitted), len(rows), float(sum(cells.values())),
        statistics.fmean(totals) if totals else None,
        statistics.median(totals) if totals else None,
        parts, table, flagged, totals,
    )  # fmt: skip


# ------------------------------------------------------------------------------ the outputs


def figure(report: ClassReport) -> str:
    """The score distributions (the total, then each part) as a PNG data URI."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("total", report.max_score, report.totals)]
    panels += [
        (p.grade_id, p.points, [float(k) for k, n in p.distribution.items() for _ in range(n)])
        for p in report.parts
    ]
    columns = 4
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 2.4 * rows), squeeze=False)
    for ax, (name, top, scores) in zip(axes.flat, panels, strict=False):
        values = Counter(scores)
        ax.bar([f"{k:g}" for k in sorted(values)], [values[k] for k in sorted(values)])
        ax.set_title(f"{name} (of {top:g})", fontsize=9)
        ax.set_xlabel("points", fontsize=8)
        ax.set_ylabel("submissions", fontsize=8)
        ax.tick_params(labelsize=8)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=90)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode("ascii")


def _number(value: float | None, digits: int = 2) -> str:
    return "" if value is None else f"{round(value, digits):g}"


def _share(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.0f}%"


def html(report: ClassReport) -> str:
    """The report as one offline HTML page; every text from a submission escaped."""
    from autograder.inert import escaped as e

    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        # nothing is loaded from anywhere: no script at all, images only as data URIs
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "img-src data:; style-src 'unsafe-inline'\">",
        f"<title>Class report: {e(report.assignment)}</title>",
        "<style>body{font-family:sans-serif;max-width:70em;margin:1em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;"
        "padding:.2em .5em;text-align:left;vertical-align:top}td.n{text-align:right}"
        ".flag{color:#a00}</style></head><body>",
        f"<h1>Class report: {e(report.assignment)}</h1>",
        f"<p id='overview'>{report.submitted} submission(s) of {report.students} student(s); "
        f"mean {_number(report.mean)}, median {_number(report.median)} of "
        f"{report.max_score:g} points (after review and late penalties).</p>",
        f'<img id="distribution" alt="score distributions" src="{figure(report)}">',
        "<h2>Parts</h2>",
        "<table id='parts'><tr><th>part</th><th>points</th><th>graded</th><th>mean</th>"
        "<th>median</th><th>full marks</th><th>still to grade by hand</th></tr>",
    ]
    for p in report.parts:
        out.append(
            f"<tr><td>{e(p.grade_id)}</td><td class=n>{p.points:g}</td><td class=n>{p.graded}"
            f"</td><td class=n>{_number(p.mean)}</td><td class=n>{_number(p.median)}</td>"
            f"<td class=n>{_share(p.full_marks)}</td><td class=n>{p.ungraded}</td></tr>"
        )
    out.append("</table><h2>Mistakes the checks named</h2>")
    for p in report.parts:
        out.append(f"<h3>{e(p.grade_id)}</h3>")
        if p.mistakes:
            out.append("<table class='mistakes'><tr><th>likely mistake</th><th>submissions</th>"
                       "<th>students</th></tr>")  # fmt: skip
            for mistake, n, who in p.mistakes:
                out.append(
                    f"<tr><td>{e(mistake)}</td><td class=n>{n} of {report.submitted}</td>"
                    f"<td>{e(', '.join(who))}</td></tr>"
                )
            out.append("</table>")
        else:
            out.append("<p>No mistake named.</p>")
        if p.cases:
            shown = ", ".join(f"case {e(case)}: {n}" for case, n in p.cases)
            out.append(f"<p class='cases'>Cases most often failed: {shown}.</p>")
    out.append("<h2>Students</h2><table id='students'><tr><th>student</th><th>score</th>"
               "<th>late penalty</th>")  # fmt: skip
    out += [f"<th>{e(p.grade_id)}</th>" for p in report.parts]
    out.append("<th>status</th><th>review</th></tr>")
    ids = [p.grade_id for p in report.parts]
    for row in report.rows:
        parts = "".join(f"<td class=n>{_number(row['parts'][g])}</td>" for g in ids)
        out.append(
            f"<tr><td>{e(row['student'])}</td><td class=n>{_number(row['score'])} of "
            f"{row['max']:g}</td><td class=n>{_number(row['late_penalty'])}</td>{parts}"
            f"<td>{e(row['status'])}</td><td>{e(row['review'])}</td></tr>"
        )
    out.append("</table><h2>Flagged submissions</h2>")
    if report.flagged:
        out.append("<table id='flagged'><tr><th>student</th><th>status</th><th>review</th>"
                   "<th>reasons</th></tr>")  # fmt: skip
        for f in report.flagged:
            reasons = "<br>".join(e(r) for r in f["reasons"]) or "(formgrader's flag)"
            out.append(
                f"<tr class=flag><td>{e(f['student'])}</td><td>{e(f['status'])}</td>"
                f"<td>{e(f['review'])}</td><td>{reasons}</td></tr>"
            )
        out.append("</table>")
    else:
        out.append("<p>None.</p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write(report: ClassReport, folder: Path) -> list[Path]:
    """Write the HTML page, the JSON and the CSV tables of ``report`` in ``folder``."""
    from autograder.formgrader import write_rows

    folder.mkdir(parents=True, exist_ok=True)
    name = report.assignment
    paths = [folder / f"{name}.html", folder / f"{name}.json"]
    paths[0].write_text(html(report), encoding="utf-8")
    paths[1].write_text(
        json.dumps(asdict(report), indent=1, ensure_ascii=True) + "\n", encoding="utf-8"
    )
    tables = {
        "parts": (
            ["part", "points", "graded", "mean", "median", "full_marks", "still_to_grade"],
            [[p.grade_id, f"{p.points:g}", p.graded, _number(p.mean, 4), _number(p.median, 4),
              _number(p.full_marks, 4), p.ungraded] for p in report.parts],
        ),
        "mistakes": (
            ["part", "mistake", "submissions", "of", "students"],
            [[p.grade_id, m, n, report.submitted, " ".join(who)]
             for p in report.parts for m, n, who in p.mistakes],
        ),
        "cases": (
            ["part", "case", "submissions"],
            [[p.grade_id, case, n] for p in report.parts for case, n in p.cases],
        ),
        "students": (
            ["student", "score", "max", "late_penalty", *(p.grade_id for p in report.parts),
             "status", "review"],
            [[r["student"], _number(r["score"], 4), f"{r['max']:g}", _number(r["late_penalty"]),
              *(_number(r["parts"][p.grade_id], 4) for p in report.parts), r["status"],
              r["review"]] for r in report.rows],
        ),
    }  # fmt: skip
    for table, (head, rows) in tables.items():
        path = folder / f"{name}-{table}.csv"
        write_rows(path, head, [[str(c) for c in row] for row in rows])
        paths.append(path)
    return paths


def class_report(course: Any, assignment: str) -> ClassReport:
    """The report of ``assignment`` of ``course`` (gradebook, grader's results, autograded
    notebooks)."""
    from autograder import formgrader, gradebook_writer

    cells, rows = formgrader.read_class(course, assignment)
    gb = gradebook_writer.open_gradebook(course.db_url, course.course_id)
    try:
        notebooks = [nb.name for nb in gb.find_assignment(assignment).notebooks]
    finally:
        gb.close()
    messages = {r.student: messages_of(course, assignment, r, notebooks) for r in rows}
    return build(assignment, cells, rows, messages)


def main(argv: Sequence[str] | None = None) -> None:
    from autograder import postgres
    from autograder.course import CourseError, add_course_arguments, load_course

    parser = argparse.ArgumentParser(
        prog="python -m autograder report",
        description="An offline class report: scores per part and the mistakes the class made.",
    )
    add_course_arguments(parser)
    parser.add_argument("--to", type=Path, help="folder (default: <course>/reports)")
    args = parser.parse_args(argv)
    try:
        course = load_course(args.course, db_url=args.db_url)
        postgres.check_gradebook(course.db_url)
        report = class_report(course, args.assignment)
    except (CourseError, postgres.GradebookError) as error:
        parser.exit(2, f"{parser.prog}: {error}\n")
    paths = write(report, args.to or course.config_dir / "reports")
    print(
        f"{args.assignment}: {report.submitted} submission(s), mean {_number(report.mean)} of "
        f"{report.max_score:g}; {len(report.flagged)} flagged"
    )
    for path in paths:
        print(f"  {path}")
