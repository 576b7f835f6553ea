"""The wire between the grader and a worker: its constants, framing and format, defined once.

Issue 11 (the sandboxed grader), issue 28 (bounded messages) and issue 40 (a wire the student
cannot bend). Each message is an 8-byte big-endian length (:data:`HEADER`) and at most
:data:`MAX_MESSAGE` bytes.

**From a worker to the grader** (untrusted: the student's code can write to the pipe itself) a
message is one value in a format with no references at all (:func:`encode`, :func:`decode`): each
value is a one-byte tag and what follows it, a container its count and then its items in full. So
every object the grader builds costs at least one byte of the message, and reading a message
takes time and memory in proportion to its bytes (pickle's ``MEMOIZE``, ``DUP`` and ``GET`` let a
few bytes stand for any number of objects, which is why pickle is not used in this direction).
The values are ``None``, ``bool``, ``int``, ``float``, ``complex``, ``str`` (lone surrogates
included), ``bytes``, ``list``, ``tuple``, ``dict``, ``set``, ``frozenset``, and two kinds that
no other value can be: :class:`Array` (a numpy array or torch tensor as dtype, shape and bytes)
and :class:`Handle` (one of the grader's objects, in a callback's arguments).

**From the grader to a worker** messages are pickles (the grader is trusted there), in which the
grader's objects travel as pickle *persistent ids* (``("handle", id, text)``), not as data: a
worker's unpickler turns exactly those into its remote objects, so no argument of a check, of
whatever type and in whatever position, can be taken for one (``autograder/wire.py``).

This module uses the standard library only: :mod:`autograder.worker` copies it into the sandbox
beside ``student_worker.py``, where nothing of the course can be imported, and both sides read
the same definitions.
"""

from __future__ import annotations

import os
import struct
import time
from typing import Any

HEADER = struct.Struct(">Q")  # the length of the message that follows
MAX_MESSAGE = 64 * 2**20  # bytes: the largest message either side reads
MAX_OBJECTS = 1_000_000  # objects a message from a worker may hold
MAX_DEPTH = 60  # levels of nesting of a message
MAX_INT_BYTES = 1024  # an int of a message fits in this many bytes (about 2,466 digits)
MAX_DECODE_SECONDS = 10.0  # grader time spent reading one message from a worker
CELL_TIMEOUT = "CellTimeLimit"  # the type name of the interrupt a cell or call gets at its limit

_COUNT = struct.Struct(">I")  # the length of a str, bytes or array, the items of a container
_FLOAT = struct.Struct(">d")
_COMPLEX = struct.Struct(">dd")
_CONTAINERS = {b"l"[0]: list, b"t"[0]: tuple, b"S"[0]: set, b"Z"[0]: frozenset}
_TAG_OF = {list: b"l", tuple: b"t", set: b"S", frozenset: b"Z"}
_ARRAY_KINDS = ("ndarray", "tensor")
_TIME_EVERY = 64  # objects read between two looks at the clock


class TooLarge(ValueError):
    """A message from a worker past one of the wire's bounds (the message says which)."""


class Malformed(ValueError):
    """Bytes from a worker that are not a message of this format (the message says where)."""


class Array:
    """A numpy array (``kind="ndarray"``) or torch tensor (``"tensor"``) on the wire: its dtype
    (numpy's ``dtype.str``, e.g. ``"<f8"``), its shape and its bytes in C order."""

    __slots__ = ("kind", "dtype", "shape", "data")
    __hash__ = None  # type: ignore[assignment]  # never a dict key or a set's item

    def __init__(self, kind: str, dtype: str, shape: tuple[int, ...], data: bytes):
        self.kind, self.dtype, self.shape, self.data = kind, dtype, shape, data

    def __repr__(self) -> str:
        return f"Array({self.kind!r}, {self.dtype!r}, {self.shape!r}, <{len(self.data)} bytes>)"


class Handle:
    """One of the grader's objects (a model, a tagger) named in a worker's message by its id."""

    __slots__ = ("id",)
    __hash__ = None  # type: ignore[assignment]  # never a dict key or a set's item

    def __init__(self, id: int):
        self.id = id

    def __repr__(self) -> str:
        return f"Handle({self.id})"


# ------------------------------------------------------------------------------ writing


def encode(value: Any) -> bytes:
    """``value`` (of the types in the module docstring, exactly) in the wire's format."""
    out: list[bytes] = []
    _encode(value, out, 0)
    return b"".join(out)


def _encode(value: Any, out: list[bytes], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise TooLarge(f"it is nested more than {MAX_DEPTH} levels deep")
    kind = type(value)
    if value is None:
        out.append(b"N")
    elif kind is bool:
        out.append(b"T" if value else b"F")
    elif kind is int:
        size = (value.bit_length() + 8) // 8  # one sign bit more than the magnitude needs
        if size > MAX_INT_BYTES:
            raise TooLarge(f"an int of more than {MAX_INT_BYTES} bytes")
        out += [b"i", bytes([size]) if size < 255 else b"\xff" + _COUNT.pack(size)]
        out.append(value.to_bytes(size, "big", signed=True))
    elif kind is float:
        out += [b"f", _FLOAT.pack(value)]
    elif kind is complex:
        out += [b"c", _COMPLEX.pack(value.real, value.imag)]
    elif kind is str:
        data = value.encode("utf-8", "surrogatepass")
        out += [b"s", _COUNT.pack(len(data)), data]
    elif kind is bytes:
        out += [b"b", _COUNT.pack(len(value)), value]
    elif kind in _TAG_OF:
        out += [_TAG_OF[kind], _COUNT.pack(len(value))]
        for item in value:
            _encode(item, out, depth + 1)
    elif kind is dict:
        out += [b"d", _COUNT.pack(len(value))]
        for key, item in value.items():
            _encode(key, out, depth + 1)
            _encode(item, out, depth + 1)
    elif kind is Array:
        out += [b"a", b"n" if value.kind == "ndarray" else b"t"]
        dtype = value.dtype.encode("ascii")
        out += [bytes([len(dtype)]), dtype, bytes([len(value.shape)])]
        out += [_COUNT.pack(n) for n in value.shape]
        out += [_COUNT.pack(len(value.data)), value.data]
    elif kind is Handle:
        out += [b"h", _COUNT.pack(value.id)]
    else:
        raise TypeError(f"the wire carries no {kind.__name__}")


# ------------------------------------------------------------------------------ reading


class _Reader:
    """Reads one value from ``data``, charging one object of ``objects`` per value."""

    def __init__(self, data: bytes, objects: int, seconds: float):
        self.data = data
        self.at = 0
        self.objects, self.limit = objects, objects
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def take(self, n: int) -> bytes:
        start, end = self.at, self.at + n
        if end > len(self.data):
            raise Malformed(f"it ends inside a value (byte {start} of {len(self.data)})")
        self.at = end
        return self.data[start:end]

    def count(self) -> int:
        return _COUNT.unpack(self.take(4))[0]

    def check(self) -> None:
        """Every :data:`_TIME_EVERY` objects: the bounds of objects and of time."""
        if self.objects < 0:
            raise TooLarge(f"it holds more than {self.limit:,} objects")
        if time.monotonic() > self.deadline:
            raise TooLarge(f"reading it took more than {self.seconds:g} s of the grader's time")

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise TooLarge(f"it is nested more than {MAX_DEPTH} levels deep")
        self.objects -= 1
        if self.objects % _TIME_EVERY == 0:
            self.check()
        at = self.at
        if at >= len(self.data):
            raise Malformed(f"it ends where a value should start (byte {at})")
        tag = self.data[at]
        self.at = at + 1
        if tag == 78:  # N
            return None
        if tag == 102:  # f
            return _FLOAT.unpack(self.take(8))[0]
        if tag == 105:  # i
            size = self.take(1)[0]
            if size == 255:
                size = self.count()
            if size > MAX_INT_BYTES:
                raise TooLarge(f"an int of more than {MAX_INT_BYTES} bytes")
            return int.from_bytes(self.take(size), "big", signed=True)
        if tag == 115:  # s
            try:
                return self.take(self.count()).decode("utf-8", "surrogatepass")
            except UnicodeDecodeError as err:
                raise Malformed(f"a str that is not UTF-8 ({err.reason})") from None
        if tag == 84:  # T
            return True
        if tag == 70:  # F
            return False
        if tag in _CONTAINERS:
            kind, n = _CONTAINERS[tag], self.count()
            if kind is list or kind is tuple:
                items = [self.value(depth + 1) for _ in range(n)]
                return items if kind is list else tuple(items)
            members: set = set()
            for _ in range(n):  # one at a time, so that the clock is read between insertions
                item = self.value(depth + 1)
                try:
                    members.add(item)
                except TypeError as err:
                    raise Malformed(f"a {kind.__name__} of {err}") from None
            return members if kind is set else frozenset(members)
        if tag == 100:  # d
            result: dict = {}
            for _ in range(self.count()):
                key = self.value(depth + 1)
                try:
                    result[key] = self.value(depth + 1)
                except TypeError as err:
                    raise Malformed(f"a dict key of {err}") from None
            return result
        if tag == 99:  # c
            return complex(*_COMPLEX.unpack(self.take(16)))
        if tag == 98:  # b
            return self.take(self.count())
        if tag == 97:  # a
            kind_byte = self.take(1)
            if kind_byte not in (b"n", b"t"):
                raise Malformed("an array of an unknown kind")
            try:
                dtype = self.take(self.take(1)[0]).decode("ascii")
            except UnicodeDecodeError:
                raise Malformed("an array's dtype is not ASCII") from None
            shape = tuple(self.count() for _ in range(self.take(1)[0]))
            data = self.take(self.count())
            return Array(_ARRAY_KINDS[kind_byte == b"t"], dtype, shape, data)
        if tag == 104:  # h
            return Handle(self.count())
        raise Malformed(f"an unknown tag {tag} at byte {at}")


def decode(data: bytes, objects: int = MAX_OBJECTS, seconds: float = MAX_DECODE_SECONDS) -> Any:
    """The one value in ``data``, read in time and memory bounded by ``len(data)``: at most
    ``objects`` values, :data:`MAX_DEPTH` levels and ``seconds`` of this process's time
    (:class:`TooLarge` past a bound, :class:`Malformed` for bytes that are not a message)."""
    if len(data) > MAX_MESSAGE:
        raise TooLarge(f"it is longer than {MAX_MESSAGE:,} bytes")
    reader = _Reader(bytes(data), objects, seconds)
    value = reader.value(0)
    reader.check()
    if reader.at != len(data):
        raise Malformed(f"{len(data) - reader.at} bytes follow the value")
    return value


def write_message(fd: int, data: bytes) -> None:
    """Write the message ``data`` to ``fd`` with its length in front."""
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]
