"""The compiled loops that score a corpus with an ARPA model (:mod:`nlpcourse.arpa`, issue 29).

:mod:`nlpcourse.arpa` imports this module only when a whole corpus is scored or a table searched
at once, so that reading chapter 1's models (and grading its exercise) does not load numba.
"""

from __future__ import annotations

import numba
import numpy as np

from nlpcourse.arpa import _EMPTY, _FIBONACCI

# Scoring a corpus is a few loops over its tokens, compiled by numba (``cache=True``: the machine
# code is kept in __pycache__, so only the first calls on a machine pay for the compiling, about
# 1 s of CPU in all, part of it once per model order). Each loop is what the numpy version of it
# would do, without the temporary arrays and the rounds of a vectorised probe; their readable
# twins are ``arpa._Table.find_one`` and ``arpa.ArpaLM.log10_prob`` (plain Python, one n-gram at
# a time), and the tests check that they agree.

_FIBONACCI_U64 = np.uint64(_FIBONACCI)
_SHIFT = np.uint64(32)


@numba.njit(cache=True)
def probe(keys: np.ndarray, homes: int, key: int) -> int:
    """:meth:`nlpcourse.arpa._Table.find_one`, compiled: the slot of ``key`` in the table, or -1."""
    product = np.uint64(key) * _FIBONACCI_U64  # wraps at 2**64
    slot = np.int64(((product >> _SHIFT) * np.uint64(homes)) >> _SHIFT)
    while keys[slot] != _EMPTY:
        if keys[slot] == key:
            return int(slot)
        slot += 1
    return -1


@numba.njit(cache=True)
def find_all(keys: np.ndarray, homes: int, queries: np.ndarray) -> np.ndarray:
    """:meth:`nlpcourse.arpa._Table.find`: the slot of each of ``queries`` (-1 where absent), one
    probe after the other (they do not depend on each other, so the processor overlaps their
    memory reads)."""
    out = np.empty(len(queries), dtype=np.int64)
    for i in range(len(queries)):
        out[i] = probe(keys, homes, queries[i])
    return out


@numba.njit(cache=True)
def backoff_stream(
    stream: np.ndarray,
    offset: np.ndarray,
    base: int,
    keys: tuple[np.ndarray, ...],
    homes: np.ndarray,
    log10_p: tuple[np.ndarray, ...],
    log10_b: tuple[np.ndarray, ...],
) -> np.ndarray:
    """log10 P of every token of ``stream`` after the words before it in its sentence
    (:meth:`nlpcourse.arpa.ArpaLM._log10_stream` gives the arguments; index m of ``keys``,
    ``homes``, ``log10_p``, ``log10_b`` is order m).

    One pass over the tokens per order m. Before it, ``rows[p]`` is the row of the (m-1)-gram
    ending at p (-1 if it is not listed) and ``logp[p]`` the log10 probability of the token at p
    under the file cut at order m-1. Going up one order is eq. (ngram-backoff) itself: the token
    backs off to order m-1 with the weight of its context (the (m-1)-gram ending at p-1, when it
    is listed), unless the m-gram ending at p is listed, and then its probability is read. That
    m-gram is looked up only where it can be listed: within the sentence (``<s>`` at most its
    first word) and after a listed suffix (the file lists the suffix of every n-gram it lists).
    An id -1 (a word the file does not know, when it has no ``<unk>``) is in no listed n-gram.
    The look-ups of one pass do not depend on each other, so the processor overlaps their
    memory reads. The entry at ``<s>`` (offset 0) is not a prediction; the caller drops it."""
    order, M = len(log10_p) - 1, len(stream)
    logp = np.empty(M)  # (M,)
    rows = stream.copy()  # (M,) order 1: a unigram's row is its word id
    for p in range(M):
        logp[p] = log10_p[1][rows[p]]  # (id -1, unknown: the last entry, -inf)
    for m in range(2, order + 1):
        above = np.full(M, -1, dtype=np.int64)  # (M,) the row of the m-gram ending at p
        for p in range(1, M):
            if offset[p] < m - 1:  # the m-gram would start before <s>
                continue
            if rows[p - 1] >= 0:  # back off with the weight of the listed context ...
                logp[p] += log10_b[m - 1][rows[p - 1]]
            first = stream[p - m + 1]
            if rows[p] >= 0 and first >= 0:  # ... unless the m-gram is listed
                row = probe(keys[m], homes[m], rows[p] * base + first)
                if row >= 0:
                    above[p] = row
                    logp[p] = log10_p[m][row]
        rows = above
    return logp
