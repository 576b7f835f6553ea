"""Tests of nlpcourse.ngram against independent oracles.

Oracles: values worked by hand, brute-force recounts written here with plain dictionaries, sums
over the vocabulary, and nltk.lm where its definitions match ours (bigram MLE). The readable
Kneser-Ney recursion ``kn_prob`` is checked against values worked by hand, against the separately
written bigram formula and by summing over the vocabulary; the array model is then checked
against it.
"""

import math
import random
from collections import Counter

import numpy as np
import pytest

from nlpcourse.examples import i_am_nlp
from nlpcourse.guard import ReferenceUsedError, reference_switched_off
from nlpcourse.lm import NotFittedError
from nlpcourse.ngram import (
    BOS,
    EOS,
    SMOOTHINGS,
    UNK,
    NGramLM,
    addk_prob,
    continuation_prob,
    count_ngrams,
    kn_bigram_prob,
    kn_prob,
    mle_prob,
    perplexity,
)

TOY = i_am_nlp()  # "I am NLP", "NLP I am", "I do not like Exams and Marks"


def random_corpus(seed: int, n_sentences: int = 30, n_types: int = 8) -> list[list[str]]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(n_types)]
    return [
        [rng.choice(words[: rng.randint(2, n_types)]) for _ in range(rng.randint(0, 7))]
        for _ in range(n_sentences)
    ]


def brute_counts(sentences, n):
    """Every m-gram (m = 1..n) ending at a predicted word, counted with a plain loop."""
    counts = {m: Counter() for m in range(1, n + 1)}
    for s in sentences:
        padded = [BOS] * (n - 1) + s + [EOS]
        for i in range(n - 1, len(padded)):
            for m in range(1, n + 1):
                counts[m][tuple(padded[i - m + 1 : i + 1])] += 1
    return counts


# ------------------------------------------------------------------------------ hand-worked


def test_worked_bigram_example():
    """The chapter's example: <s> I am NLP </s>, <s> NLP I am </s>, <s> I do not like ... </s>."""
    lm = NGramLM(order=2, smoothing="mle").fit(TOY)
    assert lm.prob("I", [BOS]) == pytest.approx(2 / 3)
    assert lm.prob("NLP", [BOS]) == pytest.approx(1 / 3)  # not 1/2: <s> starts 3 sentences
    assert lm.prob("am", ["I"]) == pytest.approx(2 / 3)
    assert lm.prob("do", ["I"]) == pytest.approx(1 / 3)
    assert lm.prob("NLP", ["am"]) == pytest.approx(1 / 2)  # "am" is followed by NLP and </s>
    counts = count_ngrams(TOY, 2)
    assert mle_prob(counts, (BOS,), "NLP") == pytest.approx(1 / 3)
    assert mle_prob(counts, ("unseen",), "NLP") == 0.0


def test_vocabulary_rule():
    corpus = [["a", "a", "b"], ["a", "c", "b"]]
    lm = NGramLM(order=1, smoothing="mle").fit(corpus, min_count=2)
    assert set(lm.vocab_) == {"a", "b", EOS, UNK}
    assert BOS not in lm.vocab_
    # c is seen once: with min_count=2 it is <unk>, and so is any unseen word
    assert lm.prob("c") == lm.prob(UNK) == lm.prob("zebra") == pytest.approx(1 / 8)
    assert lm.prob(EOS) == pytest.approx(2 / 8)  # 8 predicted tokens


def test_laplace_by_hand():
    lm = NGramLM(order=2, smoothing="add-k", k=1.0).fit(TOY)
    V = len(lm.vocab_)  # 9 words + </s> + <unk> = 11
    assert V == 11
    assert lm.prob("am", ["I"]) == pytest.approx((2 + 1) / (3 + V))
    assert lm.prob("Marks", ["I"]) == pytest.approx(1 / (3 + V))
    assert lm.prob("am", ["never-seen"]) == pytest.approx(1 / V)


def test_kneser_ney_bigram_by_hand():
    """P_KN(am | I) on the toy corpus, every count written out."""
    lm = NGramLM(order=2, smoothing="kneser-ney", discount=0.75).fit(TOY)
    # 14 distinct bigram types; "am" is preceded by one distinct word (I); 10 words (the 9
    # types and </s>) have a left context; |V| = 11
    p_unigram_am = (1 - 0.75) / 14 + 0.75 * 10 / 14 / 11
    # c(I) = 3, c(I am) = 2, I is followed by 2 distinct words (am, do)
    expected = (2 - 0.75) / 3 + 0.75 * 2 / 3 * p_unigram_am
    assert lm.prob("am", ["I"]) == pytest.approx(expected)
    assert kn_bigram_prob(count_ngrams(TOY, 2), ("I",), "am", 11) == pytest.approx(expected)
    assert continuation_prob(count_ngrams(TOY, 2), "am") == pytest.approx(1 / 14)


# ---------------------------------------------------------------------------- brute force


@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("seed", [0, 1])
def test_mle_and_addk_match_recount(order, seed):
    corpus = random_corpus(seed)
    counts = brute_counts(corpus, order)[order]
    contexts = Counter()
    for g, c in counts.items():
        contexts[g[:-1]] += c
    mle = NGramLM(order, "mle").fit(corpus)
    addk = NGramLM(order, "add-k", k=0.5).fit(corpus)
    V = len(addk.vocab_)
    for g, c in counts.items():
        assert mle.prob(g[-1], g[:-1]) == pytest.approx(c / contexts[g[:-1]])
        assert addk.prob(g[-1], g[:-1]) == pytest.approx((c + 0.5) / (contexts[g[:-1]] + 0.5 * V))


def test_kn_prob_worked_by_hand():
    """The chapter's corpus with d = 3/4, |V| = 11. Bigram (the chapter's example):
    P(am | I) = (2 - d)/3 + (d 2/3) P_KN(am) with P_KN(am) = (1 - d)/14 + (d 10/14)/11 = 41/616,
    so 1663/3696. Trigram, context <s> I: the trigrams <s> I am and <s> I do (1 each), so
    P(am | <s> I) = (1 - d)/2 + (d 2/2) P(am | I), and at the bigram level the continuation
    counts N1+(. I am) = |{<s>, NLP}| = 2 and N1+(. I do) = 1 happen to equal the bigram counts:
    1/8 + 3/4 * 1663/3696 = 2279/4928. Context <s> NLP: P(I | <s> NLP) = 1/4 + 3/4 P(I | NLP),
    P(I | NLP) = (1 - d)/2 + (d 2/2) P_KN(I) (NLP is followed by I and </s>, one distinct word
    before each), P_KN(I) = (2 - d)/14 + (d 10/14)/11 = 85/616 (<s> and NLP precede I), so
    P(I | NLP) = 563/2464 and P(I | <s> NLP) = 4153/9856."""
    bigrams, trigrams = count_ngrams(TOY, 2), count_ngrams(TOY, 3)
    assert kn_prob(bigrams, ["I"], "am", 11) == pytest.approx(1663 / 3696, abs=1e-15)
    assert kn_prob(trigrams, [BOS, "I"], "am", 11) == pytest.approx(2279 / 4928, abs=1e-15)
    assert kn_prob(trigrams, [BOS, "NLP"], "I", 11) == pytest.approx(4153 / 9856, abs=1e-15)
    lm = NGramLM(3, "kneser-ney", discount=0.75).fit(TOY)
    assert lm.prob("I", [BOS, "NLP"]) == pytest.approx(4153 / 9856, abs=1e-15)
    with pytest.raises(ValueError, match="needs the counts of 3-grams"):
        kn_prob(bigrams, [BOS, "I"], "am", 11)


@pytest.mark.parametrize("continuation", [True, False])
def test_kn_prob_sums_to_one_and_is_the_bigram_formula(continuation):
    corpus = random_corpus(3, n_types=5)
    for order in (1, 2, 3):
        counts = count_ngrams(corpus, order)
        vocab = sorted({w for s in corpus for w in s}) + [EOS, UNK]
        contexts = {g[:-1] for g in counts} | {(BOS,) * (order - 1), ("w0", "w9")[: order - 1]}
        for ctx in contexts:  # seen, sentence-start and unseen contexts
            total = sum(kn_prob(counts, ctx, w, len(vocab), 0.6, continuation) for w in vocab)
            assert total == pytest.approx(1, abs=1e-12)
    counts = count_ngrams(corpus, 2)
    for v in ["w0", "w1", BOS, "w9"]:
        for w in ["w0", "w2", EOS, UNK]:
            expected = kn_bigram_prob(counts, (v,), w, 7, 0.75)
            assert kn_prob(counts, (v,), w, 7) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("smoothing", ["kneser-ney", "absolute"])
@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
def test_array_model_equals_the_readable_recursion(smoothing, order):
    corpus = random_corpus(order, n_types=6)
    lm = NGramLM(order, smoothing, discount=0.6).fit(corpus)
    counts = count_ngrams([[w if w in lm.index_ else UNK for w in s] for s in corpus], order)
    rng = random.Random(order)
    contexts = [
        tuple(rng.choice(lm.vocab_[2:] + [BOS, "zzz"]) for _ in range(order - 1)) for _ in range(25)
    ]
    for ctx in contexts:
        ctx_ids = tuple(c if c in lm.vocab_ or c == BOS else UNK for c in ctx)
        for w in lm.vocab_:
            expected = kn_prob(counts, ctx_ids, w, len(lm.vocab_), 0.6, smoothing == "kneser-ney")
            assert lm.prob(w, ctx) == pytest.approx(expected, abs=1e-12)


def test_any_order_on_a_vocabulary_whose_ngrams_overflow_64_bits():
    """Order 6 on about 2,500 word types: |V|^6 is past 2**63, so an n-gram key made of its word
    ids as digits could not hold it. The model fits and equals the readable recursion on the
    n-grams of the corpus, on shuffled ones (mostly unseen) and after an unseen context."""
    rng = random.Random(6)
    words = [f"w{i}" for i in range(3000)]
    corpus = [rng.sample(words, rng.randint(0, 9)) for _ in range(600)]
    corpus += [corpus[i][:] for i in range(0, 600, 7)]  # repeated sentences: counts above 1
    lm = NGramLM(6, "kneser-ney", discount=0.7).fit(corpus)
    assert len(lm.vocab_) ** 6 > 2**63
    counts = count_ngrams(corpus, 6)
    queries = list(counts)[:40]
    queries += [tuple(rng.sample(g, 6)) for g in queries[:20]]
    queries = [g for g in queries if g[-1] != BOS] + [(BOS, BOS, BOS, "w1", "zzz", "w2")]
    for g in queries:
        ctx = tuple(u if u in lm.index_ or u == BOS else UNK for u in g[:-1])
        expected = kn_prob(counts, ctx, g[-1], len(lm.vocab_), 0.7)
        assert lm.prob(g[-1], g[:-1]) == pytest.approx(expected, abs=1e-12), g


def test_a_fitted_model_states_its_size():
    """nbytes counts the bytes of every table the fitted model holds (counted here from its
    attributes, independently), and the repr says it."""
    lm = NGramLM(3, "kneser-ney").fit(random_corpus(2, 200))
    arrays = [
        a
        for value in vars(lm).values()
        if isinstance(value, dict)
        for a in value.values()
        if isinstance(a, np.ndarray)
    ]
    assert lm.nbytes == sum(a.nbytes for a in arrays) > 0
    assert f"{lm.nbytes / 1e6:.1f} MB" in repr(lm)
    with pytest.raises(NotFittedError):
        _ = NGramLM(3).nbytes


def test_kn_bigram_function_matches_model():
    corpus = random_corpus(5)
    lm = NGramLM(2, "kneser-ney", discount=0.75).fit(corpus)
    counts = count_ngrams(corpus, 2)
    for v in lm.vocab_ + [BOS]:
        for w in lm.vocab_:
            expected = kn_bigram_prob(counts, (v,), w, len(lm.vocab_), 0.75)
            assert lm.prob(w, [v]) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("order", [1, 2, 3])
def test_interpolation_is_a_mixture_of_mle_orders(order):
    corpus = random_corpus(7)
    lambdas = np.linspace(1, 2, order + 1) / np.linspace(1, 2, order + 1).sum()
    lm = NGramLM(order, "interpolated", lambdas=lambdas).fit(corpus)
    counts = brute_counts(corpus, order)
    V = len(lm.vocab_)

    def mle_m(w, ctx, m):  # order-m MLE, a shorter context's estimate where ctx is unseen
        if m == 0:
            return 1 / V
        ctx_m = ctx[len(ctx) - (m - 1) :] if m > 1 else ()
        total = sum(c for g, c in counts[m].items() if g[:-1] == ctx_m)
        return counts[m][ctx_m + (w,)] / total if total else mle_m(w, ctx, m - 1)

    for ctx in [(BOS,) * (order - 1), ("w1", "w2")[: order - 1], ("w0", "nope")[: order - 1]]:
        ctx_ids = tuple(c if c in lm.vocab_ or c == BOS else UNK for c in ctx)
        for w in lm.vocab_:
            expected = sum(lambdas[m] * mle_m(w, ctx_ids, m) for m in range(order + 1))
            assert lm.prob(w, ctx) == pytest.approx(expected)


def test_em_lambdas_maximise_heldout_likelihood():
    train, heldout = random_corpus(11, 60), random_corpus(12, 30)
    lm = NGramLM(3, "interpolated").fit(train, heldout=heldout)
    assert lm.lambdas_.sum() == pytest.approx(1)

    def heldout_loglik(lambdas):
        other = NGramLM(3, "interpolated", lambdas=lambdas).fit(train)
        return -math.log(other.perplexity(heldout))

    best = heldout_loglik(lm.lambdas_)
    rng = np.random.default_rng(0)
    for _ in range(20):  # any other weights do no better on the held-out data
        assert heldout_loglik(rng.dirichlet(np.ones(4))) <= best + 1e-9


@pytest.mark.parametrize("smoothing", [s for s in SMOOTHINGS if s != "mle"])
@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
def test_every_smoothed_distribution_sums_to_one(smoothing, order):
    corpus = random_corpus(order + 20)
    lm = NGramLM(order, smoothing, lambdas=[1 / (order + 1)] * (order + 1)).fit(corpus)
    for ctx in [(), ("w1",), ("w0", "w1", "w2"), ("unseen", "unseen", "unseen"), (BOS, BOS)]:
        total = sum(lm.prob(w, ctx) for w in lm.vocab_)
        assert total == pytest.approx(1.0, abs=1e-12), (smoothing, order, ctx)


def test_perplexity_definition():
    corpus, test = random_corpus(3), random_corpus(4, 10)
    lm = NGramLM(2, "add-k", k=1.0).fit(corpus)
    N = sum(len(s) + 1 for s in test)  # every word and one </s> per sentence
    log_sum = sum(
        math.log(lm.prob(w, [v])) for s in test for v, w in zip([BOS] + s, s + [EOS], strict=True)
    )
    assert lm.perplexity(test) == pytest.approx(math.exp(-log_sum / N))
    assert perplexity(lambda ctx, w: lm.prob(w, ctx), test, 2) == pytest.approx(lm.perplexity(test))
    assert NGramLM(2, "mle").fit(corpus).perplexity([["w0", "never-seen-word"]]) == math.inf


def test_uniform_model_has_perplexity_vocab_size():
    """Add-k with a huge k is (nearly) uniform: perplexity -> |V|."""
    lm = NGramLM(2, "add-k", k=1e9).fit(TOY)
    assert lm.perplexity(TOY) == pytest.approx(len(lm.vocab_), rel=1e-6)


def test_addk_function_and_model_agree():
    counts = count_ngrams(TOY, 2)
    lm = NGramLM(2, "add-k", k=0.1).fit(TOY)
    for v in lm.vocab_[2:] + [BOS]:
        for w in lm.vocab_:
            assert lm.prob(w, [v]) == pytest.approx(addk_prob(counts, (v,), w, 11, 0.1))


def test_nltk_bigram_mle_agrees():
    from nltk.lm import MLE
    from nltk.lm.preprocessing import padded_everygram_pipeline

    corpus = random_corpus(9)
    ngrams, vocab = padded_everygram_pipeline(2, corpus)
    ref = MLE(2)
    ref.fit(ngrams, vocab)
    lm = NGramLM(2, "mle").fit(corpus)
    for v, w in brute_counts(corpus, 2)[2]:
        assert lm.prob(w, [v]) == pytest.approx(ref.score(w, [v]))


def test_generate_follows_seen_bigrams_and_is_seeded():
    lm = NGramLM(2, "mle").fit(TOY)
    seen = set(brute_counts(TOY, 2)[2])
    for seed in range(20):
        words = lm.generate(max_len=20, seed=seed)
        padded = [BOS] + words + ([EOS] if len(words) < 20 else [])
        assert all(g in seen for g in zip(padded, padded[1:], strict=False))
    assert lm.generate(seed=3) == lm.generate(seed=3)


# ------------------------------------------------------------------------------ bad input


def test_bad_input_errors():
    with pytest.raises(ValueError, match="order"):
        NGramLM(order=0)
    with pytest.raises(ValueError, match="unknown smoothing"):
        NGramLM(smoothing="good-turing")
    with pytest.raises(ValueError, match="discount"):
        NGramLM(discount=1.5)
    with pytest.raises(ValueError, match="empty corpus"):
        NGramLM().fit([])
    with pytest.raises(TypeError, match="sentence 1 is a str"):
        NGramLM().fit([["a"], "b c"])
    with pytest.raises(TypeError, match="one string"):
        NGramLM().fit("a b c")
    with pytest.raises(ValueError, match="lambdas"):
        NGramLM(2, "interpolated").fit(TOY)
    with pytest.raises(ValueError, match="3 weights"):
        NGramLM(2, "interpolated", lambdas=[0.5, 0.5])
    with pytest.raises(ValueError, match="<s> is never predicted"):
        NGramLM(2).fit(TOY).prob(BOS, ["I"])
    with pytest.raises(ValueError, match="contains '</s>'"):
        NGramLM(2).fit([["a", EOS]])
    with pytest.raises(NotFittedError, match="not fitted"):
        NGramLM(2).prob("a", ["b"])


def test_reference_refuses_during_a_check():
    lm = NGramLM(2).fit(TOY)
    with reference_switched_off():
        with pytest.raises(ReferenceUsedError):
            NGramLM(2).fit(TOY)
        with pytest.raises(ReferenceUsedError):
            lm.prob("am", ["I"])
        with pytest.raises(ReferenceUsedError):
            count_ngrams(TOY, 2)
    assert lm.prob("am", ["I"]) > 0  # and works again afterwards


# ---------------------------------------------------------------------------------- Brown


@pytest.mark.corpus
def test_brown_bengio_vocabulary_and_perplexities():
    from nlpcourse.data import brown_split

    train, valid, test = brown_split()
    freq = Counter(w for s in train for w in s)
    kn = NGramLM(3, "kneser-ney").fit(train, min_count=4)
    assert len(kn.vocab_) == sum(1 for c in freq.values() if c >= 4) + 2
    laplace = NGramLM(3, "add-k", k=1.0).fit(train, min_count=4)
    ppl_kn, ppl_laplace = kn.perplexity(test), laplace.perplexity(test)
    assert 50 < ppl_kn < ppl_laplace < len(kn.vocab_)
