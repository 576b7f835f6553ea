"""Honest students: graded beside the hostile kinds and alone, with the same grades both times."""

from __future__ import annotations

from . import GRADED, SAME, Kind, Submission, Target
from .notebooks import NOTEBOOK, filled, release, replaced, to_bytes


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
