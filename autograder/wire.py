"""Step 3b of grading one submission: the data that crosses the pipe, read with bounds.

What a worker sends is untrusted: the student's code can write to the pipe itself. So it is not a
pickle but a format with no references (:func:`autograder.protocol.decode`, which :func:`loads`
calls): every value costs at least one byte of the message, so the grader's time and memory for a
message are bounded by the bytes received (issue 40; pickle's ``MEMOIZE``, ``DUP`` and ``GET``
let a few bytes stand for millions of objects). A message is also bounded in bytes
(:data:`~autograder.protocol.MAX_MESSAGE`), in objects (:data:`~autograder.protocol.MAX_OBJECTS`),
in nesting and in the grader's time (:data:`~autograder.protocol.MAX_DECODE_SECONDS`). A message
past a bound raises :class:`TooLarge`, which costs the part its points and flags the submission for
review. :func:`from_wire` turns the arrays of a message into numpy arrays (tensors into tensors
and handles into the grader's objects for a callback's arguments).

What the grader sends is a pickle (:func:`dumps`) of :func:`to_wire`'s data: the checks' arguments
as they are, and every other object (a model, a tagger) as a :class:`GraderObject`, which is
pickled as a *persistent id*, outside the data: the worker turns exactly those into remote
objects, so an argument of any type in any position (a 4-tuple whose first item is an array
included) is never taken for one (issue 40, section 4).
"""

from __future__ import annotations

import copy
import io
import pickle
from typing import Any

import numpy as np

from autograder.protocol import MAX_DEPTH, Array, Handle, TooLarge, decode

__all__ = ["GraderObject", "TooLarge", "dumps", "from_wire", "loads", "to_wire"]


def loads(data: bytes) -> Any:
    """A worker's message, read within the wire's bounds (:class:`TooLarge` past one;
    :class:`autograder.protocol.Malformed`, a ``ValueError``, for bytes that are not a message).
    Arrays are :class:`autograder.protocol.Array` and handles :class:`autograder.protocol.Handle`
    until :func:`from_wire` converts them."""
    return decode(data)


def _array(value: Array, tensors: bool) -> Any:
    kind = np.dtype(value.dtype)
    if kind.kind not in "biufcUS" or kind.fields is not None or kind.subdtype is not None:
        raise ValueError(f"an array of dtype {value.dtype!r}")
    array = np.frombuffer(value.data, dtype=kind).reshape(value.shape).copy()
    if value.kind == "tensor" and tensors:
        import torch

        return torch.from_numpy(array)
    return array


def from_wire(value: Any, handles: dict[int, Any] | None = None, depth: int = 0) -> Any:
    """A worker's message (read by :func:`loads`, so bounded) as Python values: arrays become
    numpy arrays, and, where ``handles`` is given (the arguments of a callback), tensors become
    tensors and handles the grader's objects. Lists and dicts are converted in place, so nothing
    is copied or hashed again; a set's items and a dict's keys hold no array or handle (those are
    not hashable, :func:`loads` refuses them there)."""
    if depth > MAX_DEPTH:
        raise ValueError("data nested too deeply")
    kind = type(value)
    if kind is Array:
        return _array(value, handles is not None)
    if kind is Handle:
        if handles is None or value.id not in handles:
            raise ValueError("an unknown handle")
        return handles[value.id]
    if kind is list:
        for i, item in enumerate(value):
            new = from_wire(item, handles, depth + 1)
            if new is not item:
                value[i] = new
    elif kind is tuple:
        items = [from_wire(item, handles, depth + 1) for item in value]
        if any(new is not item for new, item in zip(items, value, strict=True)):
            return tuple(items)
    elif kind is dict:
        changed = {}
        for key, item in value.items():
            new = from_wire(item, handles, depth + 1)
            if new is not item:
                changed[key] = new
        value.update(changed)
    elif kind not in (type(None), bool, int, float, complex, str, bytes, set, frozenset):
        raise ValueError(f"unexpected {kind.__name__}")
    return value


class GraderObject:
    """One of the grader's objects in a message to the worker: its number (its key in the
    worker's ``handles``) and a text for the student's messages (its ``repr``)."""

    __slots__ = ("handle", "text")

    def __init__(self, handle: int, text: str):
        self.handle, self.text = handle, text


class _Pickler(pickle.Pickler):
    """Pickles :class:`GraderObject` as the persistent id ``("handle", number, text)``."""

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) is GraderObject:
            return ("handle", obj.handle, obj.text)
        return None


def dumps(message: Any) -> bytes:
    """A message to the worker (made of :func:`to_wire`'s data) as the pickle it reads."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=4).dump(message)
    return buffer.getvalue()


_DATA = (type(None), bool, int, float, complex, str, bytes, range)


def to_wire(value: Any, handles: dict[int, Any], depth: int = 0) -> Any:
    """Arguments for the worker: data as it is (numpy arrays, tensors, Counters, Fractions...), and
    every other object (a model, a tagger, a function of the checks) as a :class:`GraderObject`
    that stays here, in ``handles``."""
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
    return GraderObject(handle, text)
