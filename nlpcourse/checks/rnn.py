"""Checks for exercise 04-rnn (chapter 4). Each compares a student's function with the reference
of the same name in :mod:`nlpcourse.rnn`; see :mod:`nlpcourse.checks`.

Beyond "expected this, got that", the array checks say which entry differs most and recognise the
common mistakes: for each one, this module computes what the mistaken code would return (a
missing recurrent term in BPTT, another gate order, the textbook GRU, ...) and, when the student's
answer is exactly that, says so. The BPTT check also compares the worst entry with a central
finite difference of the loss, computed here with a forward pass of its own.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping

import numpy as np
import torch

from nlpcourse import rnn
from nlpcourse.checks import Case, CheckFailed, run_check, show
from nlpcourse.guard import ReferenceUsedError, reference_switched_off

RTOL, ATOL = 1e-5, 1e-7  # float64 inputs; a student who computes in float32 still passes


def _rng(hidden: bool) -> np.random.Generator:
    return np.random.default_rng(2 if hidden else 1)


def _n_random(hidden: bool) -> int:
    return 20 if hidden else 3


# ------------------------------------------------------------------------------ showing arrays


def _fmt(value) -> str:
    """Arrays and tensors as short numpy text (5 digits), inside tuples and dicts too."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        text = np.array2string(value, precision=5, suppress_small=True, separator=", ")
        return text if len(text) < 1500 else text[:1500] + " ..."
    if isinstance(value, tuple):
        return "(" + ", ".join(_fmt(v) for v in value) + ")"
    if isinstance(value, Mapping):
        return "{" + ",\n ".join(f"{k!r}: {_fmt(v)}" for k, v in value.items()) + "}"
    return show(value)


class _Expected:
    """The reference's answer with the inputs it was computed from, so that a compare function
    can do more than test equality (finite differences, known mistakes). Shown as the answer."""

    def __init__(self, value, args: tuple):
        self.value, self.args = value, args

    def __repr__(self) -> str:
        return _fmt(self.value)


def _with_inputs(reference: Callable) -> Callable:
    def expected(*args):
        return _Expected(reference(*args), args)

    return expected


def _case(args: tuple, names: tuple[str, ...], hint: str = "", label: str = "") -> Case:
    shown = {n: _fmt(a) for n, a in zip(names, args, strict=True) if not isinstance(a, str)}
    return Case(args, names, hint, label, shown)


def _to_numpy(value, name: str) -> tuple[np.ndarray | None, str]:
    """``value`` as a float64 array, or ``(None, what is wrong)``."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().double().numpy()
    if value is None:
        return None, f"{name} is None: did you forget to `return` it?"
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None, f"{name} should be a numpy array or torch tensor, got a {type(value).__name__}"
    return array, ""


def _compare_array(name: str, expected, got, shape_hint: str = "") -> str:
    """'' if ``got`` is close to ``expected`` (same shape), else which entry differs most."""
    expected, _ = _to_numpy(expected, name)
    got, problem = _to_numpy(got, name)
    if problem:
        return problem
    if got.shape != expected.shape:
        return f"{name} has shape {got.shape}, expected {expected.shape}" + (
            f" ({shape_hint})" if shape_hint else ""
        )
    if np.isnan(got).any():
        return f"{name} contains nan (not a number): look for 0/0, or log/exp of huge values"
    if np.allclose(got, expected, rtol=RTOL, atol=ATOL):
        return ""
    if got.ndim == 0:
        return f"{name}: expected {expected.item():.6g}, got {got.item():.6g}"
    where = np.unravel_index(np.argmax(np.abs(got - expected)), got.shape)
    return (
        f"{name} is off; the entry {name}[{', '.join(str(int(k)) for k in where)}] differs most: "
        f"expected {expected[where]:.6g}, got {got[where]:.6g}"
    )


def _matches(got, value) -> bool:
    """Whether ``got`` (array, tensor, or a tuple of them) equals ``value`` to the tolerance."""
    if isinstance(value, tuple):
        return (
            isinstance(got, tuple | list)
            and len(got) == len(value)
            and all(_matches(g, v) for g, v in zip(got, value, strict=True))
        )
    array, problem = _to_numpy(got, "")
    return (
        not problem
        and array.shape == np.shape(value)
        and bool(np.allclose(array, value, rtol=RTOL, atol=ATOL))
    )


def _known_mistake(got, mistakes: dict[str, object]) -> str:
    """The hint of the first mistake whose answer ``got`` equals, or ''.

    ``mistakes`` maps a hint to what code with that mistake returns."""
    for hint, value in mistakes.items():
        if _matches(got, value):
            return hint
    return ""


def _sigmoid(a: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-a))


def _np(*tensors: torch.Tensor) -> list[np.ndarray]:
    return [t.detach().cpu().double().numpy() for t in tensors]


# ------------------------------------------------------------------------------ part 1


def check_token_index(token_index: Callable, hidden: bool = False) -> None:
    """``token_index(i, j, layout)``: the (row, column) of x^(i)<j> in a 2-D array."""
    names = ("i", "j", "layout")
    from_one = "the book counts examples and positions from 1, Python from 0: subtract 1"
    time_first = (
        "a time-first array has shape (T, B): the row is the position j, the column the example i"
    )
    cases = [
        Case((1, 1, "batch-first"), names, from_one),
        Case(
            (2, 3, "batch-first"),
            names,
            "batch-first (B, T): the row is the example i. " + from_one,
        ),
        Case((2, 3, "time-first"), names, time_first),
        Case((5, 1, "time-first"), names, time_first),
    ]
    rng = _rng(hidden)
    for _ in range(_n_random(hidden)):
        i, j = int(rng.integers(1, 33)), int(rng.integers(1, 51))
        layout = str(rng.choice(rnn.LAYOUTS))
        cases.append(Case((i, j, layout), names, time_first if "time" in layout else from_one))

    def compare(want: tuple[int, int], got) -> str:
        if not isinstance(got, tuple | list) or len(got) != 2:
            return f"expected a pair (row, column) such as (0, 2), got {show(got)}"
        if any(isinstance(k, bool) or not isinstance(k, int | np.integer) for k in got):
            return f"both indices must be integers, got {show(got)}"
        return "" if tuple(int(k) for k in got) == want else f"expected {want}, got {show(got)}"

    run_check("token_index", token_index, rnn.token_index, cases, compare)


# ------------------------------------------------------------------------------ part 2

ARCHITECTURE_HINTS = {
    "part-of-speech tagging": "one tag for each word: an output at every step, T_y = T_x",
    "named-entity recognition": "a label (B-PER, I-PER, O, ...) for each word: T_y = T_x",
    "language modelling": "at every position the model predicts the next word: T_y = T_x",
    "sentiment classification": "the whole review in, one label out after the last word",
    "spam detection": "a whole e-mail in, one decision (spam or not) out",
    "topic classification": "a whole document in, one topic out",
    "image captioning": "one input (the image's feature vector), then a sentence out",
    "music generation": "one input (a style, or just a start token), then a sequence of notes",
    "machine translation": (
        "a sentence in, a sentence of another length out, and word i of the output is not "
        "the translation of word i of the input: read the whole input first"
    ),
    "speech recognition": (
        "many audio frames in (about 100 per second), far fewer words out, with no given "
        "alignment between them: T_y differs from T_x, so read the input, then write"
    ),
    "summarisation": "a long text in, a shorter text out: T_y differs from T_x",
}


def _normalise_label(label) -> str | None:
    if not isinstance(label, str):
        return None
    return "-".join(label.strip().lower().replace("_", " ").replace("-", " ").split())


def check_architecture_for(architecture_for: Callable, hidden: bool = False) -> None:
    """``architecture_for(task)``: one of ``nlpcourse.rnn.ARCHITECTURES``."""
    shown = ["sentiment classification", "part-of-speech tagging"]
    tasks = list(rnn.ARCHITECTURE_TASKS) if hidden else shown
    cases = [Case((task,), ("task",), ARCHITECTURE_HINTS[task], label=repr(task)) for task in tasks]

    def compare(want: str, got) -> str:
        label = _normalise_label(got)
        if label not in rnn.ARCHITECTURES:
            return f"the answer must be one of {rnn.ARCHITECTURES}, got {show(got)}"
        return "" if label == want else f"expected {want!r}, got {got!r}"

    run_check("architecture_for", architecture_for, rnn.architecture_for, cases, compare)
    if hidden:
        return
    # the visible check grades two tasks; here, only that every task gets a valid answer
    for task in rnn.ARCHITECTURE_TASKS:
        try:
            with reference_switched_off():
                got = architecture_for(task)
        except ReferenceUsedError as err:
            raise CheckFailed(f"architecture_for: {err}") from None
        except Exception as err:
            raise CheckFailed(
                f"architecture_for raised {type(err).__name__}: {err}\non the task {task!r}: "
                "answer every task listed above the function"
            ) from err
        if _normalise_label(got) not in rnn.ARCHITECTURES:
            raise CheckFailed(
                f"architecture_for({task!r}) returned {show(got)}; "
                f"every answer must be one of {rnn.ARCHITECTURES}"
            )
    print(f"architecture_for: all {len(rnn.ARCHITECTURE_TASKS)} answers are valid labels")


# ------------------------------------------------------------------------------ part 3


def check_rnn_cell_forward(rnn_cell_forward: Callable, hidden: bool = False) -> None:
    """``rnn_cell_forward(x_t, h_prev, W_xh, W_hh, b_h)``: tanh(W_xh x_t + W_hh h_prev + b_h)."""
    names = ("x_t", "h_prev", "W_xh", "W_hh", "b_h")
    equation = "h_t = tanh(W_xh @ x_t + W_hh @ h_prev + b_h), eq. (rnn-h)"
    a = np.array
    cases = [
        _case((a([1.0]), a([0.0]), a([[0.5]]), a([[0.0]]), a([0.1])), names, equation),
        _case(
            (a([0.0, 0.0]), a([0.0, 0.0]), np.zeros((2, 2)), np.zeros((2, 2)), a([0.5, -1.0])),
            names,
            "with all weights 0, h_t = tanh(b_h)",
        ),
        _case(
            (a([1.0, -2.0]), a([0.5, -0.5, 1.0]), a([[0.1, 0.2], [0.3, -0.4], [-0.5, 0.6]]),
             a([[0.2, -0.1, 0.4], [0.0, 0.3, -0.2], [0.5, 0.1, 0.1]]), a([0.0, 0.1, -0.1])),
            names,
            "W_hh (H, H) multiplies the column h_prev: W_hh @ h_prev, not h_prev @ W_hh",
        ),
    ]  # fmt: skip
    rng = _rng(hidden)
    for _ in range(_n_random(hidden)):
        D, H = (int(k) for k in rng.integers(1, 7, 2))
        args = (rng.normal(size=D), rng.normal(size=H), rng.normal(size=(H, D)),
                rng.normal(size=(H, H)), rng.normal(size=H))  # fmt: skip
        cases.append(_case(args, names, equation, label="random"))

    def compare(want: _Expected, got) -> str:
        H = len(want.args[1])
        problem = _compare_array("h_t", want.value, got, f"h_t is a vector of H = {H} numbers")
        if not problem:
            return ""
        x_t, h_prev, W_xh, W_hh, b_h = want.args
        mistake = _known_mistake(
            got,
            {
                "you forgot the tanh": W_xh @ x_t + W_hh @ h_prev + b_h,
                "you used W_hh.T (or h_prev @ W_hh): use W_hh @ h_prev": np.tanh(
                    W_xh @ x_t + W_hh.T @ h_prev + b_h
                ),
                "you left out the bias b_h": np.tanh(W_xh @ x_t + W_hh @ h_prev),
                "the RNN's nonlinearity is tanh, not the sigmoid": _sigmoid(
                    W_xh @ x_t + W_hh @ h_prev + b_h
                ),
            },
        )
        return problem + (f"\nlikely mistake: {mistake}" if mistake else "")

    run_check(
        "rnn_cell_forward", rnn_cell_forward, _with_inputs(rnn.rnn_cell_forward), cases, compare
    )


# ------------------------------------------------------------------------------ part 4


def _forward(x: np.ndarray, h0: np.ndarray, params: dict) -> tuple[np.ndarray, np.ndarray]:
    """The check's own forward pass, eqs. (rnn-h), (rnn-y): hs (T+1, H), y_hat (T, V)."""
    hs = [h0]
    y_hat = []
    for x_t in x:
        hs.append(np.tanh(params["W_xh"] @ x_t + params["W_hh"] @ hs[-1] + params["b_h"]))
        o = params["W_hy"] @ hs[-1] + params["b_y"]
        y_hat.append(np.exp(o - o.max()) / np.exp(o - o.max()).sum())
    return np.array(hs), np.array(y_hat)


def _loss(x: np.ndarray, targets: np.ndarray, h0: np.ndarray, params: dict) -> float:
    """Eq. (rnn-loss) with the check's own forward pass."""
    _, y_hat = _forward(x, h0, params)
    return float(-np.log(y_hat[np.arange(len(targets)), targets]).sum())


def _finite_difference(args: tuple, name: str, index: tuple, eps: float = 1e-6) -> float:
    """dL/d params[name][index] by a central difference of the loss."""
    x, targets, hs, _, params = args
    params = {k: v.copy() for k, v in params.items()}
    old = params[name][index]
    params[name][index] = old + eps
    up = _loss(x, targets, hs[0], params)
    params[name][index] = old - eps
    down = _loss(x, targets, hs[0], params)
    return (up - down) / (2 * eps)


def _bptt(x, targets, hs, y_hat, params, mistake: str = "") -> dict[str, np.ndarray]:
    """BPTT as the chapter derives it, or with one named ``mistake`` (for the hints)."""
    W_hh, W_hy = params["W_hh"], params["W_hy"]
    grads = {name: np.zeros_like(params[name]) for name in rnn.NUMPY_PARAMS}
    dh_next = np.zeros(len(hs[0]))
    for t in range(len(x), 0, -1):
        do = y_hat[t - 1].copy()
        if mistake != "no-onehot":
            do[targets[t - 1]] -= 1
        grads["W_hy"] += np.outer(do, hs[t])
        grads["b_y"] += do
        dh = W_hy.T @ do + (0 if mistake == "no-recurrence" else dh_next)
        delta = (1 - hs[t] ** 2) * dh
        grads["W_hh"] += np.outer(delta, hs[t] if mistake == "h_t-in-dW_hh" else hs[t - 1])
        grads["W_xh"] += np.outer(delta, x[t - 1])
        grads["b_h"] += delta
        if mistake == "carry-dh":
            dh_next = W_hh.T @ dh
        elif mistake == "no-transpose":
            dh_next = W_hh @ delta
        else:
            dh_next = W_hh.T @ delta
    return grads


BPTT_MISTAKES = {
    "no-recurrence": (
        "dW_hh, dW_xh and db_h are off: did you add W_hh^T delta_{t+1} into the gradient of h_t? "
        "h_t feeds h_{t+1}, so dL/dh_t = W_hy^T (y_hat_t - y_t) + W_hh^T delta_{t+1}: that second "
        "term is the gradient that flows back through time (zero only at t = T)"
    ),
    "carry-dh": (
        "what you send back to h_{t-1} must be W_hh^T delta_t, with "
        "delta_t = (1 - h_t^2) * dL/dh_t (the tanh derivative included), not W_hh^T dL/dh_t"
    ),
    "no-transpose": (
        "the gradient sent back to h_{t-1} is W_hh.T @ delta_t (transposed), not W_hh @ delta_t"
    ),
    "h_t-in-dW_hh": (
        "dW_hh = sum_t delta_t h_{t-1}^T: the outer product is with the state *before* step t, "
        "hs[t-1], not hs[t]"
    ),
    "no-onehot": (
        "dL/do_t = y_hat_t - onehot(y_t): subtract 1 at the target's entry (copy y_hat[t-1] first)"
    ),
}


def _bptt_problem(rng: np.random.Generator, T: int, D: int, H: int, V: int) -> tuple:
    """Inputs of rnn_backward: x (T, D), targets (T,), hs (T+1, H), y_hat (T, V), params."""
    params = {
        "W_xh": rng.normal(0, 0.7, (H, D)),
        "W_hh": rng.normal(0, 0.7, (H, H)),
        "W_hy": rng.normal(0, 0.7, (V, H)),
        "b_h": rng.normal(0, 0.7, H),
        "b_y": rng.normal(0, 0.7, V),
    }
    x = rng.normal(size=(T, D))
    targets = rng.integers(0, V, T)
    hs, y_hat = _forward(x, rng.normal(0, 0.5, H), params)
    return x, targets, hs, y_hat, params


def check_rnn_backward(rnn_backward: Callable, hidden: bool = False) -> None:
    """``rnn_backward(x, targets, hs, y_hat, params)``: the gradients of eq. (bptt-grads)."""
    names = ("x", "targets", "hs", "y_hat", "params")
    rng = np.random.default_rng(0)
    cases = [
        _case(
            _bptt_problem(rng, T=1, D=1, H=1, V=2),
            names,
            "one step, no recurrence yet: dL/do_1 = y_hat_1 - onehot(y_1), "
            "delta_1 = (1 - h_1^2) * (W_hy^T dL/do_1), dW_hh = delta_1 h_0^T (h_0 = hs[0])",
            label="T = 1",
        ),
        _case(
            _bptt_problem(rng, T=2, D=2, H=2, V=2),
            names,
            "h_1 gets gradient from y_hat_1 and from h_2: add W_hh^T delta_2",
            label="T = 2",
        ),
        _case(_bptt_problem(rng, T=4, D=2, H=3, V=3), names, label="T = 4"),
    ]
    rng = _rng(hidden)
    for _ in range(_n_random(hidden)):
        T, D, H, V = (int(k) for k in rng.integers(1, 7, 4))
        cases.append(_case(_bptt_problem(rng, T + 2, D, H, V + 1), names, label="random"))

    def compare(want: _Expected, got) -> str:
        if not isinstance(got, Mapping):
            return f"expected a dict of gradients {{'W_xh': ..., ...}}, got a {type(got).__name__}"
        missing = [name for name in rnn.NUMPY_PARAMS if name not in got]
        if missing:
            return f"the dict has no gradient for {missing}; it needs {list(rnn.NUMPY_PARAMS)}"
        problems = {}
        for name in rnn.NUMPY_PARAMS:
            problem = _compare_array(
                f"grads[{name!r}]",
                want.value[name],
                got[name],
                f"a gradient has the shape of its parameter, params[{name!r}]",
            )
            if problem:
                problems[name] = problem
        if not problems:
            return ""
        right = [name for name in rnn.NUMPY_PARAMS if name not in problems]
        name, problem = next(iter(problems.items()))
        lines = [f"right: {right or 'none'}; wrong: {list(problems)}", problem]
        got_array, _ = _to_numpy(got[name], "")
        if got_array is not None and got_array.shape == want.value[name].shape:
            where = np.unravel_index(
                np.argmax(np.abs(got_array - want.value[name])), got_array.shape
            )
            numeric = _finite_difference(want.args, name, where)
            lines.append(
                f"a finite difference of the loss, (L(w + eps) - L(w - eps)) / (2 eps), gives "
                f"{numeric:.6g} there"
            )
        mistakes = {hint: _bptt(*want.args, mistake=m) for m, hint in BPTT_MISTAKES.items()}
        as_dict = {n: got[n] for n in rnn.NUMPY_PARAMS}
        hint = next(
            (
                h
                for h, value in mistakes.items()
                if all(_matches(as_dict[n], value[n]) for n in value)
            ),
            "",
        )
        shapes_right = all(
            np.shape(_to_numpy(got[n], "")[0]) == want.value[n].shape for n in rnn.NUMPY_PARAMS
        )
        if not hint and shapes_right:
            if "W_hy" in problems or "b_y" in problems:
                hint = BPTT_MISTAKES["no-onehot"] + "; then dW_hy = sum_t dL/do_t h_t^T (hs[t])"
            elif "b_h" in problems:
                hint = (
                    "dW_hy and db_y are right, so look at delta_t = (1 - h_t^2) * (W_hy^T dL/do_t "
                    "+ W_hh^T delta_{t+1}), with h_t = hs[t] and delta_{T+1} = 0"
                )
            elif "W_hh" in problems:
                hint = BPTT_MISTAKES["h_t-in-dW_hh"]
            else:
                hint = "dW_xh = sum_t delta_t x_t^T, with x_t = x[t-1] (the book counts from 1)"
        return "\n".join(lines) + (f"\nlikely mistake: {hint}" if hint else "")

    def reference(*args):  # the parameters' gradients only; the exercise does not ask for h0
        grads = rnn.rnn_backward(*args)
        return {name: grads[name] for name in rnn.NUMPY_PARAMS}

    run_check("rnn_backward", rnn_backward, _with_inputs(reference), cases, compare)


# ------------------------------------------------------------------------------ parts 5 and 6


def _lstm_np(x_t, h_prev, c_prev, weight_ih, weight_hh, bias_ih, bias_hh, order="ifgo", bug=""):
    """The LSTM step in numpy, reading the four row blocks as the gates named by ``order``."""
    a = x_t @ weight_ih.T + bias_ih + h_prev @ weight_hh.T + bias_hh  # (B, 4H)
    gate = dict(zip(order, np.split(a, 4, axis=1), strict=True))
    i, f, o = _sigmoid(gate["i"]), _sigmoid(gate["f"]), _sigmoid(gate["o"])
    g = _sigmoid(gate["g"]) if bug == "sigmoid-g" else np.tanh(gate["g"])
    c_t = f * c_prev + i * g
    h_t = o * (c_t if bug == "no-tanh-c" else np.tanh(c_t))
    return h_t, c_t


def _random_cell_args(rng: np.random.Generator, B: int, D: int, H: int, G: int, lstm: bool):
    """Float64 tensors: x_t (B, D), h_prev (B, H) [, c_prev (B, H)], weights, biases."""

    def t(*shape, scale=1.0):
        return torch.tensor(rng.normal(0, scale, shape))

    states = (t(B, H), t(B, H)) if lstm else (t(B, H),)
    return (t(B, D), *states, t(G * H, D, scale=0.8), t(G * H, H, scale=0.8), t(G * H), t(G * H))


def _compare_pair_or_state(want: _Expected, got, lstm: bool) -> str:
    if lstm:
        if not isinstance(got, tuple | list) or len(got) != 2:
            return f"expected a pair (h_t, c_t), got a {type(got).__name__}"
        h_want, c_want = want.value
        if _matches(tuple(got), (c_want, h_want)):
            return "you returned (c_t, h_t): return (h_t, c_t), in that order"
        B, H = h_want.shape
        shape = f"(B, H) = ({B}, {H})"
        return (
            _compare_array("h_t", h_want, got[0], shape)
            + "\n"
            + _compare_array("c_t", c_want, got[1], shape)
        ).strip()
    B, H = want.value.shape
    return _compare_array("h_t", want.value, got, f"(B, H) = ({B}, {H}), like h_prev")


def check_lstm_cell(lstm_cell: Callable, hidden: bool = False) -> None:
    """``lstm_cell(x_t, h_prev, c_prev, weight_ih, weight_hh, bias_ih, bias_hh)``: (h_t, c_t)."""
    names = ("x_t", "h_prev", "c_prev", "weight_ih", "weight_hh", "bias_ih", "bias_hh")
    layout = (
        "each gate's pre-activation is x_t @ weight_ih.T + bias_ih + h_prev @ weight_hh.T + "
        "bias_hh, shape (B, 4H), split into four (B, H) blocks in the order i, f, g, o"
    )
    rng = np.random.default_rng(0)
    first = _random_cell_args(rng, 1, 1, 1, 4, lstm=True)
    zero_state = list(_random_cell_args(rng, 1, 2, 2, 4, lstm=True))
    zero_state[1:3] = [torch.zeros(1, 2, dtype=torch.float64)] * 2
    cases = [
        _case(first, names, layout, label="B = 1, D = 1, H = 1"),
        _case(
            tuple(zero_state),
            names,
            "from a zero state c_t = i_t * g_t (the forget gate has nothing to keep)",
            label="zero state",
        ),
        _case(
            _random_cell_args(rng, 2, 3, 2, 4, lstm=True),
            names,
            "c_t = f_t * c_{t-1} + i_t * g_t, h_t = o_t * tanh(c_t); a batch of B = 2 rows",
            label="B = 2",
        ),
    ]
    rng = _rng(hidden)
    for _ in range(_n_random(hidden)):
        B, D, H = (int(k) for k in rng.integers(1, 6, 3))
        cases.append(_case(_random_cell_args(rng, B, D, H, 4, lstm=True), names, label="random"))

    def compare(want: _Expected, got) -> str:
        problem = _compare_pair_or_state(want, got, lstm=True)
        if not problem or not isinstance(got, tuple | list) or len(got) != 2:
            return problem
        if problem.startswith("you returned"):
            return problem
        args = _np(*want.args)
        orders = ["".join(p) for p in itertools.permutations("ifgo") if "".join(p) != "ifgo"]
        mistakes = {
            f"your code reads the four row blocks of the weights as the gates {', '.join(order)}; "
            "torch stacks them as i, f, g, o (rows 0:H input gate, H:2H forget gate, 2H:3H "
            "candidate g, 3H:4H output gate)": _lstm_np(*args, order=order)
            for order in orders
        }
        mistakes["h_t = o_t * tanh(c_t): you left out the tanh"] = _lstm_np(*args, bug="no-tanh-c")
        mistakes["the candidate g_t uses tanh, not the sigmoid"] = _lstm_np(*args, bug="sigmoid-g")
        hint = _known_mistake(tuple(got), mistakes)
        return problem + (f"\nlikely mistake: {hint}" if hint else "")

    run_check("lstm_cell", lstm_cell, _with_inputs(rnn.lstm_cell), cases, compare)


def _gru_np(x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh, order="rzn", bug=""):
    """The GRU step in numpy (torch's form, or with one named ``bug``)."""
    W_h = dict(zip(order, np.split(weight_hh, 3), strict=True))
    b_h = dict(zip(order, np.split(bias_hh, 3), strict=True))
    wx = dict(zip(order, np.split(x_t @ weight_ih.T + bias_ih, 3, axis=1), strict=True))
    r = _sigmoid(wx["r"] + h_prev @ W_h["r"].T + b_h["r"])
    z = _sigmoid(wx["z"] + h_prev @ W_h["z"].T + b_h["z"])
    if bug == "textbook":
        n = np.tanh(wx["n"] + (r * h_prev) @ W_h["n"].T + b_h["n"])
    elif bug == "r-not-on-bias":
        n = np.tanh(wx["n"] + r * (h_prev @ W_h["n"].T) + b_h["n"])
    else:
        n = np.tanh(wx["n"] + r * (h_prev @ W_h["n"].T + b_h["n"]))
    if bug == "z-swapped":
        return z * n + (1 - z) * h_prev
    return (1 - z) * n + z * h_prev


def check_gru_cell(gru_cell: Callable, hidden: bool = False) -> None:
    """``gru_cell(x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh)``: h_t as torch's GRU."""
    names = ("x_t", "h_prev", "weight_ih", "weight_hh", "bias_ih", "bias_hh")
    torch_form = (
        "torch's GRU: n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn)); "
        "h_t = (1 - z_t) * n_t + z_t * h_{t-1}; row blocks in the order r, z, n"
    )
    rng = np.random.default_rng(0)
    zero_state = list(_random_cell_args(rng, 1, 2, 2, 3, lstm=False))
    zero_state[1] = torch.zeros(1, 2, dtype=torch.float64)
    cases = [
        _case(_random_cell_args(rng, 1, 1, 1, 3, lstm=False), names, torch_form, "H = 1"),
        _case(
            tuple(zero_state),
            names,
            "from a zero state h_t = (1 - z_t) * n_t, and r_t still multiplies b_hn",
            "zero state",
        ),
        _case(_random_cell_args(rng, 2, 3, 2, 3, lstm=False), names, torch_form, "B = 2"),
    ]
    rng = _rng(hidden)
    for _ in range(_n_random(hidden)):
        B, D, H = (int(k) for k in rng.integers(1, 6, 3))
        cases.append(_case(_random_cell_args(rng, B, D, H, 3, lstm=False), names, label="random"))

    def compare(want: _Expected, got) -> str:
        problem = _compare_pair_or_state(want, got, lstm=False)
        if not problem:
            return problem
        args = _np(*want.args)
        mistakes = {
            "that is the textbook GRU (Cho et al. 2014), n_t = tanh(W_in x_t + b_in + W_hn (r_t * "
            "h_{t-1}) + b_hn). torch's GRU applies r_t to (W_hn h_{t-1} + b_hn), not to "
            "h_{t-1}": _gru_np(*args, bug="textbook"),
            "r_t multiplies b_hn too: n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn))": (
                _gru_np(*args, bug="r-not-on-bias")
            ),
            "z_t is the share of the *old* state kept: h_t = (1 - z_t) * n_t + z_t * h_{t-1}": (
                _gru_np(*args, bug="z-swapped")
            ),
        }
        for order in ("rnz", "zrn", "znr", "nrz", "nzr"):
            hint = (
                f"your code reads the three row blocks of the weights as the gates "
                f"{', '.join(order)}; torch stacks them as r, z, n (rows 0:H reset, H:2H update, "
                "2H:3H candidate n)"
            )
            mistakes[hint] = _gru_np(*args, order=order)
        hint = _known_mistake(got, mistakes)
        return problem + (f"\nlikely mistake: {hint}" if hint else "")

    run_check("gru_cell", gru_cell, _with_inputs(rnn.gru_cell), cases, compare)


__all__ = [
    "check_token_index",
    "check_architecture_for",
    "check_rnn_cell_forward",
    "check_rnn_backward",
    "check_lstm_cell",
    "check_gru_cell",
]
