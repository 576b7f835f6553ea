"""What every topic's check tests assert about its corpus of right and wrong answers (issue 27,
section 2), written once: a right answer passes the visible and the hidden cases; a named mistake
fails the visible cases already (hidden cases add inputs, never kinds of error), with its name and
no other name of the part; a plausible wrong answer fails the visible cases with the input, the
expected answer and what came back, and either its right name or none.
"""

import importlib
import inspect
import pkgutil
import re

import numpy as np
import pytest

import nlpcourse.checks
from nlpcourse.checks import CheckFailed

# Every checks module of the package, found rather than listed (a new chapter's is included the
# day it is added); core holds the machinery, no check of a part. The one walk over the check
# modules that the tests of every check share (test_checks_properties, test_checks_naming, ...).
CHECK_MODULES = [
    importlib.import_module(f"nlpcourse.checks.{info.name}")
    for info in pkgutil.iter_modules(nlpcourse.checks.__path__)
    if info.name != "core"
]
# (module, name) of every check of a part: the functions check_* each module defines
CHECKS = [
    (module, name)
    for module in CHECK_MODULES
    for name, function in inspect.getmembers(module, inspect.isfunction)
    if name.startswith("check_") and function.__module__ == module.__name__
]


def names_by_check(mistakes: list[tuple]) -> dict:
    """{check: the names (message fragments) of its named mistakes} of (check, student, name)."""
    names: dict = {}
    for check, _, name in mistakes:
        names.setdefault(check, []).append(name)
    return names


def _failure(check, student, hidden: bool = False) -> str:
    with np.errstate(divide="ignore", under="ignore", invalid="ignore"):
        with pytest.raises(CheckFailed) as info:
            check(student, hidden=hidden)
    return str(info.value)


def passes_visible_and_hidden(check, student, capsys) -> None:
    check(student)
    check(student, hidden=True)
    assert "cases pass" in capsys.readouterr().out


def named_visible_and_hidden(check, student, name: str, names: dict, likely: bool = True) -> None:
    """``likely=False``: the name may be the compare function's words instead of a mistake's."""
    for hidden in (False, True):
        message = _failure(check, student, hidden)
        pattern = ("(?s)likely mistake.*" if likely else "") + re.escape(name)
        assert re.search(pattern, message), message
        for other in names.get(check, ()):
            assert other == name or other not in message, message


def wrong_with_right_name_or_none(check, student, name: str | None) -> None:
    message = _failure(check, student)
    assert "expected" in message and "got" in message
    if name is None:
        assert "likely mistake" not in message, message
    else:
        assert "likely mistake" in message and name in message, message


class _Captured(Exception):
    """Raised by :func:`captured`'s stand-in for run_check, to stop the check there."""


def captured(module, name: str, hidden: bool) -> list[dict]:
    """What the check ``module.name`` hands to run_check, each time it calls it: ``name``,
    ``reference``, ``cases``, ``compare``, ``mistakes`` and ``same`` (the check runs no case).
    Read the answers of an answer table before calling this (the key refuses while checks run)."""
    from nlpcourse.checks import core

    runs: list[dict] = []

    def capture(label, student, reference, cases, compare=core.compare_numbers, *, mistakes=None,
                same=core.same_answer):  # fmt: skip
        runs.append(
            {"name": label, "reference": reference, "cases": list(cases), "compare": compare,
             "mistakes": mistakes, "same": same}
        )  # fmt: skip
        raise _Captured

    original = module.run_check
    module.run_check = capture
    try:
        getattr(module, name)(lambda *args: None, hidden=hidden)
    except _Captured:
        pass
    finally:
        module.run_check = original
    return runs
