"""One student, one grade: the sandboxed class grader and ``nbgrader autograde`` agree (issue 28).

The honest submissions of the project's adversarial corpus (``tests/adversarial/honest.py``, of
``01-ngrams``), and a sloppy one that defines a right function and then sleeps at the top level of
its cell, are graded by both routes: :func:`autograder.sandbox.grade_submission` and the real
``nbgrader autograde`` with the course's configuration (:func:`autograder.grading.grade`, in a
temporary course). Each part must score the same by both. The oracle for the sloppy one is
nbgrader's own rule (a cell past its limit is interrupted, what it defined is kept); the old class
grader killed the worker and gave the part 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import nbformat  # noqa: E402
from adversarial import Target, kinds  # noqa: E402
from adversarial.notebooks import NOTEBOOK, honest_code  # noqa: E402

from autograder import grading  # noqa: E402
from autograder.results import Limits  # noqa: E402
from autograder.sandbox import grade_submission  # noqa: E402

pytestmark = pytest.mark.slow  # a kernel per student for nbgrader

ASSIGNMENT = "01-ngrams"
SECONDS = 10  # the limit of a cell by both routes; an honest cell of 01-ngrams takes under 1 s
SLEEPS = "\n\nimport time\ntime.sleep(3600)  # forgot to remove a wait\n"


def submissions(tmp_path: Path) -> dict[str, nbformat.NotebookNode]:
    target = Target(REPO, tmp_path, tmp_path / "canary", 9, "honest-full-ngrams")
    subs = {
        kind.student: nbformat.reads(kind.make(target).data.decode(), as_version=4)
        for kind in kinds()
        if kind.honest and kind.assignment == ASSIGNMENT
    }
    code = honest_code(ASSIGNMENT)
    subs["sloppy-sleeps"] = grading.submission(
        ASSIGNMENT, {**code, "mle_prob": code["mle_prob"] + SLEEPS}
    )
    return subs


def test_both_routes_give_every_part_the_same_points(tmp_path):
    subs = submissions(tmp_path)
    assert len(subs) >= 5
    plain = grading.grade(
        tmp_path / "plain", ASSIGNMENT, subs, options=[f"--TimeLimitedExecute.timeout={SECONDS}"]
    )
    source = grading.notebook_path(REPO / "solutions", ASSIGNMENT)
    limits = Limits(call_seconds=SECONDS, notebook_seconds=120)
    for student, nb in subs.items():
        ours = grade_submission(
            nbformat.writes(nb).encode(), NOTEBOOK[ASSIGNMENT],
            nbformat.read(source, as_version=4), assignment=ASSIGNMENT, student=student,
            limits=limits, expected_name=NOTEBOOK[ASSIGNMENT],
        )  # fmt: skip
        sandboxed = {part.grade_id: part.points for part in ours.parts}
        theirs = {k: v for k, v in plain[student].items() if k != "total"}
        assert sandboxed == theirs, (student, ours.reasons)
    assert plain["sloppy-sleeps"]["test_mle_prob"] > 0  # the case the routes disagreed on
