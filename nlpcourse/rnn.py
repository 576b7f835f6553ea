"""Recurrent networks: the Elman RNN and BPTT in numpy, LSTM and GRU in torch, an RNN language model
(chapter 4).

Based on Elman (1990) for the simple recurrent network; Hochreiter & Schmidhuber (1997) for the
LSTM, with the forget gate of Gers, Schmidhuber & Cummins (2000); Cho et al. (2014) for the GRU;
Pascanu, Mikolov & Bengio (2013) for gradient clipping and the vanishing/exploding gradient
analysis; Jurafsky & Martin, *Speech and Language Processing* (3rd ed. draft, "SLP3"), chapter
"RNNs and LSTMs". Equation labels ``(rnn-...)``, ``(lstm-...)``, ``(gru-...)`` are the book's
(``book/rnn.md``). Shape letters: ``T`` time steps, ``B`` batch, ``D`` input width, ``H`` hidden
width, ``V`` vocabulary size.

1. **The simple (Elman) RNN in numpy, one sequence, column vectors** -- exactly the chapter's
   equations, with the backward pass (backpropagation through time) written out term by term::

       h_t = tanh(W_xh x_t + W_hh h_{t-1} + b_h)                            (rnn-h)
       y_hat_t = softmax(W_hy h_t + b_y)                                    (rnn-y)
       L = sum_t -log y_hat_t[y_t]                                          (rnn-loss)

       dL/ds_t = y_hat_t - onehot(y_t)                                      (bptt-out)
       delta_t = dL/da_t = (1 - h_t^2) * (W_hy^T (y_hat_t - y_t) + W_hh^T delta_{t+1})  (bptt-delta)
       dL/dW_hh = sum_t delta_t h_{t-1}^T,  dL/dW_xh = sum_t delta_t x_t^T,
       dL/db_h = sum_t delta_t,  dL/dW_hy = sum_t (y_hat_t - y_t) h_t^T     (bptt-grads)

   where ``a_t`` is the pre-activation inside the tanh, ``s_t = W_hy h_t + b_y`` the output
   scores and ``delta_{T+1} = 0``. Functions: :func:`rnn_cell_forward`, :func:`rnn_forward`,
   :func:`rnn_backward`, :func:`rnn_loss_and_grads`.

2. **RNN, LSTM and GRU layers in torch**, drop-in equivalents of single-layer ``torch.nn.RNN``,
   ``torch.nn.LSTM`` and ``torch.nn.GRU`` (tanh, ``bias=True``, ``batch_first=False``): the same
   parameter names, shapes, gate order and initialisation, so ``load_state_dict`` works both ways
   and the outputs and gradients agree (the tests check this). Inputs are ``(T, B, D)``. The input
   part ``W_ih x_t + b_ih`` of every step is one matmul over all ``T * B`` rows; only the
   recurrent part loops over time. With gates ``sigma`` (logistic sigmoid)::

       LSTM (gate order i, f, g, o in weight_ih_l0 and weight_hh_l0):
       i_t = sigma(W_ii x_t + b_ii + W_hi h_{t-1} + b_hi)      input gate
       f_t = sigma(W_if x_t + b_if + W_hf h_{t-1} + b_hf)      forget gate          (lstm-gates)
       g_t = tanh (W_ig x_t + b_ig + W_hg h_{t-1} + b_hg)      candidate cell
       o_t = sigma(W_io x_t + b_io + W_ho h_{t-1} + b_ho)      output gate
       c_t = f_t * c_{t-1} + i_t * g_t                                              (lstm-c)
       h_t = o_t * tanh(c_t)                                                        (lstm-h)

       GRU (gate order r, z, n):
       r_t = sigma(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr)      reset gate           (gru-r)
       z_t = sigma(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)      update gate          (gru-z)
       n_t = tanh (W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn))   torch's form    (gru-n)
       n_t = tanh (W_in x_t + b_in + W_hn (r_t * h_{t-1}) + b_hn)   textbook form   (gru-n-textbook)
       h_t = (1 - z_t) * n_t + z_t * h_{t-1}                                        (gru-h)

   :func:`lstm_forward` is the LSTM over a sequence read top to bottom in one place, the
   equations above line by line. The LSTM layer runs it with autograd (``hand_backward=False``),
   or by default the same arithmetic with its backward pass written by hand
   (:class:`_LSTMThroughTime`, in torch operations, on every device and dtype), the same BPTT as
   the numpy RNN's: its line ``dc_next = dc * forget[t]`` is the "constant error carousel", the
   reason an LSTM's gradient can survive many steps. It is the backward pass chapter 4 shows, and
   the one that runs. The RNN and GRU layers leave the backward pass to autograd. Outside the
   book, use ``torch.nn.LSTM``: the same layer, its whole sequence in one fused kernel.

3. **Gradients through time** (:func:`hidden_state_jacobian_norms`, :func:`cell_state_jacobian`,
   :func:`forget_gate_product`): the norms of ``dh_T/dh_k`` that shrink or grow geometrically in a
   tanh RNN, and the check that along the LSTM's direct cell path ``dc_T/dc_k`` is the product of
   the forget gates ``f_{k+1} * ... * f_T``.

4. **An RNN language model** (:class:`RNNLM`: embedding, recurrent layer, linear map to ``V``
   scores, softmax), a language model in the sense of :mod:`nlpcourse.lm`, which holds what all
   the book's language models share: the vocabulary rule, encoding, stream batching, perplexity
   and the training loop with teacher forcing, truncated BPTT and gradient clipping
   (:func:`~nlpcourse.lm.train_lm`, :func:`~nlpcourse.lm.evaluate_perplexity`, re-exported
   here). Every word and each sentence's ``</s>`` is predicted and counted, ``<s>`` never, and
   ``PPL = exp(-(1/T) sum_i log P(w_i | w_<i))``                                    (lm-ppl).

5. **Notation and architectures** (:data:`LAYOUTS`, :data:`ARCHITECTURES`,
   :data:`ARCHITECTURE_TASKS`): the two layouts of a batch array in which the book's ``x^(i)<t>``
   sits, and the four recurrent architectures (many-to-many with ``T_x = T_y``, many-to-one,
   one-to-many, encoder-decoder) and the tasks of the exercise's concept questions, whose answer
   keys are in :mod:`nlpcourse.checks.rnn`.

Deliberate departures, stated plainly:

* The numpy RNN is for one sequence and writes ``W x`` (column vectors) as the equations do. The
  torch layers take a batch and, like torch, store ``W_ih`` as ``(G*H, D)`` and compute
  ``x W_ih^T``; they keep torch's two bias vectors ``b_ih`` and ``b_hh`` where the book has one
  ``b``: only their sum matters, except in the GRU's ``b_hn`` (below).
* **GRU.** torch (like cuDNN) applies the reset gate *after* the recurrent linear map,
  eq. (gru-n), while Cho et al. (2014) apply it to the hidden state *before* it,
  eq. (gru-n-textbook). Both are offered (``GRU(..., variant="torch" | "textbook")``,
  :func:`gru_cell`, :func:`gru_cell_textbook`), with the same parameters. They agree when
  ``r_t = 1``, and when ``h_{t-1} = 0`` only if also ``b_hn = 0`` (torch's form then still
  scales ``b_hn`` by ``r_t``). The update gate follows Cho et al. and torch: ``z_t`` is the share
  of the *old* state kept, eq. (gru-h); texts that write ``h_t = (1 - z_t) h_{t-1} + z_t n_t``
  use the same model with ``z`` standing for ``1 - z``.
* The LSTM has no peephole connections (Gers & Schmidhuber 2000) and, to stay a drop-in
  replacement, no forget-gate bias of 1 at initialisation (Jozefowicz et al. 2015): every
  parameter starts uniform in ``[-1/sqrt(H), 1/sqrt(H)]``, as in torch.
* The layers are single-layer, one direction, no dropout, time-first ``(T, B, D)`` only (no
  unbatched ``(T, D)`` input: use ``x.unsqueeze(1)``).
* The language model reads a corpus as one **continuous stream** ``</s> w w w </s> w w </s> ...``
  (:mod:`nlpcourse.lm`): the first ``</s>`` is context only and stands for ``<s>`` (which is not
  in the vocabulary and is never predicted), and each later ``</s>`` is both predicted and the
  start context of the next sentence. The hidden state runs on across sentence boundaries, so
  unlike an n-gram model the RNN may condition on earlier sentences. It is trained with Adam and
  a full softmax over the vocabulary, not with plain SGD as in Elman (1990) and Mikolov et al.
  (2010). :class:`RNNLM` takes its ids batch first, ``(B, T)``, like every language model of
  the book, while its recurrent layers, like torch's, read time first, ``(T, B, D)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from nlpcourse.guard import reference

# The language-model layer (section 4) lives in nlpcourse.lm, shared with chapters 1, 5 and 6;
# these names stay importable from here, where chapter 4 first met them.
from nlpcourse.lm import BENGIO_MIN_COUNT as BENGIO_MIN_COUNT
from nlpcourse.lm import EOS as EOS
from nlpcourse.lm import EOS_ID as EOS_ID
from nlpcourse.lm import IGNORE_INDEX as IGNORE_INDEX
from nlpcourse.lm import UNK as UNK
from nlpcourse.lm import UNK_ID as UNK_ID
from nlpcourse.lm import batchify as batchify
from nlpcourse.lm import build_vocab as build_vocab
from nlpcourse.lm import encode as encode
from nlpcourse.lm import evaluate_perplexity as evaluate_perplexity
from nlpcourse.lm import states_nll
from nlpcourse.lm import train_lm as train_lm

NUMPY_PARAMS = ("W_xh", "W_hh", "W_hy", "b_h", "b_y")


# ================================================================ 1. the Elman RNN and BPTT, numpy


def init_rnn_params(D: int, H: int, V: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Parameters of the numpy RNN, uniform in ``[-1/sqrt(H), 1/sqrt(H)]`` (float64).

    ``W_xh`` (H, D), ``W_hh`` (H, H), ``b_h`` (H,), ``W_hy`` (V, H), ``b_y`` (V,).
    """
    rng = np.random.default_rng(seed)
    bound = 1 / math.sqrt(H)
    shapes = {"W_xh": (H, D), "W_hh": (H, H), "W_hy": (V, H), "b_h": (H,), "b_y": (V,)}
    return {name: rng.uniform(-bound, bound, size) for name, size in shapes.items()}


def softmax(o: np.ndarray) -> np.ndarray:
    """Softmax over the last axis (the largest score is subtracted first, which changes nothing
    but keeps ``exp`` from overflowing)."""
    e = np.exp(o - o.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@reference
def rnn_cell_forward(
    x_t: np.ndarray, h_prev: np.ndarray, W_xh: np.ndarray, W_hh: np.ndarray, b_h: np.ndarray
) -> np.ndarray:
    """One step of eq. (rnn-h): ``h_t = tanh(W_xh x_t + W_hh h_{t-1} + b_h)``.

    ``x_t`` (D,) and ``h_prev`` (H,) give ``h_t`` (H,).
    """
    return np.tanh(W_xh @ x_t + W_hh @ h_prev + b_h)


@reference
def rnn_forward(
    x: np.ndarray, h0: np.ndarray, params: dict[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Run the RNN over one sequence: eqs. (rnn-h) and (rnn-y) for t = 1..T.

    ``x`` is ``(T, D)`` input vectors, or ``(T,)`` integer ids read as one-hot vectors of size
    ``D``. Returns ``hs`` (T+1, H) with ``hs[t] = h_t`` for t = 0..T (``hs[0]`` is ``h0``) and
    ``y_hat`` (T, V) with ``y_hat[t-1] = y_hat_t``, the output distribution after reading
    ``x_t = x[t-1]`` (Python counts from 0, the book from 1).
    """
    D, H, V = _check_numpy_params(params)
    x = _input_vectors(x, D)  # (T, D)
    h0 = _check_vector(h0, H, "h0")
    T = len(x)
    hs = np.zeros((T + 1, H))
    hs[0] = h0
    y_hat = np.zeros((T, V))
    for t in range(1, T + 1):
        hs[t] = rnn_cell_forward(x[t - 1], hs[t - 1], params["W_xh"], params["W_hh"], params["b_h"])
        y_hat[t - 1] = softmax(params["W_hy"] @ hs[t] + params["b_y"])  # (rnn-y)
    return hs, y_hat


def cross_entropy(y_hat: np.ndarray, targets: np.ndarray) -> float:
    """Eq. (rnn-loss): ``L = sum_t -log y_hat_t[y_t]`` (natural log, summed over time)."""
    return float(-np.log(y_hat[np.arange(len(targets)), targets]).sum())


@reference
def rnn_backward(
    x: np.ndarray,
    targets: np.ndarray,
    hs: np.ndarray,
    y_hat: np.ndarray,
    params: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Backpropagation through time for the loss of eq. (rnn-loss).

    ``x`` and ``targets`` as given to :func:`rnn_loss_and_grads`, ``hs`` and ``y_hat`` from
    :func:`rnn_forward`. Returns the gradient of ``L`` for every parameter (same names and shapes)
    and for the initial state, ``grads["h0"]``.

    The loop walks back from t = T to 1. At step t the hidden state ``h_t`` gets gradient from two
    places: the output ``y_hat_t`` it produced, and the next hidden state ``h_{t+1}`` it fed
    (``dh_next = W_hh^T delta_{t+1}``, zero at t = T). That second term is what carries the
    error back through time, multiplied once more by ``W_hh^T`` and a tanh derivative per step.
    """
    D, H, V = _check_numpy_params(params)
    x = _input_vectors(x, D)  # (T, D)
    targets = _check_targets(targets, len(x), V)
    W_hh, W_hy = params["W_hh"], params["W_hy"]
    grads = {name: np.zeros_like(params[name]) for name in NUMPY_PARAMS}
    dh_next = np.zeros(H)  # W_hh^T delta_{t+1}: what step t+1 sends back to h_t
    for t in range(len(x), 0, -1):
        ds = y_hat[t - 1].copy()
        ds[targets[t - 1]] -= 1  # dL/ds_t = y_hat_t - y_t, eq. (bptt-out)
        grads["W_hy"] += np.outer(ds, hs[t])  # sum_t (y_hat_t - y_t) h_t^T
        grads["b_y"] += ds
        dh = W_hy.T @ ds + dh_next  # dL/dh_t: through y_hat_t, and through h_{t+1}
        delta = (1 - hs[t] ** 2) * dh  # delta_t = dL/da_t, eq. (bptt-delta); tanh' = 1 - tanh^2
        grads["W_hh"] += np.outer(delta, hs[t - 1])  # sum_t delta_t h_{t-1}^T, eq. (bptt-grads)
        grads["W_xh"] += np.outer(delta, x[t - 1])  # sum_t delta_t x_t^T
        grads["b_h"] += delta  # sum_t delta_t
        dh_next = W_hh.T @ delta  # carried back to step t-1
    grads["h0"] = dh_next  # dL/dh_0 = W_hh^T delta_1
    return grads


@reference
def rnn_loss_and_grads(
    x: np.ndarray, targets: np.ndarray, h0: np.ndarray, params: dict[str, np.ndarray]
) -> tuple[float, dict[str, np.ndarray], np.ndarray]:
    """Loss (rnn-loss), its gradients (see :func:`rnn_backward`) and the last state ``h_T``.

    ``x``: ``(T, D)`` input vectors or ``(T,)`` ids (one-hot); ``targets``: ``(T,)`` ids in
    ``[0, V)``, ``targets[t-1] = y_t``; ``h0``: ``(H,)``; ``params`` as from
    :func:`init_rnn_params`. For a character-level language model ``targets`` is ``x`` shifted
    by one, and ``h_T`` is the ``h0`` of the next chunk of text.
    """
    hs, y_hat = rnn_forward(x, h0, params)
    targets = _check_targets(targets, len(y_hat), y_hat.shape[1])
    loss = cross_entropy(y_hat, targets)
    return loss, rnn_backward(x, targets, hs, y_hat, params), hs[-1]


def _check_numpy_params(params: dict[str, np.ndarray]) -> tuple[int, int, int]:
    """(D, H, V) from the parameter shapes, or a ValueError saying which one is wrong."""
    missing = [name for name in NUMPY_PARAMS if name not in params]
    if missing:
        raise ValueError(f"params is missing {missing}; it needs {list(NUMPY_PARAMS)}")
    H, D = np.shape(params["W_xh"])
    V = np.shape(params["W_hy"])[0]
    expected = {"W_xh": (H, D), "W_hh": (H, H), "W_hy": (V, H), "b_h": (H,), "b_y": (V,)}
    for name, shape in expected.items():
        if np.shape(params[name]) != shape:
            raise ValueError(
                f"params[{name!r}] has shape {np.shape(params[name])}, expected {shape} "
                f"(from W_xh (H, D) = {(H, D)} and W_hy (V, H) with V = {V})"
            )
    return D, H, V


def _input_vectors(x: np.ndarray, D: int) -> np.ndarray:
    """``x`` as ``(T, D)`` float vectors; ``(T,)`` integer ids become one-hot rows."""
    x = np.asarray(x)
    if x.ndim == 0 or len(x) == 0:
        raise ValueError(f"x must be a non-empty sequence, got {x!r}")
    if x.ndim == 1 and np.issubdtype(x.dtype, np.integer):
        if x.min() < 0 or x.max() >= D:
            raise ValueError(f"input ids must lie in [0, D) = [0, {D}), got {x.tolist()}")
        return np.eye(D)[x]  # (T,) -> (T, D)
    if x.ndim != 2 or x.shape[1] != D:
        raise ValueError(
            f"x must be (T,) integer ids or (T, D) = (T, {D}) vectors, got shape {x.shape}"
        )
    return x.astype(float)


def _check_vector(v: np.ndarray, size: int, name: str) -> np.ndarray:
    v = np.asarray(v, dtype=float)
    if v.shape != (size,):
        raise ValueError(f"{name} must have shape ({size},), got {v.shape}")
    return v


def _check_targets(targets: np.ndarray, T: int, V: int) -> np.ndarray:
    targets = np.asarray(targets)
    if targets.shape != (T,) or not np.issubdtype(targets.dtype, np.integer):
        raise ValueError(
            f"targets must be {T} integer ids (one per input), got shape {targets.shape}"
        )
    if targets.min() < 0 or targets.max() >= V:
        raise ValueError(f"targets must lie in [0, V) = [0, {V}), got {targets.tolist()}")
    return targets


# ======================================================== 2. cells and layers in torch (batched)
#
# A "recurrence" function takes the input part of the step already computed,
# wx_t = W_ih x_t + b_ih (B, G*H), and does the rest; the public cells compute wx_t from x_t and
# call it, and the layers compute wx for all time steps in one matmul first.


def _input_projection(x: Tensor, weight_ih: Tensor, bias_ih: Tensor) -> Tensor:
    """``W_ih x_t + b_ih`` for every step at once: one (T*B, D) x (D, G*H) matmul."""
    T, B, D = x.shape
    return F.linear(x.reshape(T * B, D), weight_ih, bias_ih).reshape(T, B, -1)  # (T, B, G*H)


def _rnn_recurrence(wx_t: Tensor, h_prev: Tensor, weight_hh: Tensor, bias_hh: Tensor) -> Tensor:
    return torch.tanh(wx_t + F.linear(h_prev, weight_hh, bias_hh))  # (rnn-h), (B, H)


def _lstm_gates(a: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Pre-activations ``a`` (..., 4H), in torch's order i, f, g, o, to the gates (..., H) each."""
    a_i, a_f, a_g, a_o = a.chunk(4, dim=-1)
    return torch.sigmoid(a_i), torch.sigmoid(a_f), torch.tanh(a_g), torch.sigmoid(a_o)


def _lstm_recurrence(
    wx_t: Tensor, h_prev: Tensor, c_prev: Tensor, weight_hh: Tensor, bias_hh: Tensor
) -> tuple[Tensor, Tensor]:
    i_t, f_t, g_t, o_t = _lstm_gates(wx_t + F.linear(h_prev, weight_hh, bias_hh))  # (lstm-gates)
    c_t = f_t * c_prev + i_t * g_t  # (lstm-c), (B, H)
    h_t = o_t * torch.tanh(c_t)  # (lstm-h), (B, H)
    return h_t, c_t


def _gru_recurrence(wx_t: Tensor, h_prev: Tensor, weight_hh: Tensor, bias_hh: Tensor) -> Tensor:
    wx_r, wx_z, wx_n = wx_t.chunk(3, dim=1)  # (B, H) each: W_ir x_t + b_ir, ...
    wh_r, wh_z, wh_n = F.linear(h_prev, weight_hh, bias_hh).chunk(3, dim=1)  # W_hr h + b_hr, ...
    r_t = torch.sigmoid(wx_r + wh_r)  # (gru-r)
    z_t = torch.sigmoid(wx_z + wh_z)  # (gru-z)
    n_t = torch.tanh(wx_n + r_t * wh_n)  # (gru-n): r_t scales W_hn h_{t-1} + b_hn
    return (1 - z_t) * n_t + z_t * h_prev  # (gru-h)


def _gru_textbook_recurrence(
    wx_t: Tensor, h_prev: Tensor, weight_hh: Tensor, bias_hh: Tensor
) -> Tensor:
    W_hr, W_hz, W_hn = weight_hh.chunk(3, dim=0)  # (H, H) each
    b_hr, b_hz, b_hn = bias_hh.chunk(3)  # (H,) each
    wx_r, wx_z, wx_n = wx_t.chunk(3, dim=1)  # (B, H) each
    r_t = torch.sigmoid(wx_r + F.linear(h_prev, W_hr, b_hr))  # (gru-r)
    z_t = torch.sigmoid(wx_z + F.linear(h_prev, W_hz, b_hz))  # (gru-z)
    n_t = torch.tanh(wx_n + F.linear(r_t * h_prev, W_hn, b_hn))  # (gru-n-textbook)
    return (1 - z_t) * n_t + z_t * h_prev  # (gru-h)


@reference
def rnn_cell(
    x_t: Tensor,
    h_prev: Tensor,
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Tensor,
    bias_hh: Tensor,
) -> Tensor:
    """One tanh RNN step, eq. (rnn-h) in torch's layout:
    ``h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)``.

    ``x_t`` (B, D), ``h_prev`` (B, H), ``weight_ih`` (H, D), ``weight_hh`` (H, H), biases (H,);
    returns ``h_t`` (B, H). Same as ``torch.nn.RNNCell`` with these parameters.
    """
    return _rnn_recurrence(F.linear(x_t, weight_ih, bias_ih), h_prev, weight_hh, bias_hh)


@reference
def lstm_cell(
    x_t: Tensor,
    h_prev: Tensor,
    c_prev: Tensor,
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Tensor,
    bias_hh: Tensor,
) -> tuple[Tensor, Tensor]:
    """One LSTM step, eqs. (lstm-gates), (lstm-c), (lstm-h); returns ``(h_t, c_t)``, (B, H) each.

    ``x_t`` (B, D), ``h_prev`` and ``c_prev`` (B, H), ``weight_ih`` (4H, D), ``weight_hh``
    (4H, H), biases (4H,), rows in torch's gate order i, f, g, o. Same as ``torch.nn.LSTMCell``.
    """
    return _lstm_recurrence(F.linear(x_t, weight_ih, bias_ih), h_prev, c_prev, weight_hh, bias_hh)


@reference
def gru_cell(
    x_t: Tensor,
    h_prev: Tensor,
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Tensor,
    bias_hh: Tensor,
) -> Tensor:
    """One GRU step as torch computes it, eqs. (gru-r), (gru-z), (gru-n), (gru-h).

    The reset gate multiplies ``W_hn h_{t-1} + b_hn``, the hidden state *after* its linear map.
    ``x_t`` (B, D), ``h_prev`` (B, H), ``weight_ih`` (3H, D), ``weight_hh`` (3H, H), biases (3H,),
    rows in torch's gate order r, z, n; returns ``h_t`` (B, H). Same as ``torch.nn.GRUCell``.
    """
    return _gru_recurrence(F.linear(x_t, weight_ih, bias_ih), h_prev, weight_hh, bias_hh)


@reference
def gru_cell_textbook(
    x_t: Tensor,
    h_prev: Tensor,
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Tensor,
    bias_hh: Tensor,
) -> Tensor:
    """One GRU step in the form of Cho et al. (2014), eq. (gru-n-textbook):
    ``n_t = tanh(W_in x_t + b_in + W_hn (r_t * h_{t-1}) + b_hn)``.

    The reset gate multiplies the hidden state *before* the linear map, so it decides which
    parts of ``h_{t-1}`` the candidate ``n_t`` may read. Same parameters as :func:`gru_cell`;
    the two agree when ``r_t = 1``, and when ``h_{t-1} = 0`` only if ``b_hn = 0`` too (torch's
    form multiplies ``b_hn`` by ``r_t``, this one does not). ``z_t`` and eq. (gru-h) as in
    :func:`gru_cell`.
    """
    return _gru_textbook_recurrence(F.linear(x_t, weight_ih, bias_ih), h_prev, weight_hh, bias_hh)


def _gate_rows(H: int, blocks: tuple[int, ...], device: torch.device) -> Tensor:
    """Row indices that take the (H, .) blocks of a (4H, .) gate weight in the order ``blocks``."""
    return (
        torch.tensor(blocks, device=device)[:, None] * H + torch.arange(H, device=device)
    ).ravel()


class _LSTMThroughTime(torch.autograd.Function):
    """The LSTM over a whole sequence, with backpropagation through time written by hand.

    The arithmetic of :func:`lstm_forward`, arranged for speed. The loop runs once per time step
    in Python, and at the book's sizes a tensor operation costs more in Python and dispatch than
    in arithmetic, so each step does as few as it can. The gates' rows are taken in the order
    o, i, f, g (torch stores i, f, g, o), so that the three sigmoid gates are one block and the
    tanh candidate another. Forward: ``W_ih x_t + b_ih + b_hh`` for all steps at once, then per
    step one ``addmm_`` for ``W_hh h_{t-1}``, one sigmoid, one tanh and four operations for
    ``c_t`` and ``h_t``, all written in place into tensors that hold every step (kept for the
    backward pass). Backward: the local derivatives of all steps at once, on contiguous blocks;
    then a walk from t = T down to 1 carrying ``dL/dh`` and ``dL/dc``, five operations a step;
    then the weight gradients as single matmuls over all steps, as in eq. (bptt-grads):
    ``dL/dW_hh = sum_t delta_t h_{t-1}^T``. Autograd on the readable loop
    (``LSTM(..., hand_backward=False)``) records a node per operation per step and accumulates
    the weight gradients step by step. The tests compare both with torch.nn.LSTM;
    ``benchmarks/rnn.py`` times them.

    :class:`LSTM` runs this class on every device and dtype; it is the backward pass chapter 4
    shows. Measured in ``benchmarks/rnn.py`` (figures in ``benchmarks/README.md``): language-model
    training with it runs at 0.9-1.0 times the words per second of the same model with
    ``torch.nn.LSTM`` inside, and the layer alone takes 1.5-1.8 times ``torch.nn.LSTM``'s time
    at the benchmark's two larger sizes and about 2.7 times at the small, long one (T = 100,
    H = 64), where each step's Python calls cost more than its arithmetic. A twin with each
    step's elementwise work compiled by numba was closer to torch alone (1.0-1.6 times) but
    trained at about the same speed, a second backward pass the book did not show; issue 44
    removed it.
    """

    @staticmethod
    def forward(ctx, x, h_0, c_0, weight_ih, weight_hh, bias_ih, bias_hh):
        T, B, D = x.shape
        H = h_0.shape[1]
        oifg = _gate_rows(H, (3, 0, 1, 2), x.device)  # torch's rows i, f, g, o read as o, i, f, g
        W_ih, W_hh = weight_ih.index_select(0, oifg), weight_hh.index_select(0, oifg)  # (4H, .)
        # a_t = W_ih x_t + b_ih + b_hh for every step: one (T*B, D) x (D, 4H) matmul; the loop
        # adds W_hh h_{t-1} and turns each a_t into its gates in place
        bias = (bias_ih + bias_hh).index_select(0, oifg)  # (4H,)
        gates = torch.addmm(bias, x.reshape(T * B, D), W_ih.T)
        gates = gates.view(T, B, 4 * H)  # (T, B, 4H): o_t, i_t, f_t, g_t after the loop
        hs = x.new_empty(T + 1, B, H)  # h_0 .. h_T
        cs = x.new_empty(T + 1, B, H)  # c_0 .. c_T
        tanh_c = x.new_empty(T, B, H)  # tanh(c_t)
        hs[0], cs[0] = h_0, c_0
        # each step's slices, made once: unbind returns all T views in one call
        a, sig, g = (
            gates[..., k].unbind(0) for k in (slice(None), slice(3 * H), slice(3 * H, None))
        )
        o, i, f = (gates[..., k * H : (k + 1) * H].unbind(0) for k in range(3))  # T of (B, H)
        h, c, tc = (t.unbind(0) for t in (hs, cs, tanh_c))
        W_hh_T = W_hh.T  # (H, 4H)
        for t in range(T):
            a[t].addmm_(h[t], W_hh_T)  # (lstm-gates): pre-activations a_t (B, 4H)
            sig[t].sigmoid_()  # o_t, i_t, f_t
            g[t].tanh_()  # g_t
            torch.mul(f[t], c[t], out=c[t + 1]).addcmul_(i[t], g[t])  # (lstm-c)
            torch.tanh(c[t + 1], out=tc[t])
            torch.mul(o[t], tc[t], out=h[t + 1])  # (lstm-h)
        ctx.save_for_backward(x, hs, cs, gates, tanh_c, W_ih, W_hh)
        return hs[1:], hs[T].clone(), cs[T].clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, d_output, d_h_n, d_c_n):
        x, hs, cs, gates, tanh_c, W_ih, W_hh = ctx.saved_tensors
        T, B, D = x.shape
        H = hs.shape[2]
        # each gate as one contiguous (T, B, H) block: elementwise work on strided slices is
        # many times slower (a short inner loop per row); the forward pass kept them in the order
        # o, i, f, g, and W_hh's rows in the same order
        o, i, f, g = gates.view(T, B, 4, H).permute(2, 0, 1, 3).contiguous()  # (T, B, H) each
        # local derivatives of every step, at once; sigma' = sigma (1 - sigma), tanh' = 1 - tanh^2
        dc_da = torch.stack(  # dc_t/da for the three gates that act through c_t: i, f, g
            [g * i * (1 - i), cs[:-1] * f * (1 - f), i * (1 - g**2)], dim=2
        ).unbind(0)  # T of (B, 3, H)
        dh_dao = (tanh_c * o * (1 - o)).unbind(0)  # dh_t/da_o, T of (B, H)
        dh_dc = (o * (1 - tanh_c**2)).unbind(0)  # dh_t/dc_t, T of (B, H)
        forget = f.unbind(0)
        d_a = x.new_empty(T, B, 4, H)  # dL/da_t for the gates o, i, f, g, filled from t = T down
        d_a_t = d_a.view(T, B, 4 * H).unbind(0)  # T of (B, 4H)
        d_a_cell = d_a[:, :, 1:].unbind(0)  # the gates i, f, g, T of (B, 3, H)
        d_a_o = d_a[:, :, 0].unbind(0)  # the output gate, T of (B, H)
        d_out = d_output.unbind(0)
        dc = x.new_empty(B, H)  # dL/dc_t, rewritten at each step
        dc_3 = dc.unsqueeze(1)  # the same numbers as (B, 1, H), for the three gates at once
        dh, dc_next = d_out[T - 1] + d_h_n, d_c_n  # dL/dh_T and dL/dc_T from the final state
        for t in reversed(range(T)):
            torch.addcmul(dc_next, dh, dh_dc[t], out=dc)  # dL/dc_t: cell path + through h_t
            torch.mul(dc_3, dc_da[t], out=d_a_cell[t])  # dL/da for i, f, g
            torch.mul(dh, dh_dao[t], out=d_a_o[t])  # dL/da_o
            dc_next = dc * forget[t]  # dL/dc_{t-1} along the cell path: times the forget gate
            # dL/dh_{t-1}: through the gates of step t, plus from the output at t - 1
            dh = torch.addmm(d_out[t - 1], d_a_t[t], W_hh) if t else d_a_t[0] @ W_hh
        d_a = d_a.view(T * B, 4 * H)  # dL/da_t, rows o, i, f, g
        d_x = (d_a @ W_ih).view(T, B, D)  # (T, B, D)
        # the weight gradients, then their rows back in torch's order i, f, g, o
        ifgo = _gate_rows(H, (1, 2, 3, 0), x.device)
        d_weight_hh = (d_a.T @ hs[:-1].reshape(T * B, H)).index_select(0, ifgo)  # (4H, H)
        d_weight_ih = (d_a.T @ x.reshape(T * B, D)).index_select(0, ifgo)  # (4H, D)
        d_bias = d_a.sum(0).index_select(0, ifgo)  # both biases get sum_t delta_t, (4H,)
        return d_x, dh, dc_next, d_weight_ih, d_weight_hh, d_bias, d_bias


class _RecurrentLayer(nn.Module):
    """What RNN, LSTM and GRU share: parameters, their initialisation, input checks, the loop.

    ``n_gates`` (G) is how many (H, .) blocks ``weight_ih_l0`` and ``weight_hh_l0`` stack: 1 for
    the RNN, 4 for the LSTM, 3 for the GRU. State is kept as a tuple of (B, H) tensors inside:
    ``(h,)``, or ``(h, c)`` for the LSTM.
    """

    n_gates = 1

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        for name, size in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(size, int) or size < 1:
                raise ValueError(f"{name} must be a positive integer, got {size!r}")
        self.input_size, self.hidden_size = input_size, hidden_size
        GH = self.n_gates * hidden_size
        # created in torch's order, so that the same seed draws the same initial values
        self.weight_ih_l0 = nn.Parameter(torch.empty(GH, input_size))  # W_ih (G*H, D)
        self.weight_hh_l0 = nn.Parameter(torch.empty(GH, hidden_size))  # W_hh (G*H, H)
        self.bias_ih_l0 = nn.Parameter(torch.empty(GH))  # b_ih (G*H,)
        self.bias_hh_l0 = nn.Parameter(torch.empty(GH))  # b_hh (G*H,)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every parameter uniform in ``[-1/sqrt(H), 1/sqrt(H)]``, as torch does."""
        bound = 1 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            nn.init.uniform_(weight, -bound, bound)

    def forward(self, x: Tensor, hx=None):
        """``x`` (T, B, D) and an optional initial state -> ``(output, final state)``.

        ``output`` (T, B, H) holds ``h_1 .. h_T``; the state is ``h`` of shape (1, B, H), or
        ``(h, c)`` for the LSTM, as in torch. A missing initial state is zeros.
        """
        self._check_input(x)
        state = self._initial_state(hx, x)
        output, state = self._recur(x, state)  # (T, B, H)
        return output, self._final_state(state)

    def _recur(self, x: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, tuple[Tensor, ...]]:
        """The time loop (autograd does the backward pass)."""
        wx = _input_projection(x, self.weight_ih_l0, self.bias_ih_l0)  # (T, B, G*H)
        outputs = []
        for wx_t in wx.unbind(0):  # unbind: one autograd node for all steps, unlike wx[t]
            state = self._step(wx_t, state)
            outputs.append(state[0])
        return torch.stack(outputs), state  # (T, B, H)

    def _step(self, wx_t: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        raise NotImplementedError

    def _check_input(self, x: Tensor) -> None:
        name = type(self).__name__
        if not isinstance(x, Tensor):
            raise TypeError(f"{name} expects a torch.Tensor, got {type(x).__name__}")
        if x.ndim != 3:
            raise ValueError(
                f"{name} expects input of shape (T, B, D) (time first, batch_first=False), got "
                f"shape {tuple(x.shape)}; for one sequence of shape (T, D) pass x.unsqueeze(1)"
            )
        if x.shape[2] != self.input_size:
            raise ValueError(
                f"{name} was built with input_size D = {self.input_size}, but the input has "
                f"D = {x.shape[2]} (shape {tuple(x.shape)})"
            )
        if x.shape[0] == 0 or x.shape[1] == 0:
            raise ValueError(f"{name} got an empty input of shape {tuple(x.shape)}")

    def _check_state(self, s: Tensor, B: int, name: str) -> Tensor:
        expected = (1, B, self.hidden_size)
        if not isinstance(s, Tensor) or tuple(s.shape) != expected:
            got = tuple(s.shape) if isinstance(s, Tensor) else type(s).__name__
            raise ValueError(f"{name} must have shape (1, B, H) = {expected}, got {got}")
        return s[0]  # (B, H)

    def _initial_state(self, hx, x: Tensor) -> tuple[Tensor, ...]:
        if hx is None:
            return (x.new_zeros(x.shape[1], self.hidden_size),)
        return (self._check_state(hx, x.shape[1], "h_0"),)

    def _final_state(self, state: tuple[Tensor, ...]):
        return state[0].unsqueeze(0)  # (1, B, H)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}"


class RNN(_RecurrentLayer):
    """Elman RNN with tanh, eq. (rnn-h); a drop-in for single-layer ``torch.nn.RNN``.

    ``RNN(D, H)(x, h_0)`` with ``x`` (T, B, D) and optional ``h_0`` (1, B, H) returns
    ``(output (T, B, H), h_n (1, B, H))``. Parameters: ``weight_ih_l0`` (H, D), ``weight_hh_l0``
    (H, H), ``bias_ih_l0`` (H,), ``bias_hh_l0`` (H,).
    """

    n_gates = 1

    def _step(self, wx_t, state):
        (h_prev,) = state
        return (_rnn_recurrence(wx_t, h_prev, self.weight_hh_l0, self.bias_hh_l0),)


def lstm_forward(
    x: Tensor,
    h_0: Tensor,
    c_0: Tensor,
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias_ih: Tensor,
    bias_hh: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    """The LSTM over a whole sequence, read top to bottom: eqs. (lstm-gates), (lstm-c), (lstm-h).

    ``x`` (T, B, D), ``h_0`` and ``c_0`` (B, H), ``weight_ih`` (4H, D), ``weight_hh`` (4H, H),
    biases (4H,), rows in torch's gate order i, f, g, o. Returns ``output`` (T, B, H), the states
    ``h_1 .. h_T``, and the last ``h_T`` and ``c_T`` (B, H). Autograd does the backward pass.
    :class:`LSTM` runs this loop (``hand_backward=False``) or the same arithmetic with the
    backward pass written by hand (:class:`_LSTMThroughTime`); the tests check both against
    ``torch.nn.LSTM`` and each other.
    """
    T, B, D = x.shape
    # the input part of every gate at every step, W_ih x_t + b_ih: one matmul for all T*B rows
    wx = F.linear(x.reshape(T * B, D), weight_ih, bias_ih).reshape(T, B, -1)  # (T, B, 4H)
    h_t, c_t = h_0, c_0  # (B, H) each
    outputs = []
    for wx_t in wx.unbind(0):  # wx_t (B, 4H); unbind: one autograd node for all steps
        a_t = wx_t + F.linear(h_t, weight_hh, bias_hh)  # (B, 4H): the gates' pre-activations
        a_i, a_f, a_g, a_o = a_t.chunk(4, dim=1)  # (B, H) each
        i_t = torch.sigmoid(a_i)  # input gate                                      (lstm-gates)
        f_t = torch.sigmoid(a_f)  # forget gate
        g_t = torch.tanh(a_g)  # candidate cell
        o_t = torch.sigmoid(a_o)  # output gate
        c_t = f_t * c_t + i_t * g_t  # (lstm-c), (B, H)
        h_t = o_t * torch.tanh(c_t)  # (lstm-h), (B, H)
        outputs.append(h_t)
    return torch.stack(outputs), h_t, c_t  # (T, B, H), (B, H), (B, H)


class LSTM(_RecurrentLayer):
    """LSTM, eqs. (lstm-gates), (lstm-c), (lstm-h); a drop-in for single-layer ``torch.nn.LSTM``.

    ``LSTM(D, H)(x, (h_0, c_0))`` with ``x`` (T, B, D) and optional ``h_0``, ``c_0`` (1, B, H)
    returns ``(output (T, B, H), (h_n, c_n))``, each (1, B, H). Parameters: ``weight_ih_l0``
    (4H, D), ``weight_hh_l0`` (4H, H), ``bias_ih_l0`` and ``bias_hh_l0`` (4H,), rows in torch's
    gate order i, f, g, o.

    The backward pass is written by hand (:class:`_LSTMThroughTime`, first derivatives only, on
    every device and dtype); ``hand_backward=False`` runs :func:`lstm_forward`, the same loop
    read top to bottom, and leaves the backward pass to autograd: the same numbers, slower, and
    differentiable twice. Outside the book, use ``torch.nn.LSTM``, the same layer in one fused
    kernel."""

    n_gates = 4

    def __init__(self, input_size: int, hidden_size: int, hand_backward: bool = True):
        self.hand_backward = hand_backward
        super().__init__(input_size, hidden_size)

    def forward(self, x: Tensor, hx=None):
        """``x`` (T, B, D) and an optional ``(h_0, c_0)`` -> ``(output, (h_n, c_n))``.

        ``output`` (T, B, H) holds ``h_1 .. h_T``; the states are (1, B, H) as in torch, and a
        missing initial state is zeros."""
        self._check_input(x)
        h_0, c_0 = self._initial_state(hx, x)  # (B, H) each
        weights = (self.weight_ih_l0, self.weight_hh_l0, self.bias_ih_l0, self.bias_hh_l0)
        if self.hand_backward:  # the same loop, with the backward pass written by hand
            output, h_n, c_n = _LSTMThroughTime.apply(x, h_0, c_0, *weights)
        else:
            output, h_n, c_n = lstm_forward(x, h_0, c_0, *weights)
        return output, (h_n.unsqueeze(0), c_n.unsqueeze(0))  # (T, B, H), (1, B, H) each

    def _step(self, wx_t, state):  # one step for nlpcourse.rnn's gradient measurements
        h_prev, c_prev = state
        return _lstm_recurrence(wx_t, h_prev, c_prev, self.weight_hh_l0, self.bias_hh_l0)

    def _initial_state(self, hx, x):
        if hx is None:
            B, H = x.shape[1], self.hidden_size
            return (x.new_zeros(B, H), x.new_zeros(B, H))
        if not isinstance(hx, tuple | list) or len(hx) != 2:
            raise ValueError("the LSTM's initial state must be a pair (h_0, c_0), each (1, B, H)")
        B = x.shape[1]
        return (self._check_state(hx[0], B, "h_0"), self._check_state(hx[1], B, "c_0"))


class GRU(_RecurrentLayer):
    """GRU, eqs. (gru-r), (gru-z), (gru-n), (gru-h); a drop-in for single-layer ``torch.nn.GRU``.

    ``GRU(D, H)(x, h_0)`` as :class:`RNN`. Parameters: ``weight_ih_l0`` (3H, D), ``weight_hh_l0``
    (3H, H), ``bias_ih_l0`` and ``bias_hh_l0`` (3H,), rows in torch's gate order r, z, n.
    ``variant="torch"`` (the default) is torch's form, eq. (gru-n), which matches torch.nn.GRU;
    ``variant="textbook"`` is the form of Cho et al. (2014), eq. (gru-n-textbook), with the same
    parameters (see :func:`gru_cell_textbook` for how the two differ).
    """

    n_gates = 3
    VARIANTS = ("torch", "textbook")

    def __init__(self, input_size: int, hidden_size: int, variant: str = "torch"):
        if variant not in self.VARIANTS:
            raise ValueError(f"variant must be one of {self.VARIANTS}, got {variant!r}")
        self.variant = variant
        super().__init__(input_size, hidden_size)

    def _step(self, wx_t, state):
        (h_prev,) = state
        recurrence = _gru_recurrence if self.variant == "torch" else _gru_textbook_recurrence
        return (recurrence(wx_t, h_prev, self.weight_hh_l0, self.bias_hh_l0),)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, variant={self.variant!r}"


# ======================================================================= 3. gradients through time


def _trajectory(
    layer: _RecurrentLayer, x: Tensor, detach_hidden: bool = False
) -> list[tuple[Tensor, ...]]:
    """The states ``[state_0, ..., state_T]`` of ``layer`` over one sequence ``x`` (T, D), each a
    tuple of (1, H) tensors, stepping with autograd from a zero state that requires grad.

    With ``detach_hidden`` each step sees ``h_{t-1}`` cut from the graph, so the only way a
    gradient can go from ``c_{t-1}`` to ``c_t`` is the LSTM's direct path ``c_t = f_t * c_{t-1} +
    ...``; the values computed are the same.
    """
    if not isinstance(x, Tensor) or x.ndim != 2:
        shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"x must be one sequence of shape (T, D), got {shape}")
    x = x.unsqueeze(1)  # (T, 1, D)
    layer._check_input(x)
    state = tuple(s.requires_grad_() for s in layer._initial_state(None, x))
    wx = _input_projection(x, layer.weight_ih_l0, layer.bias_ih_l0)  # (T, 1, G*H)
    states = [state]
    for wx_t in wx.unbind(0):
        h_prev, *rest = state
        state = layer._step(wx_t, (h_prev.detach(), *rest) if detach_hidden else state)
        states.append(state)
    return states


def _jacobians(y: Tensor, xs: Sequence[Tensor]) -> Tensor:
    """``J[k] = dy/dxs[k]`` for a (1, H) output ``y`` and (1, H) tensors ``xs``: (K, H, H).

    One backward pass per output component ``y_j``, all at once (``is_grads_batched``)."""
    H = y.shape[1]
    basis = torch.eye(H, dtype=y.dtype).unsqueeze(1)  # (H, 1, H): one row per y_j
    rows = torch.autograd.grad(
        y, xs, basis, retain_graph=True, is_grads_batched=True, materialize_grads=True
    )  # K tensors of shape (H, 1, H): rows[k][j] = dy_j/dxs[k]
    return torch.stack([r[:, 0, :] for r in rows])  # (K, H, H)


def _random_sequence(layer: _RecurrentLayer, T: int, seed: int) -> Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(T, layer.input_size, generator=generator, dtype=layer.weight_ih_l0.dtype)


def hidden_state_jacobian_norms(
    layer: RNN | LSTM | GRU,
    T: int,
    x: Tensor | None = None,
    norm: str = "spectral",
    seed: int = 0,
) -> np.ndarray:
    """``norms[k] = ||dh_T / dh_k||`` for k = 0..T, along one sequence: (T+1,) array.

    ``x`` is the sequence (T, D); by default standard normal inputs drawn with ``seed``. The
    state starts at zero. ``norm="spectral"`` (the largest singular value, the most a gradient
    can be stretched: ``||dL/dh_k|| <= ||dh_T/dh_k|| ||dL/dh_T||``) or ``"fro"`` (Frobenius).
    ``norms[T]`` is the norm of the identity: 1 (spectral) or ``sqrt(H)`` (Frobenius).

    For a tanh RNN ``dh_T/dh_k`` is the product of ``diag(1 - h_t^2) W_hh`` over t = k+1..T, so
    its norm typically shrinks (or grows) geometrically with T - k (Pascanu et al. 2013). For an
    LSTM the state is the pair ``(h_k, c_k)``; this is the partial derivative through ``h_k``
    with ``c_k`` held fixed (the path through ``c_k`` is :func:`cell_state_jacobian`).
    """
    if norm not in ("spectral", "fro"):
        raise ValueError(f"norm must be 'spectral' or 'fro', got {norm!r}")
    x = _random_sequence(layer, T, seed) if x is None else x
    if len(x) != T:
        raise ValueError(f"x has {len(x)} steps but T = {T}")
    hs = [state[0] for state in _trajectory(layer, x)]  # h_0 .. h_T, (1, H) each
    J = _jacobians(hs[-1], hs)  # (T+1, H, H)
    ord = 2 if norm == "spectral" else "fro"
    return torch.linalg.matrix_norm(J.detach(), ord=ord).numpy()


def _check_lstm_and_k(layer: LSTM, x: Tensor, k: int, where: str) -> None:
    if not isinstance(layer, LSTM):
        raise ValueError(f"{where} needs an LSTM, got {type(layer).__name__}")
    if not 0 <= k <= len(x):
        raise ValueError(f"{where}: k must lie in [0, T] = [0, {len(x)}], got {k}")


def cell_state_jacobian(layer: LSTM, x: Tensor, k: int, direct_path_only: bool = False) -> Tensor:
    """``dc_T / dc_k`` (H, H) for an LSTM over one sequence ``x`` (T, D) from a zero state.

    ``direct_path_only=True`` keeps only the path ``c_k -> c_{k+1} -> ... -> c_T`` (the gates are
    fed a detached ``h_{t-1}``); that Jacobian is ``diag(f_{k+1} * ... * f_T)``, see
    :func:`forget_gate_product`. The full Jacobian adds the paths through ``h_t`` and the gates.
    """
    _check_lstm_and_k(layer, x, k, "cell_state_jacobian")
    cs = [state[1] for state in _trajectory(layer, x, detach_hidden=direct_path_only)]
    return _jacobians(cs[-1], [cs[k]])[0].detach()  # (H, H)


def forget_gate_product(layer: LSTM, x: Tensor, k: int) -> Tensor:
    """``f_{k+1} * f_{k+2} * ... * f_T`` (H,) for an LSTM over one sequence ``x`` (T, D) from a
    zero state, each ``f_t = sigma(W_if x_t + b_if + W_hf h_{t-1} + b_hf)`` computed here from the
    forget gate's rows of the weights (rows H..2H in torch's order i, f, g, o)."""
    _check_lstm_and_k(layer, x, k, "forget_gate_product")
    H = layer.hidden_size
    W_if, W_hf = layer.weight_ih_l0[H : 2 * H], layer.weight_hh_l0[H : 2 * H]  # (H, D), (H, H)
    b_f = layer.bias_ih_l0[H : 2 * H] + layer.bias_hh_l0[H : 2 * H]  # (H,)
    with torch.no_grad():
        hs = [state[0][0] for state in _trajectory(layer, x)]  # h_0 .. h_T, (H,) each
        product = torch.ones(H, dtype=x.dtype)
        for t in range(k + 1, len(x) + 1):
            product *= torch.sigmoid(W_if @ x[t - 1] + W_hf @ hs[t - 1] + b_f)  # f_t
    return product


# ====================================================================== 4. the language model
# The vocabulary, the stream batching, perplexity and the training loop are the language-model
# layer that every chapter shares, nlpcourse.lm; chapter 4 imports them from there.


class RNNLM(nn.Module):
    """A recurrent language model: embedding, recurrent layer, output layer over ``V`` words.

    ``P(w_{t+1} | w_1 .. w_t) = softmax(W_hy h_t + b_y)`` with ``h_t`` from the recurrent layer
    (``cell`` = ``"rnn"``, ``"lstm"`` or ``"gru"``, the layers of this module) reading the word
    embeddings. :meth:`forward` returns the scores (logits); the softmax is taken inside the loss.
    It is a language model in the sense of :mod:`nlpcourse.lm`: ids ``(B, T)`` and a state in,
    logits ``(B, T, V)`` and the new state out, so :func:`nlpcourse.lm.train_lm` trains it.

    Two options for the recorded long runs (``python -m nlpcourse.lm_runs lstm``), both off by
    default: ``dropout`` on the embeddings and on the states before the output layer (Zaremba,
    Sutskever & Vinyals 2014: not on the recurrent connection), and ``cutoffs``, which replaces
    ``W_hy`` by an adaptive softmax (Grave et al. 2017; ``torch.nn.AdaptiveLogSoftmaxWithLoss``)
    whose head holds the ``cutoffs[0]`` most frequent words; its probabilities are exact and
    normalised, so :meth:`forward` then returns log-probabilities, which are valid logits.
    """

    CELLS = {"rnn": RNN, "lstm": LSTM, "gru": GRU}
    recurrent = True  # nlpcourse.lm: loss() takes and returns the state

    def __init__(
        self,
        vocab_size: int,
        emb_size: int,
        hidden_size: int,
        cell: str = "lstm",
        dropout: float = 0.0,
        cutoffs: Sequence[int] | None = None,
    ):
        super().__init__()
        if cell not in self.CELLS:
            raise ValueError(f"cell must be one of {sorted(self.CELLS)}, got {cell!r}")
        if not isinstance(vocab_size, int) or vocab_size < 3:
            raise ValueError(f"vocab_size must be an integer >= 3, got {vocab_size!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        self.vocab_size, self.cell, self.dropout = vocab_size, cell, dropout
        self.embedding = nn.Embedding(vocab_size, emb_size)  # (V, E)
        self.rnn = self.CELLS[cell](emb_size, hidden_size)
        self.output: nn.Linear | None = None
        self.adaptive: nn.AdaptiveLogSoftmaxWithLoss | None = None
        if cutoffs:
            self.adaptive = nn.AdaptiveLogSoftmaxWithLoss(
                hidden_size, vocab_size, list(cutoffs), div_value=4.0
            )
        else:
            self.output = nn.Linear(hidden_size, vocab_size)  # W_hy (V, H), b_y (V,)

    def hidden(self, ids: Tensor, state=None):
        """``ids`` (B, T) -> ``(h (B, T, H), final state)``: the states the output layer reads.

        The recurrent layers read time first, so the embeddings are turned to (T, B, E) for them
        and the states back to (B, T, H) (turning the small hidden states rather than the V
        scores per position saves a large copy)."""
        if not isinstance(ids, Tensor) or ids.ndim != 2 or ids.dtype != torch.long:
            shape = tuple(ids.shape) if isinstance(ids, Tensor) else type(ids).__name__
            raise ValueError(f"ids must be a (B, T) tensor of word ids (torch.long), got {shape}")
        e = F.dropout(self.embedding(ids.T), self.dropout, self.training)  # (T, B, E)
        hs, state = self.rnn(e, state)  # (T, B, H)
        hs = F.dropout(hs, self.dropout, self.training)
        return hs.transpose(0, 1), state  # (B, T, H)

    def forward(self, ids: Tensor, state=None):
        """``ids`` (B, T) -> ``(logits (B, T, V), final state)``; ``state`` as the layer's."""
        h, state = self.hidden(ids, state)  # (B, T, H)
        if self.adaptive is not None:
            B, T, H = h.shape
            return self.adaptive.log_prob(h.reshape(B * T, H)).view(B, T, -1), state
        assert self.output is not None  # one of the two output layers exists
        return self.output(h), state  # (B, T, V)

    def loss(self, ids: Tensor, targets: Tensor, state=None):
        """Summed negative log-likelihood of ``targets`` (B, T) given ``ids`` (B, T), the number
        of counted targets (those not ``nlpcourse.lm.IGNORE_INDEX``) and the final state. With
        an adaptive softmax only the clusters of the targets are computed, not all V scores."""
        h, state = self.hidden(ids, state)  # (B, T, H)
        nll, n = states_nll(h, targets, self.adaptive if self.adaptive is not None else self.output)
        return nll, n, state

    def reset_parameters(self) -> None:
        """Draw every parameter again from its initial distribution (torch's defaults)."""
        self.embedding.reset_parameters()
        self.rnn.reset_parameters()
        if self.adaptive is not None:
            self.adaptive.reset_parameters()
        if self.output is not None:
            self.output.reset_parameters()


# ========================================================== 5. notation and architectures

LAYOUTS = ("batch-first", "time-first")
ARCHITECTURES = ("many-to-many", "many-to-one", "one-to-many", "encoder-decoder")
ARCHITECTURE_TASKS = (
    "part-of-speech tagging",
    "named-entity recognition",
    "language modelling",
    "sentiment classification",
    "spam detection",
    "topic classification",
    "image captioning",
    "music generation",
    "machine translation",
    "speech recognition",
    "summarisation",
)
