"""Tests of the exercise checks of 04-rnn (nlpcourse.checks.rnn) and of their answer keys.

Student-style implementations written here (none calls nlpcourse.rnn): right ones, also returned in
other reasonable forms (float32, torch tensors, lists, an extra key), must pass the hidden checks;
each usual mistake must fail with a message naming it; a wrong answer nobody anticipated must fail
with the input, the expected answer and the answer it got. The answer keys of the two concept
questions are checked against an array whose entries name themselves and the chapter's examples.
"""

import numpy as np
import pytest
import torch
from checks_corpus import (
    named_visible_and_hidden,
    names_by_check,
    wrong_with_right_name_or_none,
)

import nlpcourse.checks.rnn as checks
from nlpcourse.checks import CheckFailed
from nlpcourse.checks.rnn import TASKS, architecture_answer, token_index_answer
from nlpcourse.rnn import ARCHITECTURES, LAYOUTS

# ------------------------------------------------------------------ student implementations


def token_index(i, j, layout):
    return (i - 1, j - 1) if layout == "batch-first" else (j - 1, i - 1)


ANSWERS = {task: architecture_answer(task) for task in TASKS}  # read before any check runs


def architecture_for(task):
    return ANSWERS[task]


def rnn_cell_forward(x_t, h_prev, W_xh, W_hh, b_h, tanh=np.tanh):
    return tanh(W_xh @ x_t + W_hh @ h_prev + b_h)


def rnn_backward(x, targets, hs, y_hat, params, recurrence=True):
    grads = {name: np.zeros_like(value) for name, value in params.items()}
    carry = np.zeros(hs.shape[1])
    for t in reversed(range(len(x))):
        do = y_hat[t].copy()
        do[targets[t]] -= 1.0
        grads["W_hy"] += np.outer(do, hs[t + 1])
        grads["b_y"] += do
        delta = (1 - hs[t + 1] ** 2) * (params["W_hy"].T @ do + carry)
        grads["W_hh"] += np.outer(delta, hs[t])
        grads["W_xh"] += np.outer(delta, x[t])
        grads["b_h"] += delta
        carry = params["W_hh"].T @ delta if recurrence else 0.0 * carry
    return grads


def lstm_cell(x_t, h_prev, c_prev, weight_ih, weight_hh, bias_ih, bias_hh, order="ifgo"):
    gates = x_t @ weight_ih.T + bias_ih + h_prev @ weight_hh.T + bias_hh
    blocks = dict(zip(order, gates.chunk(4, dim=1), strict=True))
    i, f, o = (torch.sigmoid(blocks[k]) for k in "ifo")
    c_t = f * c_prev + i * torch.tanh(blocks["g"])
    return o * torch.tanh(c_t), c_t


def gru_cell(x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh, textbook=False):
    wx_r, wx_z, wx_n = (x_t @ weight_ih.T + bias_ih).chunk(3, dim=1)
    W_r, W_z, W_n = weight_hh.chunk(3)
    b_r, b_z, b_n = bias_hh.chunk(3)
    r = torch.sigmoid(wx_r + h_prev @ W_r.T + b_r)
    z = torch.sigmoid(wx_z + h_prev @ W_z.T + b_z)
    if textbook:
        n = torch.tanh(wx_n + (r * h_prev) @ W_n.T + b_n)
    else:
        n = torch.tanh(wx_n + r * (h_prev @ W_n.T + b_n))
    return (1 - z) * n + z * h_prev


@pytest.mark.parametrize(
    "check,student",
    [
        (checks.check_token_index, lambda *a: [np.int64(k) for k in token_index(*a)]),
        (checks.check_architecture_for, lambda task: architecture_for(task).upper()),
        (checks.check_architecture_for, lambda task: architecture_for(task).replace("-", "_")),
        (checks.check_rnn_cell_forward, lambda *a: rnn_cell_forward(*a).astype(np.float32)),
        (checks.check_rnn_cell_forward, lambda *a: rnn_cell_forward(*a).tolist()),
        (
            checks.check_rnn_backward,
            lambda *a: {k: torch.tensor(v) for k, v in rnn_backward(*a).items()} | {"h0": 0},
        ),
        (checks.check_lstm_cell, lambda *a: [t.numpy() for t in lstm_cell(*a)]),
        (checks.check_lstm_cell, lambda *a: tuple(t.float() for t in lstm_cell(*a))),
        (checks.check_gru_cell, lambda *a: gru_cell(*a).numpy()),
        (checks.check_gru_cell, lambda *a: torch.nn.Parameter(gru_cell(*a))),
    ],
)
def test_right_answers_in_other_forms_pass(check, student, capsys):
    check(student)
    check(student, hidden=True)
    assert "pass" in capsys.readouterr().out


# ------------------------------------------------------------------ mistakes named


MISTAKE_CASES = (
    "check,student,message",
    [
        (
            checks.check_token_index,
            lambda i, j, layout: (i, j) if layout == "batch-first" else (j, i),
            "from 1, Python from 0",
        ),
        (
            checks.check_token_index,
            lambda i, j, layout: token_index(i, j, "time-first"),
            "does not depend on the layout",
        ),
        (
            checks.check_token_index,
            lambda i, j, layout: token_index(
                i, j, "time-first" if layout == "batch-first" else "batch-first"
            ),
            "rows and columns are swapped",
        ),
        (
            checks.check_rnn_cell_forward,
            lambda *a: rnn_cell_forward(*a, tanh=lambda v: v),
            "you forgot the tanh",
        ),
        (
            checks.check_rnn_backward,
            lambda *a: rnn_backward(*a, recurrence=False),
            "did you add W_hh^T delta_{t+1}",
        ),
        (checks.check_lstm_cell, lambda *a: lstm_cell(*a, order="ifog"), "as the gates i, f, o, g"),
        (checks.check_lstm_cell, lambda *a: lstm_cell(*a)[::-1], "you returned (c_t, h_t)"),
        (checks.check_gru_cell, lambda *a: gru_cell(*a, textbook=True), "the textbook GRU"),
    ],
)
NAMED = names_by_check(MISTAKE_CASES[1])


@pytest.mark.parametrize(*MISTAKE_CASES)
def test_each_mistake_is_named(check, student, message):
    """On the visible cases (and the hidden ones): named, and given no other name of the part."""
    named_visible_and_hidden(check, student, message, NAMED)


def test_an_unanticipated_wrong_answer_shows_input_expected_and_got():
    with pytest.raises(CheckFailed) as failure:
        checks.check_rnn_cell_forward(lambda x_t, h_prev, *weights: np.full(len(h_prev), 0.25))
    message = str(failure.value)
    assert "case 1 of" in message and "x_t = [1.]" in message and "W_xh = [[0.5]]" in message
    assert "expected: [0.53705" in message and "got:      [0.25]" in message
    assert "h_t[0] differs most: expected 0.5370" in message
    assert (
        "hint: h_t[0] = tanh(a) with a = (W_xh @ x_t)[0] + (W_hh @ h_prev)[0] + b_h[0]" in message
    )
    assert "likely mistake" not in message


def test_bptt_messages_give_a_finite_difference():
    def off_by_a_bit(*args):
        grads = rnn_backward(*args)
        grads["W_xh"] = grads["W_xh"] + 0.01
        return grads

    with pytest.raises(CheckFailed, match="(?s)wrong: \\['W_xh'\\].*finite difference") as failure:
        checks.check_rnn_backward(off_by_a_bit)
    assert "where to look: dW_xh" in str(failure.value)


def test_tensor_and_array_subclasses_are_refused():
    class Sneaky(torch.Tensor):
        pass

    with pytest.raises(CheckFailed, match="it is a Sneaky"):
        checks.check_gru_cell(lambda *a: gru_cell(*a).as_subclass(Sneaky))

    class SneakyArray(np.ndarray):
        pass

    with pytest.raises(CheckFailed, match="it is a SneakyArray"):
        checks.check_rnn_cell_forward(lambda *a: rnn_cell_forward(*a).view(SneakyArray))


# ------------------------------------------------------------------ the answer keys


def test_token_index_answer_finds_the_token_in_both_layouts():
    # the oracle: an array whose entries name themselves, x^(i)<j> for i = 1..B, j = 1..T
    B, T = 3, 5
    X = np.array([[f"x({i})<{j}>" for j in range(1, T + 1)] for i in range(1, B + 1)])  # (B, T)
    time_first = X.T  # (T, B), as torch.nn.RNN takes its input
    for i in range(1, B + 1):
        for j in range(1, T + 1):
            assert X[token_index_answer(i, j, "batch-first")] == f"x({i})<{j}>"
            assert time_first[token_index_answer(i, j, "time-first")] == f"x({i})<{j}>"
    assert set(LAYOUTS) == {"batch-first", "time-first"}


def test_architecture_answers():
    assert set(ANSWERS.values()) == set(ARCHITECTURES)  # each architecture has a task
    # the examples the chapter names, written out here
    assert ANSWERS["sentiment classification"] == "many-to-one"
    assert ANSWERS["part-of-speech tagging"] == "many-to-many"
    assert ANSWERS["machine translation"] == "encoder-decoder"
    assert ANSWERS["speech recognition"] == "encoder-decoder"
    assert ANSWERS["music generation"] == "one-to-many"


# --------------------------------------------- issue 27: plausible wrong answers, right names


def backward_without_output_bias(*args):
    return rnn_backward(*args) | {"b_y": np.zeros_like(args[4]["b_y"])}


def lstm_forget_uses_input(*args):
    h, c = lstm_cell(*args)
    x_t, h_prev, c_prev = args[:3]
    return h, c - c_prev * 0.5  # half the old memory lost


def gru_swapped_z(x_t, h_prev, *params):
    h = gru_cell(x_t, h_prev, *params)
    n_like = h - h_prev  # (1 - z) (n - h_prev)
    return h_prev + n_like * 0.5


SWAP = {"many-to-one": "many-to-many", "many-to-many": "many-to-one"}

WRONG = [  # (check, a plausible wrong answer, the name it must get, or None: expected / got)
    (checks.check_token_index, lambda i, j, layout: (i - 1, j - 1),  # the layout ignored
     "does not depend on the layout"),
    (checks.check_token_index, lambda i, j, layout: (j, i) if layout == "time-first" else (i, j),
     "from 1, Python from 0"),
    (checks.check_token_index, lambda i, j, layout: [i - 1, j - 1][::-1],
     "does not depend on the layout"),
    (checks.check_token_index, lambda i, j, layout: (i, j - 1) if layout == "batch-first"
     else (j - 1, i), None),  # one index from 0, the other from 1
    (checks.check_architecture_for, lambda task: "many-to-many", None),
    (checks.check_architecture_for, lambda task: SWAP.get(ANSWERS[task], ANSWERS[task]), None),
    (checks.check_architecture_for, lambda task: "encoder-decoder", None),
    (checks.check_rnn_cell_forward, lambda x, h, Wx, Wh, b: np.tanh(Wx @ x + Wh @ h) + b, None),
    (checks.check_rnn_cell_forward, lambda x, h, Wx, Wh, b: np.tanh(Wx @ x + b), None),
    (checks.check_rnn_cell_forward, lambda x, h, Wx, Wh, b: np.tanh(Wx @ x + Wh.T @ h + b),
     "you used W_hh.T"),
    (checks.check_rnn_cell_forward, lambda x, h, Wx, Wh, b: np.tanh(Wx @ x + Wh @ h + 2 * b), None),
    (checks.check_rnn_backward, backward_without_output_bias, None),
    (checks.check_rnn_backward, lambda *a: {k: 2 * v for k, v in rnn_backward(*a).items()}, None),
    (checks.check_rnn_backward, lambda *a: {k: -v for k, v in rnn_backward(*a).items()}, None),
    (checks.check_lstm_cell, lstm_forget_uses_input, None),
    (checks.check_lstm_cell, lambda *a: (lstm_cell(*a)[1], lstm_cell(*a)[1]), None),
    (checks.check_lstm_cell, lambda *a: (torch.tanh(lstm_cell(*a)[0]), lstm_cell(*a)[1]), None),
    (checks.check_gru_cell, gru_swapped_z, None),
    (checks.check_gru_cell, lambda x, h, *p: torch.tanh(gru_cell(x, h, *p)), None),
    (checks.check_gru_cell, lambda x, h, *p: gru_cell(x, h * 0, *p), None),
]  # fmt: skip


@pytest.mark.parametrize("check, student, named", WRONG)
def test_plausible_wrong_answers_fail_the_visible_cases_with_the_right_name_or_none(
    check, student, named
):
    wrong_with_right_name_or_none(check, student, named)


# ------------------------------------------- issue 42: architecture_for answers from the book


def _book_rows() -> dict[str, str]:
    """{architecture: the example tasks of its row} of the table in book/rnn.md."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "book" / "rnn.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        label = cells[0].split(",")[0] if cells else ""
        if len(cells) == 3 and label in checks.ARCHITECTURES:
            rows[label] = cells[2]
    return rows


def test_every_task_is_in_the_books_table_under_each_label_it_accepts():
    rows = _book_rows()
    assert set(rows) == set(checks.ARCHITECTURES)
    for task in checks.TASKS:
        right = {ANSWERS[task], checks.ALSO_RIGHT.get(task, ANSWERS[task])}
        segments = [  # (row, what the row says of one task): the tasks are separated by ";"
            (label, part) for label, text in rows.items() for part in text.split(";")
            if task in part.lower()
        ]  # fmt: skip
        named = {label for label, _ in segments}
        framed = {
            other for _, part in segments for other in checks.ARCHITECTURES
            if f"framed as {other}" in part
        }  # fmt: skip
        assert named | framed == right, (task, named, framed)


def test_a_contested_task_is_right_in_both_readings(capsys):
    for task, other in checks.ALSO_RIGHT.items():
        student = {**ANSWERS, task: other}.__getitem__
        checks.check_architecture_for(student)
        checks.check_architecture_for(student, hidden=True)
    assert "cases pass" in capsys.readouterr().out


def test_the_visible_check_grades_one_task_of_each_kind():
    assert {ANSWERS[task] for task in checks.VISIBLE_TASKS} == set(checks.ARCHITECTURES)
    wrong = {**ANSWERS, "machine translation": "many-to-many"}.__getitem__
    with pytest.raises(CheckFailed, match="machine translation"):
        checks.check_architecture_for(wrong)


def test_bptt_with_the_states_off_by_one_is_told_where_to_look_from_what_is_right():
    """Issue 42: hs[t - 1] in dW_hy (db_y right) used to be sent to the one-hot subtraction."""

    def student(x, targets, hs, y_hat, params):
        grads = rnn_backward(x, targets, hs, y_hat, params)
        dW_hy = np.zeros_like(params["W_hy"])
        for t in range(len(x), 0, -1):
            do = y_hat[t - 1].copy()
            do[targets[t - 1]] -= 1
            dW_hy += np.outer(do, hs[t - 1])  # the state before the step
        return {**grads, "W_hy": dW_hy}

    with pytest.raises(CheckFailed) as failed:
        checks.check_rnn_backward(student)
    assert "db_y is right" in str(failed.value), str(failed.value)
    assert "onehot" not in str(failed.value).split("where to look")[1].splitlines()[0]


# ------------------------------------ issue 42 §5: credit per kind of task; issue 43 §1.10: T_y

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def _notebook_cells(folder: str) -> list[dict]:
    import json

    path = ROOT / folder / "04-rnn" / "rnn.ipynb"
    return json.loads(path.read_text())["cells"]


def test_the_kinds_split_the_tasks_and_the_visible_tasks_one_per_kind():
    kinds = {kind: checks.tasks_of_kind(kind) for kind in ARCHITECTURES}
    assert sorted(t for tasks in kinds.values() for t in tasks) == sorted(TASKS)
    for kind, tasks in kinds.items():
        assert all(ANSWERS[t] == kind for t in tasks) and tasks, kind
        assert len([t for t in checks.VISIBLE_TASKS if t in tasks]) == 1, kind
    with pytest.raises(ValueError, match="kind must be one of"):
        checks.tasks_of_kind("many-to-few")


@pytest.mark.parametrize("task", TASKS)
def test_a_wrong_task_costs_the_points_of_its_own_kind_only(task, capsys):
    """One task wrong: the graded (hidden) check of its kind fails, the three others pass."""
    wrong_label = next(a for a in ARCHITECTURES if a not in {ANSWERS[task], *_also(task)})
    student = {**ANSWERS, task: wrong_label}.__getitem__
    for kind in ARCHITECTURES:
        if kind == ANSWERS[task]:
            with pytest.raises(CheckFailed, match=task):
                checks.check_architecture_for(student, hidden=True, kind=kind)
        else:
            checks.check_architecture_for(student, hidden=True, kind=kind)
            checks.check_architecture_for(student, kind=kind)
    assert "cases pass" in capsys.readouterr().out


def _also(task: str) -> set[str]:
    return {checks.ALSO_RIGHT[task]} if task in checks.ALSO_RIGHT else set()


def test_an_unanswered_task_fails_the_visible_check_of_its_kind_only():
    def student(task):
        if task == "spam detection":
            raise KeyError(task)
        return ANSWERS[task]

    with pytest.raises(CheckFailed, match="spam detection"):
        checks.check_architecture_for(student, kind="many-to-one")
    for kind in ("many-to-many", "one-to-many", "encoder-decoder"):
        checks.check_architecture_for(student, kind=kind)


def test_the_notebook_grades_each_kind_in_a_cell_of_its_own():
    """The source notebook has one graded cell per kind, after the solution cell, whose points
    add up to the part's (2), each calling the check of its kind visibly and hidden."""
    cells = _notebook_cells("solutions")
    ids = [c["metadata"].get("nbgrader", {}).get("grade_id") for c in cells]
    start = ids.index("architecture_for")
    tests = []
    for cell in cells[start + 1 :]:
        meta = cell["metadata"].get("nbgrader", {})
        if not meta.get("grade"):
            break
        tests.append((meta["grade_id"], meta["points"], "".join(cell["source"])))
    kinds = []
    for _, _, source in tests:
        visible, hidden = source.split("### BEGIN HIDDEN TESTS")
        (kind,) = {k for k in ARCHITECTURES if f'kind="{k}"' in visible}
        assert f'kind="{kind}", hidden=True' in hidden
        kinds.append(kind)
    assert sorted(kinds) == sorted(ARCHITECTURES)
    assert sum(points for _, points, _ in tests) == 2


def test_the_notebook_and_the_hints_state_the_books_relation_of_T_y_and_T_x():
    """Issue 43 §1.10: the book's table says an encoder-decoder's T_y is not tied to T_x (it may
    equal it); the notebook and the check's hints said "T_y differs from T_x"."""
    book = (ROOT / "book" / "rnn.md").read_text()
    assert "encoder-decoder, $T_y$ not tied to $T_x$" in book
    for folder in ("solutions", "exercises"):
        (part2,) = [
            "".join(c["source"]) for c in _notebook_cells(folder)
            if c["metadata"].get("nbgrader", {}).get("grade_id") == "part2"
        ]  # fmt: skip
        assert "differs from $T_x$" not in part2 and "not tied to $T_x$" in part2, folder
    for task, hint in checks.ARCHITECTURE_HINTS.items():
        assert "differs from T_x" not in hint, task
        if ANSWERS[task] == "encoder-decoder":
            assert "not tied to T_x" in hint, task
