"""Checks for exercise 05-seq2seq (chapter 5): cases, answers and usual mistakes.

The machinery is :func:`nlpcourse.checks.core.run_check`'s; the right answers come from
:mod:`nlpcourse.seq2seq` (switched off while a student's function runs). The decoding parts are
checked on small conditional models given by a table (:class:`TableModel`: the log-probability of
each next symbol given the step and the previous symbol), so a case is plain data; the hidden
beam-search cases include beams as wide as the whole search space, whose answer is also checked
here against enumerating every output (brute force). For each part the usual mistakes are
recognised by computing what the mistaken code returns.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from nlpcourse import seq2seq as s2s
from nlpcourse.checks.core import (
    Case,
    Expected,
    Mistake,
    compare_arrays,
    compare_numbers,
    n_random,
    np_rng,
    py_rng,
    run_check,
    show,
    with_args,
)

BOS_ID, EOS_ID = s2s.BOS_ID, s2s.EOS_ID


# ================================================================================ edit distance


def _indel_distance(a: Sequence, b: Sequence) -> int:
    """Insertions and deletions only (a substitution costs 2): len(a) + len(b) - 2 LCS."""
    lcs = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, j in itertools.product(range(1, len(a) + 1), range(1, len(b) + 1)):
        lcs[i][j] = (
            lcs[i - 1][j - 1] + 1 if a[i - 1] == b[j - 1] else max(lcs[i - 1][j], lcs[i][j - 1])
        )
    return len(a) + len(b) - 2 * lcs[len(a)][len(b)]


def _edit_mistakes(a: Sequence, b: Sequence) -> list[Mistake]:
    mismatches = sum(x != y for x, y in zip(a, b, strict=False)) + abs(len(a) - len(b))
    return [
        Mistake(
            "a substitution costs 1 here, not 2 (one deletion plus one insertion): "
            "d[i-1][j-1] + (a_i != b_j)",
            _indel_distance(a, b),
        ),
        Mistake(
            "that counts the positions that differ when the two are laid side by side; the edit "
            "distance may insert or delete to line them up (the min over three moves, eq. "
            "(edit-dist))",
            mismatches,
        ),
    ]


def _compare_count(expected: Any, got: Any) -> str:
    if isinstance(got, bool) or not isinstance(got, (int, np.integer, float)):
        return f"expected a whole number, got {show(got)}"
    return "" if got == expected else f"expected {expected}, got {show(got)}"


def check_edit_distance(edit_distance: Callable, hidden: bool = False) -> None:
    """``edit_distance(a, b)``: the Levenshtein distance of two sequences (strings or tuples)."""
    names = ("a", "b")
    hint = "d[i][j] = min(d[i-1][j] + 1, d[i][j-1] + 1, d[i-1][j-1] + (a_i != b_j))"
    cases = [
        Case(("", ""), names, "two empty sequences are 0 apart", "empty"),
        Case(("abc", ""), names, "d[i][0] = i: delete everything", "one empty"),
        Case(("kitten", "sitting"), names, hint, "the classic example"),
        Case((("K", "AE1", "T"), ("K", "AH0", "T", "S")), names, "sequences of phones", "phones"),
    ]
    rng = py_rng(hidden)
    for _ in range(n_random(hidden)):
        a = "".join(rng.choice("ab") for _ in range(rng.randint(0, 7)))
        b = "".join(rng.choice("abc") for _ in range(rng.randint(0, 7)))
        cases.append(Case((a, b), names, hint, "random"))
    run_check(
        "edit_distance", edit_distance, s2s.edit_distance, cases, _compare_count,
        mistakes=_edit_mistakes,
    )  # fmt: skip


# ================================================================================== attention


def _t(x: Any) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x, dtype=np.float64))


def _random_attention_args(rng: np.random.Generator, B: int, S: int, D: int) -> tuple:
    scores = _t(rng.normal(size=(B, S)) * 2)
    lengths = rng.integers(1, S + 1, size=B)
    mask = torch.as_tensor(np.arange(S)[None, :] < lengths[:, None])  # (B, S), padding at the end
    return scores, mask


def _softmax_mistakes(scores: torch.Tensor, mask: torch.Tensor) -> list[Mistake]:
    return [
        Mistake(
            "the padded positions got weight: a masked score must be -inf before the softmax "
            "(scores.masked_fill(~mask, -inf)), so that exp gives exactly 0",
            torch.softmax(scores, dim=-1),
        ),
        Mistake(
            "masked scores set to 0 still count: exp(0) = 1. Set them to -inf",
            torch.softmax(scores.masked_fill(~mask, 0.0), dim=-1),
        ),
        Mistake(
            "the softmax ran over the batch axis (dim 0); it runs over the positions, dim -1",
            torch.softmax(scores.masked_fill(~mask, -math.inf), dim=0).nan_to_num(0.0),
        ),
    ]


def _compare_weights(want: Expected, got: Any) -> str:
    B, S = want.value.shape
    return compare_arrays(want.value, got, "the weights", f"(B, S) = ({B}, {S}), like scores")


def check_masked_softmax(masked_softmax: Callable, hidden: bool = False) -> None:
    """``masked_softmax(scores, mask)``: softmax over the last axis, 0 where mask is False."""
    names = ("scores", "mask")
    hint = "a_j = exp(score_j) / sum over unmasked j' of exp(score_j'), and 0 where mask is False"
    cases = [
        Case((_t([[1.0, 2.0, 3.0]]), torch.tensor([[True, True, True]])), names, hint, "no mask"),
        Case(
            (_t([[1.0, 2.0, 10.0]]), torch.tensor([[True, True, False]])),
            names,
            "the third position is padding: it gets exactly 0, however large its score",
            "one padded",
        ),
        Case(
            (_t([[0.5, 0.1], [3.0, -1.0]]), torch.tensor([[True, False], [True, True]])),
            names,
            "each row is its own softmax",
            "B = 2",
        ),
    ]
    rng = np_rng(hidden)
    for _ in range(n_random(hidden)):
        B, S = (int(k) for k in rng.integers(1, 6, 2))
        cases.append(Case(_random_attention_args(rng, B, S, 1), names, hint, "random"))
    run_check(
        "masked_softmax", masked_softmax, with_args(s2s.masked_softmax), cases, _compare_weights,
        mistakes=_softmax_mistakes,
    )  # fmt: skip


def _dot_args(rng: np.random.Generator, B: int, S: int, D: int) -> tuple:
    _, mask = _random_attention_args(rng, B, S, D)
    return _t(rng.normal(size=(B, D))), _t(rng.normal(size=(B, S, D))), mask


def _dot_answer(query: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor) -> tuple:
    weights, context = s2s.dot_attention(query, keys, mask)
    return weights, context


def _dot_mistakes(query: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor) -> list[Mistake]:
    D = query.shape[-1]
    scores = torch.einsum("bd,bsd->bs", query, keys)  # (B, S)
    out = []
    for what, sc, m in [
        ("the scores were divided by sqrt(D); this chapter's dot product is not scaled "
         "(chapter 6's is)", scores / math.sqrt(D), mask),
        ("the padded positions got weight: mask the scores before the softmax", scores,
         torch.ones_like(mask)),
    ]:  # fmt: skip
        w = torch.softmax(sc.masked_fill(~m, -math.inf), dim=-1)
        out.append(Mistake(what, (w, torch.einsum("bs,bsd->bd", w, keys))))
    return out


def _compare_pair(want: Expected, got: Any) -> str:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return f"expected a pair (weights, context), got {show(got)}"
    w, c = want.value
    B, S = w.shape
    D = c.shape[1]
    return compare_arrays(w, got[0], "the weights", f"(B, S) = ({B}, {S})") or compare_arrays(
        c, got[1], "the context", f"(B, D) = ({B}, {D})"
    )


def _same_pair(a: Any, b: Any) -> bool:
    try:
        return all(
            np.allclose(np.asarray(x, dtype=float), np.asarray(y, dtype=float), atol=1e-6)
            for x, y in zip(a, b, strict=True)
        )
    except (TypeError, ValueError):
        return False


def check_dot_attention(dot_attention: Callable, hidden: bool = False) -> None:
    """``dot_attention(query, keys, mask)``: (weights (B, S), context (B, D))."""
    names = ("query", "keys", "mask")
    hint = "score_j = query . k_j; weights = masked softmax of the scores; context = sum_j a_j k_j"
    cases = [
        Case(
            (
                _t([[1.0, 2.0]]),
                _t([[[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]]]),
                torch.tensor([[True, True, False]]),
            ),
            names,
            "the book's worked example: scores 1 and 2, the third key is padding",
            "worked example",
        ),  # fmt: skip
        Case(
            (_t([[0.3, -1.0]]), _t([[[2.0, 1.0], [2.0, 1.0]]]), torch.tensor([[True, True]])),
            names,
            "equal keys: equal weights, and the context is that key",
            "equal keys",
        ),  # fmt: skip
    ]
    rng = np_rng(hidden)
    for _ in range(n_random(hidden)):
        B, S, D = (int(k) for k in rng.integers(1, 5, 3))
        cases.append(Case(_dot_args(rng, B, S, D), names, hint, "random"))
    run_check(
        "dot_attention", dot_attention, with_args(_dot_answer), cases, _compare_pair,
        mistakes=_dot_mistakes, same=_same_pair,
    )  # fmt: skip


def _additive_args(rng: np.random.Generator, B: int, S: int, H: int, D: int, A: int) -> tuple:
    return (
        _t(rng.normal(size=(B, H))),
        _t(rng.normal(size=(B, S, D))),
        _t(rng.normal(size=(A, H))),
        _t(rng.normal(size=(A, D))),
        _t(rng.normal(size=(A,))),
    )


def _additive_mistakes(query, keys, W_1, W_2, v) -> list[Mistake]:
    inner = (query @ W_1.T).unsqueeze(1) + keys @ W_2.T  # (B, S, A)
    return [
        Mistake("the tanh is missing: v^T tanh(W_1 s + W_2 k_j)", inner @ v),
        Mistake("the tanh must wrap the sum, not each term separately",
                (torch.tanh((query @ W_1.T).unsqueeze(1)) + torch.tanh(keys @ W_2.T)) @ v),
    ]  # fmt: skip


def _compare_scores(want: Expected, got: Any) -> str:
    B, S = want.value.shape
    return compare_arrays(want.value, got, "the scores", f"(B, S) = ({B}, {S})")


def check_additive_scores(additive_scores: Callable, hidden: bool = False) -> None:
    """``additive_scores(query, keys, W_1, W_2, v)``: (B, S) scores v^T tanh(W_1 s + W_2 k_j)."""
    names = ("query", "keys", "W_1", "W_2", "v")
    hint = "score[b, j] = sum_a v[a] * tanh((W_1 query[b])[a] + (W_2 keys[b, j])[a])"
    cases = [
        Case(
            (_t([[1.0]]), _t([[[0.0], [1.0]]]), _t([[1.0]]), _t([[2.0]]), _t([1.0])),
            names,
            "one dimension: score_j = tanh(1 + 2 k_j), i.e. tanh(1) and tanh(3)",
            "A = 1",
        ),  # fmt: skip
    ]
    rng = np_rng(hidden)
    cases.append(Case(_additive_args(rng, 2, 3, 2, 4, 3), names, hint, "H != D"))
    for _ in range(n_random(hidden)):
        B, S, H, D, A = (int(k) for k in rng.integers(1, 5, 5))
        cases.append(Case(_additive_args(rng, B, S, H, D, A), names, hint, "random"))
    run_check(
        "additive_scores", additive_scores, with_args(s2s.additive_scores), cases,
        _compare_scores, mistakes=_additive_mistakes,
    )  # fmt: skip


# =================================================================================== decoding


class TableModel:
    """A small conditional model as a table, for the decoding parts: ``step(y_prev, state)`` with
    ``state`` the step number ``t`` returns ``log_probs[t, y_prev]`` (a (V,) tensor; ``<pad>`` and
    ``<s>`` have probability 0) and ``t + 1``; past the table's last step it repeats the last."""

    def __init__(self, log_probs: np.ndarray):
        self.log_probs = np.asarray(log_probs, dtype=np.float64)  # (T, V, V)

    def __call__(self, y_prev: int, state: int) -> tuple[torch.Tensor, int]:
        t = min(int(state), self.log_probs.shape[0] - 1)
        return torch.as_tensor(self.log_probs[t, int(y_prev)]), int(state) + 1

    def __repr__(self) -> str:
        T, V, _ = self.log_probs.shape
        return f"TableModel(V={V} symbols: <pad> <s> </s> and {V - 3} others, {T} steps)"


def random_table(rng: np.random.Generator, V: int, T: int, sharpness: float = 2.0) -> TableModel:
    logits = rng.normal(size=(T, V, V)) * sharpness
    logits[:, :, [s2s.PAD_ID, BOS_ID]] = -np.inf
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return TableModel(logp)


def _fixed_table() -> TableModel:
    """The book's exercise 4: greedy takes a (0.6) and ends with at most 0.2; b </s> has 0.36."""
    V = 5  # <pad> <s> </s> a b
    lp = np.full((3, V, V), -np.inf)
    lp[0, BOS_ID, 2:] = np.log([0.0001, 0.5999, 0.4])  # </s>, a, b
    for t in (1, 2):
        for y in range(V):
            lp[t, y, 2:] = np.log([1 / 3, 1 / 3, 1 / 3])
        lp[t, 4, 2:] = np.log([0.9, 0.05, 0.05])  # after b: </s> with 0.9
    return TableModel(lp)


def _greedy_mistakes(step, state, max_len) -> list[Mistake]:
    ys, y = [], BOS_ID
    for _ in range(max_len):
        logp, state = step(y, state)
        y = int(torch.argmax(logp))
        ys.append(y)
        if y == EOS_ID:
            break
    return [Mistake("the output should not include </s> (id 2): stop before adding it", ys)]


def _compare_ids(expected: Any, got: Any) -> str:
    if isinstance(expected, Expected):
        expected = expected.value
    if not isinstance(got, (list, tuple, np.ndarray)):
        return f"expected a list of symbol ids, got {show(got)}"
    got_ids = [int(g) for g in np.asarray(got).reshape(-1)] if len(got) else []
    return "" if got_ids == list(expected) else f"expected {list(expected)}, got {got_ids}"


def check_greedy_decode(greedy_decode: Callable, hidden: bool = False) -> None:
    """``greedy_decode(step, state, max_len)``: the ids of the greedy output, without ``</s>``."""
    names = ("step", "state", "max_len")
    hint = "start from <s> (id 1), take the argmax each step, stop at </s> (id 2) or max_len"
    rng = np_rng(hidden)
    cases = [
        Case((_fixed_table(), 0, 5), names, "greedy takes 'a' (id 3), the most probable first",
              "the book's example"),
        Case((random_table(rng, 6, 4), 0, 1), names, "max_len = 1: at most one symbol",
              "max_len 1"),
    ]  # fmt: skip
    for _ in range(n_random(hidden)):
        V, T = int(rng.integers(4, 8)), int(rng.integers(2, 6))
        cases.append(Case((random_table(rng, V, T), 0, int(rng.integers(1, 8))), names, hint,
                           "random"))  # fmt: skip
    run_check(
        "greedy_decode", greedy_decode, s2s.greedy_decode, cases, _compare_ids,
        mistakes=_greedy_mistakes,
    )  # fmt: skip


def brute_force_best(step, state, max_len: int, length_penalty: float) -> tuple[list[int], float]:
    """Every output of the model (symbols then ``</s>``, or ``max_len`` symbols): the one with
    the best ``log P / |y|^alpha`` (the oracle of a beam as wide as the search space)."""
    V = len(step(BOS_ID, state)[0])
    best: tuple[float, list[int]] = (-math.inf, [])
    outputs = [
        [*p, EOS_ID] for n in range(max_len) for p in itertools.product(range(3, V), repeat=n)
    ]
    outputs += [list(p) for p in itertools.product(range(3, V), repeat=max_len)]
    for ys in outputs:
        total, s, y = 0.0, state, BOS_ID
        for nxt in ys:
            logp, s = step(y, s)
            total += float(logp[nxt])
            y = nxt
        score = total / len(ys) ** length_penalty
        if score > best[0]:
            best = (score, [v for v in ys if v != EOS_ID])
    return best[1], best[0]


def _beam_answer(step, state, beam_size, max_len, length_penalty) -> tuple[list[int], float]:
    ys, score = s2s.beam_search(step, state, beam_size, max_len, length_penalty)
    V = len(step(BOS_ID, state)[0])
    if beam_size >= (V - 2) ** max_len * 2:  # wide enough for everything: check the oracle too
        oracle = brute_force_best(step, state, max_len, length_penalty)
        assert oracle[0] == ys and math.isclose(oracle[1], score, abs_tol=1e-9), (oracle, ys)
    return ys, score


def _beam_mistakes(step, state, beam_size, max_len, length_penalty) -> list[Mistake]:
    raw = s2s.beam_search(step, state, beam_size, max_len, 0.0)
    return [
        Mistake("the hypotheses were compared by their plain sum of log-probabilities; compare "
                "the ended ones by score / |y|^length_penalty, |y| counting </s>", raw),
        Mistake("that is the greedy output: the beam must keep beam_size hypotheses each step",
                (s2s.greedy_decode(step, state, max_len), None)),
    ]  # fmt: skip


def _compare_beam(expected: Any, got: Any) -> str:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return f"expected a pair (ids, score), got {show(got)}"
    ids, score = expected
    return _compare_ids(ids, got[0]) or compare_numbers(score, got[1])


def _same_beam(a: Any, b: Any) -> bool:
    try:
        return _compare_ids(a[0], b[0]) == "" and (a[1] is None or math.isclose(a[1], b[1]))
    except (TypeError, ValueError, IndexError):
        return False


def check_beam_search(beam_search: Callable, hidden: bool = False) -> None:
    """``beam_search(step, state, beam_size, max_len, length_penalty)``: (ids, normalised score)."""
    names = ("step", "state", "beam_size", "max_len", "length_penalty")
    hint = ("keep the beam_size best hypotheses by summed log-probability; ended ones stay; at "
            "the end return the best by score / |y|^length_penalty (|y| counts </s>)")  # fmt: skip
    rng = np_rng(hidden)
    cases = [
        Case((_fixed_table(), 0, 1, 3, 0.0), names, "beam_size 1 is greedy", "K = 1"),
        Case((_fixed_table(), 0, 2, 3, 0.0), names,
              "the book's example: a beam of 2 keeps 'b' and finds b </s> (0.36)", "K = 2"),
        Case((random_table(rng, 5, 3), 0, 3, 3, 1.0), names, hint, "length penalty 1"),
    ]  # fmt: skip
    for _ in range(n_random(hidden)):
        V, T = int(rng.integers(4, 7)), int(rng.integers(2, 5))
        K, L = int(rng.integers(1, 6)), int(rng.integers(1, 5))
        alpha = float(rng.choice([0.0, 0.5, 1.0]))
        cases.append(Case((random_table(rng, V, T), 0, K, L, alpha), names, hint, "random"))
    if hidden:  # beams as wide as the search space: the answer is the best of all outputs
        for V, L in [(4, 3), (5, 3), (5, 2)]:
            K = (V - 2) ** L * 2
            alpha = float(rng.choice([0.0, 0.7, 1.0]))
            cases.append(Case((random_table(rng, V, 4), 0, K, L, alpha), names,
                               "a beam this wide keeps every output: it must find the best one",
                               "exhaustive"))  # fmt: skip
    run_check(
        "beam_search", beam_search, _beam_answer, cases, _compare_beam,
        mistakes=_beam_mistakes, same=_same_beam,
    )  # fmt: skip


__all__ = [
    "TableModel",
    "brute_force_best",
    "check_additive_scores",
    "check_beam_search",
    "check_dot_attention",
    "check_edit_distance",
    "check_greedy_decode",
    "check_masked_softmax",
    "random_table",
]
