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
    as_array,
    compare_arrays,
    compare_numbers,
    impossible_distribution,
    masked_weight,
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


def _compare_distance(want: Expected, got: Any) -> str:
    """:func:`_compare_count`, then the right table d[i][j] when it is small enough to read, so
    a student can print theirs and find the first entry that differs."""
    problem = _compare_count(want.value, got)
    a, b = want.args
    if not problem or len(a) > 8 or len(b) > 8:
        return problem
    d = [[i + j if i == 0 or j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i, j in itertools.product(range(1, len(a) + 1), range(1, len(b) + 1)):
        d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
    rows = "\n".join(f"  d[{i}] = {row}" for i, row in enumerate(d))
    return f"{problem}\nhint: the right table, row i for the first i symbols of a:\n{rows}"


def check_edit_distance(edit_distance: Callable, hidden: bool = False) -> None:
    """``edit_distance(a, b)``: the Levenshtein distance of two sequences (strings or tuples)."""
    names = ("a", "b")
    hint = "d[i][j] = min(d[i-1][j] + 1, d[i][j-1] + 1, d[i-1][j-1] + (a_i != b_j))"
    cases = [
        Case(("", ""), names, "two empty sequences are 0 apart", "empty"),
        Case(("abc", ""), names, "d[i][0] = i: delete everything", "one empty"),
        Case(("a", "aa"), names, "one insertion: d = 1", "one insertion"),
        Case(("ab", "a"), names, "one deletion: d = 1", "one deletion"),
        Case(("kitten", "sitting"), names, hint, "the classic example"),
        Case((("K", "AE1", "T"), ("K", "AH0", "T", "S")), names, "sequences of phones", "phones"),
    ]
    rng = py_rng(hidden)
    for _ in range(n_random(hidden)):
        a = "".join(rng.choice("ab") for _ in range(rng.randint(0, 7)))
        b = "".join(rng.choice("abc") for _ in range(rng.randint(0, 7)))
        cases.append(Case((a, b), names, hint, "random"))
    run_check(
        "edit_distance", edit_distance, with_args(s2s.edit_distance), cases, _compare_distance,
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
            "the padded positions got weight: a masked score must be -inf before the softmax, "
            "so that exp gives it exactly 0 in eq. (att-context)",
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
    """:func:`compare_arrays`, then what the weights show: a masked position with weight, rows
    that are no distribution, or else the row that differs with its right softmax."""
    B, S = want.value.shape
    problem = compare_arrays(want.value, got, "the weights", f"(B, S) = ({B}, {S}), like scores")
    if not problem:
        return ""
    leak = masked_weight(got, want.args[1])
    if leak:
        return problem + leak
    sanity = impossible_distribution(got, name="row of weights")
    if sanity:
        return problem + sanity
    array, _ = as_array(got)
    if array is None or array.shape != (B, S) or np.isnan(array).any():
        return problem
    differ = np.argwhere(~np.isclose(array, want.value, rtol=1e-5, atol=1e-7))
    if not len(differ):
        return problem
    b = int(differ[0][0])
    return (
        f"{problem}\nhint: row {b} is a softmax over the unmasked scores of row {b} alone: "
        f"the right row is {show(want.value[b])}"
    )


def check_masked_softmax(masked_softmax: Callable, hidden: bool = False) -> None:
    """``masked_softmax(scores, mask)``: softmax over the last axis, 0 where mask is False."""
    names = ("scores", "mask")
    hint = "a_j = exp(score_j) / sum over unmasked j' of exp(score_j'), and 0 where mask is False"
    cases = [
        Case((_t([[1.0, 2.0, 3.0]]), torch.tensor([[True, True, True]])), names, hint, "no mask"),
        Case(
            (_t([[1.0, 2.0, 10.0]]), torch.tensor([[True, True, False]])),
            names,
            "the third position is padding (mask False), and its score is the largest",
            "one padded",
        ),
        Case(
            (_t([[0.5, 0.1], [3.0, -1.0]]), torch.tensor([[True, False], [True, True]])),
            names,
            "two rows, the first with one padded position",
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
    problem = compare_arrays(w, got[0], "the weights", f"(B, S) = ({B}, {S})")
    if problem:
        return problem + masked_weight(got[0], want.args[2])
    problem = compare_arrays(c, got[1], "the context", f"(B, D) = ({B}, {D})")
    if problem:
        problem += "\nhint: the weights are right: the context is sum_j a_j k_j, weights @ keys"
    return problem


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
    """:func:`compare_arrays` (the entry that differs most), then that score's inner vector
    W_1 query[b] + W_2 keys[b, j], whose tanh v weighs."""
    B, S = want.value.shape
    problem = compare_arrays(want.value, got, "the scores", f"(B, S) = ({B}, {S})")
    array, _ = as_array(got)
    if not problem or array is None or array.shape != (B, S) or np.isnan(array).any():
        return problem
    b, j = np.unravel_index(np.argmax(np.abs(array - np.asarray(want.value))), (B, S))
    query, keys, W_1, W_2, v = (np.asarray(a, dtype=float) for a in want.args)
    inner = W_1 @ query[b] + W_2 @ keys[b, j]  # (A,)
    return (
        f"{problem}\nhint: score[{b}, {j}] = v . tanh(u) with u = W_1 query[{b}] + W_2 "
        f"keys[{b}, {j}] = {show(inner)}"
    )


def check_additive_scores(additive_scores: Callable, hidden: bool = False) -> None:
    """``additive_scores(query, keys, W_1, W_2, v)``: (B, S) scores v^T tanh(W_1 s + W_2 k_j)."""
    names = ("query", "keys", "W_1", "W_2", "v")
    hint = "score[b, j] = sum_a v[a] * tanh((W_1 query[b])[a] + (W_2 keys[b, j])[a])"
    cases = [
        Case(
            (_t([[1.0]]), _t([[[-1.0], [1.0]]]), _t([[1.0]]), _t([[2.0]]), _t([1.0])),
            names,
            "one dimension: score_j = tanh(1 + 2 k_j), i.e. tanh(-1) and tanh(3)",
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
    ``<s>`` have probability 0) and ``t + 1``; past the table's last step it repeats the last.
    A message shows it as the table of probabilities it gives, so a case can be redone by hand."""

    def __init__(self, log_probs: np.ndarray):
        self.log_probs = np.asarray(log_probs, dtype=np.float64)  # (T, V, V)

    def __call__(self, y_prev: int, state: int) -> tuple[torch.Tensor, int]:
        t = min(int(state), self.log_probs.shape[0] - 1)
        return torch.as_tensor(self.log_probs[t, int(y_prev)]), int(state) + 1

    def __repr__(self) -> str:
        T, V, _ = self.log_probs.shape
        nxt = [EOS_ID, *range(3, V)]  # <pad> and <s> never come next
        width = 8
        lines = [
            "a decoder given by a table: P(next symbol | step t, previous symbol), with ids",
            f"1 = <s>, 2 = </s>; the state is t, from 0; after step {T - 1} the last repeats",
            " " * 16 + "".join(f"{'</s>' if v == EOS_ID else v:>{width}}" for v in nxt),
        ]
        for t in range(T):
            for prev in [BOS_ID] if t == 0 else range(3, V):
                probs = np.exp(self.log_probs[t, prev, nxt])
                lines.append(
                    f"t = {t}, after {'<s>' if prev == BOS_ID else prev:>3}"
                    + "".join(f"{p:>{width}.4f}" for p in probs)
                )
        return "\n".join(lines)


def random_table(rng: np.random.Generator, V: int, T: int, sharpness: float = 2.0) -> TableModel:
    logits = rng.normal(size=(T, V, V)) * sharpness
    logits[:, :, [s2s.PAD_ID, BOS_ID]] = -np.inf
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return TableModel(logp)


def _fixed_table() -> TableModel:
    """Like the book's exercise 4, with no ties: greedy takes a (0.6) then </s> (0.4), 0.24 in
    all; b </s> has 0.4 x 0.9 = 0.36, which a beam of 2 finds."""
    V = 5  # <pad> <s> </s> a b
    lp = np.full((3, V, V), -np.inf)
    lp[0, BOS_ID, 2:] = np.log([0.0001, 0.5999, 0.4])  # </s>, a, b
    for t in (1, 2):
        for y in range(V):
            lp[t, y, 2:] = np.log([0.4, 0.35, 0.25])
        lp[t, 4, 2:] = np.log([0.9, 0.06, 0.04])  # after b: </s> with 0.9
    return TableModel(lp)


def _small_table(probs: list) -> TableModel:
    """A table from ``probs[t][previous][next]``, with previous in the order (<s>, 3, 4, ...) and
    next in the order (</s>, 3, 4, ...): the row of <s> is read at t = 0, the others after."""
    V = len(probs[0][0]) + 2
    lp = np.full((len(probs), V, V), -np.inf)
    for t, rows in enumerate(probs):
        for prev, row in zip((BOS_ID, *range(3, V)), rows, strict=True):
            lp[t, prev, 2:] = np.log(row)
    return TableModel(lp)


# Visible cases on which a length penalty changes the answer and each usual mistake of beam
# search gives an answer of its own, so the visible check tells every mistake from the others
# (found by a search over small tables; tests/test_checks_seq2seq.py checks the property). No
# decision of a right search is a tie (tests/test_checks_ties.py): the second case replaces one in
# which [5, 3, 5] and [5, 5, </s>] ended with the same normalised score (0.08064), so that a right
# search that broke the tie the other way got 0 points.
# Each: (probs[t][previous][next] for _small_table, (beam_size, max_len, length_penalty)).
LENGTH_CASES: list = [
    (
        [
            [
                [0.22, 0.37, 0.32, 0.09],
                [0.16, 0.01, 0.78, 0.05],
                [0.44, 0.15, 0.17, 0.24],
                [0.8, 0.02, 0.17, 0.01],
            ],
            [
                [0.41, 0.48, 0.01, 0.1],
                [0.11, 0.2, 0.05, 0.64],
                [0.11, 0.31, 0.22, 0.36],
                [0.57, 0.33, 0.02, 0.08],
            ],
            [
                [0.47, 0.23, 0.01, 0.29],
                [0.77, 0.06, 0.1, 0.07],
                [0.01, 0.84, 0.11, 0.04],
                [0.54, 0.27, 0.14, 0.05],
            ],
        ],
        (3, 4, 1.0),
    ),
    (  # replaces a case of issue 42 where two kept hypotheses tied at the end
        [
            [
                [0.38, 0.01, 0.37, 0.24],
                [0.01, 0.6, 0.24, 0.15],
                [0.39, 0.29, 0.1, 0.22],
                [0.1, 0.24, 0.47, 0.19],
            ],
            [
                [0.12, 0.03, 0.76, 0.09],
                [0.06, 0.39, 0.47, 0.08],
                [0.01, 0.14, 0.58, 0.27],
                [0.02, 0.25, 0.69, 0.04],
            ],
            [
                [0.15, 0.5, 0.23, 0.12],
                [0.36, 0.07, 0.3, 0.27],
                [0.2, 0.15, 0.39, 0.26],
                [0.06, 0.04, 0.85, 0.05],
            ],
        ],
        (3, 4, 1.0),
    ),
    (
        [
            [[0.43, 0.01, 0.56], [0.97, 0.01, 0.02], [0.5, 0.47, 0.03]],
            [[0.05, 0.24, 0.71], [0.02, 0.01, 0.97], [0.03, 0.33, 0.64]],
            [[0.01, 0.45, 0.54], [0.96, 0.01, 0.03], [0.04, 0.42, 0.54]],
        ],
        (2, 4, 1.0),
    ),
]


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
    if not isinstance(got, (list, tuple, np.ndarray)):
        return f"expected a list of symbol ids, got {show(got)}"
    got_ids = [int(g) for g in np.asarray(got).reshape(-1)] if len(got) else []
    return "" if got_ids == list(expected) else f"expected {list(expected)}, got {got_ids}"


def _compare_greedy(want: Expected, got: Any) -> str:
    """:func:`_compare_ids`, then the first step where the ids part: the right id there and the
    probabilities of both, given the right ids before it."""
    problem = _compare_ids(want.value, got)
    if not problem or not isinstance(got, (list, tuple, np.ndarray)):
        return problem
    step, state, max_len = want.args
    mine = [int(g) for g in np.asarray(got).reshape(-1)] if len(got) else []
    right = list(want.value)
    if len(mine) > max_len:
        return f"{problem}\nhint: your output has {len(mine)} ids, more than max_len = {max_len}"
    t = next((t for t, (a, b) in enumerate(zip(right, mine, strict=False)) if a != b), None)
    if t is None:
        t = min(len(right), len(mine))
        longer = "stops" if len(mine) < len(right) else "goes on"
        return f"{problem}\nhint: your output {longer} at step {t}: the argmax there is " + (
            "</s> (id 2), where greedy stops" if len(mine) > len(right) else f"{right[t]}"
        )
    y, s = BOS_ID, state
    for prev in right[:t]:
        _, s = step(y, s)
        y = prev
    logp, _ = step(y, s)
    p = np.exp(np.asarray(logp, dtype=float))
    if not 0 <= mine[t] < len(p):
        return f"{problem}\nhint: your id {mine[t]} at step {t} is no id of the model's"
    return (
        f"{problem}\nhint: at step {t} (after {right[:t] or '<s>'}) the most probable next id is "
        f"{right[t]} (P = {p[right[t]]:.4g}); yours is {mine[t]} (P = {p[mine[t]]:.4g})"
    )


def check_greedy_decode(greedy_decode: Callable, hidden: bool = False) -> None:
    """``greedy_decode(step, state, max_len)``: the ids of the greedy output, without ``</s>``."""
    names = ("step", "state", "max_len")
    hint = "start from <s> (id 1), take the argmax each step, stop at </s> (id 2) or max_len"
    rng = np_rng(hidden)
    cases = [
        Case((_fixed_table(), 0, 5), names, "greedy takes 'a' (id 3, 0.6), then </s> (0.4)",
             "like the book's example"),
        Case((random_table(rng, 6, 4), 0, 1), names, "max_len = 1: one step of the decoder",
             "max_len 1"),
    ]  # fmt: skip
    for _ in range(n_random(hidden)):
        V, T = int(rng.integers(4, 8)), int(rng.integers(2, 6))
        cases.append(Case((random_table(rng, V, T), 0, int(rng.integers(1, 8))), names, hint,
                           "random"))  # fmt: skip
    run_check(
        "greedy_decode", greedy_decode, with_args(s2s.greedy_decode), cases, _compare_greedy,
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


def _beam_variant(
    step,
    state,
    K: int,
    L: int,
    alpha: float,
    *,
    prune: str = "sum",
    eos_counts: bool = True,
    ended_apart: bool = False,
    normalise: bool = True,
    ended_only: bool = False,
) -> tuple[list[int], float]:
    """Beam search with one deliberate change (for the mistakes): ``prune="norm"`` keeps the
    candidates with the best normalised score; ``eos_counts=False`` leaves </s> out of |y|;
    ``ended_apart`` moves an ended hypothesis out of the beam to a list of its own (its place
    goes to a live one); ``normalise=False`` returns the summed log-probability; ``ended_only``
    picks the answer among the ended hypotheses alone (where there is one)."""

    def norm(h: tuple) -> float:
        n = len(h[1]) - (0 if eos_counts or not h[3] else 1)
        return h[0] / max(n, 1) ** alpha

    beam: list[tuple] = [(0.0, [], state, False)]  # (score, symbols, state, ended?)
    done: list[tuple] = []
    for _ in range(L):
        candidates = [h for h in beam if h[3]]
        for score, ys, s, ended in beam:
            if not ended:
                logp, s_new = step(ys[-1] if ys else BOS_ID, s)
                candidates += [
                    (score + float(lp), [*ys, v], s_new, v == EOS_ID)
                    for v, lp in enumerate(logp.tolist()) if lp > -math.inf
                ]  # fmt: skip
        candidates.sort(key=lambda h: -(norm(h) if prune == "norm" else h[0]))
        beam = candidates[:K]
        if ended_apart:
            done += [h for h in beam if h[3]]
            beam = [h for h in beam if not h[3]]
            if not beam:
                break
        elif all(h[3] for h in beam):
            break
    pool = done + beam
    if ended_only and any(h[3] for h in pool):
        pool = [h for h in pool if h[3]]
    best = max(pool, key=norm)
    return [y for y in best[1] if y != EOS_ID], norm(best) if normalise else best[0]


def _beam_mistakes(step, state, beam_size, max_len, length_penalty) -> list[Mistake]:
    args = (step, state, beam_size, max_len, length_penalty)
    return [
        Mistake("the beam was pruned by the normalised score: keep the beam_size candidates with "
                "the highest SUMMED log-probability; normalise only to choose the answer at the "
                "end (eq. (beam-norm))", _beam_variant(*args, prune="norm")),
        Mistake("|y| must count the symbols including </s> (eq. (beam-norm)): an ended "
                "hypothesis of k symbols has |y| = k + 1", _beam_variant(*args, eos_counts=False)),
        Mistake("an ended hypothesis stays in the beam as a candidate and keeps its place among "
                "the beam_size best; it was moved out, so its place went to a live one",
                _beam_variant(*args, ended_apart=True)),
        Mistake("the score returned is the summed log-probability: return the normalised score "
                "score / |y|^length_penalty", _beam_variant(*args, normalise=False)),
        Mistake("the hypotheses were compared by their plain sum of log-probabilities; compare "
                "the ended ones by score / |y|^length_penalty, |y| counting </s>",
                _beam_variant(step, state, beam_size, max_len, 0.0)),
        Mistake("the answer was picked among the ended hypotheses only: at max_len the "
                "unfinished ones in the beam count too (|y| = max_len for them)",
                _beam_variant(*args, ended_only=True)),
        Mistake("that is the greedy output: the beam must keep beam_size hypotheses each step",
                (_beam_variant(step, state, 1, max_len, length_penalty)[0], None)),
    ]  # fmt: skip


def _output_score(step, state, ids: list[int], max_len: int, alpha: float) -> float | None:
    """``log P / |y|^alpha`` of the output ``ids`` (then ``</s>``, unless it has ``max_len``
    symbols), or None when it is no output of the model (an id it cannot emit, too long)."""
    symbols = list(ids) + ([EOS_ID] if len(ids) < max_len else [])
    if len(ids) > max_len or EOS_ID in ids:
        return None
    total, s, y = 0.0, state, BOS_ID
    for nxt in symbols:
        logp, s = step(y, s)
        if not 0 <= nxt < len(logp):
            return None
        total += float(logp[nxt])
        y = nxt
    return total / len(symbols) ** alpha if total > -math.inf else None


def _compare_beam_case(want: Expected, got: Any) -> str:
    """:func:`_compare_beam`, then what the answer shows: the normalised score of the student's
    own output under the model, beside the best one, or the parts of the right score."""
    problem = _compare_beam(want.value, got)
    if not problem or not isinstance(got, (tuple, list)) or len(got) != 2:
        return problem
    step, state, beam_size, max_len, alpha = want.args
    ids, score = want.value
    try:
        mine = [int(g) for g in np.asarray(got[0]).reshape(-1)] if len(got[0]) else []
    except (TypeError, ValueError):
        return problem
    own = _output_score(step, state, mine, max_len, alpha)
    n = len(ids) + (1 if len(ids) < max_len else 0)
    if mine == list(ids):
        return (
            f"{problem}\nhint: the right score is (sum of log P) / |y|^{alpha:g} with |y| = {n} "
            f"(the symbols, </s> included if the output ended) = {score:.6g}"
        )
    if own is None:
        return (
            f"{problem}\nhint: your ids are no output of the model (an id it gives P = 0, "
            "</s> inside, or more than max_len symbols)"
        )
    return (
        f"{problem}\nhint: your output's own normalised score is {own:.6g}, the right one's "
        f"{score:.6g}: "
        + (
            "the right output scores higher, and a beam of this size keeps it: check what your "
            "beam keeps at each step (the beam_size best by summed log-probability, ended "
            "hypotheses included) and how the answer is picked at the end"
            if own < score
            else "yours scores higher, but the beam search does not find it: the answer is the "
            "best of the hypotheses kept, not of every output"
        )
    )


def _compare_beam(expected: Any, got: Any) -> str:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return f"expected a pair (ids, score), got {show(got)}"
    ids, score = expected
    problem = _compare_ids(ids, got[0])
    if problem:
        return f"the ids: {problem}"
    problem = compare_numbers(score, got[1])
    return f"the ids are right, the normalised score is not: {problem}" if problem else ""


def _same_beam(a: Any, b: Any) -> bool:
    """Whether two answers agree (on the ids alone where one of them has no score)."""
    if (
        isinstance(a, (tuple, list))
        and len(a) == 2
        and isinstance(b, (tuple, list))
        and len(b) == 2
    ):
        if a[1] is None or b[1] is None:
            return _compare_ids(a[0], b[0]) == ""
    return _compare_beam(a, b) == ""


def check_beam_search(beam_search: Callable, hidden: bool = False) -> None:
    """``beam_search(step, state, beam_size, max_len, length_penalty)``: (ids, normalised score)."""
    names = ("step", "state", "beam_size", "max_len", "length_penalty")
    hint = ("keep the beam_size best hypotheses by summed log-probability; ended ones stay; at "
            "the end return the best by score / |y|^length_penalty (|y| counts </s>)")  # fmt: skip
    rng = np_rng(hidden)
    cases = [
        Case((_fixed_table(), 0, 1, 3, 0.0), names, "beam_size 1 is greedy", "K = 1"),
        Case((_fixed_table(), 0, 2, 3, 0.0), names,
             "like the book's example: a beam of 2 keeps 'b' and finds b </s> (0.36)", "K = 2"),
        *(
            Case((_small_table(t), 0, *rest), names, hint, "a length penalty")
            for t, rest in LENGTH_CASES
        ),
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
        "beam_search", beam_search, with_args(_beam_answer), cases, _compare_beam_case,
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
