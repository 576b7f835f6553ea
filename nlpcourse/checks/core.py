"""The checking framework of the exercises: cases, expected answers, known mistakes, comparisons.

Every graded test cell of an exercise is one call such as ``check_viterbi(viterbi)`` (visible) or
``check_viterbi(viterbi, hidden=True)`` (hidden: more and larger random cases). A topic module
(:mod:`nlpcourse.checks.ngram`, ``.hmm``, ``.rnn``, and the ones to come) holds only its cases, its
expected answers and its known mistakes, and hands them to :func:`run_check`, which does the rest
the same way for every exercise. The API, in the order a check uses it:

**Cases.** A :class:`Case` is one input: ``args`` (in order), their ``names`` (for the message), a
``hint`` about its input (shown when the student's function raises on it: what the input holds
that the code must handle), a short ``label`` and, optionally, ``shown`` (how to print an argument
too large to print). Cases run smallest first: hand-picked ones (worked examples of the
book, edge cases), then random ones. One case budget for every exercise: :func:`n_random` random
cases (``VISIBLE_RANDOM`` visible, ``HIDDEN_RANDOM`` hidden) drawn from :func:`py_rng` or
:func:`np_rng`, seeded ``1`` (visible) or ``2`` (hidden) so a message names the same case every
time.

**Expected answers.** ``reference(*args)`` gives the right answer of a case: a function of the
package (marked :func:`nlpcourse.guard.reference`), an oracle of :mod:`nlpcourse.testing` (brute
force), or, where a part has no algorithm, an :func:`answer_table`. It may return the answer itself
or an :class:`Expected` (the answer with the arguments, for a compare function that needs them;
:func:`with_args` makes such a reference of any function).
:func:`run_check` computes it *after* the student's function has returned, from a copy of the
arguments made before the call (pickled bytes, which nothing can change), and drops it before the
next case: while the student's code runs, the expected answer does not exist yet, so it cannot be
read from the checker's frames (``sys._getframe(2).f_locals``) or anywhere else.

**Calling the student.** The student's function is called in one place, :func:`call_student`: with
the reference switched off (:func:`nlpcourse.guard.reference_switched_off`), it calls the function
and converts what it returned with :func:`to_plain`, inside the switched-off block, to exact
builtins and plain numpy arrays. Whatever the comparison does later runs no code of the student's:
an answer object whose ``__eq__``, ``__float__``, ``items`` or ``__array__`` computes the reference
answer when compared gets no further than the conversion, where the reference refuses. Subclasses
the student defines (of ``float``, ``dict``, ``np.ndarray``, ``torch.Tensor``, ...) are refused
with a message asking for a plain value. The sandboxed class grader (``autograder/sandbox.py``)
replaces the caller with :func:`use_caller`: its proxy calls the function in a sandboxed worker
through a pipe with plain data (pickled arguments in, the :func:`to_plain` answer out, an
exception as its type name and message), and nothing else in a check changes. In one process, a
submission can still rewrite the checker itself (replace a function of this module); through the
proxy, what it does to its own interpreter changes nothing (``tests/test_checks_core.py`` shows
both, ``tests/test_sandbox.py`` the sandboxed grader).

**Any reasonable correct form is accepted.** :func:`to_plain` turns ``dict``, ``Counter``,
``defaultdict`` and ``OrderedDict`` into ``dict``; lists, tuples and named tuples into lists and
tuples; numpy scalars into ``int``/``float``/``bool``; ``Fraction`` and ``Decimal`` into ``float``;
numpy arrays (any dtype, float32 included) into plain arrays; torch tensors (``torch.Tensor``,
``nn.Parameter``) into numpy arrays of the same dtype. The compare functions then read sequences as
arrays where numbers are asked for, so a list of floats, a float32 array and a float64 tensor all
pass where one answer is right.

**One tolerance policy.** Two numbers agree when ``|got - expected| <= ATOL + RTOL * |expected|``
(``RTOL = 1e-5``, ``ATOL = 1e-7``: loose enough for float32 arithmetic, which is never the lesson
here, and far tighter than any mistake the checks know), ``inf`` and ``-inf`` only equal
themselves, and ``nan`` is never right. Integers, labels, paths and n-gram keys compare exactly.
Counts must be whole numbers: ``int`` or ``numpy`` integers, or floats with a whole value (``2.0``
from ``defaultdict(float)``); ``2.5``, ``-1`` or ``True`` is not a count. Impossible values get a
sanity message of their own: a log probability above 0 (:func:`impossible_log_probability`), a
distribution with a negative entry or not summing to 1 (:func:`impossible_distribution`).
Attention weights that leak onto a masked position get a hint of their own
(:func:`masked_weight`). Compare functions: :func:`compare_numbers`, :func:`compare_arrays`,
:func:`compare_counts`,
:func:`compare_exact`, :func:`compare_scores` (a dict of numbers with given keys); each returns
``""`` when the answer is right, else what is wrong, in words.

**Known mistakes, in one form.** A check may pass ``mistakes=``: a function of the case's
arguments that returns :class:`Mistake` objects, each the answer the usual mistake gives on this
case (computed by running the mistaken computation) and what the mistake is. When an answer is
wrong, the first mistake whose answer equals it (:func:`same_answer`, the tolerance above; a check
whose answers are dicts that a student may extend passes ``same=same_on_keys``) and differs from
the right one is named in the message (``likely mistake: ...``) in place of the case's
hint: the message is about what the answer shows, not about what the case was meant to test.
A mistake is named only when it explains every answer of the student's: its answer is the
student's on every case of the check where it has one (:func:`confirmed_mistakes` calls the
student's function on each case again), so a mistake that coincides with another answer on the
failing case alone is not named as the student's; the message then says that the answer equals
what that mistake gives on this case.

**Hints follow the answer, not the case** (issue 42). A wrong answer is never shown the case's
hint, which speaks of what the case was written to test and may be about another mistake than the
student's: what differs comes from the compare function, which names the key, cell, row or entry
that differs and may end with a ``hint:`` line drawn from the answer itself (which table is wrong,
whether a masked position got weight, the parts of the right answer of a single number). The case's
hint is shown when the student's function raises on the case, where it says what the input holds.

**The message.** A wrong answer raises :class:`CheckFailed` with the case (its number, label and
inputs), the expected answer, the answer it got, what differs, and the named mistake or the case's
hint. A function that raises gets its exception's type and message and the case. Calling the
reference gets :class:`nlpcourse.guard.ReferenceUsedError`'s message. All cases right prints
``name: all N cases pass``.

**Answer tables.** :func:`answer_table` makes a ``reference`` from a dict ``{args: answer}`` for a
part that has no algorithm (which architecture fits a task); the answer keys live with the checks,
not in the teaching modules. A key is data that a submission could read; written inside a function
marked :func:`nlpcourse.guard.reference` (as :func:`nlpcourse.checks.rnn.architecture_answer` is),
it at least refuses to run while the student's function is checked. What a single process cannot
prevent is listed in :mod:`nlpcourse.guard`.
"""

from __future__ import annotations

import collections
import decimal
import fractions
import math
import os
import pickle
import pprint
import random
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nlpcourse.guard import ReferenceUsedError, reference_switched_off

RTOL = 1e-5  # relative tolerance of every comparison of numbers
ATOL = 1e-7  # absolute tolerance of every comparison of numbers
VISIBLE_RANDOM = 3  # random cases of a visible check
HIDDEN_RANDOM = 25  # random cases of a hidden check
SEEDS = {False: 1, True: 2}  # the random cases' seed, visible and hidden


class CheckFailed(AssertionError):
    """A student's function gave a wrong answer (or failed to run) on some case.

    In Jupyter the student sees the message with their own frames only: IPython calls
    ``_render_traceback_`` (its hook for an exception that formats itself) and gets its usual
    traceback of the student's cells, without the checker's frames (the files of this package)."""

    def _render_traceback_(self) -> list[str]:
        from IPython import get_ipython  # only IPython calls this hook

        shell: Any = get_ipython()
        cause = self.__cause__  # the student's own exception, if their function raised
        if cause is not None:
            cause.__traceback__ = _without_checker_frames(cause.__traceback__)
        self.__traceback__ = _without_checker_frames(self.__traceback__)
        return shell.InteractiveTB.structured_traceback(type(self), self, self.__traceback__)


class NotPlainAnswer(TypeError):
    """An answer of a type the checks do not convert (see :func:`to_plain`)."""


_CHECKER = os.path.dirname(os.path.abspath(__file__)) + os.sep  # this package's files


def _without_checker_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback ``tb`` without the frames of this package's files (the checker's)."""
    kept = []
    while tb is not None:
        if not os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_CHECKER):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for entry in reversed(kept):
        out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out


# ------------------------------------------------------------------------------ cases


@dataclass(frozen=True)
class Case:
    """One input: the arguments (in order, with their names for the message) and a hint about
    the input (shown when the student's function raises on it, never for a wrong answer).

    A case whose ``names`` do not match its ``args`` one for one is refused when it is made (a
    mistake of the check's author, not of the student)."""

    args: tuple
    names: tuple[str, ...]
    hint: str = ""
    label: str = ""
    shown: dict[str, str] = field(default_factory=dict)  # how to show an argument, if not repr

    def __post_init__(self) -> None:
        if not isinstance(self.args, tuple) or len(self.args) != len(self.names):
            raise ValueError(
                f"a Case needs one name per argument: {len(self.names)} names {self.names} for "
                f"{len(self.args) if isinstance(self.args, tuple) else 'non-tuple'} arguments"
            )
        unknown = set(self.shown) - set(self.names)
        if unknown:
            raise ValueError(f"Case.shown names no argument of the case: {sorted(unknown)}")


def n_random(hidden: bool) -> int:
    """How many random cases a check draws: the one case budget of every exercise."""
    return HIDDEN_RANDOM if hidden else VISIBLE_RANDOM


def py_rng(hidden: bool) -> random.Random:
    """The random cases' generator (Python's ``random``), seeded for visible or hidden."""
    return random.Random(SEEDS[bool(hidden)])


def np_rng(hidden: bool) -> np.random.Generator:
    """The random cases' generator (numpy), seeded for visible or hidden."""
    return np.random.default_rng(SEEDS[bool(hidden)])


@dataclass(frozen=True)
class Expected:
    """The right answer of a case with the arguments it was computed from; shown as the answer."""

    value: Any
    args: tuple

    def __repr__(self) -> str:
        return show(self.value)


@dataclass(frozen=True)
class Mistake:
    """A usual mistake: what it is (and how to fix it), and the answer it gives on one case."""

    what: str
    answer: Any
    key: str = ""  # the same mistake on every case, where ``what`` names a case's values

    @property
    def identity(self) -> str:
        """What makes two cases' mistakes the same one: ``key``, else ``what``."""
        return self.key or self.what


def with_args(reference: Callable[..., Any]) -> Callable[..., Expected]:
    """A ``reference`` whose answer comes as :class:`Expected`, with the case's arguments."""

    def expected(*args: Any) -> Expected:
        return Expected(reference(*args), args)

    return expected


def answer_table(table: Mapping[tuple, Any], what: str = "answer") -> Callable[..., Any]:
    """A ``reference`` for :func:`run_check` that looks the arguments up in ``table``."""
    keys = {tuple(k): v for k, v in table.items()}

    def look_up(*args: Any) -> Any:
        if args not in keys:
            raise KeyError(f"no {what} for {args!r} in the answer table")
        return keys[args]

    return look_up


# ------------------------------------------------------------------------------ plain answers


def _torch_types() -> tuple[type, ...]:
    torch = sys.modules.get("torch")  # an answer can only be a tensor if torch was imported
    return (torch.Tensor, torch.nn.Parameter) if torch is not None else ()


_NAMES = {list: "list", tuple: "tuple", dict: "dict", set: "set", frozenset: "frozenset"}
_DICTS = (dict, collections.Counter, collections.defaultdict, collections.OrderedDict)
_LEAVES = (type(None), bool, int, float, complex, str, bytes)


def to_plain(value: Any, _depth: int = 0) -> Any:
    """``value`` as exact builtins and plain numpy arrays, or :class:`NotPlainAnswer`.

    Runs inside the switched-off block (see the module docstring). The result is new: nothing the
    student's code holds can change it later, and comparing it runs no code of the student's.
    Subclasses defined outside Python, numpy and torch are refused, not converted."""
    if _depth > 40:
        raise NotPlainAnswer("the answer is nested too deeply (does it contain itself?)")
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind in (fractions.Fraction, decimal.Decimal):
        return float(value)
    if isinstance(value, np.generic) and kind.__module__ == "numpy":
        return to_plain(value.item(), _depth + 1)  # numpy scalars: int, float, bool, str
    if isinstance(value, np.ndarray) and kind.__module__.startswith("numpy"):
        array = np.array(value, copy=True, subok=False)
        if array.dtype.kind in "biufcUS":
            return array
        return to_plain(array.tolist(), _depth + 1)  # an object array: its items one by one
    if kind in _torch_types():
        tensor: Any = value.detach().cpu()
        if not tensor.dtype.is_floating_point or tensor.element_size() >= 4:
            return np.array(tensor.numpy(), copy=True)
        return np.array(tensor.float().numpy(), copy=True)  # float16, bfloat16
    if kind in _DICTS:
        return {to_plain(k, _depth + 1): to_plain(v, _depth + 1) for k, v in dict.items(value)}
    if kind in (list, tuple, set, frozenset):
        return kind(to_plain(v, _depth + 1) for v in kind.__iter__(value))
    if kind is range:
        return list(value)
    if kind.__bases__ == (tuple,) and isinstance(getattr(kind, "_fields", None), tuple):
        return tuple(to_plain(v, _depth + 1) for v in tuple.__iter__(value))  # a named tuple
    plain_base = next(
        (base for base in kind.__mro__[1:] if base in _NAMES or base in _LEAVES), None
    )
    if plain_base is not None:
        raise NotPlainAnswer(
            f"it is a {kind.__name__}, a subclass of {plain_base.__name__} that your code defines: "
            f"return a plain {plain_base.__name__} (the checks do not run code of the answer)"
        )
    raise NotPlainAnswer(
        f"it is a {kind.__name__}; return plain Python values (numbers, strings, lists, tuples, "
        "dicts) or numpy arrays / torch tensors, as the exercise asks"
    )


def call_in_process(function: Callable, args: tuple) -> Any:
    """Call the student's ``function(*args)`` in this process with the reference switched off, and
    convert the answer with :func:`to_plain` before switching it on again."""
    with reference_switched_off():
        return to_plain(function(*args))


_caller: list[Callable[[Callable, tuple], Any]] = [call_in_process]


def call_student(function: Callable, args: tuple) -> Any:
    """The one place where a check calls a student's function (see :func:`use_caller`)."""
    return to_plain(_caller[-1](function, args))  # again: a proxy's answer is checked here too


@contextmanager
def use_caller(caller: Callable[[Callable, tuple], Any]) -> Iterator[None]:
    """Inside this block checks call students' functions through ``caller(function, args)``.

    A sandboxed grader passes a proxy that runs ``function`` (a handle to code in a worker) on the
    pickled ``args`` there, converts the answer with :func:`to_plain` there, and returns it; an
    exception raised there is raised here again with the same type name and message."""
    _caller.append(caller)
    try:
        yield
    finally:
        _caller.pop()


# ------------------------------------------------------------------------------ showing


def unwrap(value: Any) -> Any:
    """The answer itself: an :class:`Expected`'s value, any other value unchanged."""
    return value.value if isinstance(value, Expected) else value


def show(value: Any, width: int = 90) -> str:
    """A short, readable rendering of a value for a message (arrays with 6 digits, booleans as
    True/False)."""
    if isinstance(value, _torch_types()):
        tensor: Any = value
        tensor = tensor.detach().cpu()
        value = tensor.double().numpy() if tensor.dtype.is_floating_point else tensor.numpy()
    if isinstance(value, np.ndarray):
        text = np.array2string(value, precision=6, suppress_small=True, separator=", ")
    elif isinstance(value, tuple) and any(isinstance(v, np.ndarray) for v in value):
        text = "(" + ",\n ".join(show(v, width).replace("\n", "\n ") for v in value) + ")"
    elif isinstance(value, Mapping) and any(isinstance(v, np.ndarray) for v in value.values()):
        items = [
            f"{k!r}: " + show(v, width).replace("\n", "\n" + " " * (len(repr(k)) + 3))
            for k, v in value.items()
        ]
        text = "{" + ",\n ".join(items) + "}"
    else:
        if isinstance(value, dict):
            value = dict(sorted(value.items(), key=lambda kv: repr(kv[0])))
        text = pprint.pformat(value, width=width, compact=True, sort_dicts=False)
    return text if len(text) < 1500 else text[:1500] + " ..."


# ------------------------------------------------------------------------------ comparisons


def _number(got: Any) -> float | None:
    """``got`` as a float if it is one number (not a bool), else None."""
    if isinstance(got, np.ndarray) and got.size == 1 and got.dtype.kind in "iuf":
        got = got.item()
    if isinstance(got, bool) or not isinstance(got, int | float | np.integer | np.floating):
        return None
    return float(got)


def close(expected: Any, got: Any) -> bool:
    """Whether two numbers or arrays agree under the tolerance policy (``-inf`` equals ``-inf``)."""
    try:
        a = np.asarray(expected, dtype=float)
        b = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        return False
    if a.shape != b.shape or np.isnan(b).any():
        return False
    return bool(np.allclose(b, a, rtol=RTOL, atol=ATOL, equal_nan=False))


def compare_numbers(expected: float, got: Any) -> str:
    """'' if ``got`` is a number close to ``expected`` (the one policy, ``RTOL`` and ``ATOL``),
    else what is wrong."""
    number = _number(got)
    if number is None:
        return f"expected a number, got {_kind(got)}"
    if math.isnan(number):
        return "got nan (not a number): look for 0/0, inf - inf or log of a negative number"
    if math.isinf(expected) or math.isinf(number):
        return "" if expected == number else f"expected {expected!r}, got {number!r}"
    if abs(number - expected) <= ATOL + RTOL * abs(expected):
        return ""
    return f"expected {expected!r}, got {number!r}"


def impossible_log_probability(got: Any, name: str = "a log probability") -> str:
    """A sanity message when ``got`` is a number above 0 where a log probability belongs (a
    probability is at most 1, so its log is at most 0), else ''."""
    number = _number(got)
    if number is None or not number > 1e-9:
        return ""
    return (
        f"\n{name} cannot be above 0 (a probability is at most 1), and yours is {number!r}: "
        "did a sum start at 0.0 where log(0) = -inf belongs, or add probabilities where logs go?"
    )


def impossible_distribution(got: Any, axis: int = -1, name: str = "row") -> str:
    """A sanity message when ``got`` (an array of probabilities) has a negative entry or a
    ``name`` along ``axis`` that does not sum to 1, else ''."""
    array, _ = as_array(got)
    if array is None or array.ndim == 0 or not np.isfinite(array).all():
        return ""
    if (array < -ATOL).any():
        return "\na probability cannot be negative, and yours has " + repr(float(array.min()))
    sums = array.sum(axis=axis)
    if np.allclose(sums, 1.0, rtol=RTOL, atol=1e-6):
        return ""
    return f"\neach {name} is a distribution and must sum to 1; yours sum to " + show(
        np.round(sums, 4).reshape(-1)[:8].tolist()
    )


def masked_weight(got: Any, mask: Any, name: str = "weights") -> str:
    """A hint when attention ``got`` (weights, shape ``(..., T_k)``) gives weight to a position
    its ``mask`` (booleans, True = may attend, broadcast to the weights' shape) rules out, or has
    nan where every position of a row is masked wrongly; else ''."""
    array, _ = as_array(got)
    if array is None or mask is None:
        return ""
    allowed = np.asarray(to_plain(mask), dtype=bool)
    try:
        allowed = np.broadcast_to(allowed, array.shape)
    except ValueError:
        return ""
    leak = ~allowed & ~np.isclose(array, 0.0, atol=ATOL)
    if leak.any():
        where = tuple(int(i) for i in np.argwhere(leak)[0])
        return (
            f"\nhint: {name}{list(where)} is {float(array[where]):.6g}, but the mask is False "
            "there (True = may attend): a masked position gets weight exactly 0, so set its "
            "score to -inf before the softmax (not after it, and not to 0)"
        )
    return ""


def as_array(got: Any, name: str = "the answer") -> tuple[np.ndarray | None, str]:
    """``got`` (a plain answer) as a float64 array, or None and what is wrong."""
    if got is None:
        return None, f"{name} is None: did you forget to `return` it?"
    if isinstance(got, bool) or (isinstance(got, np.ndarray) and got.dtype.kind == "b"):
        return None, f"{name} should be numbers, got booleans"
    try:
        array = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        return None, f"{name} should be an array of numbers, got {_kind(got)}"
    return array, ""


def compare_arrays(expected: Any, got: Any, name: str = "the answer", shape_hint: str = "") -> str:
    """'' if ``got`` has the shape of ``expected`` and agrees entry by entry, else the entry that
    differs most (and how many differ)."""
    want = np.asarray(expected, dtype=float)
    array, problem = as_array(got, name)
    if array is None:
        return problem
    if array.shape != want.shape:
        return f"{name} has shape {array.shape}, expected {want.shape}" + (
            f" ({shape_hint})" if shape_hint else ""
        )
    if np.isnan(array).any():
        where = tuple(int(i) for i in np.argwhere(np.isnan(array))[0])
        return f"{name} has nan at {list(where)}: look for 0/0, inf - inf or log of a negative"
    if close(want, array):
        return ""
    if array.ndim == 0:
        return f"{name}: expected {want.item()!r}, got {array.item()!r}"
    with np.errstate(invalid="ignore"):
        error = np.abs(array - want)
    error[np.isinf(want) & (array == want)] = 0.0
    error[np.isnan(error)] = np.inf  # inf where a finite value belongs
    bad = error > ATOL + RTOL * np.abs(np.where(np.isinf(want), 0, want))
    where = np.unravel_index(np.argmax(np.where(bad, error, -1.0)), array.shape)
    index = ", ".join(str(int(k)) for k in where)
    return (
        f"{name}[{index}] differs most: expected {float(want[where])!r}, "
        f"got {float(array[where])!r} ({int(bad.sum())} of {bad.size} entries differ)"
    )


def _kind(value: Any) -> str:
    return f"a {type(value).__name__}" if value is not None else "None"


def compare_exact(expected: Any, got: Any) -> str:
    """'' if ``got`` equals ``expected`` exactly (lists and tuples alike), else both."""
    if _exact(expected) == _exact(got):
        return ""
    return f"expected {show(expected)}, got {show(got)}"


def _exact(value: Any) -> Any:
    """Lists and tuples (and int arrays) as tuples, so that ``[0, 1]`` equals ``(0, 1)``."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "iub":
        value = value.tolist()
    if isinstance(value, list | tuple):
        return tuple(_exact(v) for v in value)
    return value


def as_count(value: Any) -> int | None:
    """``value`` as an int if it is a whole number (int, numpy integer, whole float), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating) and math.isfinite(value) and value == int(value):
        return int(value)
    return None


def compare_counts(expected: Any, got: Any, what: str = "n-gram") -> str:
    """'' if ``got`` maps the same keys to the same whole-number counts as ``expected`` (keys with
    count 0 may be left out or kept), else what differs."""
    if not isinstance(got, dict):
        return f"expected a dict or Counter, got {_kind(got)}"
    bad_keys = [k for k in got if not isinstance(k, tuple)]
    if bad_keys:
        return (
            f"keys must be tuples of words, like ('<s>', 'the'); got the key {bad_keys[0]!r} "
            f"of type {type(bad_keys[0]).__name__}"
        )
    counts = {}
    for key, value in got.items():
        count = as_count(value)
        if count is None:
            return (
                f"the count of {key!r} is {value!r} ({type(value).__name__}): a count is a whole "
                "number of occurrences (an int)"
            )
        if count < 0:
            return f"the count of {key!r} is {count}: a count cannot be negative"
        if count:
            counts[key] = count
    missing = [k for k in expected if k not in counts]
    extra = [k for k in counts if k not in expected]
    wrong = [k for k in expected if k in counts and counts[k] != expected[k]]
    lines = []
    if missing:
        lines.append(f"missing {len(missing)} {what}(s), e.g. {show(missing[:3])}")
    if extra:
        lines.append(f"{len(extra)} {what}(s) that should not be there, e.g. {show(extra[:3])}")
    for k in wrong[:3]:
        lines.append(f"count of {k!r}: expected {expected[k]}, got {counts[k]}")
    return "\n".join(lines)


def compare_scores(
    expected: Any,
    got: Any,
    keys: Sequence[str] | None = None,
    hints: Mapping[str, str] | None = None,
) -> str:
    """'' if ``got`` is a dict with the numbers of ``expected`` under ``keys`` (default: all of
    expected's keys; other keys are ignored), else the keys that differ, followed by the
    ``hints`` line of the first key that differs (how that score is computed), if given."""
    keys = list(expected) if keys is None else list(keys)
    if not isinstance(got, dict):
        return f"expected a dict with the keys {keys}, got {_kind(got)}"
    missing = [k for k in keys if k not in got]
    if missing:
        return f"the dict has no key {missing[0]!r}; it needs {keys}"
    problems = {k: compare_numbers(expected[k], got[k]) for k in keys}
    differ = [k for k in keys if problems[k]]
    problem = "\n".join(f"{k!r}: {problems[k]}" for k in differ)
    if differ and hints:
        problem += f"\nhint: {hints[differ[0]]}"
    return problem


def same_answer(a: Any, b: Any) -> bool:
    """Whether two plain answers agree: numbers and arrays under the tolerance policy (nan equal
    to nan where both have it), sequences item by item, dicts key by key (the same keys),
    anything else by ``==``. Used to recognise known mistakes."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return (
            isinstance(a, Mapping)
            and isinstance(b, Mapping)
            and set(a) == set(b)
            and all(same_answer(a[k], b[k]) for k in a)
        )
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if _numeric(a) and _numeric(b):
        return _close_or_both_nan(a, b)
    if isinstance(a, list | tuple | np.ndarray) and isinstance(b, list | tuple | np.ndarray):
        return len(a) == len(b) and all(same_answer(x, y) for x, y in zip(a, b, strict=True))
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _close_or_both_nan(a: Any, b: Any) -> bool:
    """:func:`close`, with nan equal to nan where both have it (a mistake's answer and the
    student's, when the mistake makes a 0/0: nan is never right, but it is what the mistake
    gives)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or not np.array_equal(np.isnan(x), np.isnan(y)):
        return False
    keep = ~np.isnan(x)
    return close(x[keep], y[keep])


def same_on_keys(a: Any, b: Any) -> bool:
    """:func:`same_answer` for a dict ``a`` and a dict ``b`` that may hold more keys than ``a``
    (a student's dict of scores or gradients with an extra entry)."""
    if not (isinstance(a, Mapping) and isinstance(b, Mapping)) or not set(a) <= set(b):
        return False
    return all(same_answer(a[k], b[k]) for k in a)


def _numeric(value: Any) -> bool:
    """Whether ``value`` is a number or a regular array of numbers."""
    if isinstance(value, bool):
        return False
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        return False
    return array.dtype.kind in "iuf"


def name_mistakes(
    right: Any,
    got: Any,
    mistakes: Iterable[Mistake],
    same: Callable[[Any, Any], bool] = same_answer,
) -> list[Mistake]:
    """Every mistake whose answer is ``got`` and differs from the ``right`` answer (by
    ``same(answer, got)``, :func:`same_answer` unless a check says otherwise), each once: on a
    given case two mistakes can give the same answer, and then the message names both."""
    found: list[Mistake] = []
    for mistake in mistakes:
        answer = mistake.answer
        if answer is None or any(m.what == mistake.what for m in found):
            continue
        try:
            answer = to_plain(answer)
        except NotPlainAnswer:
            continue
        if not same(right, answer) and same(answer, got):
            found.append(mistake)
    return found


def name_mistake(
    right: Any,
    got: Any,
    mistakes: Iterable[Mistake],
    same: Callable[[Any, Any], bool] = same_answer,
) -> Mistake | None:
    """The first of :func:`name_mistakes`, or None."""
    found = name_mistakes(right, got, mistakes, same)
    return found[0] if found else None


# ------------------------------------------------------------------------------ running


def run_check(
    name: str,
    student: Callable,
    reference: Callable,
    cases: Sequence[Case],
    compare: Callable[[Any, Any], str] = compare_numbers,
    *,
    mistakes: Callable[..., Iterable[Mistake]] | None = None,
    same: Callable[[Any, Any], bool] = same_answer,
) -> None:
    """Check ``student`` against ``reference`` on ``cases`` (see the module docstring).

    ``compare(expected, got)`` returns ``""`` for a right answer, else what is wrong;
    ``mistakes(*args)`` lists the :class:`Mistake` answers of the case (computed only when the
    answer is wrong), recognised with ``same(mistake's answer, got)``."""
    if not callable(student):
        raise CheckFailed(f"{name} should be a function, but it is {_kind(student)}")
    # every case's arguments as bytes before any student code runs: a submission that reaches the
    # list or a Case through the stack cannot drop or change the cases still to come
    frozen = tuple((case, pickle.dumps(case.args)) for case in cases)
    for i, (case, args) in enumerate(frozen):
        number = f"{i + 1} of {len(frozen)}"
        _check_case(name, student, reference, case, args, number, compare, mistakes, same, frozen)
    print(f"{name}: all {len(frozen)} cases pass")


def confirmed_mistakes(
    student: Callable,
    candidates: Sequence[Mistake],
    frozen: Sequence[tuple[Case, bytes]],
    mistakes: Callable[..., Iterable[Mistake]],
    same: Callable[[Any, Any], bool] = same_answer,
) -> list[Mistake]:
    """The ``candidates`` (mistakes whose answer is the student's on the failing case) whose
    answer is the student's on *every* case of the check where the mistake has one, passed cases
    included: a mistake is named only when it explains all the student's answers. A mistake whose
    answer differs from the student's on one case is not the student's, although it coincided on
    the failing one; of two mistakes that coincide on the failing case, a case that separates
    them keeps only the one the student made. Mistakes are the same across cases by their
    :attr:`Mistake.identity`. A check may list one mistake (one identity) with several answers,
    one per way of writing it (``-inf`` or the dtype's minimum for a masked score): it is shown
    on a case where any of them is the student's. A case where the student's function raises
    neither shows nor refutes a mistake. Calls the student's function again on each case."""
    alive = {m.identity for m in candidates}
    for _, frozen_args in frozen:
        if not alive:
            break
        try:
            got = call_student(student, pickle.loads(frozen_args))
        except Exception:  # no answer to compare: the case neither shows nor refutes a mistake
            continue
        shown: dict[str, bool] = {}  # per mistake: whether one of its answers here is the student's
        for mistake in mistakes(*pickle.loads(frozen_args)):
            if mistake.identity not in alive or mistake.answer is None:
                continue  # a mistake with no answer on this case is neither shown nor refuted
            try:
                answer = to_plain(mistake.answer)
            except NotPlainAnswer:
                continue
            shown[mistake.identity] = shown.get(mistake.identity, False) or same(answer, got)
        alive -= {identity for identity, matches in shown.items() if not matches}
    return [m for m in candidates if m.identity in alive]


def _check_case(
    name: str,
    student: Callable,
    reference: Callable,
    case: Case,
    frozen: bytes,
    number: str,
    compare: Callable[[Any, Any], str],
    mistakes: Callable[..., Iterable[Mistake]] | None,
    same: Callable[[Any, Any], bool],
    every_case: Sequence[tuple[Case, bytes]] = (),
) -> None:
    """One case: the student's answer first, then (the reference switched on) the expected one,
    both from the pickled arguments ``frozen``, which nothing can change. A wrong answer's
    mistake is named only when :func:`confirmed_mistakes` finds it on ``every_case``."""
    where = f"on case {number}{_label(case)}"
    try:
        got = call_student(student, pickle.loads(frozen))
    except NotImplementedError as err:
        raise CheckFailed(
            f"{name} is not written yet: replace `raise NotImplementedError()` in its cell "
            "with your code, run that cell, then run this one again."
        ) from err
    except ReferenceUsedError as err:
        raise CheckFailed(f"{name}: {err}") from None
    except NotPlainAnswer as err:
        raise CheckFailed(
            f"{name} returned an answer the check cannot use {where}: {err}\n{_inputs(case)}"
        ) from None
    except Exception as err:
        raise CheckFailed(
            f"{name} raised {type(err).__name__}: {err}\n{where}:\n{_inputs(case)}"
            "(the traceback above shows the line in your code)"
            + (f"\nhint: {case.hint}" if case.hint else "")
        ) from err
    args = pickle.loads(frozen)
    want = reference(*args)
    problem = compare(want, got)  # a compare function may need the arguments (an Expected)
    if not problem:
        return
    right = unwrap(want)  # everything below needs only the answer
    here = name_mistakes(right, got, mistakes(*args), same) if mistakes is not None else []
    named = here
    if here and every_case and mistakes is not None:
        named = confirmed_mistakes(student, here, every_case, mistakes, same)
    if len(named) == 1:
        advice = f"\nlikely mistake: {named[0].what}"
    elif named:  # on every case these mistakes give the same answer: the message names each
        advice = (
            "\nlikely mistake, one of these (on every case they give the same answer):"
            + "".join(f"\n  - {m.what}" for m in named)
        )
    elif here:  # the same answer here, another answer on some other case: not the mistake made
        advice = (
            "\nyour answer equals what this mistake gives on this case, though not on every "
            "case, so look for something close to it:" + "".join(f"\n  - {m.what}" for m in here)
        )
    else:  # what differs is in `problem`: the case's hint is not about this answer
        advice = ""
    raise CheckFailed(
        f"{name} gives a wrong answer {where} (cases run smallest first):\n{_inputs(case)}"
        f"expected: {show(right)}\n"
        f"got:      {show(got)}\n"
        f"{problem}{advice}"
    )


def _label(case: Case) -> str:
    return f" ({case.label})" if case.label else ""


def show_input(value: Any) -> str:
    """An argument of a case as a message shows it: as :func:`show` does, with the shape of a
    tensor of more than one number (booleans stay True/False)."""
    if isinstance(value, _torch_types()):
        tensor: Any = value
        if tensor.numel() > 1:
            return f"tensor of shape {tuple(tensor.shape)}:\n{show(tensor)}"
    return show(value)


def _inputs(case: Case) -> str:
    lines = [
        f"  {n} = " + (case.shown.get(n) or show_input(a)).replace("\n", "\n" + " " * (len(n) + 5))
        for n, a in zip(case.names, case.args, strict=True)
    ]  # continuation lines indented under the value
    return "\n".join(lines) + "\n"
