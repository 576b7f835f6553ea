"""The compiled loops that score a corpus with an ARPA model (:mod:`nlpcourse.arpa`, issue 29).

:mod:`nlpcourse.arpa` imports this module only when a whole corpus is scored or a table searched
at once, so that reading chapter 1's models (and grading its exercise) does not load numba.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from nlpcourse.arpa import _EMPTY, _FIBONACCI, _HASH_P, _MASKS, VALUE
from nlpcourse.compiled import njit_cached

# Scoring a corpus is a few loops over its bytes and tokens, compiled by numba
# (:func:`nlpcourse.compiled.njit_cached`: the machine code is kept on disk, so only the first
# calls on a machine pay for the compiling, about 1 s of CPU in all, part of it once per model
# order). Their readable twins are ``arpa.word_hash``, ``arpa._Table.find_one`` and
# ``arpa.ArpaLM.log10_prob`` (plain Python, one word or one n-gram at a time), and the tests check
# that they agree. What makes them fast is memory: the tables do not fit in the processor's nearer
# caches, so the loops are arranged for the processor to wait for several look-ups at once
# (look-ups that do not depend on each other, and :func:`prefetch`).

_FIBONACCI_U64 = np.uint64(_FIBONACCI)
_SHIFT = np.uint64(32)


AHEAD = 16  # positions ahead whose table slot is fetched before it is searched


def _ask_for(builder, pointer) -> None:
    """LLVM's ``llvm.prefetch`` of the byte at ``pointer``: read (0), keep in every cache
    level (3), data (1)."""
    byte_pointer = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    hint = ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32])
    function = cgutils.get_or_insert_function(builder.module, hint, "llvm.prefetch.p0i8")
    builder.call(function, [builder.bitcast(pointer, byte_pointer), i32(0), i32(3), i32(1)])


@intrinsic
def prefetch(typingctx, array, index):
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
    while entries[slot].key != _EMPTY:
        if entries[slot].key == key:
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
        logp[p] = unigrams[w].log10_p  # (id -1, unknown: the last row, -inf)
        sentences += w == bos
        if w >= 0:
            at[A], back[A] = p, unigrams[w].log10_b
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
                logp[p] = slots[row].log10_p
                at[found], back[found] = p, slots[row].log10_b  # (found <= j)
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
                logp[p] = top[row].log10_p
    predicted = np.empty(M - sentences)  # all but the <s>
    i = 0
    for p in range(M):
        if stream[p] != bos:
            predicted[i] = logp[p]
            i += 1
    return predicted


# What :func:`read_text` found wrong in a text (0: nothing), with the byte where it found it.
TEXT_CONTROL = 1  # a tab, a carriage return or another control character
TEXT_SPACE = 2  # two spaces in a row, or a space at the start or the end of a line
TEXT_BOUNDARY = 3  # a word that is <s> or </s>

_HASH_P_U64 = np.uint64(_HASH_P)


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
    separated by one space), each sentence as ``<s> w1 ... wk </s>``: each word is hashed
    (:func:`nlpcourse.arpa.word_hash`: its bytes in pieces of 8, ``h = sum_j c_j P**j``) and
    looked up among the vocabulary's hashes (``vocab``: the slots of a table, each a hash and its
    word's ``id``; the last slot, read by slot -1, is free and holds the id of a word outside the
    vocabulary). ``pieces[i]`` is the 8 bytes from byte i on, read as a little-endian number (a
    view of the same bytes followed by 8 zero bytes), so its lowest byte is byte i.

    Two passes: the first notes where every byte of 32 or less (a space, a newline, another
    control character) is, without a branch (having counted them); the second reads each word
    between two of them, 8 bytes at a time. The words' reads do not depend on each other, so the
    processor overlaps them (a single pass that looked for each word's end as it read would wait
    for every word before starting the next).

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
    stream = np.empty(K + 2 * lines, dtype=np.int64)  # words <= K, plus <s> and </s> per line
    lengths = np.zeros(lines, dtype=np.int64)
    t, s, k = 0, 0, 0  # tokens written, sentences begun, words of this sentence
    start = 0  # the first byte after the last separator
    for j in range(K):
        end = ends[j]
        after = text[end] if end < n else 10  # (the end of the text ends a line)
        if after != 32 and after != 10:
            return stream, lengths, TEXT_CONTROL, end
        if k == 0 and (start == 0 or text[start - 1] == 10):
            stream[t], t = bos, t + 1  # a line begins
        if end > start:  # a word: its pieces, the last one cut to the word's bytes
            h, power = np.uint64(0), np.uint64(1)
            for at in range(start, end, 8):
                piece = pieces[at] & _MASKS[min(end - at, 8)]
                h, power = h + piece * power, power * _HASH_P_U64
            word = vocab[probe(vocab, vocab_homes, np.int64(h))].id
            if word == bos or word == eos:
                return stream, lengths, TEXT_BOUNDARY, start
            k += 1
            stream[t], t = word, t + 1
        elif k > 0 or after == 32:  # an empty word that is not an empty line
            return stream, lengths, TEXT_SPACE, end
        if after == 10:  # the line ends
            stream[t], t = eos, t + 1
            lengths[s], s, k = k, s + 1, 0
        start = end + 1
    return stream[:t], lengths, 0, 0


# ------------------------------------------------------------- token lists, read where they lie
#
# Python keeps a list of token lists as objects: the outer list holds the address of each
# sentence's list, which holds the address of each token's string, which holds its characters.
# Joining them into one text copies every token twice before the text reader sees it, one string
# at a time, each a wait for memory; :func:`read_lists` instead reads each token's bytes where
# they lie, through CPython's own C API (the functions its ``str.join`` and ``dict`` use), called
# from the compiled loop. An object is passed as its address, ``id(obj)`` (in CPython the
# object's address in memory); the caller holds the objects, and since the loop holds the
# interpreter's lock and runs no Python code, nothing can change or free them meanwhile.


@intrinsic
def list_size(typingctx, address):
    """``PyList_Size``: the length of the Python list at ``address``."""

    def codegen(context, builder, signature, args):
        api = context.get_python_api(builder)
        return api.list_size(builder.inttoptr(args[0], api.pyobj))

    return types.intp(address), codegen


@intrinsic
def list_item(typingctx, address, i):
    """``PyList_GetItem``: the address of item ``i`` (``0 <= i <`` its length) of the Python list
    at ``address``; the list keeps the item alive."""

    def codegen(context, builder, signature, args):
        api = context.get_python_api(builder)
        item = api.list_getitem(builder.inttoptr(args[0], api.pyobj), args[1])
        return builder.ptrtoint(item, ir.IntType(64))

    return types.int64(address, i), codegen


@intrinsic
def utf8_bytes(typingctx, address):
    """``PyUnicode_AsUTF8AndSize``: the address of the UTF-8 bytes of the Python string at
    ``address`` and their number. For a string of ASCII characters these are the string's own
    characters; another string makes them once and keeps them. Where the object is not a string,
    or a string with no UTF-8 form (it holds a lone surrogate), it is ``(0, -1)``, and the error
    that the call raised is cleared."""

    def codegen(context, builder, signature, args):
        api = context.get_python_api(builder)
        ok, data, size = api.string_as_string_and_size(builder.inttoptr(args[0], api.pyobj))
        with builder.if_then(builder.not_(ok), likely=False):
            api.err_clear()
        size = builder.select(ok, size, ir.Constant(size.type, -1))
        data = builder.ptrtoint(data, ir.IntType(64))
        return context.make_tuple(builder, signature.return_type, [data, size])

    return types.UniTuple(types.int64, 2)(address), codegen


@intrinsic
def load_piece(typingctx, address):
    """The 8 bytes at ``address``, a multiple of 8, as one number (little-endian, as on every
    processor numba compiles for)."""

    def codegen(context, builder, signature, args):
        return builder.load(builder.inttoptr(args[0], ir.IntType(64).as_pointer()), align=8)

    return types.uint64(address), codegen


@intrinsic
def prefetch_object(typingctx, address):
    """:func:`prefetch` of the first bytes of the Python object at ``address``."""

    def codegen(context, builder, signature, args):
        _ask_for(builder, builder.inttoptr(args[0], ir.IntType(8).as_pointer()))
        return context.get_dummy_value()

    return types.void(address), codegen


LISTS_NOT_READ = -1  # what read_lists returns as ``failed`` when it read every token


@njit_cached
def read_lists(corpus: int, vocab: np.ndarray, vocab_homes: int, bos: int, eos: int):
    """The id stream of a list of token lists (``corpus``: its address, ``id(sentences)``; each
    sentence a list, each token a string), each sentence as ``<s> w1 ... wk </s>``: each token's
    UTF-8 bytes are hashed where the string keeps them (:func:`nlpcourse.arpa.word_hash`:
    ``h = sum_j c_j P**j`` over pieces of 8 bytes) and looked up among the vocabulary's hashes,
    as :func:`read_text` does for the words of a text.

    First the address of every token's string, one list after the other; then each string is
    read, its object asked for (:func:`prefetch_object`) :data:`AHEAD` tokens before (the
    strings lie scattered in memory, and their reads do not depend on each other). A string's
    bytes start at a multiple of 8 (CPython's strings and their UTF-8 forms are allocated in
    blocks that are multiples of 8 bytes, aligned to 8), and are read 8 at a time
    (:func:`load_piece`), the last piece cut to the word: the 8 bytes of a piece lie in the block
    that holds its first byte.

    Returns ``stream`` (M,), ``lengths`` (S,) each sentence's number of tokens, and ``failed``:
    :data:`LISTS_NOT_READ`, or the index (among all tokens) of the first token that is not a
    string, has no UTF-8 form, or is ``<s>`` or ``</s>`` (``stream`` then holds nothing of use)."""
    S: int = list_size(corpus)  # type: ignore[call-arg]
    sentences = np.empty(S, dtype=np.int64)  # (S,) the address of each sentence's list
    lengths = np.empty(S, dtype=np.int64)  # (S,)
    for s in range(S):
        sentences[s] = list_item(corpus, s)
        lengths[s] = list_size(sentences[s])
    W = lengths.sum()
    tokens = np.empty(W, dtype=np.int64)  # (W,) the address of each token's string
    w = 0
    for s in range(S):
        for i in range(lengths[s]):
            tokens[w], w = list_item(sentences[s], i), w + 1
    stream = np.empty(W + 2 * S, dtype=np.int64)  # (M,)
    t, w = 0, 0
    for s in range(S):
        stream[t], t = bos, t + 1
        for _ in range(lengths[s]):
            if w + AHEAD < W:
                prefetch_object(tokens[w + AHEAD])  # type: ignore[call-arg]
            data, size = utf8_bytes(tokens[w])
            if size < 0 or data % 8 != 0:
                return stream, lengths, w
            h, power = np.uint64(0), np.uint64(1)
            for at in range(0, size, 8):
                piece = load_piece(data + at) & _MASKS[min(size - at, 8)]
                h, power = h + piece * power, power * _HASH_P_U64
            word = vocab[probe(vocab, vocab_homes, np.int64(h))].id
            if word == bos or word == eos:
                return stream, lengths, w
            stream[t], t, w = word, t + 1, w + 1
        stream[t], t = eos, t + 1
    return stream, lengths, LISTS_NOT_READ
