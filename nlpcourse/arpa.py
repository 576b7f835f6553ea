"""ARPA back-off files: writing the course's n-gram models, and reading and scoring any ARPA file.

Chapter 1, section "ARPA files: the format every toolkit reads" (``book/ngrams.md``). The ARPA
format (from the CMU-Cambridge toolkit; read by KenLM, SRILM, Kaldi and most speech decoders)
stores a *back-off* model: for every listed n-gram ``g = h w`` a log10 probability ``log10 p(g)``
and, for n-grams that are contexts of longer ones, a log10 back-off weight ``log10 b(g)``. The
probability of ``w`` after the history ``h`` is, eq. (ngram-backoff),

    P(w | h) = p(h w)                  if ``h w`` is listed,
               b(h) * P(w | h')        otherwise (``h'`` drops the first word of ``h``),

with ``b(h) = 1`` when ``h`` is not listed, ending at the unigrams, which list every word.

**Interpolated models in back-off form.** Interpolated Kneser-Ney and interpolated absolute
discounting (:class:`nlpcourse.ngram.NGramLM`) give a word ``w`` unseen after a seen context ``h``
the probability ``gamma(h) * P(w | h')`` with ``gamma(h) = d N1+(h .) / sum_v c_KN(h v)``, the
same weight for every unseen ``w``; an unseen context backs off fully. That is exactly the
back-off form: list each seen n-gram with its *interpolated* probability, and give each seen
context the back-off weight ``b(h) = gamma(h)``. No probability changes, only its storage.
Add-k has a back-off form too (the lower orders are uniform, ``b(h) = kV / (c(h) + kV)``). MLE and
Jelinek-Mercer interpolation with fixed weights have none (an unseen context in them does not
back off to a distribution that is itself a listed lower-order model), so :func:`write_arpa`
refuses them with the reason.

**Sentence starts.** The course pads a sentence with ``n-1`` symbols ``<s>``; toolkits start from
a single ``<s>`` and look up ``<s> w1``, ``<s> w1 w2``, ... So an n-gram that starts with ``<s>``
is written once, with one ``<s>``, and holds the course model's probability for that position (the
padded ``<s> <s> w1`` and the toolkit's ``<s> w1`` are the same event: the first word). Its
back-off weight is the product of the ``gamma`` of the padded contexts it stands for. ``<s>``
itself is listed with log10 probability -99 (it is never predicted), as toolkits do.

Reading (:func:`read_arpa`) builds, per order, a hash table of integer keys in which an m-gram
``u1 ... um`` is ``row of its suffix (u2 ... um) among the (m-1)-grams * (|V|+1) + u1`` (a
reversed trie in arrays). :meth:`ArpaLM.log10_prob` applies eq. (ngram-backoff) as it reads, one
n-gram at a time; :meth:`ArpaLM.log10_probs` scores a whole corpus with the same recursion, one
vectorised hash look-up per order for all its positions at once (tested equal to the first).
:meth:`ArpaLM.log10_probs_text` scores text (one sentence per line) the same way, reading the
words from their bytes with a 64-bit hash, as KenLM does, instead of one Python string per word.
"""

from __future__ import annotations

import functools
import io
import operator
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from nlpcourse.lm import BOS, EOS, UNK, check_sentences
from nlpcourse.ngram import NGramLM

LOG10_ZERO = -99.0  # the conventional log10 probability of <s>, which is never predicted
_DIGITS = 9  # significant digits written: ARPA readers hold float32, so nothing is lost


# ------------------------------------------------------------------------------------ writing


def _digits(keys: np.ndarray, base: int, m: int) -> np.ndarray:
    """Integer m-gram keys back to their word ids, shape (K, m), first word first."""
    ids = np.zeros((len(keys), m), dtype=np.int64)
    rest = keys.copy()
    for j in range(m - 1, -1, -1):
        ids[:, j] = rest % base
        rest //= base
    return ids


def _padded(model: NGramLM, ids: np.ndarray) -> np.ndarray:
    """Contexts of width n-1 whose last columns are ``ids[:, :-1]``, padded on the left with <s>."""
    n, bos = model.order, model.base_ - 1
    ctx = np.full((len(ids), n - 1), bos, dtype=np.int64)  # (K, n-1)
    width = ids.shape[1] - 1
    if width:
        ctx[:, n - 1 - width :] = ids[:, :-1]
    return ctx


def _gamma(model: NGramLM, ctx: np.ndarray, m: int) -> np.ndarray:
    """The weight of the back-off term of order m for contexts ``ctx`` (M, n-1): ``gamma(h)``
    for a seen context, 1 for an unseen one (it backs off fully)."""
    key = model._key(ctx, None, m)
    if model.smoothing == "add-k":
        if m < model.order:
            return np.ones(len(ctx))  # uniform backs off to uniform
        total = model.contexts_[m].lookup(key, "total")
        V = len(model.vocab)
        return model.k * V / (total + model.k * V)
    if m < model.order and model.smoothing == "kneser-ney":
        contexts = model.continuation_contexts_[m]
    else:
        contexts = model.contexts_[m]
    total = contexts.lookup(key, "total")
    types = contexts.lookup(key, "types")
    return np.where(total > 0, model.discount * types / np.maximum(total, 1), 1.0)


def _level_prob(model: NGramLM, ctx: np.ndarray, w: np.ndarray, top: int) -> np.ndarray:
    """P(w | last top-1 words of ctx) of the model's order-``top`` distribution."""
    if model.smoothing == "add-k":
        if top < model.order:
            return np.full(len(w), 1 / len(model.vocab))  # add-k's lower orders are uniform
        return model._prob_ids(ctx, w)
    return model._discounted(ctx, w, top=top)


Level = tuple[np.ndarray, np.ndarray, np.ndarray]  # ids (K, m), log10 p (K,), log10 b (K,)


def _unique_rows(ids: np.ndarray) -> np.ndarray:
    return np.unique(ids, axis=0) if len(ids) else ids


def _entries(model: NGramLM) -> list[Level]:
    """Per order m, the listed m-grams as ids (in the model's numbering, ``base_ - 1`` standing
    for <s>) with their log10 probabilities and log10 back-off weights."""
    n, B, bos = model.order, model.base_, model.base_ - 1
    V = len(model.vocab)

    # 1. n-grams without <s>: the ones each order lists
    plain: list[np.ndarray] = [np.arange(V, dtype=np.int64)[:, None]]  # every word is a unigram
    for m in range(2, n + 1):
        if model.smoothing == "kneser-ney" and m < n:
            keys = model.continuation_[m].keys
        else:
            keys = model.counts_[m].keys
        ids = _digits(keys, B, m)
        plain.append(ids[(ids != bos).all(axis=1)])
    if model.smoothing == "add-k" and n > 1:  # every part of a top n-gram, for the look-ups
        top = plain[n - 1]
        for j in range(2, n):
            parts = [top[:, o : o + j] for o in range(n - j + 1)]
            plain[j - 1] = _unique_rows(np.concatenate([plain[j - 1], *parts]))

    # 2. sentence starts: the padded n-grams <s>^a v (a >= 1) become "<s> v", one per length
    padded = _digits(model.counts_[n].keys, B, n) if n > 1 else np.zeros((0, 1), np.int64)
    n_bos = (padded == bos).sum(axis=1)  # (K,)

    levels: list[Level] = []
    for m in range(1, n + 1):
        ids = plain[m - 1]
        ctx = _padded(model, ids)
        logp = np.log10(_level_prob(model, ctx, ids[:, -1], top=m))
        if m > 1:  # "<s> v" with |v| = m-1: the padded model's probability of v's last word
            rows = padded[n_bos == n - m + 1]  # (K, n): <s>^(n-m+1) v
            ids = np.concatenate([ids, rows[:, n - m :]])
            logp = np.concatenate([logp, np.log10(model._prob_ids(rows[:, :-1], rows[:, -1]))])
        else:
            ids = np.concatenate([ids, [[bos]]])
            logp = np.append(logp, LOG10_ZERO)  # <s> is never predicted
        logb = np.zeros(len(ids))
        if m < n:  # b(g): gamma of the next order up; for "<s> v" the padded orders' product
            ctx = np.full((len(ids), n - 1), bos, dtype=np.int64)
            ctx[:, n - 1 - m :] = ids
            starts = ids[:, 0] == bos  # "<s> v" stands for the contexts <s>...<s> v
            b = _gamma(model, ctx, m + 1)
            for k in range(m + 2, n + 1):
                b = np.where(starts, b * _gamma(model, ctx, k), b)
            logb = np.log10(b)
        levels.append((ids, logp, logb))
    return levels


def write_arpa(model: NGramLM, path: str | Path) -> Path:
    """Write ``model`` as an ARPA back-off file (see the module docstring); returns the path.

    Supported: Kneser-Ney, absolute discounting and add-k. MLE and fixed-weight interpolation
    have no back-off form and raise ``ValueError`` saying why.
    """
    model._check_fitted()
    if model.smoothing == "mle":
        raise ValueError(
            "an MLE model gives probability 0 to every n-gram it never saw, and an unseen context "
            "has no distribution at all: ARPA needs a probability for every word after every "
            "history, so an MLE model cannot be written (use add-k or Kneser-Ney)"
        )
    if model.smoothing == "interpolated":
        raise ValueError(
            "fixed-weight (Jelinek-Mercer) interpolation has no exact back-off form: where a "
            "context is unseen the model re-weights the shorter orders, which a back-off file "
            "cannot express without listing every unseen context; use Kneser-Ney or absolute "
            "discounting, which interpolate and back off at once"
        )
    levels = _entries(model)
    names = model.vocab + [BOS]  # id base_-1 is <s>
    bad = [w for w in names if not w or any(c.isspace() for c in w)]
    if bad:
        raise ValueError(f"ARPA words are separated by white space, so {bad[0]!r} cannot be one")
    path = Path(path)
    with path.open("w", encoding="utf-8", newline="\n") as f:
        f.write("\n\\data\\\n")
        for m, (ids, _, _) in enumerate(levels, start=1):
            f.write(f"ngram {m}={len(ids)}\n")
        for m, (ids, logp, logb) in enumerate(levels, start=1):
            f.write(f"\n\\{m}-grams:\n")
            _write_section(f, names, ids, logp, logb if m < len(levels) else None)
        f.write("\n\\end\\\n")
    return path


def _write_section(f, names: list[str], ids: np.ndarray, logp: np.ndarray, logb) -> None:
    """One section, a line per n-gram: log10 p, a tab, the words separated by spaces, and a tab
    and the log10 back-off weight except at the highest order (KenLM insists on the tabs)."""
    columns = [pd.Series(pd.Categorical.from_codes(ids[:, j], names)) for j in range(ids.shape[1])]
    words = columns[0].astype(str).str.cat([c.astype(str) for c in columns[1:]], sep=" ")
    if logb is None:
        rows = zip(logp.tolist(), words.tolist(), strict=True)
        f.writelines(map(f"%.{_DIGITS}g\t%s\n".__mod__, rows))
    else:
        rows = zip(logp.tolist(), words.tolist(), logb.tolist(), strict=True)
        f.writelines(map(f"%.{_DIGITS}g\t%s\t%.{_DIGITS}g\n".__mod__, rows))


# ------------------------------------------------------------------------------------ reading

_EMPTY = np.iinfo(np.int64).min  # a free slot: no n-gram key is this negative
_FIBONACCI = 0x9E3779B97F4A7C15  # 2**64 / golden ratio: multiplicative hashing (Knuth, TAOCP 6.4)


class _Table:
    """A hash table of one order's integer n-gram keys, searched for many keys at once in numpy.

    Open addressing with linear probing (Knuth, TAOCP 6.4): a key's home slot is the top ``bits``
    bits of ``key * _FIBONACCI mod 2**64``; a key that finds its home taken goes to the next slot,
    and so on, and a search walks the same way until it meets the key or a free slot. A key's slot
    is its *row*: the caller keeps each n-gram's numbers in arrays indexed by slot. At most half the
    slots are taken, so a search takes about 1.5 steps on average; the rounds of :meth:`find` take
    one step for all the keys still searching, so the work is a few numpy passes, not a Python
    loop per key.
    """

    def __init__(self, keys: np.ndarray, priority: np.ndarray | None = None):
        bits = max(1, int(2 * len(keys) - 1).bit_length())  # 2**bits >= 2 * len(keys)
        self.shift = np.uint64(64 - bits)
        self.mask = (1 << bits) - 1
        self.keys = np.full(1 << bits, _EMPTY, dtype=np.int64)  # (2**bits,) the key in each slot
        keys = np.asarray(keys, dtype=np.int64)
        if priority is None:
            self.slots = self._insert(keys)  # (K,) where each key went
        else:  # the keys looked up most often first: they get their home slot, one probe
            first = np.argsort(-np.asarray(priority), kind="stable")  # (K,)
            self.slots = np.empty(len(keys), dtype=np.int64)
            self.slots[first] = self._insert(keys[first])

    def _insert(self, keys: np.ndarray) -> np.ndarray:
        """Place ``keys`` (unique, or ``ValueError``), all at once: in each round every key not
        placed yet tries its current slot; of the keys that find it free the first in ``keys``
        wins it, and the others step on to the next slot. So a key that comes first among the
        keys with its home slot is placed there. The slots a key passed were all taken, so a
        search from its home finds it before any free slot."""
        slots = np.full(len(keys), -1, dtype=np.int64)
        claim = np.full(len(self.keys), -1, dtype=np.int64)  # which key claimed a slot
        slot, todo = self.home(keys), np.arange(len(keys))  # (K,), (T,) keys not placed yet
        while len(todo):
            free = todo[self.keys[slot[todo]] == _EMPTY]
            # several keys may claim one slot; the last write wins, so write them last to first
            claim[slot[free[::-1]]] = free[::-1]
            won = free[claim[slot[free]] == free]
            self.keys[slot[won]] = keys[won]
            slots[won] = slot[won]
            todo = todo[slots[todo] < 0]
            if (self.keys[slot[todo]] == keys[todo]).any():  # equal keys travel together
                raise ValueError("a key is inserted twice")
            slot[todo] = (slot[todo] + 1) & self.mask
        return slots

    def __len__(self) -> int:
        return len(self.slots)

    def home(self, keys: np.ndarray) -> np.ndarray:
        """Home slots: the top bits of ``keys * _FIBONACCI``, in 64-bit arithmetic that wraps."""
        product = keys.astype(np.int64, copy=False).view(np.uint64) * np.uint64(_FIBONACCI)
        return (product >> self.shift).view(np.int64)

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The slot of each key, -1 for a key that is not in the table: one gather and compare
        for every key at its home slot, then a round per further step for the keys still
        searching (``np.take`` gathers as ``self.keys[slot]`` would)."""
        slot = self.home(keys)  # (Q,)
        here = np.take(self.keys, slot)
        missed = here != keys
        todo = np.flatnonzero(missed & (here != _EMPTY))  # (R,) the keys still searching
        out = slot  # (Q,) the answer where the key is at home, -1 for now elsewhere
        slot, keys = slot[todo], keys[todo]  # (R,) their slots and keys
        out[missed] = -1
        while len(todo):
            slot = (slot + 1) & self.mask
            here = np.take(self.keys, slot)
            hit = here == keys
            out[todo[hit]] = slot[hit]
            go = ~hit & (here != _EMPTY)
            todo, slot, keys = todo[go], slot[go], keys[go]
        return out

    def find_one(self, key: int) -> int:
        """:meth:`find` for one key, as it reads: walk from the home slot to the key or a gap."""
        slot = ((key * _FIBONACCI) % 2**64) >> int(self.shift)
        while self.keys[slot] != _EMPTY:
            if self.keys[slot] == key:
                return slot
            slot = (slot + 1) & self.mask
        return -1


class _WordIds(dict):
    """Word to id; a word outside the vocabulary reads as ``unk``, a token that is not a string
    raises ``TypeError`` (the dictionary's own look-up does the work, in C, for known words)."""

    def __init__(self, words: list[str], unk: int):
        super().__init__({w: i for i, w in enumerate(words)})
        self.unk = unk

    def __missing__(self, word: object) -> int:
        if type(word) is not str:
            raise TypeError(f"the token {word!r} is not a string")
        return self.unk


_HASH_P = 0x100000001B3  # FNV's 64-bit prime: odd, so invertible modulo 2**64
_HASH_P_INV = pow(_HASH_P, -1, 2**64)


_POWERS: dict[int, np.ndarray] = {}  # base -> its powers computed so far


def _powers(base: int, n: int) -> np.ndarray:
    """``base**0, base**1, ..., base**(n-1)`` modulo 2**64, (n,) uint64 (numpy's integer
    products wrap modulo 2**64); kept, and computed again only for a longer text."""
    known = _POWERS.get(base)
    if known is None or len(known) < n:
        out = np.full(max(n, 2 * len(known) if known is not None else n), base, dtype=np.uint64)
        out[0] = 1
        known = _POWERS[base] = np.cumprod(out, dtype=np.uint64)
    return known[:n]


def word_hash(word: bytes) -> int:
    """The 64-bit hash of a word's bytes that :meth:`ArpaLM.log10_probs_text` uses, written as a
    plain loop: ``h = sum_j b_j P**j mod 2**64`` over its bytes ``b_0 b_1 ...`` (the readable twin
    of :func:`_span_hashes`, tested equal)."""
    return sum(b * pow(_HASH_P, j, 2**64) for j, b in enumerate(word)) % 2**64


def _split_text(text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cut ``text`` (sentences on lines, words separated by one space) into word spans without a
    Python object per word: returns the UTF-8 bytes (N,) with a newline added at both ends, the
    start and end of every word (W,) in them, and each sentence's number of words (S,).

    Every byte that is a space or a newline ends a span; a span between two newlines is an empty
    sentence; any other empty span (two spaces in a row, a space at either end of a line) or a tab
    or carriage return is refused with ``ValueError``."""
    buf = np.frombuffer(b"\n" + text.encode("utf-8") + b"\n", dtype=np.uint8)  # (N,)
    sep = np.flatnonzero(buf <= 32)  # (K,) spaces, newlines and any other control byte
    if ((buf[sep] != 32) & (buf[sep] != 10)).any():
        raise ValueError(
            "the text holds a tab, a carriage return or another control character: separate "
            "words by one space and sentences by a newline"
        )
    starts, ends = sep[:-1] + 1, sep[1:]  # (K-1,) the spans between separators
    is_line = buf[sep] == 10  # (K,)
    empty = starts == ends
    empty_line = empty & is_line[:-1] & is_line[1:]
    if (empty & ~empty_line).any():
        at = int(np.count_nonzero(is_line[: int(np.flatnonzero(empty & ~empty_line)[0]) + 1]))
        raise ValueError(
            f"line {at} of the text has two spaces in a row or a space at its start or end: "
            "separate words by exactly one space"
        )
    sentence = np.cumsum(is_line[:-1]) - 1  # (K-1,) the sentence each span belongs to
    word = ~empty
    lengths = np.bincount(sentence[word], minlength=int(sentence[-1]) + 1)  # (S,)
    return buf, starts[word], ends[word], lengths


def _span_hashes(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """:func:`word_hash` of every span ``buf[s:e]`` at once, as int64 (the same 64 bits): with
    the prefix sums ``A[i] = sum_{k<i} b_k P**k``, a span's sum ``A[e] - A[s]`` is ``P**s`` times
    its hash, so the hash is ``(A[e] - A[s]) * P**-s`` (all modulo 2**64)."""
    n = len(buf)
    A = np.zeros(n + 1, dtype=np.uint64)  # (N+1,)
    np.cumsum(buf.astype(np.uint64) * _powers(_HASH_P, n), dtype=np.uint64, out=A[1:])
    h = (np.take(A, ends) - np.take(A, starts)) * np.take(_powers(_HASH_P_INV, n), starts)  # (W,)
    return h.view(np.int64)


class ArpaLM:
    """A back-off language model read from an ARPA file, scored with arrays.

    The same scoring interface as :class:`~nlpcourse.ngram.NGramLM` (``prob``, ``logprob``,
    ``perplexity``) plus :meth:`log10_probs`, the per-token log10 probabilities toolkits print,
    and :meth:`log10_prob`, eq. (ngram-backoff) for one word as it reads. A sentence starts after
    ``<s>`` and ends with ``</s>``; a word not in the file's vocabulary reads as ``<unk>``
    (probability 0 if the file has no ``<unk>``).

    Attributes: ``order``, ``vocab`` (every unigram, ``<s>`` included), ``index_`` (word to id),
    ``base_ = |V| + 1``, and per order m >= 2 a hash table ``tables_[m]`` (:class:`_Table`) of the
    m-gram keys. An m-gram's *row* is its word id (m = 1) or its slot in that table; ``log10_p_[m]``
    and, below the top order, ``log10_b_[m]`` hold its numbers in that row, plus one last entry
    read by row -1 (an n-gram that is not listed): log10 b = 0 (b = 1), and log10 p = -inf for
    the unigram of a word outside the vocabulary, whose id is -1.
    """

    def __init__(self, order: int, vocab: list[str], levels: list[Level]):
        self.order = order
        self.vocab = vocab
        self.index_ = {w: i for i, w in enumerate(vocab)}
        self._ids = _WordIds(vocab, self.index_.get(UNK, -1))  # for whole corpora
        # Keys are written in base |V|+1: the id -1 of an unknown word is the digit |V| in them,
        # which no listed n-gram has, so an n-gram with an unknown word is never found.
        self.base_ = len(vocab) + 1
        self.tables_: dict[int, _Table] = {}
        self.log10_p_: dict[int, np.ndarray] = {}
        self.log10_b_: dict[int, np.ndarray] = {}
        self._prefixes_listed: dict[
            int, bool
        ] = {}  # does every m-gram's (m-1)-gram prefix have a row
        for m, (ids, logp, logb) in enumerate(levels, start=1):
            if m == 1:
                if not (ids[:, 0] == np.arange(len(ids))).all():
                    raise ValueError("the unigrams must be numbered 0, 1, ... in file order")
                rows, size = ids[:, 0], len(ids)
            else:
                suffix = self._rows(ids[:, 1:])
                if (suffix < 0).any():
                    g = ids[int(np.flatnonzero(suffix < 0)[0])]
                    raise ValueError(
                        f"the ARPA file lists the {m}-gram {' '.join(vocab[u] for u in g)!r} but "
                        f"not its suffix {' '.join(vocab[u] for u in g[1:])!r}; a back-off file "
                        "needs it (KenLM's lmplz and unpruned SRILM models always have it)"
                    )
                try:
                    # the likeliest m-grams first: a proxy for the ones a text holds most
                    self.tables_[m] = _Table(suffix * self.base_ + ids[:, 0], priority=logp)
                except ValueError:
                    raise ValueError(f"the ARPA file lists some {m}-gram twice") from None
                rows, size = self.tables_[m].slots, len(self.tables_[m].keys)
                self._prefixes_listed[m] = bool((self._rows(ids[:, :-1]) >= 0).all())
            self.log10_p_[m] = np.full(size + 1, -np.inf)  # the last entry is row -1
            self.log10_p_[m][rows] = logp
            if m < order:  # the top order's weights are never used
                self.log10_b_[m] = np.zeros(size + 1)  # row -1: b = 1
                self.log10_b_[m][rows] = logb

    # ---------------------------------------------------------------- one n-gram at a time

    def _row(self, ids: Sequence[int]) -> int:
        """The row of the n-gram ``ids`` (first word first), or -1 if it is not listed: start at
        the last word (a unigram's row is its id) and put the words before it in front, one hash
        look-up per word (the key of ``u g`` is ``row(g) * base_ + u``)."""
        row = ids[-1]
        for j in range(2, len(ids) + 1):
            row = self.tables_[j].find_one(row * self.base_ + ids[-j]) if row >= 0 else -1
        return int(row)

    def _rows(self, ids: np.ndarray) -> np.ndarray:
        """:meth:`_row` for many m-grams ``ids`` (K, m) at once: one look-up per order."""
        row = ids[:, -1]  # (K,)
        for j in range(2, ids.shape[1] + 1):
            row = np.where(row >= 0, self.tables_[j].find(row * self.base_ + ids[:, -j]), -1)
        return row

    def _encode(self, word: str) -> int:
        return self.index_.get(word, self.index_.get(UNK, -1))

    def log10_prob(self, word: str, context: Sequence[str] = ()) -> float:
        """log10 P(word | context) by eq. (ngram-backoff) as it reads, one n-gram at a time (the
        readable twin of :meth:`log10_probs`, tested equal): the listed probability of ``h w``
        if there is one, else ``log10 b(h)`` plus the same for the history shortened by its first
        word. The sentence starts with one ``<s>``, as in the toolkits: a context shorter than
        order-1 is that ``<s>`` and the context."""
        h = [self.index_[BOS]] + [self._encode(u) for u in context]
        return self._backoff(h[max(0, len(h) - (self.order - 1)) :], self._encode(word))

    def _backoff(self, h: list[int], w: int) -> float:
        row = self._row(h + [w])
        if row >= 0:  # h w is listed
            return float(self.log10_p_[len(h) + 1][row])
        if not h:  # every word of the vocabulary is a unigram: w is outside it
            return -np.inf
        b = self.log10_b_[len(h)][self._row(h)]  # row -1 (h not listed) reads log10 b = 0
        return float(b) + self._backoff(h[1:], w)

    def prob(self, word: str, context: Sequence[str] = ()) -> float:
        """P(word | context); a context shorter than order-1 starts the sentence."""
        return float(10 ** self.log10_prob(word, context))

    def logprob(self, word: str, context: Sequence[str] = ()) -> float:
        """Natural log of :meth:`prob`."""
        return float(self.log10_prob(word, context) * np.log(10))

    # ---------------------------------------------------------------- a whole corpus at once

    def _log10_stream(self, stream: np.ndarray, offset: np.ndarray) -> np.ndarray:
        """log10 P(stream[p] | the words before p in its sentence) at every position p, by eq.
        (ngram-backoff), every position at once and one order at a time. ``stream`` is the corpus
        as ids, each sentence as ``<s> w1 ... wk </s>``, and ``offset`` each token's position in
        its sentence (:meth:`_assemble`).

        ``row[p]`` is the row of the m-gram ending at p (-1 if it is not listed) and ``logp[p]``
        the log10 probability of the token at p under the file cut at order m. Going up one
        order is eq. (ngram-backoff) itself: the token backs off to order m-1 with the weight of
        its context (the (m-1)-gram ending at p-1), unless the m-gram ending at p is listed, and
        then its probability is read. An m-gram is looked up only where it can be listed: it lies
        within the sentence (``<s>`` at most its first word), its suffix (the (m-1)-gram ending at
        p) is listed, and so is its prefix (ending at p-1) when the file lists every prefix.
        """
        M = len(stream)
        row = stream  # (M,) a unigram's row is its word id (-1: unknown, the sentinel row)
        logp = np.take(self.log10_p_[1], row)  # (M,) order 1
        for m in range(2, self.order + 1):
            ctx = row  # (M,) rows of the (m-1)-grams ending at each position
            possible = (ctx[1:] >= 0) & (offset[1:] >= m - 1)  # (M-1,) for positions 1, 2, ...
            if self._prefixes_listed[m]:
                possible &= ctx[:-1] >= 0
            live = np.flatnonzero(possible) + 1  # (L,)
            keys = np.take(ctx, live) * self.base_ + np.take(stream, live - m + 1)  # (L,)
            row = np.full(M, -1, dtype=np.int64)  # (M,) rows of the m-grams
            row[live] = self.tables_[m].find(keys)
            logp[1:] += np.take(self.log10_b_[m - 1], ctx[:-1])  # back off (row -1: b = 1) ...
            listed = np.flatnonzero(row >= 0)
            logp[listed] = np.take(self.log10_p_[m], np.take(row, listed))  # ... unless listed
        return logp[offset > 0]  # the predicted tokens: all but the <s>

    def _stream(self, sentences: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
        """The corpus as one id stream, each sentence as ``<s> w1 ... wk </s>``. The words are
        looked up as ``[index_.get(w, unk) for w in sentence]`` would, but over the whole corpus
        in one pass that runs in C (``map`` of the dictionary's look-up into ``np.fromiter``).
        Raises ``TypeError`` if a token is not a string, and ``ValueError`` on ``<s>``/``</s>``."""
        flat: list[str] = functools.reduce(operator.iadd, sentences, [])  # (W,) all the words
        words = np.fromiter(map(self._ids.__getitem__, flat), np.int64, len(flat))
        lengths = np.fromiter(map(len, sentences), np.int64, len(sentences))  # (S,)
        return self._assemble(words, lengths)

    def _assemble(self, words: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The stream ``<s> w1 ... wk </s>`` of every sentence (M,), from the word ids (W,) of all
        the sentences and each sentence's number of words (S,), and the position of each token
        in its sentence (M,), 0 at its ``<s>``. ``ValueError`` on ``<s>``/``</s>``."""
        bos, eos = self.index_[BOS], self.index_[EOS]
        if ((words == bos) | (words == eos)).any():
            raise ValueError("a sentence holds <s> or </s>")
        ends = np.cumsum(lengths + 2)  # (S,) one past each sentence's </s>
        stream = np.empty(len(words) + 2 * len(lengths), dtype=np.int64)  # (M,)
        inside = np.ones(len(stream), dtype=bool)
        inside[ends - lengths - 2] = inside[ends - 1] = False
        stream[ends - lengths - 2], stream[ends - 1] = bos, eos
        stream[inside] = words
        offset = np.arange(len(stream)) - np.repeat(ends - lengths - 2, lengths + 2)  # (M,)
        return stream, offset

    def log10_probs(self, sentences: Iterable[Sequence[str]]) -> np.ndarray:
        """log10 P of every predicted token (each word and each sentence's ``</s>``), in order."""
        if type(sentences) is not list or not set(map(type, sentences)) <= {list}:
            sentences = check_sentences(sentences, "log10_probs")  # lists, or a clear error
        try:
            stream, offset = self._stream(sentences)
        except (TypeError, ValueError):  # check_sentences names the sentence and the token
            check_sentences(sentences, "log10_probs")
            raise
        return self._log10_stream(stream, offset)

    @functools.cached_property
    def _hash_ids(self) -> tuple[_Table, np.ndarray]:
        """The vocabulary's word hashes in a :class:`_Table`, and the word id of each slot (the
        last entry, read by slot -1, is the id of ``<unk>``)."""
        buf, starts, ends, _ = _split_text("\n".join(self.vocab))
        if len(starts) != len(self.vocab):
            raise ValueError("a vocabulary word holds a space or is empty: it has no text form")
        try:
            table = _Table(_span_hashes(buf, starts, ends), priority=self.log10_p_[1][:-1])
        except ValueError:
            raise ValueError("two vocabulary words share a 64-bit hash") from None
        ids = np.full(len(table.keys) + 1, self.index_.get(UNK, -1), dtype=np.int64)
        ids[table.slots] = np.arange(len(self.vocab))
        return table, ids

    def log10_probs_text(self, text: str) -> np.ndarray:
        """:meth:`log10_probs` of ``text``: one sentence per line (a last newline is optional;
        an empty line is an empty sentence), words separated by exactly one space.

        The same numbers as ``log10_probs([line.split(" ") for line in lines])``, computed as
        KenLM does, from the words' bytes rather than one Python string per word: the text is
        cut into words by :func:`_split_text`, each word is hashed at once by
        :func:`_span_hashes`, and the hashes are looked up in a table of the vocabulary's hashes.
        As in KenLM's vocabulary, a word outside the vocabulary whose 64-bit hash equals a
        vocabulary word's would be read as that word: a chance of about |V| / 2**64 per word.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, one sentence per line, got {type(text).__name__}")
        buf, starts, ends, lengths = _split_text(text[:-1] if text.endswith("\n") else text)
        table, ids = self._hash_ids
        words = np.take(ids, table.find(_span_hashes(buf, starts, ends)))  # (W,) slot -1: <unk>
        return self._log10_stream(*self._assemble(words, lengths))

    def perplexity(self, sentences: Iterable[Sequence[str]]) -> float:
        """Perplexity with every word and each ``</s>`` counted, eq. (ngram-ppl)."""
        logs = self.log10_probs(sentences)
        return float(10 ** (-logs.mean()))

    def __repr__(self) -> str:
        sizes = ", ".join(f"{m}-grams: {len(t)}" for m, t in self.tables_.items())
        return f"ArpaLM(order={self.order}, 1-grams: {len(self.vocab)}, {sizes})"


_HEADER = re.compile(r"ngram\s+(\d+)\s*=\s*(\d+)")
_SECTION = re.compile(r"^\\(\d+)-grams:\s*$", re.MULTILINE)


def _read_section(text: str, m: int, where: str) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """The lines of one m-grams section: word columns, log10 p and log10 b (0 where absent)."""
    try:
        table = pd.read_csv(
            io.StringIO(text),
            sep=r"\s+",
            header=None,
            names=list(range(m + 2)),
            dtype={j: str for j in range(1, m + 1)},
            keep_default_na=False,
            na_values={0: [], m + 1: [""]},
            engine="c",
        )
        logp = table[0].to_numpy(dtype=float)
        logb = table[m + 1].fillna(0.0).to_numpy(dtype=float)
    except (ValueError, pd.errors.ParserError) as err:
        raise ValueError(
            f"{where}: the {m}-grams section is not lines of a log10 probability, {m} word(s) and "
            f"an optional back-off weight ({err})"
        ) from None
    words = [table[j].to_numpy(dtype=object) for j in range(1, m + 1)]
    if any((w == "").any() for w in words):
        raise ValueError(f"{where}: a line of the {m}-grams section has fewer than {m} words")
    return words, logp, logb


def read_arpa(path: str | Path) -> ArpaLM:
    """Read an ARPA back-off file (KenLM's ``lmplz``, SRILM's ``ngram-count``, :func:`write_arpa`).

    Raises ``ValueError`` saying what is wrong when the file is not ARPA or its counts disagree.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    begin, end = text.find("\\data\\"), text.find("\\end\\")
    if begin < 0 or end < 0:
        raise ValueError(f"{path} is not an ARPA file: it needs a \\data\\ and an \\end\\ line")
    sections = list(_SECTION.finditer(text, begin, end))
    counts = {
        int(a): int(b)
        for a, b in _HEADER.findall(text, begin, sections[0].start() if sections else end)
    }
    if not sections or not counts:
        raise ValueError(f"{path} is not an ARPA file: no ngram counts or no n-gram sections")
    if [int(s.group(1)) for s in sections] != list(range(1, len(sections) + 1)):
        raise ValueError(f"{path}: the n-gram sections are not 1, 2, ... in order")
    levels = []
    vocab: pd.Index | None = None
    for k, section in enumerate(sections):
        m = k + 1
        stop = sections[k + 1].start() if k + 1 < len(sections) else end
        words, logp, logb = _read_section(text[section.end() : stop], m, str(path))
        if counts.get(m) != len(logp):
            raise ValueError(
                f"{path}: the header says ngram {m}={counts.get(m)}, the file lists {len(logp)}"
            )
        if vocab is None:
            vocab = pd.Index(words[0])
            if not vocab.is_unique:
                raise ValueError(f"{path}: a word is listed twice among the unigrams")
        ids = np.stack([vocab.get_indexer(w) for w in words], axis=1)  # (K, m)
        if (ids < 0).any():
            row, col = np.argwhere(ids < 0)[0]
            raise ValueError(f"{path}: the {m}-gram word {words[col][row]!r} is not a unigram")
        levels.append((ids.astype(np.int64), logp, logb))
    assert vocab is not None
    for symbol in (BOS, EOS):
        if symbol not in vocab:
            raise ValueError(f"{path}: the unigrams must include {symbol}")
    return ArpaLM(len(levels), list(vocab), levels)
