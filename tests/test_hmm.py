"""Tests of nlpcourse.hmm (and the universal tagset of nlpcourse.data) against independent oracles.

Oracles: brute-force enumeration of every tag sequence (itertools.product), a probability-space
forward-backward with per-step scaling (Rabiner 1989, section V.A) written here, the chapter's two
worked examples computed by hand, hand counts on a tiny tagged corpus, and EM expected counts by
enumeration.
"""

import itertools
import math
import warnings

import numpy as np
import pytest

from nlpcourse import testing
from nlpcourse.data import UNIVERSAL_TAGS, brown_split, universal_tag
from nlpcourse.examples import SCHOOL_TAGS, girl_sleep, i_go_to_school
from nlpcourse.guard import ReferenceUsedError, reference_switched_off
from nlpcourse.hmm import (
    HMM,
    SUFFIXES,
    WORD_CLASSES,
    MostFrequentTagger,
    backward_table,
    baum_welch,
    forward,
    forward_backward,
    forward_table,
    mle_emissions,
    mle_transitions,
    tagging_accuracy,
    viterbi,
    viterbi_batch,
    viterbi_loop,
    viterbi_pruned,
    viterbi_table,
    word_class,
)
from nlpcourse.lm import NotFittedError

NEG_INF = -math.inf


def log(p):
    """np.log with log(0) = -inf and no warning."""
    with np.errstate(divide="ignore"):
        return np.log(p)


def random_hmm(rng, N, T, p_zero=0.0):
    """Random normalised tables in log space; each entry is 0 (-inf) with probability p_zero."""

    def log_probs(shape):
        p = rng.dirichlet(np.ones(shape[-1]), size=shape[:-1])
        p[rng.random(shape) < p_zero] = 0.0
        return log(p)

    log_start = log_probs((N,))
    log_trans = log_probs((N, N))
    log_emit = log_probs((T, N))  # any (T, N) table: these rows need not be distributions
    return log_start, log_trans, log_emit


def path_score(log_start, log_trans, log_emit, path):
    """log P(words, path), term by term."""
    score = log_start[path[0]] + log_emit[0][path[0]]
    for t in range(1, len(path)):
        score += log_trans[path[t - 1]][path[t]] + log_emit[t][path[t]]
    return score


def brute_force(log_start, log_trans, log_emit):
    """Every tag sequence and its score (the oracle nlpcourse.testing.brute_force): the best
    score, log P(words) and the posteriors (None if P(words) = 0)."""
    tables = [np.asarray(table, dtype=float) for table in (log_start, log_trans, log_emit)]
    truth = testing.brute_force(*tables)
    return truth["best"], truth["loglik"], truth["posterior"]


# (N, T, p_zero, seed): 1 to 3 tags, sentences of 1 to 5 words, with and without zero entries
CASES = list(itertools.product((1, 2, 3), (1, 2, 4, 5), (0.0, 0.3), range(3)))


# ------------------------------------------------------------------------------ brute force


@pytest.mark.parametrize("N,T,p_zero,seed", CASES)
def test_dynamic_programs_match_brute_force(N, T, p_zero, seed):
    rng = np.random.default_rng(1000 * N + 100 * T + seed + int(10 * p_zero))
    tables = random_hmm(rng, N, T, p_zero)
    best, loglik, posterior = brute_force(*tables)

    path, logprob = viterbi(*tables)
    assert path.shape == (T,) and path.dtype.kind == "i"
    if best == NEG_INF:  # no tag sequence is possible: any path will do
        assert logprob == NEG_INF
    else:
        assert logprob == pytest.approx(best, abs=1e-12)
        assert path_score(*tables, path) == pytest.approx(logprob, abs=1e-12)

    if loglik == NEG_INF:
        assert forward(*tables) == NEG_INF
        with pytest.raises(ValueError, match="probability 0"):
            forward_backward(*tables)
    else:
        assert forward(*tables) == pytest.approx(loglik, abs=1e-12)
        post = forward_backward(*tables)
        assert post.shape == (T, N)
        np.testing.assert_allclose(post, posterior, atol=1e-12)
        np.testing.assert_allclose(post.sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("N,T,p_zero,seed", CASES)
def test_viterbi_table_matches_brute_force(N, T, p_zero, seed):
    """delta[t, j] is the best score of the words 0..t over the tag sequences ending in j, and
    backptr[t, j] a tag before j that reaches it."""
    rng = np.random.default_rng(1000 * N + 100 * T + seed + int(10 * p_zero))
    log_start, log_trans, log_emit = random_hmm(rng, N, T, p_zero)
    delta, backptr = viterbi_table(log_start, log_trans, log_emit)
    assert delta.shape == backptr.shape == (T, N) and backptr.dtype.kind == "i"
    for t in range(T):
        for j in range(N):
            prefixes = itertools.product(range(N), repeat=t)
            best = max(
                path_score(log_start, log_trans, log_emit[: t + 1], (*p, j)) for p in prefixes
            )
            assert delta[t, j] == pytest.approx(best, abs=1e-12)
            if t > 0 and best > NEG_INF:
                i = backptr[t, j]
                via_i = delta[t - 1, i] + log_trans[i, j] + log_emit[t, j]
                assert via_i == pytest.approx(best, abs=1e-12)
    path, logprob = viterbi(log_start, log_trans, log_emit)
    assert logprob == delta[-1].max()


def test_trellises_agree_with_each_other():
    """log P(O) three ways: from alpha at the end, from beta at the start, and at every t."""
    rng = np.random.default_rng(7)
    log_start, log_trans, log_emit = random_hmm(rng, 4, 9, p_zero=0.2)
    log_start[0] = 0.0  # make sure the sentence is possible
    log_trans[:, 0] = 0.0
    log_emit[:, 0] = 0.0
    alpha = forward_table(log_start, log_trans, log_emit)
    beta = backward_table(log_start, log_trans, log_emit)
    loglik = forward(log_start, log_trans, log_emit)
    for t in range(9):
        finite = np.isfinite(alpha[t] + beta[t])
        assert math.log(np.exp(alpha[t] + beta[t])[finite].sum()) == pytest.approx(loglik)


def test_one_word_sentence():
    log_start = np.log([0.5, 0.3, 0.2])
    log_trans = np.log(np.full((3, 3), 1 / 3))
    log_emit = np.log([[0.1, 0.5, 0.4]])
    # P(tag j, word) = pi_j b_j: 0.05, 0.15, 0.08
    path, logprob = viterbi(log_start, log_trans, log_emit)
    assert path.tolist() == [1] and math.exp(logprob) == pytest.approx(0.15)
    assert math.exp(forward(log_start, log_trans, log_emit)) == pytest.approx(0.28)
    np.testing.assert_allclose(
        forward_backward(log_start, log_trans, log_emit), [[0.05 / 0.28, 0.15 / 0.28, 0.08 / 0.28]]
    )
    assert viterbi_loop(log_start, log_trans, log_emit) == ([1], pytest.approx(logprob))


def test_impossible_transitions_are_avoided():
    """Tag 1 cannot follow tag 0; the best path must go around it even if emissions favour it."""
    log_start = log([1.0, 0.0, 0.0])
    log_trans = log([[0.5, 0.0, 0.5], [0.5, 0.5, 0.0], [0.0, 0.5, 0.5]])
    log_emit = log([[1.0, 1.0, 1.0], [0.1, 0.9, 0.2], [0.1, 0.9, 0.2]])
    path, logprob = viterbi(log_start, log_trans, log_emit)
    # from tag 0 only 0 or 2; then 0 -> {0, 2}, 2 -> {1, 2}: best is 0, 2, 1
    assert path.tolist() == [0, 2, 1]
    assert math.exp(logprob) == pytest.approx(1.0 * 0.5 * 0.2 * 0.5 * 0.9)


def test_no_warnings_with_all_minus_inf_columns():
    """Rows and columns of -inf (impossible tags) must not give NaN or floating-point warnings."""
    log_start = np.array([0.0, NEG_INF, NEG_INF])
    log_trans = log([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 0.0]])  # tag 2: no way out
    log_emit = log([[1.0, 0.0, 0.0], [0.4, 0.6, 0.0], [0.2, 0.8, 0.0]])
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        path, logprob = viterbi(log_start, log_trans, log_emit)
        loglik = forward(log_start, log_trans, log_emit)
        post = forward_backward(log_start, log_trans, log_emit)
        alpha = forward_table(log_start, log_trans, log_emit)
        beta = backward_table(log_start, log_trans, log_emit)
        everything_impossible = viterbi(log_start, log_trans, np.full((3, 3), NEG_INF))
    assert not np.isnan(alpha).any() and not np.isnan(beta).any()
    assert path.tolist() == [0, 1, 1]
    assert math.exp(logprob) == pytest.approx(1.0 * 0.5 * 0.6 * 0.5 * 0.8)
    # P(words) = 1 * (0.5 * 0.4 + 0.5 * 0.6) * ((0.2 + 0.3) * 0.5 * (0.2 + 0.8))
    assert math.exp(loglik) == pytest.approx(0.25)
    np.testing.assert_allclose(post[:, 2], 0.0)
    assert everything_impossible[1] == NEG_INF and len(everything_impossible[0]) == 3


# ------------------------------------------------------------------------- three Viterbis agree


@pytest.mark.parametrize("seed", range(20))
def test_loop_viterbi_equals_vectorised(seed):
    rng = np.random.default_rng(seed)
    N, T = int(rng.integers(1, 7)), int(rng.integers(1, 30))
    tables = random_hmm(rng, N, T, p_zero=0.2 if seed % 2 else 0.0)
    loop_path, loop_logprob = viterbi_loop(*tables)
    path, logprob = viterbi(*tables)
    assert loop_path == path.tolist()
    assert loop_logprob == logprob  # the same additions in the same order: bit for bit


@pytest.mark.parametrize("seed", range(30))
def test_pruned_viterbi_equals_full_viterbi_and_brute_force(seed):
    """Many zero emissions, as a tag dictionary makes them; some sentences impossible."""
    rng = np.random.default_rng(seed)
    N, T = int(rng.integers(1, 5)), int(rng.integers(1, 6))
    tables = random_hmm(rng, N, T, p_zero=0.5 if seed % 3 else 0.0)
    path, logprob = viterbi_pruned(*tables)
    full_path, full_logprob = viterbi(*tables)
    assert logprob == full_logprob
    assert path.tolist() == full_path.tolist()
    best, _, _ = brute_force(*tables)
    assert logprob == pytest.approx(best, abs=1e-12) if best > NEG_INF else logprob == NEG_INF


def test_pruned_viterbi_on_long_sparse_sentences():
    rng = np.random.default_rng(7)
    for _ in range(10):
        log_start, log_trans, log_emit = random_hmm(rng, 40, 60, p_zero=0.0)
        log_emit[rng.random(log_emit.shape) < 0.9] = NEG_INF  # about 4 candidate tags a word
        log_emit[np.arange(60), rng.integers(0, 40, 60)] = -1.0  # at least one per word
        path, logprob = viterbi_pruned(log_start, log_trans, log_emit)
        full_path, full_logprob = viterbi(log_start, log_trans, log_emit)
        assert path.tolist() == full_path.tolist()
        assert logprob == pytest.approx(full_logprob, abs=1e-9)


def test_tagger_decodes_the_same_with_pruning():
    rng = np.random.default_rng(3)
    words, tags = [f"w{k}" for k in range(30)], [f"T{k}" for k in range(8)]
    corpus = [
        [
            (words[i], tags[i % 8 if rng.random() < 0.8 else (i + 1) % 8])
            for i in rng.integers(0, 30, 9)
        ]
        for _ in range(200)
    ]
    hmm = HMM().fit(corpus)
    test = [[str(rng.choice(words + ["new", "Unseen"])) for _ in range(n)] for n in (1, 5, 17, 0)]
    batched = hmm.tag_sents(test)
    hmm.PRUNE_ABOVE_TAGS = 2  # force viterbi_pruned for this instance
    assert hmm.tag_sents(test) == batched


@pytest.mark.parametrize("seed", range(5))
def test_batch_viterbi_equals_one_at_a_time(seed):
    rng = np.random.default_rng(seed)
    B, T, N = 7, 12, 5
    log_start, log_trans, _ = random_hmm(rng, N, 1, p_zero=0.2)
    log_emit = np.log(rng.random((B, T, N)))  # padding positions hold random values too
    lengths = rng.integers(1, T + 1, size=B)
    paths, logprobs = viterbi_batch(log_start, log_trans, log_emit, lengths)
    assert paths.shape == (B, T) and logprobs.shape == (B,)
    for b in range(B):
        path, logprob = viterbi(log_start, log_trans, log_emit[b, : lengths[b]])
        assert paths[b, : lengths[b]].tolist() == path.tolist()
        assert logprobs[b] == logprob


# --------------------------------------------------------------------------------- underflow


def scaled_forward_backward(start, trans, emit):
    """Probability-space forward-backward with per-step scaling (Rabiner 1989, section V.A).

    alpha_hat_t = alpha_t / (c_1 ... c_t) sums to 1 at every t, log P(O) = sum_t log c_t, and
    beta_hat_t is scaled by the same c_{t+1}, so gamma_t = alpha_hat_t * beta_hat_t.
    """
    T, N = emit.shape
    alpha_hat, c = np.zeros((T, N)), np.zeros(T)
    a = start * emit[0]
    for t in range(T):
        if t > 0:
            a = (alpha_hat[t - 1] @ trans) * emit[t]
        c[t] = a.sum()
        alpha_hat[t] = a / c[t]
    beta_hat = np.ones((T, N))
    for t in range(T - 2, -1, -1):
        beta_hat[t] = trans @ (emit[t + 1] * beta_hat[t + 1]) / c[t + 1]
    return np.log(c).sum(), alpha_hat * beta_hat


def test_long_sequence_does_not_underflow():
    rng = np.random.default_rng(3)
    N, T = 5, 2000
    start = rng.dirichlet(np.ones(N))
    trans = rng.dirichlet(np.ones(N), size=N)
    emit = rng.dirichlet(np.ones(20), size=N).T[rng.integers(0, 20, size=T)]  # (T, N)

    naive = start * emit[0]  # unscaled probability space: underflows to exactly 0
    for t in range(1, T):
        naive = (naive @ trans) * emit[t]
    assert naive.sum() == 0.0

    log_start, log_trans, log_emit = np.log(start), np.log(trans), np.log(emit)
    loglik = forward(log_start, log_trans, log_emit)
    expected_loglik, expected_posterior = scaled_forward_backward(start, trans, emit)
    assert np.isfinite(loglik) and loglik < -1000
    assert loglik == pytest.approx(expected_loglik, rel=1e-10)
    posterior = forward_backward(log_start, log_trans, log_emit)
    np.testing.assert_allclose(posterior, expected_posterior, atol=1e-9)

    path, logprob = viterbi(log_start, log_trans, log_emit)
    assert np.isfinite(logprob) and logprob <= loglik
    assert logprob == pytest.approx(path_score(log_start, log_trans, log_emit, path), rel=1e-12)
    loop_path, loop_logprob = viterbi_loop(log_start, log_trans, log_emit)
    assert loop_path == path.tolist() and loop_logprob == logprob
    # the best path beats the path of the most probable tag at each position (posterior decoding)
    posterior_path = expected_posterior.argmax(axis=1)
    assert logprob >= path_score(log_start, log_trans, log_emit, posterior_path)


# ---------------------------------------------------------------------------- worked examples


def test_worked_example_emissions():
    """girl: 8 times a noun, 4 times a verb; sleep: 2 times a noun, 6 times a verb."""
    corpus = girl_sleep()
    assert sorted(map(tuple, corpus)) == sorted(
        [(("girl", "NOUN"),)] * 8 + [(("girl", "VERB"),)] * 4
        + [(("sleep", "NOUN"),)] * 2 + [(("sleep", "VERB"),)] * 6
    )  # fmt: skip
    mle = mle_emissions(corpus)
    assert mle["NOUN"]["girl"] == pytest.approx(8 / 10)  # = 0.8
    assert mle["NOUN"]["sleep"] == pytest.approx(2 / 10)  # = 0.2
    assert mle["VERB"]["girl"] == pytest.approx(4 / 10)  # = 0.4
    assert mle["VERB"]["sleep"] == pytest.approx(6 / 10)  # = 0.6
    # the tagger smooths (Witten-Bell): each tag saw 2 different words in 10 tokens, so it keeps
    # 2 / (10 + 2) for new words and P(girl | NOUN) = 8 / (10 + 2)
    hmm = HMM().fit(corpus)
    noun, verb = hmm.tags_.index("NOUN"), hmm.tags_.index("VERB")
    emit = np.exp(hmm.log_emit_)
    girl, sleep = hmm.vocab_["girl"], hmm.vocab_["sleep"]
    assert emit[[girl, sleep], noun] == pytest.approx([8 / 12, 2 / 12])
    assert emit[[girl, sleep], verb] == pytest.approx([4 / 12, 6 / 12])


def test_worked_example_viterbi_i_go_to_school():
    """The chapter's trellis for "I go to school" with tags VB, TO, NN, PPSS.

    By hand: "I" can only be PPSS: delta_1(PPSS) = .67 * .37 = .2479.
    "go":     delta_2(VB) = .2479 * .23 * .1  = .0057017,
              delta_2(NN) = .2479 * .12 * .85 = .0252858.
    "to":     via VB .0057017 * .35 = .0019956; via NN .0252858 * .16 = .0040457 (wins);
              delta_3(TO) = .0040457 * .99 = .00400527.
    "school": delta_4(VB) = .00400527 * .83 * .8  = .0026595 (wins),
              delta_4(NN) = .00400527 * .47 * .68 = .0012801.
    Best: PPSS NN TO VB, probability .67 * .37 * .12 * .85 * .16 * .99 * .83 * .8.
    """
    tags = list(SCHOOL_TAGS)
    start, trans, emit = i_go_to_school()  # the exam's tables, as the chapter gives them
    tables = log(start), log(trans), log(emit)
    path, logprob = viterbi(*tables)
    assert [tags[j] for j in path] == ["PPSS", "NN", "TO", "VB"]
    by_hand = 0.67 * 0.37 * 0.12 * 0.85 * 0.16 * 0.99 * 0.83 * 0.8
    assert by_hand == pytest.approx(0.0026595, abs=1e-7)
    assert math.exp(logprob) == pytest.approx(by_hand, rel=1e-12)
    assert viterbi_loop(*tables)[0] == path.tolist()
    assert brute_force(*tables)[0] == pytest.approx(logprob)
    # the trellis itself, cell by cell as worked out above
    delta, backptr = viterbi_table(*tables)
    VB, TO, NN, PPSS = range(4)
    by_hand_cells = {
        (0, PPSS): (0.2479, None),
        (1, VB): (0.0057017, PPSS),
        (1, NN): (0.0252858, PPSS),
        (2, TO): (0.00400527, NN),
        (3, VB): (0.0026595, TO),
        (3, NN): (0.0012801, TO),
    }
    for (t, j), (p, previous) in by_hand_cells.items():
        assert math.exp(delta[t, j]) == pytest.approx(p, abs=5e-8)
        if previous is not None:
            assert backptr[t, j] == previous
    impossible = [(t, j) for t in range(4) for j in range(4) if (t, j) not in by_hand_cells]
    assert all(delta[t, j] == NEG_INF for t, j in impossible)


# ------------------------------------------------------------------------------- the tagger

TINY = [
    [("the", "DET"), ("dog", "NOUN"), ("barks", "VERB")],
    [("the", "DET"), ("dog", "NOUN"), ("sleeps", "VERB")],
    [("a", "DET"), ("cat", "NOUN"), ("barks", "VERB")],
]


def test_mle_by_hand():
    assert mle_transitions(TINY) == {
        "<s>": {"DET": 1.0},
        "DET": {"NOUN": 1.0},
        "NOUN": {"VERB": 1.0},
    }
    corpus = TINY + [[("dog", "NOUN")], [("the", "DET"), ("barks", "NOUN")]]
    # c(<s>) = 5, c(DET) = 4, c(NOUN) = 5; NOUN ends 2 sentences, so its row sums to 3/5
    assert mle_transitions(corpus) == {
        "<s>": {"DET": 4 / 5, "NOUN": 1 / 5},
        "DET": {"NOUN": 4 / 4},
        "NOUN": {"VERB": 3 / 5},
    }
    emissions = mle_emissions(corpus)
    assert emissions["DET"] == {"the": 3 / 4, "a": 1 / 4}
    assert emissions["NOUN"] == pytest.approx({"dog": 3 / 5, "cat": 1 / 5, "barks": 1 / 5})


@pytest.mark.parametrize("seed", range(3))
def test_unsmoothed_tagger_tables_equal_mle(seed):
    """With trans_lambda = 0 the tagger's transitions are the dictionary MLE; its known-word
    emissions are the MLE scaled by Witten-Bell's c(t) / (c(t) + T(t))."""
    rng = np.random.default_rng(seed)
    words, tags = ["w0", "w1", "w2", "w3", "w4"], ["A", "B", "C"]
    corpus = [
        [(str(rng.choice(words)), str(rng.choice(tags))) for _ in range(rng.integers(1, 6))]
        for _ in range(20)
    ]
    hmm = HMM(trans_lambda=0.0).fit(corpus)
    transitions, emissions = mle_transitions(corpus), mle_emissions(corpus)
    for i, previous in enumerate(hmm.tags_):
        assert math.exp(hmm.log_start_[i]) == pytest.approx(transitions["<s>"].get(previous, 0))
        for j, tag in enumerate(hmm.tags_):
            expected = transitions.get(previous, {}).get(tag, 0)
            assert math.exp(hmm.log_trans_[i, j]) == pytest.approx(expected)
    for j, tag in enumerate(hmm.tags_):
        count = sum(1 for s in corpus for _, t in s if t == tag)
        scale = count / (count + len(emissions[tag]))
        for word, v in hmm.vocab_.items():
            expected = emissions[tag].get(word, 0) * scale
            assert math.exp(hmm.log_emit_[v, j]) == pytest.approx(expected)


def test_tagger_tables_equal_hand_counts():
    lam, k = 0.2, 0.5
    hmm = HMM(trans_lambda=lam, rare_count=1, class_k=k).fit(TINY)
    assert hmm.tags_ == ["DET", "NOUN", "VERB"]
    assert set(hmm.vocab_) == {"the", "dog", "barks", "sleeps", "a", "cat"}
    # transitions: <s>->DET, DET->NOUN, NOUN->VERB, VERB->/s, 3 times each; every next symbol
    # (DET, NOUN, VERB, </s>) has relative frequency 3/12 = 1/4
    big, small = (1 - lam) + lam / 4, lam / 4
    np.testing.assert_allclose(np.exp(hmm.log_start_), [big, small, small])
    np.testing.assert_allclose(
        np.exp(hmm.log_trans_), [[small, big, small], [small, small, big], [small, small, small]]
    )
    np.testing.assert_allclose(np.exp(hmm.log_end_), [small, small, big])
    # emissions: each tag has c = 3 tokens of T = 2 different words, so P(w | tag) = c(tag, w) / 5
    # and u = 2 / 5 is left for new words
    emit = np.exp(hmm.log_emit_)
    for word, tag, count in [("the", 0, 2), ("a", 0, 1), ("dog", 1, 2), ("cat", 1, 1),
                             ("barks", 2, 2), ("sleeps", 2, 1)]:  # fmt: skip
        expected = np.zeros(3)
        expected[tag] = count / 5
        np.testing.assert_allclose(emit[hmm.vocab_[word]], expected)
    # new words: the rare words a and cat are of class "lower-", sleeps of "lower-s"; add-k over
    # K classes, 1 rare token per tag
    K, V = len(WORD_CLASSES), len(hmm.vocab_)
    lower, lower_s = emit[V + WORD_CLASSES.index("lower-")], emit[V + WORD_CLASSES.index("lower-s")]
    np.testing.assert_allclose(lower, np.array([1 + k, 1 + k, k]) / (1 + k * K) * 2 / 5)
    np.testing.assert_allclose(lower_s, np.array([k, k, 1 + k]) / (1 + k * K) * 2 / 5)
    # P(w | j) over known words plus new-word classes sums to 1 for every tag
    np.testing.assert_allclose(emit.sum(axis=0), 1.0)


def test_tagger_tags():
    hmm = HMM().fit(TINY)
    assert hmm.tag(["a", "cat", "sleeps"]) == ["DET", "NOUN", "VERB"]
    assert hmm.tag(["the", "wug", "jumps"]) == ["DET", "NOUN", "VERB"]  # two unknown words
    assert hmm.tag(["The", "cat", "barks"]) == ["DET", "NOUN", "VERB"]  # "The" read as "the"
    assert hmm.tag([]) == []
    sentences = [["the", "dog", "sleeps"], [], ["a", "dog"], ["barks"]]
    assert hmm.tag_sents(sentences) == [hmm.tag(s) for s in sentences]
    assert hmm.tag_sents(sentences, batch_size=1) == hmm.tag_sents(sentences)
    assert set(hmm.tag(["blicket"] * 5)) <= set(hmm.tags_)  # only training tags come out


def test_sentence_tables_are_what_the_tagger_decodes():
    hmm = HMM().fit(TINY)
    words = ["The", "wug", "sleeps"]  # lower-cased, unknown, known
    log_start, log_trans, log_emit = hmm.sentence_tables(words)
    V = len(hmm.vocab_)
    np.testing.assert_array_equal(log_emit[0], hmm.log_emit_[hmm.vocab_["the"]])
    np.testing.assert_array_equal(log_emit[1], hmm.log_emit_[V + WORD_CLASSES.index("lower-")])
    np.testing.assert_array_equal(log_emit[2], hmm.log_emit_[hmm.vocab_["sleeps"]] + hmm.log_end_)

    def joint(tags):  # brute force: the joint log probability, end transition included
        rows = [hmm.vocab_["the"], V + WORD_CLASSES.index("lower-"), hmm.vocab_["sleeps"]]
        score = hmm.log_start_[tags[0]] + hmm.log_emit_[rows[0], tags[0]]
        for t in (1, 2):
            score += hmm.log_trans_[tags[t - 1], tags[t]] + hmm.log_emit_[rows[t], tags[t]]
        return score + hmm.log_end_[tags[2]]

    best = max(itertools.product(range(len(hmm.tags_)), repeat=3), key=joint)
    path, logprob = viterbi(log_start, log_trans, log_emit)
    assert list(path) == list(best)
    assert logprob == pytest.approx(joint(best))
    assert [hmm.tags_[j] for j in path] == hmm.tag(words)
    with pytest.raises(ValueError, match="empty"):
        hmm.sentence_tables([])


def test_accuracy_of_tags_given_equals_tagging_again():
    hmm = HMM().fit(TINY)
    gold = [[("the", "DET"), ("wug", "NOUN")], [("a", "DET"), ("cat", "VERB")]]
    predicted = hmm.tag_sents([[w for w, _ in s] for s in gold])
    assert tagging_accuracy(hmm, gold, predicted) == tagging_accuracy(hmm, gold)
    assert tagging_accuracy(hmm, gold)["all"] == 0.75
    with pytest.raises(ValueError, match="predicted has 1 sentences"):
        tagging_accuracy(hmm, gold, predicted[:1])


def test_tagger_without_rare_words():
    corpus = [[("a", "DET"), ("b", "NOUN")]] * 2  # every word seen twice: no rare words
    hmm = HMM().fit(corpus)
    # u = T / (c + T) = 1 / 3 for both tags, spread evenly over the K classes
    np.testing.assert_allclose(np.exp(hmm.log_emit_[len(hmm.vocab_) :]), 1 / 3 / len(WORD_CLASSES))
    assert hmm.tag(["a", "zzz"]) == ["DET", "NOUN"]  # the transitions decide


def test_tagger_when_every_word_is_rare():
    """Each word seen once: known words must keep their probability."""
    hmm = HMM().fit([[("the", "DET"), ("dog", "NOUN")], [("a", "DET"), ("cat", "NOUN")]])
    assert hmm.tag(["the", "dog"]) == ["DET", "NOUN"]
    assert hmm.tag(["a", "zebra"]) == ["DET", "NOUN"]
    assert np.isfinite(hmm.log_emit_[hmm.vocab_["the"], hmm.tags_.index("DET")])


def test_tagger_bad_input():
    with pytest.raises(ValueError, match="at least one"):
        HMM().fit([])
    with pytest.raises(ValueError, match="at least one"):
        HMM().fit([[], []])
    with pytest.raises(ValueError, match="pairs"):
        HMM().fit([["the", "dog"]])
    with pytest.raises(ValueError, match="trans_lambda"):
        HMM(trans_lambda=2.0).fit(TINY)
    with pytest.raises(NotFittedError, match="not fitted"):
        HMM().tag(["the"])


def test_most_frequent_tagger():
    corpus = TINY + [[("barks", "NOUN")]]
    baseline = MostFrequentTagger().fit(corpus)
    assert baseline.tag(["barks", "a", "zebra"]) == ["VERB", "DET", "DET"]  # rare: a, cat, sleeps
    result = tagging_accuracy(baseline, [[("barks", "VERB"), ("zebra", "NOUN")]])
    assert result == {"all": 0.5, "known": 1.0, "unknown": 0.0, "unknown_rate": 0.5}


def test_word_classes():
    assert word_class("Tokenizing") == "capital-ing"
    assert word_class("zorp") == "lower-"
    assert word_class("nationalization") == "lower-tion"  # longest suffix wins over -s, -al ...
    assert word_class("is") == "lower-"  # too short for the suffix -s
    assert word_class("NATO") == "allcaps-"
    assert word_class("well-meaning") == "hyphen-ing"
    assert word_class("1960's") == "number"
    assert word_class("--") == "punct"
    rng = np.random.default_rng(0)
    alphabet = list("abcXYZ-'9.s")
    for _ in range(500):
        word = "".join(rng.choice(alphabet, size=rng.integers(1, 8)))
        assert word_class(word) in WORD_CLASSES
    assert all(s == s.lower() for s in SUFFIXES)


# -------------------------------------------------------------------------------- Baum-Welch


def test_baum_welch_likelihood_never_decreases():
    rng = np.random.default_rng(5)
    start, trans = rng.dirichlet(np.ones(3)), rng.dirichlet(np.ones(3), size=3)
    emit = rng.dirichlet(np.ones(4), size=3)
    observations = []
    for _ in range(10):  # sample 10 sequences of length 20 from a random HMM
        q, obs = rng.choice(3, p=start), []
        for _ in range(20):
            obs.append(int(rng.choice(4, p=emit[q])))
            q = rng.choice(3, p=trans[q])
        observations.append(obs)
    result = baum_welch(observations, n_states=3, n_symbols=4, n_iter=30, seed=0)
    lls = result.log_likelihoods
    assert len(lls) == 31
    assert all(later >= earlier - 1e-9 for earlier, later in itertools.pairwise(lls))
    assert lls[-1] > lls[0] + 1
    np.testing.assert_allclose(np.exp(result.log_start).sum(), 1.0)
    np.testing.assert_allclose(np.exp(result.log_trans).sum(axis=1), 1.0)
    np.testing.assert_allclose(np.exp(result.log_emit_table).sum(axis=0), 1.0)


def test_baum_welch_one_step_equals_enumeration():
    """One EM step from the starting tables, with expected counts summed over all state paths."""
    observations = [[0, 1, 1], [1, 0]]
    N, V = 2, 2
    initial = baum_welch(observations, N, V, n_iter=0, seed=3)
    stepped = baum_welch(observations, N, V, n_iter=1, seed=3)
    start, trans = np.exp(initial.log_start), np.exp(initial.log_trans)
    emit = np.exp(initial.log_emit_table)  # (V, N)
    e_start, e_trans, e_emit, total_loglik = np.zeros(N), np.zeros((N, N)), np.zeros((V, N)), 0.0
    for obs in observations:
        weights = {}
        for path in itertools.product(range(N), repeat=len(obs)):
            p = start[path[0]] * emit[obs[0], path[0]]
            for t in range(1, len(obs)):
                p *= trans[path[t - 1], path[t]] * emit[obs[t], path[t]]
            weights[path] = p
        total = sum(weights.values())
        total_loglik += math.log(total)
        for path, p in weights.items():
            e_start[path[0]] += p / total
            for t in range(len(obs)):
                e_emit[obs[t], path[t]] += p / total
                if t > 0:
                    e_trans[path[t - 1], path[t]] += p / total
    assert initial.log_likelihoods == [pytest.approx(total_loglik)]
    np.testing.assert_allclose(np.exp(stepped.log_start), e_start / len(observations))
    np.testing.assert_allclose(np.exp(stepped.log_trans), e_trans / e_trans.sum(1, keepdims=True))
    np.testing.assert_allclose(np.exp(stepped.log_emit_table), e_emit / e_emit.sum(0))


def test_baum_welch_bad_input():
    with pytest.raises(ValueError, match="non-empty"):
        baum_welch([[0, 1], []], 2, 2)
    with pytest.raises(ValueError, match="n_symbols"):
        baum_welch([[0, 2]], 2, 2)


# ----------------------------------------------------------------------------------- errors


def test_bad_tables_raise_clear_errors():
    log_start, log_trans, log_emit = random_hmm(np.random.default_rng(0), 3, 4)
    for function in (viterbi, viterbi_loop, forward, forward_backward):
        with pytest.raises(ValueError, match="log_trans must have shape"):
            function(log_start, log_trans[:2], log_emit)
        with pytest.raises(ValueError, match="log_emit must have shape"):
            function(log_start, log_trans, log_emit[:, :2])
        with pytest.raises(ValueError, match="log_start must have shape"):
            function(log_start[None], log_trans, log_emit)
        with pytest.raises(ValueError, match="empty"):
            function(log_start, log_trans, np.zeros((0, 3)))
        for name, index in (("log_start", 0), ("log_trans", 1), ("log_emit", 2)):
            tables = [log_start.copy(), log_trans.copy(), log_emit.copy()]
            tables[index].flat[-1] = np.nan
            with pytest.raises(ValueError, match=f"{name} contains NaN"):
                function(*tables)
        with pytest.raises(ValueError, match=r"\+inf"):
            function(log_start, log_trans, np.full((4, 3), np.inf))
    with pytest.raises(ValueError, match="lengths"):
        viterbi_batch(log_start, log_trans, log_emit[None], [5])


def test_reference_refuses_during_a_check():
    tables = random_hmm(np.random.default_rng(0), 2, 2)
    with reference_switched_off(), pytest.raises(ReferenceUsedError):
        viterbi(*tables)


# ------------------------------------------------------------------------- universal tagset


def test_universal_tag_rules():
    examples = {
        "NN": "NOUN", "NP$-TL": "NOUN", "FW-NN-TL-NC": "NOUN", "VBZ": "VERB", "BEZ*": "VERB",
        "MD*-HL": "VERB", "PPS+BEZ": "PRON", "PP$$": "PRON", "PP$-TL": "PRON", "WP$": "PRON",
        "AT": "DET", "EX+BEZ": "DET", "IN-TL": "ADP", "CS": "ADP", "CD$": "NUM", "OD": "ADJ",
        "JJ$-TL": "ADJ", "CC": "CONJ", "TO+VB": "PRT", "RP": "PRT", "*": "ADV", "FW-*-TL": "ADV",
        "QL": "ADV", "---HL": ".", "''": ".", "``": ".", "UH": "X", "NIL": "X",
    }  # fmt: skip
    for brown, universal in examples.items():
        assert universal_tag(brown) == universal, brown
    assert set(examples.values()) == set(UNIVERSAL_TAGS)
    with pytest.raises(ValueError, match="no universal tag"):
        universal_tag("XYZ")


def test_brown_split_rejects_unknown_tagsets():
    with pytest.raises(ValueError, match="tagset must be one of"):
        brown_split(tagged=True, tagset="penn")
    with pytest.raises(ValueError, match="tagged=True"):
        brown_split(tagset="universal")


@pytest.mark.corpus
def test_universal_tagset_covers_the_corpus():
    brown_parts = brown_split(tagged=True)
    universal_parts = brown_split(tagged=True, tagset="universal")
    for brown, universal in zip(brown_parts, universal_parts, strict=True):
        assert [[w for w, _ in s] for s in brown] == [[w for w, _ in s] for s in universal]
        for s_brown, s_universal in zip(brown, universal, strict=True):
            for (_, tag), (_, utag) in zip(s_brown, s_universal, strict=True):
                assert utag == universal_tag(tag) and utag in UNIVERSAL_TAGS


@pytest.mark.corpus
def test_brown_universal_accuracy():
    train, _, test = brown_split(tagged=True, tagset="universal")
    result = tagging_accuracy(HMM().fit(train), test)
    baseline = tagging_accuracy(MostFrequentTagger().fit(train), test)
    assert result["all"] >= 0.95
    assert result["all"] > baseline["all"] and result["unknown"] > baseline["unknown"] + 0.1
