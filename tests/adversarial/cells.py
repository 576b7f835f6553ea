"""Submissions whose cells were edited, deleted, duplicated, renamed or moved.

The grader takes the test cells, their points and the setup code from ``solutions/`` and the
student's code only from the solution cells, found by their nbgrader grade_id: edits to test cells
change nothing, order changes nothing, and a solution cell that cannot be found by its grade_id
scores 0 for its part (with a reason). A scratch cell of the student's (no nbgrader metadata) is
never run.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from nbformat.v4 import new_code_cell

from . import FLAGGED, GRADED, SAME, Kind, Submission, Target
from .notebooks import (
    NOTEBOOK,
    cells_where,
    filled,
    grade_id,
    paste,
    points,
    replaced,
    to_bytes,
)

NG, HMM = "01-ngrams", "02-hmm"
WRONG = "return None"


def edited(assignment: str, code: dict[str, str], edit: Callable) -> Callable:
    """A maker: the full submission with ``code`` in some solution cells, then ``edit(nb)``."""

    def make(target: Target) -> Submission:
        nb = copy.deepcopy(filled(assignment, code))
        edit(nb)
        return Submission(NOTEBOOK[assignment], to_bytes(nb))

    return make


def tamper_tests(nb) -> None:
    """Every test cell made to pass whatever the answer."""
    graded = points_of(nb)
    for cell in nb.cells:
        if grade_id(cell) in graded:
            cell.source = "pass  # the check was here"
    # and one test cell that redefines the check instead
    (i,) = cells_where(nb, "test_mle_prob")
    nb.cells[
        i
    ].source = "def check_mle_prob(f, hidden=False):\n    return None\n\ncheck_mle_prob(mle_prob)\n"


def points_of(nb) -> set[str]:
    return {grade_id(c) for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}


def delete_tests(nb) -> None:
    nb.cells = [c for c in nb.cells if not c.metadata.get("nbgrader", {}).get("grade")]


def rename_tests_and_points(nb) -> None:
    """A test cell's grade_id renamed, every test cell made worth 100 points."""
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            meta["points"] = 100
    (i,) = cells_where(nb, "test_kn_bigram_prob")
    nb.cells[i].metadata["nbgrader"]["grade_id"] = "test_bonus"


def rename_solution(old: str, new: str):
    def edit(nb) -> None:
        (i,) = cells_where(nb, old)
        nb.cells[i].metadata["nbgrader"]["grade_id"] = new

    return edit


def delete_cell(gid: str):
    def edit(nb) -> None:
        nb.cells = [c for c in nb.cells if grade_id(c) != gid]

    return edit


def pasted(*gids: str):
    def edit(nb) -> None:
        nb.cells = paste(nb, list(gids)).cells

    return edit


def reverse_cells(nb) -> None:
    """Every cell in reverse order, the setup cell first (it defines what the rest use)."""
    setup = [c for c in nb.cells if grade_id(c) == "setup"]
    nb.cells = setup + [c for c in reversed(nb.cells) if grade_id(c) != "setup"]


def scratch_loop(nb) -> None:
    """A cell of the student's own, without nbgrader metadata, that never ends."""
    cell = new_code_cell("while True:  # scratch work\n    pass\n")
    cell["id"] = "scratch-loop"  # a fixed id: the same bytes every time
    nb.cells.insert(3, cell)


def solution_made_graded(nb) -> None:
    """The count_ngrams solution cell marked as a graded test cell worth 50 points."""
    (i,) = cells_where(nb, "count_ngrams")
    nb.cells[i].metadata["nbgrader"].update(grade=True, points=50)


assert set(points(NG)) == {
    "test_count_ngrams",
    "test_mle_prob",
    "test_addk_prob",
    "test_perplexity",
    "test_continuation_prob",
    "test_kn_bigram_prob",
}

KINDS = [
    Kind(
        "tampered-test-cells",
        NG,
        "count_ngrams and mle_prob wrong; every test cell replaced by pass or a fake check",
        edited(
            NG,
            {
                "count_ngrams": replaced(NG, "count_ngrams", WRONG),
                "mle_prob": replaced(NG, "mle_prob", WRONG),
            },
            tamper_tests,
        ),
        broken=("count_ngrams", "mle_prob"),
        plain=SAME,
    ),
    Kind(
        "deleted-test-cells",
        HMM,
        "every test cell deleted, every answer right",
        edited(HMM, {}, delete_tests),
        plain=SAME,
    ),
    Kind(
        "duplicated-test-cells",
        NG,
        "two test cells pasted again at the end (same grade_id); perplexity wrong",
        edited(
            NG,
            {"perplexity": replaced(NG, "perplexity", WRONG)},
            pasted("test_count_ngrams", "test_perplexity"),
        ),
        broken=("perplexity",),
        plain=SAME,
    ),
    Kind(
        "renamed-test-cell-and-points",
        NG,
        "a test cell's grade_id renamed and every test cell made worth 100 points (a test cell "
        "the assignment does not have is not run, and flags the submission: issue 40 §3)",
        edited(NG, {}, rename_tests_and_points),
        statuses=FLAGGED,
        plain=SAME,
    ),
    Kind(
        "solution-cell-marked-graded",
        NG,
        "the count_ngrams solution cell marked as graded, worth 50 points",
        edited(NG, {}, solution_made_graded),
        plain=SAME,
    ),
    Kind(
        "renamed-solution-cell",
        NG,
        "the count_ngrams solution cell's grade_id renamed: found by the function it defines, "
        "graded and flagged (issue 28; the plain rule finds cells by grade_id alone)",
        edited(NG, {}, rename_solution("count_ngrams", "my_count_ngrams")),
        statuses=FLAGGED,
        plain=("count_ngrams",),
    ),
    Kind(
        "deleted-solution-cell",
        HMM,
        "the viterbi solution cell deleted",
        edited(HMM, {}, delete_cell("viterbi")),
        broken=("viterbi",),
        statuses=GRADED | FLAGGED,
        plain=SAME,
    ),
    Kind(
        "pasted-solution-cell",
        HMM,
        "the forward solution cell pasted again (same grade_id, same code)",
        edited(HMM, {}, pasted("forward")),
        statuses=GRADED | FLAGGED,
        plain=SAME,
    ),
    Kind(
        "cells-reversed",
        HMM,
        "every cell after the setup in reverse order",
        edited(HMM, {}, reverse_cells),
        plain=SAME,
    ),
    Kind(
        "scratch-cell-loops",
        NG,
        "a cell of the student's own (no nbgrader metadata) loops forever; every answer right "
        "(the cell runs, as nbgrader runs it, is interrupted at its limit and flags the "
        "submission: issue 41 §2)",
        edited(NG, {}, scratch_loop),
        statuses=FLAGGED,
        plain=SAME,
    ),
]
