"""Checks for exercise 04-rnn (chapter 4): cases, answers and usual mistakes.

The machinery is :func:`nlpcourse.checks.core.run_check`'s. The two concept questions have answer
keys written here (:func:`token_index_answer`, :func:`architecture_answer`); the numerical parts
are compared with :mod:`nlpcourse.rnn`. Beyond "expected this, got that", the array checks say
which entry differs most and name the common mistakes: for each one, this module computes what the
mistaken code would return (a missing recurrent term in BPTT, another gate order, the textbook
GRU, ...) with the numpy oracles of :mod:`nlpcourse.testing` or code written here. The BPTT check
also compares the worst entry with a central finite difference of the loss
(:func:`nlpcourse.testing.finite_difference`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from nlpcourse import rnn
from nlpcourse.checks.core import (
    Case,
    CheckFailed,
    Expected,
    Mistake,
    as_array,
    call_student,
    compare_arrays,
    n_random,
    name_mistake,
    np_rng,
    run_check,
    same_on_keys,
    show,
    to_plain,
    with_args,
)
from nlpcourse.guard import ReferenceUsedError, reference
from nlpcourse.testing import finite_difference, gru_step_np, lstm_step_np, rnn_forward_np

LAYOUTS = rnn.LAYOUTS
ARCHITECTURES = rnn.ARCHITECTURES


def _np(*values: Any) -> Any:
    """Tensors (or arrays) as float64 numpy arrays."""
    return [np.asarray(to_plain(v), dtype=float) for v in values]


def _sigmoid(a: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-a))


# ------------------------------------------------------------------------------ part 1


@reference
def token_index_answer(i: int, j: int, layout: str) -> tuple[int, int]:
    """The answer key of part 1: where the book's ``x^(i)<j>`` (counted from 1) sits in a 2-D
    array, ``X[i - 1, j - 1]`` batch-first (B, T), ``X[j - 1, i - 1]`` time-first (T, B)."""
    if layout == "batch-first":
        return (i - 1, j - 1)  # X (B, T)
    return (j - 1, i - 1)  # X (T, B)


def _token_index_mistakes(i: int, j: int, layout: str) -> list[Mistake]:
    other = "time-first" if layout == "batch-first" else "batch-first"
    return [
        Mistake(
            "the book counts examples and positions from 1, Python from 0: subtract 1",
            tuple(k + 1 for k in token_index_answer(i, j, layout)),
        ),
        Mistake(
            f"rows and columns are swapped: that is where the token sits in a {other} array. "
            "Batch-first (B, T): the row is the example i; time-first (T, B): the row is the "
            "position j",
            token_index_answer(i, j, other),
            key="rows and columns swapped",
        ),
        Mistake(
            "rows and columns are swapped, and the book counts from 1: subtract 1",
            tuple(k + 1 for k in token_index_answer(i, j, other)),
        ),
        *(
            Mistake(
                f"your answer does not depend on the layout: it is where the token sits in a "
                f"{fixed} array whatever the layout. Batch-first (B, T): the row is the example "
                "i; time-first (T, B): the row is the position j",
                token_index_answer(i, j, fixed),
                key=f"always {fixed}",
            )
            for fixed in LAYOUTS
        ),
    ]


def _compare_index(want: Expected, got: Any) -> str:
    """Which of the two indices differs, and what that index counts in the case's layout."""
    if not isinstance(got, tuple | list) or len(got) != 2:
        return f"expected a pair (row, column) such as (0, 2), got {show(got)}"
    if any(isinstance(k, bool) or not isinstance(k, int) for k in got):
        return f"both indices must be integers, got {show(got)}"
    if tuple(got) == tuple(want.value):
        return ""
    i, j, layout = want.args
    counts = {"batch-first": ("example i", "position j"), "time-first": ("position j", "example i")}
    book = {"example i": i, "position j": j}
    lines = [f"expected {want.value}, got {show(got)}"]
    for axis, (right, mine, what) in enumerate(zip(want.value, got, counts[layout], strict=True)):
        if right != mine:
            lines.append(
                f"the {('row', 'column')[axis]} (index {axis}) is wrong: in a {layout} array it "
                f"counts the {what} = {book[what]} of the book, from 1, so {right} from 0"
            )
    return "\n".join(lines)


def check_token_index(token_index: Callable, hidden: bool = False) -> None:
    """``token_index(i, j, layout)``: the (row, column) of x^(i)<j> in a 2-D array."""
    names = ("i", "j", "layout")
    batch_first = "a batch-first array has shape (B, T); i and j count from 1"
    time_first = "a time-first array has shape (T, B); i and j count from 1"
    cases = [
        Case((1, 2, "batch-first"), names, batch_first),
        Case((2, 3, "batch-first"), names, batch_first),
        Case((2, 3, "time-first"), names, time_first),
        Case((5, 1, "time-first"), names, time_first),
    ]
    rng = np_rng(hidden)
    for _ in range(n_random(hidden)):
        i, j = int(rng.integers(1, 33)), int(rng.integers(1, 51))
        layout = str(rng.choice(LAYOUTS))
        cases.append(Case((i, j, layout), names, time_first if "time" in layout else batch_first))
    run_check(
        "token_index",
        token_index,
        with_args(token_index_answer),
        cases,
        _compare_index,
        mistakes=_token_index_mistakes,
    )


# ------------------------------------------------------------------------------ part 2

TASKS = rnn.ARCHITECTURE_TASKS  # the tasks of part 2


@reference
def architecture_answer(task: str) -> str:
    """The answer key of part 2 (section "Architectures" of chapter 4): which recurrent
    architecture fits ``task``. Kept in a function marked as a reference, so that it refuses to
    run while a student's function is checked, like the algorithms."""
    answers = {
        "part-of-speech tagging": "many-to-many",
        "named-entity recognition": "many-to-many",
        "language modelling": "many-to-many",
        "sentiment classification": "many-to-one",
        "spam detection": "many-to-one",
        "topic classification": "many-to-one",
        "image captioning": "one-to-many",
        "music generation": "one-to-many",
        "machine translation": "encoder-decoder",
        "speech recognition": "encoder-decoder",
        "summarisation": "encoder-decoder",
    }
    return answers[task]


# Tasks the literature frames two ways (issue 42): both readings are right. The book's table
# (book/rnn.md, "Four ways to map sequences") gives both; architecture_answer gives the first.
ALSO_RIGHT = {
    "image captioning": "encoder-decoder",  # a CNN encodes the image, an RNN decodes a sentence
    "music generation": "many-to-many",  # a language model over notes: predict the next one
    "speech recognition": "many-to-many",  # one label per audio frame (CTC), then collapsed
}
# the visible check grades one task of each answer kind
VISIBLE_TASKS = (
    "sentiment classification",
    "part-of-speech tagging",
    "image captioning",
    "machine translation",
)

ARCHITECTURE_HINTS = {
    "part-of-speech tagging": "one tag for each word: an output at every step, T_y = T_x",
    "named-entity recognition": "a label (B-PER, I-PER, O, ...) for each word: T_y = T_x",
    "language modelling": "at every position the model predicts the next word: T_y = T_x",
    "sentiment classification": "the whole review in, one label out after the last word",
    "spam detection": "a whole e-mail in, one decision (spam or not) out",
    "topic classification": "a whole document in, one topic out",
    "image captioning": "one input (the image's feature vector), then a sentence out; read as an "
    "encoder (of the image) and a decoder, encoder-decoder is right too",
    "music generation": "one input (a style, or just a start token), then a sequence of notes; "
    "read as a language model over notes, many-to-many is right too",
    "machine translation": (
        "a sentence in, a sentence of its own length out (T_y is not tied to T_x), and word i of "
        "the output is not the translation of word i of the input: read the whole input first"
    ),
    "speech recognition": (
        "many audio frames in (about 100 per second), fewer words out, with no given alignment "
        "between them: T_y is not tied to T_x, so read the input, then write; with one label "
        "per frame (CTC), many-to-many is right too"
    ),
    "summarisation": "a long text in, a text of its own (shorter) length out, not aligned word "
    "by word with the input: T_y is not tied to T_x",
}


def _normalise_label(label: Any) -> str | None:
    if not isinstance(label, str):
        return None
    return "-".join(label.strip().lower().replace("_", " ").replace("-", " ").split())


def _compare_architecture(want: Expected, got: Any) -> str:
    label = _normalise_label(got)
    if label not in ARCHITECTURES:
        return f"the answer must be one of {ARCHITECTURES}, got {show(got)}"
    (task,) = want.args
    right = {want.value, ALSO_RIGHT.get(task, want.value)}
    if label in right:
        return ""
    return (
        f"expected {' or '.join(repr(r) for r in sorted(right))}, got {got!r}\n"
        f"hint: {task}: {ARCHITECTURE_HINTS[task]}"
    )


def tasks_of_kind(kind: str | None) -> list[str]:
    """The tasks whose answer (in :func:`architecture_answer`) is ``kind``, in the order of
    ``TASKS``; every task for ``None``. Raises ValueError for a kind that is not an architecture."""
    if kind is None:
        return list(TASKS)
    if kind not in ARCHITECTURES:
        raise ValueError(f"kind must be one of {ARCHITECTURES} or None, got {kind!r}")
    return [task for task in TASKS if architecture_answer(task) == kind]


def check_architecture_for(
    architecture_for: Callable, hidden: bool = False, kind: str | None = None
) -> None:
    """``architecture_for(task)``: one of ``nlpcourse.rnn.ARCHITECTURES``.

    Credit is per kind of task (issue 42): the notebook has one graded cell per ``kind``, which
    checks only the tasks whose answer is that kind, so a wrong answer costs the points of its
    own kind and no other. Visible: the one task of that kind in ``VISIBLE_TASKS`` is graded, and
    every task of the kind must get one of the four labels; hidden: every task of the kind is
    graded. ``kind=None`` checks every task at once."""
    of_kind = tasks_of_kind(kind)
    tasks = of_kind if hidden else [task for task in VISIBLE_TASKS if task in of_kind]
    label = "architecture_for" + (f" ({kind} tasks)" if kind else "")
    cases = [Case((task,), ("task",), ARCHITECTURE_HINTS[task], label=repr(task)) for task in tasks]
    run_check(label, architecture_for, with_args(architecture_answer), cases, _compare_architecture)
    if hidden:
        return
    # the visible check grades one task of each kind; here, only that every task gets a label
    for task in of_kind:
        try:
            got = call_student(architecture_for, (task,))
        except ReferenceUsedError as err:
            raise CheckFailed(f"architecture_for: {err}") from None
        except Exception as err:
            raise CheckFailed(
                f"architecture_for raised {type(err).__name__}: {err}\non the task {task!r}: "
                "answer every task listed above the function"
            ) from err
        if _normalise_label(got) not in ARCHITECTURES:
            raise CheckFailed(
                f"architecture_for({task!r}) returned {show(got)}; "
                f"every answer must be one of {ARCHITECTURES}"
            )
    print(f"{label}: all {len(of_kind)} answers are valid labels")


# ------------------------------------------------------------------------------ part 3


def _rnn_cell_mistakes(x_t, h_prev, W_xh, W_hh, b_h) -> list[Mistake]:
    return [
        Mistake("you forgot the tanh", W_xh @ x_t + W_hh @ h_prev + b_h),
        Mistake(
            "you used W_hh.T (or h_prev @ W_hh): use W_hh @ h_prev",
            np.tanh(W_xh @ x_t + W_hh.T @ h_prev + b_h),
        ),
        Mistake("you left out the bias b_h", np.tanh(W_xh @ x_t + W_hh @ h_prev)),
        Mistake(
            "the RNN's nonlinearity is tanh, not the sigmoid",
            _sigmoid(W_xh @ x_t + W_hh @ h_prev + b_h),
        ),
    ]


def _compare_h(want: Expected, got: Any) -> str:
    """:func:`compare_arrays` (the entry that differs most), then the parts of that entry:
    its pre-activation, term by term, whose tanh it is."""
    x_t, h_prev, W_xh, W_hh, b_h = want.args
    H = len(h_prev)
    problem = compare_arrays(want.value, got, "h_t", f"h_t is a vector of H = {H} numbers")
    array, _ = as_array(got)
    if not problem or array is None or array.shape != want.value.shape or np.isnan(array).any():
        return problem
    k = int(np.argmax(np.abs(array - want.value)))
    x_term, h_term = float(W_xh[k] @ x_t), float(W_hh[k] @ h_prev)
    return (
        f"{problem}\nhint: h_t[{k}] = tanh(a) with a = (W_xh @ x_t)[{k}] + (W_hh @ h_prev)[{k}] "
        f"+ b_h[{k}] = {x_term:.6g} + {h_term:.6g} + {float(b_h[k]):.6g} = "
        f"{x_term + h_term + float(b_h[k]):.6g}"
    )


def check_rnn_cell_forward(rnn_cell_forward: Callable, hidden: bool = False) -> None:
    """``rnn_cell_forward(x_t, h_prev, W_xh, W_hh, b_h)``: tanh(W_xh x_t + W_hh h_prev + b_h)."""
    names = ("x_t", "h_prev", "W_xh", "W_hh", "b_h")
    equation = "h_t = tanh(W_xh @ x_t + W_hh @ h_prev + b_h), eq. (rnn-h)"
    a = np.array
    cases = [
        Case((a([1.0]), a([0.0]), a([[0.5]]), a([[0.0]]), a([0.1])), names, equation),
        Case(
            (a([0.0, 0.0]), a([0.0, 0.0]), np.zeros((2, 2)), np.zeros((2, 2)), a([0.5, -1.0])),
            names,
            "with all weights 0, h_t = tanh(b_h)",
        ),
        Case(
            (a([1.0, -2.0]), a([0.5, -0.5, 1.0]), a([[0.1, 0.2], [0.3, -0.4], [-0.5, 0.6]]),
             a([[0.2, -0.1, 0.4], [0.0, 0.3, -0.2], [0.5, 0.1, 0.1]]), a([0.0, 0.1, -0.1])),
            names,
            "D = 2 inputs, H = 3 hidden units: W_xh is (H, D) = (3, 2), W_hh is (H, H)",
        ),
    ]  # fmt: skip
    rng = np_rng(hidden)
    for _ in range(n_random(hidden)):
        D, H = (int(k) for k in rng.integers(1, 7, 2))
        args = (rng.normal(size=D), rng.normal(size=H), rng.normal(size=(H, D)),
                rng.normal(size=(H, H)), rng.normal(size=H))  # fmt: skip
        cases.append(Case(args, names, equation, label="random"))
    run_check(
        "rnn_cell_forward",
        rnn_cell_forward,
        with_args(rnn.rnn_cell_forward),
        cases,
        _compare_h,
        mistakes=_rnn_cell_mistakes,
    )


# ------------------------------------------------------------------------------ part 4

PARAMS = rnn.NUMPY_PARAMS  # W_xh, W_hh, W_hy, b_h, b_y


def _bptt(x, targets, hs, y_hat, params, mistake: str = "") -> dict[str, np.ndarray]:
    """BPTT as the chapter derives it, or with one named ``mistake`` (for the messages)."""
    W_hh, W_hy = params["W_hh"], params["W_hy"]
    grads = {name: np.zeros_like(params[name]) for name in PARAMS}
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
        "dL/ds_t = y_hat_t - onehot(y_t): subtract 1 at the target's entry (copy y_hat[t-1] first)"
    ),
}


def _bptt_mistakes(*args: Any) -> list[Mistake]:
    x, targets, hs, y_hat, params = args
    return [
        Mistake(what, _bptt(x, targets, hs, y_hat, params, mistake=m))
        for m, what in BPTT_MISTAKES.items()
    ]


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
    hs, y_hat = rnn_forward_np(x, rng.normal(0, 0.5, H), params)
    return x, targets, hs, y_hat, params


def _compare_grads(want: Expected, got: Any) -> str:
    if not isinstance(got, Mapping):
        return f"expected a dict of gradients {{'W_xh': ..., ...}}, got a {type(got).__name__}"
    missing = [name for name in PARAMS if name not in got]
    if missing:
        return f"the dict has no gradient for {missing}; it needs {list(PARAMS)}"
    problems = {}
    for name in PARAMS:
        problem = compare_arrays(
            want.value[name],
            got[name],
            f"grads[{name!r}]",
            f"a gradient has the shape of its parameter, params[{name!r}]",
        )
        if problem:
            problems[name] = problem
    if not problems:
        return ""
    right = [name for name in PARAMS if name not in problems]
    name, problem = next(iter(problems.items()))
    lines = [f"right: {right or 'none'}; wrong: {list(problems)}", problem]
    arrays = {n: as_array(got[n])[0] for n in PARAMS}
    got_array = arrays[name]
    if got_array is not None and got_array.shape == want.value[name].shape:
        where = np.unravel_index(np.argmax(np.abs(got_array - want.value[name])), got_array.shape)
        x, targets, hs, _, params = want.args
        numeric = finite_difference(x, targets, hs[0], params, name, where)
        lines.append(
            f"a finite difference of the loss, (L(w + eps) - L(w - eps)) / (2 eps), gives "
            f"{numeric:.6g} there"
        )
    shapes_right = all(
        (array := arrays[n]) is not None and array.shape == want.value[n].shape for n in PARAMS
    )
    named = name_mistake(want.value, got, _bptt_mistakes(*want.args), same_on_keys)
    if named is None and shapes_right:  # where to look, when no known mistake fits
        if "b_y" in problems:
            hint = BPTT_MISTAKES["no-onehot"] + "; then dW_hy = sum_t dL/ds_t h_t^T (hs[t])"
        elif "W_hy" in problems:  # db_y right: dL/ds_t is right, the state it multiplies is not
            hint = (
                "db_y is right, so dL/ds_t is; dW_hy = sum_t dL/ds_t h_t^T takes h_t = hs[t] "
                "(hs[0] is h_0, the state before the first step)"
            )
        elif "b_h" in problems:
            hint = (
                "dW_hy and db_y are right, so look at delta_t = (1 - h_t^2) * (W_hy^T dL/ds_t "
                "+ W_hh^T delta_{t+1}), with h_t = hs[t] and delta_{T+1} = 0"
            )
        elif "W_hh" in problems:
            hint = BPTT_MISTAKES["h_t-in-dW_hh"]
        else:
            hint = "dW_xh = sum_t delta_t x_t^T, with x_t = x[t-1] (the book counts from 1)"
        lines.append(f"hint: where to look: {hint}")
    return "\n".join(lines)


def _grads_answer(*args: Any) -> dict[str, np.ndarray]:
    """The parameters' gradients only; the exercise does not ask for h0."""
    grads = rnn.rnn_backward(*args)
    return {name: grads[name] for name in PARAMS}


def check_rnn_backward(rnn_backward: Callable, hidden: bool = False) -> None:
    """``rnn_backward(x, targets, hs, y_hat, params)``: the gradients of eq. (bptt-grads)."""
    names = ("x", "targets", "hs", "y_hat", "params")
    rng = np.random.default_rng(0)
    cases = [
        Case(
            _bptt_problem(rng, T=1, D=1, H=1, V=2),
            names,
            "one step, no recurrence yet: dL/ds_1 = y_hat_1 - onehot(y_1), "
            "delta_1 = (1 - h_1^2) * (W_hy^T dL/ds_1), dW_hh = delta_1 h_0^T (h_0 = hs[0])",
            label="T = 1",
        ),
        Case(
            _bptt_problem(rng, T=2, D=2, H=2, V=2),
            names,
            "h_1 gets gradient from y_hat_1 and from h_2: add W_hh^T delta_2",
            label="T = 2",
        ),
        Case(_bptt_problem(rng, T=4, D=2, H=3, V=3), names, label="T = 4"),
    ]
    rng = np_rng(hidden)
    for _ in range(n_random(hidden)):
        T, D, H, V = (int(k) for k in rng.integers(1, 7, 4))
        cases.append(Case(_bptt_problem(rng, T + 2, D, H, V + 1), names, label="random"))
    run_check(
        "rnn_backward",
        rnn_backward,
        with_args(_grads_answer),
        cases,
        _compare_grads,
        mistakes=_bptt_mistakes,
        same=same_on_keys,
    )


# ------------------------------------------------------------------------------ parts 5 and 6


def _random_cell_args(rng: np.random.Generator, B: int, D: int, H: int, G: int, lstm: bool):
    """Float64 tensors: x_t (B, D), h_prev (B, H) [, c_prev (B, H)], weights, biases."""

    def t(*shape, scale=1.0):
        return torch.tensor(rng.normal(0, scale, shape))

    states = (t(B, H), t(B, H)) if lstm else (t(B, H),)
    return (t(B, D), *states, t(G * H, D, scale=0.8), t(G * H, H, scale=0.8), t(G * H), t(G * H))


def _lstm_answer(*args: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    return to_plain(rnn.lstm_cell(*args))


def _lstm_mistakes(*tensors: torch.Tensor) -> list[Mistake]:
    x_t, h_prev, c_prev, weight_ih, weight_hh, bias_ih, bias_hh = _np(*tensors)
    args = (x_t, h_prev, c_prev, weight_ih, weight_hh, bias_ih, bias_hh)
    h_t, c_t = lstm_step_np(*args)
    mistakes = [Mistake("you returned (c_t, h_t): return (h_t, c_t), in that order", (c_t, h_t))]
    for order in ("".join(p) for p in itertools.permutations("ifgo")):
        if order != "ifgo":
            mistakes.append(
                Mistake(
                    f"your code reads the four row blocks of the weights as the gates "
                    f"{', '.join(order)}; torch stacks them as i, f, g, o (rows 0:H input gate, "
                    "H:2H forget gate, 2H:3H candidate g, 3H:4H output gate)",
                    lstm_step_np(*args, order=order),
                )
            )
    mistakes.append(
        Mistake(
            "h_t = o_t * tanh(c_t): you left out the tanh",
            lstm_step_np(*args, variation="no-tanh-c"),
        )
    )
    mistakes.append(
        Mistake(
            "the candidate g_t uses tanh, not the sigmoid",
            lstm_step_np(*args, variation="sigmoid-g"),
        )
    )
    return mistakes


def _compare_lstm(want: Expected, got: Any) -> str:
    if not isinstance(got, tuple | list) or len(got) != 2:
        return f"expected a pair (h_t, c_t), got a {type(got).__name__}"
    h_want, c_want = want.value
    B, H = h_want.shape
    shape = f"(B, H) = ({B}, {H})"
    h_problem = compare_arrays(h_want, got[0], "h_t", shape)
    c_problem = compare_arrays(c_want, got[1], "c_t", shape)
    if not (h_problem or c_problem):
        return ""
    if c_problem and compare_arrays(c_want, got[0], "h_t", shape) == "":
        hint = "your h_t is the right c_t: return (h_t, c_t), in that order"
    elif not c_problem:
        hint = "c_t is right, so the gates i, f, g are: look at h_t = o_t * tanh(c_t)"
    elif not h_problem:
        hint = "h_t is right but c_t is not: return c_t = f_t * c_{t-1} + i_t * g_t itself"
    else:
        hint = (
            "c_t is wrong, so look first at c_t = f_t * c_{t-1} + i_t * g_t and the four row "
            "blocks of the weights, in the order i, f, g, o"
        )
    return "\n".join(p for p in (h_problem, c_problem) if p) + "\nhint: " + hint


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
        Case(first, names, layout, label="B = 1, D = 1, H = 1"),
        Case(
            tuple(zero_state),
            names,
            "from a zero state c_t = i_t * g_t (the forget gate has nothing to keep)",
            label="zero state",
        ),
        Case(
            _random_cell_args(rng, 2, 3, 2, 4, lstm=True),
            names,
            "c_t = f_t * c_{t-1} + i_t * g_t, h_t = o_t * tanh(c_t); a batch of B = 2 rows",
            label="B = 2",
        ),
    ]
    rng = np_rng(hidden)
    for _ in range(n_random(hidden)):
        B, D, H = (int(k) for k in rng.integers(1, 6, 3))
        cases.append(Case(_random_cell_args(rng, B, D, H, 4, lstm=True), names, label="random"))
    run_check(
        "lstm_cell",
        lstm_cell,
        with_args(_lstm_answer),
        cases,
        _compare_lstm,
        mistakes=_lstm_mistakes,
    )


def _gru_answer(*args: torch.Tensor) -> np.ndarray:
    return to_plain(rnn.gru_cell(*args))


def _gru_mistakes(*tensors: torch.Tensor) -> list[Mistake]:
    x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh = _np(*tensors)
    args = (x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh)
    mistakes = [
        Mistake(
            "that is the textbook GRU (Cho et al. 2014), n_t = tanh(W_in x_t + b_in + W_hn (r_t * "
            "h_{t-1}) + b_hn). torch's GRU applies r_t to (W_hn h_{t-1} + b_hn), not to "
            "h_{t-1}",
            gru_step_np(*args, variation="textbook"),
        ),
        Mistake(
            "r_t multiplies b_hn too: n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn))",
            gru_step_np(*args, variation="r-not-on-bias"),
        ),
        Mistake(
            "z_t is the share of the *old* state kept: h_t = (1 - z_t) * n_t + z_t * h_{t-1}",
            gru_step_np(*args, variation="z-swapped"),
        ),
    ]
    for order in ("rnz", "zrn", "znr", "nrz", "nzr"):
        mistakes.append(
            Mistake(
                f"your code reads the three row blocks of the weights as the gates "
                f"{', '.join(order)}; torch stacks them as r, z, n (rows 0:H reset, H:2H update, "
                "2H:3H candidate n)",
                gru_step_np(*args, order=order),
            )
        )
    return mistakes


def _compare_gru(want: Expected, got: Any) -> str:
    """:func:`compare_arrays` (the entry that differs most), then torch's gates at that entry,
    to compare with the student's own."""
    B, H = want.value.shape
    problem = compare_arrays(want.value, got, "h_t", f"(B, H) = ({B}, {H}), like h_prev")
    array, _ = as_array(got)
    if not problem or array is None or array.shape != (B, H) or np.isnan(array).any():
        return problem
    b, k = np.unravel_index(np.argmax(np.abs(array - want.value)), (B, H))
    x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh = _np(*want.args)
    gx = np.split(x_t @ weight_ih.T + bias_ih, 3, axis=1)  # r, z, n blocks, each (B, H)
    gh = np.split(h_prev @ weight_hh.T + bias_hh, 3, axis=1)
    r = _sigmoid(gx[0] + gh[0])[b, k]
    z = _sigmoid(gx[1] + gh[1])[b, k]
    n = np.tanh(gx[2] + r * gh[2])[b, k]
    return (
        f"{problem}\nhint: at h_t[{b}, {k}], torch's gates are r = {r:.6g}, z = {z:.6g}, "
        f"n = tanh(W_in x_t + b_in + r * (W_hn h_prev + b_hn)) = {n:.6g}, so h_t = (1 - z) * n "
        f"+ z * h_prev = {want.value[b, k]:.6g}"
    )


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
        Case(_random_cell_args(rng, 1, 1, 1, 3, lstm=False), names, torch_form, "H = 1"),
        Case(
            tuple(zero_state),
            names,
            "from a zero state: h_prev = 0, so W_hn h_{t-1} = 0 but b_hn is not",
            "zero state",
        ),
        Case(_random_cell_args(rng, 2, 3, 2, 3, lstm=False), names, torch_form, "B = 2"),
    ]
    rng = np_rng(hidden)
    for _ in range(n_random(hidden)):
        B, D, H = (int(k) for k in rng.integers(1, 6, 3))
        cases.append(Case(_random_cell_args(rng, B, D, H, 3, lstm=False), names, label="random"))
    run_check(
        "gru_cell",
        gru_cell,
        with_args(_gru_answer),
        cases,
        _compare_gru,
        mistakes=_gru_mistakes,
    )


__all__ = [
    "TASKS",
    "architecture_answer",
    "token_index_answer",
    "check_token_index",
    "check_architecture_for",
    "tasks_of_kind",
    "check_rnn_cell_forward",
    "check_rnn_backward",
    "check_lstm_cell",
    "check_gru_cell",
]
