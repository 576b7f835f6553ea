"""Checks for exercise 01-ngrams (chapter 1): cases, answers and usual mistakes.

Each check compares a student's function with the reference of the same name in
:mod:`nlpcourse.ngram` through :func:`nlpcourse.checks.core.run_check`, which documents the
machinery. The usual mistakes are computed here by code written to make them (padding with ``n``
start symbols, tokens where types belong, a product of probabilities that underflows, a
Kneser-Ney without its discount, ...), so that a wrong answer is named by what it shows, whatever
case it fails on. A wrong probability or perplexity (a single number, which says nothing of
where it went wrong) is shown with the parts of the right one (counts, N, the sum of the logs, the
terms of Kneser-Ney), and wrong counts with a hint drawn from the n-grams that differ (issue 42:
hints follow the answer, not the case).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from typing import Any

from nlpcourse import ngram
from nlpcourse.checks.core import (
    Case,
    Expected,
    Mistake,
    compare_counts,
    compare_numbers,
    n_random,
    py_rng,
    run_check,
    show,
    with_args,
)
from nlpcourse.examples import i_am_nlp

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]
WORKED = i_am_nlp()

PAD_HINT = "pad each sentence with n-1 '<s>' at the start and one '</s>' at the end, then count"


def random_corpus(rng: random.Random, n_sentences: int, max_len: int) -> list[list[str]]:
    vocab = WORDS[: rng.randint(3, len(WORDS))]
    return [[rng.choice(vocab) for _ in range(rng.randint(0, max_len))] for _ in range(n_sentences)]


def _types(corpus: list[list[str]]) -> list[str]:
    return sorted({w for s in corpus for w in s})


def _vocab_size(corpus: list[list[str]]) -> int:
    """|V| for a corpus: its word types plus '</s>' and '<unk>'."""
    return len(_types(corpus)) + 2


# ------------------------------------------------------------------------------ part 1


def _count(sentences: list, n: int, starts: int, end: bool = True, skip_empty: bool = False):
    """n-gram counts with ``starts`` start symbols and (if ``end``) an end symbol: the right
    counts for ``starts = n - 1``, a usual mistake otherwise."""
    counts: dict = {}
    for sentence in sentences:
        if skip_empty and not sentence:
            continue
        padded = [BOS] * starts + list(sentence) + ([EOS] if end else [])
        for i in range(len(padded) - n + 1):
            key = tuple(padded[i : i + n])
            counts[key] = counts.get(key, 0) + 1
    return counts


def _count_stream(sentences: list, n: int) -> dict:
    """The sentences joined into one stream, padded once (a mistake)."""
    return _count([[w for s in sentences for w in s]], n, n - 1)


def _count_mistakes(sentences: list, n: int) -> list[Mistake]:
    return [
        Mistake(
            "you left out the end symbol '</s>': the model predicts it, so pad one '</s>' at the "
            "end of every sentence and count the n-grams that end in it",
            _count(sentences, n, n - 1, end=False),
        ),
        Mistake(
            f"you padded with n = {n} '<s>' at the start: an n-gram model needs n-1 of them (one "
            "for bigrams, two for trigrams, none for unigrams)",
            _count(sentences, n, n),
            key="n start symbols",
        ),
        Mistake(
            "you padded with one '<s>' whatever n is: an n-gram model needs n-1 of them",
            _count(sentences, n, 1),
        ),
        Mistake(
            "no '<s>' at the start: the first word's n-gram needs n-1 start symbols as context",
            _count(sentences, n, 0),
        ),
        Mistake(
            "an empty sentence still gives one n-gram, ('<s>', ..., '</s>'): do not skip it",
            _count(sentences, n, n - 1, skip_empty=True),
        ),
        Mistake(
            "you joined the sentences into one stream: pad and count each sentence on its own, "
            "so that no n-gram crosses a sentence boundary",
            _count_stream(sentences, n),
        ),
    ]


def _leading(key: tuple, symbol: str = BOS) -> int:
    """How many ``symbol`` a key starts with."""
    return next((i for i, w in enumerate(key) if w != symbol), len(key))


def _compare_ngram_counts(want: Expected, got: Any) -> str:
    """:func:`compare_counts`, then a hint drawn from the keys that differ (issue 42: hints follow
    the answer): keys of the wrong length, the start or end symbols, or right keys with wrong
    counts."""
    problem = compare_counts(want.value, got)
    if not problem or not isinstance(got, dict) or not all(isinstance(k, tuple) for k in got):
        return problem
    _, n = want.args
    keys = [k for k, c in got.items() if c]
    wrong_length = [k for k in keys if len(k) != n]
    starts = {_leading(k) for k in keys}
    if wrong_length:
        k = wrong_length[0]
        hint = f"your key {k!r} has {len(k)} words: every key of n = {n} is a tuple of {n} words"
    elif max(starts, default=0) > n - 1:
        k = max(keys, key=_leading)
        hint = (
            f"your n-gram {k!r} starts with {_leading(k)} '<s>': pad each sentence with n - 1 = "
            f"{n - 1} of them, so that its first word has n - 1 words of context"
        )
    elif n > 1 and any(_leading(k) == n - 1 for k in want.value) and n - 1 not in starts:
        hint = (
            f"none of your n-grams starts with n - 1 = {n - 1} '<s>': the n-gram of a sentence's "
            "first word is ('<s>', ..., word), with n - 1 start symbols"
        )
    elif not any(k[-1] == EOS for k in keys):
        hint = "none of your n-grams ends in '</s>': pad one '</s>' at the end of every sentence"
    elif set(keys) == set(want.value):
        hint = (
            "you have the right n-grams with wrong counts: each count is how often the n-gram "
            "occurs in the padded sentences, added up over all sentences"
        )
    else:
        hint = PAD_HINT + ", each sentence on its own"
    return f"{problem}\nhint: {hint}"


def check_count_ngrams(count_ngrams: Callable, hidden: bool = False) -> None:
    """``count_ngrams(sentences, n)``: a Counter of n-gram tuples in the padded sentences."""
    names = ("sentences", "n")
    cases = [
        Case(([["a"]], 1), names, "one word, unigrams: no '<s>' (n - 1 = 0), one '</s>'"),
        Case(([["a", "b"]], 2), names, PAD_HINT),
        Case(([[]], 2), names, "an empty sentence: padded, it is ['<s>', '</s>']"),
        Case(([["a", "b", "a"], ["b", "a"]], 3), names, PAD_HINT + " (two '<s>' for trigrams)"),
        Case((WORKED, 2), names, "the chapter's worked example", label="worked example"),
    ]
    rng = py_rng(hidden)
    for i in range(n_random(hidden)):
        n = rng.randint(1, 4)
        corpus = random_corpus(rng, rng.randint(1, 3 + 2 * i), 4 + i // 3)
        cases.append(Case((corpus, n), names, PAD_HINT, label="random"))
    run_check(
        "count_ngrams",
        count_ngrams,
        with_args(ngram.count_ngrams),
        cases,
        _compare_ngram_counts,
        mistakes=_count_mistakes,
    )


# ------------------------------------------------------------------------------ part 2


def _c_context(counts: dict, context: tuple) -> int:
    return sum(c for key, c in counts.items() if key[:-1] == tuple(context))


def _divide(a: float, b: float) -> float | None:
    return a / b if b else None


def _mle_mistakes(counts: dict, context: tuple, word: str) -> list[Mistake]:
    context = tuple(context)
    c_ngram = counts.get(context + (word,), 0)
    n_types = sum(1 for key, c in counts.items() if key[:-1] == context and c > 0)
    return [
        Mistake(
            "you divided by the number of different words that follow the context (types): "
            "c(context) counts tokens, the number of n-grams that start with the context",
            _divide(c_ngram, n_types),
        ),
        Mistake(
            "you divided by the number of all n-grams: divide by c(context), the n-grams that "
            "start with the context",
            _divide(c_ngram, sum(counts.values())),
        ),
        Mistake(
            "you returned the count c(context, word): divide it by c(context)",
            float(c_ngram),
        ),
        Mistake(
            "you swapped context and word: P(word | context) = c(context, word) / c(context)",
            _divide(c_ngram, _c_context(counts, (word,))) if len(context) == 1 else None,
        ),
    ]


def _parts_hint(want: Expected, got: Any, parts: str) -> str:
    """:func:`compare_numbers`, then the parts of the right answer (a single number says nothing
    of where it went wrong; its parts let the student compare their own, one by one)."""
    problem = compare_numbers(want.value, got)
    return f"{problem}\nhint: the right answer is {parts}" if problem else ""


def _compare_mle(want: Expected, got: Any) -> str:
    counts, context, word = want.args
    c_context = _c_context(counts, tuple(context))
    c_ngram = counts.get(tuple(context) + (word,), 0)
    if not c_context:
        parts = f"0.0: c({' '.join(context)}) = 0, an unseen context has no estimate"
    else:
        parts = (
            f"c(context, word) / c(context) = {c_ngram} / {c_context}, where c(context) counts "
            "the n-grams that start with the context (tokens)"
        )
    return _parts_hint(want, got, parts)


def check_mle_prob(mle_prob: Callable, hidden: bool = False) -> None:
    """``mle_prob(counts, context, word)``: c(context, word) / c(context), 0.0 if unseen."""
    names = ("counts", "context", "word")
    bigrams = ngram.count_ngrams(WORKED, 2)
    start_hint = "c(<s>) is the number of n-grams that start with <s>: one per sentence"
    cases = [
        Case((bigrams, ("I",), "am"), names, "c(I am) = 2 and c(I) = 3", "P(am | I)"),
        Case((bigrams, ("<s>",), "I"), names, start_hint, "P(I | <s>)"),
        Case((bigrams, ("<s>",), "NLP"), names, start_hint, "P(NLP | <s>)"),
        Case((bigrams, ("am",), "NLP"), names, "am is followed once by NLP, once by </s>"),
        Case((bigrams, ("I",), "Marks"), names, "an n-gram never seen has count 0"),
        Case((bigrams, ("zebra",), "I"), names, "an unseen context has no estimate: return 0.0"),
    ]
    rng = py_rng(hidden)
    for _ in range(n_random(hidden)):
        corpus = random_corpus(rng, 6, 5)
        counts = ngram.count_ngrams(corpus, rng.randint(1, 3))
        context = rng.choice(list(counts))[:-1]
        word = rng.choice(_types(corpus) + ["</s>"])
        cases.append(Case((counts, context, word), names, label="random"))
    run_check(
        "mle_prob", mle_prob, with_args(ngram.mle_prob), cases, _compare_mle, mistakes=_mle_mistakes
    )


# ------------------------------------------------------------------------------ part 3


def _addk(
    counts: dict, context: tuple, word: str, V: float, k: float, k_below: float
) -> float | None:
    """The add-k estimate with ``k_below`` in the denominator (None where that is 0: the mistake
    gives no answer there, so the message names none)."""
    c_context = _c_context(counts, context)
    if c_context + k_below == 0:
        return None
    return (counts.get(tuple(context) + (word,), 0) + k) / (c_context + k_below)


def _addk_mistakes(counts: dict, context: tuple, word: str, V: int, k: float) -> list[Mistake]:
    return [
        Mistake("you used 1 in place of k: add k, not 1", _addk(counts, context, word, V, 1, V)),
        Mistake(
            "the denominator needs k |V|, not k: every one of the |V| words got k added",
            _addk(counts, context, word, V, k, k),
        ),
        Mistake("the denominator needs k |V|, not |V|", _addk(counts, context, word, V, k, V)),
        Mistake(
            "k is added in the numerator only: add k |V| to the denominator too",
            _addk(counts, context, word, V, k, 0),
        ),
    ]


def _compare_addk(want: Expected, got: Any) -> str:
    counts, context, word, V, k = want.args
    c_context = _c_context(counts, tuple(context))
    c_ngram = counts.get(tuple(context) + (word,), 0)
    parts = (
        f"(c(context, word) + k) / (c(context) + k |V|) = ({c_ngram} + {k}) / ({c_context} + "
        f"{k} * {V})" + (", an unseen context: c(context) = 0" if not c_context else "")
    )
    return _parts_hint(want, got, parts)


def check_addk_prob(addk_prob: Callable, hidden: bool = False) -> None:
    """``addk_prob(counts, context, word, vocab_size, k)``."""
    names = ("counts", "context", "word", "vocab_size", "k")
    bigrams = ngram.count_ngrams(WORKED, 2)
    V = _vocab_size(WORKED)
    cases = [
        Case((bigrams, ("I",), "am", V, 1.0), names, "(c(I am) + 1) / (c(I) + 1 * |V|)"),
        Case((bigrams, ("I",), "Marks", V, 1.0), names, "an unseen n-gram: c(I Marks) = 0"),
        Case((bigrams, ("I",), "am", V, 0.5), names, "k = 0.5: (c(I am) + k) / (c(I) + k |V|)"),
        Case((bigrams, ("zebra",), "am", V, 0.1), names, "unseen context: c(context) = 0"),
    ]
    rng = py_rng(hidden)
    for _ in range(n_random(hidden)):
        corpus = random_corpus(rng, 6, 5)
        counts = ngram.count_ngrams(corpus, rng.randint(1, 3))
        context = rng.choice(list(counts))[:-1]
        k = rng.choice([1.0, 0.5, 0.01, 2.0])
        word = rng.choice(_types(corpus) + ["</s>"])
        cases.append(Case((counts, context, word, _vocab_size(corpus), k), names, label="random"))
    run_check(
        "addk_prob",
        addk_prob,
        with_args(ngram.addk_prob),
        cases,
        _compare_addk,
        mistakes=_addk_mistakes,
    )


# ------------------------------------------------------------------------------ part 4


class TableModel:
    """A model given as a table ``{(context, word): probability}`` (missing entries are 0).

    A plain class, not the reference: the check passes it to the student's ``perplexity``."""

    def __init__(self, table: dict, description: str):
        self.table = table
        self.description = description

    def __call__(self, context: tuple, word: str) -> float:
        return self.table.get((tuple(context), word), 0.0)

    def __repr__(self) -> str:
        return self.description


def _random_bigram_model(rng: random.Random, vocab: list[str]) -> TableModel:
    table = {}
    for v in ["<s>"] + vocab:
        weights = [rng.random() + 0.05 for _ in vocab + ["</s>"]]
        for w, p in zip(vocab + ["</s>"], weights, strict=True):
            table[((v,), w)] = p / sum(weights)
    return TableModel(table, f"a random bigram model over {vocab + ['</s>']}")


def _events(sentences: Iterable, n: int, end: bool = True, starts: int | None = None):
    """(context, word) of every prediction: the right ones, or a mistake's."""
    starts = n - 1 if starts is None else starts
    for sentence in sentences:
        padded = [BOS] * starts + list(sentence) + ([EOS] if end else [])
        for i in range(starts, len(padded)):
            yield tuple(padded[max(0, i - n + 1) : i]), padded[i]


def _perplexity(prob, sentences, n, end=True, extra_per_sentence=0, base=math.e, product=False):
    """Perplexity the right way or with one mistake (see :func:`_perplexity_mistakes`)."""
    events = list(_events(sentences, n, end))
    N = len(events) + extra_per_sentence * len(sentences)
    probabilities = [prob(context, word) for context, word in events]
    if product:
        p = 1.0
        for q in probabilities:
            p *= q
        return math.inf if p == 0 else p ** (-1 / N)
    if any(q == 0 for q in probabilities):
        return math.inf
    return math.exp(-sum(math.log(q, base) for q in probabilities) / N)


def _perplexity_mistakes(prob, sentences, n) -> list[Mistake]:
    return [
        Mistake(
            "you multiplied the probabilities: on a long text their product underflows to 0 "
            "(below about 1e-308), so the perplexity comes out infinite; add log probabilities "
            "instead, eq. (ngram-ppl)",
            _perplexity(prob, sentences, n, product=True),
        ),
        Mistake(
            "N leaves out '</s>': N counts every predicted word, one '</s>' per sentence included",
            _perplexity(prob, sentences, n, extra_per_sentence=-1),
        ),
        Mistake(
            "N counts '<s>' too: '<s>' is never predicted, so it is not in N",
            _perplexity(prob, sentences, n, extra_per_sentence=1),
        ),
        Mistake(
            "the '</s>' predictions are left out: the model predicts '</s>' at the end of every "
            "sentence; score it and count it in N",
            _perplexity(prob, sentences, n, end=False),
        ),
        Mistake(
            "you mixed logarithm bases: with exp, take natural logs (math.log); with log2, "
            "take 2 ** (...)",
            _perplexity(prob, sentences, n, base=2),
        ),
    ]


def _compare_perplexity(want: Expected, got: Any) -> str:
    """:func:`compare_numbers`, then the parts of the right perplexity (N and the sum of the log
    probabilities); an infinite answer where no probability is 0 is told about underflow."""
    problem = compare_numbers(want.value, got)
    if not problem:
        return ""
    prob, sentences, n = want.args
    events = list(_events(sentences, n))
    zero = next(((c, w) for c, w in events if prob(c, w) == 0), None)
    if zero is not None:
        context, word = zero
        parts = f"inf: the model gives P({word} | {' '.join(context)}) = 0, and log 0 = -inf"
    else:
        total = sum(math.log(prob(c, w)) for c, w in events)
        n_words = sum(len(s) for s in sentences)
        parts = (
            f"exp(-(sum of log P) / N) = exp(-({total:.6g}) / {len(events)}), with N = "
            f"{n_words} words + {len(sentences)} '</s>' (one per sentence) = {len(events)} "
            "predictions"
        )
    hint = f"\nhint: the right answer is {parts}"
    if isinstance(got, float) and math.isinf(got) and zero is None:
        hint += (
            f"\nyour perplexity is infinite, but no probability here is 0: a product of "
            f"{len(events)} probabilities underflows to 0.0 (below about 1e-308); add log "
            "probabilities instead"
        )
    return problem + hint


def check_perplexity(perplexity: Callable, hidden: bool = False) -> None:
    """``perplexity(prob, sentences, n)``: exp of the average negative log probability."""
    names = ("prob", "sentences", "n")
    vocab = ["a", "b", "c"]
    uniform = TableModel(
        {((v,), w): 0.25 for v in ["<s>"] + vocab for w in vocab + ["</s>"]},
        "a bigram model giving 1/4 to each of a, b, c, </s> after any word",
    )
    n_hint = "bigrams over the words a, b, c and '</s>'"
    cases = [
        Case((uniform, [["a"]], 2), names, "a uniform model over 4 words has perplexity 4"),
        Case((uniform, [["a", "b"], ["c"], []], 2), names, n_hint),
        Case((_random_bigram_model(random.Random(0), vocab), [["a", "b"]], 2), names, n_hint),
        Case(
            (
                TableModel(
                    {
                        ((), w): p
                        for w, p in zip(vocab + ["</s>"], [0.4, 0.3, 0.2, 0.1], strict=True)
                    },
                    "a unigram model: P(a) = 0.4, P(b) = 0.3, P(c) = 0.2, P(</s>) = 0.1",
                ),
                [["a", "b"], ["c"]],
                1,
            ),
            names,
            "n = 1: no '<s>', the context is empty ()",
            "a unigram model",
        ),
        Case(
            (
                TableModel({(("<s>",), "a"): 1.0}, "a model with P(a | <s>) = 1, all else 0"),
                [["a"]],
                2,
            ),
            names,
            "a probability of 0 makes the perplexity infinite: return math.inf (log(0) fails)",
        ),
    ]
    rng = py_rng(hidden)
    for _ in range(n_random(hidden)):
        model = _random_bigram_model(rng, vocab)
        sentences = [[rng.choice(vocab) for _ in range(rng.randint(0, 6))] for _ in range(4)]
        cases.append(Case((model, sentences, 2), names, n_hint, label="random"))
    cases.append(_long_text_case(hidden, vocab, names))
    run_check(
        "perplexity",
        perplexity,
        with_args(ngram.perplexity),
        cases,
        _compare_perplexity,
        mistakes=_perplexity_mistakes,
    )


def _long_text_case(hidden: bool, vocab: list[str], names: tuple[str, ...]) -> Case:
    """A text of about 1,000 words: the product of its probabilities underflows to 0.0."""
    rng = random.Random(30 if hidden else 3)
    model = _random_bigram_model(rng, vocab)
    sentences = [[rng.choice(vocab) for _ in range(rng.randint(20, 40))] for _ in range(35)]
    n_words = sum(len(s) + 1 for s in sentences)
    shown = {"sentences": f"{len(sentences)} random sentences, {n_words} predicted words in all"}
    hint = (
        f"the product of {n_words} probabilities of about 1/4 is far below the smallest positive "
        "float (about 1e-308)"
    )
    return Case((model, sentences, 2), names, hint, f"a text of {n_words} words", shown)


# ------------------------------------------------------------------------------ part 5


def _continuation_mistakes(bigram_counts: dict, word: str) -> list[Mistake]:
    seen = {key: c for key, c in bigram_counts.items() if c > 0}
    n_types = len(seen)
    n_preceding = sum(1 for (_, w) in seen if w == word)
    n_tokens = sum(seen.values())
    c_word = sum(c for (_, w), c in seen.items() if w == word)
    n_following = sum(1 for (v, _) in seen if v == word)
    n_word_types = len({w for (_, w) in seen})
    return [
        Mistake(
            "you counted tokens: c(. word) / c(. .) is the unigram estimate. The continuation "
            "probability counts bigram *types*: how many different words come right before the "
            "word, over the number of different bigrams",
            _divide(c_word, n_tokens),
        ),
        Mistake(
            "the numerator counts types but the denominator counts tokens: divide by N1+(. .), "
            "the number of different bigrams",
            _divide(n_preceding, n_tokens),
        ),
        Mistake(
            "you divided by the number of different words: N1+(. .) is the number of different "
            "bigrams",
            _divide(n_preceding, n_word_types),
        ),
        Mistake(
            "you counted the words that *follow* the word: N1+(. word) counts the different "
            "words that come right before it",
            _divide(n_following, n_types),
        ),
    ]


def _compare_continuation(want: Expected, got: Any) -> str:
    bigram_counts, word = want.args
    seen = [key for key, c in bigram_counts.items() if c > 0]
    before = sorted({v for v, w in seen if w == word})
    parts = (
        f"N1+(. {word}) / N1+(. .) = {len(before)} / {len(seen)}: {len(before)} different words "
        f"come right before {word!r} ({show(before[:6])[1:-1] or 'none'}), and {len(seen)} "
        "different bigrams have a count above 0 (each counted once, however often it occurs)"
    )
    return _parts_hint(want, got, parts)


def check_continuation_prob(continuation_prob: Callable, hidden: bool = False) -> None:
    """``continuation_prob(bigram_counts, word)``: N1+(. word) / N1+(. .)."""
    names = ("bigram_counts", "word")
    bigrams = ngram.count_ngrams(WORKED, 2)
    hint = "P_cont(w) = N1+(. w) / N1+(. .), eq. (ngram-pcont)"
    cases = [
        Case((bigrams, "am"), names, hint, "P_cont(am)"),
        Case((bigrams, "I"), names, hint, "P_cont(I)"),
        Case((bigrams, "</s>"), names, hint, "P_cont(</s>)"),
        Case(
            ({**bigrams, ("do", "am"): 0}, "am"),
            names,
            "a bigram of count 0 was never seen: it is no bigram type",
            "a count of 0",
        ),
    ]
    rng = py_rng(hidden)
    for _ in range(n_random(hidden)):
        corpus = random_corpus(rng, 8, 6)
        word = rng.choice(_types(corpus) + ["</s>"])
        cases.append(Case((ngram.count_ngrams(corpus, 2), word), names, hint, label="random"))
    run_check(
        "continuation_prob",
        continuation_prob,
        with_args(ngram.continuation_prob),
        cases,
        _compare_continuation,
        mistakes=_continuation_mistakes,
    )


# ------------------------------------------------------------------------------ part 6


def _kn_parts(bigram_counts: dict, context: tuple, word: str, V: int, d: float) -> dict:
    """The terms of eq. (ngram-kn) and (ngram-kn-unigram), written out (not the reference)."""
    (v,) = tuple(context)
    seen = {key: c for key, c in bigram_counts.items() if c > 0}
    n_types = len(seen)  # N1+(. .)
    n_preceding = sum(1 for (_, w) in seen if w == word)  # N1+(. w)
    n_words = len({w for (_, w) in seen})  # words with N1+(. w) > 0
    c_v = sum(c for (u, _), c in seen.items() if u == v)  # c(v)
    c_vw = seen.get((v, word), 0)
    n_follow = sum(1 for (u, _) in seen if u == v)  # N1+(v .)
    n_before_v = sum(1 for (_, u) in seen if u == v)  # N1+(. v)
    return {
        "N1+(. v)": n_before_v,
        "c(v w)": c_vw,
        "c(v)": c_v,
        "N1+(v .)": n_follow,
        "N1+(. w)": n_preceding,
        "N1+(. .)": n_types,
        "discounted": max(c_vw - d, 0) / c_v if c_v else 0.0,
        "lambda": d * n_follow / c_v if c_v else 1.0,
        "p_cont": n_preceding / n_types,
        "p_kn_unigram": max(n_preceding - d, 0) / n_types + d * n_words / n_types / V,
    }


def _kn_mistakes(bigram_counts: dict, context: tuple, word: str, V: int, d: float):
    p = _kn_parts(bigram_counts, context, word, V, d)
    c_v, discounted, lam = p["c(v)"], p["discounted"], p["lambda"]
    no_max = (p["c(v w)"] - d) / c_v if c_v else 0.0
    unigram_with_v = (max(p["N1+(. w)"] - d, 0) + d) / p["N1+(. .)"]  # |V| / |V| in its place
    return [
        Mistake(
            "the lower order is the plain continuation probability N1+(. w) / N1+(. .): eq. "
            "(ngram-kn-unigram) discounts it too and adds d |{w': N1+(. w') > 0}| / N1+(. .) "
            "times 1/|V|, which gives unseen words like <unk> their share",
            discounted + lam * p["p_cont"] if c_v else p["p_cont"],
        ),
        Mistake(
            "you left out max(c - d, 0): an unseen bigram's discounted term is 0, not -d / c(v)",
            no_max + lam * p["p_kn_unigram"] if c_v else None,
        ),
        Mistake(
            "lambda(v) = d N1+(v .) / c(v) uses the number of different words after v; you used "
            "the number of bigram tokens after v, c(v), in its place",
            discounted + d * p["p_kn_unigram"] if c_v else None,
        ),
        Mistake(
            "you backed off only when c(v w) = 0: interpolated Kneser-Ney always adds "
            "lambda(v) P_KN(w) to the discounted term",
            (discounted if p["c(v w)"] > 0 else lam * p["p_kn_unigram"]) if c_v else None,
        ),
        Mistake(
            "a context never seen (c(v) = 0) backs off fully to P_KN(w), eq. (ngram-kn-unigram): "
            "it does not get probability 0",
            0.0 if not c_v else None,
        ),
        Mistake(
            "the uniform term of P_KN(w) multiplies d / N1+(. .) by the number of word types "
            "that have a continuation count, |{w': N1+(. w') > 0}|, not by |V| (vocab_size)",
            (discounted + lam * unigram_with_v) if c_v else unigram_with_v,
        ),
        Mistake(
            "lambda(v) = d N1+(v .) / c(v) counts the different words that come *after* v; "
            "you counted the words that come before it, N1+(. v)",
            discounted + d * p["N1+(. v)"] / c_v * p["p_kn_unigram"] if c_v else None,
        ),
    ]


def _compare_kn(want: Expected, got) -> str:
    problem = compare_numbers(want.value, got)
    if not problem:
        return ""
    bigram_counts, context, word, V, d = want.args
    p = _kn_parts(bigram_counts, context, word, V, d)
    (v,) = tuple(context)
    if p["c(v)"]:
        first = (
            f"  discounted term  max(c({v} {word}) - d, 0) / c({v}) = "
            f"max({p['c(v w)']} - {d}, 0) / {p['c(v)']} = {p['discounted']:.6g}\n"
            f"  back-off weight  lambda({v}) = d N1+({v} .) / c({v}) = "
            f"{d} * {p['N1+(v .)']} / {p['c(v)']} = {p['lambda']:.6g}\n"
        )
        total = f"{p['discounted']:.6g} + {p['lambda']:.6g} * {p['p_kn_unigram']:.6g}"
    else:
        first = f"  the context {v!r} was never seen: c({v}) = 0, so back off fully to P_KN(w)\n"
        total = f"{p['p_kn_unigram']:.6g}"
    return (
        f"{problem}\nhint: the parts of the right answer:\n{first}"
        f"  continuation     P_KN({word}) = max(N1+(. {word}) - d, 0) / N1+(. .) + "
        f"d |{{w': N1+(. w') > 0}}| / N1+(. .) / |V| = {p['p_kn_unigram']:.6g} "
        f"(N1+(. {word}) = {p['N1+(. w)']}, N1+(. .) = {p['N1+(. .)']}, |V| = {V})\n"
        f"  P_KN({word} | {v}) = {total} = {want.value:.6g}"
    )


def check_kn_bigram_prob(kn_bigram_prob: Callable, hidden: bool = False) -> None:
    """``kn_bigram_prob(bigram_counts, context, word, vocab_size, d)``."""
    names = ("bigram_counts", "context", "word", "vocab_size", "d")
    bigrams = ngram.count_ngrams(WORKED, 2)
    V = _vocab_size(WORKED)
    cases = [
        Case(
            (bigrams, ("I",), "am", V, 0.75),
            names,
            "eq. (ngram-kn): discounted bigram term "
            "plus lambda(I) = d * N1+(I .) / c(I) times P_KN(am)",
            "P_KN(am | I)",
        ),
        Case(
            (bigrams, ("am",), "NLP", V, 0.75),
            names,
            "lambda(am) = d N1+(am .) / c(am): two different words follow 'am' (NLP and </s>), "
            "one comes before it",
            "P_KN(NLP | am)",
        ),
        Case(
            (bigrams, ("I",), "Marks", V, 0.75),
            names,
            "an unseen bigram still gets "
            "lambda(I) * P_KN(Marks); max(c - d, 0) keeps the first term at 0",
        ),
        Case(
            (bigrams, ("zebra",), "am", V, 0.75),
            names,
            "a context never seen backs off fully to the unigram P_KN(w), eq. (ngram-kn-unigram)",
        ),
        Case(
            ({**bigrams, ("do", "am"): 0, ("am", "I"): 0}, ("am",), "I", V, 0.75),
            names,
            "a bigram of count 0 was never seen: it counts in no N1+",
            "counts of 0",
        ),
        Case(
            (bigrams, ("<s>",), "<unk>", V, 0.5),
            names,
            "<unk> has no continuation count: its "
            "probability comes from the uniform 1/|V| term alone",
        ),
    ]
    rng = py_rng(hidden)
    for _ in range(n_random(hidden)):
        corpus = random_corpus(rng, 8, 6)
        counts = ngram.count_ngrams(corpus, 2)
        context = (rng.choice(WORDS + ["<s>"]),)
        d = rng.choice([0.75, 0.5, 0.9, 1.0])
        word = rng.choice(_types(corpus) + ["</s>"])
        cases.append(Case((counts, context, word, _vocab_size(corpus), d), names, label="random"))
    run_check(
        "kn_bigram_prob",
        kn_bigram_prob,
        with_args(ngram.kn_bigram_prob),
        cases,
        _compare_kn,
        mistakes=_kn_mistakes,
    )


__all__ = [
    "check_count_ngrams",
    "check_mle_prob",
    "check_addk_prob",
    "check_perplexity",
    "check_continuation_prob",
    "check_kn_bigram_prob",
]
