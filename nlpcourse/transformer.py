"""Self-attention, multi-head attention and the transformer (chapter 6).

Based on Vaswani et al. (2017), "Attention is all you need", for scaled dot-product attention,
multi-head attention, the sinusoidal positional encoding and the encoder-decoder transformer with
post-LN blocks; Ba, Kiros & Hinton (2016) for layer normalisation; Radford et al. (2019, GPT-2) and
Xiong et al. (2020) for the pre-LN block; Holtzman et al. (2020) for nucleus (top-p) sampling;
Jurafsky & Martin, *Speech and Language Processing* (3rd ed. draft), chapter "Transformers".
Equation labels ``(tf-...)`` are the book's (``book/transformer.md``). Shape letters: ``B`` batch,
``T`` time steps (``T_q`` queries, ``T_k`` keys), ``D`` model width (d_model), ``H`` heads,
``D/H`` the width of one head (d_k), ``V`` vocabulary size.

1. **Scaled dot-product attention** (:func:`scaled_dot_product_attention`, with the readable loop
   :func:`scaled_dot_product_attention_loop` beside it)::

       omega_ij = q_i . k_j                                                (tf-scores)
       alpha_ij = exp(omega_ij / sqrt(d_k)) / sum_j' exp(omega_ij' / sqrt(d_k))   (tf-softmax)
       z_i = sum_j alpha_ij v_j                                            (tf-context)

   i.e. ``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V``              (tf-attention).
   A boolean ``mask`` says which key each query may attend to (**True = may attend**, the
   convention of ``torch.nn.functional.scaled_dot_product_attention``;
   ``torch.nn.MultiheadAttention`` uses the opposite one). Forbidden scores are set to the
   dtype's most negative number before the softmax, so their weight is exactly 0; a query that
   may attend to nothing gets all-zero weights and a zero output instead of NaN.
   :func:`fused_attention` computes the same context vectors (not the weights) by torch's fused
   kernel ``F.scaled_dot_product_attention``; the tests hold the three equal.

2. **Masks** (:func:`causal_mask`, :func:`padding_mask`): the look-ahead mask ``j <= i`` of a
   decoder and the padding mask that hides the padded keys of a batch; they combine with ``&``.

3. **Multi-head attention** (:class:`MultiHeadAttention`)::

       head_h = Attention(X_q W_q^h, X_k W_k^h, X_v W_v^h)                (tf-head)
       MultiHead(X_q, X_k, X_v) = Concat(head_1 .. head_H) W_o             (tf-mha)

   computed as one ``D x D`` projection per role, then :func:`split_heads`
   ``(B, T, D) -> (B, H, T, D/H)`` and :func:`merge_heads` back. One path: without weights the
   attention is :func:`fused_attention`; when weights are asked for (``need_weights=True``, or
   kept, detached, in each layer's ``weights`` inside ``with`` :func:`saving_attention`), the
   lesson function. :func:`multi_head_attention_bmm` computes the same with the heads stacked
   on a leading dimension and ``torch.bmm`` (the form of the chapter's derivation).
   Parameter layout: ``W_q.weight`` is ``(D, D)`` and the layer
   computes ``x W_q^T`` as ``torch.nn.Linear`` does; stacking ``W_q, W_k, W_v`` gives
   ``torch.nn.MultiheadAttention``'s ``in_proj_weight`` (see
   ``nlpcourse.testing.copy_from_torch_mha``).

4. **Layer normalisation** (:func:`layer_norm`, :class:`LayerNorm`), **positions**
   (:func:`sinusoidal_encoding`; :func:`positional_encoding` picks :class:`SinusoidalPositions`,
   :class:`LearnedPositions` or :class:`NoPositions` when a model is built), the
   **position-wise feed-forward network** (:class:`FeedForward`)::

       mu = mean_d x_d,  sigma^2 = mean_d (x_d - mu)^2                     (tf-ln-stats)
       LN(x) = gamma * (x - mu) / sqrt(sigma^2 + eps) + beta               (tf-ln)
       PE(t, 2i) = sin(t / 10000^(2i/D)),  PE(t, 2i+1) = cos(t / 10000^(2i/D))   (tf-pe)
       FFN(x) = max(0, x W_1^T + b_1) W_2^T + b_2                          (tf-ffn)

5. **Blocks** (:class:`Block`, which the encoder calls :data:`EncoderLayer` and the
   decoder-only model uses causally with a KV cache, and :class:`DecoderLayer`), all given one
   :class:`BlockConfig` (width, heads, FFN width, dropout, pre- or post-LN), each residual
   sublayer written once, as :class:`PostLN` or :class:`PreLN` (chosen when the block is built),
   with the parameter names of
   ``torch.nn.TransformerEncoderLayer``/``TransformerDecoderLayer`` (``self_attn``,
   ``multihead_attn``, ``linear1``, ``linear2``, ``norm1..3``)::

       post-LN:  x = LN(x + Sublayer(x))                                   (tf-post-ln)
       pre-LN:   x = x + Sublayer(LN(x))                                   (tf-pre-ln)

6. **Models**: :class:`Transformer` (encoder-decoder) and :class:`TransformerLM` (decoder-only,
   causal), whose :meth:`TransformerLM.generate` decodes greedily, by sampling with a
   temperature, top-k, top-p (nucleus) or beam search, with or without a KV cache
   (:class:`KVCache`, preallocated and written in place). A language model is trained by the
   book's one training loop, :func:`nlpcourse.lm.train_lm` (``shuffle=True`` for windows in a
   random order, ``warmup`` for the learning-rate warm-up of eq. (tf-warmup)), which uses the
   model's own :meth:`TransformerLM.loss` (the adaptive softmax); its perplexity is
   :func:`nlpcourse.lm.evaluate_perplexity` with a ``stride``.

Deliberate departures, stated plainly:

* Tensors are batch-first, ``(B, T, D)``, everywhere (``batch_first=True`` in torch's terms).
* Dropout is set once, in the :class:`BlockConfig`, and applied once to each sublayer's output
  (by :class:`PostLN`/:class:`PreLN`) and inside the feed-forward network, not to the attention
  weights (torch's layers drop those too); with ``dropout=0`` the layers equal torch's exactly.
* Pre-LN models end with one more LayerNorm after the last block (as GPT-2 does), without which
  the residual stream reaches the output unnormalised.
* :class:`TransformerLM` may replace the full softmax by ``torch.nn.AdaptiveLogSoftmaxWithLoss``
  (Grave et al. 2017) to make CPU training affordable; it still gives exact, normalised
  log-probabilities, so perplexities are comparable with the full softmax's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nlpcourse.guard import reference
from nlpcourse.lm import IGNORE_INDEX, states_nll

STRATEGIES = ("greedy", "sample", "top_k", "top_p", "beam")


# ======================================================================== 1. attention and masks


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, Tensor) or x.ndim < 2:
            got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"{name} must be a tensor (..., T, d) with at least 2 dims, got {got}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"queries and keys must have the same width d_k: q is {tuple(q.shape)}, "
            f"k is {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"keys and values must be as many: k is {tuple(k.shape)}, v is {tuple(v.shape)}"
        )


def _check_mask(mask: Tensor | None, T_q: int, T_k: int) -> None:
    if mask is None:
        return
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        raise ValueError(
            "mask must be a boolean tensor (True = may attend), got "
            f"{mask.dtype if isinstance(mask, Tensor) else type(mask).__name__}"
        )
    if mask.ndim < 2 or mask.shape[-2] not in (1, T_q) or mask.shape[-1] != T_k:
        raise ValueError(
            f"mask must broadcast to (..., T_q, T_k) = (..., {T_q}, {T_k}), got {tuple(mask.shape)}"
        )


@reference
def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """``softmax(Q K^T / sqrt(d_k)) V``, eq. (tf-attention), over any leading dimensions.

    ``q`` (..., T_q, d_k), ``k`` (..., T_k, d_k), ``v`` (..., T_k, d_v); ``mask`` boolean,
    broadcastable to (..., T_q, T_k), True where query i may attend to key j. Returns the
    context vectors (..., T_q, d_v) and the attention weights (..., T_q, T_k). A query that may
    attend to no key gets weights 0 and output 0 (not NaN).
    """
    _check_qkv(q, k, v)
    _check_mask(mask, q.shape[-2], k.shape[-2])
    d_k = q.shape[-1]
    # (tf-scores) already divided by sqrt(d_k) as (tf-softmax) asks: the (T_q, d_k) queries are
    # divided rather than the larger (T_q, T_k) scores
    omega = (q / math.sqrt(d_k)) @ k.transpose(-2, -1)  # omega / sqrt(d_k), (..., T_q, T_k)
    if mask is not None:
        omega = omega.masked_fill(~mask, torch.finfo(omega.dtype).min)  # exp(min - max) = 0
    alpha = torch.softmax(omega, dim=-1)  # (tf-softmax) over the keys  (..., T_q, T_k)
    if mask is not None:
        empty = ~mask.any(dim=-1, keepdim=True)  # (..., T_q, 1): queries with no allowed key
        if empty.any():
            alpha = alpha.masked_fill(empty, 0.0)  # their weights: all 0, not uniform
    z = alpha @ v  # (tf-context)  (..., T_q, d_v)
    return z, alpha


def scaled_dot_product_attention_loop(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The same as :func:`scaled_dot_product_attention`, one query and one key at a time.

    For a single sequence: ``q`` (T_q, d_k), ``k`` (T_k, d_k), ``v`` (T_k, d_v), ``mask``
    (T_q, T_k) or None. Slow; written to read like eqs. (tf-scores)-(tf-context).
    """
    _check_qkv(q, k, v)
    if q.ndim != 2:
        raise ValueError(f"the loop version takes one sequence, q (T_q, d_k); got {tuple(q.shape)}")
    T_q, T_k = q.shape[0], k.shape[0]
    _check_mask(mask, T_q, T_k)
    d_k = q.shape[-1]
    z = torch.zeros(T_q, v.shape[-1], dtype=v.dtype)
    alpha = torch.zeros(T_q, T_k, dtype=q.dtype)
    for i in range(T_q):
        row = None if mask is None else mask[i if mask.shape[0] > 1 else 0]  # (T_k,)
        allowed = [j for j in range(T_k) if row is None or bool(row[j])]
        if not allowed:
            continue  # nothing to attend to: weights and output stay 0
        omega = {j: torch.dot(q[i], k[j]) for j in allowed}  # (tf-scores)
        scaled = {j: omega[j] / math.sqrt(d_k) for j in allowed}
        largest = max(scaled.values())  # subtracted for numerical safety; cancels in the ratio
        total = sum(torch.exp(scaled[j] - largest) for j in allowed)
        for j in allowed:
            alpha[i, j] = torch.exp(scaled[j] - largest) / total  # (tf-softmax)
            z[i] = z[i] + alpha[i, j] * v[j]  # (tf-context)
    return z, alpha


@reference
def causal_mask(T: int, device: torch.device | str | None = None) -> Tensor:
    """The look-ahead mask (T, T): True on and below the diagonal (query i sees keys j <= i)."""
    if not isinstance(T, int) or T < 1:
        raise ValueError(f"T must be a positive integer, got {T!r}")
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def padding_mask(lengths: Tensor | list[int], T: int | None = None) -> Tensor:
    """The padding mask (B, 1, 1, T) for keys: True for the first ``lengths[b]`` positions.

    Its shape broadcasts against scores (B, H, T_q, T); combine with a causal mask by ``&``.
    """
    lengths = torch.as_tensor(lengths)
    if lengths.ndim != 1 or lengths.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"lengths must be a 1-d sequence of integers, got {lengths!r}")
    T = int(lengths.max()) if T is None else T
    if (lengths < 0).any() or (lengths > T).any():
        raise ValueError(f"lengths must be in [0, T] = [0, {T}], got {lengths.tolist()}")
    keep = torch.arange(T, device=lengths.device) < lengths[:, None]  # (B, T)
    return keep[:, None, None, :]  # (B, 1, 1, T)


def causal_mask_last(T_q: int, T_k: int, device: torch.device | str | None = None) -> Tensor:
    """The look-ahead mask (T_q, T_k) of T_q queries that are the *last* T_q of T_k positions
    (T_q < T_k when the earlier keys come from a KV cache): query i sees keys
    ``j <= T_k - T_q + i``. With T_q = T_k it is :func:`causal_mask`."""
    if T_q > T_k:
        raise ValueError(f"a causal mask needs T_q <= T_k, got T_q = {T_q}, T_k = {T_k}")
    queries = torch.arange(T_k - T_q, T_k, device=device)  # (T_q,): their positions
    return torch.arange(T_k, device=device)[None, :] <= queries[:, None]  # (T_q, T_k)


def fused_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, causal: bool = False
) -> Tensor:
    """The context vectors of :func:`scaled_dot_product_attention`, eq. (tf-attention), by torch's
    fused kernel ``F.scaled_dot_product_attention`` (no weights); what
    :class:`MultiHeadAttention` uses when no weights are asked for.

    ``q`` (..., T_q, d_k), ``k`` (..., T_k, d_k), ``v`` (..., T_k, d_v); ``mask`` boolean,
    broadcastable to (..., T_q, T_k), True = may attend (torch's convention too), or
    ``causal=True``: the queries are the last T_q of the T_k positions. As in the lesson
    function, a query that may attend to no key gives a zero output (torch alone gives NaN).
    """
    _check_qkv(q, k, v)
    T_q, T_k = q.shape[-2], k.shape[-2]
    if causal and mask is not None:
        raise ValueError("give either a mask or causal=True, not both")
    if causal and T_q == T_k:  # the kernel's own causal mask: no (T, T) mask built
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if causal and T_q > 1:
        mask = causal_mask_last(T_q, T_k, q.device)  # (T_q, T_k)
    _check_mask(mask, T_q, T_k)
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v)
    empty = ~mask.any(dim=-1, keepdim=True)  # (..., T_q, 1): queries with no allowed key
    if not empty.any():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    # those queries may attend to every key (a softmax without NaN), then their output is zeroed
    z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | empty)  # (..., T_q, d_v)
    return z.masked_fill(empty, 0.0)


# ======================================================================= 2. multi-head attention


@reference
def split_heads(x: Tensor, H: int) -> Tensor:
    """(B, T, D) -> (B, H, T, D/H): head h gets the h-th slice of D/H features."""
    if x.ndim != 3:
        raise ValueError(f"x must be (B, T, D), got {tuple(x.shape)}")
    B, T, D = x.shape
    if D % H:
        raise ValueError(f"D = {D} is not divisible by H = {H}")
    return x.view(B, T, H, D // H).transpose(1, 2)  # (B, T, H, D/H) -> (B, H, T, D/H)


@reference
def merge_heads(x: Tensor) -> Tensor:
    """(B, H, T, D/H) -> (B, T, D): the heads' outputs concatenated, eq. (tf-mha)."""
    if x.ndim != 4:
        raise ValueError(f"x must be (B, H, T, D/H), got {tuple(x.shape)}")
    B, H, T, Dh = x.shape
    return x.transpose(1, 2).reshape(B, T, H * Dh)  # (B, T, H, D/H) -> (B, T, D)


class KVCache:
    """The keys and values of the positions decoded so far, for one attention layer.

    Buffers ``(B, H, T_max, D/H)`` are allocated once, at the first :meth:`append`, and each new
    position's keys and values are written into them in place; :meth:`append` returns views of
    the filled part, ``(B, H, length, D/H)``. (Concatenating the new keys to the old ones instead
    would copy the whole cache at every step: O(T^2) copying for T steps.) :meth:`reorder` picks
    the rows of surviving hypotheses in beam search.
    """

    def __init__(self, T_max: int):
        if not isinstance(T_max, int) or T_max < 1:
            raise ValueError(f"T_max must be a positive integer, got {T_max!r}")
        self.T_max, self.length = T_max, 0
        self.k: Tensor | None = None  # (B, H, T_max, D/H) once allocated
        self.v: Tensor | None = None

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write the new keys and values ``(B, H, T_new, D/H)`` after the cached ones; return all
        of them, ``(B, H, length, D/H)`` each (views into the buffers)."""
        B, H, T_new, Dh = k.shape
        if self.k is None or self.v is None:
            self.k = k.new_empty(B, H, self.T_max, Dh)  # (B, H, T_max, D/H)
            self.v = v.new_empty(B, H, self.T_max, v.shape[-1])
        end = self.length + T_new
        if end > self.T_max:
            raise ValueError(f"the KV cache holds {self.T_max} positions; {end} were asked for")
        self.k[:, :, self.length : end] = k  # in place: nothing before `length` is copied
        self.v[:, :, self.length : end] = v
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]  # (B, H, length, D/H) each

    def reorder(self, rows: Tensor) -> None:
        """Keep the cached rows ``rows`` (B',) in that order (beam search: the parents)."""
        if self.k is not None and self.v is not None:
            self.k, self.v = self.k[rows], self.v[rows]  # (B', H, T_max, D/H)


class MultiHeadAttention(nn.Module):
    """Multi-head attention, eqs. (tf-head) and (tf-mha), batch-first.

    ``forward(x_q, x_kv=None, mask=None, cache=None, causal=False, need_weights=False)``: ``x_q``
    (B, T_q, D); ``x_kv`` (B, T_k, D), the keys' and values' source (``x_q`` itself for
    self-attention); ``mask`` boolean, broadcastable to (B, H, T_q, T_k), True = may attend, or
    ``causal=True`` for the look-ahead mask (the T_q queries being the last of the T_k positions).
    Returns the output (B, T_q, D) and, if ``need_weights``, the attention weights
    (B, H, T_q, T_k), else None.

    One path, two ways to compute eq. (tf-attention): without weights, torch's fused
    ``F.scaled_dot_product_attention`` (its mask convention is ours, True = may attend), as
    nanoGPT does; with weights (``need_weights=True``, or :attr:`keep_weights` set by
    :func:`saving_attention`), the lesson function :func:`scaled_dot_product_attention`. Either
    way a query that may attend to no key gives a zero output. With :attr:`keep_weights` the
    weights of the last call are kept, detached from the autograd graph, in :attr:`weights`.

    ``cache``: a :class:`KVCache` for incremental decoding in self-attention. If given, the keys
    and values of the new positions are written into it after the earlier ones
    (B, H, T_past, D/H) and the queries attend to all of them.
    """

    def __init__(self, D: int, H: int, bias: bool = True):
        super().__init__()
        if not isinstance(H, int) or H < 1 or D % H:
            raise ValueError(f"D = {D} must be divisible by the number of heads H = {H}")
        self.D, self.H = D, H
        self.W_q = nn.Linear(D, D, bias=bias)  # the H heads' (D/H, D) query maps, stacked
        self.W_k = nn.Linear(D, D, bias=bias)
        self.W_v = nn.Linear(D, D, bias=bias)
        self.W_o = nn.Linear(D, D, bias=bias)  # (tf-mha)
        self.keep_weights = False  # set by saving_attention()
        self.weights: Tensor | None = None  # (B, H, T_q, T_k) of the last call, if kept

    def forward(
        self,
        x_q: Tensor,
        x_kv: Tensor | None = None,
        mask: Tensor | None = None,
        cache: KVCache | None = None,
        causal: bool = False,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        if x_q.ndim != 3 or x_q.shape[-1] != self.D:
            raise ValueError(f"x_q must be (B, T, D={self.D}), got {tuple(x_q.shape)}")
        if causal and mask is not None:
            raise ValueError("give either a mask or causal=True, not both")
        x_kv = x_q if x_kv is None else x_kv
        q = split_heads(self.W_q(x_q), self.H)  # (B, H, T_q, D/H)
        k = split_heads(self.W_k(x_kv), self.H)  # (B, H, T_k, D/H)
        v = split_heads(self.W_v(x_kv), self.H)  # (B, H, T_k, D/H)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H, T_past + T_k, D/H) each
        T_q, T_k = q.shape[2], k.shape[2]
        alpha = None
        if need_weights or self.keep_weights:  # the lesson function, which gives the weights
            if causal and T_q > 1:
                mask = causal_mask_last(T_q, T_k, q.device)  # (T_q, T_k)
            z, alpha = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T_q, D/H)
            if self.keep_weights:
                self.weights = alpha.detach()
        else:  # torch's fused kernel: the same function, no weights
            z = fused_attention(q, k, v, mask, causal)  # (B, H, T_q, D/H)
        out = self.W_o(merge_heads(z))  # (B, T_q, D)
        return out, (alpha if need_weights else None)


@contextmanager
def saving_attention(model: nn.Module) -> Iterator[nn.Module]:
    """Within ``with saving_attention(model):`` every :class:`MultiHeadAttention` of ``model``
    keeps the weights of its last call, detached, in its ``weights`` (B, H, T_q, T_k) (a
    decoder block's self-attention in ``self_attn.weights``, its cross-attention in
    ``multihead_attn.weights``). They stay there after the block; outside it none are kept."""
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    for layer in layers:
        layer.keep_weights = True
    try:
        yield model
    finally:
        for layer in layers:
            layer.keep_weights = False


def multi_head_attention_bmm(
    x: Tensor, W_q: Tensor, W_k: Tensor, W_v: Tensor, W_o: Tensor
) -> Tensor:
    """Multi-head self-attention of one sentence with the heads stacked, using ``torch.bmm``.

    ``x`` (T, D); ``W_q, W_k, W_v`` (H, D, D/H), one projection per head (``x @ W_q[h]`` is head
    h's queries); ``W_o`` (D, D) maps the concatenated heads back. Returns (T, D). The same
    function as :class:`MultiHeadAttention` (whose ``W_q.weight`` is these stacked and
    transposed); the chapter derives this form first.
    """
    H, D, Dh = W_q.shape
    xs = x.unsqueeze(0).expand(H, -1, -1)  # (H, T, D): the same input for every head
    q, k, v = torch.bmm(xs, W_q), torch.bmm(xs, W_k), torch.bmm(xs, W_v)  # (H, T, D/H) each
    omega = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(Dh)  # (H, T, T)
    z = torch.bmm(torch.softmax(omega, dim=-1), v)  # (H, T, D/H)
    concat = z.transpose(0, 1).reshape(x.shape[0], H * Dh)  # (T, H, D/H) -> (T, D)
    return concat @ W_o  # (T, D)


# ========================================================== 3. normalisation, positions, FFN


@reference
def layer_norm(x: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5) -> Tensor:
    """Layer normalisation of ``x`` (..., D) over its last dimension, eqs. (tf-ln-stats), (tf-ln):
    each vector to mean 0 and (biased) variance 1, then scaled by ``gamma`` (D,) and shifted by
    ``beta`` (D,)."""
    if gamma.shape != x.shape[-1:] or beta.shape != x.shape[-1:]:
        raise ValueError(
            f"gamma and beta must have shape (D,) = ({x.shape[-1]},), got "
            f"{tuple(gamma.shape)} and {tuple(beta.shape)}"
        )
    mu = x.mean(dim=-1, keepdim=True)  # (tf-ln-stats)  (..., 1)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)  # (tf-ln-stats)  (..., 1)
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta  # (tf-ln)


class LayerNorm(nn.Module):
    """Layer normalisation over the last dimension, eqs. (tf-ln-stats) and (tf-ln).

    Parameters ``weight`` (gamma) and ``bias`` (beta), (D,), named as in ``torch.nn.LayerNorm``.
    The variance is the biased one (divide by D), as in Ba et al. (2016) and torch.
    """

    def __init__(self, D: int, eps: float = 1e-5):
        super().__init__()
        self.D, self.eps = D, eps
        self.weight = nn.Parameter(torch.ones(D))  # gamma
        self.bias = nn.Parameter(torch.zeros(D))  # beta

    def reset_parameters(self) -> None:
        """gamma = 1, beta = 0: the identity after normalising (as ``torch.nn.LayerNorm``)."""
        with torch.no_grad():
            self.weight.fill_(1.0)
            self.bias.zero_()

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-1] != self.D:
            raise ValueError(f"the last dimension must be D = {self.D}, got {tuple(x.shape)}")
        return layer_norm(x, self.weight, self.bias, self.eps)


@reference
def sinusoidal_encoding(T: int, D: int) -> Tensor:
    """The sinusoidal positional encodings (T, D), eq. (tf-pe): even features sin, odd cos."""
    if T < 1 or D < 2 or D % 2:
        raise ValueError(f"need T >= 1 and an even D >= 2, got T = {T}, D = {D}")
    t = torch.arange(T, dtype=torch.float64)[:, None]  # (T, 1)
    two_i = torch.arange(0, D, 2, dtype=torch.float64)  # (D/2,)
    angle = t / 10000 ** (two_i / D)  # (T, D/2)
    pe = torch.zeros(T, D, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)  # (tf-pe)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()


class SinusoidalPositions(nn.Module):
    """Adds the sinusoidal encodings of eq. (tf-pe) to embeddings (B, T, D).

    ``offset`` in :meth:`forward` is the position of the first of the T inputs (for decoding
    with a KV cache, where only the new tokens are fed).
    """

    pe: Tensor  # the sinusoids (max_len, D), a buffer

    def __init__(self, D: int, max_len: int = 1024):
        super().__init__()
        self.max_len = max_len
        self.register_buffer("pe", sinusoidal_encoding(max_len, D), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        T = _check_positions(x, offset, self.max_len)
        return x + self.pe[offset : offset + T].to(x.dtype)  # (B, T, D) + (T, D)


class LearnedPositions(nn.Module):
    """Adds one learned vector per position, up to ``max_len``, to embeddings (B, T, D)."""

    def __init__(self, D: int, max_len: int = 1024):
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, D)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        T = _check_positions(x, offset, self.max_len)
        return x + self.embedding.weight[offset : offset + T]  # (B, T, D) + (T, D)


class NoPositions(nn.Module):
    """No position information: attention then sees a bag of words."""

    def __init__(self, D: int, max_len: int = 1024):
        super().__init__()
        self.max_len = max_len

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        _check_positions(x, offset, self.max_len)
        return x


def _check_positions(x: Tensor, offset: int, max_len: int) -> int:
    T = x.shape[1]
    if offset + T > max_len:
        raise ValueError(f"positions up to {offset + T} exceed max_len = {max_len}")
    return T


POSITIONS: dict[str, type[nn.Module]] = {
    "sinusoidal": SinusoidalPositions,
    "learned": LearnedPositions,
    "none": NoPositions,
}


def positional_encoding(D: int, max_len: int = 1024, kind: str = "sinusoidal") -> nn.Module:
    """The positional encoding module of ``kind`` (sinusoidal, learned or none), chosen here,
    once: :class:`SinusoidalPositions`, :class:`LearnedPositions` or :class:`NoPositions`."""
    if kind not in POSITIONS:
        raise ValueError(f"kind must be one of {tuple(POSITIONS)}, got {kind!r}")
    return POSITIONS[kind](D, max_len)


class FeedForward(nn.Module):
    """The position-wise feed-forward network, eq. (tf-ffn): ``linear2(dropout(relu(linear1)))``."""

    def __init__(self, D: int, D_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(D, D_ff)
        self.linear2 = nn.Linear(D_ff, D)
        self.dropout = dropout

    def forward(self, x: Tensor) -> Tensor:
        h = F.dropout(torch.relu(self.linear1(x)), self.dropout, self.training)  # (B, T, D_ff)
        return self.linear2(h)  # (B, T, D)


# ================================================================================ 4. the blocks


@dataclass(frozen=True)
class BlockConfig:
    """The shape of a transformer block, given once to every block of a model (as nanoGPT's
    ``GPTConfig``): width ``D``, heads ``H``, feed-forward width ``D_ff``, the ``dropout`` of
    the sublayer outputs and inside the FFN, and pre-LN (``norm_first=True``) or post-LN."""

    D: int = 64
    H: int = 4
    D_ff: int = 256
    dropout: float = 0.0
    norm_first: bool = False


class PostLN(nn.Module):
    """A residual sublayer normalised after the sum, eq. (tf-post-ln),
    ``x -> LN(x + dropout(Sublayer(x)))``, as in Vaswani et al. (2017); in two halves around
    the sublayer, which the block calls itself: :meth:`inside` gives the sublayer's input,
    :meth:`out` the block's new state from ``x`` and the sublayer's output ``h``."""

    def __init__(self, dropout: float):
        super().__init__()
        self.dropout = dropout

    def inside(self, x: Tensor, norm: nn.Module) -> Tensor:
        return x

    def out(self, x: Tensor, h: Tensor, norm: nn.Module) -> Tensor:
        return norm(x + F.dropout(h, self.dropout, self.training))  # (tf-post-ln)


class PreLN(PostLN):
    """A residual sublayer normalised before it, eq. (tf-pre-ln),
    ``x -> x + dropout(Sublayer(LN(x)))``, as in GPT-2; the same two halves as :class:`PostLN`."""

    def inside(self, x: Tensor, norm: nn.Module) -> Tensor:
        return norm(x)

    def out(self, x: Tensor, h: Tensor, norm: nn.Module) -> Tensor:
        return x + F.dropout(h, self.dropout, self.training)  # (tf-pre-ln)


def sublayer_connection(config: BlockConfig) -> PostLN:
    """The residual connection of ``config``'s blocks: :class:`PreLN` or :class:`PostLN`."""
    return PreLN(config.dropout) if config.norm_first else PostLN(config.dropout)


class Block(nn.Module):
    """Self-attention and feed-forward sublayers, each with a residual and a LayerNorm
    (:func:`sublayer_connection`: post-LN or pre-LN as ``config.norm_first`` says).

    The encoder's layer (also named :data:`EncoderLayer`, with a padding ``mask``) and the
    decoder-only language model's block (``causal=True``, and a :class:`KVCache` to decode). The
    same function as ``torch.nn.TransformerEncoderLayer(D, H, D_ff, dropout, batch_first=True,
    norm_first=...)`` with its weights copied (``nlpcourse.testing.copy_from_torch_layer``), and
    torch's parameter names. ``mask``: True = may attend.
    """

    def __init__(self, config: BlockConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(config.D, config.H)
        self.ff = FeedForward(config.D, config.D_ff, config.dropout)
        self.norm1, self.norm2 = LayerNorm(config.D), LayerNorm(config.D)
        self.residual = sublayer_connection(config)

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        cache: KVCache | None = None,
        causal: bool = False,
    ) -> Tensor:
        r = self.residual  # PreLN or PostLN: where the LayerNorm goes
        h, _ = self.self_attn(r.inside(x, self.norm1), None, mask, cache, causal)  # (B, T, D)
        x = r.out(x, h, self.norm1)
        return r.out(x, self.ff(r.inside(x, self.norm2)), self.norm2)  # (B, T, D)


EncoderLayer = Block  # the encoder-decoder's name for it (torch's TransformerEncoderLayer)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder's output ``memory``, feed-forward.

    Post-LN or pre-LN as :class:`Block`; the same function as
    ``torch.nn.TransformerDecoderLayer(..., batch_first=True, norm_first=...)``.
    ``self_mask`` (usually causal & target padding) and ``memory_mask`` (source padding):
    True = may attend.
    """

    def __init__(self, config: BlockConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(config.D, config.H)
        self.multihead_attn = MultiHeadAttention(config.D, config.H)  # cross-attention
        self.ff = FeedForward(config.D, config.D_ff, config.dropout)
        self.norm1 = LayerNorm(config.D)
        self.norm2, self.norm3 = LayerNorm(config.D), LayerNorm(config.D)
        self.residual = sublayer_connection(config)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
    ) -> Tensor:
        r = self.residual  # PreLN or PostLN: where the LayerNorm goes
        h, _ = self.self_attn(r.inside(x, self.norm1), None, self_mask)  # (B, T_tgt, D)
        x = r.out(x, h, self.norm1)
        h, _ = self.multihead_attn(r.inside(x, self.norm2), memory, memory_mask)  # cross
        x = r.out(x, h, self.norm2)
        return r.out(x, self.ff(r.inside(x, self.norm3)), self.norm3)  # (B, T_tgt, D)


# ================================================================================ 5. the models


class Transformer(nn.Module):
    """The encoder-decoder transformer: embeddings (scaled by sqrt(D)) plus positions, an
    encoder stack, a decoder stack with masked self-attention and cross-attention, and a linear
    map to the target vocabulary.

    ``forward(src, tgt, src_lengths=None, tgt_lengths=None)``: ``src`` (B, S), ``tgt`` (B, T)
    ids, optionally padded (the lengths give the real ones); returns logits (B, T, V_tgt).
    """

    def __init__(
        self,
        V_src: int,
        V_tgt: int,
        D: int = 64,
        H: int = 4,
        n_layers: int = 2,
        D_ff: int = 256,
        dropout: float = 0.0,
        norm_first: bool = False,
        max_len: int = 512,
    ):
        super().__init__()
        config = BlockConfig(D, H, D_ff, dropout, norm_first)
        self.config, self.D = config, D
        self.src_embedding = nn.Embedding(V_src, D)
        self.tgt_embedding = nn.Embedding(V_tgt, D)
        self.positions = SinusoidalPositions(D, max_len)
        self.encoder = nn.ModuleList(Block(config) for _ in range(n_layers))
        self.decoder = nn.ModuleList(DecoderLayer(config) for _ in range(n_layers))
        self.enc_norm = LayerNorm(D) if norm_first else nn.Identity()
        self.dec_norm = LayerNorm(D) if norm_first else nn.Identity()
        self.output = nn.Linear(D, V_tgt)

    def encode(self, src: Tensor, src_lengths: Tensor | None = None) -> Tensor:
        """``src`` (B, S) -> memory (B, S, D)."""
        mask = None if src_lengths is None else padding_mask(src_lengths, src.shape[1])
        x = self.positions(self.src_embedding(src) * math.sqrt(self.D))  # (B, S, D)
        for layer in self.encoder:
            x = layer(x, mask)
        return self.enc_norm(x)

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_lengths: Tensor | None = None,
        tgt_lengths: Tensor | None = None,
    ) -> Tensor:
        """``tgt`` (B, T) and memory (B, S, D) -> logits (B, T, V_tgt)."""
        T = tgt.shape[1]
        self_mask = causal_mask(T, tgt.device)  # (T, T)
        if tgt_lengths is not None:
            self_mask = self_mask & padding_mask(tgt_lengths, T)  # (B, 1, T, T)
        memory_mask = None
        if src_lengths is not None:
            memory_mask = padding_mask(src_lengths, memory.shape[1])  # (B, 1, 1, S)
        x = self.positions(self.tgt_embedding(tgt) * math.sqrt(self.D))  # (B, T, D)
        for layer in self.decoder:
            x = layer(x, memory, self_mask, memory_mask)
        return self.output(self.dec_norm(x))  # (B, T, V_tgt)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_lengths: Tensor | None = None,
        tgt_lengths: Tensor | None = None,
    ) -> Tensor:
        return self.decode(tgt, self.encode(src, src_lengths), src_lengths, tgt_lengths)


class TransformerLM(nn.Module):
    """A decoder-only (GPT-style) language model: ``P(w_{t+1} | w_1..w_t)`` from a causal stack.

    Embedding plus positions (``positions`` = sinusoidal, learned or none: with none the model is
    a bag of words as far as attention is concerned), ``n_layers`` causal :class:`Block` s, a
    final LayerNorm for pre-LN, then the output layer: a linear map to V (``tie_weights=True``
    shares the embedding matrix) or, with ``cutoffs``, ``torch.nn.AdaptiveLogSoftmaxWithLoss``.
    """

    def __init__(
        self,
        V: int,
        D: int = 64,
        H: int = 4,
        n_layers: int = 2,
        D_ff: int = 256,
        max_len: int = 256,
        dropout: float = 0.0,
        norm_first: bool = True,
        positions: str = "learned",
        tie_weights: bool = False,
        cutoffs: list[int] | None = None,
    ):
        super().__init__()
        if not isinstance(V, int) or V < 2:
            raise ValueError(f"V must be an integer >= 2, got {V!r}")
        if tie_weights and cutoffs:
            raise ValueError("tie_weights and an adaptive softmax (cutoffs) cannot be combined")
        config = BlockConfig(D, H, D_ff, dropout, norm_first)
        self.config, self.V, self.D, self.max_len = config, V, D, max_len
        self.vocab_size = V  # the name nlpcourse.lm's training loop reads
        self.embedding = nn.Embedding(V, D)
        self.positions = positional_encoding(D, max_len, positions)
        self.blocks = nn.ModuleList(Block(config) for _ in range(n_layers))
        self.final_norm = LayerNorm(D) if norm_first else nn.Identity()
        self.dropout = dropout
        self.adaptive: nn.AdaptiveLogSoftmaxWithLoss | None = None
        self.output: nn.Linear | None = None
        if cutoffs:
            self.adaptive = nn.AdaptiveLogSoftmaxWithLoss(D, V, list(cutoffs), div_value=4.0)
        else:
            self.output = nn.Linear(D, V)
            if tie_weights:
                self.output.weight = self.embedding.weight

    def hidden(self, ids: Tensor, caches: list[KVCache] | None = None, offset: int = 0) -> Tensor:
        """``ids`` (B, T) -> the last block's (normalised) states (B, T, D).

        With ``caches`` (one :class:`KVCache` per block, holding ``offset`` positions), ``ids`` are
        the new tokens at positions ``offset .. offset+T-1`` and the blocks attend to the cached
        earlier keys and values too.
        """
        if not isinstance(ids, Tensor) or ids.ndim != 2 or ids.dtype != torch.long:
            got = tuple(ids.shape) if isinstance(ids, Tensor) else type(ids).__name__
            raise ValueError(f"ids must be a (B, T) tensor of word ids (torch.long), got {got}")
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.V):
            raise ValueError(f"ids must be in [0, V) = [0, {self.V})")
        if caches is not None and any(cache.length != offset for cache in caches):
            raise ValueError(f"the caches must hold the {offset} positions before the new tokens")
        x = self.positions(self.embedding(ids), offset)  # (B, T, D)
        x = F.dropout(x, self.dropout, self.training)
        for i, block in enumerate(self.blocks):  # causal: the T queries see keys up to their own
            x = block(x, cache=None if caches is None else caches[i], causal=True)
        return self.final_norm(x)

    def log_probs(self, h: Tensor) -> Tensor:
        """States (..., D) -> log-probabilities of every next word (..., V)."""
        if self.adaptive is not None:
            return self.adaptive.log_prob(h.reshape(-1, self.D)).view(*h.shape[:-1], self.V)
        assert self.output is not None  # one of the two output layers exists
        return torch.log_softmax(self.output(h), dim=-1)

    def forward(self, ids: Tensor) -> Tensor:
        """``ids`` (B, T) -> log-probabilities of the next word at every position (B, T, V)."""
        return self.log_probs(self.hidden(ids))

    def loss(
        self, ids: Tensor, targets: Tensor, ignore_index: int = IGNORE_INDEX
    ) -> tuple[Tensor, int]:
        """Summed negative log-likelihood of ``targets`` (B, T) given ``ids`` (B, T), and the
        number of counted targets (those not equal to ``ignore_index``)."""
        output = self.adaptive if self.adaptive is not None else self.output
        return states_nll(self.hidden(ids), targets, output, ignore_index)  # (B, T, D) states

    @torch.no_grad()
    def generate(
        self,
        prompt: Tensor | list[int],
        max_new_tokens: int,
        strategy: str = "greedy",
        temperature: float | None = None,
        k: int | None = None,
        p: float | None = None,
        beam_size: int | None = None,
        kv_cache: bool = True,
        generator: torch.Generator | None = None,
    ) -> list[int]:
        """Continue ``prompt`` (a list of ids, or a (T,) tensor) by ``max_new_tokens`` words.

        ``strategy``: ``greedy`` (the most probable word), ``sample`` (from the softmax of the
        scores divided by ``temperature``, default 1), ``top_k`` (sample among the ``k`` most
        probable, default 10), ``top_p`` (sample among the fewest words whose probability adds
        up to ``p``, default 0.9), ``beam`` (beam search with ``beam_size`` hypotheses, default
        4, the best total log-probability at the end). An option that the strategy does not use
        is an error, not silently ignored: ``temperature`` and ``generator`` belong to the three
        sampling strategies, ``k`` to top_k, ``p`` to top_p, ``beam_size`` to beam.
        ``kv_cache=True`` feeds only the new token at each step and keeps every block's keys and
        values; ``False`` recomputes the whole sequence each step. Both give the same words.
        The new ids are made on the model's device. Returns the prompt followed by the new ids.
        """
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        sampling = strategy in ("sample", "top_k", "top_p")
        given = {"temperature": temperature, "generator": generator, "k": k, "p": p}
        given["beam_size"] = beam_size
        uses = {
            "temperature": sampling,
            "generator": sampling,
            "k": strategy == "top_k",
            "p": strategy == "top_p",
            "beam_size": strategy == "beam",
        }
        unused = [name for name, value in given.items() if value is not None and not uses[name]]
        if unused:
            raise ValueError(f"strategy {strategy!r} does not use {', '.join(unused)}")
        temperature = 1.0 if temperature is None else temperature
        k = 10 if k is None else k
        p = 0.9 if p is None else p
        beam_size = 4 if beam_size is None else beam_size
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature!r}")
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"top_k needs an integer k >= 1, got {k!r}")
        if not 0 < p <= 1:
            raise ValueError(f"top_p needs 0 < p <= 1, got {p!r}")
        if not isinstance(beam_size, int) or beam_size < 1:
            raise ValueError(f"beam needs an integer beam_size >= 1, got {beam_size!r}")
        device = self.embedding.weight.device
        ids = torch.as_tensor(prompt, dtype=torch.long, device=device).reshape(1, -1)  # (1, T)
        if ids.shape[1] < 1:
            raise ValueError("the prompt must hold at least one token")
        if ids.shape[1] + max_new_tokens > self.max_len:
            raise ValueError(
                f"prompt ({ids.shape[1]}) + max_new_tokens ({max_new_tokens}) exceeds "
                f"max_len = {self.max_len}"
            )
        was_training = self.training
        self.eval()
        try:
            if strategy == "beam":
                return self._beam(ids, max_new_tokens, beam_size, kv_cache)
            return self._sample(
                ids, max_new_tokens, strategy, temperature, k, p, kv_cache, generator
            )
        finally:
            self.train(was_training)

    def _next_log_probs(self, ids: Tensor, caches: list[KVCache] | None, new: int) -> Tensor:
        """Log-probabilities of the word after ``ids`` (B, T) (B, V); with caches, only the last
        ``new`` tokens are fed."""
        if caches is None:
            h = self.hidden(ids)  # (B, T, D): recompute everything
        else:
            h = self.hidden(ids[:, -new:], caches, offset=ids.shape[1] - new)  # (B, new, D)
        return self.log_probs(h[:, -1])  # (B, V)

    def _sample(self, ids, max_new_tokens, strategy, temperature, k, p, kv_cache, generator):
        caches = [KVCache(self.max_len) for _ in self.blocks] if kv_cache else None
        new = ids.shape[1]  # the first step feeds the whole prompt
        for _ in range(max_new_tokens):
            logp = self._next_log_probs(ids, caches, new)[0] / temperature  # (V,)
            if strategy == "greedy":
                nxt = torch.argmax(logp).reshape(1, 1)  # (1, 1)
            else:
                if strategy == "top_k":
                    threshold = torch.topk(logp, min(k, self.V)).values[-1]
                    logp = logp.masked_fill(logp < threshold, -math.inf)
                elif strategy == "top_p":
                    probs, order = torch.sort(torch.softmax(logp, dim=-1), descending=True)
                    before = torch.cumsum(probs, dim=0) - probs  # mass of the more probable words
                    drop = torch.zeros_like(logp, dtype=torch.bool)  # (V,)
                    drop[order] = before >= p  # the words after the first ones that reach p
                    logp = logp.masked_fill(drop, -math.inf)
                probs = torch.softmax(logp, dim=-1)
                nxt = torch.multinomial(probs, 1, generator=generator).reshape(1, 1)  # (1, 1)
            ids = torch.cat([ids, nxt], dim=1)  # (1, T+1)
            new = 1
        return ids[0].tolist()

    def _beam(self, ids, max_new_tokens, beam_size, kv_cache):
        caches = [KVCache(self.max_len) for _ in self.blocks] if kv_cache else None
        beams, new = ids, ids.shape[1]  # (n, T)
        scores = torch.zeros(1, device=ids.device)  # (n,)
        for _ in range(max_new_tokens):
            logp = self._next_log_probs(beams, caches, new)  # (n, V)
            total = (scores[:, None] + logp).reshape(-1)  # (n*V,)
            scores, flat = torch.topk(total, min(beam_size, total.numel()))
            parent, word = flat // self.V, flat % self.V  # which beam, which next word
            beams = torch.cat([beams[parent], word[:, None]], dim=1)  # (n', T+1)
            if caches is not None:
                for cache in caches:  # each surviving hypothesis keeps its parent's keys/values
                    cache.reorder(parent)
            new = 1
        return beams[0].tolist()


def count_parameters(model: nn.Module) -> int:
    """The number of trainable numbers in ``model`` (shared ones counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def describe(model: TransformerLM) -> dict[str, Any]:
    """A short summary of a language model's shape, for the book's tables."""
    return {
        "V": model.V,
        "D": model.D,
        "layers": len(model.blocks),
        "heads": model.config.H,
        "parameters": count_parameters(model),
    }


# ============================================= 6. the encoder-decoder on chapter 5's G2P task


class Seq2SeqTransformer(Transformer):
    """:class:`Transformer` with chapter 5's conventions, to train and decode on its tasks
    (CMUdict grapheme-to-phoneme) with its tools.

    Sources are letter ids padded with ``<pad>`` = 0 at the end; targets are
    ``<s> y_1 .. y_T </s>`` (ids 1 and 2 in the target vocabulary), padded likewise. As in
    chapter 5, the model never predicts ``<pad>`` or ``<s>`` (their log-probabilities are
    ``-inf``). :meth:`loss` is what :func:`nlpcourse.seq2seq.train` minimises, with label
    smoothing if ``label_smoothing`` > 0; :meth:`step_function` gives one word as the
    ``step(y_prev, state) -> (log_probs, new_state)`` function that chapter 5's
    :func:`nlpcourse.seq2seq.greedy_decode` and :func:`nlpcourse.seq2seq.beam_search` decode;
    :meth:`greedy` and :meth:`beam_search` run them word by word over a batch, with the
    signatures of chapter 5's model, so that :func:`nlpcourse.seq2seq.evaluate` scores this
    model as it scores that one.
    """

    never: Tensor  # (V_tgt,) True for <pad> and <s>, a buffer

    def __init__(self, V_src: int, V_tgt: int, label_smoothing: float = 0.0, **sizes: Any):
        """``sizes``: :class:`Transformer`'s (``D``, ``H``, ``n_layers``, ``D_ff``, ``dropout``,
        ``norm_first``, ``max_len``), with pre-LN and ``max_len`` = 64 by default here."""
        from nlpcourse.seq2seq import BOS_ID, PAD_ID

        super().__init__(V_src, V_tgt, **{"norm_first": True, "max_len": 64, **sizes})
        D = self.D
        if not 0 <= label_smoothing < 1:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing!r}")
        self.label_smoothing, self.pad_id = label_smoothing, PAD_ID
        # embeddings of scale D^-1/2, so that times sqrt(D) they are of the positions' scale
        # (about 1) instead of drowning them (torch's N(0, 1) times sqrt(D)), as in Vaswani et
        # al.'s implementation
        for embedding in (self.src_embedding, self.tgt_embedding):
            nn.init.normal_(embedding.weight, std=D**-0.5)
        never = torch.zeros(V_tgt, dtype=torch.bool)
        never[[PAD_ID, BOS_ID]] = True
        self.register_buffer("never", never, persistent=False)

    def log_probs(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Padded sources (B, S) and decoder inputs ``<s> y_1 .. y_{T-1}`` (B, T) ->
        log-probabilities of each next phone (B, T, V_tgt), ``<pad>`` and ``<s>`` excluded."""
        src_lengths = (src != self.pad_id).sum(dim=1)  # (B,)
        # padded target positions come after the real ones: the causal mask keeps them out of
        # every real position's view, and the loss skips them
        logits = self(src, tgt_in, src_lengths)  # (B, T, V_tgt)
        return torch.log_softmax(logits.masked_fill(self.never, -math.inf), dim=-1)

    def loss(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Mean over the real target phones of the cross-entropy with label smoothing
        ``eps`` = ``label_smoothing`` (Szegedy et al. 2016), over the phones and ``</s>``::

            loss_t = (1 - eps) (-log p(y_t)) + eps mean_v (-log p(v))            (tf-ls)

        ``src`` (B, S), ``tgt`` (B, T + 1) = ``<s> y_1 .. y_T </s>`` padded."""
        logp = self.log_probs(src, tgt[:, :-1])  # (B, T, V)
        gold = tgt[:, 1:]  # (B, T)
        nll = -logp.gather(-1, gold.unsqueeze(-1)).squeeze(-1)  # (B, T)
        if self.label_smoothing:
            allowed = int((~self.never).sum())
            uniform = -logp.masked_fill(self.never, 0.0).sum(-1) / allowed  # (B, T)
            nll = (1 - self.label_smoothing) * nll + self.label_smoothing * uniform  # (tf-ls)
        return nll[gold != self.pad_id].mean()

    def step_function(self, src: Tensor) -> tuple[Callable[[int, Any], tuple[Tensor, Any]], Any]:
        """One word ``src`` (S,) as chapter 5's ``step(y_prev, state) -> (log_probs (V,),
        new_state)`` and its first state. The state is the tuple of the phones fed so far (the
        memory of the encoder is computed once); each step runs the decoder over all of them
        (no cache: targets are short, and a tuple can be shared by the hypotheses of a beam)."""
        with torch.inference_mode():
            memory = self.encode(src.unsqueeze(0))  # (1, S, D)

        def step(y_prev: int, fed: tuple[int, ...]) -> tuple[Tensor, tuple[int, ...]]:
            fed = (*fed, y_prev)
            tgt = torch.tensor([fed], dtype=torch.long, device=memory.device)  # (1, t)
            with torch.inference_mode():
                logits = self.decode(tgt, memory)[0, -1]  # (V,)
            return torch.log_softmax(logits.masked_fill(self.never, -math.inf), dim=-1), fed

        return step, ()

    def _each_word(self, src: Tensor, search: Callable[..., Any]) -> list[Any]:
        """``search(step, state)`` for every word (row) of the padded ``src`` (B, S), in eval
        mode, the training mode restored after."""
        was_training = self.training
        self.eval()
        try:
            return [search(*self.step_function(row[row != self.pad_id])) for row in src]
        finally:
            self.train(was_training)

    def greedy(self, src: Tensor, max_len: int = 30) -> list[list[int]]:
        """Chapter 5's :func:`nlpcourse.seq2seq.greedy_decode` on each word of ``src`` (B, S):
        the phone ids of each, without ``</s>``."""
        from nlpcourse.seq2seq import greedy_decode

        return self._each_word(src, lambda step, s: greedy_decode(step, s, max_len))

    def beam_search(
        self, src: Tensor, beam_size: int = 5, max_len: int = 30, length_penalty: float = 0.0
    ) -> tuple[list[list[int]], list[float]]:
        """Chapter 5's :func:`nlpcourse.seq2seq.beam_search` on each word of ``src`` (B, S): the
        best hypothesis of each (phone ids, without ``</s>``) and its normalised score."""
        from nlpcourse.seq2seq import beam_search

        found = self._each_word(
            src, lambda step, s: beam_search(step, s, beam_size, max_len, length_penalty)
        )
        return [ids for ids, _ in found], [score for _, score in found]
