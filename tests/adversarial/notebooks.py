"""Building submissions from the course's own notebooks.

A submission starts from what a student gets, the release notebook of ``exercises/<assignment>/``,
with the solution cells filled in from ``solutions/<assignment>/`` (the honest answer, as
``autograder/grading.py`` fills them), and a maker then changes what its kind changes. The points of
each graded part come from the test cells of ``solutions/``: the trusted source, never the
submission.
"""

from __future__ import annotations

import copy
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import nbformat

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "autograder"))
import grading  # noqa: E402 (autograder/grading.py: the solution code and the release notebook)

ASSIGNMENTS = ("01-ngrams", "02-hmm")
NOTEBOOK = {"01-ngrams": "ngrams.ipynb", "02-hmm": "hmm.ipynb"}


@dataclass(frozen=True)
class Submission:
    """What a student hands in: the file's name and its bytes, as submitted."""

    name: str
    data: bytes


def grade_id(cell: nbformat.NotebookNode) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


@cache
def source(assignment: str) -> nbformat.NotebookNode:
    """The nbgrader source notebook (hidden tests and solutions included)."""
    return nbformat.read(REPO / "solutions" / assignment / NOTEBOOK[assignment], as_version=4)


@cache
def points(assignment: str) -> dict[str, float]:
    """``{test cell grade_id: points}`` of the graded parts, in notebook order."""
    return {
        grade_id(c): float(c.metadata["nbgrader"]["points"])
        for c in source(assignment).cells
        if c.metadata.get("nbgrader", {}).get("grade")
    }


@cache
def honest_code(assignment: str) -> dict[str, str]:
    """``{solution cell grade_id: code}``: the solutions of ``solutions/``, markers removed."""
    return grading.solution_code(assignment)


def test_of(assignment: str, solution_id: str) -> str:
    """The test cell that grades a solution cell (``count_ngrams`` -> ``test_count_ngrams``)."""
    test = f"test_{solution_id}"
    if test not in points(assignment):
        raise KeyError(f"{assignment} has no test cell {test!r} for solution cell {solution_id!r}")
    return test


def filled(assignment: str, code: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """The release notebook with every solution cell filled in: the honest answer, except the
    cells named in ``code``, which get that code instead."""
    return grading.submission(assignment, {**honest_code(assignment), **(code or {})})


def release(assignment: str, solved: tuple[str, ...] = ()) -> nbformat.NotebookNode:
    """The release notebook, with only the solution cells named in ``solved`` filled in (none:
    a blank submission)."""
    return grading.submission(assignment, {sid: honest_code(assignment)[sid] for sid in solved})


def function_name(assignment: str, solution_id: str) -> str:
    """The name of the function the solution cell defines (its first ``def``)."""
    match = re.search(r"^def (\w+)\(", honest_code(assignment)[solution_id], re.M)
    assert match, f"no function in solution cell {solution_id}"
    return match.group(1)


def canary(assignment: str, solution_id: str) -> str:
    """The line a kind's code writes to its stdout when its attack starts (issue 28): the grader
    keeps what a submission printed, so the canary read back from the result proves the attack
    ran under the grader, and its zero (or full marks) is the sandbox's doing. Written with
    ``os.write``, which an attack that replaces ``print`` or ``sys.stdout`` does not reach."""
    return f"canary {assignment}:{solution_id}"


def canary_line(assignment: str, solution_id: str) -> str:
    return f"__import__('os').write(1, b'{canary(assignment, solution_id)}\\n')"


def wrapped(assignment: str, solution_id: str, body: str, top: str = "") -> str:
    """Solution code whose function runs ``body`` (statements that see the call's ``args`` and
    ``kwargs``, indented by this function), then returns the honest answer.

    The honest function stays in the cell as ``_honest_<name>``, which ``body`` calls as
    ``_honest``; ``top`` is code run at the top level of the cell, after the definitions. ``body``
    may ``return`` early."""
    name = function_name(assignment, solution_id)
    honest = honest_code(assignment)[solution_id].replace(f"def {name}(", f"def _honest_{name}(", 1)
    lines = [honest, "", "", f"def {name}(*args, **kwargs):", f"    _honest = _honest_{name}"]
    lines.append("    " + canary_line(assignment, solution_id))
    lines += ["    " + line if line else "" for line in body.strip("\n").splitlines()]
    lines.append("    return _honest(*args, **kwargs)")
    if top:
        lines += ["", "", canary_line(assignment, solution_id), top.strip("\n")]
    return "\n".join(lines) + "\n"


def replaced(assignment: str, solution_id: str, function: str, top: str = "") -> str:
    """Solution code that defines the part's function as ``function`` (its body only, which sees
    ``args`` and ``kwargs``): a wrong or hostile answer in place of the honest one."""
    name = function_name(assignment, solution_id)
    lines = [f"def {name}(*args, **kwargs):", "    " + canary_line(assignment, solution_id)]
    lines += ["    " + line if line else "" for line in function.strip("\n").splitlines()]
    if top:
        lines += ["", "", canary_line(assignment, solution_id), top.strip("\n")]
    return "\n".join(lines) + "\n"


def cells_where(nb: nbformat.NotebookNode, test: str) -> list[int]:
    """Indexes of the cells of ``nb`` whose nbgrader grade_id is ``test``."""
    return [i for i, c in enumerate(nb.cells) if grade_id(c) == test]


def paste(nb: nbformat.NotebookNode, grade_ids: list[str]) -> nbformat.NotebookNode:
    """``nb`` with a copy of each named cell pasted at the end, as Jupyter pastes (new cell id,
    same metadata)."""
    nb = copy.deepcopy(nb)
    for gid in grade_ids:
        (index,) = cells_where(nb, gid)
        cell = copy.deepcopy(nb.cells[index])
        cell["id"] = f"pasted-{gid}"[:64]
        nb.cells.append(cell)
    return nb


def to_bytes(nb: nbformat.NotebookNode) -> bytes:
    """The notebook as Jupyter saves it (nbformat's JSON, UTF-8)."""
    return nbformat.writes(nb).encode("utf-8")


def maker(
    assignment: str, code: dict[str, str] | Callable[[Any], dict[str, str]]
) -> Callable[[Any], Submission]:
    """A maker of the full submission with some solution cells' code replaced: ``code`` is
    ``{solution grade_id: code}``, or a function of the :class:`Target` that returns it."""

    def make(target: Any) -> Submission:
        cells = code(target) if callable(code) else code
        return Submission(NOTEBOOK[assignment], to_bytes(filled(assignment, cells)))

    return make
