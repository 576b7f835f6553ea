"""The book's worked examples, typed once: the small inputs a reader can check by hand.

The chapters show them, the exercise checks use them as their first hand-picked cases, and the
tests compare the package with the values worked out by hand on them. Each function returns a new
copy, so a caller that changes it changes nothing for the next one.

* Chapter 1 (``book/ngrams.md``, section "Counting and maximum likelihood"): the three-sentence
  corpus "I am NLP", "NLP I am", "I do not like Exams and Marks" (:func:`i_am_nlp`).
* Chapter 2 (``book/hmm.md``): the exam question "I go to school" with the tags VB, TO, NN, PPSS
  (:func:`i_go_to_school`, the tables as the exam gives them; their rows need not sum to 1), and
  the *girl sleep* corpus of the emission estimate (:func:`girl_sleep`).
"""

from __future__ import annotations

import numpy as np

I_AM_NLP = ("I am NLP", "NLP I am", "I do not like Exams and Marks")

SCHOOL_TAGS = ("VB", "TO", "NN", "PPSS")
SCHOOL_WORDS = ("I", "go", "to", "school")
_SCHOOL_START = [0.19, 0.43, 0.41, 0.67]  # P(tag | <s>)
_SCHOOL_TRANS = [  # [i, j] = P(tag j | previous tag i)
    [0.38, 0.35, 0.47, 0.70],  # after VB
    [0.83, 0.00, 0.47, 0.00],  # after TO
    [0.40, 0.16, 0.87, 0.45],  # after NN
    [0.23, 0.79, 0.12, 0.14],  # after PPSS
]
_SCHOOL_EMIT = [  # [t, j] = P(word t | tag j)
    [0.00, 0.00, 0.00, 0.37],  # I
    [0.10, 0.00, 0.85, 0.00],  # go
    [0.00, 0.99, 0.00, 0.00],  # to
    [0.80, 0.00, 0.68, 0.00],  # school
]


def i_am_nlp() -> list[list[str]]:
    """Chapter 1's corpus: three tokenised sentences."""
    return [sentence.split() for sentence in I_AM_NLP]


def i_go_to_school() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Chapter 2's exam tables as probabilities: ``start`` (N,), ``trans`` (N, N), ``emit`` (T, N).

    The tags are :data:`SCHOOL_TAGS` (N = 4), the words :data:`SCHOOL_WORDS` (T = 4). By hand, the
    best tag sequence is PPSS NN TO VB with probability .67 * .37 * .12 * .85 * .16 * .99 * .83 *
    .8 (worked in ``tests/test_hmm.py``)."""
    return np.array(_SCHOOL_START), np.array(_SCHOOL_TRANS), np.array(_SCHOOL_EMIT)


def i_go_to_school_log() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`i_go_to_school` in log space (``log 0 = -inf``): log_start, log_trans, log_emit."""
    with np.errstate(divide="ignore"):
        return tuple(np.log(table) for table in i_go_to_school())  # type: ignore[return-value]


def girl_sleep(noun: str = "NOUN", verb: str = "VERB") -> list[list[tuple[str, str]]]:
    """Chapter 2's emission example as one-word tagged sentences: *girl* 8 times a noun and 4 times
    a verb, *sleep* 2 times a noun and 6 times a verb (so P(girl | noun) = 8/10)."""
    counts = [("girl", noun, 8), ("girl", verb, 4), ("sleep", noun, 2), ("sleep", verb, 6)]
    return [[(word, tag)] for word, tag, count in counts for _ in range(count)]
