"""Tests of nlpcourse.guard: reference functions stay the real functions, and refuse during a check.

The oracle is what a reader and a submission see: the source the function shows, and whether a
call made in each of the ways a submission could make it (directly, through a saved name, a
closure, a partial, a bound method, a re-executed module) raises inside the switched-off block
and gives the right answer outside it.
"""

import functools
import importlib
import inspect
import sys
import types

import numpy as np
import pytest

import nlpcourse.hmm
import nlpcourse.ngram
from nlpcourse.checks import Case, CheckFailed, run_check
from nlpcourse.checks.ngram import check_mle_prob
from nlpcourse.guard import (
    ReferenceUsedError,
    is_reference,
    reference,
    reference_switched_off,
)


def add_one(x):
    return x + 1


class Base:
    def name(self):
        return "base"


class Child(Base):
    def name(self):  # uses super(): its code has a free variable, __class__
        return "child of " + super().name()


def test_the_decorator_returns_the_function_itself():
    code = add_one.__code__
    assert reference(add_one) is add_one
    assert add_one.__code__ is code and is_reference(add_one)
    assert not hasattr(nlpcourse.hmm.viterbi, "__wrapped__")


def test_source_and_help_show_the_algorithm():
    source = inspect.getsource(nlpcourse.hmm.viterbi)
    assert source.startswith("@reference\ndef viterbi(")
    assert "backptr" in source  # the algorithm's own lines, not a wrapper's
    assert inspect.signature(nlpcourse.hmm.viterbi).parameters.keys() == {
        "log_start",
        "log_trans",
        "log_emit",
    }
    assert "KN" in inspect.getsource(nlpcourse.ngram.kn_bigram_prob)


def test_every_way_of_calling_refuses_and_works_again():
    reference(Child.name)
    saved = add_one  # a name saved before the check
    partial = functools.partial(add_one, 1)

    def closure():
        return saved(1)

    viterbi = nlpcourse.hmm.viterbi
    tables = (np.log([0.5, 0.5]), np.log([[0.9, 0.1], [0.2, 0.8]]), np.log([[0.3, 0.7]]))
    calls = [lambda: add_one(1), lambda: saved(1), closure, partial, lambda: viterbi(*tables)]
    calls.append(Child().name)  # a bound method whose code has a closure cell
    with reference_switched_off():
        for call in calls:
            with pytest.raises(ReferenceUsedError, match="switched off during the check"):
                call()
    assert [add_one(1), saved(1), closure(), partial()] == [2, 2, 2, 2]
    assert Child().name() == "child of base"
    assert viterbi(*tables)[0].tolist() == [1]


def test_the_message_names_the_function():
    with reference_switched_off(), pytest.raises(ReferenceUsedError, match="nlpcourse.hmm.forward"):
        nlpcourse.hmm.forward(np.zeros(1), np.zeros((1, 1)), np.zeros((1, 1)))


def test_nested_blocks_and_errors_restore_the_code():
    with reference_switched_off():
        with reference_switched_off():
            pass
        with pytest.raises(ReferenceUsedError):  # still off: the outer block is open
            add_one(1)
    with pytest.raises(KeyError), reference_switched_off():
        raise KeyError("an error inside the block")
    assert add_one(1) == 2


def test_a_module_reloaded_during_the_check_is_switched_off(tmp_path, monkeypatch):
    (tmp_path / "h1_reloaded_module.py").write_text(
        "from nlpcourse.guard import reference\n\n\n@reference\ndef answer():\n    return 42\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("h1_reloaded_module")
    try:
        with reference_switched_off():
            fresh = importlib.reload(module)
            with pytest.raises(ReferenceUsedError):
                fresh.answer()
        assert fresh.answer() == 42

        def student():  # a submission that re-executes the reference module to get a fresh copy
            return importlib.reload(module).answer()

        with pytest.raises(CheckFailed, match="switched off"):
            run_check("answer", student, lambda: 42, [Case((), ())])
        assert module.answer() == 42
    finally:
        sys.modules.pop("h1_reloaded_module", None)


def test_a_check_gives_nothing_for_calling_the_reference():
    saved = nlpcourse.ngram.mle_prob

    def direct(counts, context, word):
        return nlpcourse.ngram.mle_prob(counts, context, word)

    def through_closure(counts, context, word):
        return saved(counts, context, word)

    for student in (direct, through_closure, nlpcourse.ngram.mle_prob):
        with pytest.raises(CheckFailed, match="switched off"):
            check_mle_prob(student, hidden=True)


def test_only_plain_functions_can_be_marked():
    with pytest.raises(TypeError, match="plain functions"):
        reference(len)


# ------------------------------------------------------------------ issue 40 §2: in one process


def test_the_issues_four_helpers_refuse_during_a_check_and_work_after():
    import torch

    import nlpcourse.parsing
    import nlpcourse.seq2seq
    import nlpcourse.transformer

    counts = nlpcourse.ngram.count_ngrams([["a", "b"]], 2)
    rules = [("S", ("a",), 0.0)]
    calls = [
        lambda: nlpcourse.ngram.kn_prob(counts, ("a",), "b", 3),
        lambda: nlpcourse.parsing._as_pcfg(rules),
        lambda: nlpcourse.seq2seq.align(["a"], ["b"]),
        lambda: nlpcourse.transformer.causal_mask_last(2, 2),
    ]
    pcfg = nlpcourse.parsing._as_pcfg(rules)  # made before the check: its method refuses too
    calls.append(lambda: pcfg.log_likelihoods([["a"]]))
    with reference_switched_off():
        for call in calls:
            with pytest.raises(ReferenceUsedError):
                call()
    assert nlpcourse.seq2seq.align(["a"], ["b"]) == [("a", "b")]
    assert torch.equal(nlpcourse.transformer.causal_mask_last(1, 1), torch.ones(1, 1, dtype=bool))
    assert pcfg.log_likelihoods([["a"]]).tolist() == [0.0]


def test_a_function_added_to_a_loaded_module_is_switched_off_without_listing_it(monkeypatch):
    module = types.ModuleType("nlpcourse.h1_new_chapter")
    exec(  # a chapter module as a contributor adds it: no decorator, a class, a private helper
        "def answer(x):\n    return x + 1\n\n"
        "def _helper(x):\n    return x * 2\n\n"
        "class Model:\n"
        "    def predict(self, x):\n        return _helper(x)\n"
        "    @staticmethod\n    def static(x):\n        return x\n"
        "    @property\n    def size(self):\n        return 3\n",
        vars(module),
    )
    monkeypatch.setitem(sys.modules, module.__name__, module)
    model = module.Model()
    calls = [lambda: module.answer(1), lambda: module._helper(1), lambda: model.predict(1)]
    calls += [lambda: module.Model.static(1), lambda: model.size]
    with reference_switched_off():
        for call in calls:
            with pytest.raises(ReferenceUsedError, match="nlpcourse.h1_new_chapter"):
                call()
    assert [call() for call in calls] == [2, 2, 2, 1, 3]


def test_the_checks_and_the_worked_examples_keep_working_during_a_check():
    from nlpcourse.checks.ngram import TableModel
    from nlpcourse.examples import i_am_nlp

    model = TableModel({(("a",), "b"): 0.5}, "a table")
    with reference_switched_off():
        assert model(("a",), "b") == 0.5
        assert i_am_nlp()[0] == ["I", "am", "NLP"]


def test_a_check_gives_nothing_for_calling_an_unmarked_helper():
    from nlpcourse.checks.ngram import check_kn_bigram_prob

    def kn_bigram_prob(bigram_counts, context, word, vocab_size, d=0.75):
        return nlpcourse.ngram.kn_prob(bigram_counts, context, word, vocab_size, d)

    with pytest.raises(CheckFailed, match="switched off"):
        check_kn_bigram_prob(kn_bigram_prob)
