"""Exercise checks: a student's function against the reference, with messages a student can use.

Every graded test cell of an exercise is one call such as ``check_count_ngrams(count_ngrams)``
(visible) and ``check_count_ngrams(count_ngrams, hidden=True)`` (hidden: more, larger, randomised
cases). A check

1. builds its cases, smallest first (hand-picked ones, then random ones from a fixed seed),
2. computes the expected answers with the reference implementation,
3. runs the student's function on each case with the reference switched off
   (:func:`nlpcourse.guard.reference_switched_off`), so calling ``nlpcourse`` instead of doing the
   work fails the check,
4. stops at the first case that fails and raises :class:`CheckFailed` with the input, the expected
   answer, the answer it got, what differs, and a hint; or prints how many cases passed.

The topic modules (:mod:`nlpcourse.checks.ngram`, ...) hold the cases; this module the machinery.
"""

from __future__ import annotations

import copy
import math
import pprint
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nlpcourse.guard import ReferenceUsedError, reference_switched_off


class CheckFailed(AssertionError):
    """A student's function gave a wrong answer (or failed to run) on some case."""


@dataclass
class Case:
    """One input: the arguments (in order, with their names for the message) and a hint."""

    args: tuple
    names: tuple[str, ...]
    hint: str = ""
    label: str = ""
    shown: dict[str, str] = field(default_factory=dict)  # how to show an argument, if not repr


def show(value: Any, width: int = 90) -> str:
    """A short, readable rendering of a value for a message."""
    if isinstance(value, dict) and not isinstance(value, type):
        value = dict(sorted(value.items(), key=lambda kv: repr(kv[0])))
    text = pprint.pformat(value, width=width, compact=True, sort_dicts=False)
    return text if len(text) < 1500 else text[:1500] + " ..."


def compare_numbers(expected: float, got: Any, rel: float = 1e-6, abs_: float = 1e-9) -> str:
    """'' if ``got`` is a number close to ``expected``, else what is wrong."""
    if isinstance(got, np.ndarray) and got.size == 1:
        got = got.item()
    if not isinstance(got, (int, float, np.integer, np.floating)) or isinstance(got, bool):
        return f"expected a number, got a {type(got).__name__}"
    got = float(got)
    if math.isnan(got):
        return "got nan (not a number): look for 0/0 or log of a negative number"
    if math.isinf(expected) or math.isinf(got):
        return "" if expected == got else f"expected {expected!r}, got {got!r}"
    if math.isclose(got, expected, rel_tol=rel, abs_tol=abs_):
        return ""
    return f"expected {expected!r}, got {got!r}"


def compare_counts(expected: dict, got: Any) -> str:
    """'' if ``got`` has the same non-zero counts as ``expected``, else the differences."""
    if not isinstance(got, dict):
        return f"expected a dict or Counter, got a {type(got).__name__}"
    bad_keys = [k for k in got if not isinstance(k, tuple)]
    if bad_keys:
        return (
            f"keys must be tuples of words, like ('<s>', 'the'); got the key {bad_keys[0]!r} "
            f"of type {type(bad_keys[0]).__name__}"
        )
    got = {k: v for k, v in got.items() if v != 0}
    missing = [k for k in expected if k not in got]
    extra = [k for k in got if k not in expected]
    wrong = [k for k in expected if k in got and got[k] != expected[k]]
    lines = []
    if missing:
        lines.append(f"missing {len(missing)} n-gram(s), e.g. {show(missing[:3])}")
    if extra:
        lines.append(f"{len(extra)} n-gram(s) that should not be there, e.g. {show(extra[:3])}")
    for k in wrong[:3]:
        lines.append(f"count of {k!r}: expected {expected[k]}, got {got[k]}")
    return "\n".join(lines)


def run_check(
    name: str,
    student: Callable,
    reference: Callable,
    cases: Sequence[Case],
    compare: Callable[[Any, Any], str] = compare_numbers,
) -> None:
    """Check ``student`` against ``reference`` on ``cases`` (see the module docstring)."""
    if not callable(student):
        raise CheckFailed(f"{name} should be a function, but it is a {type(student).__name__}")
    expected = [reference(*copy.deepcopy(case.args)) for case in cases]
    for i, (case, want) in enumerate(zip(cases, expected, strict=True)):
        args = copy.deepcopy(case.args)  # the student's function may change its inputs
        try:
            with reference_switched_off():
                got = student(*args)
        except NotImplementedError as err:
            raise CheckFailed(
                f"{name} is not written yet: replace `raise NotImplementedError()` in its cell "
                "with your code, run that cell, then run this one again."
            ) from err
        except ReferenceUsedError as err:
            raise CheckFailed(f"{name}: {err}") from None
        except Exception as err:
            raise CheckFailed(
                f"{name} raised {type(err).__name__}: {err}\n"
                f"on case {i + 1} of {len(cases)}{_label(case)}:\n{_inputs(case)}"
                f"(the traceback above shows the line in your code)"
                + (f"\nhint: {case.hint}" if case.hint else "")
            ) from err
        problem = compare(want, got)
        if problem:
            raise CheckFailed(
                f"{name} gives a wrong answer on case {i + 1} of {len(cases)}{_label(case)} "
                f"(cases run smallest first):\n{_inputs(case)}"
                f"expected: {show(want)}\n"
                f"got:      {show(got)}\n"
                f"{problem}" + (f"\nhint: {case.hint}" if case.hint else "")
            )
    print(f"{name}: all {len(cases)} cases pass")


def _label(case: Case) -> str:
    return f" ({case.label})" if case.label else ""


def _inputs(case: Case) -> str:
    lines = [
        f"  {n} = {case.shown.get(n) or show(a)}"
        for n, a in zip(case.names, case.args, strict=True)
    ]
    return "\n".join(lines) + "\n"
