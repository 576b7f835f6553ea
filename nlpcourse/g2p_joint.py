"""A joint-sequence ("graphone") n-gram model of grapheme-to-phoneme conversion (chapter 5).

Chapter 5 pronounces a word with an encoder-decoder; this module does it the classic way, with
chapter 1's n-gram language model (Bisani & Ney 2008, "Joint-sequence models for
grapheme-to-phoneme conversion"; the same model as Sequitur G2P and Phonetisaurus). The book's
section is "A joint-sequence n-gram model" at the end of ``book/seq2seq.md``.

**Graphones.** A word and its pronunciation are cut into the same number of pieces, each a chunk
of 1-2 letters paired with a chunk of 0-2 phones: ``phoenix`` / ``F IY1 N IH0 K S`` becomes
``ph:F oe:IY1 n:N i:IH0 x:K_S``. Each pair is a *graphone*, written ``letters:phones`` with the
phones joined by ``_`` (``e:`` is a silent ``e``). The shapes allowed (:data:`SHAPES`) are 1-0,
1-1, 1-2, 2-0 and 2-1 (letters, then phones): no 2-to-2 chunk and no phone without a letter.

**Alignment by EM** (:class:`Aligner`). Which cut is right is not given: it is learned. Each
graphone ``q`` has a probability ``p(q)``; a segmentation ``s = q_1 ... q_K`` of a pair has
probability ``prod_k p(q_k)``, and EM maximises ``sum_pairs log sum_s prod_k p(q_k)``:

    E-step: c(q) = sum_pairs sum_s P(s | pair) * #q in s,
            P(s | pair) = prod_k p(q_k) / sum_s' prod_k p(q'_k)                    (g2p-estep)
    M-step: p(q) = c(q) / sum_q' c(q')                                             (g2p-mstep)

starting from the uniform distribution, for a fixed number of iterations. The sum over
segmentations is a forward-backward pass over the grid of (letters read, phones written)
``alpha[i, j]``, ``beta[i, j]``: a segmentation is a path from ``(0, 0)`` to ``(|x|, |y|)`` whose
steps are the shapes. :func:`expected_counts_loop` is the E-step written as the definition
(enumerate every segmentation, :func:`segmentations`): the readable twin of the compiled
forward-backward :func:`_expected_counts`, and the tests check the two equal. After the last
iteration each pair's most probable segmentation (Viterbi, :func:`_best_paths`; its twin
:func:`best_segmentation_loop`) is its "sentence" of graphone tokens.

**The model** (:class:`JointG2P`). Chapter 1's :class:`nlpcourse.ngram.NGramLM` with
Kneser-Ney smoothing over those sentences, at order ``n`` (6-8):

    P(x, y) = max_s prod_k P_KN(q_k | q_{k-n+1} ... q_{k-1})  * P_KN(</s> | ...)   (g2p-joint)

A pronunciation's score is the log-probability of its best graphone sequence (the Viterbi
approximation of Bisani & Ney's sum over segmentations).

**Decoding** (:meth:`JointG2P.nbest`). Given only the letters, search the graphone sequences
whose letters spell the word: a beam search, synchronous in the letters read. The hypotheses
that have read ``i`` letters are pruned to the ``K`` best of their word, and each is extended by
every graphone whose letters are the next one or two letters of the word (into the hypotheses at
``i + 1`` and ``i + 2``); one that has read the whole word ends with ``</s>``. All the words of a
batch and all their hypotheses are rows of arrays, scored by one call of the n-gram model per
position. The answer is an N-best list: the distinct pronunciations among the ended hypotheses,
each with its best score. :func:`beam_search_loop` is the same search for one word as a plain
loop over hypotheses (the lesson; tested equal).

Deliberate departures, stated plainly: Kneser-Ney here is chapter 1's, with one discount at every
order (Bisani & Ney tune modified Kneser-Ney's discounts by EM on held-out data; we tune the one
discount and the order on the validation words' perplexity, :func:`tune`); the alignment's
probabilities are of single graphones (a unigram model), and the n-gram model is trained once
on the Viterbi alignment rather than re-aligned with itself; a pronunciation is scored by its best
segmentation, not the sum over all of them.
"""

from __future__ import annotations

import itertools
import math
import string
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

from nlpcourse.compiled import njit_cached
from nlpcourse.lm import EOS, NotFittedError
from nlpcourse.ngram import NGramLM

Pron = tuple[str, ...]
Pair = tuple[str, Pron]
Graphone = tuple[str, Pron]  # (letters, phones)

# the shapes of a graphone: (letters, phones); no 2-to-2 and no phone without a letter
SHAPES = ((1, 0), (1, 1), (1, 2), (2, 0), (2, 1))
_SHAPES = np.array(SHAPES, dtype=np.int64)  # the compiled loops' copy, (5, 2)
LETTERS = string.ascii_lowercase
SEPARATOR = ":"  # between a graphone's letters and its phones
JOINER = "_"  # between the phones of a graphone


def graphone_token(letters: str, phones: Sequence[str]) -> str:
    """The token of a graphone: ``("x", ("K", "S"))`` -> ``"x:K_S"``, ``("e", ())`` -> ``"e:"``."""
    return letters + SEPARATOR + JOINER.join(phones)


def token_graphone(token: str) -> Graphone:
    """The graphone of a token, the inverse of :func:`graphone_token`."""
    letters, _, phones = token.partition(SEPARATOR)
    return letters, tuple(phones.split(JOINER)) if phones else ()


def check_word(word: str) -> None:
    """A word is written with the letters a-z alone (the words of chapter 5's split)."""
    if not isinstance(word, str) or not word or any(c not in LETTERS for c in word):
        raise ValueError(f"a word is a non-empty string of the letters a-z, got {word!r}")


# ============================================================ 1. alignment: the readable twins


def segmentations(word: str, pron: Sequence[str]) -> Iterator[list[Graphone]]:
    """Every segmentation of ``(word, pron)`` into graphones of :data:`SHAPES`, in order.

    A word of ``L`` letters with ``P`` phones has none if ``P > 2 L`` (each phone needs a
    letter). Exponential in the length: for reading and for tests on short words."""
    pron = tuple(pron)
    if not word:
        if not pron:
            yield []
        return
    for a, b in SHAPES:
        if a <= len(word) and b <= len(pron):
            for rest in segmentations(word[a:], pron[b:]):
                yield [(word[:a], pron[:b]), *rest]


def expected_counts_loop(
    pairs: Iterable[Pair], p: dict[Graphone, float]
) -> tuple[dict[Graphone, float], float]:
    """The E-step by its definition, eq. (g2p-estep): for each pair, every segmentation weighted
    by its posterior probability. Returns the expected counts of the graphones and the
    log-likelihood ``sum_pairs log sum_s prod_k p(q_k)``. A graphone missing from ``p`` has
    probability 0; a pair with no segmentation of positive probability is skipped."""
    counts: dict[Graphone, float] = defaultdict(float)
    loglik = 0.0
    for word, pron in pairs:
        weighted = []
        for s in segmentations(word, pron):
            weighted.append((s, math.prod(p.get(q, 0.0) for q in s)))
        Z = sum(w for _, w in weighted)  # sum_s prod_k p(q_k)
        if Z == 0:
            continue
        loglik += math.log(Z)
        for s, w in weighted:
            for q in s:
                counts[q] += w / Z  # P(s | pair), once for each occurrence of q in s
    return dict(counts), loglik


def best_segmentation_loop(word: str, pron: Sequence[str], p: dict[Graphone, float]):
    """The most probable segmentation of one pair under ``p`` (the first on a tie, in the order
    of :func:`segmentations`), or ``None`` if it has none of positive probability."""
    best, best_p = None, 0.0
    for s in segmentations(word, pron):
        ps = math.prod(p.get(q, 0.0) for q in s)
        if ps > best_p:
            best, best_p = s, ps
    return best


# ============================================================ 2. alignment: the compiled loops
#
# A pair is coded as integers: letters 1..26, phones 1..P. A chunk of letters has an id
# (``_letter_chunk``), a chunk of phones too (``_phone_chunk``), and a graphone is a cell of the
# table ``prob[letter chunk, phone chunk]``: letter chunks 0..702 (0 unused, 1..26 one letter,
# 27.. two), phone chunks 0 (none), 1..P (one), P+1.. (two). The table holds 0 where the shape is
# not allowed (2-to-2).


@njit_cached
def _letter_chunk(x: np.ndarray, start: int, a: int) -> int:
    """The id of the chunk ``x[start : start + a]`` of letters (1..26 each)."""
    if a == 1:
        return x[start]
    return 27 + (x[start] - 1) * 26 + (x[start + 1] - 1)


@njit_cached
def _phone_chunk(y: np.ndarray, start: int, b: int, P: int) -> int:
    """The id of the chunk ``y[start : start + b]`` of phones (1..P each); 0 for none."""
    if b == 0:
        return 0
    if b == 1:
        return y[start]
    return P + 1 + (y[start] - 1) * P + (y[start + 1] - 1)


@njit_cached
def _forward(x: np.ndarray, y: np.ndarray, prob: np.ndarray, P: int) -> np.ndarray:
    """alpha[i, j]: the summed probability of the segmentations of ``x[:i]``, ``y[:j]``."""
    L, T = len(x), len(y)
    alpha = np.zeros((L + 1, T + 1))
    alpha[0, 0] = 1.0
    for i in range(1, L + 1):
        for j in range(T + 1):
            total = 0.0
            for k in range(len(_SHAPES)):
                a, b = _SHAPES[k, 0], _SHAPES[k, 1]
                if a <= i and b <= j:
                    q = prob[_letter_chunk(x, i - a, a), _phone_chunk(y, j - b, b, P)]
                    total += alpha[i - a, j - b] * q
            alpha[i, j] = total
    return alpha


@njit_cached
def _expected_counts(
    letters: np.ndarray,
    letter_starts: np.ndarray,
    phones: np.ndarray,
    phone_starts: np.ndarray,
    prob: np.ndarray,
    P: int,
    counts: np.ndarray,
) -> float:
    """The E-step, eq. (g2p-estep), by forward-backward: adds every pair's posterior graphone
    counts into ``counts`` (same layout as ``prob``) and returns the log-likelihood. Pair ``k``
    is ``letters[letter_starts[k] : letter_starts[k + 1]]`` with its phones likewise."""
    loglik = 0.0
    for n in range(len(letter_starts) - 1):
        x = letters[letter_starts[n] : letter_starts[n + 1]]
        y = phones[phone_starts[n] : phone_starts[n + 1]]
        L, T = len(x), len(y)
        alpha = _forward(x, y, prob, P)
        Z = alpha[L, T]
        if Z <= 0.0:
            continue  # no segmentation: skipped, as in the readable twin
        loglik += math.log(Z)
        beta = np.zeros((L + 1, T + 1))  # beta[i, j]: the same for x[i:], y[j:]
        beta[L, T] = 1.0
        for i in range(L - 1, -1, -1):
            for j in range(T, -1, -1):
                total = 0.0
                for k in range(len(_SHAPES)):
                    a, b = _SHAPES[k, 0], _SHAPES[k, 1]
                    if i + a <= L and j + b <= T:
                        c, d = _letter_chunk(x, i, a), _phone_chunk(y, j, b, P)
                        edge = prob[c, d] * beta[i + a, j + b]
                        total += edge
                        # the posterior of the step (i, j) -> (i + a, j + b)
                        counts[c, d] += alpha[i, j] * edge / Z
                beta[i, j] = total
    return loglik


@njit_cached
def _best_paths(
    letters: np.ndarray,
    letter_starts: np.ndarray,
    phones: np.ndarray,
    phone_starts: np.ndarray,
    prob: np.ndarray,
    P: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Viterbi: each pair's most probable segmentation, as the shape index of each step in order
    (``steps``, flat) and the number of steps per pair (``n_steps``, 0 for a pair with none)."""
    N = len(letter_starts) - 1
    steps = np.zeros(len(letters), dtype=np.int8)  # a pair has at most as many steps as letters
    n_steps = np.zeros(N, dtype=np.int64)
    out = 0
    for n in range(N):
        x = letters[letter_starts[n] : letter_starts[n + 1]]
        y = phones[phone_starts[n] : phone_starts[n + 1]]
        L, T = len(x), len(y)
        best = np.zeros((L + 1, T + 1))
        back = np.full((L + 1, T + 1), -1, dtype=np.int64)
        best[0, 0] = 1.0
        for i in range(1, L + 1):
            for j in range(T + 1):
                for k in range(len(_SHAPES)):
                    a, b = _SHAPES[k, 0], _SHAPES[k, 1]
                    if a <= i and b <= j:
                        q = prob[_letter_chunk(x, i - a, a), _phone_chunk(y, j - b, b, P)]
                        if best[i - a, j - b] * q > best[i, j]:
                            best[i, j] = best[i - a, j - b] * q
                            back[i, j] = k
        if best[L, T] <= 0.0:
            continue
        path = [0]  # typed for numba: a list of integers
        path.pop()
        i, j = L, T
        while i > 0:
            k = back[i, j]
            path.append(k)
            i, j = i - _SHAPES[k, 0], j - _SHAPES[k, 1]
        n_steps[n] = len(path)
        for t in range(len(path) - 1, -1, -1):  # the path was traced from its end
            steps[out] = path[t]
            out += 1
    return steps, n_steps


class Aligner:
    """EM alignment of letters to phones, eqs. (g2p-estep) and (g2p-mstep).

    ``iterations`` is the fixed number of EM iterations, from the uniform distribution over every
    graphone the shapes allow with the letters a-z and the phones seen. After :meth:`fit`:
    ``phones_`` (the phone symbols, id = position + 1), ``prob_`` (the graphone probabilities,
    the table described above), ``loglik_`` (the log-likelihood per pair before each M-step, one
    per iteration; it never falls) and ``skipped_`` (pairs with no segmentation: more than two
    phones a letter).
    """

    def __init__(self, iterations: int = 10):
        if not isinstance(iterations, int) or iterations < 1:
            raise ValueError(f"iterations must be an integer >= 1, got {iterations!r}")
        self.iterations = iterations

    def _encode(self, pairs: Sequence[Pair]) -> tuple[np.ndarray, ...]:
        """Pairs as the flat integer arrays of the compiled loops. Phones never seen in
        :meth:`fit` are an error."""
        index = {ph: i + 1 for i, ph in enumerate(self.phones_)}
        for word, pron in pairs:
            check_word(word)
            unknown = [ph for ph in pron if ph not in index]
            if unknown:
                raise ValueError(f"the phones {unknown} of {word!r} were not seen in fit()")
        letters = np.fromiter(
            (ord(c) - 96 for word, _ in pairs for c in word), np.int64
        )  # a=1 ... z=26
        phones = np.fromiter((index[ph] for _, pron in pairs for ph in pron), np.int64)
        letter_starts = np.concatenate([[0], np.cumsum([len(w) for w, _ in pairs])])
        phone_starts = np.concatenate([[0], np.cumsum([len(p) for _, p in pairs])])
        return letters, letter_starts.astype(np.int64), phones, phone_starts.astype(np.int64)

    def _table(self) -> np.ndarray:
        """A table of the layout above with 1 at every allowed graphone (0 at 2-to-2)."""
        P = len(self.phones_)
        table = np.ones((27 + 26 * 26, 1 + P + P * P))
        table[27:, P + 1 :] = 0.0  # no two letters with two phones
        table[0] = 0.0  # letter chunk 0 is unused
        return table

    def fit(
        self, pairs: Iterable[Pair], log: Callable[[int, float], None] | None = None
    ) -> Aligner:
        """Run EM on ``pairs`` (word, pronunciation). Returns ``self``. ``log(iteration,
        loglik)``, if given, is called after each iteration with the log-likelihood per pair
        of its E-step (a recorded run's learning curve)."""
        pairs = [(w, tuple(p)) for w, p in pairs]
        if not pairs:
            raise ValueError("fit() got no pairs")
        self.phones_ = sorted({ph for _, pron in pairs for ph in pron})
        coded = self._encode(pairs)
        P = len(self.phones_)
        # the uniform distribution over every allowed graphone of the alphabets
        prob = self._table()
        prob /= prob.sum()
        self.loglik_: list[float] = []
        for _ in range(self.iterations):
            counts = np.zeros_like(prob)
            loglik = _expected_counts(*coded, prob, P, counts)  # (g2p-estep)
            prob = counts / counts.sum()  # (g2p-mstep)
            self.loglik_.append(loglik / len(pairs))
            if log is not None:
                log(len(self.loglik_), self.loglik_[-1])
        self.skipped_ = sum(len(p) > 2 * len(w) for w, p in pairs)
        self.prob_ = prob
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "prob_"):
            raise NotFittedError("this Aligner is not fitted yet: call fit(pairs) first")

    def probabilities(self) -> dict[Graphone, float]:
        """The graphones of positive probability, as a dictionary (the readable twins' form)."""
        self._check_fitted()
        P = len(self.phones_)
        chunks = [""] + list(LETTERS) + [a + b for a in LETTERS for b in LETTERS]
        phone_chunks: list[Pron] = [()] + [(ph,) for ph in self.phones_]
        phone_chunks += [(a, b) for a in self.phones_ for b in self.phones_]
        assert len(phone_chunks) == 1 + P + P * P
        rows, cols = np.nonzero(self.prob_)
        return {
            (chunks[r], phone_chunks[c]): float(self.prob_[r, c])
            for r, c in zip(rows, cols, strict=True)
        }

    def align(self, pairs: Iterable[Pair]) -> list[list[Graphone] | None]:
        """Each pair's most probable segmentation (Viterbi), or ``None`` where it has none."""
        self._check_fitted()
        pairs = [(w, tuple(p)) for w, p in pairs]
        steps, n_steps = _best_paths(*self._encode(pairs), self.prob_, len(self.phones_))
        out: list[list[Graphone] | None] = []
        at = 0
        for (word, pron), n in zip(pairs, n_steps, strict=True):
            if n == 0:
                out.append(None)
                continue
            i = j = 0
            segmentation = []
            for k in steps[at : at + n]:
                a, b = SHAPES[k]
                segmentation.append((word[i : i + a], pron[j : j + b]))
                i, j = i + a, j + b
            out.append(segmentation)
            at += n
        return out


# ================================================================================ 3. the model


def graphone_sentences(aligner: Aligner, pairs: Sequence[Pair]) -> list[list[str]]:
    """The Viterbi alignment of each pair as a sentence of graphone tokens (pairs with no
    segmentation left out): the training text of the n-gram model."""
    aligned = aligner.align(pairs)
    return [[graphone_token(a, b) for a, b in s] for s in aligned if s is not None]


class JointG2P:
    """The joint-sequence model: EM alignment, then Kneser-Ney n-grams over graphone tokens.

    Hyperparameters: ``order`` (n of the n-gram model), ``discount`` (Kneser-Ney's d),
    ``iterations`` (of EM). After :meth:`fit`: ``aligner_`` (:class:`Aligner`), ``lm_`` (the
    :class:`~nlpcourse.ngram.NGramLM` over graphone tokens), ``chunks_`` (letters -> the ids of
    the graphone tokens with those letters, the candidates of decoding) and ``phones_of_`` (the
    phones of each token id).
    """

    def __init__(self, order: int = 7, discount: float = 0.75, iterations: int = 10):
        if not isinstance(order, int) or order < 2:
            raise ValueError(f"order must be an integer >= 2, got {order!r}")
        self.order = order
        self.discount = discount
        self.iterations = iterations

    def fit(self, train: dict[str, list[Pron]]) -> JointG2P:
        """Align every (word, pronunciation) of ``train`` (word -> its pronunciations) by EM and
        train the n-gram model on the graphone sentences. Returns ``self``."""
        pairs = [(w, tuple(p)) for w, prons in train.items() for p in prons]
        aligner = Aligner(self.iterations).fit(pairs)
        return self.fit_aligned(aligner, graphone_sentences(aligner, pairs))

    def fit_aligned(self, aligner: Aligner, sentences: Sequence[Sequence[str]]) -> JointG2P:
        """Train the n-gram model on graphone sentences already made with the fitted ``aligner``
        (:func:`graphone_sentences`): several models can share one alignment. Returns ``self``."""
        self.aligner_ = aligner
        self.lm_ = NGramLM(self.order, "kneser-ney", discount=self.discount).fit(sentences)
        self._index_tokens()
        return self

    def _index_tokens(self) -> None:
        """The tables of decoding: the graphone ids of each chunk of letters (``chunks_``), and
        each token's phones (``phones_of_``; as ids, ``phone_ids_`` (V, 2) and ``n_phones_``)."""
        vocab = self.lm_.vocab_
        self.phone_index_ = {ph: i for i, ph in enumerate(self.aligner_.phones_)}
        by_letters: dict[str, list[int]] = defaultdict(list)
        self.phones_of_: list[Pron] = []
        self.phone_ids_ = np.full((len(vocab), 2), -1, dtype=np.int64)  # (V, 2)
        for i, token in enumerate(vocab):
            letters, phones = token_graphone(token) if SEPARATOR in token else ("", ())
            self.phones_of_.append(phones)
            self.phone_ids_[i, : len(phones)] = [self.phone_index_[ph] for ph in phones]
            if letters:
                by_letters[letters].append(i)
        self.n_phones_ = (self.phone_ids_ >= 0).sum(axis=1)  # (V,)
        self.chunks_ = {c: np.array(ids, dtype=np.int64) for c, ids in by_letters.items()}
        self.eos_id_ = self.lm_.index_[EOS]

    def _check_fitted(self) -> None:
        if not hasattr(self, "lm_"):
            raise NotFittedError("this JointG2P is not fitted yet: call fit(train) first")

    def nbest(
        self, words: Sequence[str], n: int = 1, beam_size: int = 20, batch_size: int = 500
    ) -> list[list[tuple[Pron, float]]]:
        """The ``n`` best pronunciations of each word with their log-probabilities
        ``log P(word, pron)``, best first, by the batched beam search (module docstring),
        ``beam_size`` hypotheses kept per word and letter position, ``batch_size`` words at a
        time."""
        self._check_fitted()
        for w in words:
            check_word(w)
        out: list[list[tuple[Pron, float]]] = []
        for start in range(0, len(words), batch_size):
            batch = words[start : start + batch_size]
            out.extend(self._collect(self._search(batch, beam_size), len(batch), n))
        return out

    def predict(self, words: Sequence[str], beam_size: int = 20) -> list[Pron]:
        """The best pronunciation of each word (an empty one if the search finds none)."""
        return [best[0][0] if best else () for best in self.nbest(words, 1, beam_size)]

    def score(
        self,
        words: Sequence[str],
        prons: Sequence[Sequence[str]],
        beam_size: int = 20,
        batch_size: int = 500,
    ) -> list[float]:
        """``log P(word, pron)`` of each given pair, eq. (g2p-joint): the same beam search with
        only the graphones that write the given phones next, so its best ended hypothesis is
        the pronunciation's best segmentation (exact when the beam holds them all; ``-inf``
        where none is found, e.g. a phone the model never saw). The score of any candidate,
        for rescoring another model's N-best list."""
        self._check_fitted()
        if len(words) != len(prons):
            raise ValueError(f"{len(words)} words for {len(prons)} pronunciations")
        for w in words:
            check_word(w)
        out: list[float] = []
        for start in range(0, len(words), batch_size):
            batch, targets = words[start : start + batch_size], prons[start : start + batch_size]
            best = np.full(len(batch), -np.inf)
            for word, score, _ in self._search(batch, beam_size, targets):
                np.maximum.at(best, word, score)
            out.extend(best.tolist())
        return out

    def _candidates(self, words: Sequence[str]) -> tuple[np.ndarray, ...]:
        """The graphones that may come next: ``chunk[b, i, a - 1]`` is the chunk of word b's
        letters ``i .. i + a - 1`` (or the last id, "none"), whose graphone ids are
        ``flat[starts[c] : starts[c] + sizes[c]]``."""
        names = sorted(self.chunks_)
        chunk_id = {c: i for i, c in enumerate(names)}
        sizes = np.array([len(self.chunks_[c]) for c in names] + [0])  # the last: no chunk
        starts = np.concatenate([[0], np.cumsum(sizes)])
        flat = np.concatenate([self.chunks_[c] for c in names] + [np.zeros(0, np.int64)])
        none, L = len(names), max(len(w) for w in words)
        chunk = np.full((len(words), L + 1, 2), none, dtype=np.int64)
        for b, w in enumerate(words):
            for i in range(len(w)):
                chunk[b, i, 0] = chunk_id.get(w[i], none)
                if i + 2 <= len(w):
                    chunk[b, i, 1] = chunk_id.get(w[i : i + 2], none)
        return chunk, sizes, starts, flat

    def _search(
        self, words: Sequence[str], K: int, targets: Sequence[Sequence[str]] | None = None
    ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The batched beam search; returns the ended hypotheses as arrays (word, log-probability,
        tokens). With ``targets`` (one pronunciation per word) only the graphones that write the
        target's next phones are followed, and only hypotheses that wrote all of it end."""
        if not isinstance(K, int) or K < 1:
            raise ValueError(f"beam_size must be an integer >= 1, got {K!r}")
        lm, m = self.lm_, self.order - 1  # m: the length of a context
        bos = lm.base_ - 1  # <s> as the model's arrays write it
        B, L = len(words), max(len(w) for w in words)
        lengths = np.array([len(w) for w in words])
        chunk, sizes, starts, flat = self._candidates(words)
        if targets is not None:  # the targets as phone ids (B, T + 2), -2 past the end
            T = max([len(t) for t in targets] + [1])
            target = np.full((B, T + 2), -2, dtype=np.int64)
            for b, t in enumerate(targets):
                target[b, : len(t)] = [self.phone_index_.get(ph, -3) for ph in t]
            target_len = np.array([len(t) for t in targets])
        # the hypotheses that have read i letters: word, score, context (H, m), tokens (H, L),
        # phones written (H,)
        pools: list[list[tuple[np.ndarray, ...]]] = [[] for _ in range(L + 3)]
        pools[0].append(
            (np.arange(B), np.zeros(B), np.full((B, m), bos, np.int64),
             np.full((B, L), -1, np.int64), np.zeros(B, np.int64))
        )  # fmt: skip
        ended: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for i in range(L + 1):
            if not pools[i]:
                continue
            word, score, ctx, tokens, j = (np.concatenate(x) for x in zip(*pools[i], strict=True))
            pools[i] = []
            # keep the K best of each word: sorted by word, then by score, best first (a stable
            # sort: on a tie, the hypothesis made first)
            order = np.lexsort((-score, word))
            first = np.searchsorted(word[order], word[order])  # where each word's rows start
            order = order[np.arange(len(order)) - first < K]
            word, score, ctx, tokens, j = (x[order] for x in (word, score, ctx, tokens, j))
            # the hypotheses that have read their whole word end with </s>
            done = lengths[word] == i
            if targets is not None:
                done &= j == target_len[word]
            if done.any():
                eos = np.full(int(done.sum()), self.eos_id_)
                p_end = lm._prob_ids(ctx[done], eos)  # P(</s> | the last n-1 graphones)
                ended.append((word[done], score[done] + np.log(p_end), tokens[done]))
            live = lengths[word] > i
            word, score, ctx, tokens, j = (x[live] for x in (word, score, ctx, tokens, j))
            for a in (1, 2):
                c = chunk[word, i, a - 1]  # (H,) the chunk of the next a letters
                count = sizes[c]
                if count.sum() == 0:
                    continue
                parent = np.repeat(np.arange(len(word)), count)  # (E,) the hypothesis extended
                offset = np.arange(len(parent)) - np.repeat(np.cumsum(count) - count, count)
                g = flat[starts[c[parent]] + offset]  # (E,) the graphone
                if targets is not None:  # only the graphones that write the next phones
                    w, at, k_g = word[parent], j[parent], self.n_phones_[g]
                    ok = at + k_g <= target_len[w]
                    for k in (0, 1):
                        written = target[w, np.minimum(at + k, T + 1)]
                        ok &= (k_g <= k) | (self.phone_ids_[g, k] == written)
                    parent, g = parent[ok], g[ok]
                    if len(g) == 0:
                        continue
                logp = np.log(lm._prob_ids(ctx[parent], g))  # (E,), (g2p-joint)
                new_ctx = np.concatenate([ctx[parent][:, 1:], g[:, None]], axis=1)  # (E, m)
                new_tokens = tokens[parent]  # (E, L)
                new_tokens[np.arange(len(parent)), (new_tokens >= 0).sum(axis=1)] = g
                new_j = j[parent] + self.n_phones_[g]
                pools[i + a].append(
                    (word[parent], score[parent] + logp, new_ctx, new_tokens, new_j)
                )
        return ended

    def _collect(
        self, ended: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], B: int, n: int
    ) -> list[list[tuple[Pron, float]]]:
        """The N-best lists from the ended hypotheses: distinct pronunciations, best score."""
        best: list[dict[Pron, float]] = [{} for _ in range(B)]
        for word, score, tokens in ended:
            for b, s, row in zip(word.tolist(), score.tolist(), tokens.tolist(), strict=True):
                pron = tuple(
                    itertools.chain.from_iterable(self.phones_of_[t] for t in row if t >= 0)
                )
                if s > best[b].get(pron, -math.inf):
                    best[b][pron] = s
        return [sorted(d.items(), key=lambda item: -item[1])[:n] for d in best]


def beam_search_loop(
    model: JointG2P, word: str, n: int = 1, beam_size: int = 20
) -> list[tuple[Pron, float]]:
    """:meth:`JointG2P.nbest` for one word as a plain loop over hypotheses (the same search,
    tested equal): a hypothesis is (log-probability, graphone tokens so far); ``pools[i]`` holds
    those that have read ``i`` letters."""
    model._check_fitted()
    check_word(word)
    lm = model.lm_
    pools: list[list[tuple[float, list[str]]]] = [[] for _ in range(len(word) + 3)]
    pools[0].append((0.0, []))
    ended: dict[Pron, float] = {}
    for i in range(len(word) + 1):
        beam = sorted(pools[i], key=lambda h: -h[0])[:beam_size]  # the K best at i letters
        for score, tokens in beam:
            if i == len(word):  # the whole word read: end with </s>
                p = score + lm.logprob(EOS, tokens)
                pron = tuple(ph for t in tokens for ph in token_graphone(t)[1])
                ended[pron] = max(ended.get(pron, -math.inf), p)
                continue
            for a in (1, 2):
                if i + a > len(word):
                    continue
                for g in model.chunks_.get(word[i : i + a], []):
                    token = lm.vocab_[g]
                    pools[i + a].append((score + lm.logprob(token, tokens), tokens + [token]))
    return sorted(ended.items(), key=lambda item: -item[1])[:n]


# ====================================================== 4. combination with another model's N-best


class Candidates:
    """The union of several models' N-best lists, flat, for log-linear rescoring:

        score(y | x) = lambda log P_rnn(y | x) + (1 - lambda) log P_joint(x, y) + beta |y|
                                                                                 (g2p-rescore)

    ``word[c]`` is the word (its index) of candidate ``c``, ``prons[c]`` its pronunciation; the
    scores of each model are filled in by the caller (:attr:`rnn`, :attr:`joint`), every
    candidate scored by both (the RNN by teacher forcing, the joint model by its constrained
    search), whichever list it came from. ``log P_joint(x, y)`` differs from
    ``log P_joint(y | x)`` by ``log P(x)``, the same for all candidates of a word, so the best
    candidate is the same with either."""

    def __init__(self, lists: Sequence[Sequence[Sequence[Pron]]]):
        """``lists[m][b]``: model m's candidates for word b (any order; duplicates merged)."""
        if len({len(lst) for lst in lists}) != 1:
            raise ValueError("every model's lists must cover the same words")
        self.prons: list[Pron] = []
        word: list[int] = []
        for b, per_model in enumerate(zip(*lists, strict=True)):
            union = dict.fromkeys(tuple(p) for cands in per_model for p in cands)
            if not union:
                raise ValueError(f"word {b} has no candidate in any list")
            self.prons.extend(union)
            word.extend([b] * len(union))
        self.word = np.array(word, dtype=np.int64)  # (C,)
        self.n_words = len(lists[0])
        self.length = np.array([len(p) for p in self.prons], dtype=float)  # (C,) |y|
        self.rnn = np.full(len(word), -np.inf)  # (C,) log P_rnn(y | x)
        self.joint = np.full(len(word), -np.inf)  # (C,) log P_joint(x, y)

    def best(self, lam: float, beta: float) -> np.ndarray:
        """The index of each word's best candidate under eq. (g2p-rescore), (B,). A score of
        ``-inf`` is read as a very low finite one, so that weight 0 ignores it."""
        low = -1e9
        total = (
            lam * np.maximum(self.rnn, low)
            + (1 - lam) * np.maximum(self.joint, low)
            + beta * self.length
        )  # (C,)
        order = np.lexsort((-total, self.word))  # each word's candidates, best first
        first = np.searchsorted(self.word[order], np.arange(self.n_words))
        return order[first]

    def tune(
        self, right: np.ndarray, lambdas: Sequence[float], betas: Sequence[float]
    ) -> tuple[float, float, float]:
        """The ``(lambda, beta)`` of the grid with the fewest wrong words, ``right[c]`` saying
        whether candidate c is right (first on a tie); returns them and that WER."""
        best = (math.inf, 0.0, 0.0)
        for lam in lambdas:
            for beta in betas:
                wer = 1 - right[self.best(lam, beta)].mean()
                if wer < best[0]:
                    best = (wer, lam, beta)
        return best[1], best[2], best[0]
