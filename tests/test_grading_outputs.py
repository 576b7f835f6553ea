"""What an instructor and a student see of the grader, tested without a cluster (issue 28).

Oracles: nbgrader's own hidden-test remover (which raises on a lone marker) beside the course's;
the fields of :class:`autograder.results.Limits` (their defaults and units) against the command's
``--help``; results written by hand, whose counts a reader adds up, against the summary.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.preprocessors import ClearHiddenTests

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "autograder"))
import course_nbgrader as course  # noqa: E402

from autograder import classgrader  # noqa: E402
from autograder.results import STATUSES, Limits  # noqa: E402

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
        classgrader.main(["grade", "--help"])
    text = " ".join(out.getvalue().split())
    for name, _, default, unit, _ in Limits.described():
        assert getattr(Limits(), name) == default
        assert f"--{name.replace('_', '-')}" in text
        assert f"(default: {default:,} {unit})" in text, (name, text)


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
    summary.outputs = {"CSV": Path("/tmp/grades.csv")}
    lines = summary.text().splitlines()
    counts = {line.split()[0]: int(line.split()[-1]) for line in lines[1 : 1 + len(STATUSES)]}
    assert sum(counts.values()) == 5 and counts["rejected"] == counts["timed"] == 1
    assert "  for review       3 (why:)" in lines
    for student in ("ben", "cal", "dan"):
        assert any(line.strip().startswith(f"{student} (") for line in lines), lines
    assert lines[-1] == "CSV:       /tmp/grades.csv"


def test_a_course_that_cannot_be_graded_is_a_message_not_a_traceback(tmp_path, capsys):
    # issue 31: library functions raise CourseError; main turns it into the message and status 2
    with pytest.raises(classgrader.CourseError, match="no nbgrader_config.py"):
        classgrader.load_course(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        classgrader.main(["grade", "01-ngrams", "--course", str(tmp_path)])
    assert stopped.value.code == 2
    said = capsys.readouterr().err
    assert "no nbgrader_config.py" in said and "Traceback" not in said
