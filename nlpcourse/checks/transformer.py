"""Checks for exercise 06-transformer (chapter 6): cases, answers and usual mistakes.

The machinery is :func:`nlpcourse.checks.core.run_check`'s; the expected answers come from
:mod:`nlpcourse.transformer` (whose functions refuse to run while a student's function is being
checked), and the hidden checks of attention and layer normalisation also compare against
``torch.nn.functional.scaled_dot_product_attention`` and ``torch.nn.functional.layer_norm``,
written independently of this course. For each part, this module computes what the usual
mistakes return on the failing case (softmax over the wrong axis, the mask applied after the
softmax, no ``1/sqrt(d_k)``, heads reshaped without transposing, the unbiased variance, sin and
cos swapped, ...) and names the one the student's answer matches.

Inputs are float64 torch tensors; answers may be tensors (any float dtype), numpy arrays or
nested lists: :func:`nlpcourse.checks.core.to_plain` converts them and the one tolerance policy
compares them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from nlpcourse import transformer as tf
from nlpcourse.checks.core import (
    Case,
    Expected,
    Mistake,
    as_array,
    compare_arrays,
    masked_weight,
    n_random,
    np_rng,
    run_check,
    show,
    with_args,
)


def _t(a: Any) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a, dtype=float), dtype=torch.float64)


def _rand(rng: np.random.Generator, *shape: int) -> torch.Tensor:
    return _t(np.round(rng.normal(size=shape), 3))


# ------------------------------------------------------------------------------ part 1: attention


def _attention_variants(q, k, v, mask, scale=None, axis=-1, fill=None, after=False, invert=False):
    """Attention computed with one deliberate change (for the mistakes)."""
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / (math.sqrt(d_k) if scale is None else scale)
    m = None if mask is None else (~mask if invert else mask)
    if m is not None and not after:
        scores = scores.masked_fill(~m, torch.finfo(scores.dtype).min if fill is None else fill)
    alpha = torch.softmax(scores, dim=axis)
    if m is not None and after:
        alpha = alpha * m
    return alpha @ v, alpha


def _attention_mistakes(q, k, v, mask=None) -> list[Mistake]:
    d_k = q.shape[-1]
    wrong_axis = (
        "the softmax runs over the wrong axis: each query's weights over the keys must sum "
        "to 1, so take the softmax over the last axis (dim=-1), not dim=-2"
    )
    out = [
        Mistake(wrong_axis, _attention_variants(q, k, v, mask, axis=-2)),
        # the same mistake with the masked scores at -inf: a key masked for every query gets nan
        Mistake(wrong_axis, _attention_variants(q, k, v, mask, axis=-2, fill=-math.inf)),
        Mistake(
            "the scores are not divided by sqrt(d_k): omega = q k^T / sqrt(d_k), eq. (tf-scores)",
            _attention_variants(q, k, v, mask, scale=1.0),
        ),
        Mistake(
            "the scores are divided by d_k; divide by its square root, sqrt(d_k)",
            _attention_variants(q, k, v, mask, scale=float(d_k)),
        ),
        Mistake(
            "the scores are divided by sqrt(d_v), the width of the values: divide by sqrt(d_k), "
            "the width of the queries and keys (q.shape[-1])",
            _attention_variants(q, k, v, mask, scale=math.sqrt(v.shape[-1])),
        ),
    ]
    if mask is not None:
        out += [
            Mistake(
                "the mask is applied after the softmax: the remaining weights no longer sum to "
                "1. Set the masked scores to -inf (or the dtype's minimum) BEFORE the softmax",
                _attention_variants(q, k, v, mask, after=True),
            ),
            Mistake(
                "the mask is read the wrong way round: True means the query MAY attend to the "
                "key, so fill the scores where the mask is False",
                _attention_variants(q, k, v, mask, invert=True),
            ),
            Mistake(
                "masked scores set to 0 still get weight exp(0) = 1 before normalising: a masked "
                "key must get weight 0 in the softmax of eq. (tf-softmax)",
                _attention_variants(q, k, v, mask, fill=0.0),
            ),
        ]
    z, alpha = tf.scaled_dot_product_attention(q, k, v, mask)
    out.append(
        Mistake("the two results are in the other order: return (output, weights)", (alpha, z))
    )
    return out


def _compare_attention(want: Expected, got: Any) -> str:
    z, alpha = want.value
    if not isinstance(got, list | tuple) or len(got) != 2:
        return (
            "return a pair (output, weights): the context vectors (..., T_q, d_v) and the "
            f"attention weights (..., T_q, T_k); got {type(got).__name__}"
        )
    problem = compare_arrays(alpha, got[1], "the weights (second result)", "(..., T_q, T_k)")
    mask = want.args[3]
    if problem:
        leak = masked_weight(got[1], mask, "the weights")
        if leak:
            return problem + leak
        array, _ = as_array(got[1])
        if array is not None and array.shape == np.shape(alpha) and not np.isnan(array).any():
            sums = array.sum(axis=-1)
            if not np.allclose(sums, 1.0, atol=1e-6):
                where = tuple(int(i) for i in np.argwhere(~np.isclose(sums, 1.0, atol=1e-6))[0])
                return (
                    f"{problem}\nhint: the weights of query {list(where)} sum to "
                    f"{float(sums[where]):.6g}: each query's weights over the keys sum to 1 "
                    "(a softmax over the last axis)"
                )
        elif array is not None and np.isnan(array).any() and mask is not None:
            return (
                f"{problem}\nhint: nan comes from a softmax whose scores are all -inf: is "
                "every key of some query masked? The mask is True where a query MAY attend, so "
                "fill the scores where it is False"
            )
        where = _worst(alpha, got[1])
        if where is None:
            return problem
        row = where[:-1]
        return (
            f"{problem}\nhint: the weights of query {list(row)} are the softmax over the keys of "
            f"q k^T / sqrt(d_k), d_k = {want.args[0].shape[-1]}: the right row is "
            f"{show(np.asarray(alpha, dtype=float)[row])}"
        )
    problem = compare_arrays(z, got[0], "the output (first result)", "(..., T_q, d_v)")
    if problem:
        problem += "\nhint: the weights are right: the output is weights @ v"
    return problem


def _attention_torch(q, k, v, mask=None) -> Expected:
    """The expected answer from torch's own kernel (hidden cases): independent of this course."""
    z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    return Expected((z, torch.softmax(scores, dim=-1)), (q, k, v, mask))


def _random_mask(rng: np.random.Generator, shape: tuple[int, ...]) -> torch.Tensor:
    mask = torch.as_tensor(rng.random(shape) < 0.6)
    mask[..., 0] = True  # every query may attend to at least one key
    return mask


def check_scaled_dot_product_attention(function: Callable, hidden: bool = False) -> None:
    """``scaled_dot_product_attention(q, k, v, mask=None)`` -> (output, weights), eq.
    (tf-attention); ``mask`` boolean, True = may attend."""
    names = ("q", "k", "v", "mask")
    rule = "weights = softmax(q k^T / sqrt(d_k)) over the keys; output = weights @ v"
    cases = [
        Case(
            (_t([[1, 1, 1, 1]]), _t([[0, 0, 0, 0], [1, 1, 1, 1]]), _t([[10, 1], [20, 2]]), None),
            names,
            "one query, two keys of d_k = 4, values of d_v = 2: scores 0 and 4 / sqrt(4) = 2, "
            + rule,
            "a small example by hand",
        ),
        Case(
            (
                _t([[1, 0], [0, 1], [1, 1]]),
                _t([[1, 0], [0, 2], [1, -1]]),
                _t([[1, 2], [3, 4], [5, 6]]),
                None,
            ),
            names,
            rule,
        ),
        Case(
            (
                _t([[0.5, -1], [1, 0], [0, 1]]),
                _t([[1, 0], [0, 1], [1, 1]]),
                _t([[1, 0, 0], [0, 1, 0], [0, 0, 1]]),
                tf.causal_mask(3),
            ),
            names,
            "a causal mask: query i may attend to keys j <= i only (mask True = may attend)",
            "causal mask",
        ),
    ]
    rng = np_rng(hidden)
    for r in range(n_random(hidden)):
        B, H = int(rng.integers(1, 3)), int(rng.integers(1, 4))
        T_q, T_k, d_k, d_v = (int(rng.integers(1, 6)) for _ in range(4))
        q, k, v = _rand(rng, B, H, T_q, d_k), _rand(rng, B, H, T_k, d_k), _rand(rng, B, H, T_k, d_v)
        mask = None if r % 2 == 0 else _random_mask(rng, (B, 1, T_q, T_k))
        hint = "batched: q (B, H, T_q, d_k); the mask broadcasts over the heads. " + rule
        cases.append(Case((q, k, v, mask), names, hint, "random, batched"))
    reference = _attention_torch if hidden else with_args(tf.scaled_dot_product_attention)
    run_check(
        "scaled_dot_product_attention",
        function,
        reference,
        cases,
        _compare_attention,
        mistakes=_attention_mistakes,
    )


# ---------------------------------------------------------------------------- part 2: causal mask


def _compare_mask(want: torch.Tensor, got: Any) -> str:
    want = np.asarray(want, dtype=bool)
    if got is None:
        return "the answer is None: did you forget to `return` it?"
    try:
        array = np.asarray(got)
    except (TypeError, ValueError):
        return f"expected a (T, T) boolean array, got {type(got).__name__}"
    if array.dtype.kind not in "biuf":
        return f"expected a (T, T) boolean array, got an array of {array.dtype}"
    if array.shape != want.shape:
        return f"the mask has shape {array.shape}, expected {want.shape} (T, T)"
    additive = "An additive mask of 0 and -inf is another convention; this part asks for booleans"
    if array.dtype.kind == "f" and np.isin(array, (0.0, -np.inf)).all():
        return f"the mask holds only 0 and -inf: the additive form. {additive}, True = may attend."
    if array.dtype.kind != "b" and not np.isin(array, (0, 1)).all():
        return (
            "the mask should be booleans, True (or 1) where query i may attend to key j; got "
            f"other values, e.g. {array[~np.isin(array, (0, 1))][0]!r}. ({additive}.)"
        )
    if (array.astype(bool) == want).all():
        return ""
    i, j = (int(x) for x in np.argwhere(array.astype(bool) != want)[0])
    return f"entry [{i}, {j}] (query {i}, key {j}) should be {bool(want[i, j])}"


def _same_mask(a: Any, b: Any) -> bool:
    """Whether two masks (booleans, or numbers 0 and 1) are the same matrix."""
    try:
        a, b = np.asarray(a), np.asarray(b)
    except (TypeError, ValueError):
        return False
    return a.shape == b.shape and bool((a.astype(bool) == b.astype(bool)).all())


def _causal_mistakes(T: int) -> list[Mistake]:
    ones = torch.ones(T, T, dtype=torch.bool)
    return [
        Mistake(
            "the mask is transposed: query i (row i) may attend to keys j <= i (the lower "
            "triangle), not to the later ones",
            ones.triu(),
        ),
        Mistake(
            "the diagonal is missing: a position may attend to itself (j <= i, not j < i)",
            ones.tril(-1),
        ),
        Mistake(
            "True must mark what a query MAY attend to (j <= i): this is the opposite mask",
            ~ones.tril(),
        ),
    ]


def check_causal_mask(function: Callable, hidden: bool = False) -> None:
    """``causal_mask(T)`` -> (T, T) booleans, True where j <= i."""
    hint = "mask[i, j] is True when query i may attend to key j, i.e. when j <= i"
    cases = [Case((T,), ("T",), hint) for T in (1, 2, 4)]
    rng = np_rng(hidden)
    cases += [Case((int(rng.integers(3, 40)),), ("T",), hint) for _ in range(n_random(hidden))]
    run_check(
        "causal_mask",
        function,
        tf.causal_mask,
        cases,
        _compare_mask,
        mistakes=_causal_mistakes,
        same=_same_mask,
    )


# ---------------------------------------------------------------------- part 3: split and merge


def _split_mistakes(x, H) -> list[Mistake]:
    B, T, D = x.shape
    return [
        Mistake(
            "the heads were made by a reshape alone, which keeps the memory order, so a 'head' "
            "mixes several positions: head h holds features h*D/H .. (h+1)*D/H - 1 of every "
            "position, so cut each position's features into H pieces first, and put the head "
            "axis before the position axis after",
            x.reshape(B, H, T, D // H),
        ),
        Mistake(
            "the last two axes are swapped: the result is (B, H, T, D/H), positions before "
            "features",
            x.reshape(B, T, H, D // H).permute(0, 2, 3, 1),
        ),
        Mistake(
            "the features are cut the wrong way: head h gets features h*D/H .. (h+1)*D/H - 1 "
            "(view as (B, T, H, D/H)), not every H-th feature",
            x.reshape(B, T, D // H, H).permute(0, 3, 1, 2),
        ),
    ]


def _worst(want: Any, got: Any) -> tuple[int, ...] | None:
    """The index of the entry of ``got`` that differs most from ``want`` (same shape, no nan), or
    None."""
    array, _ = as_array(got)
    want = np.asarray(want, dtype=float)
    if array is None or array.shape != want.shape or np.isnan(array).any():
        return None
    return tuple(int(i) for i in np.unravel_index(np.argmax(np.abs(array - want)), want.shape))


def _compare_split(want: Expected, got: Any) -> str:
    """:func:`compare_arrays`, then where the entry that differs most comes from in ``x``."""
    problem = compare_arrays(want.value, got, "the answer", "(B, H, T, D/H)")
    where = _worst(want.value, got) if problem else None
    if where is None:
        return problem
    b, h, t, f = where
    x, H = want.args
    Dh = x.shape[-1] // H
    return (
        f"{problem}\nhint: entry [{b}, {h}, {t}, {f}] is feature {f} of head {h} at position "
        f"{t}: x[{b}, {t}, {h * Dh + f}] (head h holds features h*D/H .. (h+1)*D/H - 1, D/H = "
        f"{Dh})"
    )


def check_split_heads(function: Callable, hidden: bool = False) -> None:
    """``split_heads(x, H)``: (B, T, D) -> (B, H, T, D/H)."""
    names = ("x", "H")
    hint = "head h holds features h*D/H .. (h+1)*D/H - 1 of every position: (B, H, T, D/H)"
    cases = [
        Case((_t(np.arange(4.0).reshape(1, 1, 4)), 2), names, hint, "one position"),
        Case((_t(np.arange(12.0).reshape(1, 3, 4)), 2), names, hint),
        Case((_t(np.arange(24.0).reshape(2, 3, 4)), 4), names, hint, "head width 1"),
    ]
    rng = np_rng(hidden)
    for _ in range(n_random(hidden)):
        B, T, H, Dh = (int(rng.integers(1, 5)) for _ in range(4))
        cases.append(Case((_rand(rng, B, T, H * Dh), H), names, hint, "random"))
    run_check(
        "split_heads",
        function,
        with_args(tf.split_heads),
        cases,
        _compare_split,
        mistakes=_split_mistakes,
    )


def _merge_mistakes(x) -> list[Mistake]:
    B, H, T, Dh = x.shape
    return [
        Mistake(
            "the heads were merged by a reshape alone, which keeps the memory order, so a "
            "position's D features come from several positions: position t's features are its "
            "H heads' pieces side by side, so bring the heads of one position together first",
            x.reshape(B, T, H * Dh),
        ),
    ]


def _compare_merge(want: Expected, got: Any) -> str:
    """:func:`compare_arrays`, then where the entry that differs most comes from in ``x``."""
    problem = compare_arrays(want.value, got, "the answer", "(B, T, D) with D = H * D/H")
    where = _worst(want.value, got) if problem else None
    if where is None:
        return problem
    b, t, f = where
    (x,) = want.args
    Dh = x.shape[-1]
    return (
        f"{problem}\nhint: entry [{b}, {t}, {f}] is feature {f % Dh} of head {f // Dh} at "
        f"position {t}: x[{b}, {f // Dh}, {t}, {f % Dh}] (D/H = {Dh}, head 0 first)"
    )


def check_merge_heads(function: Callable, hidden: bool = False) -> None:
    """``merge_heads(x)``: (B, H, T, D/H) -> (B, T, D), the inverse of ``split_heads``."""
    hint = "the inverse of split_heads: position t's D features are its H heads' D/H features "
    hint += "side by side, head 0 first"
    cases = [
        Case((_t(np.arange(4.0).reshape(1, 2, 1, 2)),), ("x",), hint, "one position"),
        Case((_t(np.arange(12.0).reshape(1, 2, 3, 2)),), ("x",), hint),
    ]
    rng = np_rng(hidden)
    for _ in range(n_random(hidden)):
        B, T, H, Dh = (int(rng.integers(1, 5)) for _ in range(4))
        cases.append(Case((_rand(rng, B, H, T, Dh),), ("x",), hint, "random"))
    run_check(
        "merge_heads",
        function,
        with_args(tf.merge_heads),
        cases,
        _compare_merge,
        mistakes=_merge_mistakes,
    )


# ------------------------------------------------------------------------- part 4: layer norm


def _layer_norm_mistakes(x, gamma, beta, eps=1e-5) -> list[Mistake]:
    mu = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    out = [
        Mistake(
            "the variance is the unbiased one (divided by D - 1): layer norm's variance is the "
            "mean of the squared deviations, divided by D, eq. (tf-ln-stats)",
            gamma * (x - mu) / torch.sqrt(x.var(dim=-1, keepdim=True) + eps) + beta,
        ),
        Mistake(
            "eps is added outside the square root: use sqrt(var + eps)",
            gamma * (x - mu) / (torch.sqrt(var) + eps) + beta,
        ),
        Mistake(
            "gamma and beta are left out: LN(x) = gamma * (x - mu) / sqrt(var + eps) + beta",
            (x - mu) / torch.sqrt(var + eps),
        ),
        Mistake(
            "x - mu is divided by the variance (var + eps); divide by its square root, "
            "sqrt(var + eps), eq. (tf-ln)",
            gamma * (x - mu) / (var + eps) + beta,
        ),
        Mistake(
            "the standard deviation is used where the variance belongs: the formula takes "
            "sqrt(var + eps), not sqrt(std + eps), eq. (tf-ln)",
            gamma * (x - mu) / torch.sqrt(torch.sqrt(var) + eps) + beta,
        ),
    ]
    if x.ndim > 1 and x.shape[0] > 1:
        mu0 = x.mean(dim=0, keepdim=True)
        var0 = x.var(dim=0, keepdim=True, unbiased=False)
        out.append(
            Mistake(
                "the statistics are taken over the batch (axis 0), as batch norm does: layer "
                "norm normalises each vector over its own D features (the last axis)",
                gamma * (x - mu0) / torch.sqrt(var0 + eps) + beta,
            )
        )
    return out


def _layer_norm_torch(x, gamma, beta, eps=1e-5) -> Expected:
    return Expected(F.layer_norm(x, x.shape[-1:], gamma, beta, eps), (x, gamma, beta, eps))


def _compare_ln(want: Expected, got: Any) -> str:
    """:func:`compare_arrays`, then the statistics of the vector of the entry that differs most
    (its mean and biased variance over the last axis)."""
    problem = compare_arrays(want.value, got, "the answer", "the same shape as x")
    where = _worst(want.value, got) if problem else None
    if where is None:
        return problem
    x, gamma, beta, eps = want.args
    row = np.asarray(x, dtype=float)[where[:-1]]
    return (
        f"{problem}\nhint: the vector x{list(where[:-1]) if where[:-1] else ''} has mean "
        f"{row.mean():.6g} and variance {row.var():.6g} (the mean of the squared deviations, "
        f"over its {row.size} features); entry {where[-1]} is gamma[{where[-1]}] * (x - mean) / "
        f"sqrt(variance + eps) + beta[{where[-1]}]"
    )


def check_layer_norm(function: Callable, hidden: bool = False) -> None:
    """``layer_norm(x, gamma, beta, eps)``, eqs. (tf-ln-stats) and (tf-ln)."""
    names = ("x", "gamma", "beta", "eps")
    hint = "over the last axis: mu, biased variance; gamma * (x - mu) / sqrt(var + eps) + beta"
    cases = [
        Case((_t([1, 2, 3]), _t([1, 1, 1]), _t([0, 0, 0]), 1e-5), names, hint, "one vector"),
        Case((_t([[1, 2, 3], [0, 0, 6]]), _t([2, 1, 0.5]), _t([0, 1, -1]), 1e-5), names, hint),
        Case(
            (_t([[4, 4, 4, 4]]), _t([1, 2, 3, 4]), _t([1, 2, 3, 4]), 0.1),
            names,
            "a constant vector: x - mu = 0, so the result is beta",
            "variance 0",
        ),
    ]
    rng = np_rng(hidden)
    for _ in range(n_random(hidden)):
        B, T, D = (int(rng.integers(2, 6)) for _ in range(3))
        args = (_rand(rng, B, T, D) * 3 + 1, _rand(rng, D), _rand(rng, D), 1e-5)
        cases.append(Case(args, names, hint, "random (B, T, D)"))
    reference = _layer_norm_torch if hidden else with_args(tf.layer_norm)
    run_check("layer_norm", function, reference, cases, _compare_ln, mistakes=_layer_norm_mistakes)


# ---------------------------------------------------------------- part 5: sinusoidal encoding


def _pe_variant(T: int, D: int, swap=False, halves=False, exponent=2.0) -> torch.Tensor:
    t = torch.arange(T, dtype=torch.float64)[:, None]  # (T, 1)
    i = torch.arange(D // 2, dtype=torch.float64)  # (D/2,)
    angle = t / 10000 ** (exponent * i / D)  # (T, D/2)
    first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    if halves:
        return torch.cat([first(angle), second(angle)], dim=1)  # (T, D)
    pe = torch.zeros(T, D, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = first(angle), second(angle)
    return pe


def _pe_mistakes(T: int, D: int) -> list[Mistake]:
    return [
        Mistake(
            "sin and cos are swapped: even features (0, 2, ...) get sin",
            _pe_variant(T, D, swap=True),
        ),
        Mistake(
            "sin and cos are interleaved: feature 2i is sin, feature 2i+1 is cos (not the sines "
            "in the first half and the cosines in the second)",
            _pe_variant(T, D, halves=True),
        ),
        Mistake(
            "the frequency of pair i is 1 / 10000^(2i/D), where 2i is the even feature's index; "
            "you used 10000^(i/D)",
            _pe_variant(T, D, exponent=1.0),
        ),
        Mistake(
            "the frequency of pair i is 1 / 10000^(2i/D) with i = 0, 1, ..., D/2 - 1 the pair's "
            "number; you used the feature's index (2i) in place of i",
            _pe_variant(T, D, exponent=4.0),
        ),
    ]


PE_ATOL = 1e-4  # see _compare_pe


def _compare_pe(want: Any, got: Any) -> str:
    """The one tolerance policy, or an absolute difference of at most ``PE_ATOL``: a float32
    answer rounds the angle t * omega_i to about 1e-7 of its size, so sin and cos of it can be off
    by about t * 1e-7 (1e-5 at t = 100), more than the relative tolerance allows for values near
    0. Every known mistake is off by far more than 1e-4."""
    array, problem = as_array(got)
    if array is None:
        return problem
    want = np.asarray(want, dtype=float)
    if array.shape == want.shape and np.all(np.abs(array - want) <= PE_ATOL):
        return ""
    problem = compare_arrays(want, array, "the encoding", "(T, D)")
    where = _worst(want, array)
    if where is None:
        return problem
    t, k = where
    D = want.shape[1]
    i = k // 2
    return (
        f"{problem}\nhint: PE[{t}, {k}] is the {'sin' if k % 2 == 0 else 'cos'} of pair i = "
        f"{i}: {'sin' if k % 2 == 0 else 'cos'}({t} / 10000^({2 * i}/{D}))"
    )


def check_sinusoidal_encoding(function: Callable, hidden: bool = False) -> None:
    """``sinusoidal_encoding(T, D)`` -> (T, D), eq. (tf-pe)."""
    hint = "PE[t, 2i] = sin(t / 10000^(2i/D)), PE[t, 2i+1] = cos(t / 10000^(2i/D))"
    cases = [
        Case((1, 2), ("T", "D"), "position 0: sin(0) = 0, cos(0) = 1", "T = 1"),
        Case((3, 2), ("T", "D"), hint),
        Case((4, 8), ("T", "D"), hint),
    ]
    rng = np_rng(hidden)
    for _ in range(n_random(hidden)):
        cases.append(
            Case((int(rng.integers(2, 60)), 2 * int(rng.integers(1, 33))), ("T", "D"), hint)
        )
    run_check(
        "sinusoidal_encoding",
        function,
        lambda T, D: _pe_variant(T, D) if hidden else tf.sinusoidal_encoding(T, D),
        cases,
        _compare_pe,
        mistakes=_pe_mistakes,
    )
