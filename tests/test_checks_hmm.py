"""Tests of the exercise checks of 02-hmm (nlpcourse.checks.hmm) and of their answer key.

Student-style implementations written here (none calls nlpcourse.hmm): right ones, also written
unlike the reference and returned in other reasonable forms, must pass the hidden checks; each
usual mistake must fail with a message naming it; a wrong answer nobody anticipated must fail with
the input, the expected answer and the answer it got. The add-k answer key is checked against
counts worked out by hand.
"""

import itertools
import math
from collections import namedtuple
from fractions import Fraction

import numpy as np
import pytest
import torch
from checks_corpus import (
    named_visible_and_hidden,
    names_by_check,
    passes_visible_and_hidden,
    wrong_with_right_name_or_none,
)

import nlpcourse.checks.hmm as checks
from nlpcourse.checks import CheckFailed
from nlpcourse.checks.hmm import addk_answer
from nlpcourse.examples import i_go_to_school_log


def log(p):
    """np.log with log(0) = -inf and no warning."""
    with np.errstate(divide="ignore"):
        return np.log(p)


def student_forward(log_start, log_trans, log_emit, combine=np.logaddexp.reduce):
    alpha = log_start + log_emit[0]
    for t in range(1, len(log_emit)):
        alpha = combine(alpha[:, None] + log_trans, axis=0) + log_emit[t]
    return float(np.logaddexp.reduce(alpha))


def student_forward_in_probabilities(log_start, log_trans, log_emit):
    start, trans, emit = np.exp(log_start), np.exp(log_trans), np.exp(log_emit)
    alpha = start * emit[0]
    for t in range(1, len(emit)):
        alpha = (alpha @ trans) * emit[t]
    return float(log(alpha.sum()))


def student_viterbi(log_start, log_trans, log_emit, backptr_row=0):
    T, N = log_emit.shape
    delta, backptr = log_start + log_emit[0], np.zeros((T, N), dtype=int)
    for t in range(1, T):
        backptr[t] = np.argmax(delta[:, None] + log_trans, axis=0)
        delta = np.max(delta[:, None] + log_trans, axis=0) + log_emit[t]
    path = [int(np.argmax(delta))]
    for t in range(T - 1, 0, -1):
        path.append(int(backptr[t + backptr_row, path[-1]]))  # backptr_row = -1: off by one
    return path[::-1], float(np.max(delta))


def student_greedy(log_start, log_trans, log_emit):
    scores = log_start + log_emit[0]
    path, logprob = [int(np.argmax(scores))], float(np.max(scores))
    for t in range(1, len(log_emit)):
        scores = log_trans[path[-1]] + log_emit[t]
        path.append(int(np.argmax(scores)))
        logprob += float(np.max(scores))
    return path, logprob


def student_unnormalised_posterior(log_start, log_trans, log_emit):
    T, N = log_emit.shape
    alpha, beta = np.zeros((T, N)), np.zeros((T, N))
    alpha[0] = log_start + log_emit[0]
    for t in range(1, T):
        alpha[t] = np.logaddexp.reduce(alpha[t - 1][:, None] + log_trans, axis=0) + log_emit[t]
    for t in range(T - 2, -1, -1):
        beta[t] = np.logaddexp.reduce(log_trans + log_emit[t + 1] + beta[t + 1], axis=1)
    return np.exp(alpha + beta)  # not divided by P(words)


def student_tables_in_probabilities(tagged_sentences, tags, words, k):
    N, V = len(tags), len(words)
    start, trans, emit = np.zeros(N), np.zeros((N, N)), np.zeros((V, N))
    for sentence in tagged_sentences:
        ids = [tags.index(tag) for _, tag in sentence]
        if ids:
            start[ids[0]] += 1
        for i, j in itertools.pairwise(ids):
            trans[i, j] += 1
        for word, tag in sentence:
            emit[words.index(word), tags.index(tag)] += 1
    return (
        (start + k) / (start.sum() + k * N),
        (trans + k) / (trans.sum(axis=1, keepdims=True) + k * N),
        (emit + k) / (emit.sum(axis=0) + k * V),
    )  # no log


def student_accuracy(tagger, tagged_sentences):
    correct, total = {"known": 0, "unknown": 0}, {"known": 0, "unknown": 0}
    for sentence in tagged_sentences:
        tags = tagger.tag_sents([[w for w, _ in sentence]])[0]
        for (word, gold), tag in zip(sentence, tags, strict=True):
            kind = "known" if word in tagger.vocab_ else "unknown"
            total[kind] += 1
            correct[kind] += gold == tag
    n = sum(total.values())
    return {
        "all": sum(correct.values()) / n,
        "known": correct["known"] / total["known"],
        "unknown": correct["unknown"] / total["unknown"],
        "unknown_rate": total["unknown"] / n,
    }


def student_accuracy_per_sentence(tagger, tagged_sentences):
    per_sentence = [
        np.mean([g == t for (_, g), t in zip(s, tagger.tag([w for w, _ in s]), strict=True)])
        for s in tagged_sentences
    ]
    return student_accuracy(tagger, tagged_sentences) | {"all": np.mean(per_sentence)}


def test_checks_pass_right_implementations():
    checks.check_forward(student_forward)
    checks.check_viterbi(student_viterbi)
    checks.check_tagging_accuracy(student_accuracy)
    checks.check_forward(student_forward, hidden=True)
    checks.check_viterbi(student_viterbi, hidden=True)
    checks.check_tagging_accuracy(student_accuracy, hidden=True)


MISTAKE_CASES = (
    "check,student,message",
    [
        (checks.check_forward, lambda s, a, e: student_forward(s, a.T, e), "read transposed"),
        (
            checks.check_forward,
            lambda *tables: student_forward(*tables, combine=np.max),
            "max over previous tags",
        ),
        (checks.check_forward, student_forward_in_probabilities, "far below the smallest"),
        (checks.check_viterbi, student_greedy, "(greedy)"),
        (
            checks.check_viterbi,
            lambda *tables: student_viterbi(*tables, backptr_row=-1),
            "path[t-1] = backptr[t, path[t]]",
        ),
        (checks.check_forward_backward, student_unnormalised_posterior, "divide by P(words)"),
        (checks.check_addk_tables, student_tables_in_probabilities, "returned probabilities"),
        (checks.check_tagging_accuracy, student_accuracy_per_sentence, "averaged the accuracies"),
    ],
)
NAMED = names_by_check(MISTAKE_CASES[1])


@pytest.mark.parametrize(*MISTAKE_CASES)
def test_checks_name_the_mistake(check, student, message):
    """On the visible cases (and the hidden ones): named, and given no other name of the part."""
    named_visible_and_hidden(check, student, message, NAMED, likely=False)


# ------------------------------------------------------------------ other right forms


def student_forward_float32(log_start, log_trans, log_emit):
    alpha = (log_start + log_emit[0]).astype(np.float32)
    for t in range(1, len(log_emit)):
        scores = alpha[:, None] + log_trans.astype(np.float32)  # (N, N)
        alpha = np.logaddexp.reduce(scores, axis=0) + log_emit[t].astype(np.float32)
    return np.logaddexp.reduce(alpha)  # a numpy float32 scalar


Decoded = namedtuple("Decoded", "path logprob")


def student_viterbi_forms(log_start, log_trans, log_emit):
    path, logprob = student_viterbi(log_start, log_trans, log_emit)
    return Decoded(np.array(path, dtype=np.int32), np.float64(logprob))


def student_posterior(log_start, log_trans, log_emit):
    """Forward-backward as a torch tensor (float64)."""
    T, N = log_emit.shape
    alpha, beta = np.zeros((T, N)), np.zeros((T, N))
    alpha[0] = log_start + log_emit[0]
    for t in range(1, T):
        alpha[t] = np.logaddexp.reduce(alpha[t - 1][:, None] + log_trans, axis=0) + log_emit[t]
    for t in range(T - 2, -1, -1):
        beta[t] = np.logaddexp.reduce(log_trans + log_emit[t + 1] + beta[t + 1], axis=1)
    gamma = alpha + beta - np.logaddexp.reduce(alpha[-1])
    return torch.from_numpy(np.exp(gamma))


def student_tables_as_lists(tagged_sentences, tags, words, k):
    probabilities = student_tables_in_probabilities(tagged_sentences, tags, words, k)
    return [np.log(table).tolist() for table in probabilities]


def student_accuracy_fractions(tagger, tagged_sentences):
    scores = student_accuracy(tagger, tagged_sentences)
    return {k: Fraction(v).limit_denominator(1000) for k, v in scores.items()} | {"extra": 1}


@pytest.mark.parametrize(
    "check,student",
    [
        (checks.check_forward, student_forward_float32),
        (checks.check_viterbi, student_viterbi_forms),
        (checks.check_forward_backward, student_posterior),
        (checks.check_addk_tables, student_tables_as_lists),
        (checks.check_tagging_accuracy, student_accuracy_fractions),
    ],
)
def test_right_answers_in_other_forms_pass(check, student, capsys):
    passes_visible_and_hidden(check, student, capsys)


def test_more_mistakes_are_named():
    def tables_every_occurrence(tagged_sentences, tags, words, k):
        """a_ij divided by every occurrence of tag i, also those that end a sentence."""
        start, trans, emit = student_tables_in_probabilities(tagged_sentences, tags, words, k)
        counts = np.zeros((len(tags), len(tags)))
        ends = np.zeros(len(tags))
        for sentence in tagged_sentences:
            ids = [tags.index(tag) for _, tag in sentence]
            for i, j in itertools.pairwise(ids):
                counts[i, j] += 1
            if ids:
                ends[ids[-1]] += 1
        trans = (counts + k) / (counts.sum(axis=1, keepdims=True) + ends[:, None] + k * len(tags))
        return np.log(start), np.log(trans), np.log(emit)

    with pytest.raises(CheckFailed, match="likely mistake: the denominator of a_ij counts every"):
        checks.check_addk_tables(tables_every_occurrence)

    def alpha_only(log_start, log_trans, log_emit):
        alpha = student_posterior(log_start, log_trans, log_emit)  # right, then undo beta
        T, N = log_emit.shape
        a = np.zeros((T, N))
        a[0] = log_start + log_emit[0]
        for t in range(1, T):
            a[t] = np.logaddexp.reduce(a[t - 1][:, None] + log_trans, axis=0) + log_emit[t]
        del alpha
        return np.exp(a - np.logaddexp.reduce(a, axis=1, keepdims=True))

    with pytest.raises(CheckFailed, match="likely mistake: beta is left out"):
        checks.check_forward_backward(alpha_only)

    with np.errstate(divide="ignore", under="ignore"):
        with pytest.raises(CheckFailed, match="likely mistake: P\\(words\\) of a sentence"):
            checks.check_forward(student_forward_in_probabilities)


def test_an_unanticipated_wrong_answer_shows_input_expected_and_got():
    with pytest.raises(CheckFailed) as failure:
        checks.check_forward(lambda *tables: -1.5)
    message = str(failure.value)
    assert "case 1 of" in message and "(a one-word sentence)" in message
    assert "log_emit = [[-2.302585" in message
    assert f"expected: {math.log(0.28)!r}" in message and "got:      -1.5" in message
    assert "hint: print your alpha" in message and "the right alpha_1 = " in message
    assert "likely mistake" not in message


def test_the_worked_example_is_a_case():
    """The check's 'I go to school' case is the chapter's, whose best path is worked by hand."""
    path, logprob = student_viterbi(*i_go_to_school_log())
    assert path == [3, 2, 1, 0]
    assert math.exp(logprob) == pytest.approx(0.67 * 0.37 * 0.12 * 0.85 * 0.16 * 0.99 * 0.83 * 0.8)


# ------------------------------------------------------------------ the add-k answer key

TINY = [
    [("the", "DET"), ("dog", "NOUN"), ("barks", "VERB")],
    [("the", "DET"), ("dog", "NOUN"), ("sleeps", "VERB")],
    [("a", "DET"), ("cat", "NOUN"), ("barks", "VERB")],
]


def test_addk_answer_by_hand():
    """TINY: 3 sentences, all DET NOUN VERB; the 2, a 1, dog 2, cat 1, barks 2, sleeps 1."""
    tags, words = ["DET", "NOUN", "VERB"], ["a", "barks", "cat", "dog", "sleeps", "the"]
    log_start, log_trans, log_emit_table = addk_answer(TINY + [[]], tags, words, k=1.0)
    assert log_start.shape == (3,) and log_trans.shape == (3, 3) and log_emit_table.shape == (6, 3)
    # start: 3 sentences start with DET, (3 + 1) / (3 + 1 * 3)
    np.testing.assert_allclose(np.exp(log_start), [4 / 6, 1 / 6, 1 / 6])
    # DET -> NOUN and NOUN -> VERB 3 times each; VERB always ends the sentence: no counts
    np.testing.assert_allclose(
        np.exp(log_trans), [[1 / 6, 4 / 6, 1 / 6], [1 / 6, 1 / 6, 4 / 6], [1 / 3, 1 / 3, 1 / 3]]
    )
    # DET: c = 3 (the 2, a 1), V = 6: (c(DET, w) + 1) / (3 + 6)
    emit = np.exp(log_emit_table)
    np.testing.assert_allclose(emit[:, 0], np.array([2, 1, 1, 1, 1, 3]) / 9)
    np.testing.assert_allclose(emit[:, 2], np.array([1, 3, 1, 1, 2, 1]) / 9)
    # k = 0.5 on one entry: P(dog | NOUN) = (2 + 0.5) / (3 + 0.5 * 6)
    _, _, half = addk_answer(TINY, tags, words, k=0.5)
    assert math.exp(half[3, 1]) == pytest.approx(2.5 / 6)
    # a row of A is a distribution even for a tag that ends sentences
    corpus = TINY + [[("dog", "NOUN")]]
    _, log_trans, _ = addk_answer(corpus, tags, words, k=1.0)
    np.testing.assert_allclose(np.exp(log_trans[1]), [1 / 6, 1 / 6, 4 / 6])
    np.testing.assert_allclose(np.exp(log_trans).sum(axis=1), 1.0)


# --------------------------------------------- issue 27: plausible wrong answers, right names


def _tables_log(*args):
    return tuple(log(t) for t in student_tables_in_probabilities(*args))


def forward_emission_one_step_late(log_start, log_trans, log_emit):
    """Step t adds the emission of word t - 1 (an index off by one)."""
    alpha = log_start + log_emit[0]
    for t in range(1, len(log_emit)):
        alpha = np.logaddexp.reduce(alpha[:, None] + log_trans, axis=0) + log_emit[t - 1]
    return float(np.logaddexp.reduce(alpha))


def accuracy_swapped_rates(tagger, tagged_sentences):
    out = student_accuracy(tagger, tagged_sentences)
    return out | {"unknown_rate": 1 - out["unknown_rate"]}


WRONG = [  # (check, a plausible wrong answer, the name it must get, or None: expected / got)
    (checks.check_addk_tables, lambda *a: tuple(t.T for t in _tables_log(*a)),
     None),  # log_trans transposed too: not the mistake of log_emit_table alone (issue 42)
    (checks.check_addk_tables, lambda *a: (*_tables_log(*a)[:2], _tables_log(*a)[2].T),
     "log_emit_table is transposed"),
    (checks.check_addk_tables, lambda s, t, w, k: _tables_log(s, t, w, 0.0 * k + 1.0), None),
    (checks.check_addk_tables, lambda s, t, w, k: _tables_log(s, t, w, k)[::-1], None),
    (checks.check_forward, lambda s, a, e: student_forward(s, a, e) / len(e), None),
    (checks.check_forward, lambda s, a, e: student_forward(s, a, e[::-1]), None),
    (checks.check_forward, forward_emission_one_step_late, None),
    (checks.check_viterbi, lambda s, a, e: (student_viterbi(s, a, e)[0],
                                            student_forward(s, a, e)), None),
    (checks.check_viterbi, lambda s, a, e: (student_viterbi(s, a, e)[0][::-1],
                                            student_viterbi(s, a, e)[1]), None),
    (checks.check_viterbi, lambda s, a, e: (student_viterbi(s, a, e)[0],
                                            float(np.exp(student_viterbi(s, a, e)[1]))), None),
    (checks.check_forward_backward, lambda s, a, e: student_posterior(s, a, e).numpy().T, None),
    (checks.check_forward_backward, lambda s, a, e: np.log(student_posterior(s, a, e).numpy()),
     "returned log probabilities"),
    (checks.check_forward_backward, lambda s, a, e: np.ones(e.shape) / e.shape[1], None),
    (checks.check_tagging_accuracy, accuracy_swapped_rates, None),
    (checks.check_tagging_accuracy, lambda tg, s: student_accuracy(tg, s) | {"all": 1.0}, None),
    (checks.check_tagging_accuracy,
     lambda tg, s: {k: v * 100 for k, v in student_accuracy(tg, s).items()}, None),
]  # fmt: skip


@pytest.mark.parametrize("check, student, named", WRONG)
def test_plausible_wrong_answers_fail_the_visible_cases_with_the_right_name_or_none(
    check, student, named
):
    wrong_with_right_name_or_none(check, student, named)


def test_viterbi_without_the_start_distribution_is_told_to_check_it():
    """Issue 42: a right path with a score that leaves out log_start got advice its code
    already followed ("return max_j delta_T(j))"."""

    def student(log_start, log_trans, log_emit):
        path, _ = student_viterbi(log_start, log_trans, log_emit)
        return path, student_viterbi(np.zeros_like(log_start), log_trans, log_emit)[1]

    with pytest.raises(CheckFailed) as failed:
        checks.check_viterbi(student)
    assert "log_start" in str(failed.value).split("got:")[1], str(failed.value)
