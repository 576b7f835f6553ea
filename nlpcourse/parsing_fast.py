"""The fast twin of :mod:`nlpcourse.parsing`: its probabilistic dynamic programs, batched with numpy
(chapter 3).

:mod:`nlpcourse.parsing` holds the lesson: grammars, trees, the conversion to Chomsky normal form,
the parsers, and the book's loops over spans, split points and rules (``inside_loop``,
``viterbi_cky_loop``). This module computes the same
quantities, eqs. (parse-inside), (parse-viterbi), (parse-outside) and (parse-count), for all spans
of one length, all split points and all rules at once, and for many sentences of one length
together; the public functions of :mod:`nlpcourse.parsing` (``inside``, ``viterbi_cky``,
``viterbi_batch``, ``inside_outside_tables``, ``PCFG.inside_outside``) call it. The tests check the
two against each other, against brute-force enumeration and against ``nltk`` (as minitorch keeps
``tensor_ops.py`` beside ``fast_ops.py``).

How it is fast:

* A CNF grammar becomes arrays (:class:`Tables`), its nonterminals numbered ``0 .. N-1``. The binary
  rules have few distinct *children pairs* ``(B, C)`` (the unit chains that ``to_cnf`` collapses
  give many rules the same children), so the passes work on pairs, not rules.
* The sums of the inside and outside passes run in *scaled* probability space (each span's terms
  divided by their maximum, the scale kept as a log), so that the sum over rules is a matrix
  product; a span where some term could fall more than ``exp(SAFE_EXPONENT)`` below its span's
  largest, where the products could lose it, is computed in logs instead, so the result never
  underflows. Viterbi stays in logs (a max is not a matrix product).
* Sentences of one length are parsed together (:func:`by_length` groups them), so numpy's fixed
  cost per call is shared.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from nlpcourse.trees import BIN_MARK, Tree, _chain, _is_term_symbol

if TYPE_CHECKING:  # the grammar's class, for the annotations: parsing imports this module
    from nlpcourse.parsing import CNFGrammar

BATCH_ROWS = 2048  # chart rows (spans) of the sentences parsed together by the batched calls
TINY = 1e-60  # expected-count factors smaller than this are dropped (4 of them: > 1e-240)
SAFE_EXPONENT = -700.0  # exp(-700) ~ 1e-304 is still a normal float64; exp(-746) is 0


def _logsumexp(a: np.ndarray, axis: int | tuple[int, ...]) -> np.ndarray:
    """``log(sum(exp(a), axis))`` without overflow, and ``-inf`` (no warning) where all are -inf."""
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis)


class Tables:
    """A CNF PCFG as arrays for the vectorised dynamic programs.

    Nonterminals are numbered ``0 .. N-1``, the start symbol 0. Binary rule ``r`` is
    ``A[r] -> B[r] C[r]`` with log probability ``logp[r]``; ``by_lhs``, ``by_left`` and
    ``by_right`` are ``(N, R_max)`` tables of the rules with each nonterminal on the left, as the
    left child and as the right child (padded with ``R``, the index of a rule that is always -inf).

    The binary rules have only ``Q`` distinct *children pairs* ``(B, C)``, far fewer than ``N^2``
    and than ``R`` (the unit chains that :func:`to_cnf` collapses give many rules the same
    children), so the inside and Viterbi passes work on pairs: ``pair_B[q], pair_C[q]`` is pair
    ``q``; ``W_pair[q, A]`` is the sum of ``P(A -> B C)`` over the rules of ``A`` with those
    children (``log_W_pair`` its log). For the Viterbi max, ``rule_pair`` and ``rule_logp`` list
    the binary rules sorted by ``A``, each nonterminal's group closed by a dummy rule of log
    probability -inf, so that ``np.maximum.reduceat`` over ``rule_starts`` gives every ``A`` its
    best rule. ``counting=True`` gives every rule probability 1 (the inside pass then counts
    trees).
    """

    def __init__(self, cnf: CNFGrammar, counting: bool = False):
        self.cnf = cnf
        self.symbols = sorted(cnf.nonterminals, key=lambda s: (s != cnf.start, s))
        self.index = {s: k for k, s in enumerate(self.symbols)}
        N = len(self.symbols)
        self.binary = [k for k, r in enumerate(cnf.cnf_rules) if len(r.rhs) == 2]
        rules = [cnf.cnf_rules[k] for k in self.binary]
        self.A = np.array([self.index[r.lhs] for r in rules], dtype=int)  # (R,)
        self.B = np.array([self.index[r.rhs[0]] for r in rules], dtype=int)  # (R,)
        self.C = np.array([self.index[r.rhs[1]] for r in rules], dtype=int)  # (R,)
        self.logp = np.array([0.0 if counting else r.logp for r in rules], dtype=float)  # (R,)
        R = len(rules)
        self.by_lhs = _padded_groups(self.A, N, R)  # (N, R_max)
        self.by_left = _padded_groups(self.B, N, R)  # (N, R_max)
        self.by_right = _padded_groups(self.C, N, R)  # (N, R_max)

        # children pairs
        pairs = sorted(set(zip(self.B.tolist(), self.C.tolist(), strict=True)))
        pair_id = {pair: q for q, pair in enumerate(pairs)}
        self.pair_B = np.array([b for b, _ in pairs], dtype=int)  # (Q,)
        self.pair_C = np.array([c for _, c in pairs], dtype=int)  # (Q,)
        self.pair_BC = np.concatenate([self.pair_B, self.pair_C])  # (2Q,)
        self.pair_of_rule = np.array(
            [pair_id[(b, c)] for b, c in zip(self.B.tolist(), self.C.tolist(), strict=True)],
            dtype=int,
        )  # (R,)
        W = np.zeros((len(pairs), N))  # (Q, N): [children pair (B, C), A]
        np.add.at(W, (self.pair_of_rule, self.A), np.exp(self.logp))
        self.W_pair = W
        W_full = np.zeros((N, N, N))  # (N, N, N): [A, B, C], for the outside pass
        np.add.at(W_full, (self.A, self.B, self.C), np.exp(self.logp))
        self.W_out = W_full.reshape(N, N * N)  # (N, N*N): [A, (B, C)]
        with np.errstate(divide="ignore"):
            self.log_W_pair = np.log(W)  # (Q, N)
            self.log_w_min = float(np.log(W[W > 0].min())) if (W > 0).any() else 0.0

        # the binary rules grouped by A, each group closed by a dummy -inf rule (pair 0)
        rule_pair: list[int] = []
        rule_logp: list[float] = []
        self.rule_starts = np.zeros(N, dtype=int)  # (N,)
        self.rules_of: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for a in range(N):
            mine = [r for r in range(R) if self.A[r] == a]
            self.rule_starts[a] = len(rule_pair)
            rule_pair += [int(self.pair_of_rule[r]) for r in mine] + [0]
            rule_logp += [float(self.logp[r]) for r in mine] + [-np.inf]
            # for back-tracking: cnf rule index, children pair and log probability of each rule
            self.rules_of.append(
                (
                    np.array([self.binary[r] for r in mine], dtype=int),
                    self.pair_of_rule[mine],
                    self.logp[mine],
                )
            )
        self.rule_pair = np.array(rule_pair, dtype=int)  # (R + N,)
        # for reading trees back: the children of each binary rule (as numbers), and the labels a
        # node of each rule becomes in the original grammar, innermost first (Tree.from_cnf)
        self.children = {
            k: (self.index[cnf.cnf_rules[k].rhs[0]], self.index[cnf.cnf_rules[k].rhs[1]])
            for k in self.binary
        }
        self.wraps = [
            tuple(
                label
                for label in reversed(_chain(r.label))
                if BIN_MARK not in label and not _is_term_symbol(label)
            )
            for r in cnf.cnf_rules
        ]
        self.rule_logp = np.array(rule_logp)  # (R + N,)

        # lexical rules: per word, one row of log probabilities over the N nonterminals
        self.lexical: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
        for k, r in enumerate(cnf.cnf_rules):
            if len(r.rhs) == 1:
                self.lexical[r.rhs[0]].append((k, self.index[r.lhs], 0.0 if counting else r.logp))
        self.word_sum: dict[str, np.ndarray] = {}  # (N,): log sum over the rules A -> w
        self.word_max: dict[str, np.ndarray] = {}  # (N,): log max over the rules A -> w
        self.word_rule: dict[str, np.ndarray] = {}  # (N,): index of the best rule A -> w, or -1
        for w, entries in self.lexical.items():
            row_sum, row_max = np.full(N, -np.inf), np.full(N, -np.inf)
            best = np.full(N, -1, dtype=int)
            for k, a, lp in entries:
                row_sum[a] = np.logaddexp(row_sum[a], lp)
                if lp > row_max[a]:
                    row_max[a], best[a] = lp, k
            self.word_sum[w], self.word_max[w], self.word_rule[w] = row_sum, row_max, best
        self.word_max_BC = {w: row[self.pair_BC] for w, row in self.word_max.items()}  # (2Q,)
        self._spans: dict[int, list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]] = {}
        self._viterbi_spans: dict[tuple[int, int], list] = {}

    def word_scores(self, words: Sequence[str], combine: str) -> np.ndarray:
        """``(n, N)``: the log probability of ``A -> w_{i+1}`` (logsumexp if ``combine`` is
        ``"sum"``, else max, over the rules with that left side and word, which differ only in
        their labels)."""
        rows = self.word_sum if combine == "sum" else self.word_max
        try:
            return np.array([rows[w] for w in words])  # (n, N)
        except KeyError:
            unknown = sorted({w for w in words if w not in rows})
            raise ValueError(f"the grammar has no rule for the word(s) {unknown!r}") from None

    def viterbi_spans(self, n: int, Bn: int) -> list[tuple[int, int, int, np.ndarray, np.ndarray]]:
        """For the Viterbi tables of ``Bn`` sentences of ``n`` words (rows as :func:`_span_row`):
        for each span length ``2 .. n``, ``(length, n_i, m, left, right)``, with ``n_i`` spans of
        that length per sentence, ``m`` split points each, and the rows ``(B n_i m,)`` of the
        children ``(i, k)`` and ``(k, j)`` of every sentence, span and split (in that order).
        Kept for one sentence and for the last batch size."""
        key = (n, Bn)
        if key not in self._viterbi_spans:
            if Bn > 1:  # forget other batch sizes
                self._viterbi_spans = {k: v for k, v in self._viterbi_spans.items() if k[1] == 1}
            out = []
            b = np.arange(Bn)[:, None, None]  # (B, 1, 1)
            for length in range(2, n + 1):
                I = np.arange(n - length + 1)[None, :, None]  # (1, n_i, 1) span starts
                M = np.arange(1, length)[None, None, :]  # (1, 1, m) left child lengths
                left = _span_row_array(n, Bn, b, I, I + M)  # (B, n_i, m)
                right = _span_row_array(n, Bn, b, I + M, I + length)  # (B, n_i, m)
                out.append((length, I.size, M.size, left.ravel(), right.ravel()))
            self._viterbi_spans[key] = out
        return self._viterbi_spans[key]

    def spans(self, n: int) -> list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]:
        """For a chart of ``n`` words stored flat, span ``(i, j)`` in row ``i (n+1) + j``: for each
        span length ``2 .. n``, ``(n_i, m, left, right, cells)`` with ``n_i`` spans of that length
        and ``m`` split points each; ``left`` and ``right`` ``(n_i m,)`` are the rows of the
        children ``(i, k)`` and ``(k, j)`` of every span and split (spans major), ``cells``
        ``(n_i,)`` the rows of the spans. Computed once per ``n``."""
        if n not in self._spans:
            out = []
            for length in range(2, n + 1):
                I = np.arange(n - length + 1)[:, None]  # (n_i, 1) span starts
                K = I + np.arange(1, length)[None, :]  # (n_i, m) split points
                left = (I * (n + 1) + K).ravel()  # (n_i m,): rows of (i, k)
                right = (K * (n + 1) + I + length).ravel()  # (n_i m,): rows of (k, j)
                cells = I[:, 0] * (n + 2) + length  # (n_i,): rows of (i, i + length)
                out.append((len(I), length - 1, left, right, cells))
            self._spans[n] = out
        return self._spans[n]


def _padded_groups(keys: np.ndarray, N: int, pad: int) -> np.ndarray:
    """``(N, max group size)`` table: row ``a`` lists the indices ``r`` with ``keys[r] == a``,
    padded with ``pad``."""
    groups: list[list[int]] = [[] for _ in range(N)]
    for r, a in enumerate(keys):
        groups[a].append(r)
    width = max(1, max(len(g) for g in groups))
    out = np.full((N, width), pad, dtype=int)
    for a, g in enumerate(groups):
        out[a, : len(g)] = g
    return out


def _with_pad(scores: np.ndarray) -> np.ndarray:
    """Append the always -inf rule ``R`` that pads the group tables."""
    pad = np.full(scores.shape[:-1] + (1,), -np.inf)
    return np.concatenate([scores, pad], axis=-1)  # (..., R+1)


def _scaled(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """``x = log(v) + scale``: the scale ``(..., 1)`` is the maximum over the last axis (0 where
    all are -inf), ``v = exp(x - scale)`` lies in [0, 1]. Also returns the smallest finite
    ``x - scale`` (how far below its maximum the smallest term is, in nats)."""
    scale = np.max(x, axis=-1, keepdims=True)
    scale = np.where(np.isfinite(scale), scale, 0.0)
    rel = x - scale
    lowest = float(np.min(rel, initial=0.0, where=rel > -np.inf))
    return np.exp(rel), scale, lowest


def _contiguous(x: np.ndarray) -> np.ndarray:
    """A C-contiguous copy if needed: matrix products of transposed views can be 100x slower."""
    return np.ascontiguousarray(x)


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(x)


def inside_batch(tab: Tables, sentences: Sequence[list[str]]) -> np.ndarray:
    """The inside tables of sentences of one length ``n``, ``(B, n+1, n+1, N)``, eq.
    (parse-inside): ``beta[b, i, j, A] = log P(A =>* w_{i+1..j})`` of sentence ``b``.

    The chart is stored flat, span ``(i, j)`` in row ``i (n+1) + j`` (:meth:`Tables.spans`),
    beside two copies of it projected on the children pairs: ``to_B[.., q] = beta_{pair_B[q]}``
    and ``to_C[.., q] = beta_{pair_C[q]}``. For all spans of one length at once, every term
    ``beta_B(i, k) + beta_C(k, j)`` of every split and pair is one addition of two gathered
    arrays; its sum over the splits and rules is taken in *scaled* probability space, each span's
    terms divided by their largest (kept as a log), so that the sum over rules is one matrix
    product with ``W_pair``. When some term falls more than ``exp(SAFE_EXPONENT)`` below its
    span's largest (the product could lose it), that length is summed in logs instead: a
    logsumexp over the splits, then over the rules. So nothing underflows."""
    Bn, n = len(sentences), len(sentences[0])
    N, Q = len(tab.symbols), len(tab.pair_B)
    rows = (n + 1) * (n + 1)
    beta = np.full((Bn, rows, N), -np.inf)  # (B, (n+1)^2, N)
    to_B = np.full((Bn, rows, Q), -np.inf)  # (B, (n+1)^2, Q)
    to_C = np.full((Bn, rows, Q), -np.inf)  # (B, (n+1)^2, Q)
    leaves = np.arange(n) * (n + 2) + 1  # (n,): rows of the spans (i, i+1)
    words = np.stack([tab.word_scores(s, "sum") for s in sentences])  # (B, n, N)
    beta[:, leaves], to_B[:, leaves], to_C[:, leaves] = (
        words,
        words[..., tab.pair_B],
        words[..., tab.pair_C],
    )
    with np.errstate(divide="ignore", under="ignore"):
        for n_i, m, left, right, cells in tab.spans(n) if Q else []:  # Q = 0: no binary rule
            terms = (to_B[:, left] + to_C[:, right]).reshape(Bn, n_i, m * Q)  # (B, n_i, m Q)
            top = terms.max(axis=2, keepdims=True)  # (B, n_i, 1): each span's largest term
            top[top == -np.inf] = 0.0  # a span no pair can build: all its terms stay -inf
            rel = terms - top  # (B, n_i, m Q), <= 0
            if rel.min(initial=0.0, where=rel > -np.inf) + tab.log_w_min > SAFE_EXPONENT:
                v = np.exp(rel).reshape(Bn, n_i, m, Q).sum(axis=2)  # (B, n_i, Q): over splits
                out = np.log(v @ tab.W_pair) + top  # (B, n_i, Q) @ (Q, N) -> (B, n_i, N)
            else:  # in logs: logsumexp over the splits, then over the pairs with W
                per_pair = _logsumexp(terms.reshape(Bn, n_i, m, Q), axis=2)  # (B, n_i, Q)
                out = _logsumexp(per_pair[..., None] + tab.log_W_pair, axis=2)  # (B, n_i, N)
            beta[:, cells], to_B[:, cells], to_C[:, cells] = (
                out,
                out[..., tab.pair_B],
                out[..., tab.pair_C],
            )
    return beta.reshape(Bn, n + 1, n + 1, N)


def viterbi_sentences(
    tab: Tables, sentences: Sequence[list[str]]
) -> list[tuple[Tree | None, float]]:
    """The best tree and its log probability of each of a group of sentences of one length."""
    n = len(sentences[0])
    logp, pair_best, pair_split = _viterbi_chart(tab, sentences)
    out: list[tuple[Tree | None, float]] = []
    for b, words in enumerate(sentences):
        if logp[b] == -math.inf:
            out.append((None, -math.inf))
            continue

        def row(i: int, j: int, b: int = b) -> int:
            return _span_row(n, len(sentences), b, i, j)

        (tree,) = _viterbi_backtrack(tab, words, pair_best, pair_split, row, 0, n, 0)
        assert isinstance(tree, Tree)
        out.append((tree, float(logp[b])))
    return out


def _span_row(n: int, Bn: int, b: int, i: int, j: int) -> int:
    """The row of span ``(i, j)`` of sentence ``b`` in the Viterbi tables of ``Bn`` sentences of
    ``n`` words: rows are ordered by span length, then sentence, then start, so that the spans of
    one length are one block of rows."""
    length = j - i
    before = (length - 1) * n - (length - 1) * (length - 2) // 2  # spans shorter than length
    return Bn * before + b * (n - length + 1) + i


def _span_row_array(n: int, Bn: int, b: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """:func:`_span_row` of arrays of sentences and spans (broadcast)."""
    length = j - i
    before = (length - 1) * n - (length - 1) * (length - 2) // 2
    return Bn * before + b * (n - length + 1) + i


def _viterbi_chart(
    tab: Tables, sentences: Sequence[list[str]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Viterbi CKY, eq. (parse-viterbi), for sentences of one length ``n``, vectorised: returns
    ``log P`` of each sentence's best tree ``(B,)`` and the back pointers of each children pair,
    its best score and split over each span, ``(rows, Q)`` each, span ``(i, j)`` of sentence ``b``
    in row :func:`_span_row`.

    The chart is kept projected on the children pairs: ``to_BC[row]`` holds ``delta_B`` of each
    pair's left child and ``delta_C`` of its right child, side by side. For all spans of one
    length at once: every term ``delta_B(i, k) + delta_C(k, j)`` of every split and pair is one
    addition of two gathered arrays; then the best split of each pair (a max over the splits),
    and the best rule of each nonterminal (a max over the pairs' scores plus the rules' log
    probabilities, grouped by left side with ``np.maximum.reduceat``). The spans of one length
    are one block of rows, so the results are written in place. :func:`_viterbi_backtrack` reads
    each tree back, top-down.
    """
    Bn, n, Q = len(sentences), len(sentences[0]), len(tab.pair_B)
    rows = Bn * n * (n + 1) // 2
    to_BC = np.empty((rows, 2 * Q))  # (rows, 2Q): delta of each pair's left and right child
    to_B, to_C = to_BC[:, :Q], to_BC[:, Q:]  # (rows, Q) each (views)
    pair_best = np.empty((rows, Q))  # (rows, Q): each pair's best score over a span
    pair_split = np.empty((rows, Q), dtype=np.intp)  # (rows, Q): its split, k - i - 1
    words = [w for sentence in sentences for w in sentence]
    try:
        to_BC[: Bn * n] = [tab.word_max_BC[w] for w in words]  # the spans (i, i+1), in order
    except KeyError:
        tab.word_scores(words, "max")  # raises the ValueError that names the unknown words
    if n == 1 or not Q:  # one word; or no binary rule, so no tree of two words or more
        delta = tab.word_scores(words[::n], "max") if n == 1 else np.full((Bn, 1), -np.inf)
        return delta[:, 0], pair_best, pair_split
    for length, n_i, m, left, right in tab.viterbi_spans(n, Bn):
        block = slice(_span_row(n, Bn, 0, 0, length), _span_row(n, Bn, 0, 0, length + 1))
        children = (to_B[left] + to_C[right]).reshape(Bn * n_i, m, Q)  # (B n_i, m, Q)
        children.argmax(axis=1, out=pair_split[block])  # (B n_i, Q): each pair's best split
        best = children.max(axis=1, out=pair_best[block])  # (B n_i, Q): and its score
        per_rule = best[:, tab.rule_pair]  # (B n_i, R + N), grouped by A
        per_rule += tab.rule_logp
        delta = np.maximum.reduceat(per_rule, tab.rule_starts, axis=1)  # (B n_i, N)
        np.take(delta, tab.pair_BC, axis=1, out=to_BC[block])
    return delta[:, 0], pair_best, pair_split


def _viterbi_backtrack(
    tab: Tables,
    words: list[str],
    pair_best: np.ndarray,
    pair_split: np.ndarray,
    row: Callable[[int, int], int],
    i: int,
    j: int,
    a: int,
) -> list[Tree | str]:
    """The best tree of nonterminal ``a`` over the span ``(i, j)``, read back from the Viterbi
    chart (span ``(i, j)`` in row ``row(i, j)``): the rule ``a -> B C`` whose ``log P(a -> B C)``
    plus the best score of its children pair over the span is the largest (that sum is
    ``delta_a(i, j)``), split where that pair's best split is. Returned in the original grammar's
    labels, as :meth:`Tree.from_cnf` would map it: a list of the nodes to put in the parent's
    place."""
    if j == i + 1:
        k = tab.word_rule[words[i]][a]
        inner: list[Tree | str] = [words[i]]
    else:
        cell = row(i, j)
        indices, pairs, logps = tab.rules_of[a]  # (r_a,) each
        best = int((pair_best[cell, pairs] + logps).argmax())
        split = i + 1 + int(pair_split[cell, pairs[best]])
        k = indices[best]
        b, c = tab.children[k]
        inner = _viterbi_backtrack(tab, words, pair_best, pair_split, row, i, split, b)
        inner += _viterbi_backtrack(tab, words, pair_best, pair_split, row, split, j, c)
    for label in tab.wraps[k]:  # innermost first
        inner = [Tree(label, inner)]
    return inner


def cnf_counts_batch(
    tab: Tables,
    sentences: Sequence[list[str]],
    beta: np.ndarray,
    alpha: np.ndarray,
    logZ: np.ndarray,
) -> np.ndarray:
    """E[c(rule)] of every CNF rule, summed over sentences of one length, eq. (parse-count).

    ``beta`` and ``alpha`` are ``(B, n+1, n+1, N)``, ``logZ`` ``(B,)``, all finite. For a binary
    rule ``A -> B C``, the sum over splits of ``beta_B beta_C`` is one matrix product for every
    ``(B, C)`` at once; it is weighted by ``alpha_A / P(w)``, summed over spans and multiplied by
    ``P(A -> B C)``. Each term is a posterior probability, at most 1; a term too small to
    represent would add less than 1e-200 to a count.
    """
    n = beta.shape[1] - 1
    cnf_counts = np.zeros(len(tab.cnf.cnf_rules))
    for b, words in enumerate(sentences):
        for i, w in enumerate(words):
            for k, a, lp in tab.lexical[w]:
                cnf_counts[k] += math.exp(alpha[b, i, i + 1, a] + lp - logZ[b])
    binary = np.zeros(len(tab.binary))  # (R,)
    for length in range(2, n + 1):
        I = np.arange(n - length + 1)[:, None]  # (n_i, 1) span starts
        M = np.arange(1, length)[None, :]  # (1, m) split offsets
        left, right = beta[:, I, I + M], beta[:, I + M, I + length]  # (B, n_i, m, N) each
        parent = alpha[:, I[:, 0], I[:, 0] + length]  # (B, n_i, N)
        vL, sL, _ = _scaled(left)  # (B, n_i, m, N), (B, n_i, m, 1)
        vR, sR, _ = _scaled(right)
        vP, sP, _ = _scaled(parent)  # (B, n_i, N), (B, n_i, 1)
        alive = (
            np.isfinite(left).any(-1)
            & np.isfinite(right).any(-1)
            & np.isfinite(parent).any(-1)[..., None]
        )  # (B, n_i, m)
        with np.errstate(over="ignore"):
            f = np.exp((sL + sR)[..., 0] + sP - logZ[:, None, None])  # (B, n_i, m)
        # factors below 1e-60 add nothing a count can show; zeroing them keeps the products away
        # from subnormal floats, which the processor handles about 100 times slower
        f = np.where(alive & (f > TINY), f, 0.0)
        vL, vR, vP = (np.where(v > TINY, v, 0.0) for v in (vL, vR, vP))
        T = np.matmul(_contiguous((vL * f[..., None]).swapaxes(-1, -2)), vR)  # (B, n_i, N, N)
        # for each rule A -> B C: sum over sentences and spans of vP_A T[B, C]
        binary += np.einsum("bir,bir->r", vP[..., tab.A], T[..., tab.B, tab.C])  # (R,)
    cnf_counts[tab.binary] += np.exp(tab.logp) * binary
    return cnf_counts


def _outside_span_fast(
    tab: Tables, parent: np.ndarray, left: np.ndarray, right: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """The outside terms that the parents of one span length hand to their children, by matrix
    products in scaled probability space (``None`` when a term could underflow, as in
    :func:`inside_batch`). ``parent`` is ``(B, n_i, N)``, ``left`` and ``right``
    ``(B, n_i, m, N)``.

    With ``Q[B, C] = sum_A alpha_A(i, j) W[A, B, C]``, the left child ``(i, k)`` gets
    ``sum_C Q[B, C] beta_C(k, j)`` and the right child ``(k, j)`` gets
    ``sum_B Q[B, C] beta_B(i, k)``."""
    vP, sP, low_p = _scaled(parent)  # (B, n_i, N), (B, n_i, 1)
    vL, sL, low_l = _scaled(left)  # (B, n_i, m, N), (B, n_i, m, 1)
    vR, sR, low_r = _scaled(right)
    if low_p + min(low_l, low_r) + tab.log_w_min < SAFE_EXPONENT:
        return None
    N = parent.shape[-1]
    Q = (vP @ tab.W_out).reshape(parent.shape[:-1] + (N, N))  # (B, n_i, N, N): [B, C]
    to_left = np.matmul(vR, _contiguous(Q.swapaxes(-1, -2)))  # (B, n_i, m, N): over B
    to_right = np.matmul(vL, Q)  # (B, n_i, m, N): over C
    dead_p = ~np.isfinite(parent).any(-1)[..., None, None]  # (B, n_i, 1, 1) parent impossible
    to_left = np.where(dead_p | ~np.isfinite(right).any(-1, keepdims=True), -np.inf, _log(to_left))
    to_right = np.where(dead_p | ~np.isfinite(left).any(-1, keepdims=True), -np.inf, _log(to_right))
    return to_left + sP[..., None] + sR, to_right + sP[..., None] + sL


def _outside_span_logs(
    tab: Tables, parent: np.ndarray, left: np.ndarray, right: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The same as :func:`_outside_span_fast`, rule by rule in logs (always exact)."""
    P = parent[..., None, tab.A]  # (B, n_i, 1, R)
    to_left = P + tab.logp + right[..., tab.C]  # (B, n_i, m, R): terms of alpha_B(i, k)
    to_right = P + tab.logp + left[..., tab.B]  # (B, n_i, m, R): terms of alpha_C(k, j)
    return (
        _logsumexp(_with_pad(to_left)[..., tab.by_left], axis=-1),  # (B, n_i, m, N)
        _logsumexp(_with_pad(to_right)[..., tab.by_right], axis=-1),  # (B, n_i, m, N)
    )


def outside_batch(tab: Tables, beta: np.ndarray) -> np.ndarray:
    """The outside tables ``alpha``, ``(B, n+1, n+1, N)``, from the inside tables, eq.
    (parse-outside); see :func:`nlpcourse.parsing.inside_outside_tables`."""
    Bn, n, N = beta.shape[0], beta.shape[1] - 1, beta.shape[-1]
    alpha = np.full((Bn, n + 1, n + 1, N), -np.inf)  # (B, n+1, n+1, N)
    alpha[:, 0, n, 0] = 0.0  # the start symbol is symbol 0
    for length in range(n, 1, -1):
        I = np.arange(n - length + 1)[:, None]  # (n_i, 1) parent span starts
        M = np.arange(1, length)[None, :]  # (1, m) split offsets
        parent = alpha[:, I[:, 0], I[:, 0] + length]  # (B, n_i, N)
        left, right = beta[:, I, I + M], beta[:, I + M, I + length]  # (B, n_i, m, N) each
        fast = _outside_span_fast(tab, parent, left, right)
        if fast is None:
            fast = _outside_span_logs(tab, parent, left, right)
        to_left, to_right = fast  # (B, n_i, m, N) each: alpha_B(i, k) and alpha_C(k, j) terms
        alpha[:, I, I + M] = np.logaddexp(alpha[:, I, I + M], to_left)
        alpha[:, I + M, I + length] = np.logaddexp(alpha[:, I + M, I + length], to_right)
    return alpha


def by_length(
    sentences: Sequence[Sequence[str]], chunk: int = 256, max_rows: int | None = None
) -> Iterator[list[int]]:
    """Indices of the sentences, in groups of one length (at most ``chunk`` each, and at most
    ``max_rows`` chart rows, ``(n+1)^2`` a sentence, if given: a chart that fits the processor's
    cache is faster than a larger batch)."""
    groups: dict[int, list[int]] = defaultdict(list)
    for k, words in enumerate(sentences):
        groups[len(words)].append(k)
    for n, members in sorted(groups.items()):
        if max_rows is not None:
            chunk = max(1, min(chunk, max_rows // (n + 1) ** 2))
        for start in range(0, len(members), chunk):
            yield members[start : start + chunk]


def corpus_counts(tab: Tables, sentences: Sequence[list[str]]) -> tuple[np.ndarray, float]:
    """The E step of inside-outside, eq. (parse-em): the expected count of every CNF rule summed
    over ``sentences``, eq. (parse-count), and their total log likelihood ``sum log P(w)``.
    ``ValueError`` names a sentence that has no tree."""
    cnf_counts = np.zeros(len(tab.cnf.cnf_rules))  # (rules of the CNF grammar,)
    loglik = 0.0
    for group in by_length(sentences):
        batch = [sentences[k] for k in group]
        beta = inside_batch(tab, batch)  # (B, n+1, n+1, N)
        logZ = beta[:, 0, -1, 0]  # (B,)
        if not np.isfinite(logZ).all():
            bad = batch[int(np.argmin(np.isfinite(logZ)))]
            raise ValueError(f"the sentence {' '.join(bad)!r} has no tree")
        loglik += float(logZ.sum())
        alpha = outside_batch(tab, beta)  # (B, n+1, n+1, N)
        cnf_counts += cnf_counts_batch(tab, batch, beta, alpha, logZ)
    return cnf_counts, loglik


def log_likelihoods(tab: Tables, sentences: Sequence[list[str]]) -> np.ndarray:
    """``log P(w)`` of each sentence, ``(len(sentences),)``, eq. (parse-sentence)."""
    out = np.empty(len(sentences))
    for group in by_length(sentences, max_rows=BATCH_ROWS):
        beta = inside_batch(tab, [sentences[k] for k in group])  # (B, n+1, n+1, N)
        out[group] = beta[:, 0, -1, 0]
    return out
