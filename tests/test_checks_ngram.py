"""Tests of the exercise checks of 01-ngrams (nlpcourse.checks.ngram) and of the core they use.

Student-style functions written here, none calling nlpcourse.ngram: right answers written unlike the
reference (and returned in other reasonable forms) must pass the hidden checks; each usual mistake
must fail with a message naming it; a wrong answer nobody anticipated must fail with the input,
the expected answer and the answer it got. The attacks of issue 16 items 8-10 (an answer object
that computes the reference when compared, reading the expected answer from the checker's frames,
counts that only claim to be equal) must score nothing.
"""

import math
import sys
from collections import Counter, defaultdict
from fractions import Fraction

import numpy as np
import pytest
from checks_corpus import (
    named_visible_and_hidden,
    names_by_check,
    passes_visible_and_hidden,
    wrong_with_right_name_or_none,
)

import nlpcourse.ngram
from nlpcourse.checks import CheckFailed
from nlpcourse.checks import ngram as checks

BOS, EOS = "<s>", "</s>"


# ------------------------------------------------------------------ right answers, written anew


def padded(sentence, n, starts=None, end=True):
    starts = n - 1 if starts is None else starts
    return [BOS] * starts + list(sentence) + ([EOS] if end else [])


def count_with_defaultdict(sentences, n, starts=None, end=True, value=int):
    counts = defaultdict(value)
    for sentence in sentences:
        words = padded(sentence, n, starts, end)
        for i in range(n, len(words) + 1):
            counts[tuple(words[i - n : i])] += 1
    return counts


def c_context(counts, context):
    return sum(c for key, c in counts.items() if key[: len(context)] == tuple(context))


def mle_as_fraction(counts, context, word):
    total = c_context(counts, context)
    return Fraction(counts.get(tuple(context) + (word,), 0), total) if total else Fraction(0)


def addk_float32(counts, context, word, vocab_size, k):
    c = counts.get(tuple(context) + (word,), 0)
    return np.float32((c + k) / (c_context(counts, context) + k * vocab_size))


def perplexity_numpy(prob, sentences, n):
    probs = np.array(
        [prob(tuple(w[i - n + 1 : i]), w[i]) for s in sentences for w in [padded(s, n)]
         for i in range(n - 1, len(w))]
    )  # fmt: skip
    if (probs == 0).any():
        return np.inf
    return np.exp(-np.log(probs).mean())


def perplexity_product(prob, sentences, n):
    p, N = 1.0, 0
    for s in sentences:
        w = padded(s, n)
        for i in range(n - 1, len(w)):
            p *= prob(tuple(w[i - n + 1 : i]), w[i])
            N += 1
    return math.inf if p == 0 else p ** (-1 / N)


def continuation_fraction(bigram_counts, word):
    types = {key for key, c in bigram_counts.items() if c > 0}
    return Fraction(len({v for v, w in types if w == word}), len(types))


def kn(bigram_counts, context, word, vocab_size, d, variant=""):
    """Interpolated Kneser-Ney from the chapter's equations, or with the plain continuation
    probability as its lower order (a mistake)."""
    (v,) = context
    types = {key for key, c in bigram_counts.items() if c > 0}
    n_before = len([1 for _, w in types if w == word])
    n_words = len({w for _, w in types})
    lower = max(n_before - d, 0) / len(types) + d * n_words / len(types) / vocab_size
    if variant == "plain-continuation":
        lower = n_before / len(types)
    c_v = sum(c for (u, _), c in bigram_counts.items() if u == v)
    if c_v == 0:
        return lower
    after = len([1 for u, _ in types if u == v])
    return max(bigram_counts.get((v, word), 0) - d, 0) / c_v + d * after / c_v * lower


@pytest.mark.parametrize(
    "check,student",
    [
        (checks.check_count_ngrams, count_with_defaultdict),
        (checks.check_count_ngrams, lambda s, n: Counter(count_with_defaultdict(s, n))),
        (checks.check_count_ngrams, lambda s, n: count_with_defaultdict(s, n, value=float)),
        (
            checks.check_count_ngrams,
            lambda s, n: (
                {k: np.int64(c) for k, c in count_with_defaultdict(s, n).items()}
                | {("never", "seen")[:n]: 0}
            ),  # a zero count may be kept
        ),
        (checks.check_mle_prob, mle_as_fraction),
        (checks.check_mle_prob, lambda *a: np.float64(mle_as_fraction(*a))),
        (checks.check_addk_prob, addk_float32),
        (checks.check_perplexity, perplexity_numpy),
        (checks.check_continuation_prob, continuation_fraction),
        (checks.check_kn_bigram_prob, kn),
    ],
)
def test_right_answers_in_other_forms_pass(check, student, capsys):
    passes_visible_and_hidden(check, student, capsys)


# ------------------------------------------------------------------ mistakes named


MISTAKE_CASES = (
    "check,student,message",
    [
        (
            checks.check_count_ngrams,
            lambda s, n: count_with_defaultdict(s, n, starts=n),
            "you padded with n = 1 '<s>'",
        ),
        (
            checks.check_count_ngrams,
            lambda s, n: count_with_defaultdict(s, n, end=False),
            "you left out the end symbol '</s>'",
        ),
        (
            checks.check_count_ngrams,
            lambda s, n: count_with_defaultdict(s, n, starts=0),
            "no '<s>' at the start",
        ),
        (
            checks.check_count_ngrams,
            lambda s, n: count_with_defaultdict([[w for x in s for w in x]], n),
            "one stream",
        ),
        (
            checks.check_mle_prob,
            lambda counts, context, word: (
                counts.get(tuple(context) + (word,), 0)
                / max(1, len([k for k in counts if k[:-1] == tuple(context)]))
            ),
            "different words that follow the context (types)",
        ),
        (
            checks.check_addk_prob,
            lambda c, x, w, V, k: addk_float32(c, x, w, V, 1.0),
            "1 in place of k",
        ),
        (
            checks.check_addk_prob,
            lambda c, x, w, V, k: (c.get(tuple(x) + (w,), 0) + k) / (c_context(c, x) + k),
            "needs k |V|, not k",
        ),
        (checks.check_perplexity, perplexity_product, "you multiplied the probabilities"),
        (
            checks.check_continuation_prob,
            lambda b, w: sum(c for (_, x), c in b.items() if x == w) / sum(b.values()),
            "you counted tokens",
        ),
        (
            checks.check_kn_bigram_prob,
            lambda *a: kn(*a, variant="plain-continuation"),
            "plain continuation probability",
        ),
    ],
)
NAMED = names_by_check(MISTAKE_CASES[1])


@pytest.mark.parametrize(*MISTAKE_CASES)
def test_each_mistake_is_named(check, student, message):
    """On the visible cases (and the hidden ones): named, and given no other name of the part."""
    named_visible_and_hidden(check, student, message, NAMED)


def test_the_mistake_not_the_case_gives_the_hint():
    """Issue 16 item 12: padding with n '<s>' fails case 1 (n = 1), whose hint is about '</s>'."""
    with pytest.raises(CheckFailed) as failure:
        checks.check_count_ngrams(lambda s, n: count_with_defaultdict(s, n, starts=n))
    message = str(failure.value)
    assert "case 1 of" in message and "n = 1 '<s>'" in message
    assert "count it" not in message  # the case's hint about '</s>' is not shown


def test_a_wrong_kneser_ney_answer_shows_its_parts():
    with pytest.raises(CheckFailed) as failure:
        checks.check_kn_bigram_prob(lambda *a: kn(*a) * 1.1)
    message = str(failure.value)
    for part in ("discounted term", "back-off weight", "lambda(I)", "continuation", "P_KN(am)"):
        assert part in message, part


def test_an_unanticipated_wrong_answer_shows_input_expected_and_got():
    with pytest.raises(CheckFailed) as failure:
        checks.check_mle_prob(lambda counts, context, word: 0.123)
    message = str(failure.value)
    assert "case 1 of" in message and "context = ('I',)" in message and "word = 'am'" in message
    assert "expected: 0.666666" in message and "got:      0.123" in message
    assert "hint: the right answer is c(context, word) / c(context) = 2 / 3" in message
    assert "likely mistake" not in message


def test_an_exception_and_a_missing_function_are_reported():
    def broken(sentences, n):
        return {}[0]

    with pytest.raises(CheckFailed, match="raised KeyError.*\n.*case 1"):
        checks.check_count_ngrams(broken)

    def not_written(sentences, n):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not written yet"):
        checks.check_count_ngrams(not_written)
    with pytest.raises(CheckFailed, match="should be a function"):
        checks.check_count_ngrams(None)


# ------------------------------------------------------------------ issue 16 items 8-11


class ComputesTheAnswerWhenCompared(float):
    """A float that turns into the reference answer whenever the check looks at it (item 8)."""

    args = None

    def __float__(self):
        return nlpcourse.ngram.mle_prob(*self.args)

    def __eq__(self, other):
        return True

    __hash__ = float.__hash__


def test_an_answer_that_computes_the_reference_when_compared_scores_nothing():
    def student(counts, context, word):
        answer = ComputesTheAnswerWhenCompared(0.0)
        answer.args = (counts, context, word)
        return answer

    with pytest.raises(CheckFailed, match="subclass of float"):
        checks.check_mle_prob(student)

    class LazyCounts(dict):  # items() runs the reference: old checks called it after the switch
        def items(self):
            return nlpcourse.ngram.count_ngrams(*self.args).items()

    def counts_student(sentences, n):
        answer = LazyCounts()
        answer.args = (sentences, n)
        return answer

    with pytest.raises(CheckFailed, match="subclass of dict"):
        checks.check_count_ngrams(counts_student)

    class HasFloat:  # not a number at all, but float() of it is the reference answer
        def __init__(self, args):
            self.args = args

        def __float__(self):
            return nlpcourse.ngram.mle_prob(*self.args)

    with pytest.raises(CheckFailed, match="it is a HasFloat"):
        checks.check_mle_prob(lambda *args: HasFloat(args))


def test_the_expected_answer_is_not_on_the_students_stack():
    """Item 9: while the student's function runs, no frame above it holds the answer."""
    found = []

    def student(counts, context, word):
        right = mle_as_fraction(counts, context, word)
        frame = sys._getframe(1)
        while frame is not None:
            for name, value in frame.f_locals.items():
                values = value if isinstance(value, list) else [value]
                for v in values:
                    if isinstance(v, float) and right not in (0, 1) and v == right:
                        found.append((frame.f_code.co_name, name))
            frame = frame.f_back
        return right

    checks.check_mle_prob(student, hidden=True)
    assert found == []


class ClaimsEquality:
    """A 'count' that says it equals whatever it is compared with (item 10)."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):  # "not 0", so that the old check kept it, and equal to any count
        return other == 0


def test_counts_must_be_whole_numbers():
    def types_only(sentences, n):  # the right keys, but no counting
        return {key: ClaimsEquality() for key in count_with_defaultdict(sentences, n)}

    with pytest.raises(CheckFailed, match="ClaimsEquality"):
        checks.check_count_ngrams(types_only)

    def halves(sentences, n):
        return {k: c + 0.5 for k, c in count_with_defaultdict(sentences, n).items()}

    with pytest.raises(CheckFailed, match="whole number"):
        checks.check_count_ngrams(halves)

    def booleans(sentences, n):
        return {k: True for k in count_with_defaultdict(sentences, n)}

    with pytest.raises(CheckFailed, match="whole number"):
        checks.check_count_ngrams(booleans)


def test_perplexity_has_a_case_that_underflows_a_product():
    """Item 11: the product of probabilities passes every short case but not the long one."""
    with pytest.raises(CheckFailed) as failure:
        checks.check_perplexity(perplexity_product)
    message = str(failure.value)
    assert "words)" in message and "predicted words in all" in message
    assert "multiplied the probabilities" in message


# --------------------------------------------- issue 27: plausible mistakes that no check names


def perplexity_log2_mixed(prob, sentences, n):
    """log base 2 for the mean, e for the power: a mixed-up base."""
    logs = [math.log2(prob(tuple(w[i - n + 1 : i]), w[i])) for s in sentences
            for w in [padded(s, n)] for i in range(n - 1, len(w))]  # fmt: skip
    return math.exp(-sum(logs) / len(logs))


def perplexity_per_sentence(prob, sentences, n):
    """The mean of each sentence's perplexity, not the perplexity of all the words."""
    values = [perplexity_numpy(prob, [s], n) for s in sentences]
    return float(np.mean(values))


WRONG = [  # (check, a plausible wrong answer, the name it must get, or None: expected / got)
    (checks.check_count_ngrams, lambda s, n: {" ".join(k): c for k, c in
                                              count_with_defaultdict(s, n).items()}, None),
    (checks.check_count_ngrams, lambda s, n: count_with_defaultdict([[w.lower() for w in x]
                                                                     for x in s], n), None),
    (checks.check_count_ngrams, lambda s, n: {k: c + 1 for k, c in count_with_defaultdict(s, n)
                                               .items()}, None),  # add-one counts
    (checks.check_mle_prob, lambda c, x, w: c.get(tuple(x) + (w,), 0) / sum(c.values()),
     "divided by the number of all n-grams"),
    (checks.check_mle_prob, lambda c, x, w: c.get(tuple(x) + (w,), 0), "you returned the count"),
    (checks.check_mle_prob, lambda c, x, w: (c.get(tuple(x) + (w,), 0) + 1)
     / (c_context(c, x) + 1), None),
    (checks.check_mle_prob, lambda c, x, w: float(mle_as_fraction(c, x, w)) or 0.5, None),
    (checks.check_addk_prob, lambda c, x, w, V, k: (c.get(tuple(x) + (w,), 0) + k)
     / (c_context(c, x) + k * (V + 1)), None),
    (checks.check_addk_prob, lambda c, x, w, V, k: (c.get(tuple(x) + (w,), 0) + k) / V, None),
    (checks.check_addk_prob, lambda c, x, w, V, k: float(addk_float32(c, x, w, V, k)) ** 0.5,
     None),
    (checks.check_perplexity, perplexity_log2_mixed, "mixed logarithm bases"),
    (checks.check_perplexity, perplexity_per_sentence, None),
    (checks.check_perplexity, lambda prob, s, n: math.log(perplexity_numpy(prob, s, n)), None),
    (checks.check_perplexity, lambda prob, s, n: perplexity_numpy(prob, s, n) ** 0.5, None),
    (checks.check_continuation_prob, lambda b, w: float(continuation_fraction(b, w)) / 2, None),
    (checks.check_continuation_prob, lambda b, w: len({v for (v, x), c in b.items() if x == w
                                                       and c}) / len({x for (_, x), c in b.items()
                                                                      if c}),
     "divided by the number of different words"),
    (checks.check_continuation_prob, lambda b, w: len({v for (v, x) in b if x == w}), None),
    (checks.check_continuation_prob, lambda b, w: len({v for (v, x) in b if x == w})
     / (len(b) + 1), None),
    (checks.check_kn_bigram_prob, lambda b, x, w, V, d: kn(b, x, w, V, 0.0), None),
    (checks.check_kn_bigram_prob, lambda b, x, w, V, d: kn(b, x, w, V, d) * 0.5 + 0.5 / V, None),
    (checks.check_kn_bigram_prob, lambda b, x, w, V, d: kn(b, x, w, V, d / 2), None),
]  # fmt: skip


@pytest.mark.parametrize("check, student, named", WRONG)
def test_plausible_wrong_answers_fail_the_visible_cases_with_the_right_name_or_none(
    check, student, named
):
    wrong_with_right_name_or_none(check, student, named)


def test_a_wrong_answer_on_an_unseen_context_gets_a_message_not_a_checker_error():
    """A usual mistake whose formula divides by c(context) + 0 has no answer on an unseen context;
    computing it there made the checker itself raise ZeroDivisionError (found by issue 27's
    property test)."""
    student = lambda c, x, w, V, k: addk_float32(c, x, w, V, k) if c_context(c, x) else 0.0  # noqa: E731
    with pytest.raises(CheckFailed, match="unseen context") as info:
        checks.check_addk_prob(student)
    assert "expected" in str(info.value)
