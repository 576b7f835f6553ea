"""Issue 27, section 2: properties of every check of every part of every exercise.

The self-check agrees with the grade on every kind of mistake: each usual mistake a check knows
(its :class:`Mistake` list) that shows on some hidden case, that is, gives an answer other than
the right one there, also shows on some visible case. Hidden cases add inputs, never kinds of
error. The oracle is each mistake's own answer on each case, compared with the right answer by the
check's own ``same``; nothing here is taken from the check's verdicts.

The corpora of right and wrong answers written as students would are in the tests of each topic
(``tests/test_checks_<topic>.py``); this file proves the property over the checks' own mistakes.
"""

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from checks_corpus import CHECK_MODULES, CHECKS, captured

import nlpcourse.checks
from nlpcourse.checks import core

CHAPTERS = {"ngram", "hmm", "parsing", "rnn", "seq2seq", "transformer"}  # the six of issue 27


def test_the_check_tests_share_one_walk_over_the_check_modules():
    """Issue 42: test_checks_naming listed the modules again by hand; now every test of the checks
    takes its modules and checks from checks_corpus, found once."""
    import test_checks_naming

    assert test_checks_naming.CHECKS is CHECKS
    assert not hasattr(test_checks_naming, "MODULES"), "test_checks_naming lists modules again"


def test_every_checks_module_is_covered():
    """The modules are found, not listed: the six chapters' at least, and every file there."""
    names = {m.__name__.rpartition(".")[2] for m in CHECK_MODULES}
    files = {p.stem for p in Path(nlpcourse.checks.__file__).parent.glob("*.py")}
    assert names == files - {"__init__", "core"} and CHAPTERS <= names


def _wrong_answers(run: dict) -> Iterator[tuple[Any, Any, Any, list]]:
    """``(right, answer, mistake, mistakes)`` for each case of ``run`` (in order) and each of its
    mistakes whose plain answer differs from the right one there."""
    if run["mistakes"] is None:
        return
    for case in run["cases"]:
        args = pickle.loads(pickle.dumps(case.args))
        right = core.to_plain(core.unwrap(run["reference"](*args)))
        mistakes = list(run["mistakes"](*args))
        for mistake in mistakes:
            if mistake.answer is None:
                continue
            try:
                answer = core.to_plain(mistake.answer)
            except core.NotPlainAnswer:
                continue
            if not run["same"](right, answer):
                yield right, answer, mistake, mistakes


def _kinds_shown(run: dict) -> set[str]:
    """The mistakes whose answer differs from the right one on at least one case."""
    return {mistake.what for _, _, mistake, _ in _wrong_answers(run)}


def test_every_check_of_every_part_is_here():
    assert len(CHECKS) == 6 + 5 + 6 + 6 + 6 + 6, [name for _, name in CHECKS]


@pytest.mark.parametrize("module, name", CHECKS, ids=[name for _, name in CHECKS])
def test_the_visible_cases_show_every_kind_of_mistake_the_hidden_ones_show(module, name):
    visible = set().union(*map(_kinds_shown, captured(module, name, False)))
    hidden = set().union(*map(_kinds_shown, captured(module, name, True)))
    assert hidden <= visible, f"{name}: only the hidden cases show {sorted(hidden - visible)}"


@pytest.mark.parametrize("module, name", CHECKS, ids=[name for _, name in CHECKS])
def test_every_case_is_valid_and_every_case_label_is_unique_enough(module, name):
    """Cases are validated when made (issue 31): a check builds all its cases without error, and
    each case's names match its arguments (Case refuses otherwise)."""
    for hidden in (False, True):
        for run in captured(module, name, hidden):
            assert run["cases"] and all(isinstance(c, core.Case) for c in run["cases"])


def _first_names(run: dict) -> dict[str, list[str]]:
    """For each mistake, the name a student who makes it everywhere is given: on the first case
    where its answer is wrong, the first mistake whose answer that is (what run_check names)."""
    names: dict[str, list[str]] = {}
    for right, answer, mistake, mistakes in _wrong_answers(run):
        if mistake.what not in names:
            named = core.name_mistakes(right, answer, mistakes, run["same"])
            names[mistake.what] = [m.what for m in named]
    return names


@pytest.mark.parametrize("module, name", CHECKS, ids=[name for _, name in CHECKS])
def test_each_usual_mistake_is_given_its_own_name_by_the_visible_cases(module, name):
    """A student who makes one of the mistakes a check knows is told that mistake on the first
    case they fail (with any other mistake whose answer is the same there), never only another."""
    for run in captured(module, name, False):
        if run["mistakes"] is None:
            continue
        for what, named in _first_names(run).items():
            assert what in named, f"{name}: the mistake {what!r} is named {named!r}"
