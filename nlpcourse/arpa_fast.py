"""The compiled loops that score a corpus with an ARPA model (:mod:`nlpcourse.arpa`, issue 29),
and the constants they use.

The constants live here, in the module whose functions numba compiles, and nowhere else:
numba freezes a global into the machine code it keeps on disk, and it knows that machine code
is stale only when this file changes. A constant kept in another module and changed there would
leave the cached loops computing with the old value while the readable twins use the new one
(``tests/test_arpa.py`` changes one in a copy of the package and checks the result moves).
:mod:`nlpcourse.arpa` imports them from here; this module imports nothing of the package but
:mod:`nlpcourse.compiled`.

Every function here also runs as plain Python, one step at a time in a debugger, under
``NUMBA_DISABLE_JIT=1`` (the tests run the ARPA tests that way): slots are read as
``entries[slot]["key"]``, which numpy and numba both read, and :func:`prefetch` is then a
function that does nothing. numpy warns there that its 64-bit multiplications wrap
(``RuntimeWarning: overflow``): they are meant to.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from nlpcourse.compiled import njit_cached

# Scoring a corpus is a few loops over its bytes and tokens, compiled by numba
# (:func:`nlpcourse.compiled.njit_cached`: the machine code is kept on disk, so only the first
# calls on a machine pay for the compiling, about 1 s of CPU in all, part of it once per model
# order). Their readable twins are ``arpa.word_hash``, ``arpa._Table.find_one`` and
# ``arpa.ArpaLM.log10_prob`` (plain Python, one word or one n-gram at a time), and the tests check
# that they agree. What makes them fast is memory: the tables do not fit in the processor's nearer
# caches, so the loops are arranged for the processor to wait for several look-ups at once
# (look-ups that do not depend on each other, and :func:`prefetch`).

# ------------------------------------------------------------------------ the hash tables' keys

EMPTY = np.iinfo(np.int64).min  # a free slot: no key is this (n-gram keys are >= 0, and a word
# hash equal to it is remapped to EMPTY_REMAPPED)
FIBONACCI = 0x9E3779B97F4A7C15  # 2**64 / golden ratio: multiplicative hashing (Knuth, TAOCP 6.4)
VALUE = np.float32  # log10 numbers as KenLM holds them: 24 bits, about 7 significant digits

# ------------------------------------------------------------ words: MurmurHash64A of their bytes

MURMUR_M = 0xC6A4A7935BD1E995  # MurmurHash64A's multiplier (Austin Appleby; KenLM hashes words
MURMUR_R = 47  # with it, seed 0): the shift of its mixing steps
EMPTY_REMAPPED = EMPTY + 1  # the hash a word gets if MurmurHash64A gives it EMPTY's 64 bits
MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], dtype=np.uint64)

_FIBONACCI_U64 = np.uint64(FIBONACCI)
_SHIFT = np.uint64(32)
_M = np.uint64(MURMUR_M)
_R = np.uint64(MURMUR_R)


AHEAD = 16  # positions ahead whose table slot is fetched before it is searched


def _ask_for(builder, pointer) -> None:
    """LLVM's ``llvm.prefetch`` of the byte at ``pointer``: read (0), keep in every cache
    level (3), data (1)."""
    byte_pointer = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    hint = ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32])
    function = cgutils.get_or_insert_function(builder.module, hint, "llvm.prefetch.p0i8")
    builder.call(function, [builder.bitcast(pointer, byte_pointer), i32(0), i32(3), i32(1)])


def _prefetch_in_python(array: np.ndarray, index: int) -> None:
    """:func:`prefetch` where numba compiles nothing (``NUMBA_DISABLE_JIT=1``): a hint, so
    nothing to do."""


@intrinsic
def _prefetch_compiled(typingctx, array, index):
    """Ask the processor to start bringing ``array[index]`` into its caches and go on at once
    (LLVM's ``llvm.prefetch``: a hint, it reads nothing and cannot fault).

    A search in a table that is not in the cache waits for memory, and when it ends in a
    mispredicted branch (was the key found? after how many slots?) the processor throws away
    the searches it had started after it: the waits add up. Asked for :data:`AHEAD` searches
    earlier, the slot is in the cache when its search comes."""

    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        data = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(
            context, builder, array_type, data, [args[1]], wraparound=False
        )
        _ask_for(builder, pointer)
        return context.get_dummy_value()

    return types.void(array, index), codegen


_PLAIN_PYTHON = numba.config.DISABLE_JIT  # type: ignore[attr-defined]
prefetch = _prefetch_in_python if _PLAIN_PYTHON else _prefetch_compiled


@njit_cached
def home(homes: int, key: int | np.int64) -> np.int64:
    """:meth:`nlpcourse.arpa._Table.home` of one key."""
    product = np.uint64(key) * _FIBONACCI_U64  # wraps at 2**64
    return np.int64(((product >> _SHIFT) * np.uint64(homes)) >> _SHIFT)


@njit_cached
def probe(entries: np.ndarray, homes: int, key: int | np.int64) -> int:
    """:meth:`nlpcourse.arpa._Table.find_one`, compiled: the slot of ``key`` in the table whose
    slots are ``entries`` (field ``key``), or -1."""
    slot = home(homes, key)
    while entries[slot]["key"] != EMPTY:
        if entries[slot]["key"] == key:
            return int(slot)
        slot += 1
    return -1


@njit_cached
def find_all(entries: np.ndarray, homes: int, queries: np.ndarray) -> np.ndarray:
    """:meth:`nlpcourse.arpa._Table.find`: the slot of each of ``queries`` (-1 where absent), one
    probe after the other (they do not depend on each other, so the processor overlaps their
    memory reads)."""
    out = np.empty(len(queries), dtype=np.int64)
    for i in range(len(queries)):
        out[i] = probe(entries, homes, queries[i])
    return out


@njit_cached
def key_ending_at(stream: np.ndarray, p: int, m: int, row: int, base: int, bos: int) -> int:
    """The key of the m-gram ending at position p of ``stream`` (its first word in front of the
    (m-1)-gram ending there, whose row is ``row``: ``row * base + first``), or -1 where that
    m-gram is not within the sentence (the (m-1)-gram starts at its ``<s>``) or its first word is
    unknown (id -1: in no listed n-gram)."""
    if stream[p - m + 2] == bos:
        return -1
    first = stream[p - m + 1]
    return row * base + first if first >= 0 else -1


@njit_cached
def backoff_stream(
    stream: np.ndarray,
    bos: int,
    base: int,
    unigrams: np.ndarray,
    tables: tuple[np.ndarray, ...],
    top: np.ndarray,
    homes: np.ndarray,
) -> np.ndarray:
    """log10 P of every token of ``stream`` (each sentence ``<s> w1 ... wk </s>``, ``<s>`` being
    the id ``bos``) after the words before it in its sentence, except the ``<s>``, which are not
    predictions (:meth:`nlpcourse.arpa.ArpaLM._log10_stream` gives the arguments: ``unigrams``
    the numbers of each word id, ``log10_p`` and ``log10_b``; index m of ``tables`` the slots of
    order m below the top, each a key and its two numbers; ``top`` the top order's slots, a key
    and its ``log10_p``; index m of ``homes`` the home slots of order m).

    One pass per order m over the positions p where an (m-1)-gram is listed: ``at`` (A,) holds
    them, in order, ``query`` (A,) the key of the m-gram ending there (:func:`key_ending_at`) and
    ``back`` (A,) the (m-1)-gram's log10 b; ``logp[p]`` is the log10 probability of the token at
    p under the file cut at order m-1. Going up one order is eq. (ngram-backoff) itself: the
    token at p+1 backs off to order m-1 with the weight of its context, the (m-1)-gram ending at
    p, unless the m-gram ending at p+1 is listed, and then its probability replaces the sum (p+1
    is visited after p). That m-gram can be listed only where the (m-1)-gram ending at p+1 is
    (the file lists the suffix of every n-gram it lists), so the positions of the next pass are
    those of this one where the m-gram is found (fewer at each order), each with the key of the
    (m+1)-gram ending there, made from the row just found. The searches of one pass do not
    depend on each other: before each, the slots of the one :data:`AHEAD` positions on are asked
    for (:func:`prefetch`), its home slot and the 3rd after it (a slot is 16 bytes, 12 at the top
    order: 4 or 5 to a cache line; a search that does not find its key walks 5 slots on average,
    at the load of two thirds). A found n-gram's numbers are in its slot, fetched with its key.
    The top order's pass only replaces probabilities: its n-grams are no one's context, and its
    slots hold no weight. (Asking for the slots in a function called at each position instead of
    in the loop made the passes as slow as without asking: measured, not understood.)"""
    order, M = len(tables) - 1, len(stream)
    logp = np.empty(M)  # (M,)
    at = np.empty(M, dtype=np.int64)  # (A,) positions with a listed (m-1)-gram ending there
    query = np.empty(M, dtype=np.int64)  # (A,) the key of the m-gram ending there, or -1
    back = np.empty(M, dtype=VALUE)  # (A,) the (m-1)-gram's log10 b
    A, sentences = 0, 0
    for p in range(M):  # order 1: a unigram's row is its word id
        w = stream[p]
        logp[p] = unigrams[w]["log10_p"]  # (id -1, unknown: the last row, -inf)
        sentences += w == bos
        if w >= 0:
            at[A], back[A] = p, unigrams[w]["log10_b"]
            query[A] = key_ending_at(stream, p, 2, w, base, bos)
            A += 1
    for m in range(2, order):
        slots, found = tables[m], 0
        for j in range(A):
            p = at[j]
            if p + 1 < M and stream[p + 1] != bos:  # back off at p+1 with this context ...
                logp[p + 1] += back[j]
            if j + AHEAD < A and query[j + AHEAD] >= 0:  # ask for a later search's slots
                slot = home(homes[m], query[j + AHEAD])
                prefetch(slots, slot)  # type: ignore[call-arg]
                prefetch(slots, slot + 3)  # type: ignore[call-arg]
            row = probe(slots, homes[m], query[j]) if query[j] >= 0 else -1
            if row >= 0:  # ... unless the m-gram there is listed
                logp[p] = slots[row]["log10_p"]
                at[found], back[found] = p, slots[row]["log10_b"]  # (found <= j)
                query[found] = key_ending_at(stream, p, m + 1, row, base, bos)
                found += 1
        A = found
    if order > 1:  # the same at the top order, whose n-grams are no one's context
        for j in range(A):
            p = at[j]
            if p + 1 < M and stream[p + 1] != bos:
                logp[p + 1] += back[j]
            if j + AHEAD < A and query[j + AHEAD] >= 0:
                slot = home(homes[order], query[j + AHEAD])
                prefetch(top, slot)  # type: ignore[call-arg]
                prefetch(top, slot + 3)  # type: ignore[call-arg]
            row = probe(top, homes[order], query[j]) if query[j] >= 0 else -1
            if row >= 0:
                logp[p] = top[row]["log10_p"]
    predicted = np.empty(M - sentences)  # all but the <s>
    i = 0
    for p in range(M):
        if stream[p] != bos:
            predicted[i] = logp[p]
            i += 1
    return predicted


# ---------------------------------------------------------------------- words, from their bytes


@njit_cached
def span_hashes(pieces: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """MurmurHash64A (seed 0, as KenLM's vocabulary) of every span ``starts[i]:ends[i]`` (W,) of
    a buffer whose 8 bytes from byte i on are ``pieces[i]``, read little-endian; as int64, the empty
    slot's 64 bits (:data:`EMPTY`) remapped to :data:`EMPTY_REMAPPED`. The readable twin is
    :func:`nlpcourse.arpa.word_hash`, one word at a time.

    The length is mixed in first; each whole piece of 8 bytes is mixed (multiply, fold the high
    bits down, multiply) before it joins the hash, and the tail (1-7 bytes, the piece cut to
    them) joins it as it is; a last mix (fold, multiply, fold) spreads every bit over all 64.
    Unlike a sum of the pieces, no arithmetic relation between two words' bytes carries over to
    their hashes. (The loop body is written here rather than in a function called per word: a
    compiled call that takes an array costs more than the hash, measured 3-8x slower.)"""
    out = np.empty(len(starts), dtype=np.int64)
    for i in range(len(starts)):
        start, end = starts[i], ends[i]
        n = end - start
        h = np.uint64(n) * _M
        whole = start + (n & ~7)
        for at in range(start, whole, 8):
            k = pieces[at] * _M
            k ^= k >> _R
            h ^= k * _M
            h *= _M
        if n & 7:
            h ^= pieces[whole] & MASKS[n & 7]
            h *= _M
        h ^= h >> _R
        h *= _M
        h ^= h >> _R
        key = np.int64(h)
        out[i] = key if key != EMPTY else EMPTY_REMAPPED
    return out


@njit_cached
def lookup_spans(
    pieces: np.ndarray, starts: np.ndarray, ends: np.ndarray, vocab: np.ndarray, vocab_homes: int
) -> np.ndarray:
    """The id of every word ``starts[i]:ends[i]`` (W,) of a buffer (given as its ``pieces``): its
    hash (:func:`span_hashes`) looked up among the vocabulary's (``vocab``: the slots of a table,
    each a hash and its word's ``id``; the last slot, read by slot -1, is free and holds the id
    of a word outside the vocabulary). The look-ups do not depend on each other, so the
    processor overlaps their memory reads.

    A word is known by its hash alone, as in KenLM: a word outside the vocabulary whose hash
    equals a vocabulary word's reads as that word. :func:`nlpcourse.arpa.word_hash` says how
    likely that is, and what confirming each hit against the word's bytes cost."""
    hashes = span_hashes(pieces, starts, ends)
    out = np.empty(len(starts), dtype=np.int64)
    for i in range(len(starts)):
        out[i] = vocab[probe(vocab, vocab_homes, hashes[i])]["id"]
    return out


# What :func:`read_text` found wrong in a text (0: nothing), with the byte where it found it.
TEXT_CONTROL = 1  # a tab, a carriage return or another control character
TEXT_SPACE = 2  # two spaces in a row, or a space at the start or the end of a line
TEXT_BOUNDARY = 3  # a word that is <s> or </s>


@njit_cached
def read_text(
    text: np.ndarray,
    pieces: np.ndarray,
    vocab: np.ndarray,
    vocab_homes: int,
    bos: int,
    eos: int,
):
    """The id stream of a text (``text``, its n UTF-8 bytes: one sentence per line, words
    separated by one space), each sentence as ``<s> w1 ... wk </s>``, its words looked up by
    :func:`lookup_spans` (their hashes among ``vocab``'s). ``pieces[i]`` is the 8 bytes from
    byte i on, read as a little-endian number (a view of the same bytes followed by 8 zero
    bytes), so its lowest byte is byte i.

    Three passes: the first notes where every byte of 32 or less (a space, a newline, another
    control character) is, without a branch (having counted them); the second checks the
    separators and notes where each word starts and ends; the third (:func:`lookup_spans`) reads
    each word, 8 bytes at a time. The words' reads do not depend on each other, so the processor
    overlaps them (a single pass that looked for each word's end as it read would wait for every
    word before starting the next).

    Returns ``stream`` (M,), ``lengths`` (S,) each sentence's number of words, and an error: 0,
    or one of the ``TEXT_*`` codes and the byte where it was met."""
    n = len(text)
    K, lines = 1, 1  # separators and the end of the text; lines
    for i in range(n):
        K += text[i] <= 32
        lines += text[i] == 10
    ends = np.empty(K, dtype=np.int64)  # (K,) where they are
    K = 0
    for i in range(n):
        ends[K] = i
        K += text[i] <= 32
    ends[K], K = n, K + 1
    starts = np.empty(K, dtype=np.int64)  # (W,) each word's first byte, W <= K
    lengths = np.zeros(lines, dtype=np.int64)
    W, s = 0, 0  # words, the line
    start = 0  # the first byte after the last separator
    for j in range(K):
        end = ends[j]
        after = text[end] if end < n else 10  # (the end of the text ends a line)
        if after != 32 and after != 10:
            return ends, lengths, TEXT_CONTROL, end
        if end > start:  # a word (its end goes where separators were read: W <= j)
            starts[W], ends[W], W = start, end, W + 1
            lengths[s] += 1
        elif lengths[s] > 0 or after == 32:  # an empty word that is not an empty line
            return ends, lengths, TEXT_SPACE, end
        s += after == 10
        start = end + 1
    words = lookup_spans(pieces, starts[:W], ends[:W], vocab, vocab_homes)
    stream = np.empty(W + 2 * lines, dtype=np.int64)
    t, w = 0, 0
    for s in range(lines):
        stream[t], t = bos, t + 1
        for _ in range(lengths[s]):
            if words[w] == bos or words[w] == eos:
                return stream, lengths, TEXT_BOUNDARY, starts[w]
            stream[t], t, w = words[w], t + 1, w + 1
        stream[t], t = eos, t + 1
    return stream, lengths, 0, 0
