"""Tests of nlpcourse.checks.core: plain answers, the tolerance policy, and the one caller.

Oracles: the types and values written out here; a grader's proxy built here that runs the
student's function in another process and passes plain data through a pipe, as the design's
sandboxed grader will (the check must give the same verdicts through it).
"""

import collections
import decimal
import fractions
import math
import multiprocessing
import pickle
import sys

import numpy as np
import pytest
import torch

import nlpcourse.checks.core as core
import nlpcourse.ngram
from nlpcourse.checks import (
    ATOL,
    RTOL,
    Case,
    CheckFailed,
    NotPlainAnswer,
    answer_table,
    compare_counts,
    compare_numbers,
    run_check,
    to_plain,
    use_caller,
)
from nlpcourse.checks.ngram import check_mle_prob

Pair = collections.namedtuple("Pair", "a b")


# ------------------------------------------------------------------ plain answers


@pytest.mark.parametrize(
    "answer,plain",
    [
        (collections.Counter({("a",): 2}), {("a",): 2}),
        (collections.defaultdict(int, {("a",): 2}), {("a",): 2}),
        (collections.OrderedDict(x=1.5), {"x": 1.5}),
        (Pair(np.int64(1), np.float32(0.5)), (1, 0.5)),
        (fractions.Fraction(1, 4), 0.25),
        (decimal.Decimal("0.5"), 0.5),
        (np.bool_(True), True),
        (range(3), [0, 1, 2]),
        ({np.str_("w"): [np.int32(3)]}, {"w": [3]}),
    ],
)
def test_reasonable_forms_become_exact_builtins(answer, plain):
    got = to_plain(answer)
    assert got == plain and type(got) is type(plain)
    if isinstance(got, dict):
        assert all(type(k) is type(p) for k, p in zip(got, plain, strict=True))


def test_arrays_and_tensors_become_new_plain_arrays():
    array = np.arange(3.0, dtype=np.float32)
    got = to_plain(array)
    array[0] = 99.0  # changing the student's array afterwards changes nothing
    assert type(got) is np.ndarray and got.dtype == np.float32 and got.tolist() == [0, 1, 2]
    tensor = torch.arange(3, dtype=torch.float64, requires_grad=True) * 2
    assert to_plain(tensor).tolist() == [0.0, 2.0, 4.0]
    assert to_plain(torch.ones(2, dtype=torch.bfloat16)).dtype == np.float32
    assert to_plain(np.array([1, fractions.Fraction(1, 2)], dtype=object)) == [1, 0.5]


class MyFloat(float):
    pass


class MyDict(dict):
    pass


class HasArray:
    def __array__(self, dtype=None, copy=None):
        return np.zeros(2)


@pytest.mark.parametrize(
    "answer,message",
    [
        (MyFloat(0.5), "MyFloat, a subclass of float"),
        (MyDict(), "MyDict, a subclass of dict"),
        ([MyFloat(1.0)], "subclass of float"),
        (HasArray(), "it is a HasArray"),
        ((x for x in [1]), "it is a generator"),
    ],
)
def test_other_types_are_refused_with_a_message(answer, message):
    with pytest.raises(NotPlainAnswer, match=message):
        to_plain(answer)


# ------------------------------------------------------------------ one tolerance policy


def test_the_tolerance_policy():
    assert (RTOL, ATOL) == (1e-5, 1e-7)
    assert compare_numbers(1.0, 1.0 + 0.9e-5) == ""
    assert compare_numbers(1.0, 1.0 + 2e-5) != ""
    assert compare_numbers(0.0, 0.9e-7) == "" and compare_numbers(0.0, 2e-7) != ""
    assert compare_numbers(-math.inf, -math.inf) == ""
    assert compare_numbers(-5.0, -math.inf) != "" and compare_numbers(math.inf, 1e308) != ""
    assert "nan" in compare_numbers(1.0, math.nan)
    assert "expected a number" in compare_numbers(1.0, True)
    assert compare_numbers(0.25, np.float32(0.25)) == ""


def test_counts_are_whole_numbers():
    want = {("a",): 2, ("</s>",): 1}
    assert compare_counts(want, {("a",): 2.0, ("</s>",): np.int64(1), ("b",): 0}) == ""
    assert "whole number" in compare_counts(want, {("a",): 2.5, ("</s>",): 1})
    assert "whole number" in compare_counts(want, {("a",): 2, ("</s>",): True})
    assert "count of ('a',): expected 2, got 3" in compare_counts(want, {("a",): 3, ("</s>",): 1})


def test_answer_tables():
    table = answer_table({("spam",): "many-to-one"}, "architecture")
    assert table("spam") == "many-to-one"
    with pytest.raises(KeyError, match="no architecture for"):
        table("ham")


def test_the_student_cannot_change_the_inputs_of_the_expected_answer():
    def clears_its_input(counts, context, word):
        answer = nlpcourse_free_mle(counts, context, word)
        counts.clear()  # the expected answer comes from a copy made before the call
        return answer

    check_mle_prob(clears_its_input, hidden=True)


def nlpcourse_free_mle(counts, context, word):
    total = sum(c for key, c in counts.items() if key[:-1] == tuple(context))
    return counts.get(tuple(context) + (word,), 0) / total if total else 0.0


# ------------------------------------------------------------------ the one caller


def _run_in_worker(connection, function, args):
    try:
        connection.send(("answer", core.call_in_process(function, args)))
    except BaseException as err:  # sent back as its type name and message
        connection.send(("error", (type(err).__name__, str(err))))


class WorkerError(Exception):
    pass


def through_a_pipe(function, args):
    """The grader's proxy: the function runs in another process; only plain data comes back."""
    context = multiprocessing.get_context("fork")
    here, there = context.Pipe()
    worker = context.Process(
        target=_run_in_worker, args=(there, function, pickle.loads(pickle.dumps(args)))
    )
    worker.start()
    kind, value = here.recv()
    worker.join()
    if kind == "error":
        name, message = value
        error = {
            "ReferenceUsedError": core.ReferenceUsedError,
            "NotImplementedError": NotImplementedError,
        }
        raise error.get(name, WorkerError)(message)
    return value


def right_answer(counts, context, word):
    return nlpcourse_free_mle(counts, context, word)


def calls_the_reference(counts, context, word):
    return nlpcourse.ngram.mle_prob(counts, context, word)


def breaks_the_checker(counts, context, word):
    core.compare_numbers = lambda *args, **kwargs: ""  # in its own process only
    return 0.5


def test_a_proxy_can_call_the_student_through_a_pipe(capsys):
    with use_caller(through_a_pipe):
        check_mle_prob(right_answer)
        assert "all 9 cases pass" in capsys.readouterr().out
        with pytest.raises(CheckFailed, match="switched off"):
            check_mle_prob(calls_the_reference)
        with pytest.raises(CheckFailed, match="expected 0.666"):
            check_mle_prob(breaks_the_checker)  # what it does to its interpreter changes nothing
        with pytest.raises(CheckFailed, match="raised WorkerError"):
            run_check("f", lambda: 1 / 0, lambda: 1, [Case((), ())])


def test_a_submission_cannot_drop_or_change_the_cases_to_come():
    calls = []

    def tampers(counts, context, word):
        """Right on the first case only; then it empties the list of cases and makes the cases
        left trivial, which a checker reading that list afterwards would not notice."""
        calls.append(1)
        frame = sys._getframe(1)
        while frame is not None:
            for value in list(frame.f_locals.values()):
                if isinstance(value, list) and value and isinstance(value[0], Case):
                    for case in value:
                        object.__setattr__(case, "args", ({}, ("zebra",), "I"))
                    value.clear()
            frame = frame.f_back
        return nlpcourse_free_mle(counts, context, word) if len(calls) == 1 else 0.0

    with pytest.raises(CheckFailed, match="case 2 of 9"):
        check_mle_prob(tampers)


# ------------------------------------------------------------------ cases and inputs


def test_a_case_whose_names_do_not_match_its_arguments_is_refused_when_made():
    with pytest.raises(ValueError, match="one name per argument"):
        Case((1, 2), ("a",))
    with pytest.raises(ValueError, match="one name per argument"):
        Case([1], ("a",))  # args must be a tuple
    with pytest.raises(ValueError, match="shown names no argument"):
        Case((1,), ("a",), shown={"b": "2"})


def test_inputs_are_shown_as_the_statement_writes_them():
    case = Case(
        (torch.tensor([[True, True, False]]), torch.ones(2, dtype=torch.float64)), ("m", "x")
    )
    text = core._inputs(case)
    assert "True,  True, False" in text and "1., 1., 0." not in text
    assert "tensor of shape (1, 3)" in text and "tensor of shape (2,)" in text


def test_compare_numbers_has_one_tolerance_policy():
    import inspect

    assert list(inspect.signature(compare_numbers).parameters) == ["expected", "got"]


# ------------------------------------------------- issue 42: impossible values get a sanity message


def test_impossible_values_get_a_sanity_message():
    import nlpcourse.checks.hmm as hmm_checks
    import nlpcourse.checks.parsing as parsing_checks
    import nlpcourse.checks.seq2seq as s2s_checks
    from nlpcourse.checks import CheckFailed, compare_counts

    with pytest.raises(CheckFailed, match="cannot be above 0"):
        hmm_checks.check_forward(lambda s, a, e: 0.5)
    with pytest.raises(CheckFailed, match="cannot be above 0"):
        parsing_checks.check_inside(lambda rules, words: 1.5)
    with pytest.raises(CheckFailed, match="must sum to 1"):
        s2s_checks.check_masked_softmax(lambda scores, mask: scores.exp())
    assert "cannot be negative" in compare_counts({("a",): 1}, {("a",): -1})
    assert "cannot be negative" not in compare_counts({("a",): 1}, {("a",): 2})
