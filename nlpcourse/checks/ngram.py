"""Checks for exercise 01-ngrams (chapter 1). Each compares a student's function with the
reference of the same name in :mod:`nlpcourse.ngram`; see :mod:`nlpcourse.checks`."""

from __future__ import annotations

import random
from collections.abc import Callable

from nlpcourse import ngram
from nlpcourse.checks import Case, compare_counts, run_check

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]
WORKED = [s.split() for s in ["I am NLP", "NLP I am", "I do not like Exams and Marks"]]

PAD_HINT = "pad each sentence with n-1 '<s>' at the start and one '</s>' at the end, then count"


def random_corpus(rng: random.Random, n_sentences: int, max_len: int) -> list[list[str]]:
    vocab = WORDS[: rng.randint(3, len(WORDS))]
    return [[rng.choice(vocab) for _ in range(rng.randint(0, max_len))] for _ in range(n_sentences)]


def _rng(hidden: bool) -> random.Random:
    return random.Random(2 if hidden else 1)


def _n_random(hidden: bool) -> int:
    return 25 if hidden else 3


def _types(corpus: list[list[str]]) -> list[str]:
    return sorted({w for s in corpus for w in s})


def _vocab_size(corpus: list[list[str]]) -> int:
    """|V| for a corpus: its word types plus '</s>' and '<unk>'."""
    return len(_types(corpus)) + 2


# ------------------------------------------------------------------------------------ part 1


def check_count_ngrams(count_ngrams: Callable, hidden: bool = False) -> None:
    """``count_ngrams(sentences, n)``: a Counter of n-gram tuples in the padded sentences."""
    names = ("sentences", "n")
    cases = [
        Case(([["a"]], 1), names, "the end symbol '</s>' is a word the model predicts: count it"),
        Case(([["a", "b"]], 2), names, PAD_HINT),
        Case(([[]], 2), names, "an empty sentence still gives one n-gram: ('<s>', '</s>')"),
        Case(([["a", "b", "a"], ["b", "a"]], 3), names, PAD_HINT + " (two '<s>' for trigrams)"),
        Case((WORKED, 2), names, "the chapter's worked example", label="worked example"),
    ]
    rng = _rng(hidden)
    for i in range(_n_random(hidden)):
        n = rng.randint(1, 4)
        corpus = random_corpus(rng, rng.randint(1, 3 + 2 * i), 4 + i // 3)
        cases.append(Case((corpus, n), names, PAD_HINT, label="random"))
    run_check("count_ngrams", count_ngrams, ngram.count_ngrams, cases, compare_counts)


# ------------------------------------------------------------------------------------ part 2


def check_mle_prob(mle_prob: Callable, hidden: bool = False) -> None:
    """``mle_prob(counts, context, word)``: c(context, word) / c(context), 0.0 if unseen."""
    names = ("counts", "context", "word")
    bigrams = ngram.count_ngrams(WORKED, 2)
    start_hint = (
        "c(<s>) is the number of n-grams that start with <s>: one per sentence (3 here); "
        "P(NLP | <s>) is 1/3, not 1/2"
    )
    cases = [
        Case((bigrams, ("I",), "am"), names, "c(I am) = 2 and c(I) = 3", "P(am | I)"),
        Case((bigrams, ("<s>",), "I"), names, start_hint, "P(I | <s>)"),
        Case((bigrams, ("<s>",), "NLP"), names, start_hint, "P(NLP | <s>)"),
        Case((bigrams, ("am",), "NLP"), names, "am is followed once by NLP, once by </s>"),
        Case((bigrams, ("I",), "Marks"), names, "an n-gram never seen has count 0"),
        Case((bigrams, ("zebra",), "I"), names, "an unseen context has no estimate: return 0.0"),
    ]
    rng = _rng(hidden)
    for _ in range(_n_random(hidden)):
        corpus = random_corpus(rng, 6, 5)
        counts = ngram.count_ngrams(corpus, rng.randint(1, 3))
        context = rng.choice(list(counts))[:-1]
        word = rng.choice(_types(corpus) + ["</s>"])
        cases.append(Case((counts, context, word), names, label="random"))
    run_check("mle_prob", mle_prob, ngram.mle_prob, cases)


# ------------------------------------------------------------------------------------ part 3


def check_addk_prob(addk_prob: Callable, hidden: bool = False) -> None:
    """``addk_prob(counts, context, word, vocab_size, k)``."""
    names = ("counts", "context", "word", "vocab_size", "k")
    bigrams = ngram.count_ngrams(WORKED, 2)
    V = _vocab_size(WORKED)
    cases = [
        Case((bigrams, ("I",), "am", V, 1.0), names, "(c(I am) + 1) / (c(I) + 1 * |V|)"),
        Case((bigrams, ("I",), "Marks", V, 1.0), names, "an unseen n-gram gets k / (c + k|V|)"),
        Case((bigrams, ("I",), "am", V, 0.5), names, "use k, not 1, in both places"),
        Case((bigrams, ("zebra",), "am", V, 0.1), names, "unseen context: c(context) = 0"),
    ]
    rng = _rng(hidden)
    for _ in range(_n_random(hidden)):
        corpus = random_corpus(rng, 6, 5)
        counts = ngram.count_ngrams(corpus, rng.randint(1, 3))
        context = rng.choice(list(counts))[:-1]
        k = rng.choice([1.0, 0.5, 0.01, 2.0])
        word = rng.choice(_types(corpus) + ["</s>"])
        cases.append(Case((counts, context, word, _vocab_size(corpus), k), names, label="random"))
    run_check("addk_prob", addk_prob, ngram.addk_prob, cases)


# ------------------------------------------------------------------------------------ part 4


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


def check_perplexity(perplexity: Callable, hidden: bool = False) -> None:
    """``perplexity(prob, sentences, n)``: exp of the average negative log probability."""
    names = ("prob", "sentences", "n")
    vocab = ["a", "b", "c"]
    uniform = TableModel(
        {((v,), w): 0.25 for v in ["<s>"] + vocab for w in vocab + ["</s>"]},
        "a bigram model giving 1/4 to each of a, b, c, </s> after any word",
    )
    n_hint = "N counts every word and one '</s>' per sentence (never '<s>')"
    cases = [
        Case((uniform, [["a"]], 2), names, "a uniform model over 4 words has perplexity 4"),
        Case((uniform, [["a", "b"], ["c"], []], 2), names, n_hint),
        Case((_random_bigram_model(random.Random(0), vocab), [["a", "b"]], 2), names, n_hint),
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
    rng = _rng(hidden)
    for _ in range(_n_random(hidden)):
        model = _random_bigram_model(rng, vocab)
        sentences = [[rng.choice(vocab) for _ in range(rng.randint(0, 6))] for _ in range(4)]
        cases.append(Case((model, sentences, 2), names, n_hint, label="random"))
    run_check("perplexity", perplexity, ngram.perplexity, cases)


# ------------------------------------------------------------------------------------ part 5


def check_continuation_prob(continuation_prob: Callable, hidden: bool = False) -> None:
    """``continuation_prob(bigram_counts, word)``: N1+(. word) / N1+(. .)."""
    names = ("bigram_counts", "word")
    bigrams = ngram.count_ngrams(WORKED, 2)
    hint = (
        "count distinct bigram *types*, not tokens: 'I am' occurs twice but is one type; "
        "the numerator is how many different words come right before the word"
    )
    cases = [
        Case((bigrams, "am"), names, hint, "P_cont(am)"),
        Case((bigrams, "I"), names, hint, "P_cont(I)"),
        Case((bigrams, "</s>"), names, hint, "P_cont(</s>)"),
    ]
    rng = _rng(hidden)
    for _ in range(_n_random(hidden)):
        corpus = random_corpus(rng, 8, 6)
        word = rng.choice(_types(corpus) + ["</s>"])
        cases.append(Case((ngram.count_ngrams(corpus, 2), word), names, hint, label="random"))
    run_check("continuation_prob", continuation_prob, ngram.continuation_prob, cases)


# ------------------------------------------------------------------------------------ part 6


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
            (bigrams, ("<s>",), "<unk>", V, 0.5),
            names,
            "<unk> has no continuation count: its "
            "probability comes from the uniform 1/|V| term alone",
        ),
    ]
    rng = _rng(hidden)
    for _ in range(_n_random(hidden)):
        corpus = random_corpus(rng, 8, 6)
        counts = ngram.count_ngrams(corpus, 2)
        context = (rng.choice(WORDS + ["<s>"]),)
        d = rng.choice([0.75, 0.5, 0.9, 1.0])
        word = rng.choice(_types(corpus) + ["</s>"])
        cases.append(Case((counts, context, word, _vocab_size(corpus), d), names, label="random"))
    run_check("kn_bigram_prob", kn_bigram_prob, ngram.kn_bigram_prob, cases)


__all__ = [
    "check_count_ngrams",
    "check_mle_prob",
    "check_addk_prob",
    "check_perplexity",
    "check_continuation_prob",
    "check_kn_bigram_prob",
]
