"""Files that are not quite the notebook asked for.

A file the grader cannot read as a notebook (malformed JSON, empty, not UTF-8) is rejected: every
part 0, with a reason. An older format (nbformat 3) is upgraded and graded, and a notebook that is
large because of its outputs is graded (outputs are never run). A notebook under another name than
the assignment's is graded and flagged with a reason that names the file expected, a name that is
not UTF-8 and holds a terminal escape too (issue 40 §5: shown escaped, never raw).
"""

from __future__ import annotations

import copy
import os

import nbformat
from nbformat.v4 import new_code_cell, new_output

from . import ALL, FLAGGED, GRADED, REJECTED, SAME, Kind, Submission, Target
from .notebooks import NOTEBOOK, cells_where, filled, to_bytes

NG, HMM = "01-ngrams", "02-hmm"
MB = 2**20


def malformed_json(target: Target) -> Submission:
    """The full notebook cut off half way, as an interrupted upload leaves it."""
    data = to_bytes(filled(HMM))
    return Submission(NOTEBOOK[HMM], data[: len(data) // 2])


def nbformat_3(target: Target) -> Submission:
    """The full notebook in nbformat 3 (worksheets, ``input`` for the code)."""
    nb3 = nbformat.convert(filled(NG), 3)
    return Submission(NOTEBOOK[NG], nbformat.writes(nb3, version=3).encode("utf-8"))


def empty_file(target: Target) -> Submission:
    return Submission(NOTEBOOK[NG], b"")


def wrong_name(target: Target) -> Submission:
    """The full notebook, renamed as a browser renames a second download."""
    return Submission("hmm (1).ipynb", to_bytes(filled(HMM)))


def odd_name(target: Target) -> Submission:
    """The full notebook under a name that is not UTF-8 (the byte 0xFF) and holds a terminal
    escape (ESC [31m), as a hostile upload may name it."""
    return Submission(os.fsdecode(b"ngrams \xff\x1b[31m.ipynb"), to_bytes(filled(NG)))


def fifty_megabytes(target: Target) -> Submission:
    """The full notebook with a scratch cell whose saved output is 50 MB of text."""
    nb = copy.deepcopy(filled(NG))
    cell = new_code_cell(
        "print('x' * 50 * 2**20)",
        outputs=[new_output("stream", name="stdout", text="x" * 50 * MB)],
    )
    cell["id"] = "scratch-output"  # a fixed id: the same bytes every time
    nb.cells.insert(cells_where(nb, "count_ngrams")[0] + 1, cell)
    return Submission(NOTEBOOK[NG], to_bytes(nb))


def latin_1(target: Target) -> Submission:
    """The full notebook saved as Latin-1: a comment's "é" is the byte 0xE9, not UTF-8 (and
    the few characters Latin-1 lacks, in the text, become "?")."""
    nb = copy.deepcopy(filled(NG))
    (i,) = cells_where(nb, "count_ngrams")
    nb.cells[i].source = "# café\n" + nb.cells[i].source
    return Submission(NOTEBOOK[NG], nbformat.writes(nb).encode("latin-1", "replace"))


KINDS = [
    Kind(
        "malformed-json",
        HMM,
        "the notebook's JSON cut off half way",
        malformed_json,
        broken=ALL,
        statuses=REJECTED,
        plain=SAME,
    ),
    Kind(
        "nbformat-3", NG, "the full notebook in nbformat 3", nbformat_3, statuses=GRADED, plain=SAME
    ),
    Kind("empty-file", NG, "an empty file", empty_file, broken=ALL, statuses=REJECTED, plain=SAME),
    Kind(
        "wrong-file-name",
        HMM,
        "the full notebook submitted as 'hmm (1).ipynb', alone: graded and flagged (issue 28)",
        wrong_name,
        statuses=FLAGGED,
    ),
    Kind(
        "odd-file-name",
        NG,
        "the full notebook under a name that is not UTF-8 and holds a terminal escape: graded, "
        "flagged, the name shown escaped (issue 40 §5)",
        odd_name,
        statuses=FLAGGED,
    ),
    Kind(
        "notebook-50mb",
        NG,
        "the full notebook with 50 MB of saved output in a scratch cell",
        fifty_megabytes,
        statuses=GRADED,
        plain=SAME,
    ),
    Kind(
        "non-utf8",
        NG,
        "the full notebook saved as Latin-1 (one byte 0xE9)",
        latin_1,
        broken=ALL,
        statuses=REJECTED,
        plain=SAME,
    ),
]
