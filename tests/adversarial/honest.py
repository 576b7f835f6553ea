"""Honest students: graded beside the hostile kinds and alone, with the same grades both times."""

from __future__ import annotations

import nbformat

from . import GRADED, SAME, Kind, Submission, Target
from .notebooks import (
    NOTEBOOK,
    filled,
    grade_id,
    grading,
    honest_code,
    release,
    replaced,
    to_bytes,
)


def full(assignment: str):
    def make(target: Target) -> Submission:
        return Submission(NOTEBOOK[assignment], to_bytes(filled(assignment)))

    return make


def blank(assignment: str):
    def make(target: Target) -> Submission:
        return Submission(NOTEBOOK[assignment], to_bytes(release(assignment)))

    return make


def only(assignment: str, solution_id: str):
    def make(target: Target) -> Submission:
        return Submission(NOTEBOOK[assignment], to_bytes(release(assignment, (solution_id,))))

    return make


# Honest mistakes, each wrong on the visible cases already
NGRAM_MISTAKES = {
    # n-grams without the end marker
    "count_ngrams": """
from collections import Counter as _Counter
sentences, n = args
counts = _Counter()
for sentence in sentences:
    padded = ["<s>"] * (n - 1) + list(sentence)
    for end in range(n, len(padded) + 1):
        counts[tuple(padded[end - n : end])] += 1
return counts
""",
    # add-k with the vocabulary size left out of the denominator
    "addk_prob": """
counts, context, word, vocab_size = args[:4]
k = args[4] if len(args) > 4 else kwargs.get("k", 1.0)
context = tuple(context)
c_context = sum(c for ngram, c in counts.items() if ngram[:-1] == context)
return (counts.get(context + (word,), 0) + k) / (c_context + k)
""",
}
HMM_MISTAKES = {
    # forward with max in place of a sum: the Viterbi score
    "forward": """
import numpy as _np
log_start, log_trans, log_emit = args
alpha = log_start + log_emit[0]
for t in range(1, len(log_emit)):
    alpha = _np.max(alpha[:, None] + log_trans, axis=0) + log_emit[t]
return float(_np.max(alpha))
""",
}


def added_cells(assignment: str, helper_of: str, helper: str, with_helper: str, moved: str):
    """Right, written as students write it (issue 41 §2): the cell ``helper_of`` holds
    ``with_helper``, which uses a helper function defined in a new cell just above it, and the
    solution of ``moved`` is in a new cell after its solution cell, which keeps the release's stub.
    nbgrader runs every cell in order."""

    def make(target: Target) -> Submission:
        code = dict(honest_code(assignment))
        code[helper_of] = with_helper
        moved_code = code.pop(moved)
        nb = grading.submission(assignment, code)  # the cell `moved` as released
        ids = [grade_id(cell) for cell in nb.cells]
        nb.cells.insert(ids.index(moved) + 1, nbformat.v4.new_code_cell(moved_code, id="added-2"))
        nb.cells.insert(ids.index(helper_of), nbformat.v4.new_code_cell(helper, id="added-1"))
        return Submission(NOTEBOOK[assignment], to_bytes(nb))

    return make


# mle_prob's cell with its count of the context in a helper of its own
NGRAM_HELPER = """
def context_count(counts, context):
    return sum(c for ngram, c in counts.items() if ngram[:-1] == context)
"""
NGRAM_WITH_HELPER = """
def mle_prob(counts, context, word):
    context = tuple(context)
    c_context = context_count(counts, context)
    return counts.get(context + (word,), 0) / c_context if c_context else 0.0
"""


def partly_wrong(assignment: str, mistakes: dict[str, str]):
    def make(target: Target) -> Submission:
        code = {sid: replaced(assignment, sid, body) for sid, body in mistakes.items()}
        return Submission(NOTEBOOK[assignment], to_bytes(filled(assignment, code)))

    return make


KINDS = [
    Kind(
        "full-ngrams",
        "01-ngrams",
        "every part right",
        full("01-ngrams"),
        honest=True,
        plain=SAME,
    ),
    Kind(
        "blank-ngrams",
        "01-ngrams",
        "the release notebook untouched",
        blank("01-ngrams"),
        broken="*",
        statuses=GRADED,
        honest=True,
        plain=SAME,
    ),
    Kind(
        "first-part-ngrams",
        "01-ngrams",
        "only count_ngrams written",
        only("01-ngrams", "count_ngrams"),
        broken=("mle_prob", "addk_prob", "perplexity", "continuation_prob", "kn_bigram_prob"),
        honest=True,
        plain=SAME,
    ),
    Kind(
        "partly-wrong-ngrams",
        "01-ngrams",
        "count_ngrams without </s>, add-k without k|V|",
        partly_wrong("01-ngrams", NGRAM_MISTAKES),
        broken=tuple(NGRAM_MISTAKES),
        honest=True,
        plain=SAME,
    ),
    Kind(
        "added-cells-ngrams",
        "01-ngrams",
        "right; a helper function in a new cell, and addk_prob written in a new cell of its own",
        added_cells("01-ngrams", "mle_prob", NGRAM_HELPER, NGRAM_WITH_HELPER, "addk_prob"),
        honest=True,
        plain=("mle_prob", "addk_prob"),  # the plain grader runs solution cells only
    ),
    Kind("full-hmm", "02-hmm", "every part right", full("02-hmm"), honest=True, plain=SAME),
    Kind(
        "blank-hmm",
        "02-hmm",
        "the release notebook untouched",
        blank("02-hmm"),
        broken="*",
        honest=True,
        plain=SAME,
    ),
    Kind(
        "last-part-hmm",
        "02-hmm",
        "only tagging_accuracy written",
        only("02-hmm", "tagging_accuracy"),
        broken=("addk_tables", "forward", "viterbi", "forward_backward"),
        honest=True,
        plain=SAME,
    ),
    Kind(
        "partly-wrong-hmm",
        "02-hmm",
        "forward takes the max instead of the sum",
        partly_wrong("02-hmm", HMM_MISTAKES),
        broken=tuple(HMM_MISTAKES),
        honest=True,
        plain=SAME,
    ),
]
