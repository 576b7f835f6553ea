"""Step 3b of grading one submission: the data that crosses the pipe, read with bounds.

What a worker sends is untrusted: the student's code can write to the pipe itself. So the grader
reads it (:func:`loads`) with a restricted unpickler (builtins only, never a class of the
student's) and, before anything else looks at it, bounds it (issue 28): in bytes
(:data:`~autograder.protocol.MAX_MESSAGE`), in the objects it expands to once shared references
are followed (:data:`~autograder.protocol.MAX_OBJECTS`: a 145-byte pickle of shared nested lists
expands to billions, which converting or formatting would walk one by one), in nesting and in the
grader's time (:data:`~autograder.protocol.MAX_DECODE_SECONDS`). A message past a bound raises
:class:`TooLarge`, which costs the part its points and flags the submission for review.
:func:`from_wire` turns the plain data into Python values (tagged arrays into numpy arrays),
:func:`to_wire` the checks' arguments into data and handles.
"""

from __future__ import annotations

import builtins
import copy
import io
import pickle
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from autograder.protocol import MAX_DECODE_SECONDS, MAX_DEPTH, MAX_OBJECTS, TAG


class TooLarge(ValueError):
    """A message from a worker past one of the wire's bounds (the message says which)."""


class Budget:
    """What is left of one message's bounds: objects to visit and the grader's time."""

    def __init__(self, objects: int = MAX_OBJECTS, seconds: float = MAX_DECODE_SECONDS):
        self.objects, self.limit = objects, objects
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds

    def spend(self, n: int = 1) -> None:
        self.objects -= n
        if self.objects < 0:
            raise TooLarge(f"it expands to more than {self.limit:,} objects")
        if self.objects % 4096 < n and time.monotonic() > self.deadline:
            raise TooLarge(f"reading it took more than {self.seconds:g} s of the grader's time")


def measure(value: Any, budget: Budget, depth: int = 0) -> None:
    """Visit ``value`` as a walk over it would (a shared object once per reference), charging
    ``budget``: raises :class:`TooLarge` at the first bound passed."""
    if depth > MAX_DEPTH:
        raise TooLarge(f"it is nested more than {MAX_DEPTH} levels deep")
    budget.spend()
    kind = type(value)
    if kind in (list, tuple, set, frozenset):
        for item in value:
            measure(item, budget, depth + 1)
    elif kind is dict:
        for key, item in value.items():
            measure(key, budget, depth + 1)
            measure(item, budget, depth + 1)


def _bounded(load: Callable, where: str) -> Callable:
    """An opcode of the unpickler that first charges the budget for what it adds to a container,
    and measures every dict key and set item before it is hashed (hashing walks a tuple)."""

    def bounded(self: Any) -> None:  # a _Unpickler, whose stack mypy does not know
        if where == "pairs":  # SETITEMS, DICT: key, value, key, value... since the mark
            for key in self.stack[::2]:
                measure(key, self.budget)
        elif where == "items":  # ADDITEMS, FROZENSET: items since the mark
            for item in self.stack:
                measure(item, self.budget)
        elif where == "key":  # SETITEM: ... dict, key, value
            measure(self.stack[-2], self.budget)
        else:  # APPENDS, TUPLE, LIST (since the mark) or APPEND and TUPLE1-3 (a few)
            self.budget.spend(len(self.stack) if where == "mark" else 1)
        load(self)

    return bounded


class _Unpickler(pickle._Unpickler):  # type: ignore[name-defined]  # the pure-Python one
    """Reads what a worker sends: builtins only, within a :class:`Budget`."""

    dispatch = dict(pickle._Unpickler.dispatch)  # type: ignore[attr-defined]
    for _op, _where in [
        (pickle.SETITEMS, "pairs"),
        (pickle.DICT, "pairs"),
        (pickle.ADDITEMS, "items"),
        (pickle.FROZENSET, "items"),
        (pickle.SETITEM, "key"),
        (pickle.APPENDS, "mark"),
        (pickle.TUPLE, "mark"),
        (pickle.LIST, "mark"),
        (pickle.APPEND, "one"),
        (pickle.TUPLE1, "one"),
        (pickle.TUPLE2, "one"),
        (pickle.TUPLE3, "one"),
    ]:
        dispatch[_op[0]] = _bounded(dispatch[_op[0]], _where)
    del _op, _where

    def __init__(self, file: io.BytesIO, budget: Budget):
        super().__init__(file)
        self.budget = budget

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name == "complex":
            return complex
        if module == "builtins" and name in ("set", "frozenset"):
            kind = getattr(builtins, name)

            def checked(items: Any = ()) -> Any:  # set(list) by REDUCE hashes every item
                if type(items) is not list:
                    raise pickle.UnpicklingError(f"{name} of a {type(items).__name__}")
                for item in items:
                    measure(item, self.budget)
                return kind(items)

            return checked
        raise pickle.UnpicklingError(f"the worker sent an object of {module}.{name}")


def loads(data: bytes) -> Any:
    """A worker's message, read within the wire's bounds (:class:`TooLarge` past one; any other
    exception for something that is not a message of builtins)."""
    budget = Budget()
    value = _Unpickler(io.BytesIO(data), budget).load()
    measure(value, Budget(budget.objects, max(0.0, budget.deadline - time.monotonic())))
    return value


def _array(dtype: Any, shape: Any, data: Any) -> np.ndarray:
    if not (isinstance(dtype, str) and isinstance(shape, tuple) and isinstance(data, bytes)):
        raise ValueError("a malformed array")
    kind = np.dtype(dtype)
    if kind.kind not in "biufcUS" or kind.fields is not None or kind.subdtype is not None:
        raise ValueError(f"an array of dtype {dtype!r}")
    if not all(isinstance(n, int) and n >= 0 for n in shape):
        raise ValueError("an array with a bad shape")
    return np.frombuffer(data, dtype=kind).reshape(shape).copy()


def from_wire(value: Any, handles: dict[int, Any] | None = None, depth: int = 0) -> Any:
    """A worker's plain data (read by :func:`loads`, so bounded) as Python values: tagged arrays
    become numpy arrays (tensors become tensors and handles their objects where ``handles`` is
    given: arguments of a callback)."""
    if depth > MAX_DEPTH:
        raise ValueError("data nested too deeply")
    kind = type(value)
    if kind is tuple and len(value) == 5 and value[0] == TAG and value[1] in ("ndarray", "tensor"):
        array = _array(*value[2:])
        if value[1] == "tensor" and handles is not None:
            import torch

            return torch.from_numpy(array)
        return array
    if kind is tuple and len(value) == 4 and value[0] == TAG and value[1] == "handle":
        if handles is None or value[2] not in handles:
            raise ValueError("an unknown handle")
        return handles[value[2]]
    if kind in (list, tuple):
        return kind(from_wire(v, handles, depth + 1) for v in value)
    if kind in (set, frozenset):
        return kind(from_wire(v, handles, depth + 1) for v in value)
    if kind is dict:
        return {
            from_wire(k, handles, depth + 1): from_wire(v, handles, depth + 1)
            for k, v in value.items()
        }
    if kind in (type(None), bool, int, float, complex, str, bytes):
        return value
    raise ValueError(f"unexpected {kind.__name__}")


_DATA = (type(None), bool, int, float, complex, str, bytes, range)


def to_wire(value: Any, handles: dict[int, Any], depth: int = 0) -> Any:
    """Arguments for the worker: data as it is (numpy arrays, tensors, Counters, Fractions...), and
    every other object (a model, a tagger, a function of the checks) as a handle that stays here."""
    kind = type(value)
    if depth > 60:
        raise ValueError("arguments nested too deeply")
    if kind in (list, tuple, set, frozenset):
        return kind(to_wire(v, handles, depth + 1) for v in value)
    if isinstance(value, tuple):  # a named tuple: its items
        return tuple(to_wire(v, handles, depth + 1) for v in tuple.__iter__(value))
    if isinstance(value, dict) and kind.__module__ in ("builtins", "collections"):
        converted = copy.copy(value)
        for key, item in value.items():
            dict.__setitem__(converted, key, to_wire(item, handles, depth + 1))
        return converted
    if kind in _DATA or kind.__module__ in ("fractions", "decimal"):
        return value
    if kind.__module__.split(".")[0] in ("numpy", "torch") and not callable(value):
        return value  # arrays, tensors, numpy scalars, dtypes
    handle = len(handles) + 1
    handles[handle] = value
    try:
        text = repr(value)[:2000]
    except Exception:
        text = f"<{kind.__name__}>"
    return (TAG, "handle", handle, text)
