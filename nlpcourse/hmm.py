"""Hidden Markov models: Viterbi, forward-backward, Baum-Welch, a part-of-speech tagger (chapter 2).

Based on Jurafsky & Martin, *Speech and Language Processing* (3rd ed. draft, "SLP3"), chapter 8
(part-of-speech tagging with HMMs) and Appendix A (hidden Markov models), and on Rabiner (1989),
"A tutorial on hidden Markov models and selected applications in speech recognition". Equation
labels ``(hmm-...)`` are the book's (``book/hmm.md``).

An HMM with ``N`` states (tags) has three tables, named after the book's symbols:

* ``log_start`` (pi), shape ``(N,)``: ``log_start[j] = log P(q_1 = j)``;
* ``log_trans`` (A), shape ``(N, N)``: ``log_trans[i, j] = log P(q_t = j | q_{t-1} = i)``;
* ``log_emit`` (B), shape ``(T, N)``: ``log_emit[t, j] = log P(o_t | q_t = j)``.

The dynamic programs take the emission column of every position of *this* sentence, a ``(T, N)``
table, rather than B and a sequence of symbol ids: the same code then serves a tagger whose
emissions come from a dictionary, an unknown-word model or anything else. ``-inf`` (probability 0)
is allowed anywhere. With ``delta``, ``alpha`` and ``beta`` indexed from ``t = 0`` in the code and
from ``t = 1`` in the equations, the module implements

    Viterbi     delta_1(j) = log pi_j + log b_j(o_1)
                delta_t(j) = max_i [delta_{t-1}(i) + log a_ij] + log b_j(o_t)     (hmm-viterbi)
                backptr_t(j) = argmax_i [delta_{t-1}(i) + log a_ij]               (hmm-backptr)
                best path: q_T = argmax_j delta_T(j), then q_{t-1} = backptr_t(q_t)
    forward     alpha_1(j) = log pi_j + log b_j(o_1)
                alpha_t(j) = logsumexp_i [alpha_{t-1}(i) + log a_ij] + log b_j(o_t)  (hmm-forward)
                log P(O) = logsumexp_j alpha_T(j)                                  (hmm-likelihood)
    backward    beta_T(i) = 0
                beta_t(i) = logsumexp_j [log a_ij + log b_j(o_{t+1}) + beta_{t+1}(j)] (hmm-backward)
    posterior   gamma_t(j) = P(q_t = j | O) = exp(alpha_t(j) + beta_t(j) - log P(O))  (hmm-gamma)

and Baum-Welch (EM) re-estimation, Rabiner eq. 40 (:func:`baum_welch`). Each function's docstring
repeats its equation.

The tagger :class:`HMM` is a supervised bigram HMM (SLP3 section 8.4) with the additions a real
corpus needs, each stated in its docstring: interpolated transitions, a transition into an
end-of-sentence state ``</s>``, and Witten-Bell smoothed emissions whose share for new words is
spread over word shape and suffix classes estimated on rare training words (in the spirit of the
unknown-word model of Brants 2000, TnT).
:func:`mle_transitions` and :func:`mle_emissions` are the unsmoothed maximum-likelihood estimates
of SLP3 section 8.4 written with dictionaries, one count at a time, as the chapter first derives
them (exercise 2's add-k tables have their answer key in :mod:`nlpcourse.checks.hmm`);
:class:`MostFrequentTagger` is the baseline the tagger is compared with.

Deliberate departures from the book's presentation:

* Everything is in log space (the book multiplies probabilities), so that long sentences do not
  underflow; sums of probabilities become ``logsumexp``.
* The pure functions (:func:`viterbi`, :func:`forward`, ...) have no end state, as in SLP3's
  Viterbi; only :class:`HMM` adds ``P(</s> | q_T)``, by adding it to the last emission column.
* :func:`viterbi_loop` is the book's triple loop, kept as the lesson; :func:`viterbi_table` is the
  same recursion vectorised over tags (the trellis ``delta``, ``backptr``), :func:`viterbi` follows
  its back pointers, and :func:`viterbi_batch` vectorised over sentences as well,
  which is what makes :meth:`HMM.tag_sents` fast with few tags; with many tags it uses
  :func:`viterbi_pruned`, which skips the tags a word cannot have. The tests check the four
  against each other and against brute-force enumeration.
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from nlpcourse.guard import reference
from nlpcourse.lm import NotFittedError

TaggedSentence = Sequence[tuple[str, str]]


# ------------------------------------------------------------------------------------ helpers


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    """``log(sum(exp(a), axis))`` without overflow, and ``-inf`` (no warning) where all are -inf.

    Shift by the maximum ``m`` so the largest term is ``exp(0) = 1``. Where every entry is -inf the
    shift would be ``-inf - -inf = nan``, so there we shift by 0 instead and get ``log(0) = -inf``.
    """
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis)


def _log(p: np.ndarray) -> np.ndarray:
    """Natural log with ``log(0) = -inf`` and no warning."""
    with np.errstate(divide="ignore"):
        return np.log(p)


def _check_tables(
    log_start: ArrayLike, log_trans: ArrayLike, log_emit: ArrayLike, batched: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three tables as float arrays, or ``ValueError`` saying what is wrong with them.

    ``log_emit`` has shape ``(T, N)``, or ``(B, T, N)`` when ``batched``.
    """
    log_start = np.asarray(log_start, dtype=float)
    log_trans = np.asarray(log_trans, dtype=float)
    log_emit = np.asarray(log_emit, dtype=float)
    emit_shape, n_emit_dims = ("(B, T, N)", 3) if batched else ("(T, N)", 2)
    if log_start.ndim != 1 or log_start.shape[0] == 0:
        raise ValueError(f"log_start must have shape (N,) with N >= 1, got {log_start.shape}")
    N = log_start.shape[0]
    if log_trans.shape != (N, N):
        raise ValueError(f"log_trans must have shape (N, N) = ({N}, {N}), got {log_trans.shape}")
    if log_emit.ndim != n_emit_dims or log_emit.shape[-1] != N:
        raise ValueError(
            f"log_emit must have shape {emit_shape} with N = {N}, got {log_emit.shape}"
        )
    if log_emit.shape[-2] == 0:
        raise ValueError("the sentence is empty (T = 0): there is nothing to tag or score")
    for name, table in (("log_start", log_start), ("log_trans", log_trans), ("log_emit", log_emit)):
        if np.isnan(table).any():
            raise ValueError(
                f"{name} contains NaN at index {tuple(np.argwhere(np.isnan(table))[0])}"
            )
        if (table == np.inf).any():
            raise ValueError(f"{name} contains +inf: log probabilities must be finite or -inf")
    return log_start, log_trans, log_emit


# ------------------------------------------------------------------------------------ Viterbi


@reference
def viterbi_loop(
    log_start: ArrayLike, log_trans: ArrayLike, log_emit: ArrayLike
) -> tuple[list[int], float]:
    """Viterbi with plain Python loops, eq. (hmm-viterbi) and (hmm-backptr): the lesson.

    ``delta[t][j]`` is the log probability of the best tag sequence for words ``0..t`` that ends in
    tag ``j``; ``backptr[t][j]`` the tag before ``j`` on that sequence:

        delta[t][j] = max_i (delta[t-1][i] + log_trans[i][j]) + log_emit[t][j]

    Ties go to the smallest ``i`` (as ``np.argmax`` does). Returns the best path as a list of tag
    indices and its joint log probability ``log P(words, path)``. O(T N^2) time.
    """
    log_start, log_trans, log_emit = (
        a.tolist() for a in _check_tables(log_start, log_trans, log_emit)
    )
    T, N = len(log_emit), len(log_start)
    delta = [[log_start[j] + log_emit[0][j] for j in range(N)]]
    backptr = [[0] * N]
    for t in range(1, T):
        delta.append([0.0] * N)
        backptr.append([0] * N)
        for j in range(N):
            best_i, best = 0, delta[t - 1][0] + log_trans[0][j]
            for i in range(1, N):
                score = delta[t - 1][i] + log_trans[i][j]
                if score > best:
                    best_i, best = i, score
            delta[t][j] = best + log_emit[t][j]
            backptr[t][j] = best_i
    last = max(range(N), key=lambda j: (delta[T - 1][j], -j))  # first index among equal maxima
    path = [last]
    for t in range(T - 1, 0, -1):
        path.append(backptr[t][path[-1]])
    path.reverse()
    return path, delta[T - 1][last]


@reference
def viterbi_table(
    log_start: ArrayLike, log_trans: ArrayLike, log_emit: ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """The Viterbi trellis: ``delta`` and ``backptr``, both ``(T, N)``, eqs. (hmm-viterbi) and
    (hmm-backptr), as :func:`forward_table` gives ``alpha``.

        delta_1(j) = log pi_j + log b_j(o_1)
        delta_t(j) = max_i [delta_{t-1}(i) + log a_ij] + log b_j(o_t)
        backptr_t(j) = argmax_i [delta_{t-1}(i) + log a_ij]

    ``delta[t, j]`` is the log probability of the best tag sequence for words ``0..t`` that ends
    in tag ``j``, and ``backptr[t, j]`` the tag before ``j`` on it (row 0 is unused and 0). The
    loop over ``i`` and ``j`` of :func:`viterbi_loop` becomes one ``(N, N)`` array per time step
    (the loop over ``t`` stays: each step needs the one before); ties go to the smallest ``i``.
    """
    log_start, log_trans, log_emit = _check_tables(log_start, log_trans, log_emit)
    T, N = log_emit.shape
    delta = np.empty((T, N))  # (T, N)
    backptr = np.zeros((T, N), dtype=np.intp)  # (T, N); row 0 unused
    delta[0] = log_start + log_emit[0]
    for t in range(1, T):
        scores = delta[t - 1][:, None] + log_trans  # (N, N): [i, j] = delta_{t-1}(i) + log a_ij
        backptr[t] = np.argmax(scores, axis=0)  # (N,)  (hmm-backptr)
        delta[t] = scores[backptr[t], np.arange(N)] + log_emit[t]  # (N,)  (hmm-viterbi)
    return delta, backptr


@reference
def viterbi(
    log_start: ArrayLike, log_trans: ArrayLike, log_emit: ArrayLike
) -> tuple[np.ndarray, float]:
    """The most probable tag sequence and its joint log probability, eq. (hmm-viterbi).

    Fills the trellis with :func:`viterbi_table`, then follows the back pointers from the best
    last tag: ``q_T = argmax_j delta_T(j)``, ``q_{t-1} = backptr_t(q_t)``. Returns ``path``, an
    int array of shape ``(T,)``, and ``log P(words, path)``. If every tag sequence has probability
    0, the log probability is ``-inf`` and the path is whatever ``argmax`` picks among equal
    ``-inf`` scores. Raises ``ValueError`` for tables of disagreeing shapes, NaN, +inf, or an
    empty sentence.
    """
    delta, backptr = viterbi_table(log_start, log_trans, log_emit)  # (T, N) each
    T = len(delta)
    path = np.zeros(T, dtype=np.intp)  # (T,)
    path[T - 1] = np.argmax(delta[T - 1])
    for t in range(T - 1, 0, -1):
        path[t - 1] = backptr[t, path[t]]
    return path, float(delta[T - 1, path[T - 1]])


@reference
def viterbi_batch(
    log_start: ArrayLike, log_trans: ArrayLike, log_emit: ArrayLike, lengths: ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`viterbi` for ``B`` sentences at once: eq. (hmm-viterbi) vectorised over sentences too.

    ``log_emit`` has shape ``(B, T, N)``: sentence ``b`` fills rows ``0 .. lengths[b] - 1`` and the
    rest is padding (ignored, but it must not be NaN). A sentence that has ended keeps its
    ``delta`` and points back to the same tag, so its best path can be read off at the end like
    every other. Returns ``paths``, shape ``(B, T)``, valid in ``paths[b, :lengths[b]]`` (the
    padding repeats the last tag), and the log probabilities, shape ``(B,)``.

    The recursion is that of :func:`viterbi`, with two layout choices for speed: time comes first
    in the arrays used inside the loop, so each step reads one contiguous block, and the maximum
    over the previous tag ``i`` runs along the last axis.
    """
    log_start, log_trans, log_emit = _check_tables(log_start, log_trans, log_emit, batched=True)
    B, T, N = log_emit.shape
    lengths = np.asarray(lengths, dtype=np.intp)
    if lengths.shape != (B,) or (lengths < 1).any() or (lengths > T).any():
        raise ValueError(f"lengths must be B = {B} integers in 1..T = {T}, got {lengths.tolist()}")
    log_emit = np.ascontiguousarray(log_emit.transpose(1, 0, 2))  # (T, B, N)
    trans_ji = np.ascontiguousarray(log_trans.T)  # (N, N): [j, i] = log a_ij
    delta = log_start + log_emit[0]  # (B, N)
    backptr = np.zeros((T, B, N), dtype=np.intp)  # (T, B, N)
    stay = np.arange(N)  # (N,): the back pointer of a sentence that has ended
    for t in range(1, T):
        scores = delta[:, None, :] + trans_ji  # (B, N, N): [b, j, i] = delta_b(i) + log a_ij
        backptr[t] = np.argmax(scores, axis=2)  # (B, N)
        best = np.take_along_axis(scores, backptr[t][:, :, None], axis=2)[:, :, 0]  # (B, N)
        new_delta = best + log_emit[t]  # (B, N)
        ended = t >= lengths  # (B,)
        new_delta[ended] = delta[ended]  # a sentence that has ended keeps its delta
        backptr[t, ended] = stay  # and points back to the tag it ended in
        delta = new_delta
    paths = np.zeros((T, B), dtype=np.intp)  # (T, B)
    paths[T - 1] = np.argmax(delta, axis=1)
    rows = np.arange(B)
    for t in range(T - 1, 0, -1):
        paths[t - 1] = backptr[t, rows, paths[t]]
    return paths.T, delta[rows, paths[T - 1]]  # (B, T), (B,)


@reference
def viterbi_pruned(
    log_start: ArrayLike, log_trans: ArrayLike, log_emit: ArrayLike
) -> tuple[np.ndarray, float]:
    """:func:`viterbi` restricted to the tags each word can have: the same answer, faster when
    most words allow few of many tags.

    A tag ``j`` with ``log b_j(o_t) = -inf`` cannot be on any tag sequence of positive
    probability, so eq. (hmm-viterbi) need only run over ``S_t``, the tags with a finite emission
    at position ``t``:

        delta_t(j) = max_{i in S_{t-1}} [delta_{t-1}(i) + log a_ij] + log b_j(o_t),  j in S_t

    which costs ``|S_{t-1}| |S_t|`` per word instead of ``N^2``. An HMM tagger gives a known word
    probability 0 under every tag it was never seen with, so with the 420 Brown tags a known word
    has one to a few candidates (a *tag dictionary*) and only unknown words have all of them.
    Returns what :func:`viterbi` returns (the same path, ties included, whenever the log
    probability is finite; when it is ``-inf`` the answer is :func:`viterbi`'s).
    """
    log_start, log_trans, log_emit = _check_tables(log_start, log_trans, log_emit)
    T = log_emit.shape[0]
    positions, tags = np.nonzero(np.isfinite(log_emit))  # row-major: sorted by (t, j)
    S = np.split(tags, np.bincount(positions, minlength=T).cumsum()[:-1])  # S_t, sorted tag ids
    if any(len(S_t) == 0 for S_t in S):
        return viterbi(log_start, log_trans, log_emit)  # some word is impossible: P = 0
    delta = log_start[S[0]] + log_emit[0, S[0]]  # (|S_0|,)
    backptr = [np.zeros(len(S[0]), dtype=np.intp)]  # backptr[t][k]: an index into S[t-1]
    for t in range(1, T):
        scores = delta[:, None] + log_trans[S[t - 1][:, None], S[t]]  # (|S_{t-1}|, |S_t|)
        backptr.append(scores.argmax(axis=0))  # (|S_t|,)
        delta = scores[backptr[t], np.arange(len(S[t]))] + log_emit[t, S[t]]  # (|S_t|,)
    k = int(np.argmax(delta))
    logprob = float(delta[k])
    if logprob == -np.inf:
        return viterbi(log_start, log_trans, log_emit)
    path = np.zeros(T, dtype=np.intp)  # (T,)
    for t in range(T - 1, -1, -1):
        path[t] = S[t][k]
        k = backptr[t][k]
    return path, logprob


# ------------------------------------------------------------------------- forward and backward


@reference
def forward_table(log_start: ArrayLike, log_trans: ArrayLike, log_emit: ArrayLike) -> np.ndarray:
    """The forward trellis ``alpha``, shape ``(T, N)``, eq. (hmm-forward).

        alpha_1(j) = log pi_j + log b_j(o_1)
        alpha_t(j) = logsumexp_i [alpha_{t-1}(i) + log a_ij] + log b_j(o_t)

    ``alpha[t, j] = log P(o_1 .. o_t, q_t = j)``: Viterbi with the max replaced by a sum.
    """
    log_start, log_trans, log_emit = _check_tables(log_start, log_trans, log_emit)
    T, N = log_emit.shape
    alpha = np.empty((T, N))  # (T, N)
    alpha[0] = log_start + log_emit[0]
    for t in range(1, T):
        alpha[t] = _logsumexp(alpha[t - 1][:, None] + log_trans, axis=0) + log_emit[t]  # (N,)
    return alpha


@reference
def backward_table(log_start: ArrayLike, log_trans: ArrayLike, log_emit: ArrayLike) -> np.ndarray:
    """The backward trellis ``beta``, shape ``(T, N)``, eq. (hmm-backward).

        beta_T(i) = 0
        beta_t(i) = logsumexp_j [log a_ij + log b_j(o_{t+1}) + beta_{t+1}(j)]

    ``beta[t, i] = log P(o_{t+1} .. o_T | q_t = i)``. ``log_start`` is only checked, not used.
    """
    log_start, log_trans, log_emit = _check_tables(log_start, log_trans, log_emit)
    T, N = log_emit.shape
    beta = np.zeros((T, N))  # (T, N)
    for t in range(T - 2, -1, -1):
        beta[t] = _logsumexp(log_trans + (log_emit[t + 1] + beta[t + 1])[None, :], axis=1)  # (N,)
    return beta


@reference
def forward(log_start: ArrayLike, log_trans: ArrayLike, log_emit: ArrayLike) -> float:
    """``log P(words)``, summed over all tag sequences, eq. (hmm-likelihood).

        log P(O) = logsumexp_j alpha_T(j)

    ``-inf`` when no tag sequence can produce the words.
    """
    alpha = forward_table(log_start, log_trans, log_emit)  # (T, N)
    return float(_logsumexp(alpha[-1], axis=0))


@reference
def forward_backward(log_start: ArrayLike, log_trans: ArrayLike, log_emit: ArrayLike) -> np.ndarray:
    """Posterior tag probabilities ``P(q_t = j | words)``, shape ``(T, N)``, eq. (hmm-gamma).

        gamma_t(j) = exp(alpha_t(j) + beta_t(j) - log P(O))

    Every row sums to 1. Raises ``ValueError`` when ``P(words) = 0``: the posterior is then 0/0.
    """
    alpha = forward_table(log_start, log_trans, log_emit)  # (T, N)
    beta = backward_table(log_start, log_trans, log_emit)  # (T, N)
    loglik = _logsumexp(alpha[-1], axis=0)
    if loglik == -np.inf:
        raise ValueError("the words have probability 0 under this HMM: no posterior exists")
    return np.exp(alpha + beta - loglik)  # (T, N)


# --------------------------------------------------------------------------------- Baum-Welch


class BaumWelchResult(NamedTuple):
    """What :func:`baum_welch` learned, and the log likelihood along the way."""

    log_start: np.ndarray  # (N,)
    log_trans: np.ndarray  # (N, N)
    log_emit_table: np.ndarray  # (V, N): [v, j] = log P(symbol v | state j)
    log_likelihoods: list[float]  # n_iter + 1 values: before the first update and after each


def _expected_counts(
    log_start: np.ndarray, log_trans: np.ndarray, log_emit_table: np.ndarray, observations
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """E step: the total log likelihood and the expected start, transition and emission counts."""
    N, V = log_trans.shape[0], log_emit_table.shape[0]
    loglik = 0.0
    start = np.zeros(N)  # (N,)
    trans = np.zeros((N, N))  # (N, N)
    emit = np.zeros((V, N))  # (V, N)
    for obs in observations:
        log_emit = log_emit_table[obs]  # (T, N)
        alpha = forward_table(log_start, log_trans, log_emit)  # (T, N)
        beta = backward_table(log_start, log_trans, log_emit)  # (T, N)
        log_p = _logsumexp(alpha[-1], axis=0)
        gamma = np.exp(alpha + beta - log_p)  # (T, N), eq. (hmm-gamma)
        # xi[t, i, j] = P(q_t = i, q_{t+1} = j | O), eq. (hmm-xi)
        xi = np.exp(
            alpha[:-1, :, None] + log_trans + (log_emit[1:] + beta[1:])[:, None, :] - log_p
        )  # (T-1, N, N)
        loglik += float(log_p)
        start += gamma[0]
        trans += xi.sum(axis=0)
        np.add.at(emit, obs, gamma)
    return loglik, start, trans, emit


def _normalise(counts: np.ndarray, axis: int) -> np.ndarray:
    """Log of ``counts`` divided by their sum along ``axis``; uniform where the sum is 0."""
    total = counts.sum(axis=axis, keepdims=True)
    probs = np.where(total > 0, counts / np.where(total > 0, total, 1), 1 / counts.shape[axis])
    return _log(probs)


@reference
def baum_welch(
    observations: Sequence[Sequence[int]],
    n_states: int,
    n_symbols: int,
    n_iter: int = 20,
    seed: int = 0,
) -> BaumWelchResult:
    """Unsupervised re-estimation of pi, A and B by EM (Baum-Welch; Rabiner 1989, eq. 40).

    ``observations`` are sequences of symbol ids in ``0 .. n_symbols - 1``. The tables start from
    random distributions (Dirichlet(1) draws from ``np.random.default_rng(seed)``). Each iteration
    computes, for every sequence, ``gamma`` (eq. hmm-gamma) and

        xi_t(i, j) = exp(alpha_t(i) + log a_ij + log b_j(o_{t+1}) + beta_{t+1}(j) - log P(O))

    (eq. hmm-xi), sums them over positions and sequences into expected counts, and re-estimates
    (eq. hmm-reestimate)

        pi_i = E[starts in i] / #sequences
        a_ij = E[i -> j] / sum_k E[i -> k]
        b_j(v) = E[j emits v] / E[j]

    EM never lowers the likelihood: ``log_likelihoods`` (the total over all sequences, before the
    first update and after each) is non-decreasing up to rounding. A state that gets no expected
    count keeps a uniform distribution.
    """
    observations = [np.asarray(obs, dtype=np.intp) for obs in observations]
    if not observations or any(obs.ndim != 1 or obs.size == 0 for obs in observations):
        raise ValueError("observations must be a non-empty list of non-empty 1-d sequences")
    if n_states < 1 or n_symbols < 1 or n_iter < 0:
        raise ValueError("n_states and n_symbols must be >= 1 and n_iter >= 0")
    if any((obs < 0).any() or (obs >= n_symbols).any() for obs in observations):
        raise ValueError(f"observation symbols must lie in 0 .. n_symbols - 1 = {n_symbols - 1}")
    rng = np.random.default_rng(seed)
    log_start = np.log(rng.dirichlet(np.ones(n_states)))  # (N,)
    log_trans = np.log(rng.dirichlet(np.ones(n_states), size=n_states))  # (N, N)
    log_emit_table = np.log(rng.dirichlet(np.ones(n_symbols), size=n_states)).T  # (V, N)
    log_likelihoods = []
    for _ in range(n_iter):
        loglik, start, trans, emit = _expected_counts(
            log_start, log_trans, log_emit_table, observations
        )
        log_likelihoods.append(loglik)
        log_start = _normalise(start, axis=0)  # (N,)
        log_trans = _normalise(trans, axis=1)  # (N, N)
        log_emit_table = _normalise(emit, axis=0)  # (V, N)
    final = sum(forward(log_start, log_trans, log_emit_table[obs]) for obs in observations)
    log_likelihoods.append(float(final))
    return BaumWelchResult(log_start, log_trans, log_emit_table, log_likelihoods)


# --------------------------------------------------------------------- unknown-word classes

WORD_SHAPES = ("allcaps", "capital", "hyphen", "lower")  # shapes that also get a suffix
SUFFIXES = tuple(
    sorted(
        ["ing", "ed", "ly", "s", "ies", "es", "'s", "tion", "sion", "ment", "ness", "ity", "ism",
         "ist", "er", "est", "able", "ible", "al", "ial", "ous", "ive", "ful", "less", "ic", "ize",
         "ise", "ate", "en", "an", "y"],
        key=len,
        reverse=True,
    )
)  # fmt: skip
WORD_CLASSES = ("number", "punct") + tuple(
    f"{shape}-{suffix}" for shape in WORD_SHAPES for suffix in ("", *SUFFIXES)
)
_CLASS_INDEX = {k: i for i, k in enumerate(WORD_CLASSES)}


@functools.lru_cache(maxsize=2**16)
def word_class(word: str) -> str:
    """The class an unknown word is modelled by: its shape, and for words its longest suffix.

    Shapes, first match wins: ``number`` (has a digit), ``punct`` (no letter or digit),
    ``allcaps`` (every letter upper case, at least two letters), ``capital`` (first character upper
    case), ``hyphen`` (has a hyphen), ``lower``. Words of the last four shapes also get the longest
    of :data:`SUFFIXES` that they end in (case-insensitive, with at least two characters before
    it), or none: ``word_class("Tokenizing") == "capital-ing"``, ``word_class("zorp") == "lower-"``.
    Every result is one of :data:`WORD_CLASSES`.
    """
    if any(c.isdigit() for c in word):
        return "number"
    if not any(c.isalpha() for c in word):
        return "punct"
    if word.isupper() and sum(c.isalpha() for c in word) >= 2:
        shape = "allcaps"
    elif word[0].isupper():
        shape = "capital"
    elif "-" in word:
        shape = "hyphen"
    else:
        shape = "lower"
    lower = word.lower()
    suffix = next((s for s in SUFFIXES if lower.endswith(s) and len(lower) >= len(s) + 2), "")
    return f"{shape}-{suffix}"


# ------------------------------------------------------------ maximum likelihood, one by one

BOS = "<s>"


def _nonempty(tagged_sentences: Iterable[TaggedSentence]) -> list[list[tuple[str, str]]]:
    """Non-empty sentences of ``(word, tag)`` pairs, or ``ValueError``."""
    sentences = [list(s) for s in tagged_sentences]
    for s in sentences:
        for pair in s:
            if not (isinstance(pair, tuple | list) and len(pair) == 2):
                raise ValueError(f"a tagged sentence must hold (word, tag) pairs, got {pair!r}")
    sentences = [s for s in sentences if s]
    if not sentences:
        raise ValueError("need at least one non-empty tagged sentence")
    return sentences


@reference
def mle_transitions(tagged_sentences: Iterable[TaggedSentence]) -> dict[str, dict[str, float]]:
    """Maximum-likelihood tag transition probabilities, eq. (hmm-trans-mle):

        P(t_i | t_{i-1}) = c(t_{i-1}, t_i) / c(t_{i-1})

    where ``c(t)`` counts every occurrence of tag ``t``, and ``t_0 = <s>`` starts each sentence
    (so ``c(<s>)`` is the number of sentences). Returns ``{previous tag: {tag: probability}}``
    with the tags seen after each previous tag. The probabilities after a tag that has ended a
    sentence sum to less than 1; the rest would be ``P(</s> | tag)``, which this function, like
    SLP3, leaves out. Empty sentences are skipped.
    """
    previous_counts: Counter = Counter()
    bigram_counts: Counter = Counter()
    for sentence in _nonempty(tagged_sentences):
        tags = [BOS] + [tag for _, tag in sentence]
        previous_counts.update(tags)
        bigram_counts.update(itertools.pairwise(tags))
    probs: dict[str, dict[str, float]] = {}
    for (previous, tag), count in bigram_counts.items():
        probs.setdefault(previous, {})[tag] = count / previous_counts[previous]
    return probs


@reference
def mle_emissions(tagged_sentences: Iterable[TaggedSentence]) -> dict[str, dict[str, float]]:
    """Maximum-likelihood emission probabilities, eq. (hmm-emit-mle):

        P(w | t) = c(t, w) / c(t)

    Returns ``{tag: {word: probability}}`` with the words seen with each tag.
    """
    tag_counts: Counter = Counter()
    pair_counts: Counter = Counter()
    for sentence in _nonempty(tagged_sentences):
        for word, tag in sentence:
            tag_counts[tag] += 1
            pair_counts[tag, word] += 1
    probs: dict[str, dict[str, float]] = {}
    for (tag, word), count in pair_counts.items():
        probs.setdefault(tag, {})[word] = count / tag_counts[tag]
    return probs


# ---------------------------------------------------------------------------------- the tagger


class HMM:
    """A bigram HMM part-of-speech tagger, trained by counting (supervised maximum likelihood).

    Hyperparameters:

    * ``trans_lambda``: weight of the unigram tag distribution in the transitions,
      eq. (hmm-trans-interp)

          P(j | i) = (1 - lambda) c(i, j) / c(i) + lambda c(j) / n

      where ``i`` ranges over the tags and ``<s>``, ``j`` over the tags and ``</s>``, ``c(i, j)``
      counts tag bigrams in the sentences padded with ``<s>`` and ``</s>``, ``c(i) = sum_j c(i, j)``
      and ``c(j) / n`` is the relative frequency of ``j`` as a next symbol. No transition is then
      impossible. ``P(</s> | i)`` is the end-of-sentence transition: :meth:`tag_sents` adds it to
      the last word's emission column, so that the last tag must be one that ends sentences
      well. It turns the transitions into a distribution over tag sequences of every length; its
      effect on accuracy is small (on the validation split: none with the universal tags,
      +0.01 percentage points with the Brown tags). The pure functions of this module lack it.
    * ``rare_count``: words seen at most this many times in training are *rare*; the classes of
      unknown words are estimated on their tokens.
    * ``class_k``: add-k constant for ``P(class | tag, new word)``.

    Emissions, eq. (hmm-emit), for tag ``j`` seen ``c(j)`` times with ``T(j)`` different words,
    ``r(j)`` of its tokens rare words and ``r(j, k)`` of those of class ``k``:

          P(w | j)                 = c(j, w) / (c(j) + T(j))         for a word w seen in training
          P(new word, class k | j) = u_j (r(j, k) + class_k) / (r(j) + class_k K)
          u_j                      = T(j) / (c(j) + T(j))

    ``u_j`` is the chance that tag ``j`` produces a word not seen before: Witten-Bell smoothing
    (Witten & Bell 1991), which counts each of the ``T(j)`` words as having once been new. It is
    large for open classes (nouns) and tiny for closed ones (determiners). How a new word looks is
    modelled by its class (:func:`word_class`; ``K = len(WORD_CLASSES)``), estimated on the rare
    training words, which are the most like words never seen (Baayen & Sproat 1996). A word seen
    in training gets probability 0 under a tag it was never seen with. Words are case sensitive,
    except that a word not seen in training whose lower-case form was seen (*Define* at the start
    of a sentence) is read as that form. For every tag the emission probabilities of the known
    words and the new-word classes sum to 1.

    The defaults were chosen on the validation split of Brown with the universal tagset
    (``trans_lambda`` from 0.0001 to 0.7: best 0.2, a strong smoothing that down-weights the
    transitions against the emissions; ``class_k`` from 0.1 to 2 and ``rare_count`` from 1 to 3
    change accuracy by less than 0.02 percentage points).

    Learned attributes: ``tags_`` (the tag set: every tag seen in training, sorted; a tag never
    seen in training is never predicted), ``vocab_`` (word -> row of ``log_emit_``),
    ``log_start_`` ``(N,)``, ``log_trans_`` ``(N, N)``, ``log_end_`` ``(N,)``, and ``log_emit_``
    ``(V + K, N)``: rows ``0 .. V-1`` for the known words, row ``V + k`` for the new-word class
    ``WORD_CLASSES[k]``.
    """

    def __init__(self, trans_lambda: float = 0.2, rare_count: int = 1, class_k: float = 0.5):
        self.trans_lambda = trans_lambda
        self.rare_count = rare_count
        self.class_k = class_k

    def fit(self, tagged_sentences: Iterable[TaggedSentence]) -> HMM:
        """Count tags, tag bigrams and words in ``(word, tag)`` sentences and smooth; returns self.

        Empty sentences are skipped.
        """
        if not 0 <= self.trans_lambda <= 1 or self.class_k <= 0 or self.rare_count < 0:
            raise ValueError("need 0 <= trans_lambda <= 1, class_k > 0 and rare_count >= 0")
        sentences = _nonempty(tagged_sentences)
        self.tags_ = sorted({tag for s in sentences for _, tag in s})
        self.vocab_ = {w: v for v, w in enumerate(sorted({w for s in sentences for w, _ in s}))}
        N, V, K = len(self.tags_), len(self.vocab_), len(WORD_CLASSES)
        tag_id = {tag: j for j, tag in enumerate(self.tags_)}
        BOUNDARY = N  # one extra state: <s> as a previous tag, </s> as a next one

        # counts, from the tag ids, word ids and previous tag ids of all n tokens
        tag_ids = np.array([tag_id[tag] for s in sentences for _, tag in s])  # (n,)
        word_ids = np.array([self.vocab_[w] for s in sentences for w, _ in s])  # (n,)
        lengths = np.array([len(s) for s in sentences])
        firsts = np.cumsum(lengths) - lengths  # index of each sentence's first token
        lasts = firsts + lengths - 1
        prev_ids = np.roll(tag_ids, 1)  # (n,)
        prev_ids[firsts] = BOUNDARY
        trans_counts = np.bincount(prev_ids * (N + 1) + tag_ids, minlength=(N + 1) ** 2)
        trans_counts = trans_counts.reshape(N + 1, N + 1).astype(float)  # (N+1, N+1)
        trans_counts[:, BOUNDARY] += np.bincount(tag_ids[lasts], minlength=N + 1)  # j = </s>
        emit_counts = np.bincount(word_ids * N + tag_ids, minlength=V * N).reshape(V, N)  # (V, N)

        # transitions, eq. (hmm-trans-interp)
        lam = self.trans_lambda
        unigram = trans_counts.sum(axis=0) / trans_counts.sum()  # (N+1,)
        trans = (1 - lam) * trans_counts / trans_counts.sum(axis=1, keepdims=True) + lam * unigram
        self.log_start_ = _log(trans[BOUNDARY, :N])  # (N,)
        self.log_trans_ = _log(trans[:N, :N])  # (N, N)
        self.log_end_ = _log(trans[:N, BOUNDARY])  # (N,)

        # emissions of known words and of unknown-word classes, eq. (hmm-emit)
        tag_counts = emit_counts.sum(axis=0)  # (N,) c(j)
        type_counts = (emit_counts > 0).sum(axis=0)  # (N,) T(j)
        known = emit_counts / (tag_counts + type_counts)  # (V, N)
        p_new = type_counts / (tag_counts + type_counts)  # (N,) u_j
        rare_words = np.flatnonzero(emit_counts.sum(axis=1) <= self.rare_count)  # (R,) their rows
        words = list(self.vocab_)  # words[v] is the word of row v
        rare_classes = [_CLASS_INDEX[word_class(words[v])] for v in rare_words]  # (R,)
        class_counts = np.zeros((K, N))  # (K, N) r(j, k)
        np.add.at(class_counts, rare_classes, emit_counts[rare_words])
        rare_counts = class_counts.sum(axis=0)  # (N,) r(j)
        unknown = p_new * (class_counts + self.class_k) / (rare_counts + self.class_k * K)  # (K, N)
        self.log_emit_ = _log(np.vstack([known, unknown]))  # (V + K, N)
        return self

    def _emission_rows(self, words: list[str]) -> np.ndarray:
        """The row of ``log_emit_`` for each word: its own if known, else its lower-case form's if
        that is known (*Define* at the start of a sentence), else its word class's."""
        rows = list(map(self.vocab_.get, words))
        for k in [k for k, row in enumerate(rows) if row is None]:
            word = words[k]
            lower_row = self.vocab_.get(word.lower())
            if lower_row is None:
                rows[k] = len(self.vocab_) + _CLASS_INDEX[word_class(word)]
            else:
                rows[k] = lower_row
        return np.array(rows, dtype=np.intp)

    #: :meth:`tag_sents` decodes with :func:`viterbi_pruned` when there are more tags than this
    PRUNE_ABOVE_TAGS = 50

    def tag_sents(
        self, sentences: Sequence[Sequence[str]], batch_size: int = 256
    ) -> list[list[str]]:
        """Tag many sentences: Viterbi, eq. (hmm-viterbi), on batches of similar length.

        One dictionary lookup per word finds its row of ``log_emit_``. Sentences are then sorted
        by length and cut into batches of ``batch_size`` (fewer when the tag set is large, to bound
        memory); each batch is one call of :func:`viterbi_batch` on the ``(B, T, N)`` table of
        its words' rows, with ``log P(</s> | tag)`` added to each sentence's last column. An empty
        sentence gets ``[]``.

        With more than ``PRUNE_ABOVE_TAGS`` tags (the 420 Brown tags, say) the ``N^2`` work per
        word dominates; then each sentence is decoded on its own by :func:`viterbi_pruned`, which
        visits only the tags a word was seen with: the same tags, several times faster.
        """
        if not hasattr(self, "log_emit_"):
            raise NotFittedError("this HMM is not fitted yet: call fit(tagged_sentences) first")
        N = len(self.tags_)
        lengths = np.array([len(s) for s in sentences], dtype=np.intp)  # (S,)
        firsts = np.cumsum(lengths) - lengths  # (S,) position of each first word in `rows`
        rows = self._emission_rows(list(itertools.chain.from_iterable(sentences)))  # (n,)
        predicted = np.zeros(len(rows), dtype=np.intp)  # (n,) the tag id of every word
        order = np.argsort(lengths, kind="stable")
        order = order[lengths[order] > 0]
        if N > self.PRUNE_ABOVE_TAGS:
            for s in order:  # one sentence at a time, visiting only the tags each word allows
                span = slice(firsts[s], firsts[s] + lengths[s])
                log_emit = self.log_emit_[rows[span]]  # (T, N)
                log_emit[-1] += self.log_end_  # P(</s> | tag)
                predicted[span], _ = viterbi_pruned(self.log_start_, self.log_trans_, log_emit)
        else:
            batch_size = max(1, min(batch_size, 2**21 // (N * N)))
            for start in range(0, len(order), batch_size):
                batch = order[start : start + batch_size]  # (B,)
                T = lengths[batch].max()
                last = firsts[batch] + lengths[batch] - 1  # (B,)
                positions = np.minimum(firsts[batch, None] + np.arange(T), last[:, None])  # (B, T)
                log_emit = self.log_emit_[rows[positions]]  # (B, T, N); padding: the last word
                log_emit[np.arange(len(batch)), lengths[batch] - 1] += self.log_end_  # P(</s>|tag)
                paths, _ = viterbi_batch(self.log_start_, self.log_trans_, log_emit, lengths[batch])
                in_sentence = np.arange(T) < lengths[batch, None]  # (B, T), False on padding
                predicted[positions[in_sentence]] = paths[in_sentence]
        tags = np.array(self.tags_, dtype=object)[predicted].tolist()  # (n,)
        spans = zip(firsts.tolist(), lengths.tolist(), strict=True)
        return [tags[first : first + length] for first, length in spans]

    def tag(self, words: Sequence[str]) -> list[str]:
        """The most probable tags of one sentence (``[]`` for an empty one)."""
        return self.tag_sents([words])[0]

    def sentence_tables(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The tables ``(log_start, log_trans, log_emit)`` that :meth:`tag_sents` decodes for
        one non-empty sentence, ready for :func:`viterbi`, :func:`forward` or
        :func:`forward_backward`: ``log_emit`` ``(T, N)`` holds each word's row of
        ``log_emit_`` (its own, its lower-case form's or its word class's), with
        ``log P(</s> | tag)`` added to the last row."""
        if not hasattr(self, "log_emit_"):
            raise NotFittedError("this HMM is not fitted yet: call fit(tagged_sentences) first")
        if len(words) == 0:
            raise ValueError("the sentence is empty (T = 0): there is nothing to tag or score")
        log_emit = self.log_emit_[self._emission_rows(list(words))]  # (T, N)
        log_emit[-1] += self.log_end_
        return self.log_start_, self.log_trans_, log_emit


class MostFrequentTagger:
    """The baseline: each known word gets the tag it had most often in training.

    An unknown word gets the tag most frequent among rare words (seen at most ``rare_count``
    times), usually a noun. Ties go to the tag that comes first in sorted order. Learned:
    ``vocab_`` (word -> tag) and ``unknown_tag_``.
    """

    def __init__(self, rare_count: int = 1):
        self.rare_count = rare_count

    def fit(self, tagged_sentences: Iterable[TaggedSentence]) -> MostFrequentTagger:
        """Count ``(word, tag)`` pairs; returns self."""
        sentences = _nonempty(tagged_sentences)
        pair_counts = Counter(pair for s in sentences for pair in map(tuple, s))
        word_counts: Counter = Counter()
        best: dict[str, tuple[int, str]] = {}
        for (word, tag), c in sorted(pair_counts.items()):
            word_counts[word] += c
            if word not in best or c > best[word][0]:
                best[word] = (c, tag)
        self.vocab_ = {w: tag for w, (_, tag) in best.items()}
        rare_tags = Counter({tag: 0 for _, tag in pair_counts})  # every tag, for the tie-break
        for (word, tag), c in pair_counts.items():
            if word_counts[word] <= self.rare_count:
                rare_tags[tag] += c
        self.unknown_tag_ = max(sorted(rare_tags), key=lambda t: rare_tags[t])
        return self

    def tag_sents(self, sentences: Sequence[Sequence[str]]) -> list[list[str]]:
        """Tag each word of each sentence on its own."""
        if not hasattr(self, "vocab_"):
            raise NotFittedError("this tagger is not fitted yet: call fit(tagged_sentences) first")
        return [[self.vocab_.get(w, self.unknown_tag_) for w in s] for s in sentences]

    def tag(self, words: Sequence[str]) -> list[str]:
        """Tag one sentence."""
        return self.tag_sents([words])[0]


@reference
def tagging_accuracy(
    tagger: HMM | MostFrequentTagger,
    tagged_sentences: Sequence[TaggedSentence],
    predicted: Sequence[Sequence[str]] | None = None,
) -> dict[str, float]:
    """Token accuracy of ``tagger.tag_sents`` against the gold tags.

    Returns ``{"all": ..., "known": ..., "unknown": ..., "unknown_rate": ...}``: accuracy on all
    tokens, on words in the tagger's ``vocab_`` and on the others, and the share of the others.
    ``predicted``, if given, holds the tags ``tagger`` already gave these sentences (one list per
    sentence), so that a slow tagger need not tag them again.
    """
    if predicted is None:
        predicted = tagger.tag_sents([[w for w, _ in s] for s in tagged_sentences])
    elif len(predicted) != len(tagged_sentences):
        raise ValueError(
            f"predicted has {len(predicted)} sentences, tagged_sentences {len(tagged_sentences)}"
        )
    correct: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for s, tags in zip(tagged_sentences, predicted, strict=True):
        for (word, gold), tag in zip(s, tags, strict=True):
            kind = "known" if word in tagger.vocab_ else "unknown"
            total[kind] += 1
            correct[kind] += gold == tag
    n = total["known"] + total["unknown"]
    if n == 0:
        raise ValueError("no tokens to score")
    return {
        "all": (correct["known"] + correct["unknown"]) / n,
        "known": correct["known"] / max(total["known"], 1),
        "unknown": correct["unknown"] / max(total["unknown"], 1),
        "unknown_rate": total["unknown"] / n,
    }
