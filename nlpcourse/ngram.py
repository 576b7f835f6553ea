"""N-gram language models: counting, smoothing, perplexity and generation (chapter 1).

Based on Jurafsky & Martin, *Speech and Language Processing* (3rd ed. draft, "SLP3"), chapter 3,
and Chen & Goodman (1999) for the smoothing methods. Equation labels ``(ngram-...)`` are the
book's (``book/ngrams.md``).

Conventions, fixed for the whole book in :mod:`nlpcourse.lm` (the symbols, the vocabulary rule,
perplexity), which the recurrent and transformer chapters share:

* Each sentence ``w_1 ... w_m`` is padded with ``n-1`` start symbols ``<s>`` and one end symbol
  ``</s>``. The model predicts ``w_1, ..., w_m, </s>`` (``m + 1`` predictions per sentence); it
  never predicts ``<s>``, and perplexity counts ``</s>`` but not ``<s>``.
* The vocabulary ``V`` (:func:`nlpcourse.lm.build_vocab`) is ``</s>``, ``<unk>`` and every
  training word seen at least ``min_count`` times; every other word, in training or test text,
  is read as ``<unk>``. ``min_count=4`` is the rule of Bengio et al. (2003): words seen 3 times or
  fewer are merged into one symbol.
* Probabilities are over ``V``: for every context, seen or not, a smoothed model's
  ``P(w | context)`` sums to 1 over ``w`` in ``V``. Log probabilities are natural logs.

The module has two layers.

1. Readable dictionary functions (:func:`pad`, :func:`count_ngrams`, :func:`mle_prob`,
   :func:`addk_prob`, :func:`perplexity`, :func:`continuation_prob`, :func:`kn_bigram_prob`):
   the formulas exactly as the chapter writes them, one n-gram at a time. They are what the
   exercise asks students to write, and the exercise checks compare against them.
   :func:`kn_prob` is Kneser-Ney of any order written the same way, as the recursion of
   eq. (ngram-kn): the readable twin of the array model's loop.
2. :class:`NGramLM`, the same formulas on arrays. Every n-gram of a sentence is turned into one
   integer key (the row of its last ``n-1`` words among the (n-1)-grams, times ``|V| + 1``, plus
   its first word: small at any order on any vocabulary), counts are ``np.unique`` over those
   keys, and lookups are ``np.searchsorted`` into the sorted key arrays, so scoring a test set is a
   handful of array operations rather than a Python loop per n-gram. The tests check the two
   layers against each other.

Kneser-Ney is the interpolated form of SLP3 eq. 3.40-3.41 with one discount ``d`` at every order:

    P_KN(w | ctx) = max(c_KN(ctx w) - d, 0) / sum_v c_KN(ctx v)
                    + d * N1+(ctx .) / sum_v c_KN(ctx v) * P_KN(w | ctx')

where ``ctx'`` drops the first word of ``ctx``, ``c_KN`` is the ordinary count at the highest order
and the continuation count ``N1+(. ctx w)`` (how many distinct words precede ``ctx w``) at every
lower order, and the recursion ends in the uniform distribution ``1/|V|``. A context with no counts
at some order backs off fully to the next shorter context. This is not Chen & Goodman's *modified*
Kneser-Ney, which uses three discounts per order; the chapter says where that matters.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from nlpcourse.guard import reference
from nlpcourse.lm import BENGIO_MIN_COUNT as BENGIO_MIN_COUNT  # chapter 1 imports it from here
from nlpcourse.lm import (
    BOS,
    EOS,
    EOS_ID,
    LOG10_ZERO,
    UNK_ID,
    NotFittedError,
    build_vocab,
    check_sentences,
    perplexity_from_nll,
)
from nlpcourse.lm import UNK as UNK  # tests import it from here

if TYPE_CHECKING:  # the ARPA module (and numba, its compiled loops) loads only when it is used
    from nlpcourse.arpa import ArpaLM, Level

SMOOTHINGS = ("mle", "add-k", "interpolated", "absolute", "kneser-ney")

Context = tuple[str, ...]


# ------------------------------------------------------------ layer 1: the formulas, one by one


@reference
def pad(sentence: Sequence[str], n: int) -> list[str]:
    """``n-1`` start symbols, the sentence, one end symbol (section "Sentence boundaries")."""
    return [BOS] * (n - 1) + list(sentence) + [EOS]


@reference
def count_ngrams(sentences: Iterable[Sequence[str]], n: int) -> Counter:
    """Counts of every n-gram (a tuple of ``n`` words) in the padded sentences.

    A sentence of ``m`` words gives ``m + 1`` n-grams, one for each predicted word.
    """
    counts: Counter = Counter()
    for sentence in sentences:
        padded = pad(sentence, n)
        for i in range(len(padded) - n + 1):
            counts[tuple(padded[i : i + n])] += 1
    return counts


@reference
def mle_prob(counts: Counter, context: Context, word: str) -> float:
    """Maximum-likelihood estimate, eq. (ngram-mle): ``c(context, word) / c(context)``.

    ``c(context)`` is the number of n-grams that start with ``context``. An unseen context has
    no estimate; we return 0.0.
    """
    context = tuple(context)
    c_context = sum(c for ngram, c in counts.items() if ngram[:-1] == context)
    if c_context == 0:
        return 0.0
    return counts[context + (word,)] / c_context


@reference
def addk_prob(
    counts: Counter, context: Context, word: str, vocab_size: int, k: float = 1.0
) -> float:
    """Add-k smoothing, eq. (ngram-addk): ``(c(context, word) + k) / (c(context) + k |V|)``.

    ``k = 1`` is Laplace (add-one) smoothing.
    """
    context = tuple(context)
    c_context = sum(c for ngram, c in counts.items() if ngram[:-1] == context)
    return (counts[context + (word,)] + k) / (c_context + k * vocab_size)


@reference
def perplexity(
    prob: Callable[[Context, str], float], sentences: Iterable[Sequence[str]], n: int
) -> float:
    """Perplexity, eq. (ngram-ppl): ``exp(-(1/N) sum_i log P(w_i | w_{i-n+1} ... w_{i-1}))``.

    ``prob(context, word)`` gives the model's probability; ``N`` counts every predicted word,
    ``</s>`` included and ``<s>`` never. A zero probability makes the perplexity infinite.
    """
    log_sum, N = 0.0, 0
    for sentence in sentences:
        padded = pad(sentence, n)
        for i in range(n - 1, len(padded)):
            p = prob(tuple(padded[i - n + 1 : i]), padded[i])
            if p == 0.0:
                return math.inf
            log_sum += math.log(p)
            N += 1
    return math.exp(-log_sum / N)


@reference
def continuation_prob(bigram_counts: Counter, word: str) -> float:
    """Continuation probability, eq. (ngram-pcont): ``N1+(. word) / N1+(. .)``.

    The number of distinct words that precede ``word``, over the number of distinct bigram types.
    """
    n_types = sum(1 for c in bigram_counts.values() if c > 0)
    n_preceding = sum(1 for (_, w), c in bigram_counts.items() if w == word and c > 0)
    return n_preceding / n_types


@reference
def kn_bigram_prob(
    bigram_counts: Counter, context: Context, word: str, vocab_size: int, d: float = 0.75
) -> float:
    """Interpolated Kneser-Ney for bigrams, eq. (ngram-kn) with (ngram-kn-unigram).

    ``P_KN(w | v) = max(c(v w) - d, 0) / c(v) + d * N1+(v .) / c(v) * P_KN(w)`` and
    ``P_KN(w) = max(N1+(. w) - d, 0) / N1+(. .) + d * |{w': N1+(. w') > 0}| / N1+(. .) / |V|``.
    A context word ``v`` never seen as a context backs off fully to ``P_KN(w)``.
    """
    (v,) = tuple(context)
    preceding: Counter = Counter(w for (_, w), c in bigram_counts.items() if c > 0)
    n_types = sum(preceding.values())  # N1+(. .)
    p_unigram = max(preceding[word] - d, 0) / n_types + d * len(preceding) / n_types / vocab_size
    c_v = sum(c for (u, _), c in bigram_counts.items() if u == v)
    if c_v == 0:
        return p_unigram
    n_follow = sum(1 for (u, _), c in bigram_counts.items() if u == v and c > 0)  # N1+(v .)
    return max(bigram_counts[(v, word)] - d, 0) / c_v + d * n_follow / c_v * p_unigram


def kn_counts(ngram_counts: Counter, m: int) -> Counter:
    """``c_KN`` of every m-gram (eq. ngram-kn), from the n-gram counts of :func:`count_ngrams`.

    At the highest order (``m = n``) the ordinary count ``c(g)``; below it the continuation count
    ``N1+(. g)``: how many distinct words (``<s>`` included) come right before ``g`` in the
    (m+1)-grams that end the seen n-grams.
    """
    n = len(next(iter(ngram_counts)))
    if m == n:
        return Counter({g: c for g, c in ngram_counts.items() if c > 0})
    longer = {g[n - m - 1 :] for g, c in ngram_counts.items() if c > 0}  # the seen (m+1)-grams
    return Counter(g[1:] for g in longer)  # N1+(. g): one for each distinct word before g


def kn_prob(
    ngram_counts: Counter,
    context: Context,
    word: str,
    vocab_size: int,
    d: float = 0.75,
    continuation: bool = True,
) -> float:
    """Interpolated Kneser-Ney of any order, eq. (ngram-kn), as a plain recursion on dictionaries.

    ``ngram_counts`` are the counts of :func:`count_ngrams` at the model's order ``n`` and
    ``context`` the ``n-1`` previous words (``<s>`` where the sentence starts); ``vocab_size`` is
    ``|V|``, ``</s>`` and ``<unk>`` included. One call recomputes every count it needs, so this
    is for reading and checking: :class:`NGramLM` computes the same numbers on arrays (the tests
    check the two are equal). ``continuation=False`` uses ordinary counts at every order:
    interpolated absolute discounting, eq. (ngram-absolute).
    """
    context = tuple(context)
    n = len(context) + 1
    if not ngram_counts or any(len(g) != n for g in ngram_counts):
        raise ValueError(f"a context of {n - 1} words needs the counts of {n}-grams")

    def p_kn(h: Context) -> float:  # P_KN(word | h), h the last m-1 words of the context
        m = len(h) + 1
        if continuation:
            c = kn_counts(ngram_counts, m)
        else:
            c = Counter(g[n - m :] for g in ngram_counts.elements())  # ordinary m-gram counts
        lower = p_kn(h[1:]) if m > 1 else 1 / vocab_size  # P_KN(word | h'), or uniform
        total = sum(count for g, count in c.items() if g[:-1] == h)  # sum_v c_KN(h v)
        if total == 0:
            return lower  # a context with no counts backs off fully
        types = sum(1 for g in c if g[:-1] == h)  # N1+(h .)
        return max(c[h + (word,)] - d, 0) / total + d * types / total * lower  # (ngram-kn)

    return p_kn(context)


# --------------------------------------------------------------------- layer 2: the array model


def _find(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """The row of each query in the sorted array ``keys``, -1 where it is absent."""
    if len(keys) == 0:
        return np.full(len(queries), -1, dtype=np.int64)
    i = np.minimum(np.searchsorted(keys, queries), len(keys) - 1)
    return np.where(keys[i] == queries, i, -1)


def _per_row(rows: np.ndarray, size: int, weights: np.ndarray | None = None) -> np.ndarray:
    """How many times each row 0..size-1 occurs in ``rows`` (or the sum of its ``weights``), and
    a last entry 0, which row -1 (an n-gram or context never seen) reads."""
    counts = np.bincount(rows, weights=weights, minlength=size)
    return np.append(counts, 0).astype(np.int32)


class NGramLM:
    """An n-gram language model over a fixed vocabulary, scored on arrays.

    ``smoothing`` is one of

    * ``"mle"``: relative frequencies, eq. (ngram-mle); 0 for an unseen context.
    * ``"add-k"``: eq. (ngram-addk) with ``k`` (``k=1`` is Laplace).
    * ``"interpolated"``: ``lambda_0 / |V| + sum_m lambda_m P_MLE(w | last m-1 words)``,
      eq. (ngram-interp), with ``lambdas = (lambda_0, ..., lambda_order)`` given, or tuned by EM on
      the ``heldout`` sentences passed to :meth:`fit`. Where a context of some order was never
      seen, that order uses the next shorter context's estimate, so every distribution sums to 1.
    * ``"absolute"``: interpolated absolute discounting (Kneser-Ney without continuation counts).
    * ``"kneser-ney"``: interpolated Kneser-Ney, SLP3 eq. 3.40-3.41 (see the module docstring).

    **Storage.** The m-grams of each order are numbered by their *row* in a sorted array of keys,
    ``grams_[m]``: the key of ``u1 ... um`` is ``row of u2 ... um among the (m-1)-grams * (|V|+1)
    + u1``, and a unigram's key is its word id. A key stays below (number of (m-1)-grams) x
    (|V|+1), so any order fits 64 bits on any vocabulary (a reversed trie in arrays, the layout of
    KenLM's sorted tables). A context of order m (the ``m-1`` words before the last) is numbered
    by its row among the (m-1)-grams, or one past them for ``<s> ... <s>``, the context of a
    sentence's first word (every other context ends in a predicted word, so it is an (m-1)-gram).
    Looking an n-gram up walks from its last word to its first, one ``np.searchsorted`` per order
    for all the queries at once; an absent n-gram gets row -1, and every array below ends in one
    entry for row -1 (a count of 0).

    After :meth:`fit`: ``vocab_`` (the predicted words, :func:`nlpcourse.lm.build_vocab`; also
    readable as ``vocab``), ``index_`` (word -> id), and per order ``m = 1..order``: ``counts_[m]``
    (``c(g)`` per m-gram row), ``totals_[m]`` and ``types_[m]`` (``sum_v c(h v)`` and
    ``N1+(h .)`` per context row); for Kneser-Ney below the top order ``continuation_[m]``
    (``N1+(. g)``) and ``continuation_totals_[m]`` (``sum_v N1+(. h v)``); ``lambdas_`` for the
    interpolated model. ``nbytes`` is the memory all of these arrays hold.
    """

    def __init__(
        self,
        order: int = 3,
        smoothing: str = "kneser-ney",
        k: float = 1.0,
        discount: float = 0.75,
        lambdas: Sequence[float] | None = None,
    ):
        if not isinstance(order, int) or order < 1:
            raise ValueError(f"order must be an integer >= 1, got {order!r}")
        if smoothing not in SMOOTHINGS:
            raise ValueError(f"unknown smoothing {smoothing!r}; choose one of {SMOOTHINGS}")
        if k <= 0:
            raise ValueError(f"add-k needs k > 0, got {k!r}")
        if not 0 < discount <= 1:
            raise ValueError(f"the discount must satisfy 0 < d <= 1, got {discount!r}")
        if lambdas is not None:
            _check_lambdas(lambdas, order)
        self.order = order
        self.smoothing = smoothing
        self.k = k
        self.discount = discount
        self.lambdas = lambdas

    # -- fitting --------------------------------------------------------------------------------

    @reference
    def fit(
        self,
        sentences: Iterable[Sequence[str]],
        min_count: int = 1,
        heldout: Iterable[Sequence[str]] | None = None,
    ) -> NGramLM:
        """Count the n-grams of ``sentences`` (an iterable of token lists). Returns ``self``.

        ``min_count`` sets the vocabulary (see the module docstring). ``heldout`` sentences tune
        the interpolation weights when ``smoothing="interpolated"`` and no ``lambdas`` were given.
        """
        sentences = check_sentences(sentences, "fit")
        if not sentences:
            raise ValueError("fit() got an empty corpus: pass at least one sentence")
        if self.smoothing == "interpolated" and self.lambdas is None and heldout is None:
            raise ValueError(
                "interpolated smoothing needs weights: pass lambdas=... to NGramLM, "
                "or heldout=sentences to fit() to tune them by EM"
            )
        self.vocab_ = build_vocab(sentences, min_count)  # </s>, <unk>, then the words
        self.min_count = min_count
        self.index_ = {w: i for i, w in enumerate(self.vocab_)}
        self.base_ = len(self.vocab_) + 1  # ids 0..|V|-1 are the vocabulary, |V| is <s>

        n, B, bos = self.order, self.base_, self.base_ - 1
        ctx, w = self._windows(sentences)  # (M, n-1), (M,)
        self.grams_: dict[int, np.ndarray] = {}
        self.counts_: dict[int, np.ndarray] = {}
        self.totals_: dict[int, np.ndarray] = {}
        self.types_: dict[int, np.ndarray] = {}
        context_of: dict[int, np.ndarray] = {}  # the context row of each m-gram
        gram_key = w  # order 1: the word; every window has the one empty context, row 0
        context_row, H = np.zeros(len(w), dtype=np.int64), 1
        for m in range(1, n + 1):
            self.grams_[m], first, gram_row = np.unique(
                gram_key, return_index=True, return_inverse=True
            )
            K = len(self.grams_[m])
            context_of[m] = context_row[first]
            self.counts_[m] = _per_row(gram_row, K)  # c(g)
            self.totals_[m] = _per_row(context_row, H)  # sum_v c(h v)
            self.types_[m] = _per_row(context_of[m], H)  # N1+(h .)
            if m < n:
                # order m+1 puts the word before in front: the last m+1 words of each window
                gram_key = gram_row * B + ctx[:, n - m - 1]
                # its context, the m words before w, is the m-gram of the window before, or
                # <s>^m where w starts a sentence (row K, after the m-grams)
                context_row, H = np.where(ctx[:, -1] == bos, K, np.roll(gram_row, 1)), K + 1
        if self.smoothing == "kneser-ney":
            # N1+(. g) of an m-gram g (m < n): the (m+1)-grams whose suffix (key // B) is g
            self.continuation_ = {
                m: _per_row(self.grams_[m + 1] // B, len(self.grams_[m])) for m in range(1, n)
            }
            self.continuation_totals_ = {
                m: _per_row(context_of[m], len(self.totals_[m]) - 1, self.continuation_[m][:-1])
                for m in range(1, n)
            }
        if self.smoothing == "interpolated":
            if self.lambdas is not None:
                self.lambdas_ = np.asarray(self.lambdas, dtype=float)
            else:
                # heldout is not None here (fit raised above otherwise), which mypy cannot see
                self.lambdas_ = self._tune_lambdas(check_sentences(heldout, "fit(heldout=...)"))  # type: ignore[arg-type]
        return self

    @property
    def vocab(self) -> list[str]:
        """The fitted vocabulary, ``vocab_`` (the name chapter 1 used before ``nlpcourse.lm``)."""
        self._check_fitted()
        return self.vocab_

    @property
    def nbytes(self) -> int:
        """Bytes held by the model's arrays (the n-gram and context tables and their counts)."""
        self._check_fitted()
        tables = [self.grams_, self.counts_, self.totals_, self.types_]
        if self.smoothing == "kneser-ney":
            tables += [self.continuation_, self.continuation_totals_]
        return sum(a.nbytes for table in tables for a in table.values())

    def _windows(self, sentences: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
        """Every n-gram of the padded sentences as ids: contexts (M, n-1) and words (M,)."""
        n, bos = self.order, self.base_ - 1
        words = itertools.chain.from_iterable(sentences)
        ids = np.fromiter(map(self.index_.get, words, itertools.repeat(UNK_ID)), np.int64)
        lengths = np.fromiter(map(len, sentences), np.int64, len(sentences))  # (S,)
        ends = np.cumsum(lengths + n)  # one past each padded sentence <s>^(n-1) w1 ... wk </s>
        stream = np.full(ends[-1] if len(ends) else 0, bos, dtype=np.int64)
        first = np.repeat(ends - lengths - 1 - (np.cumsum(lengths) - lengths), lengths)
        stream[first + np.arange(len(ids))] = ids  # the words, each after its sentence's <s>
        stream[ends - 1] = EOS_ID
        t = np.flatnonzero(stream != bos)  # (M,) positions of predicted words
        ctx = np.zeros((len(t), n - 1), dtype=np.int64)  # (M, n-1)
        for j in range(n - 1):
            ctx[:, j] = stream[t - n + 1 + j]
        return ctx, stream[t]

    def _walk(self, rows: np.ndarray, before: np.ndarray) -> list[np.ndarray]:
        """Rows of growing m-grams, -1 where never seen: from the rows of unigrams, each order
        puts the next word of ``before`` (Q, k) in front (key = row * B + word): orders 1..k+1.
        A row -1 stays -1 (its keys are negative)."""
        out = [rows]
        for j in range(before.shape[1]):
            out.append(_find(self.grams_[j + 2], out[-1] * self.base_ + before[:, j]))
        return out

    def _context_rows(self, ctx: np.ndarray, top: int) -> list[np.ndarray]:
        """Per order m = 1..top, the row of the context (the last m-1 words of ``ctx``): 0 for the
        empty context of order 1; above it the row of the context among the (m-1)-grams, or one
        past them for ``<s> ... <s>``, the context of a sentence's first word."""
        before = ctx[:, ::-1]  # (Q, n-1) the context words, nearest first
        rows = [np.zeros(len(ctx), dtype=np.int64)]
        if top > 1:
            walked = self._walk(_find(self.grams_[1], before[:, 0]), before[:, 1 : top - 1])
            starts = np.ones(len(ctx), dtype=bool)  # is the context <s> ... <s>
            for m in range(2, top + 1):
                starts &= before[:, m - 2] == self.base_ - 1
                rows.append(np.where(starts, len(self.grams_[m - 1]), walked[m - 2]))
        return rows

    def _rows(self, ctx: np.ndarray, w: np.ndarray, top: int) -> list[tuple[np.ndarray, ...]]:
        """Per order m = 1..top: the row of the m-gram (the last m-1 words of ``ctx``, then
        ``w``) and the row of its context, -1 where never seen."""
        grams = self._walk(_find(self.grams_[1], w), ctx[:, ::-1][:, : top - 1])
        return list(zip(grams, self._context_rows(ctx, top), strict=True))

    def _tune_lambdas(self, heldout: list[list[str]]) -> np.ndarray:
        """EM for the interpolation weights on held-out data (deleted interpolation).

        Each component (uniform, unigram, ..., order-n MLE) is a fixed distribution, so EM
        maximises the held-out likelihood: E-step, each component's share of each held-out
        n-gram's probability; M-step, the weights are the average shares.
        """
        if not heldout:
            raise ValueError("the held-out corpus for tuning lambdas is empty")
        P = self._components(*self._windows(heldout))  # (M, n+1)
        lambdas = np.full(P.shape[1], 1 / P.shape[1])
        for _ in range(500):
            share = P * lambdas / (P @ lambdas)[:, None]  # (M, n+1)
            new = share.mean(axis=0)
            if np.abs(new - lambdas).max() < 1e-7:
                return new
            lambdas = new
        return lambdas

    # -- scoring --------------------------------------------------------------------------------

    def _components(self, ctx: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Columns: uniform, then the MLE of orders 1..n (eq. ngram-mle), an unseen context taking
        the shorter context's estimate (eq. ngram-interp). Shape (M, n+1)."""
        columns = [np.full(len(w), 1 / len(self.vocab_))]
        for m, (gram, context) in enumerate(self._rows(ctx, w, self.order), start=1):
            total = self.totals_[m][context]
            p = self.counts_[m][gram] / np.maximum(total, 1)
            columns.append(np.where(total > 0, p, columns[-1]) if m > 1 else p)
        return np.stack(columns, axis=1)

    def _discounted(self, ctx: np.ndarray, w: np.ndarray, top: int | None = None) -> np.ndarray:
        """Interpolated absolute discounting / Kneser-Ney, eq. (ngram-kn), lowest order first.

        ``top`` stops the recursion at that order (the lower-order distributions that an ARPA
        file lists, :meth:`backoff_levels`); by default it runs to the model's order."""
        d, n = self.discount, self.order
        p = np.full(len(w), 1 / len(self.vocab_))  # the uniform base
        for m, (gram, context) in enumerate(self._rows(ctx, w, top or n), start=1):
            if m < n and self.smoothing == "kneser-ney":
                c = self.continuation_[m][gram]  # c_KN(ctx w) = N1+(. ctx w)
                total = self.continuation_totals_[m][context]  # sum_v c_KN(ctx v)
            else:
                c, total = self.counts_[m][gram], self.totals_[m][context]
            types = self.types_[m][context]  # N1+(ctx .)
            safe = np.maximum(total, 1)
            interpolated = np.maximum(c - d, 0) / safe + d * types / safe * p
            p = np.where(total > 0, interpolated, p)  # unseen context: back off fully
        return p

    @reference
    def _prob_ids(self, ctx: np.ndarray, w: np.ndarray) -> np.ndarray:
        """P(w | ctx) for arrays of contexts (M, n-1) and words (M,)."""
        n = self.order
        if self.smoothing == "mle":  # eq. (ngram-mle); 0 after an unseen context
            gram, context = self._rows(ctx, w, n)[-1]
            return self.counts_[n][gram] / np.maximum(self.totals_[n][context], 1)
        if self.smoothing == "add-k":  # eq. (ngram-addk)
            k, V = self.k, len(self.vocab_)
            gram, context = self._rows(ctx, w, n)[-1]
            return (self.counts_[n][gram] + k) / (self.totals_[n][context] + k * V)
        if self.smoothing == "interpolated":
            return self._components(ctx, w) @ self.lambdas_
        return self._discounted(ctx, w)

    def _check_fitted(self) -> None:
        if not hasattr(self, "vocab_"):
            raise NotFittedError("this NGramLM is not fitted yet: call fit(sentences) first")

    def _encode_query(self, word: str, context: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        self._check_fitted()
        if word == BOS:
            raise ValueError("<s> is never predicted: it is not in the vocabulary")
        if isinstance(context, str):
            raise TypeError(f"context must be a sequence of words, not the string {context!r}")
        n, bos = self.order, self.base_ - 1
        context = [BOS] * (n - 1) + list(context)  # a short context is a sentence start
        ids = [
            bos if u == BOS else self.index_.get(u, UNK_ID) for u in context[len(context) - n + 1 :]
        ]
        ctx = np.array([ids], dtype=np.int64).reshape(1, n - 1)
        return ctx, np.array([self.index_.get(word, UNK_ID)])

    def prob(self, word: str, context: Sequence[str] = ()) -> float:
        """P(word | the last order-1 words of context). Unknown words read as ``<unk>``; a context
        shorter than order-1 is taken to start the sentence (padded with ``<s>``)."""
        return float(self._prob_ids(*self._encode_query(word, context))[0])

    def logprob(self, word: str, context: Sequence[str] = ()) -> float:
        """Natural log of :meth:`prob` (``-inf`` for probability 0)."""
        with np.errstate(divide="ignore"):
            return float(np.log(self.prob(word, context)))

    def perplexity(self, sentences: Iterable[Sequence[str]]) -> float:
        """Perplexity on ``sentences``, eq. (ngram-ppl): every word and each ``</s>`` counted."""
        self._check_fitted()
        sentences = check_sentences(sentences, "perplexity")
        if not sentences:
            raise ValueError("perplexity() got no sentences")
        p = self._prob_ids(*self._windows(sentences))  # (N,): every word and each </s>
        with np.errstate(divide="ignore"):
            return perplexity_from_nll(float(-np.log(p).sum()), len(p))

    def distribution(self, context: Sequence[str] = ()) -> np.ndarray:
        """P(w | context) for every w in ``vocab_``, in vocabulary order (sums to 1)."""
        ctx, _ = self._encode_query(EOS, context)
        V = len(self.vocab_)
        return self._prob_ids(np.repeat(ctx, V, axis=0), np.arange(V))

    def generate(self, max_len: int = 30, seed: int = 0) -> list[str]:
        """Sample one sentence word by word (Shannon's method), stopping at ``</s>`` or after
        ``max_len`` words. The ``</s>`` itself is not returned."""
        rng = np.random.default_rng(seed)
        words: list[str] = []
        while len(words) < max_len:
            p = self.distribution(words[-(self.order - 1) :] if self.order > 1 else ())
            if p.sum() == 0:  # an MLE model in a context it never saw
                break
            w = self.vocab_[rng.choice(len(p), p=p / p.sum())]
            if w == EOS:
                break
            words.append(w)
        return words

    def token_probs(self, sentences: Iterable[Sequence[str]]) -> np.ndarray:
        """P of every predicted token of ``sentences``, in order: each word, then ``</s>``."""
        self._check_fitted()
        return self._prob_ids(*self._windows(check_sentences(sentences, "token_probs")))

    # -- the back-off form, for ARPA files -----------------------------------------------------

    def _gram_ids(self, m: int) -> np.ndarray:
        """The word ids of every m-gram, (K, m) in row order, first word first: a key's last digit
        (``key % B``) is the first word, the rest (``key // B``) the row of the suffix."""
        keys = self.grams_[m]
        if m == 1:
            return keys[:, None]
        return np.column_stack([keys % self.base_, self._gram_ids(m - 1)[keys // self.base_]])

    def _gamma(self, ctx: np.ndarray, m: int) -> np.ndarray:
        """The weight of the back-off term of order m for contexts ``ctx`` (M, n-1): ``gamma(h)``
        for a seen context, 1 for an unseen one (it backs off fully)."""
        context = self._context_rows(ctx, m)[-1]
        if self.smoothing == "add-k":
            if m < self.order:
                return np.ones(len(ctx))  # uniform backs off to uniform
            kV = self.k * len(self.vocab_)
            return kV / (self.totals_[m][context] + kV)
        if m < self.order and self.smoothing == "kneser-ney":
            total = self.continuation_totals_[m][context]
        else:
            total = self.totals_[m][context]
        types = self.types_[m][context]
        return np.where(total > 0, self.discount * types / np.maximum(total, 1), 1.0)

    def _level_prob(self, ctx: np.ndarray, w: np.ndarray, top: int) -> np.ndarray:
        """P(w | last top-1 words of ctx) of the model's order-``top`` distribution."""
        if self.smoothing == "add-k":
            if top < self.order:
                return np.full(len(w), 1 / len(self.vocab_))  # add-k's lower orders are uniform
            return self._prob_ids(ctx, w)
        return self._discounted(ctx, w, top=top)

    def backoff_levels(self) -> tuple[list[str], list[Level]]:
        """The model in back-off form (:mod:`nlpcourse.arpa` explains it): the words (the name of
        each id, ``<s>`` last), and per order m the listed m-grams as ids (K, m) with their log10
        probabilities (K,) and log10 back-off weights (K,). Kneser-Ney, absolute discounting and
        add-k have this form; MLE and fixed-weight interpolation raise ``ValueError`` saying why.
        """
        self._check_fitted()
        if self.smoothing == "mle":
            raise ValueError(
                "an MLE model gives probability 0 to every n-gram it never saw, and an unseen "
                "context has no distribution at all: ARPA needs a probability for every word after "
                "every history, so an MLE model cannot be written (use add-k or Kneser-Ney)"
            )
        if self.smoothing == "interpolated":
            raise ValueError(
                "fixed-weight (Jelinek-Mercer) interpolation has no exact back-off form: where a "
                "context is unseen the model re-weights the shorter orders, which a back-off file "
                "cannot express without listing every unseen context; use Kneser-Ney or absolute "
                "discounting, which interpolate and back off at once"
            )
        n, bos, V = self.order, self.base_ - 1, len(self.vocab_)
        top = self._gram_ids(n)  # (K, n) the padded n-grams, some starting with <s>
        n_bos = (top == bos).sum(axis=1)  # (K,)
        levels: list[Level] = []
        for m in range(1, n + 1):
            # the m-grams without <s> (every word is a unigram), with their order-m probability
            ids = np.arange(V)[:, None] if m == 1 else self._gram_ids(m)
            ids = ids[(ids != bos).all(axis=1)]
            ctx = np.full((len(ids), n - 1), bos, dtype=np.int64)  # (K, n-1) padded with <s>
            ctx[:, n - m :] = ids[:, :-1]
            logp = np.log10(self._level_prob(ctx, ids[:, -1], top=m))
            if m > 1:  # "<s> v" with |v| = m-1: the padded <s>^(n-m+1) v, the first m-1 words
                rows = top[n_bos == n - m + 1]  # (K, n)
                ids = np.concatenate([ids, rows[:, n - m :]])
                logp = np.concatenate([logp, np.log10(self._prob_ids(rows[:, :-1], rows[:, -1]))])
            else:
                ids = np.concatenate([ids, [[bos]]])
                logp = np.append(logp, LOG10_ZERO)  # <s> is never predicted
            logb = np.zeros(len(ids))
            if m < n:  # b(g): gamma of the next order up; for "<s> v" the padded orders' product
                ctx = np.full((len(ids), n - 1), bos, dtype=np.int64)
                ctx[:, n - 1 - m :] = ids
                starts = ids[:, 0] == bos  # "<s> v" stands for the contexts <s>...<s> v
                b = self._gamma(ctx, m + 1)
                for k in range(m + 2, n + 1):
                    b = np.where(starts, b * self._gamma(ctx, k), b)
                logb = np.log10(b)
            levels.append((ids, logp, logb))
        return self.vocab_ + [BOS], levels

    def to_arpa(self, path: str | Path) -> Path:
        """Write the model as an ARPA back-off file, the format KenLM, SRILM and Kaldi read
        (:meth:`backoff_levels` written by :func:`nlpcourse.arpa.write_arpa`)."""
        from nlpcourse.arpa import write_arpa  # loads numba: only when a file is written

        return write_arpa(self, path)

    @staticmethod
    def from_arpa(path: str | Path) -> ArpaLM:
        """Read any ARPA back-off file (ours, KenLM's ``lmplz``, SRILM's) into a model with the
        same scoring interface (:class:`nlpcourse.arpa.ArpaLM`: ``prob``, ``logprob``,
        ``perplexity``, ``log10_probs``)."""
        from nlpcourse.arpa import read_arpa  # loads numba: only when a file is read

        return read_arpa(path)

    def __repr__(self) -> str:
        if not hasattr(self, "vocab_"):
            return f"NGramLM(order={self.order}, smoothing={self.smoothing!r})"
        grams = sum(len(g) for g in self.grams_.values())
        return (
            f"NGramLM(order={self.order}, smoothing={self.smoothing!r}, |V|={len(self.vocab_):,}, "
            f"{grams:,} n-grams of orders 1-{self.order}, {self.nbytes / 1e6:.1f} MB)"
        )


def _check_lambdas(lambdas: Sequence[float], order: int) -> None:
    lambdas = np.asarray(lambdas, dtype=float)
    if lambdas.shape != (order + 1,):
        raise ValueError(
            f"lambdas needs order+1 = {order + 1} weights (uniform, unigram, ..., "
            f"{order}-gram), got {len(lambdas)}"
        )
    if (lambdas < 0).any() or not np.isclose(lambdas.sum(), 1):
        raise ValueError(f"lambdas must be non-negative and sum to 1, got {lambdas.tolist()}")


# the checks of the sentences passed to fit() and perplexity(), shared with the other models
_as_sentences = check_sentences
