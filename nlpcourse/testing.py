"""Oracles shared by the tests and the exercise checks: independent ways to get the right answer.

Each oracle computes what a package function computes by another route, sharing no code with it,
so that the tests (``tests/``) and the checks (:mod:`nlpcourse.checks`) compare against something
that does not inherit the package's bugs (the habit of minitorch's ``testing.py``):

* :func:`brute_force`: an HMM's best tag sequence, ``log P(words)`` and posteriors by listing all
  ``N**T`` tag sequences (chapter 2; the dynamic programs are checked against it).
* :func:`random_hmm`: random HMM tables in log space, some entries ``-inf``.
* :func:`rnn_forward_np`, :func:`rnn_loss_np`, :func:`finite_difference`: chapter 4's numpy RNN
  forward pass, its loss, and a central difference of the loss (the oracle of BPTT).
* :func:`lstm_step_np`, :func:`gru_step_np`: one LSTM or GRU step in numpy, in torch's layout
  (gate blocks ``i, f, g, o`` and ``r, z, n``), or with a named variation (another block order,
  the textbook GRU of Cho et al. 2014, ...), which the checks use to name a student's mistake.

Every oracle is marked :func:`nlpcourse.guard.reference`: while a check runs a student's function,
it refuses to run, like the package's own functions.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from nlpcourse.guard import reference


def _log(p: Any) -> np.ndarray:
    """Natural log with log(0) = -inf and no warning."""
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(p, dtype=float))


def _sigmoid(a: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-a))


# ------------------------------------------------------------------------------ chapter 2: HMMs


@reference
def brute_force(
    log_start: np.ndarray, log_trans: np.ndarray, log_emit: np.ndarray
) -> dict[str, Any]:
    """Score every one of the N**T tag sequences: the best one, log P(words) and the posteriors.

    Returns ``{"path", "best", "second", "loglik", "posterior"}``: the best path (the first in
    ``itertools.product`` order among equals), its log probability, the second-best log probability
    (``-inf`` if there is none), ``log P(words)`` and the ``(T, N)`` posteriors (``None`` when
    ``P(words) = 0``). Only for small HMMs: it builds an ``(N**T, T)`` array.
    """
    T, N = log_emit.shape
    paths = np.array(list(itertools.product(range(N), repeat=T)))  # (N**T, T)
    scores = log_start[paths[:, 0]] + log_emit[np.arange(T), paths].sum(axis=1)  # (N**T,)
    scores = scores + log_trans[paths[:, :-1], paths[:, 1:]].sum(axis=1)
    order = np.argsort(-scores, kind="stable")
    best = scores[order[0]]
    second = scores[order[1]] if len(order) > 1 else -math.inf
    if best == -math.inf:
        return {"path": paths[0], "best": best, "second": second, "loglik": best, "posterior": None}
    probs = np.exp(scores - best)  # (N**T,) relative to the best path: no underflow
    loglik = best + math.log(probs.sum())
    posterior = np.zeros((T, N))  # (T, N)
    for t in range(T):
        np.add.at(posterior[t], paths[:, t], probs)
    posterior /= probs.sum()
    return {
        "path": paths[order[0]],
        "best": float(best),
        "second": float(second),
        "loglik": float(loglik),
        "posterior": posterior,
    }


def _distribution(rng: np.random.Generator, shape: tuple[int, ...], p_zero: float) -> np.ndarray:
    """Random probability rows (last axis sums to 1), each entry 0 with probability ``p_zero``
    but never a whole row."""
    p = rng.dirichlet(np.ones(shape[-1]), size=shape[:-1])
    zero = rng.random(p.shape) < p_zero
    zero[..., 0] &= ~zero[..., 1:].all(axis=-1) if shape[-1] > 1 else False
    p[zero] = 0.0
    return p / p.sum(axis=-1, keepdims=True)


def random_hmm(
    rng: np.random.Generator, N: int, T: int, p_zero: float = 0.0, n_words: int = 8
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random ``(log_start, log_trans, log_emit)`` for a sentence of ``T`` words drawn from
    ``n_words`` word types; each probability is 0 (log -inf) with probability ``p_zero``."""
    log_start = _log(_distribution(rng, (N,), p_zero))  # (N,)
    log_trans = _log(_distribution(rng, (N, N), p_zero))  # (N, N)
    emit_table = _distribution(rng, (N, n_words), p_zero).T  # (V, N): P(word v | tag j)
    log_emit = _log(emit_table[rng.integers(0, n_words, size=T)])  # (T, N)
    return log_start, log_trans, log_emit


# ------------------------------------------------------------------------------ chapter 4: RNNs


@reference
def rnn_forward_np(
    x: np.ndarray, h0: np.ndarray, params: dict[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """The RNN of eqs. (rnn-h), (rnn-y) step by step: ``hs`` (T+1, H) with ``h0`` first, and
    ``y_hat`` (T, V)."""
    hs = [h0]
    y_hat = []
    for x_t in x:  # x: (T, D)
        hs.append(np.tanh(params["W_xh"] @ x_t + params["W_hh"] @ hs[-1] + params["b_h"]))
        o = params["W_hy"] @ hs[-1] + params["b_y"]  # (V,)
        y_hat.append(np.exp(o - o.max()) / np.exp(o - o.max()).sum())
    return np.array(hs), np.array(y_hat)


@reference
def rnn_loss_np(
    x: np.ndarray, targets: np.ndarray, h0: np.ndarray, params: dict[str, np.ndarray]
) -> float:
    """Eq. (rnn-loss), the summed cross-entropy, with :func:`rnn_forward_np`."""
    _, y_hat = rnn_forward_np(x, h0, params)
    return float(-np.log(y_hat[np.arange(len(targets)), targets]).sum())


@reference
def finite_difference(
    x: np.ndarray,
    targets: np.ndarray,
    h0: np.ndarray,
    params: dict[str, np.ndarray],
    name: str,
    index: tuple,
    eps: float = 1e-6,
) -> float:
    """dL/d params[name][index] by the central difference (L(w + eps) - L(w - eps)) / (2 eps)."""
    params = {k: np.array(v, dtype=float) for k, v in params.items()}
    old = params[name][index]
    params[name][index] = old + eps
    up = rnn_loss_np(x, targets, h0, params)
    params[name][index] = old - eps
    down = rnn_loss_np(x, targets, h0, params)
    return (up - down) / (2 * eps)


@reference
def lstm_step_np(
    x_t: np.ndarray,
    h_prev: np.ndarray,
    c_prev: np.ndarray,
    weight_ih: np.ndarray,
    weight_hh: np.ndarray,
    bias_ih: np.ndarray,
    bias_hh: np.ndarray,
    order: str = "ifgo",
    variation: str = "",
) -> tuple[np.ndarray, np.ndarray]:
    """One LSTM step, ``(h_t, c_t)`` each (B, H), reading the four row blocks of the weights as
    the gates named by ``order`` (torch: ``"ifgo"``). ``variation``: ``""`` (the LSTM),
    ``"no-tanh-c"`` (h_t = o_t * c_t) or ``"sigmoid-g"`` (a sigmoid candidate)."""
    a = x_t @ weight_ih.T + bias_ih + h_prev @ weight_hh.T + bias_hh  # (B, 4H)
    gate = dict(zip(order, np.split(a, 4, axis=1), strict=True))  # four (B, H) blocks
    i, f, o = _sigmoid(gate["i"]), _sigmoid(gate["f"]), _sigmoid(gate["o"])
    g = _sigmoid(gate["g"]) if variation == "sigmoid-g" else np.tanh(gate["g"])
    c_t = f * c_prev + i * g
    h_t = o * (c_t if variation == "no-tanh-c" else np.tanh(c_t))
    return h_t, c_t


@reference
def gru_step_np(
    x_t: np.ndarray,
    h_prev: np.ndarray,
    weight_ih: np.ndarray,
    weight_hh: np.ndarray,
    bias_ih: np.ndarray,
    bias_hh: np.ndarray,
    order: str = "rzn",
    variation: str = "",
) -> np.ndarray:
    """One GRU step, h_t (B, H), in torch's form, reading the three row blocks as the gates named
    by ``order`` (torch: ``"rzn"``). ``variation``: ``""`` (torch's GRU), ``"textbook"`` (Cho et
    al. 2014: r_t multiplies h_{t-1} before W_hn), ``"r-not-on-bias"`` (r_t leaves out b_hn) or
    ``"z-swapped"`` (z_t weighs the candidate)."""
    W_h = dict(zip(order, np.split(weight_hh, 3), strict=True))  # three (H, H) blocks
    b_h = dict(zip(order, np.split(bias_hh, 3), strict=True))
    wx = dict(zip(order, np.split(x_t @ weight_ih.T + bias_ih, 3, axis=1), strict=True))  # (B, H)
    r = _sigmoid(wx["r"] + h_prev @ W_h["r"].T + b_h["r"])
    z = _sigmoid(wx["z"] + h_prev @ W_h["z"].T + b_h["z"])
    if variation == "textbook":
        n = np.tanh(wx["n"] + (r * h_prev) @ W_h["n"].T + b_h["n"])
    elif variation == "r-not-on-bias":
        n = np.tanh(wx["n"] + r * (h_prev @ W_h["n"].T) + b_h["n"])
    else:
        n = np.tanh(wx["n"] + r * (h_prev @ W_h["n"].T + b_h["n"]))
    if variation == "z-swapped":
        return z * n + (1 - z) * h_prev
    return (1 - z) * n + z * h_prev


def copy_from_torch_mha(ours: Any, theirs: Any) -> None:
    """Copy the weights of a ``torch.nn.MultiheadAttention`` into our
    :class:`nlpcourse.transformer.MultiHeadAttention` (the same function after).

    torch keeps the three input projections stacked in ``in_proj_weight`` (3D, D), in the order
    query, key, value, and the output projection in ``out_proj``.
    """
    import torch

    D = ours.D
    with torch.no_grad():
        for i, lin in enumerate((ours.W_q, ours.W_k, ours.W_v)):
            lin.weight.copy_(theirs.in_proj_weight[i * D : (i + 1) * D])
            if lin.bias is not None:
                lin.bias.copy_(theirs.in_proj_bias[i * D : (i + 1) * D])
        ours.W_o.weight.copy_(theirs.out_proj.weight)
        if ours.W_o.bias is not None:
            ours.W_o.bias.copy_(theirs.out_proj.bias)


def copy_from_torch_layer(ours: Any, theirs: Any) -> None:
    """Copy a ``torch.nn.TransformerEncoderLayer`` or ``TransformerDecoderLayer``'s weights into
    our :class:`nlpcourse.transformer.Block` or ``DecoderLayer`` (the same names, but the
    attention projections, which :func:`copy_from_torch_mha` unstacks)."""
    import torch
    from torch import nn

    from nlpcourse.transformer import DecoderLayer

    copy_from_torch_mha(ours.self_attn, theirs.self_attn)
    if isinstance(ours, DecoderLayer):
        assert isinstance(theirs, nn.TransformerDecoderLayer), "a decoder layer copies a decoder"
        copy_from_torch_mha(ours.multihead_attn, theirs.multihead_attn)
    norms = ("norm1", "norm2", "norm3") if isinstance(ours, DecoderLayer) else ("norm1", "norm2")
    with torch.no_grad():
        for name in ("linear1", "linear2"):
            getattr(ours.ff, name).weight.copy_(getattr(theirs, name).weight)
            getattr(ours.ff, name).bias.copy_(getattr(theirs, name).bias)
        for name in norms:
            getattr(ours, name).weight.copy_(getattr(theirs, name).weight)
            getattr(ours, name).bias.copy_(getattr(theirs, name).bias)
