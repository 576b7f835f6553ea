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
back off to a distribution that is itself a listed lower-order model). The model computes its
back-off form (:meth:`nlpcourse.ngram.NGramLM.backoff_levels`); this module writes it
(:func:`write_arpa`), and reads any ARPA file (:func:`read_arpa`). It does not import the model.

**Sentence starts.** The course pads a sentence with ``n-1`` symbols ``<s>``; toolkits start from
a single ``<s>`` and look up ``<s> w1``, ``<s> w1 w2``, ... So an n-gram that starts with ``<s>``
is written once, with one ``<s>``, and holds the course model's probability for that position (the
padded ``<s> <s> w1`` and the toolkit's ``<s> w1`` are the same event: the first word). Its
back-off weight is the product of the ``gamma`` of the padded contexts it stands for. ``<s>``
itself is listed with log10 probability -99 (it is never predicted), as toolkits do.

**Reading** (:func:`read_arpa`) works on the file's bytes, as KenLM does: the fields of each
section are cut with numpy, every word is read by a 64-bit hash of its bytes (:func:`word_hash`)
looked up among the vocabulary's, and the numbers are parsed in one cast. Each order is then a hash
table of integer keys in which an m-gram ``u1 ... um`` is ``row of its suffix (u2 ... um) among
the (m-1)-grams * (|V|+1) + u1`` (a reversed trie in arrays: any order fits 64 bits on any
vocabulary), with KenLM's layout and load (:class:`_Table`: linear probing, 1.5 slots per n-gram,
each slot a key and its log10 numbers in single precision). :meth:`ArpaLM.log10_prob` applies eq.
(ngram-backoff) as it reads, one n-gram at a time; :meth:`ArpaLM.log10_probs` scores a whole
corpus with the same recursion, one pass over all its positions per order in a loop compiled by
numba (tested equal to the first). :meth:`ArpaLM.log10_probs_text` scores text (one sentence per
line) the same way, hashing the words from their bytes instead of one Python string per word.
"""

from __future__ import annotations

import ctypes
import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from nlpcourse import arpa_fast
from nlpcourse.arpa_fast import EMPTY, EMPTY_REMAPPED, FIBONACCI, MASKS, MURMUR_M, MURMUR_R, VALUE
from nlpcourse.lm import BOS, EOS, UNK, check_sentences

_DIGITS = 9  # significant digits written
Level = tuple[np.ndarray, np.ndarray, np.ndarray]  # ids (K, m), log10 p (K,), log10 b (K,)


# ------------------------------------------------------------------------------------ writing


class BackoffModel(Protocol):
    """What :func:`write_arpa` needs of a model: its back-off form (as
    :meth:`nlpcourse.ngram.NGramLM.backoff_levels`): the name of each word id and, per order, the
    listed n-grams as ids with their log10 probabilities and back-off weights."""

    def backoff_levels(self) -> tuple[list[str], list[Level]]: ...


def write_arpa(model: BackoffModel, path: str | Path) -> Path:
    """Write ``model`` as an ARPA back-off file (see the module docstring); returns the path.

    NGramLM supports Kneser-Ney, absolute discounting and add-k. MLE and fixed-weight
    interpolation have no back-off form and raise ``ValueError`` saying why.
    """
    names, levels = model.backoff_levels()
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


# ----------------------------------------------------------------------------- the hash table

ROOM = 1.5  # home slots per key: KenLM's probing tables use 1.5 by default
PROBE = 8  # free slots at the end of a table: a search never runs off it


class _Table:
    """A hash table of integer keys, each slot holding a key and the values kept with it, searched
    for many keys at once in a compiled loop.

    Open addressing with linear probing (Knuth, TAOCP 6.4), as KenLM's probing tables: a key's
    home slot is ``key * FIBONACCI mod 2**64`` scaled to ``homes`` (its top 32 bits times
    ``homes``, over 2**32); a key that finds its home taken goes to the next slot, and so on, and a
    search walks the same way until it meets the key or a free slot. Instead of wrapping from the
    last slot to the first, the walk runs on into a spare tail, which always ends in
    :data:`PROBE` free slots (so the last slot is free). With ``room`` homes per key (1.5: two
    thirds taken), a search that finds its key takes about two steps on average and one that does
    not about five (Knuth); the keys placed first (the likeliest) sit at home.

    ``entries`` (slots,) is a structured array: the field ``key`` holds each slot's key
    (:data:`EMPTY` where free) and the fields ``fields`` the values the caller keeps with it (zero
    until it fills them), side by side, as KenLM's entries: a search that finds a key has its
    values in the same cache line. :meth:`__init__` leaves where each key went in ``slots``.
    """

    def __init__(
        self,
        keys: np.ndarray,
        priority: np.ndarray | None = None,
        room: float = ROOM,
        fields: Sequence[tuple[str, type]] = (),
    ):
        self.homes = int(room * len(keys)) + 1
        if self.homes >= 2**32:
            raise ValueError(f"a table of {len(keys):,} n-grams is too large for one order")
        keys = np.asarray(keys, dtype=np.int64)
        table = np.full(self.homes + 2 * PROBE, EMPTY, dtype=np.int64)  # the key in each slot
        if priority is None:
            table, self.slots = self._insert(table, keys)  # (K,) where each key went
        else:  # the keys looked up most often first: they get their home slot, one probe
            first = np.argsort(-np.asarray(priority), kind="stable")  # (K,)
            table, placed = self._insert(table, keys[first])
            self.slots = np.empty(len(keys), dtype=np.int64)
            self.slots[first] = placed
        self.entries = np.zeros(len(table), dtype=self.slot_type(fields))
        self.entries["key"] = table
        self.count = len(keys)

    def _insert(self, table: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Place ``keys`` (unique, or ``ValueError``) in the free slots of ``table``, all at once:
        in each round every key not placed yet tries its current slot; of the keys that find it
        free the first in ``keys`` wins it, and the others step on to the next slot. So a key that
        comes first among the keys with its home slot is placed there. The slots a key passed were
        all taken, so a search from its home finds it before any free slot. Returns the table
        (grown or cut to end in :data:`PROBE` free slots) and where each key went."""
        slots = np.full(len(keys), -1, dtype=np.int64)
        slot, todo = self.home(keys), np.arange(len(keys))  # (K,), (T,) keys not placed yet
        while len(todo):
            if slot[todo].max(initial=0) + PROBE >= len(table):  # keep PROBE free at the end
                table = np.append(table, np.full(len(table) // 8, EMPTY))
            free = todo[table[slot[todo]] == EMPTY]
            # several keys may claim one slot; the first in ``keys`` wins (np.unique keeps it)
            _, winner = np.unique(slot[free], return_index=True)
            won = free[winner]
            table[slot[won]] = keys[won]
            slots[won] = slot[won]
            todo = todo[slots[todo] < 0]
            if (table[slot[todo]] == keys[todo]).any():  # equal keys travel together
                raise ValueError("a key is inserted twice")
            slot[todo] += 1
        tail = np.flatnonzero(table != EMPTY).max(initial=0) + 1 + PROBE
        return table[: max(tail, self.homes + PROBE)], slots

    @staticmethod
    def slot_type(fields: Sequence[tuple[str, type]]) -> np.dtype:
        """What a slot holds: a key and the fields ``fields``."""
        return np.dtype([("key", np.int64), *fields])

    @property
    def keys(self) -> np.ndarray:
        """The key in each slot (a view of ``entries``)."""
        return self.entries["key"]

    def __len__(self) -> int:
        return self.count

    def home(self, keys: np.ndarray) -> np.ndarray:
        """Home slots: the top 32 bits of ``keys * FIBONACCI`` (64-bit arithmetic that wraps)
        times ``homes``, over 2**32."""
        product = keys.astype(np.int64, copy=False).view(np.uint64) * np.uint64(FIBONACCI)
        return ((product >> np.uint64(32)) * np.uint64(self.homes) >> np.uint64(32)).view(np.int64)

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The slot of each of ``keys`` (Q,), -1 for a key that is not in the table: the walk of
        :meth:`find_one` for every key, in a compiled loop
        (:func:`nlpcourse.arpa_fast.find_all`)."""
        return arpa_fast.find_all(self.entries, self.homes, np.asarray(keys, dtype=np.int64))

    def find_one(self, key: int) -> int:
        """:meth:`find` for one key, as it reads: walk from the home slot to the key or a gap."""
        slot = (((key * FIBONACCI) % 2**64) >> 32) * self.homes >> 32
        while self.keys[slot] != EMPTY:
            if self.keys[slot] == key:
                return slot
            slot += 1
        return -1


# ---------------------------------------------------------------------- words from their bytes

_U64 = 2**64


def word_hash(word: bytes) -> int:
    """The 64-bit hash by which the reader and :meth:`ArpaLM.log10_probs_text` know a word, as a
    plain loop over its bytes: MurmurHash64A with seed 0, the hash KenLM gives its vocabulary
    (Austin Appleby's, public domain), as an unsigned number; a word whose hash would be the
    empty slot's 64 bits (:data:`~nlpcourse.arpa_fast.EMPTY`) gets
    :data:`~nlpcourse.arpa_fast.EMPTY_REMAPPED` instead. (The readable twin of
    :func:`nlpcourse.arpa_fast.span_hashes`, tested equal.)

    The length comes first, then each whole piece of 8 bytes (read as a little-endian number),
    mixed before it joins, then the last 1-7 bytes, and a final mix spreads every bit over all
    64, so no relation between two words' bytes (a sum, a shift, a padding with zero bytes) makes
    their hashes equal.

    **What is left to chance.** A word is known by its hash alone, as in KenLM: a word outside a
    vocabulary of |V| words whose hash equals a vocabulary word's reads as that word. For a hash
    whose values spread evenly, that is a chance of about |V| / 2**64 per word read: about
    7.7e-16 for the chapter's 14,115 words, so about one wrong word in 1.3e15 unknown words read,
    a million words a second for 40 years. (Two vocabulary words that share a hash are refused
    when the file is read.) Confirming every hit against the vocabulary word's bytes, measured
    (commit after 248048c, ad hoc, best of 41 CPU times, three rounds, a loaded machine): reading
    the Brown test split's text went from 4.2-4.6 ms to 6.3-7.1 ms, scoring it from 14.6-15.4 ms
    to 17.2-17.8 ms (+15%), so it is not done."""

    def mix(k: int) -> int:  # multiply, fold the high bits down, multiply
        k = k * MURMUR_M % _U64
        return (k ^ (k >> MURMUR_R)) * MURMUR_M % _U64

    n = len(word)
    h = n * MURMUR_M % _U64
    whole = n - n % 8
    for at in range(0, whole, 8):
        h = (h ^ mix(int.from_bytes(word[at : at + 8], "little"))) * MURMUR_M % _U64
    if n % 8:
        h = (h ^ int.from_bytes(word[whole:], "little")) * MURMUR_M % _U64
    h ^= h >> MURMUR_R
    h = h * MURMUR_M % _U64
    h ^= h >> MURMUR_R
    return h if h != EMPTY % _U64 else EMPTY_REMAPPED % _U64


def _word_spans(words: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The UTF-8 bytes of ``words``, one after another, with 8 zero bytes after them (which
    :func:`_pieces` needs), and the start and end (W,) of every word in them."""
    encoded = [w.encode("utf-8") for w in words]
    lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))  # (W,)
    ends = np.cumsum(lengths)
    buf = np.frombuffer(b"".join(encoded) + bytes(8), dtype=np.uint8)
    return buf, ends - lengths, ends


def _pieces(buf: np.ndarray) -> np.ndarray:
    """The 8 bytes from byte i on of ``buf`` at i, as little-endian numbers (a view, not a copy):
    how the compiled readers read a word 8 bytes at a time. ``buf`` ends in 8 zero bytes that
    belong to no word, so a word's last piece never reads past ``buf``."""
    return np.ndarray((len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))


def _span_hashes(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """:func:`word_hash` of every span ``buf[s:e]`` at once, as int64 (the same 64 bits), in a
    compiled loop (:func:`nlpcourse.arpa_fast.span_hashes`)."""
    return arpa_fast.span_hashes(_pieces(buf), starts, ends)


class _Vocabulary:
    """The vocabulary's word hashes in a :class:`_Table` (half its slots free: the words of a text
    are looked up all at once, many of them absent), each with its word id; a free slot holds the
    id ``missing``, which a word outside the vocabulary reads (its search ends at slot -1, the
    last, which is free)."""

    def __init__(self, words: list[str], priority: np.ndarray | None, missing: int):
        buf, starts, ends = _word_spans(words)
        if (starts == ends).any() or (buf[:-8] <= 32).any():
            raise ValueError(
                "a vocabulary word is empty or holds a space or a control character: it has no "
                "text form"
            )
        try:
            hashes = _span_hashes(buf, starts, ends)
            self.table = _Table(hashes, priority=priority, room=2, fields=[("id", np.int64)])
        except ValueError:
            raise ValueError("two vocabulary words share a 64-bit hash") from None
        self.read_missing_as(missing)
        self.table.entries["id"][self.table.slots] = np.arange(len(words))
        del self.table.slots

    def read_missing_as(self, missing: int) -> None:
        """Give a word outside the vocabulary the id ``missing``."""
        entries = self.table.entries
        entries["id"][entries["key"] == EMPTY] = missing

    def __call__(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """The id of each word span ``buf[s:e]`` (``missing`` for a word outside; ``buf`` ends in
        8 bytes that belong to no span)."""
        return arpa_fast.lookup_spans(_pieces(buf), starts, ends, *self.arguments)

    @property
    def arguments(self) -> tuple[np.ndarray, int]:
        """What :func:`nlpcourse.arpa_fast.lookup_spans` needs to know the vocabulary: the table's
        slots and its number of home slots."""
        return self.table.entries, self.table.homes


class _WordIds(dict):
    """Word to id; a word outside the vocabulary reads as ``unk``, a token that is not a string
    raises ``TypeError`` (the dictionary's own look-up does the work, in C, for known words)."""

    def __init__(self, words: list[str], unk: int):
        super().__init__({w: i for i, w in enumerate(words)})
        self.unk = unk

    def __missing__(self, word: object) -> int:
        if not isinstance(word, str):
            raise TypeError(f"the token {word!r} is not a string")
        return self.unk


# ---------------------------------------------------------------------------------- the model

NUMBERS = [("log10_p", VALUE), ("log10_b", VALUE)]  # an n-gram's numbers, kept beside its key
TOP_NUMBERS = [("log10_p", VALUE)]  # the top order's: its n-grams are no one's context


class ArpaLM:
    """A back-off language model read from an ARPA file, scored with arrays.

    The same scoring interface as :class:`~nlpcourse.ngram.NGramLM` (``prob``, ``logprob``,
    ``perplexity``) plus :meth:`log10_probs`, the per-token log10 probabilities toolkits print,
    and :meth:`log10_prob`, eq. (ngram-backoff) for one word as it reads. A sentence starts after
    ``<s>`` and ends with ``</s>``; a word not in the file's vocabulary reads as ``<unk>``
    (probability 0 if the file has no ``<unk>``).

    Attributes: ``order``, ``vocab`` (every unigram, ``<s>`` included), ``index_`` (word to id),
    ``base_ = |V| + 1``, ``unigrams_`` and per order m >= 2 a hash table ``tables_[m]``
    (:class:`_Table`) of the m-gram keys. An m-gram's *row* is its word id (m = 1) or its slot in
    that table, and its numbers are kept in that row, beside its key, in single precision, as
    KenLM holds them: ``unigrams_[row]`` or ``tables_[m].entries[row]``, fields ``log10_p`` and
    ``log10_b`` (:data:`NUMBERS`: a slot of 16 bytes), except at the top order, whose n-grams
    are no one's context and have no weight (:data:`TOP_NUMBERS`: 12 bytes). ``log10_p_[m]``
    and, below the top order, ``log10_b_[m]`` are views of them. Row -1 (an n-gram that is not
    listed) reads a row that lists nothing: log10 b = 0 (b = 1), and log10 p = -inf (for the
    unigram of a word outside the vocabulary, whose id is -1). ``nbytes`` is the memory of these
    arrays.
    """

    def __init__(
        self,
        order: int,
        vocab: list[str],
        levels: Iterable[Level],
        words: _Vocabulary | None = None,
    ):
        """``levels``: per order m = 1..order, the listed m-grams as ids into ``vocab`` (K, m),
        with log10 p (K,) and log10 b (K,); the unigrams are ``vocab`` in order. It may be an
        iterator, read one order at a time (:func:`read_arpa` parses each section as it goes,
        with the vocabulary's hashes ``words``, which are made here if not given)."""
        self.order = order
        self.vocab = vocab
        self.index_ = _WordIds(vocab, vocab.index(UNK) if UNK in vocab else -1)
        # Keys are written in base |V|+1: the id -1 of an unknown word is the digit |V| in them,
        # which no listed n-gram has, so an n-gram with an unknown word is never found.
        self.base_ = len(vocab) + 1
        self.tables_: dict[int, _Table] = {}
        self.log10_p_: dict[int, np.ndarray] = {}
        self.log10_b_: dict[int, np.ndarray] = {}
        for m, (ids, logp, logb) in enumerate(levels, start=1):
            if m == 1:
                if not (ids[:, 0] == np.arange(len(vocab))).all():
                    raise ValueError("the unigrams must be numbered 0, 1, ... in file order")
                self.words_ = words or _Vocabulary(vocab, logp, -1)
                rows, numbers = ids[:, 0], np.zeros(len(vocab) + 1, dtype=NUMBERS)
                self.unigrams_ = numbers  # (|V| + 1,) the last row: a word outside
            else:
                suffix = self._rows(ids[:, 1:])
                if (suffix < 0).any():
                    g = ids[int(np.flatnonzero(suffix < 0)[0])]
                    raise ValueError(
                        f"the ARPA file lists the {m}-gram {' '.join(vocab[u] for u in g)!r} but "
                        f"not its suffix {' '.join(vocab[u] for u in g[1:])!r}; a back-off file "
                        "needs it (KenLM's lmplz and unpruned SRILM models always have it)"
                    )
                keys = suffix * self.base_ + ids[:, 0]
                fields = NUMBERS if m < order else TOP_NUMBERS
                try:  # the likeliest m-grams first: a proxy for the ones a text holds most
                    table = _Table(keys, priority=logp, fields=fields)
                except ValueError:
                    raise ValueError(f"the ARPA file lists some {m}-gram twice") from None
                rows, numbers = table.slots, table.entries  # (the last slot is always free)
                del table.slots  # only needed here
                self.tables_[m] = table
            numbers["log10_p"] = -np.inf  # rows that list nothing (b = 1: the zeros)
            numbers["log10_p"][rows] = logp
            self.log10_p_[m] = numbers["log10_p"]
            if m < order:  # (the top order's weights are never used)
                numbers["log10_b"][rows] = logb
                self.log10_b_[m] = numbers["log10_b"]
        if len(self.log10_p_) != order:
            raise ValueError(f"an order-{order} model needs {order} levels")
        # a word outside the vocabulary reads as <unk> (only now: while the file's n-grams were
        # read, such a word was an error)
        self.words_.read_missing_as(self.index_.unk)

    @property
    def nbytes(self) -> int:
        """Bytes held by the model's arrays: the hash tables with their numbers, the unigrams'
        numbers and the word hashes."""
        arrays = [t.entries for t in self.tables_.values()] + [self.unigrams_]
        return sum(a.nbytes for a in arrays) + self.words_.table.entries.nbytes

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
        return self.index_[word]

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

    def _log10_stream(self, stream: np.ndarray) -> np.ndarray:
        """log10 P(stream[p] | the words before p in its sentence) at every position p but the
        ``<s>``, by eq. (ngram-backoff). ``stream`` is the corpus as ids, each sentence as
        ``<s> w1 ... wk </s>`` (:meth:`_assemble`). The work is
        :func:`nlpcourse.arpa_fast.backoff_stream`, compiled loops over the tokens; here its
        arguments are gathered: per order m below the top, indexed by m (no slots for m = 0 and
        1), the tables' slots, then the top order's, and every order's homes."""
        orders = range(self.order + 1)
        none = np.empty(0, dtype=_Table.slot_type(NUMBERS))  # no slots
        tables = tuple(self.tables_[m].entries if 2 <= m < self.order else none for m in orders)
        if self.order > 1:
            top = self.tables_[self.order].entries
        else:  # a model of unigrams: no top table
            top = np.empty(0, dtype=_Table.slot_type(TOP_NUMBERS))
        homes = np.array([self.tables_[m].homes if m >= 2 else 0 for m in orders], dtype=np.int64)
        bos = self.index_[BOS]
        return arpa_fast.backoff_stream(stream, bos, self.base_, self.unigrams_, tables, top, homes)

    def _stream(self, sentences: list[list[str]]) -> np.ndarray:
        """The corpus as one id stream, each sentence as ``<s> w1 ... wk </s>``
        (:meth:`_assemble`'s). The tokens are joined into a text, one sentence per line, which
        the text reader reads (:meth:`_read_text`: from their UTF-8 bytes, hashed and looked up
        in one compiled function), as KenLM's Python module joins and splits a
        sentence. The join is sound only where every token is a string of one or more bytes
        above the space: where the text reader finds anything else (a token that is empty,
        holds a space, a newline or another control character such as NUL, is ``<s>``/``</s>``,
        or a line count that differs from the token lists'), or the join fails (a token that is
        not a string, or has no UTF-8 form, as a lone surrogate), the corpus goes the readable
        way: each token looked up as ``index_[w]`` would, in one pass that runs in C (``map`` of
        the dictionary's look-up into ``np.fromiter``). Raises ``TypeError`` if a token is not a
        string, and ``ValueError`` on ``<s>``/``</s>`` (:func:`check_sentences` names the
        sentence and the token)."""
        lengths = np.fromiter(map(len, sentences), np.int64, len(sentences))  # (S,)
        try:
            stream, read = self._read_text("\n".join(map(" ".join, sentences)))
            if len(read) == len(sentences) and (read == lengths).all():
                return stream
        except (TypeError, ValueError, UnicodeEncodeError):
            pass
        check_sentences(sentences, "log10_probs")  # a token not a string, <s> or </s>: raises
        flat = itertools.chain.from_iterable(sentences)  # all the words
        words = np.fromiter(map(self.index_.__getitem__, flat), np.int64, int(lengths.sum()))
        return self._assemble(words, lengths)

    def _read_text(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The id stream of ``text`` (one sentence per line, words separated by one space) and
        each line's number of words: one compiled function
        (:func:`nlpcourse.arpa_fast.read_text`) reads its UTF-8 bytes, cuts the words, hashes each
        (:func:`word_hash`) and looks it up among the vocabulary's hashes. ``ValueError`` saying
        what is wrong with the text."""
        data = text.encode("utf-8")
        buf = np.frombuffer(data + bytes(8), dtype=np.uint8)  # (N + 8,) 8 zero bytes after
        bos, eos = self.index_[BOS], self.index_[EOS]
        stream, lengths, error, at = arpa_fast.read_text(
            buf[: len(data)], _pieces(buf), *self.words_.arguments, bos, eos
        )
        if error == arpa_fast.TEXT_CONTROL:
            raise ValueError(
                "the text holds a tab, a carriage return or another control character: separate "
                "words by one space and sentences by a newline"
            )
        if error == arpa_fast.TEXT_SPACE:
            line = data.count(b"\n", 0, at) + 1
            raise ValueError(
                f"line {line} of the text has two spaces in a row or a space at its start or "
                "end: separate words by exactly one space"
            )
        if error == arpa_fast.TEXT_BOUNDARY:
            raise ValueError("a sentence holds <s> or </s>")
        return stream, lengths

    def _assemble(self, words: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The stream ``<s> w1 ... wk </s>`` of every sentence (M,), from the word ids (W,) of all
        the sentences and each sentence's number of words (S,); the words hold no ``<s>`` or
        ``</s>`` (:meth:`_stream` has checked them with :func:`check_sentences`)."""
        bos, eos = self.index_[BOS], self.index_[EOS]
        ends = np.cumsum(lengths + 2)  # (S,) one past each sentence's </s>
        stream = np.empty(len(words) + 2 * len(lengths), dtype=np.int64)  # (M,)
        inside = np.ones(len(stream), dtype=bool)
        inside[ends - lengths - 2] = inside[ends - 1] = False
        stream[ends - lengths - 2], stream[ends - 1] = bos, eos
        stream[inside] = words
        return stream

    def log10_probs(self, sentences: Iterable[Sequence[str]]) -> np.ndarray:
        """log10 P of every predicted token (each word and each sentence's ``</s>``), in order."""
        if type(sentences) is not list or not set(map(type, sentences)) <= {list}:
            sentences = check_sentences(sentences, "log10_probs")  # lists, or a clear error
        return self._log10_stream(self._stream(sentences))

    def log10_probs_text(self, text: str) -> np.ndarray:
        """:meth:`log10_probs` of ``text``: one sentence per line (a last newline is optional;
        an empty line is an empty sentence), words separated by exactly one space.

        The same numbers as ``log10_probs([line.split(" ") for line in lines])``, computed as
        KenLM does, from the words' bytes rather than one Python string per word: one compiled
        function reads the text, cuts it into words, hashes each and looks the hashes up among the
        vocabulary's (:meth:`_read_text`).
        As in KenLM's vocabulary, a word is known by its 64-bit hash (:func:`word_hash`, KenLM's
        MurmurHash64A): a word outside the vocabulary whose hash equals a vocabulary word's would
        read as that word, a chance of about |V| / 2**64 per word (:func:`word_hash` says more).
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, one sentence per line, got {type(text).__name__}")
        stream, _ = self._read_text(text[:-1] if text.endswith("\n") else text)
        return self._log10_stream(stream)

    def perplexity(self, sentences: Iterable[Sequence[str]]) -> float:
        """Perplexity with every word and each ``</s>`` counted, eq. (ngram-ppl)."""
        logs = self.log10_probs(sentences)
        return float(10 ** (-logs.mean()))

    def __repr__(self) -> str:
        sizes = ", ".join(f"{m}-grams: {len(t):,}" for m, t in self.tables_.items())
        return (
            f"ArpaLM(order={self.order}, 1-grams: {len(self.vocab):,}, {sizes}, "
            f"{self.nbytes / 1e6:.1f} MB)"
        )


# ------------------------------------------------------------------------------------ reading

_HEADER = re.compile(rb"ngram\s+(\d+)\s*=\s*(\d+)")
_SECTION = re.compile(rb"\\(\d+)-grams:[ \t\r]*$", re.MULTILINE)


def _fields(buf: np.ndarray, lo: int, hi: int, m: int, where: str):
    """The lines of the m-grams section ``buf[lo:hi]`` (``buf[lo]`` ends its header line) cut into
    fields (runs of bytes above the space), as positions in ``buf``: ``starts`` and ``ends`` (F,)
    of every field, ``first`` (L,) the index of each line's first field (its log10 probability;
    the m words follow), and ``weighted`` (L,) whether the line ends in a back-off weight."""
    sep = np.flatnonzero(buf[lo:hi] <= 32) + lo  # (K,) white space: every field lies between two
    sep = np.append(sep, hi)  # the section ends a line
    starts, ends = sep[:-1] + 1, sep[1:]  # (K-1,) the spans between separators
    field = np.flatnonzero(ends > starts)  # (F,)
    line = np.cumsum(buf[sep[:-1]] == 10, dtype=np.int32)[field]  # (F,) the line of each field
    starts, ends = starts[field], ends[field]
    first = np.flatnonzero(np.diff(line, prepend=-1))  # (L,) lines with no field are skipped
    count = np.diff(np.append(first, len(starts)))  # (L,) fields per line
    bad = np.flatnonzero((count != m + 1) & (count != m + 2))
    if len(bad):
        f = first[bad[0]]
        text = buf[starts[f] : ends[f + count[bad[0]] - 1]].tobytes().decode(errors="replace")
        raise ValueError(
            f"{where}: the {m}-grams section is not lines of a log10 probability, {m} word(s) and "
            f"an optional back-off weight (a line reads {text!r})"
        )
    return starts, ends, first, count == m + 2


def _numbers(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, what: str) -> np.ndarray:
    """The numbers written in the spans ``buf[s:e]``, parsed in one cast: the spans are copied,
    8 bytes at a time, into a table of fixed-width byte strings, which numpy casts to float64."""
    pieces = np.ndarray((len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))  # 8 bytes at i
    width = -(-int((ends - starts).max(initial=1)) // 8)  # pieces of 8 bytes in the longest
    text = np.zeros((len(starts), width), dtype="<u8")  # (K, width) the bytes, 0 after the end
    for j in range(width):
        left = np.clip(ends - starts - 8 * j, 0, 8)  # (K,) bytes of the span in this piece
        text[:, j] = pieces[np.minimum(starts + 8 * j, ends - 1)] & np.take(MASKS, left)
    try:
        return text.view(f"S{8 * width}")[:, 0].astype(np.float64)
    except ValueError as err:
        raise ValueError(f"{what} ({err})") from None


def read_arpa(path: str | Path) -> ArpaLM:
    """Read an ARPA back-off file (KenLM's ``lmplz``, SRILM's ``ngram-count``, :func:`write_arpa`).

    Raises ``ValueError`` saying what is wrong when the file is not ARPA or its counts disagree.
    The file is read as bytes and cut with numpy, one section at a time (:func:`_parse`): no
    Python object is made per n-gram, only one per vocabulary word; what the parsing freed is
    then handed back to the system.
    """
    model = _parse(Path(path))
    _release_free_memory()
    return model


def _parse(path: Path) -> ArpaLM:
    """:func:`read_arpa` without its last step."""
    data = path.read_bytes() + bytes(8)  # 8 zero bytes after the end: _span_hashes reads ahead
    buf = np.frombuffer(data, dtype=np.uint8)
    begin, end = data.find(b"\\data\\"), data.rfind(b"\\end\\")
    if begin < 0 or end < 0:
        raise ValueError(f"{path} is not an ARPA file: it needs a \\data\\ and an \\end\\ line")
    found = []  # the section headers: a line that starts with a backslash (a number starts
    at = data.find(b"\n\\", begin)  # every n-gram line)
    while 0 <= at < end:
        header = _SECTION.match(data, at + 1)
        if header:
            found.append(header)
        at = data.find(b"\n\\", at + 1)
    counts = {
        int(a): int(b) for a, b in _HEADER.findall(data, begin, found[0].start() if found else end)
    }
    if not found or not counts:
        raise ValueError(f"{path} is not an ARPA file: no ngram counts or no n-gram sections")
    if [int(s.group(1)) for s in found] != list(range(1, len(found) + 1)):
        raise ValueError(f"{path}: the n-gram sections are not 1, 2, ... in order")
    bounds = [(s.end(), t.start()) for s, t in zip(found, found[1:], strict=False)]
    bounds.append((found[-1].end(), end))

    def section(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Section m: the spans of each line's words (L, m) and its log10 p and b (L,)."""
        starts, ends, first, weighted = _fields(buf, *bounds[m - 1], m, str(path))
        if counts.get(m) != len(first):
            raise ValueError(
                f"{path}: the header says ngram {m}={counts.get(m)}, the file lists {len(first)}"
            )
        what = f"{path}: the {m}-grams section has a log10 number that is not a number"
        logp = _numbers(buf, starts[first], ends[first], what)
        logb = np.zeros(len(first))
        logb[weighted] = _numbers(
            buf, starts[first[weighted] + m + 1], ends[first[weighted] + m + 1], what
        )
        words = first[:, None] + np.arange(1, m + 1)  # (L, m) the fields of the words
        return starts[words], ends[words], logp, logb

    word_starts, word_ends, logp1, logb1 = section(1)
    vocab = [
        buf[s:e].tobytes().decode("utf-8")
        for s, e in zip(word_starts[:, 0], word_ends[:, 0], strict=True)
    ]
    if len(set(vocab)) != len(vocab):
        raise ValueError(f"{path}: a word is listed twice among the unigrams")
    for symbol in (BOS, EOS):
        if symbol not in vocab:
            raise ValueError(f"{path}: the unigrams must include {symbol}")
    words = _Vocabulary(vocab, logp1, missing=-1)

    def levels() -> Iterator[Level]:
        yield np.arange(len(vocab))[:, None], logp1, logb1
        for m in range(2, len(bounds) + 1):
            starts, ends, logp, logb = section(m)
            ids = words(buf, starts.ravel(), ends.ravel()).reshape(starts.shape)  # (L, m)
            if (ids < 0).any():
                row, col = np.argwhere(ids < 0)[0]
                word = buf[starts[row, col] : ends[row, col]].tobytes().decode(errors="replace")
                raise ValueError(f"{path}: the {m}-gram word {word!r} is not a unigram")
            yield ids, logp, logb

    return ArpaLM(len(bounds), vocab, levels(), words=words)


def _release_free_memory() -> None:
    """Hand the memory that parsing freed back to the system. glibc's ``malloc`` keeps freed
    blocks below its mmap threshold, a threshold that raises itself, in the process's heap, so
    the file's bytes and the parser's temporary arrays would stay resident after they are freed;
    ``malloc_trim(0)`` returns them. Elsewhere (no glibc) this does nothing."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):
        pass
