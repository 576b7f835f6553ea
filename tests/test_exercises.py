"""The exercise invariants of the design, proved with the real nbgrader for every assignment.

1. ``exercises/`` equals what ``nbgrader generate_assignment`` makes from ``solutions/`` today.
2. The solution gets full marks under ``nbgrader autograde``.
3. The untouched release notebook gets zero, and the grader still finishes.
4. A notebook with one part solved gets exactly that part's points, for every part.
5. A notebook whose functions are imported from ``nlpcourse`` gets no points.

Expected points are read from the test cells' metadata in ``solutions/``, not from nbgrader.
"""

import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "autograder"))
import grading  # noqa: E402

from nlpcourse.scaffold import MIN_PARTS  # noqa: E402  (the fewest graded parts, and why)

ASSIGNMENTS = sorted(p.name for p in (grading.REPO / "solutions").iterdir() if p.is_dir())


def topic_module(assignment: str) -> str:
    """The reference module an assignment's checks compare against: the test cells import
    ``nlpcourse.checks.<topic>``, whose reference is ``nlpcourse.<topic>``."""
    nb = nbformat.read(grading.notebook_path(grading.REPO / "solutions", assignment), 4)
    topics = {
        m.group(1)
        for cell in nb.cells
        if cell.metadata.get("nbgrader", {}).get("grade")
        for m in re.finditer(r"nlpcourse\.checks\.(\w+)", cell.source)
    }
    assert len(topics) == 1, f"{assignment}: test cells should use one checks module, got {topics}"
    return f"nlpcourse.{topics.pop()}"


def graded_cells_by_part(assignment: str) -> dict[str, dict[str, float]]:
    """{solution grade_id: {grade_id: points} of the graded test cells that follow it}: a part may
    be graded by several cells (04-rnn's architecture_for: one per kind of task, issue 42)."""
    nb = nbformat.read(grading.notebook_path(grading.REPO / "solutions", assignment), 4)
    cells: dict[str, dict[str, float]] = {}
    part = None
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            part = meta["grade_id"]
        if meta.get("grade"):
            cells.setdefault(part, {})[meta["grade_id"]] = meta["points"]
    return cells


def points_by_part(assignment: str) -> dict[str, float]:
    """{solution grade_id: the points of the test cells that follow it}."""
    return {part: sum(cells.values()) for part, cells in graded_cells_by_part(assignment).items()}


def strip_volatile(nb: nbformat.NotebookNode) -> dict:
    return {"cells": [(c.cell_type, c.source, c.metadata) for c in nb.cells], "meta": nb.metadata}


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_exercises_in_sync_with_solutions(assignment, tmp_path):
    (tmp_path / "autograder").mkdir()
    shutil.copytree(grading.REPO / "solutions" / assignment, tmp_path / "solutions" / assignment)
    grading.run_nbgrader("generate_assignment", assignment, "--force", root=tmp_path)
    fresh = nbformat.read(grading.notebook_path(tmp_path / "exercises", assignment), 4)
    committed = nbformat.read(grading.notebook_path(grading.REPO / "exercises", assignment), 4)
    assert strip_volatile(committed) == strip_volatile(fresh), (
        f"exercises/{assignment} is stale: regenerate it with "
        f"`cd autograder && nbgrader generate_assignment {assignment} --force`"
    )
    for cell in committed.cells:  # no outputs and no solutions are handed out
        assert not cell.get("outputs"), "exercises/ must not contain outputs"
        assert grading.BEGIN not in cell.source and "BEGIN HIDDEN TESTS" not in cell.source


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_grading_invariants(assignment, tmp_path):
    points = points_by_part(assignment)
    assert len(points) >= MIN_PARTS, f"an exercise has at least {MIN_PARTS} graded parts"
    code = grading.solution_code(assignment)
    assert set(code) == set(points)
    module = topic_module(assignment)
    subs = {
        "full": grading.submission(assignment, code),
        "blank": grading.submission(assignment, {}),
        "imports-reference": grading.submission(
            assignment, {part: f"from {module} import {part}" for part in code}
        ),
    }
    for part in code:
        subs[f"only-{part}"] = grading.submission(assignment, {part: code[part]})
    scores = grading.grade(tmp_path, assignment, subs)
    total = sum(points.values())

    assert scores["full"]["total"] == total
    assert scores["blank"]["total"] == 0
    assert scores["imports-reference"]["total"] == 0
    for part, cells in graded_cells_by_part(assignment).items():
        p = points[part]
        assert scores[f"only-{part}"]["total"] == p, f"solving only {part} should give {p} points"
        for cell, cell_points in cells.items():
            assert scores[f"only-{part}"][cell] == cell_points, (part, cell)
    feedback = list((tmp_path / "autograder" / "feedback").rglob("*.html"))
    assert len(feedback) == len(subs)
    assert "blank" in scores["csv"].read_text()


@pytest.mark.slow
def test_a_wrong_kind_of_task_costs_its_own_half_point_by_both_routes(tmp_path):
    """Issue 42 §5: architecture_for is credited per kind of task. One many-to-one task answered
    wrong loses that kind's cell (0.5 of 2) under nbgrader and under the class grader alike; the
    expected points are read from the source notebook's metadata."""
    sys.path.insert(0, str(grading.REPO))  # the autograder package, as `python -m autograder`
    from autograder.results import Limits
    from autograder.sandbox import grade_submission

    code = grading.solution_code("04-rnn")["architecture_for"]
    wrong = code.replace('"spam detection": "many-to-one"', '"spam detection": "many-to-many"')
    assert wrong != code
    cells = graded_cells_by_part("04-rnn")["architecture_for"]
    expected = {cell: (0.0 if cell.endswith("many_to_one") else p) for cell, p in cells.items()}
    assert sum(expected.values()) == sum(cells.values()) - 0.5

    submission = grading.submission("04-rnn", {"architecture_for": wrong})
    scores = grading.grade(tmp_path, "04-rnn", {"spam-wrong": submission})["spam-wrong"]
    assert {cell: scores[cell] for cell in cells} == expected, scores

    name = grading.notebook_path(grading.REPO / "solutions", "04-rnn").name
    source = nbformat.read(grading.notebook_path(grading.REPO / "solutions", "04-rnn"), 4)
    result = grade_submission(
        nbformat.writes(submission).encode(), name, source, assignment="04-rnn",
        student="spam-wrong", limits=Limits(), expected_name=name,
    )  # fmt: skip
    by_cell = {part.grade_id: part.points for part in result.parts}
    assert {cell: by_cell[cell] for cell in cells} == expected, result.parts


# ------------------------------------------------- issue 27: what a student meets in the notebook


def _notebook(directory: str, assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(grading.notebook_path(grading.REPO / directory, assignment), 4)


def test_kernel_display_names_agree_across_notebooks():
    names = {
        a: _notebook("solutions", a).metadata["kernelspec"]["display_name"] for a in ASSIGNMENTS
    }
    assert len(set(names.values())) == 1, names


def _markdown(assignment: str, grade_id: str) -> str:
    nb = _notebook("solutions", assignment)
    return next(
        c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id
    )


def test_exercise_03_states_what_its_checks_check():
    """Part 5's 'about e^{-N}' is the visible long case's log probability (its closed form, the
    sum over the Catalan number of trees); part 6 defines a preterminal as the check does, a node
    whose only child is a word (the check's NP over N over a word is a bracket)."""
    from nlpcourse.checks import parsing as checks

    n = int(re.search(r"sentence of (\d+) words", _markdown("03-parsing", "part5")).group(1))
    stated = int(re.search(r"about \$e\^\{-(\d+)\}\$", _markdown("03-parsing", "part5")).group(1))
    assert abs(-checks._closed_form(n) - stated) < 1, (stated, checks._closed_form(n))
    assert "only child is a word" in _markdown("03-parsing", "part6")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_run_all_on_the_release_notebook_fails_only_in_graded_cells(assignment):
    """Run All on the notebook a student gets: a cell that is not a graded test (a 'try it'
    cell) says which part to write first instead of raising NotImplementedError."""
    from nbclient import NotebookClient

    nb = _notebook("exercises", assignment)
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True).execute()
    for cell in nb.cells:
        if cell.cell_type != "code" or cell.metadata.get("nbgrader", {}).get("grade"):
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, (cell.source, errors[0]["ename"], errors[0]["evalue"])
