"""Step 1 and 2 of grading one submission: read the notebook safely, take its code by metadata.

:func:`read_notebook` reads the handed-in bytes (a size cap, UTF-8, JSON, nbformat 4, a cap on the
number of cells; nbformat 3 is upgraded); anything else raises :class:`Rejected` with the reason,
never another exception.
:func:`build_program` takes the code by nbgrader metadata, not by position: the course's setup
cells (locked, not graded) come from the trusted ``source`` notebook (``solutions/``); the
student's solution cells are found by their ``grade_id``. The program is the setup and solution
cells in the source's order, with the code cells the student added run where they stand (after
the cell they follow), as nbgrader runs a notebook (issue 41 §2: a helper function in a cell of its
own counts). Test cells and outputs of the submission are never run: a tampered, deleted or pasted
test cell changes nothing (a cell marked as a test or locked is the source's, or is not run).

A solution cell whose ``grade_id`` was changed (a cell copied, the original deleted) is not lost
(issue 28): where the source's cell is missing and exactly one unrecognised solution cell of the
submission defines every function the source's cell defines, that cell is graded in its place.
Either way the submission is flagged for review, with the reason.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import Literal

from autograder.results import DEFAULT_LIMITS, Limits

CellKind = Literal["setup", "solution", "added"]


class Rejected(Exception):
    """A submission that cannot be graded at all (the message says why)."""


def read_notebook(data: bytes, limits: Limits = DEFAULT_LIMITS) -> dict:
    """The submission as an nbformat 4 dict, or :class:`Rejected` saying what is wrong with it."""
    if not data.strip():
        raise Rejected("the notebook file is empty")
    if len(data) > limits.submission_mb * 2**20:
        raise Rejected(
            f"the notebook file is {len(data) / 2**20:.0f} MB, over the limit of "
            f"{limits.submission_mb} MB (clear the outputs and hand it in again)"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise Rejected(
            f"the notebook file is not UTF-8 text (byte {err.start}); a .ipynb saved by Jupyter "
            "always is"
        ) from None
    try:
        notebook = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as err:
        raise Rejected(f"the notebook file is not valid JSON ({err})") from None
    if not isinstance(notebook, dict):
        raise Rejected("the notebook file is JSON but not a notebook (no cells)")
    major = notebook.get("nbformat")
    if major == 4:
        if not isinstance(notebook.get("cells"), list):
            raise Rejected("the notebook has no list of cells")
        check_cell_count(len(notebook["cells"]), limits)
        return notebook
    if major == 3:
        sheets = notebook.get("worksheets")
        if isinstance(sheets, list):
            cells = [s.get("cells") for s in sheets if isinstance(s, dict)]
            check_cell_count(sum(len(c) for c in cells if isinstance(c, list)), limits)
        try:
            import nbformat

            upgraded = nbformat.convert(nbformat.from_dict(notebook), 4)
            return json.loads(nbformat.writes(upgraded, version=4))
        except Exception as err:
            raise Rejected(f"the nbformat 3 notebook could not be upgraded ({err})") from None
    raise Rejected(f"unsupported notebook format nbformat={major!r} (expected 4)")


def check_cell_count(count: int, limits: Limits) -> None:
    """:class:`Rejected` when a notebook has more cells than ``limits.notebook_cells``: every cell
    costs the grader's coordinator time and memory (the autograded notebook, the feedback), so a
    notebook of a hundred thousand tiny cells, well under the size limit, would hold up the class
    (issue 41 §4). A course notebook has tens of cells."""
    if count > limits.notebook_cells:
        raise Rejected(
            f"the notebook has {count:,} cells, over the limit of {limits.notebook_cells:,} "
            "(join or delete cells and hand it in again)"
        )


def cell_source(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def nbgrader_meta(cell: dict) -> dict:
    metadata = cell.get("metadata")
    meta = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return meta if isinstance(meta, dict) else {}


@dataclass
class Part:
    """A graded test cell of the source and the solution cells it checks (those before it)."""

    grade_id: str
    points: float
    test_source: str
    solution_ids: list[str] = field(default_factory=list)
    cells_before: int = 0  # how many cells of the program come before the test cell


@dataclass
class Cell:
    """One cell the worker runs: a setup cell of the source, a solution cell of the student or a
    cell the student added."""

    label: str  # what messages call it: the grade_id it is graded under
    source: str
    kind: CellKind
    grade_id: str


@dataclass
class Program:
    """What the worker runs, and what the grader checks."""

    cells: list[Cell]
    parts: list[Part]
    reasons: list[str]
    needs_review: bool = False  # something in how the cells were found asks for a person


def defined_functions(code: str) -> set[str]:
    """The names of the functions and classes ``code`` defines at its top level (none when it
    does not parse). Only parsed, never run."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {node.name for node in tree.body if isinstance(node, kinds)}


def solution_cells(notebook: dict) -> dict[str, list[str]]:
    """The code of every solution cell of ``notebook``, by ``grade_id`` (copies in order)."""
    found: dict[str, list[str]] = {}
    for cell in notebook.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        meta = nbgrader_meta(cell)
        grade_id = meta.get("grade_id")
        if meta.get("solution") and isinstance(grade_id, str):
            found.setdefault(grade_id, []).append(cell_source(cell))
    return found


def adopt_renamed(
    missing: dict[str, str], unknown: dict[str, list[str]]
) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """For each source solution cell in ``missing`` (grade_id -> its code), the one unrecognised
    cell of ``unknown`` (grade_id -> copies) that defines every function it defines:
    ``{source grade_id: (student grade_id, code)}``, and the reasons."""
    defines = {
        gid: defined_functions(copies[-1]) for gid, copies in unknown.items() if len(copies) == 1
    }
    adopted: dict[str, tuple[str, str]] = {}
    reasons = []
    for grade_id, code in missing.items():
        wanted = defined_functions(code)
        if not wanted:
            continue
        matches = [gid for gid, names in defines.items() if wanted <= names]
        if len(matches) != 1:
            continue
        student_id = matches[0]
        del defines[student_id]
        adopted[grade_id] = (student_id, unknown[student_id][0])
        reasons.append(
            f"the solution cell {grade_id!r} is missing, but the cell {student_id!r} defines "
            f"{', '.join(sorted(wanted))}: it was graded in its place (was the cell copied or "
            "renamed?)"
        )
    return adopted, reasons


def build_program(submission: dict, source: dict) -> Program:
    """The program nbgrader's route would run, taken by nbgrader ``grade_id``: the setup cells of
    ``source``, the student's solution cells of ``submission``, in the source's order, with the
    cells the student added (code cells that are none of the source's nbgrader cells) each after
    the source cell it follows in the student's notebook; and the source's graded test cells, each
    after the cells before it (:attr:`Part.cells_before`)."""
    student = solution_cells(submission)
    ours = solution_cells(source)
    unknown = {gid: copies for gid, copies in student.items() if gid not in ours}
    missing = {gid: copies[0] for gid, copies in ours.items() if gid not in student}
    adopted, reasons = adopt_renamed(missing, unknown)
    for grade_id, (student_id, code) in adopted.items():
        student[grade_id] = [code]
        del unknown[student_id]
    renamed = {student_id: grade_id for grade_id, (student_id, _) in adopted.items()}
    added, refused = added_cells(submission, source, renamed)
    cells: list[Cell] = list(added.get(None, []))
    parts: list[Part] = []
    pending: list[str] = []  # solution ids since the last test cell
    for cell in source["cells"]:
        meta = nbgrader_meta(cell)
        grade_id = meta.get("grade_id")
        if cell.get("cell_type") != "code" or not isinstance(grade_id, str):
            continue
        if meta.get("solution"):
            pending.append(grade_id)
            copies = student.get(grade_id, [])
            if not copies:
                reasons.append(f"the solution cell {grade_id!r} is missing from the notebook")
            elif len(copies) > 1:
                same = len(set(copies)) == 1
                reasons.append(
                    f"the solution cell {grade_id!r} appears {len(copies)} times"
                    + (" (identical copies)" if same else "; they were run in order")
                )
                copies = copies[:1] if same else copies
            cells += [Cell(grade_id, text, "solution", grade_id) for text in copies]
        elif meta.get("grade"):
            points = float(meta.get("points", 0) or 0)
            parts.append(Part(grade_id, points, cell_source(cell), pending, len(cells)))
            pending = []
        elif meta.get("locked"):
            cells.append(Cell(grade_id, cell_source(cell), "setup", grade_id))
        cells += added.get(grade_id, [])
    if unknown:
        reasons.append(
            "solution cells with grade_ids the assignment does not have were run where they "
            f"stand, as cells you added: {sorted(unknown)}"
        )
    if refused:
        reasons.append(
            "cells marked as tests or as locked that the assignment does not have were not run "
            f"(tests and locked cells come from the assignment, never from the notebook): {refused}"
        )
    return Program(cells, parts, reasons, needs_review=bool(adopted or unknown or refused))


def added_cells(
    submission: dict, source: dict, renamed: dict[str, str]
) -> tuple[dict[str | None, list[Cell]], list[str]]:
    """The code cells of ``submission`` that the student added (no nbgrader metadata, or a
    solution cell whose ``grade_id`` the source does not have and that was not adopted as a
    renamed one), by the ``grade_id`` of the source cell they follow in the student's notebook
    (``None``: before any); and the ``grade_id``\\ s of the cells refused: marked as a test or as
    locked, or named as one of the source's cells but not one of its solution cells. A test cell
    is never run from the student's copy, whatever its metadata says: its trusted text is the
    source's, run in the grader."""
    known = {  # the source's code cells: where an added cell stands is after one of them
        gid
        for cell in source.get("cells", [])
        if isinstance(cell, dict)
        and cell.get("cell_type") == "code"
        and isinstance(gid := nbgrader_meta(cell).get("grade_id"), str)
    }
    solutions = set(solution_cells(source))
    added: dict[str | None, list[Cell]] = {}
    refused: list[str] = []
    anchor: str | None = None
    for position, cell in enumerate(submission.get("cells", []), start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        meta = nbgrader_meta(cell)
        grade_id = meta.get("grade_id")
        if isinstance(grade_id, str) and (grade_id in known or grade_id in renamed):
            anchor = renamed.get(grade_id, grade_id)
            continue
        if meta.get("grade") or meta.get("locked"):
            refused.append(str(grade_id)[:100])
            continue
        if isinstance(grade_id, str) and meta.get("solution") and grade_id not in solutions:
            label = grade_id
        else:
            label = f"cell {position}"
        text = cell_source(cell)
        if text.strip():
            added.setdefault(anchor, []).append(Cell(label, text, "added", label))
    return added, refused
