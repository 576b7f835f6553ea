"""What an instructor and a student see of the grader, tested without a cluster (issue 28).

Oracles: nbgrader's own hidden-test remover (which raises on a lone marker) beside the course's;
the fields of :class:`autograder.results.Limits` (their defaults and units) against the command's
``--help``; results written by hand, whose counts a reader adds up, against the summary.
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.preprocessors import ClearHiddenTests

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "autograder"))
sys.path.insert(0, str(REPO / "tests"))
import course_nbgrader as course  # noqa: E402
import services  # noqa: E402

from autograder import __main__ as commands  # noqa: E402 (python -m autograder)
from autograder import classgrader  # noqa: E402
from autograder.results import STATUSES, Limits  # noqa: E402

ASSIGNMENT = "01-ngrams"
STRAY = "def mle_prob(counts, context, word):\n    # BEGIN HIDDEN TESTS? what?\n    return 0\n"
TEST = "check_mle_prob(mle_prob)\n### BEGIN HIDDEN TESTS\nsecret_case()\n### END HIDDEN TESTS\n"


def feedback_notebook() -> nbformat.NotebookNode:
    solution = nbformat.v4.new_code_cell(STRAY)
    solution.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "mle_prob",
                                     "locked": False, "schema_version": 3}  # fmt: skip
    test = nbformat.v4.new_code_cell(TEST)
    test.metadata["nbgrader"] = {"solution": False, "grade": True, "grade_id": "test_mle_prob",
                                 "locked": True, "points": 2, "schema_version": 3}  # fmt: skip
    return nbformat.v4.new_notebook(cells=[solution, test])


def test_a_stray_hidden_tests_marker_in_student_code_keeps_the_feedback():
    with pytest.raises(RuntimeError, match="No end hidden tests"):  # nbgrader's, as the oracle
        ClearHiddenTests(enforce_metadata=False).preprocess(feedback_notebook(), {})
    nb, _ = course.HideHiddenTests().preprocess(feedback_notebook(), {})
    assert nb.cells[0].source == STRAY  # the student's cell as written
    assert "secret_case" not in nb.cells[1].source and "check_mle_prob" in nb.cells[1].source


def test_released_matches_what_nbgrader_hands_out():
    cell = nbformat.v4.new_code_cell(TEST)
    ClearHiddenTests()._remove_hidden_test_region(cell)
    assert course.released(TEST) == cell.source


def test_the_limit_flags_say_their_defaults_and_units():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        commands.main(["grade", "--help"])
    text = " ".join(out.getvalue().split())
    for name, _, default, unit, _ in Limits.described():
        assert getattr(Limits(), name) == default
        assert f"--{name.replace('_', '-')}" in text
        assert f"(default: {default:,} {unit})" in text, (name, text)


def test_the_help_lists_every_command_it_runs():
    """Issue 45: ``python -m autograder --help`` listed ``grade`` only, while ``report`` and
    ``lms`` ran all the same. Every command of the dispatch table (``COMMANDS``) is listed by the
    command an instructor types, with its line, and no other; each runs: ``python -m autograder
    <command> --help`` shows that command's own usage."""
    shown = subprocess.run(
        [sys.executable, "-m", "autograder", "--help"], cwd=REPO, env=services.environment(),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    listed = re.findall(r"^    (\S+)\s+(.*)$", shown.stdout, re.M)  # argparse's list of commands
    assert [name for name, _ in listed] == list(commands.COMMANDS), shown.stdout
    text = " ".join(shown.stdout.split())
    for name, (_, what) in commands.COMMANDS.items():
        assert f"{name} {what}" in text, (name, shown.stdout)
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stopped:
            commands.main([name, "--help"])
        assert stopped.value.code == 0
        assert " ".join(out.getvalue().split()).startswith(f"usage: python -m autograder {name} ")


def result(status: str, review: bool, reasons: list[str]) -> dict:
    return {"status": status, "needs_review": review, "reasons": reasons, "parts": []}


def test_the_summary_counts_add_up():
    summary = classgrader.Summary("01-ngrams", seconds=10.0)
    summary.results = {
        "ana": result("graded", False, []),
        "ben": result("needs_review", True, ["expected ngrams.ipynb, found x.ipynb"]),
        "cal": result("rejected", True, ["the notebook file is empty"]),
        "dan": result("timed_out", True, ["the cell 'mle_prob' was stopped"]),
        "eve": result("zero", False, ["no part passed"]),
    }
    summary.review = {  # open in the gradebook (read there by grade_assignment)
        s: (r["status"], r["reasons"][0]) for s, r in summary.results.items() if r["needs_review"]
    }
    summary.outputs = {"CSV": Path("/tmp/grades.csv")}
    lines = summary.text().splitlines()
    counts = {line.split()[0]: int(line.split()[-1]) for line in lines[1 : 1 + len(STATUSES)]}
    assert sum(counts.values()) == 5 and counts["rejected"] == counts["timed"] == 1
    assert "  for review       3 (why:)" in lines
    for student in ("ben", "cal", "dan"):
        assert any(line.strip().startswith(f"{student} (") for line in lines), lines
    assert lines[-1] == "CSV:       /tmp/grades.csv"


@pytest.mark.slow  # grades three times (in-process Dask)
def test_the_summary_lists_the_reviews_open_in_the_gradebook(tmp_path):
    """Issue 45: the run's summary listed "for review" from this run's results: after the
    instructor resolved a review in formgrader (unflagged the submission), a regrade listed it
    open again, and a run that graded nobody listed none of the reviews still open. It lists what
    the gradebook has open, as formgrader shows it: two misnamed notebooks are flagged, one is
    unflagged as formgrader's flag button does; then a regrade and a run that grades nobody."""
    from nbgrader.api import Gradebook

    course_dir = services.make_course(tmp_path, ASSIGNMENT)
    for student in ("ana", "ben", "cal"):
        services.hand_in(tmp_path, ASSIGNMENT, {student: services.mistaken(ASSIGNMENT, [])})
    for student in ("ben", "cal"):
        folder = tmp_path / "autograder" / "submitted" / student / ASSIGNMENT
        (folder / "ngrams.ipynb").rename(folder / "ngrams-Copy1.ipynb")
    graded = classgrader.load_course(course_dir)

    def run(regrade: bool) -> list[str]:
        """The students the summary lists for review, and checks the count beside them."""
        summary = services.grade_in_process(graded, ASSIGNMENT, regrade=regrade, feedback=False)
        lines = summary.text().splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("  for review"))
        count = int(lines[start].split()[2])
        listed = [line.split()[0] for line in lines[start + 1 : start + 1 + count]]
        assert all("expected ngrams.ipynb" in line for line in lines[start + 1 : start + 1 + count])
        return listed

    assert run(regrade=False) == ["ben", "cal"]
    with Gradebook(graded.db_url, "nlpcourse") as gb:  # formgrader's flag button, on ben's
        nb = gb.find_submission_notebook("ngrams", ASSIGNMENT, "ben")
        nb.flagged = not nb.flagged
        gb.db.commit()
    assert run(regrade=True) == ["cal"]  # the same files graded again: ben's review stays resolved
    assert run(regrade=False) == ["cal"]  # nobody graded: cal's review is still open


def test_a_course_that_cannot_be_graded_is_a_message_not_a_traceback(tmp_path, capsys):
    # issue 31: library functions raise CourseError; main turns it into the message and status 2
    with pytest.raises(classgrader.CourseError, match="no nbgrader_config.py"):
        classgrader.load_course(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        commands.main(["grade", "01-ngrams", "--course", str(tmp_path)])
    assert stopped.value.code == 2
    said = capsys.readouterr().err
    assert "no nbgrader_config.py" in said and "Traceback" not in said


# ---------------------------------------------------------- one writer of grades (issue 45 §1)

DUE = "2026-11-20 12:00:00"


def nbgrader_in(course: Path, *args: str) -> subprocess.CompletedProcess:
    """An nbgrader command run from the course folder, as the README runs it."""
    run = subprocess.run(
        [str(Path(sys.executable).parent / "nbgrader"), *args], cwd=course,
        env=services.environment(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, (args, run.stdout, run.stderr)
    return run


def read_csv(path: Path, key: str = "student") -> dict[str, dict]:
    with open(path, encoding="utf-8") as f:
        return {row[key]: row for row in csv.DictReader(f)}


@pytest.mark.slow  # grades a class (in-process Dask), runs nbgrader and the course's commands
def test_late_work_an_extension_and_a_manual_grade_agree_in_every_output(tmp_path):
    """A due date with nbgrader's "zero" late penalty, a late student, a late student with an
    extension, a manual grade, a student with no submission; then a grader run that grades nobody.
    The expected scores are worked out here from the rules (nbgrader's: late scores 0, the
    extension moves the due date, a manual score replaces the automatic one, no submission is 0),
    and every output must give them: the CSV of the grader's run, formgrader's CSV, nbgrader's
    export, the class report and the LMS files. Before issue 45 the grader's CSV gave the late
    student 12 and put the manual grade back to the automatic score on the next run."""
    from nbgrader.api import Gradebook

    from autograder import lms, report

    course_dir = services.make_course(tmp_path, ASSIGNMENT)
    with open(course_dir / "nbgrader_config.py", "a") as f:
        f.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    nbgrader_in(course_dir, "db", "assignment", "add", ASSIGNMENT, f"--duedate={DUE} UTC")
    nbgrader_in(course_dir, "db", "student", "add", "zoe", "--last-name=Absent")
    full, slip = services.mistaken(ASSIGNMENT, []), services.mistaken(ASSIGNMENT, ["no_eos"])
    services.hand_in(tmp_path, ASSIGNMENT, {"ontime": full, "late": full, "extended": full})
    services.hand_in(tmp_path, ASSIGNMENT, {"manual": slip})
    stamps = {"ontime": "2026-11-19 09:00:00", "late": "2026-11-21 09:00:00",
              "extended": "2026-11-21 09:00:00", "manual": "2026-11-20 11:00:00"}  # fmt: skip
    for student, when in stamps.items():
        folder = tmp_path / "autograder" / "submitted" / student / ASSIGNMENT
        (folder / "timestamp.txt").write_text(services.stamp(when))
    course = classgrader.load_course(course_dir)
    grades_csv = course_dir / f"grades-{ASSIGNMENT}.csv"

    def grade() -> classgrader.Summary:
        return services.grade_in_process(course, ASSIGNMENT, feedback=False, csv_path=grades_csv)

    assert len(grade().results) == 4
    full_marks = sum(report_points().values())
    assert read_csv(grades_csv)["late"]["score"] == "0"  # nbgrader's zero penalty, at once

    # the review: an extension of two days for one late student, a manual grade for another
    extended = subprocess.run(
        [sys.executable, "-m", "autograder.formgrader", "extend", ASSIGNMENT, "extended",
         "--days", "2", "--course", str(course_dir)],
        cwd=services.REPO, env=services.environment(), capture_output=True, text=True,
    )  # fmt: skip
    assert extended.returncode == 0, extended.stdout + extended.stderr
    with Gradebook(course.db_url, "nlpcourse") as gb:  # as formgrader saves a score
        cell = gb.find_grade("test_count_ngrams", "ngrams", ASSIGNMENT, "manual")
        cell.manual_score = 1.5
        cell.needs_manual_grade = False
        gb.db.commit()
    assert grade().results == {}  # a later run grades nobody ...
    expected = {"ontime": full_marks, "late": 0.0, "extended": full_marks,
                "manual": full_marks - 2 + 1.5, "zoe": 0.0}  # fmt: skip

    # ... and every output gives the gradebook's scores
    ours = read_csv(grades_csv)  # ... and its CSV, rewritten from the gradebook, keeps the review
    assert {s: float(r["score"]) for s, r in ours.items()} == expected
    assert ours["manual"]["manual"] == "test_count_ngrams"
    assert float(ours["late"]["late_penalty"]) == full_marks and ours["late"]["raw_score"] == "12"
    assert ours["extended"]["late_penalty"] == "0" and ours["extended"]["extension"]
    assert ours["zoe"]["status"] == "not submitted"
    after = tmp_path / "after.csv"
    subprocess.run(
        [sys.executable, "-m", "autograder.formgrader", "csv", ASSIGNMENT, "--course",
         str(course_dir), "--to", str(after)],
        cwd=services.REPO, env=services.environment(), check=True, capture_output=True,
    )  # fmt: skip
    assert read_csv(after) == ours
    nbgrader_in(course_dir, "export", "--to", str(tmp_path / "export.csv"))
    exported = read_csv(tmp_path / "export.csv", "student_id")
    assert {s: float(r["score"]) for s, r in exported.items()} == expected
    made = report.class_report(course, ASSIGNMENT)
    assert {r["student"]: r["score"] for r in made.rows} == expected
    for kind in lms.LAYOUTS:
        path = tmp_path / f"{kind}.csv"
        lms.write(course, ASSIGNMENT, kind, path)
        got = lms.read_scores(path, kind)
        assert got == {s: v for s, v in expected.items()}, kind


def report_points() -> dict[str, float]:
    """Each test cell's points, from the source notebook."""
    nb = nbformat.read(REPO / "solutions" / ASSIGNMENT / "ngrams.ipynb", as_version=4)
    return {
        c.metadata["nbgrader"]["grade_id"]: float(c.metadata["nbgrader"]["points"])
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("grade")
    }


def test_a_class_csv_is_written_whatever_the_students_wrote(tmp_path):
    """Issue 40 §5: a lone surrogate (a file name that is not UTF-8, ``'\\udcff'`` in an exception
    message) or a formula in a reason never makes the CSV unwritable or active."""
    from autograder import formgrader

    path = tmp_path / "grades.csv"
    formgrader.write_rows(
        path, ["student", "reasons"], [["bad\udcffname", '=HYPERLINK("http://x")']]
    )
    with open(path, encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[1][0] == "bad\\udcffname" and rows[1][1].startswith("'=")


@pytest.mark.slow  # grades two students (in-process Dask) and writes their feedback
def test_the_note_for_review_never_reaches_the_students_feedback(tmp_path):
    """Issue 45 §3: a flagged submission's reasons ("Needs review: expected ngrams.ipynb, found
    ...") are formgrader's comment for the instructor; the student's feedback leaves them out."""
    from nbgrader.api import Gradebook

    from autograder import gradebook_writer

    assert course.REVIEW_NOTE == gradebook_writer.REVIEW_NOTE  # the two copies of the prefix
    course_dir = services.make_course(tmp_path, ASSIGNMENT)
    services.hand_in(tmp_path, ASSIGNMENT, {"ana": services.mistaken(ASSIGNMENT, ["no_eos"])})
    services.hand_in(tmp_path, ASSIGNMENT, {"ben": services.mistaken(ASSIGNMENT, [])})
    folder = tmp_path / "autograder" / "submitted" / "ben" / ASSIGNMENT
    (folder / "ngrams.ipynb").rename(folder / "ngrams-Copy1.ipynb")
    graded = classgrader.load_course(course_dir)
    services.grade_in_process(graded, ASSIGNMENT)
    with Gradebook(graded.db_url, "nlpcourse") as gb:
        nb = gb.find_submission_notebook("ngrams", ASSIGNMENT, "ben")
        notes = [c.comment for c in nb.comments if c.comment]
    assert notes and all(n.startswith("Needs review: ") for n in notes)  # formgrader shows them
    assert any("ngrams-Copy1.ipynb" in n for n in notes)
    for student in ("ana", "ben"):
        page = tmp_path / "autograder" / "feedback" / student / ASSIGNMENT / "ngrams.html"
        text = page.read_text(encoding="utf-8")
        assert "Needs review" not in text and "ngrams-Copy1" not in text, student


def test_the_grades_of_a_gradebook_only_nbgrader_wrote(tmp_path, monkeypatch):
    """The plain route's gradebook has no table of the class grader's: its grades are read all
    the same (``grading.py demo`` stopped at "no such table: autograder_results"), and a student
    with no submission says so beside nbgrader's 0."""
    from nbgrader.api import Gradebook

    from autograder.gradebook_writer import NOT_SUBMITTED, class_grades

    monkeypatch.setenv("PATH", services.environment()["PATH"])  # nbgrader runs `alembic`
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        gb.add_assignment(ASSIGNMENT)
        gb.add_student("zoe")
        cells, rows = class_grades(gb, ASSIGNMENT)
    assert cells == {} and [(r.student, r.score, r.status) for r in rows] == [
        ("zoe", 0.0, NOT_SUBMITTED)
    ]
