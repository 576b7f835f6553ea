"""The LSTM layer's fast path on the CPU: the elementwise work of each time step compiled by numba
(:mod:`nlpcourse.rnn`, issue 31).

:class:`nlpcourse.rnn.LSTM` imports this module for float32 and float64 tensors on the CPU; other
tensors (a GPU, half precision) take :class:`nlpcourse.rnn._LSTMThroughTime`, the same arithmetic
in torch operations, whose backward pass the book reads. Both compute eqs. (lstm-gates), (lstm-c),
(lstm-h) and the same backpropagation through time, gates in torch's order i, f, g, o; the tests
check both against ``torch.nn.LSTM``.

Why: at the book's sizes a step of the LSTM costs more in Python and dispatch than in arithmetic
(1-8 µs per torch operation), while ``torch.nn.LSTM`` runs the whole sequence in one fused kernel.
Here a step calls torch only for the matmul (BLAS does it best) and for the sigmoid and tanh, and
does everything else in compiled loops over the ``B * H`` units: the forward pass is three torch
operations and two compiled calls a step (it was seven operations), the backward pass one matmul
and one compiled call (it was five operations). numba's ``exp`` and ``tanh`` are scalar
calls on this machine (no vector math library), several times slower than torch's, so they stay
in torch; one sigmoid covers all four gates because the candidate's rows of the weights are
doubled first, and ``tanh(a) = 2 sigma(2a) - 1``.

Each compiled function loops over the batch rows and, within a row, runs one short loop per
quantity: loops that read a few arrays and write one are what the compiler turns into vector
instructions (one loop writing five arrays is not, and is about twice as slow). Compiled with
:func:`nlpcourse.compiled.njit_cached`: the machine code is kept on disk, so only the first call
on a machine pays for the compiling, a second or two per dtype.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from nlpcourse.compiled import njit_cached

# Arrays are numpy views of the layer's torch tensors (same memory): ``gates`` (T, B, 4H) the
# gates of every step, ``cs`` (T+1, B, H) the cells c_0 .. c_T, ``tanh_c`` (T, B, H) tanh(c_t),
# ``hs`` (T+1, B, H) the states h_0 .. h_T. ``t`` counts steps from 0: step t reads c_t and h_t
# and writes c_{t+1} and h_{t+1} (the book's step t + 1).


@njit_cached
def cell_step(t: int, gates: np.ndarray, cs: np.ndarray, tanh_c: np.ndarray) -> None:
    """Eq. (lstm-c) for step ``t``: ``c_{t+1} = f * c_t + i * g``, and a copy of it in
    ``tanh_c[t]`` for torch's in-place tanh.

    On entry ``gates[t]`` holds ``sigma`` of the pre-activations, the candidate's doubled, so its
    block becomes ``g = 2 sigma(2 a_g) - 1 = tanh(a_g)``.
    """
    H = cs.shape[2]
    one = np.ones(1, dtype=gates.dtype)[0]  # 1 in the arrays' dtype (a float literal is float64)
    for b in range(cs.shape[1]):
        i, f, g = gates[t, b, :H], gates[t, b, H : 2 * H], gates[t, b, 2 * H : 3 * H]
        c_prev, c, c_copy = cs[t, b], cs[t + 1, b], tanh_c[t, b]  # (H,) each
        for j in range(H):
            g[j] = (one + one) * g[j] - one  # tanh(a_g)
        for j in range(H):
            c[j] = f[j] * c_prev[j] + i[j] * g[j]  # (lstm-c)
        for j in range(H):
            c_copy[j] = c[j]


@njit_cached
def hidden_step(t: int, gates: np.ndarray, tanh_c: np.ndarray, hs: np.ndarray) -> None:
    """Eq. (lstm-h) for step ``t``: ``h_{t+1} = o * tanh(c_{t+1})``."""
    H = hs.shape[2]
    for b in range(hs.shape[1]):
        o, tc, h = gates[t, b, 3 * H :], tanh_c[t, b], hs[t + 1, b]  # (H,) each
        for j in range(H):
            h[j] = o[j] * tc[j]


@njit_cached
def backward_step(
    t: int,
    gates: np.ndarray,
    cs: np.ndarray,
    tanh_c: np.ndarray,
    d_out: np.ndarray,
    dh: np.ndarray,
    dc: np.ndarray,
    d_a: np.ndarray,
) -> None:
    """Backpropagation through step ``t``, in place.

    On entry ``dh`` (B, H) is dL/dh_{t+1} and ``dc`` (B, H) is dL/dc_{t+1} along the cell path
    (from the step after). Writes ``d_a[t]`` (B, 4H), dL/da for the four gates' pre-activations;
    ``dc`` becomes dL/dc_t along the cell path, times the forget gate (the constant error
    carousel); ``dh`` becomes ``d_out[t - 1]``, the output's share of dL/dh_t, to which the caller
    adds the gates' share ``d_a[t] W_hh``. With sigma' = sigma (1 - sigma), tanh' = 1 - tanh^2.
    """
    H = dh.shape[1]
    one = np.ones(1, dtype=gates.dtype)[0]
    for b in range(dh.shape[0]):
        i, f = gates[t, b, :H], gates[t, b, H : 2 * H]
        g, o = gates[t, b, 2 * H : 3 * H], gates[t, b, 3 * H :]
        d_i, d_f = d_a[t, b, :H], d_a[t, b, H : 2 * H]
        d_g, d_o = d_a[t, b, 2 * H : 3 * H], d_a[t, b, 3 * H :]
        c_prev, tc, d_h, d_c = cs[t, b], tanh_c[t, b], dh[b], dc[b]  # (H,) each
        for j in range(H):
            d_c[j] += d_h[j] * o[j] * (one - tc[j] * tc[j])  # dL/dc: cell path + through h
        for j in range(H):
            d_i[j] = d_c[j] * g[j] * i[j] * (one - i[j])  # input gate
        for j in range(H):
            d_f[j] = d_c[j] * c_prev[j] * f[j] * (one - f[j])  # forget gate
        for j in range(H):
            d_g[j] = d_c[j] * i[j] * (one - g[j] * g[j])  # candidate
        for j in range(H):
            d_o[j] = d_h[j] * tc[j] * o[j] * (one - o[j])  # output gate
        for j in range(H):
            d_c[j] *= f[j]  # dL/dc along the cell path, one step back
        for j in range(H):
            d_h[j] = d_out[t - 1, b, j] if t else 0


def forward_pass(
    x: Tensor, h_0: Tensor, c_0: Tensor, weight_ih: Tensor, weight_hh: Tensor, bias: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Eqs. (lstm-gates), (lstm-c), (lstm-h) over a sequence: ``x`` (T, B, D), ``h_0`` and
    ``c_0`` (B, H), the weights (4H, D) and (4H, H) and ``bias = b_ih + b_hh`` (4H,), gate order
    i, f, g, o. Returns ``hs`` and ``cs`` (T+1, B, H), the states h_0 .. h_T and c_0 .. c_T, and
    what the backward pass reads: ``gates`` (T, B, 4H), i_t, f_t, g_t, o_t, and ``tanh_c``
    (T, B, H), tanh(c_t)."""
    T, B, D = x.shape
    H = h_0.shape[1]
    double_g = x.new_ones(4 * H, 1)  # the candidate's rows times 2: sigma(2a), see above
    double_g[2 * H : 3 * H] = 2.0
    W_hh_T = (weight_hh * double_g).T.contiguous()  # (H, 4H); BLAS is faster on a copy
    # a_t = W_ih x_t + b_ih + b_hh for every step: one (T*B, D) x (D, 4H) matmul
    gates = torch.addmm(bias * double_g[:, 0], x.reshape(T * B, D), (weight_ih * double_g).T)
    gates = gates.view(T, B, 4 * H)  # (T, B, 4H): i_t, f_t, g_t, o_t after the loop
    hs = x.new_empty(T + 1, B, H)
    cs = x.new_empty(T + 1, B, H)
    tanh_c = x.new_empty(T, B, H)
    hs[0], cs[0] = h_0, c_0
    a, h, tc = gates.unbind(0), hs.unbind(0), tanh_c.unbind(0)  # each step's views, at once
    gates_np, cs_np, tanh_c_np, hs_np = gates.numpy(), cs.numpy(), tanh_c.numpy(), hs.numpy()
    for t in range(T):
        a[t].addmm_(h[t], W_hh_T).sigmoid_()  # (lstm-gates), the candidate's doubled
        cell_step(t, gates_np, cs_np, tanh_c_np)  # (lstm-c)
        tc[t].tanh_()
        hidden_step(t, gates_np, tanh_c_np, hs_np)  # (lstm-h)
    return hs, cs, gates, tanh_c


def backward_pass(
    x: Tensor,
    hs: Tensor,
    cs: Tensor,
    gates: Tensor,
    tanh_c: Tensor,
    weight_ih: Tensor,
    weight_hh: Tensor,
    d_output: Tensor,
    d_h_n: Tensor,
    d_c_n: Tensor,
) -> tuple[Tensor, ...]:
    """Backpropagation through time: the arguments of :func:`forward_pass` and what it returned,
    and the loss's gradients for the outputs (T, B, H), ``h_T`` and ``c_T`` (B, H). Returns the
    gradients for ``x``, ``h_0``, ``c_0``, ``weight_ih``, ``weight_hh``, ``b_ih`` and ``b_hh``.
    The weight gradients are single matmuls over all steps, as in eq. (bptt-grads):
    ``dL/dW_hh = sum_t delta_t h_{t-1}^T``."""
    T, B, D = x.shape
    H = hs.shape[2]
    d_out = d_output.contiguous()  # (T, B, H); often an expanded tensor of ones
    d_a = x.new_empty(T, B, 4 * H)  # dL/da_t, filled from t = T down
    d_a_t = d_a.unbind(0)
    dh = torch.add(d_out[T - 1], d_h_n, out=x.new_empty(B, H))  # dL/dh_T
    dc = x.new_empty(B, H).copy_(d_c_n)  # dL/dc_T
    arrays = tuple(array.numpy() for array in (gates, cs, tanh_c, d_out, dh, dc, d_a))
    for t in reversed(range(T)):
        backward_step(t, *arrays)  # d_a[t]; dc = dL/dc_t (cell path); dh = d_out[t-1]
        dh.addmm_(d_a_t[t], weight_hh)  # dL/dh_t: plus through step t's gates (they read h_t)
    d_a = d_a.view(T * B, 4 * H)
    d_x = (d_a @ weight_ih).view(T, B, D)  # (T, B, D)
    d_weight_hh = d_a.T @ hs[:-1].reshape(T * B, H)  # (4H, H)
    d_weight_ih = d_a.T @ x.reshape(T * B, D)  # (4H, D)
    d_bias = d_a.sum(0)  # both biases get sum_t delta_t, (4H,)
    return d_x, dh, dc, d_weight_ih, d_weight_hh, d_bias, d_bias


class LSTMThroughTime(torch.autograd.Function):
    """The LSTM over a sequence with a hand-written backward pass (:func:`forward_pass`,
    :func:`backward_pass`), arguments and results as :class:`nlpcourse.rnn._LSTMThroughTime`
    (CPU tensors, float32 or float64)."""

    @staticmethod
    def forward(ctx, x, h_0, c_0, weight_ih, weight_hh, bias_ih, bias_hh):
        hs, cs, gates, tanh_c = forward_pass(x, h_0, c_0, weight_ih, weight_hh, bias_ih + bias_hh)
        ctx.save_for_backward(x, hs, cs, gates, tanh_c, weight_ih, weight_hh)
        return hs[1:], hs[-1].clone(), cs[-1].clone()  # output (T, B, H), h_T, c_T (B, H)

    @staticmethod
    @once_differentiable
    def backward(ctx, d_output, d_h_n, d_c_n):
        return backward_pass(*ctx.saved_tensors, d_output, d_h_n, d_c_n)
