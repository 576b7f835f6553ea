"""Tests of nlpcourse.rnn against independent oracles.

Oracles: torch.nn.RNN/LSTM/GRU and their Cell versions with copied weights (values and
gradients), central finite differences and a torch autograd re-implementation for the numpy BPTT,
the GRU equations of Cho et al. (2014) written here in numpy, explicit Jacobian products and
torch.autograd.functional.jacobian over torch.nn cells, perplexities computed by hand, and a
perplexity recomputed here with torch.nn.LSTM over the raw word stream.
"""

import functools
import inspect
import math
import random
import re
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch

from nlpcourse import rnn
from nlpcourse.guard import ReferenceUsedError, reference_switched_off
from nlpcourse.testing import gru_step_np

KINDS = {
    "rnn": (rnn.RNN, torch.nn.RNN),
    "lstm": (rnn.LSTM, torch.nn.LSTM),
    "gru": (rnn.GRU, torch.nn.GRU),
}
LAYERS = {**KINDS, "lstm-autograd": (partial(rnn.LSTM, hand_backward=False), torch.nn.LSTM)}
TORCH_CELLS = {"rnn": torch.nn.RNNCell, "lstm": torch.nn.LSTMCell, "gru": torch.nn.GRUCell}
OUR_CELLS = {"rnn": rnn.rnn_cell, "lstm": rnn.lstm_cell, "gru": rnn.gru_cell}
REPO = Path(__file__).resolve().parent.parent


def pair(kind, D, H, dtype=torch.float32, seed=0):
    """Our layer and torch's, the weights of torch's copied into ours (drawn with another seed)."""
    ours_cls, torch_cls = LAYERS[kind]
    torch.manual_seed(seed)
    ref = torch_cls(D, H).to(dtype)
    torch.manual_seed(seed + 1000)
    ours = ours_cls(D, H).to(dtype)
    ours.load_state_dict(ref.state_dict())
    return ours, ref


def torch_cell(kind, layer):
    """A torch.nn.*Cell with the weights of a layer (same names without the _l0)."""
    cell = TORCH_CELLS[kind](layer.input_size, layer.hidden_size).to(layer.weight_ih_l0.dtype)
    cell.load_state_dict({k.removesuffix("_l0"): v for k, v in layer.state_dict().items()})
    return cell


# --------------------------------------------------------------- torch layers: drop-in for torch.nn


@pytest.mark.parametrize("kind", KINDS)
def test_parameters_and_initialisation_as_torch(kind):
    ours_cls, torch_cls = KINDS[kind]
    torch.manual_seed(3)
    ours = ours_cls(4, 6)
    torch.manual_seed(3)
    ref = torch_cls(4, 6)
    assert list(ours.state_dict()) == list(ref.state_dict())
    for name, value in ref.state_dict().items():
        # same names, shapes, and (with the same seed) the same uniform draws
        assert torch.equal(ours.state_dict()[name], value), name
    bound = 1 / math.sqrt(6)
    assert all(p.abs().max() <= bound for p in ours.parameters())
    ref.load_state_dict(ours.state_dict())  # and back


SHAPES = [(1, 1, 1, 1), (1, 3, 4, 5), (7, 1, 3, 2), (6, 4, 5, 8)]  # (T, B, D, H)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("given_state", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind", LAYERS)
def test_layer_matches_torch(kind, shape, given_state, dtype):
    T, B, D, H = shape
    ours, ref = pair(kind, D, H, dtype)
    torch.manual_seed(1)
    x = torch.randn(T, B, D, dtype=dtype)
    is_lstm = kind.startswith("lstm")
    n_states = 2 if is_lstm else 1
    states = [torch.randn(1, B, H, dtype=dtype) for _ in range(n_states)] if given_state else []
    tol = {"atol": 1e-5, "rtol": 1e-4} if dtype == torch.float32 else {"atol": 1e-12, "rtol": 0}

    results = []
    for layer in (ours, ref):
        layer.zero_grad()
        xi = x.clone().requires_grad_()
        si = [s.clone().requires_grad_() for s in states]
        hx = None if not given_state else (tuple(si) if is_lstm else si[0])
        output, final = layer(xi, hx)
        final = final if is_lstm else (final,)
        # a random weighting of every output, so every gradient entry is tested
        g = torch.Generator().manual_seed(2)
        loss = sum(
            (t * torch.randn(t.shape, generator=g, dtype=dtype)).sum() for t in (output, *final)
        )
        loss.backward()
        grads = [xi.grad] + [s.grad for s in si] + [p.grad for p in layer.parameters()]
        results.append((output, final, grads))

    (out1, fin1, grads1), (out2, fin2, grads2) = results
    assert out1.shape == out2.shape == (T, B, H)
    torch.testing.assert_close(out1, out2, **tol)
    for a, b in zip(fin1, fin2, strict=True):
        assert a.shape == b.shape == (1, B, H)
        torch.testing.assert_close(a, b, **tol)
    names = (
        ["x"] + [f"state{i}" for i in range(len(states))] + [n for n, _ in ref.named_parameters()]
    )
    for name, a, b in zip(names, grads1, grads2, strict=True):
        torch.testing.assert_close(a, b, **tol, msg=lambda m, name=name: f"grad of {name}: {m}")


@pytest.mark.parametrize("kind", KINDS)
def test_cells_match_torch_cells(kind):
    layer, _ = pair(kind, 3, 4, torch.float64)
    cell = torch_cell(kind, layer)
    torch.manual_seed(5)
    x_t = torch.randn(2, 3, dtype=torch.float64)
    h_prev = torch.randn(2, 4, dtype=torch.float64)
    c_prev = torch.randn(2, 4, dtype=torch.float64)
    weights = list(layer.parameters())
    if kind == "lstm":
        ours = rnn.lstm_cell(x_t, h_prev, c_prev, *weights)
        ref = cell(x_t, (h_prev, c_prev))
        for a, b in zip(ours, ref, strict=True):
            torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    else:
        torch.testing.assert_close(OUR_CELLS[kind](x_t, h_prev, *weights), cell(x_t, h_prev))


def test_hand_written_lstm_backward_refuses_second_derivatives():
    # the hand-written LSTM backward is once-differentiable; a second order derivative must
    # fail loudly rather than silently return wrong numbers
    layer = rnn.LSTM(2, 3)
    x = torch.randn(4, 1, 2, requires_grad=True)
    (g,) = torch.autograd.grad(layer(x)[0].sum(), x, create_graph=True)
    with pytest.raises(RuntimeError):
        g.sum().backward()


def test_the_book_shows_the_backward_pass_the_layer_runs():
    """Chapter 4 shows the hand-written LSTM backward pass with ``literalinclude``: it is the code
    of the ``autograd.Function`` that the layer runs for a float32 CPU input (before, the book
    showed a twin in torch operations that ran only on other devices and dtypes)."""
    text = (REPO / "book" / "rnn.md").read_text()
    included = re.findall(
        r"```\{literalinclude\} \.\./(\S+)\n(?::(?!pyobject)[^\n]*\n)*:pyobject: (\S+)", text
    )
    output, _ = rnn.LSTM(3, 4)(torch.randn(5, 2, 3))
    runs = output.grad_fn._forward_cls  # the autograd.Function whose backward the layer runs
    source = Path(inspect.getsourcefile(runs)).resolve().relative_to(REPO).as_posix()
    shown = [name for path, name in included if path == source]
    assert shown, f"book/rnn.md includes nothing of {source}, whose {runs.__name__} the layer runs"
    module = inspect.getmodule(runs)
    for name in shown:  # each included object exists there (Sphinx would only warn)
        functools.reduce(getattr, name.split("."), module)
    assert any("backward" in name for name in shown), shown


def test_readable_lstm_forward_equals_torch_and_the_hand_written_path():
    """lstm_forward, the loop read top to bottom, against torch.nn.LSTM with copied weights and
    against the layer's fast path (hand-written backward): outputs, final states, gradients."""
    torch.manual_seed(0)
    T, B, D, H = 6, 3, 4, 5
    ref = torch.nn.LSTM(D, H).double()
    fast = rnn.LSTM(D, H).double()
    fast.load_state_dict(ref.state_dict())
    x = torch.randn(T, B, D, dtype=torch.float64, requires_grad=True)
    h_0, c_0 = torch.randn(2, B, H, dtype=torch.float64)
    weights = [p.detach().clone().requires_grad_() for p in ref.parameters()]  # ih, hh, b_ih, b_hh
    output, h_n, c_n = rnn.lstm_forward(x, h_0, c_0, *weights)
    expected, (h_ref, c_ref) = ref(x, (h_0[None], c_0[None]))
    got_fast, (h_fast, c_fast) = fast(x, (h_0[None], c_0[None]))
    for theirs in (expected, got_fast):
        torch.testing.assert_close(output, theirs)
    for ours, theirs in ((h_n, h_ref[0]), (c_n, c_ref[0]), (h_n, h_fast[0]), (c_n, c_fast[0])):
        torch.testing.assert_close(ours, theirs)
    loss_weights = torch.randn(T, B, H, dtype=torch.float64)
    loss = (output * loss_weights).sum() + c_n.sum()
    grads = torch.autograd.grad(loss, [x, *weights], retain_graph=True)
    for layer, out, c_last in ((ref, expected, c_ref), (fast, got_fast, c_fast)):
        theirs = torch.autograd.grad(
            (out * loss_weights).sum() + c_last.sum(), [x, *layer.parameters()]
        )
        for g, g_theirs in zip(grads, theirs, strict=True):
            torch.testing.assert_close(g, g_theirs)
    # autograd through the readable loop can differentiate twice, the hand-written one cannot
    (g_x,) = torch.autograd.grad(output.sum(), x, create_graph=True)
    g_x.sum().backward()


@pytest.mark.parametrize("loss_kind", ["weighted", "sum of outputs"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [*SHAPES, (9, 3, 2, 16)])
def test_hand_written_lstm_backward_matches_torch(shape, dtype, loss_kind):
    """The hand-written passes (``_LSTMThroughTime``) called directly against torch.nn.LSTM with
    the same weights and state: outputs, final states and every gradient. "sum of outputs" hands
    the backward pass an expanded gradient (stride 0) and zero gradients for the final states."""
    T, B, D, H = shape
    torch.manual_seed(0)
    ref = torch.nn.LSTM(D, H).to(dtype)
    x = torch.randn(T, B, D, dtype=dtype)
    h_0, c_0 = torch.randn(2, B, H, dtype=dtype)
    tol = {"atol": 1e-5, "rtol": 1e-4} if dtype == torch.float32 else {"atol": 1e-12, "rtol": 0}
    results = []
    for ours in (True, False):
        inputs = [t.clone().requires_grad_() for t in (x, h_0, c_0)]
        weights = [p.detach().clone().requires_grad_() for p in ref.parameters()]
        if ours:
            output, h_n, c_n = rnn._LSTMThroughTime.apply(*inputs, *weights)
        else:
            ref_weights = dict(zip([n for n, _ in ref.named_parameters()], weights, strict=True))
            output, (h_n, c_n) = torch.func.functional_call(
                ref, ref_weights, (inputs[0], (inputs[1][None], inputs[2][None]))
            )
            h_n, c_n = h_n[0], c_n[0]
        if loss_kind == "weighted":
            g = torch.Generator().manual_seed(2)
            loss = sum(
                (t * torch.randn(t.shape, generator=g, dtype=dtype)).sum()
                for t in (output, h_n, c_n)
            )
        else:
            loss = output.sum()
        grads = torch.autograd.grad(loss, [*inputs, *weights])
        results.append((output, h_n, c_n, *grads))
    names = [
        "output",
        "h_n",
        "c_n",
        "d x",
        "d h_0",
        "d c_0",
        "d W_ih",
        "d W_hh",
        "d b_ih",
        "d b_hh",
    ]
    for name, a, b in zip(names, *results, strict=True):
        torch.testing.assert_close(a, b, **tol, msg=lambda m, name=name: f"{name}: {m}")


def test_lstm_layer_runs_the_hand_written_backward_on_every_dtype():
    """One hand-written backward pass for every device and dtype: the layer's outputs come from
    ``_LSTMThroughTime`` in float32, float64 and bfloat16 alike (before, float32 and float64 on
    the CPU ran a compiled twin), and a bfloat16 layer agrees with torch.nn.LSTM in bfloat16."""
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        layer = rnn.LSTM(3, 4).to(dtype)
        output, (h_n, c_n) = layer(torch.randn(6, 2, 3, dtype=dtype))
        for result in (output, h_n, c_n):
            assert result.grad_fn is not None
        assert output.grad_fn._forward_cls is rnn._LSTMThroughTime, dtype

    ours, ref = pair("lstm", 3, 4, torch.bfloat16)
    x = torch.randn(6, 2, 3, dtype=torch.bfloat16)
    output, (h_n, c_n) = ours(x)
    expected, (h_ref, c_ref) = ref(x)
    for a, b in ((output, expected), (h_n, h_ref), (c_n, c_ref)):
        assert a.dtype == torch.bfloat16
        torch.testing.assert_close(a, b, atol=2e-2, rtol=2e-2)


def test_lstm_layer_without_gradients():
    """Under torch.no_grad and torch.inference_mode the layer returns what it returns with them."""
    ours, ref = pair("lstm", 3, 5)
    x = torch.randn(4, 2, 3)
    expected = ref(x)[0]
    for mode in (torch.no_grad, torch.inference_mode):
        with mode():
            output = ours(x)[0]
        torch.testing.assert_close(output, expected)


# ------------------------------------------------------------------------- GRU: torch vs textbook


def gru_textbook_numpy(x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh):
    """Cho et al. (2014), eqs. 5-8, plus biases, one example, torch's stacked parameter layout
    (the numpy oracle nlpcourse.testing.gru_step_np, on a batch of one)."""
    weights = (weight_ih, weight_hh, bias_ih, bias_hh)
    return gru_step_np(x_t[None], h_prev[None], *weights, variation="textbook")[0]


def gru_weights(D=3, H=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(3 * H, D), (3 * H, H), (3 * H,), (3 * H,)]
    return [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]


def test_gru_textbook_matches_cho_equations():
    weights = gru_weights()
    torch.manual_seed(0)
    x_t, h_prev = torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64)
    ours = rnn.gru_cell_textbook(x_t, h_prev, *weights)
    np_weights = [w.numpy() for w in weights]
    for b in range(5):
        expected = gru_textbook_numpy(x_t[b].numpy(), h_prev[b].numpy(), *np_weights)
        np.testing.assert_allclose(ours[b].numpy(), expected, atol=1e-12)


def test_gru_textbook_layer_steps_the_textbook_cell():
    layer = rnn.GRU(3, 4, variant="textbook").double()
    torch.manual_seed(0)
    x = torch.randn(5, 2, 3, dtype=torch.float64)
    output, h_n = layer(x)
    np_weights = [p.detach().numpy() for p in layer.parameters()]
    for b in range(2):
        h = np.zeros(4)
        for t in range(5):
            h = gru_textbook_numpy(x[t, b].numpy(), h, *np_weights)
            np.testing.assert_allclose(output[t, b].detach().numpy(), h, atol=1e-12)
    torch.testing.assert_close(h_n[0], output[-1])


def test_gru_variants_differ_and_agree_where_the_docstring_says():
    weights = gru_weights()
    torch.manual_seed(1)
    x_t, h_prev = torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64)
    zero = torch.zeros_like(h_prev)
    # a nonzero hidden state: the two forms differ
    assert (
        rnn.gru_cell(x_t, h_prev, *weights) - rnn.gru_cell_textbook(x_t, h_prev, *weights)
    ).abs().max() > 1e-3
    # r_t = 1 (a huge reset-gate bias): they agree
    weight_ih, weight_hh, bias_ih, bias_hh = weights
    open_reset = bias_ih.clone()
    open_reset[:4] = 100.0
    same = [weight_ih, weight_hh, open_reset, bias_hh]
    torch.testing.assert_close(
        rnn.gru_cell(x_t, h_prev, *same), rnn.gru_cell_textbook(x_t, h_prev, *same)
    )
    # h_{t-1} = 0: they agree only when b_hn = 0, as torch's form scales b_hn by r_t
    no_b_hn = bias_hh.clone()
    no_b_hn[8:] = 0.0
    same = [weight_ih, weight_hh, bias_ih, no_b_hn]
    torch.testing.assert_close(
        rnn.gru_cell(x_t, zero, *same), rnn.gru_cell_textbook(x_t, zero, *same)
    )
    assert (
        rnn.gru_cell(x_t, zero, *weights) - rnn.gru_cell_textbook(x_t, zero, *weights)
    ).abs().max() > 1e-3
    # torch's z convention: z = 1 keeps the old state
    keep = bias_ih.clone()
    keep[4:8] = 100.0
    torch.testing.assert_close(
        rnn.gru_cell(x_t, h_prev, weight_ih, weight_hh, keep, bias_hh), h_prev
    )


# ----------------------------------------------------------------------------- numpy RNN and BPTT


def numpy_problem(T=6, D=4, H=5, V=4, seed=0, ids=True):
    rng = np.random.default_rng(seed)
    params = rnn.init_rnn_params(D, H, V, seed=seed)
    for name in params:  # larger than the default scale, so that no gradient is tiny
        params[name] = rng.normal(0, 0.7, params[name].shape)
    x = rng.integers(0, D, T) if ids else rng.normal(size=(T, D))
    targets = rng.integers(0, V, T)
    h0 = rng.normal(0, 0.5, H)
    return x, targets, h0, params


def loss_only(x, targets, h0, params):
    return rnn.rnn_loss_and_grads(x, targets, h0, params)[0]


@pytest.mark.parametrize("ids", [True, False])
def test_bptt_matches_finite_differences(ids):
    x, targets, h0, params = numpy_problem(ids=ids)
    _, grads, _ = rnn.rnn_loss_and_grads(x, targets, h0, params)
    eps = 1e-6
    for name in [*rnn.NUMPY_PARAMS, "h0"]:
        value = h0 if name == "h0" else params[name]
        numeric = np.zeros_like(value)
        for i in np.ndindex(value.shape):
            old = value[i]
            value[i] = old + eps
            up = loss_only(x, targets, h0, params)
            value[i] = old - eps
            down = loss_only(x, targets, h0, params)
            value[i] = old
            numeric[i] = (up - down) / (2 * eps)
        np.testing.assert_allclose(grads[name], numeric, rtol=1e-6, atol=1e-8, err_msg=name)


def test_bptt_matches_torch_autograd():
    x, targets, h0, params = numpy_problem(T=9, ids=False, seed=1)
    loss, grads, h_T = rnn.rnn_loss_and_grads(x, targets, h0, params)

    p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    h = torch.tensor(h0, requires_grad=True)
    h_first, total = h, 0.0
    for t in range(len(x)):
        h = torch.tanh(p["W_xh"] @ torch.tensor(x[t]) + p["W_hh"] @ h + p["b_h"])
        total = total - torch.log_softmax(p["W_hy"] @ h + p["b_y"], dim=0)[targets[t]]
    total.backward()
    assert loss == pytest.approx(total.item(), rel=1e-12)
    np.testing.assert_allclose(h_T, h.detach().numpy(), atol=1e-12)
    for name in rnn.NUMPY_PARAMS:
        np.testing.assert_allclose(grads[name], p[name].grad.numpy(), atol=1e-12, err_msg=name)
    np.testing.assert_allclose(grads["h0"], h_first.grad.numpy(), atol=1e-12)


def test_numpy_forward_by_hand_and_one_hot_ids():
    x, targets, h0, params = numpy_problem(T=3, D=4)
    hs, y_hat = rnn.rnn_forward(x, h0, params)
    assert hs.shape == (4, 5) and y_hat.shape == (3, 4)
    np.testing.assert_array_equal(hs[0], h0)
    h1 = np.tanh(params["W_xh"][:, x[0]] + params["W_hh"] @ h0 + params["b_h"])  # one-hot column
    np.testing.assert_allclose(hs[1], h1)
    o1 = params["W_hy"] @ h1 + params["b_y"]
    np.testing.assert_allclose(y_hat[0], np.exp(o1) / np.exp(o1).sum())
    hs2, _ = rnn.rnn_forward(np.eye(4)[x], h0, params)  # the same inputs as vectors
    np.testing.assert_allclose(hs, hs2)
    assert rnn.cross_entropy(y_hat, targets) == pytest.approx(
        -sum(math.log(y_hat[t, targets[t]]) for t in range(3))
    )


# ----------------------------------------------------------------------- gradients through time


def jacobian_oracle(kind, layer, x):
    """||dh_T/dh_k||_2 for k = 0..T with torch.nn cells and torch.autograd.functional.jacobian,
    the LSTM's c_k held fixed."""
    cell = torch_cell(kind, layer)
    T, H = len(x), layer.hidden_size
    states = [(torch.zeros(1, H, dtype=x.dtype), torch.zeros(1, H, dtype=x.dtype))]
    for t in range(T):
        h, c = states[-1]
        states.append(cell(x[t : t + 1], (h, c)) if kind == "lstm" else (cell(x[t : t + 1], h), c))
    norms = []
    for k in range(T + 1):

        def h_T_from(h_k, k=k):
            h, c = h_k.unsqueeze(0), states[k][1]
            for t in range(k, T):
                h, c = cell(x[t : t + 1], (h, c)) if kind == "lstm" else (cell(x[t : t + 1], h), c)
            return h[0]

        J = torch.autograd.functional.jacobian(h_T_from, states[k][0][0])  # (H, H)
        norms.append(torch.linalg.matrix_norm(J, ord=2).item())
    return np.array(norms)


@pytest.mark.parametrize("kind", KINDS)
def test_hidden_state_jacobian_norms_match_torch_cells(kind):
    layer, _ = pair(kind, 3, 5, torch.float64, seed=4)
    x = torch.randn(8, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    norms = rnn.hidden_state_jacobian_norms(layer, 8, x=x)
    assert norms.shape == (9,)
    np.testing.assert_allclose(norms, jacobian_oracle(kind, layer, x), rtol=1e-9)
    assert norms[-1] == pytest.approx(1.0)


def test_rnn_jacobian_is_the_product_of_tanh_derivatives_and_W_hh():
    layer = rnn.RNN(3, 4).double()
    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    output, _ = layer(x.unsqueeze(1))
    hs = output[:, 0].detach().numpy()  # h_1 .. h_6
    W_hh = layer.weight_hh_l0.detach().numpy()
    J, expected = np.eye(4), [np.sqrt(4)]  # Frobenius norm of the identity at k = T
    for t in range(6, 0, -1):  # dh_T/dh_{t-1} = dh_T/dh_t diag(1 - h_t^2) W_hh
        J = J @ np.diag(1 - hs[t - 1] ** 2) @ W_hh
        expected.append(np.linalg.norm(J))
    norms = rnn.hidden_state_jacobian_norms(layer, 6, x=x, norm="fro")
    np.testing.assert_allclose(norms, expected[::-1], rtol=1e-10)


def test_lstm_direct_cell_path_is_the_product_of_forget_gates():
    torch.manual_seed(0)
    layer = rnn.LSTM(3, 5).double()
    x = torch.randn(10, 3, dtype=torch.float64)
    for k in (0, 4, 9, 10):
        direct = rnn.cell_state_jacobian(layer, x, k, direct_path_only=True)
        product = rnn.forget_gate_product(layer, x, k)
        torch.testing.assert_close(direct, torch.diag(product), atol=1e-14, rtol=1e-12)
    torch.testing.assert_close(product, torch.ones(5, dtype=torch.float64))  # k = T: empty product
    # the forget gates computed here are the layer's: a sigmoid of the f rows, checked by hand
    h_0 = torch.zeros(5, dtype=torch.float64)
    f_1 = torch.sigmoid(
        layer.weight_ih_l0[5:10] @ x[0]
        + layer.bias_ih_l0[5:10]
        + layer.weight_hh_l0[5:10] @ h_0
        + layer.bias_hh_l0[5:10]
    )
    torch.testing.assert_close(rnn.forget_gate_product(layer, x[:1], 0), f_1.detach())
    # the full Jacobian has the other paths too ...
    full = rnn.cell_state_jacobian(layer, x, 4)
    assert (full - torch.diag(rnn.forget_gate_product(layer, x, 4))).abs().max() > 1e-4
    # ... which vanish when h_{t-1} does not feed the gates
    with torch.no_grad():
        layer.weight_hh_l0.zero_()
    torch.testing.assert_close(
        rnn.cell_state_jacobian(layer, x, 4), torch.diag(rnn.forget_gate_product(layer, x, 4))
    )


# --------------------------------------------------------------------------- the language model

CORPUS = [s.split() for s in ["a b", "b", "a a c", "d"]]


def test_rnnlm_reads_batch_first_like_every_language_model():
    """``RNNLM`` maps ids (B, T) to logits (B, T, V); each row is read on its own, as the
    recurrent layer would read that sequence alone (torch.nn.GRU with copied weights)."""
    torch.manual_seed(0)
    model = rnn.RNNLM(7, 3, 5, cell="gru")
    ref = torch.nn.GRU(3, 5)
    ref.load_state_dict(model.rnn.state_dict())
    ids = torch.randint(0, 7, (4, 6))  # (B, T)
    logits, h_n = model(ids)
    assert logits.shape == (4, 6, 7) and h_n.shape == (1, 4, 5)
    for b in range(4):
        out, _ = ref(model.embedding(ids[b]).unsqueeze(1))  # (T, 1, H): row b alone
        torch.testing.assert_close(logits[b], model.output(out[:, 0]))


def context_free_lm(probs):
    """An RNNLM whose prediction ignores the context: zero weights, output bias log p."""
    model = rnn.RNNLM(len(probs), 3, 4, cell="gru")
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.output.bias.copy_(torch.log(torch.tensor(probs)))
    return model


def test_zero_weights_give_perplexity_vocab_size():
    model = context_free_lm([1.0] * 7)  # all scores equal: the uniform distribution
    ids = rnn.encode(CORPUS, rnn.build_vocab(CORPUS, 1) + ["e"])
    assert rnn.evaluate_perplexity(model, ids) == pytest.approx(7, rel=1e-6)


@pytest.mark.parametrize("batch_size", [1, 2, 5])
def test_perplexity_by_hand(batch_size):
    # vocab </s> <unk> a b with P = .1 .2 .3 .4 whatever the context
    model = context_free_lm([0.1, 0.2, 0.3, 0.4])
    ids = rnn.encode([["a", "b"], ["b", "zzz"]], ["</s>", "<unk>", "a", "b"])
    # predicted: a b </s> b <unk> </s> -- N = 6, the opening </s> (for <s>) not counted
    expected = (0.3 * 0.4 * 0.1 * 0.4 * 0.2 * 0.1) ** (-1 / 6)
    assert rnn.evaluate_perplexity(model, ids, batch_size=batch_size, bptt=2) == pytest.approx(
        expected, rel=1e-6
    )


def test_perplexity_is_the_ngram_chapters():
    """An RNN LM that predicts every word with the probabilities of a unigram add-1 model of
    chapter 1 has that model's perplexity: same vocabulary, same </s> counted, same N."""
    ngram = pytest.importorskip("nlpcourse.ngram")
    train = [["a", "b", "a"], ["c"], ["a", "b"]]
    test = [["b", "a", "zzz"], [], ["c", "c"]]  # an unknown word and an empty sentence
    unigram = ngram.NGramLM(order=1, smoothing="add-k", k=1.0).fit(train, min_count=1)
    vocab = rnn.build_vocab(train, min_count=1)
    assert vocab == unigram.vocab_  # one vocabulary rule (nlpcourse.lm), the same ids
    # by hand: counts a 3, b 2, c 1, </s> 3, <unk> 0 (N = 9), |V| = 5: P(w) = (c(w) + 1) / 14
    p = {"a": 4 / 14, "b": 3 / 14, "c": 2 / 14, "</s>": 4 / 14, "<unk>": 1 / 14}
    predicted = ["b", "a", "<unk>", "</s>", "</s>", "c", "c", "</s>"]
    by_hand = math.prod(p[w] for w in predicted) ** (-1 / len(predicted))
    assert unigram.perplexity(test) == pytest.approx(by_hand, rel=1e-12)
    model = context_free_lm([unigram.prob(w) for w in vocab])
    assert rnn.evaluate_perplexity(model, rnn.encode(test, vocab)) == pytest.approx(
        by_hand, rel=1e-6
    )


@pytest.mark.parametrize("batch_size", [1, 3])
def test_perplexity_matches_torch_lstm_over_the_stream(batch_size):
    torch.manual_seed(0)
    V = 9
    model = rnn.RNNLM(V, 4, 6, cell="lstm")
    rng = random.Random(1)
    sentences = [[rng.randint(1, V - 1) for _ in range(rng.randint(0, 6))] for _ in range(12)]
    ref = torch.nn.LSTM(4, 6)
    ref.load_state_dict(model.rnn.state_dict())
    stream = [0] + [w for s in sentences for w in [*s, 0]]
    N = len(stream) - 1
    L = -(-N // batch_size)
    nll = 0.0
    with torch.no_grad():
        for b in range(batch_size):  # each piece from a zero state, as documented
            piece = torch.tensor(stream[b * L : (b + 1) * L + 1])
            if len(piece) < 2:
                continue
            out, _ = ref(model.embedding(piece[:-1]).unsqueeze(1))  # (T, 1, H)
            logp = torch.log_softmax(model.output(out[:, 0]), dim=-1)  # (T, V)
            nll -= logp[torch.arange(len(piece) - 1), piece[1:]].sum().item()
    expected = math.exp(nll / N)
    got = rnn.evaluate_perplexity(model, sentences, batch_size=batch_size, bptt=4)
    assert got == pytest.approx(expected, rel=1e-5)


def synthetic_corpus(n, seed):
    """Sentences from a tiny grammar: subject verb object, with agreement."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(n):
        plural = rng.random() < 0.5
        subject = rng.choice(["dogs", "cats"] if plural else ["dog", "cat"])
        verb = rng.choice(["see", "chase"] if plural else ["sees", "chases"])
        sentences.append(["the", subject, verb, "the", rng.choice(["ball", "bird", "mouse"])])
    return sentences


@pytest.mark.parametrize("cell", ["rnn", "lstm", "gru"])
def test_training_lowers_validation_perplexity(cell):
    vocab = rnn.build_vocab(synthetic_corpus(400, 0), min_count=1)
    train = rnn.encode(synthetic_corpus(400, 0), vocab)
    valid = rnn.encode(synthetic_corpus(50, 1), vocab)
    model = rnn.RNNLM(len(vocab), 16, 32, cell=cell)
    history = rnn.train_lm(
        model, train, valid, steps=120, batch_size=8, bptt=12, lr=1e-2, eval_every=40
    )
    assert history["step"] == [0, 40, 80, 120]
    assert history["valid_ppl"][0] > 0.8 * len(vocab)  # untrained: close to uniform
    # the grammar allows 2 * 2 * 3 = 12 ... per sentence: about 12^(1/6) ~ 1.5 per prediction
    assert history["valid_ppl"][-1] < 2.5
    assert history["words"][-1] == 120 * 8 * 12
    assert math.isnan(history["train_ppl"][0]) and history["train_ppl"][-1] < 3


def test_training_is_deterministic_with_a_seed():
    vocab = rnn.build_vocab(synthetic_corpus(50, 0), min_count=1)
    train, valid = (
        rnn.encode(synthetic_corpus(50, 0), vocab),
        rnn.encode(synthetic_corpus(5, 1), vocab),
    )
    model = rnn.RNNLM(len(vocab), 8, 8, cell="lstm")
    runs = [
        rnn.train_lm(model, train, valid, steps=10, batch_size=4, bptt=5, eval_every=5)["valid_ppl"]
        for _ in range(2)
    ]
    assert runs[0] == runs[1]


# ----------------------------------------------------------------------------------- bad input


def test_bad_input_errors():
    lstm = rnn.LSTM(3, 4)
    with pytest.raises(ValueError, match="shape \\(T, B, D\\)"):
        lstm(torch.randn(5, 3))
    with pytest.raises(ValueError, match="input_size D = 3"):
        lstm(torch.randn(5, 2, 4))
    with pytest.raises(ValueError, match="pair"):
        lstm(torch.randn(5, 2, 3), torch.zeros(1, 2, 4))
    with pytest.raises(ValueError, match="c_0 must have shape"):
        lstm(torch.randn(5, 2, 3), (torch.zeros(1, 2, 4), torch.zeros(2, 4)))
    with pytest.raises(ValueError, match="h_0 must have shape"):
        rnn.GRU(3, 4)(torch.randn(5, 2, 3), torch.zeros(1, 3, 4))
    with pytest.raises(ValueError, match="empty"):
        rnn.RNN(3, 4)(torch.randn(0, 2, 3))
    with pytest.raises(ValueError, match="hidden_size"):
        rnn.RNN(3, 0)
    with pytest.raises(ValueError, match="variant"):
        rnn.GRU(3, 4, variant="cho")
    with pytest.raises(ValueError, match="cell"):
        rnn.RNNLM(10, 4, 4, cell="transformer")
    with pytest.raises(ValueError, match="ids"):
        rnn.RNNLM(10, 4, 4)(torch.zeros(3, 2))  # float ids
    with pytest.raises(ValueError, match="outside"):
        rnn.evaluate_perplexity(rnn.RNNLM(10, 4, 4), [[3, 10]])
    with pytest.raises(ValueError, match="start with"):
        rnn.encode([["a"]], ["a", "</s>", "<unk>"])
    with pytest.raises(ValueError, match="an LSTM"):
        rnn.forget_gate_product(rnn.GRU(3, 4), torch.randn(5, 3), 2)
    with pytest.raises(ValueError, match="one sequence"):
        rnn.hidden_state_jacobian_norms(rnn.RNN(3, 4), 5, x=torch.randn(5, 1, 3))

    x, targets, h0, params = numpy_problem(T=4, D=4, H=5, V=4)
    with pytest.raises(ValueError, match="W_hh"):
        rnn.rnn_loss_and_grads(x, targets, h0, {**params, "W_hh": np.zeros((5, 4))})
    with pytest.raises(ValueError, match="missing"):
        rnn.rnn_forward(x, h0, {k: v for k, v in params.items() if k != "b_y"})
    with pytest.raises(ValueError, match="targets"):
        rnn.rnn_loss_and_grads(x, targets[:3], h0, params)
    with pytest.raises(ValueError, match="targets must lie"):
        rnn.rnn_loss_and_grads(x, np.array([0, 1, 2, 4]), h0, params)
    with pytest.raises(ValueError, match="input ids"):
        rnn.rnn_forward(np.array([0, 4]), h0, params)
    with pytest.raises(ValueError, match="\\(T, D\\)"):
        rnn.rnn_forward(np.zeros((3, 5)), h0, params)
    with pytest.raises(ValueError, match="h0"):
        rnn.rnn_forward(x, np.zeros(4), params)


def test_reference_refuses_during_a_check():
    x, targets, h0, params = numpy_problem(T=2)
    with reference_switched_off():
        with pytest.raises(ReferenceUsedError):
            rnn.rnn_loss_and_grads(x, targets, h0, params)
        with pytest.raises(ReferenceUsedError):
            rnn.lstm_cell(
                *[torch.zeros(1, 1)] * 3,
                torch.zeros(4, 1),
                torch.zeros(4, 1),
                torch.zeros(4),
                torch.zeros(4),
            )
    # the layers too: every function of the package refuses during a check (issue 40 §2)
    with reference_switched_off(), pytest.raises(ReferenceUsedError):
        rnn.LSTM(2, 3)(torch.randn(2, 1, 2))
    rnn.LSTM(2, 3)(torch.randn(2, 1, 2))  # and works after it


def test_the_lstm_layer_runs_without_numba():
    """The LSTM's one backward pass is torch operations: training a layer on the CPU imports no
    numba (before, the first CPU LSTM imported numba for its compiled twin, about 0.4 s and
    tens of MB, and ran a backward pass the book did not show)."""
    program = (
        "import sys, torch\n"
        "from nlpcourse import rnn\n"
        "layer = rnn.LSTM(2, 3)\n"
        "layer(torch.randn(4, 1, 2))[0].sum().backward()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'llvmlite')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout[:200]
