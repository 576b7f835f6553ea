"""Tests of the wire between the grader and a sandboxed worker (autograder/protocol.py, wire.py and
the worker's side in student_worker.py), issue 40 sections 3 and 4.

Oracles: the grader's memory (``tracemalloc``'s peak) and time for a message, compared with the
bytes received; messages built by hand, byte by byte, from the format's definition (not by the
encoder under test); the checks' own conversion ``to_plain`` for what a round trip must give; and
what a real sandboxed worker receives, reported by a probe function in it.
"""

from __future__ import annotations

import collections
import fractions
import math
import pickle
import struct
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from nlpcourse.checks.core import to_plain

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the autograder package, as `python -m autograder` sees it

from autograder import protocol, sandbox, student_view, student_worker, wire  # noqa: E402
from autograder.notebook import Cell  # noqa: E402
from autograder.protocol import MAX_DEPTH, MAX_OBJECTS, Malformed, TooLarge  # noqa: E402
from autograder.results import Limits  # noqa: E402
from autograder.worker import Worker  # noqa: E402

COUNT = struct.Struct(">I")


def cost(data: bytes, **bounds) -> tuple[object, int, float]:
    """What reading ``data`` as the grader does gives (a value or the exception), the peak of the
    memory it allocated (bytes, traced) and its time (seconds, in a second run, untraced)."""

    def read(**slower) -> object:
        try:
            return wire.from_wire(protocol.decode(data, **{**bounds, **slower}))
        except Exception as err:
            return err

    tracemalloc.start()
    try:
        outcome = read(seconds=120.0)  # tracing slows everything down tenfold
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    started = time.perf_counter()
    read()
    return outcome, peak, time.perf_counter() - started


# ------------------------------------------------------------------ section 3: floods


def memoize_flood(n: int) -> bytes:
    """The issue's attack: a pickle that memoizes one small list ``n`` times (pickle charges
    nothing for MEMOIZE: 1 byte each, a dict entry each in the grader)."""
    return b"\x80\x04]" + b"\x94" * n + b"."


def dup_pop_flood(n: int) -> bytes:
    """DUP and POP pairs: 2 bytes each, free in pickle's count of objects."""
    return b"\x80\x04]" + b"20" * n + b"."


@pytest.mark.parametrize("flood", [memoize_flood, dup_pop_flood])
def test_pickle_floods_cost_the_grader_nothing(flood):
    data = flood(4 * 2**20)  # 4-8 MiB: the issue measured 1,335 MiB for 11.4 MiB of MEMOIZE
    outcome, peak, seconds = cost(data)
    assert isinstance(outcome, Malformed)  # a pickle is not a message: refused at its first byte
    assert peak < 2 * len(data) and seconds < 1, (peak, seconds)


def many(tag: bytes, item: bytes, n: int) -> bytes:
    return tag + COUNT.pack(n) + item * n


# The format's densest objects per byte, written by hand: a 5-byte empty set is the largest
# object a byte buys (216 bytes in CPython), so memory is bounded by a small multiple of the
# message's length and, past MAX_OBJECTS, not at all.
DENSE = {
    "Nones": many(b"l", b"N", 30_000),
    "empty sets": many(b"l", b"S" + COUNT.pack(0), 30_000),
    "empty dicts": many(b"l", b"d" + COUNT.pack(0), 30_000),
    "empty lists": many(b"l", b"l" + COUNT.pack(0), 30_000),
    "two-letter strings": many(b"l", b"s" + COUNT.pack(2) + b"ab", 30_000),
    "floats": many(b"t", b"f" + struct.pack(">d", 0.5), 30_000),
    "big ints": many(b"l", b"i\x08" + (2**62).to_bytes(8, "big"), 30_000),
}


@pytest.mark.parametrize("name", DENSE)
def test_memory_and_time_are_bounded_by_the_bytes_received(name):
    data = DENSE[name]
    outcome, peak, seconds = cost(data)
    assert not isinstance(outcome, Exception), outcome
    assert peak < 64 * len(data), (peak, len(data))
    assert seconds < 10 * len(data) / 1e6 + 2, seconds  # at least 100 kB a second, shared CPU


@pytest.mark.parametrize("past", [1, 10, 1000])
def test_past_max_objects_reading_stops(past):
    limit = 20_000  # MAX_OBJECTS is a million; the bound works the same at any size
    data = many(b"l", b"S" + COUNT.pack(0), limit + past)  # empty sets, the largest objects
    outcome, peak, _ = cost(data, objects=limit)
    assert isinstance(outcome, TooLarge) and "objects" in str(outcome)
    assert peak < 300 * limit  # what that many of the largest objects take, at most
    assert MAX_OBJECTS * 300 < 2**30  # so a message costs the grader less than 1 GiB


def test_a_count_larger_than_the_message_costs_nothing():
    outcome, peak, seconds = cost(b"l" + COUNT.pack(2**32 - 1) + b"N")
    assert isinstance(outcome, Malformed) and peak < 10_000 and seconds < 0.1


def test_deep_nesting_is_refused_before_the_stack_is():
    data = b"l" + COUNT.pack(1)
    outcome, _, seconds = cost(data * 200_000 + b"N")
    assert isinstance(outcome, TooLarge) and "nested" in str(outcome) and seconds < 1
    assert protocol.decode(data * MAX_DEPTH + b"N") is not None  # as deep as allowed: read
    with pytest.raises(TooLarge):
        protocol.encode(nested(MAX_DEPTH + 1))


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def int_frame(value: int) -> bytes:
    """An int as the format writes it, by hand: ``i``, its length in one byte, its bytes."""
    size = (value.bit_length() + 8) // 8
    return b"i" + bytes([size]) + value.to_bytes(size, "big", signed=True)


def test_keys_that_share_one_hash_stop_at_the_grader_deadline():
    # ints k * (2**61 - 1) all hash to 0: a dict or set of them is quadratic to build in C
    keys = [int_frame(k * (2**61 - 1)) for k in range(1, 200_000)]
    as_dict = b"d" + COUNT.pack(len(keys)) + b"N".join(keys) + b"N"
    as_set = b"S" + COUNT.pack(len(keys)) + b"".join(keys)
    for data in (as_dict, as_set):
        started = time.perf_counter()
        with pytest.raises(TooLarge, match="grader's time"):
            protocol.decode(data, seconds=0.5)
        assert time.perf_counter() - started < 2


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"N" + b"N",  # bytes after the value
        b"s" + COUNT.pack(1) + b"\xff",  # not UTF-8
        b"S" + COUNT.pack(1) + b"l" + COUNT.pack(0),  # a set of a list
        b"d" + COUNT.pack(1) + b"a" + b"n\x02<f\x00" + COUNT.pack(0) + b"N",  # an array as a key
        b"a" + b"x\x02<f\x00" + COUNT.pack(0),  # an array of no known kind
        b"i\xff" + COUNT.pack(2**20),  # an int of a megabyte
        b"?",
    ],
)
def test_what_is_not_a_message_is_refused(data):
    with pytest.raises(ValueError):  # Malformed or TooLarge: the worker broke the protocol
        protocol.decode(data)


def test_a_forged_array_is_refused_when_converted():
    forged = protocol.Array("ndarray", "|O", (1,), b"\0" * 8)  # an object array: pointers
    with pytest.raises(ValueError, match="dtype"):
        wire.from_wire(protocol.decode(protocol.encode(forged)))
    wrong = protocol.Array("ndarray", "<f8", (3,), b"\0" * 8)  # 3 floats in 8 bytes
    with pytest.raises(ValueError):
        wire.from_wire(protocol.decode(protocol.encode(wrong)))


# ------------------------------------------------------------------ every value still travels

ANSWERS = [
    None,
    True,
    False,
    0,
    -1,
    255,
    2**63,
    -(2**64) - 7,
    3**500,
    0.5,
    -0.0,
    math.inf,
    -math.inf,
    1e-310,
    2 + 3j,
    "",
    "héllo ✓",
    "done \udcff",  # a lone surrogate
    b"\x00\xff",
    [1, [2, [3, []]]],
    (1, (2.5, "x")),
    {(1, "a"): [1.0, 2.0], ("b",): {}},
    {1, 2.5, "x", (1, 2)},
    frozenset({("a", "b")}),
    collections.Counter({("a",): 2}),
    fractions.Fraction(1, 3),
    np.float32(0.25),
    np.int64(-5),
    np.arange(6, dtype=np.float32).reshape(2, 3),
    np.arange(12)[::3],  # not contiguous
    np.array(3.5),  # 0-d
    np.zeros((0, 4)),
    np.array([True, False]),
    np.array(["ab", "c"]),
    np.array([b"ab"]),
    np.array([1 + 2j], dtype=np.complex64),
    torch.arange(3, dtype=torch.float64),
    torch.ones(2, 2, dtype=torch.bfloat16),
    torch.tensor([True, False]),
    (torch.zeros(1, 2), {"h": np.zeros(3, dtype=np.int64)}),
]


def same(a, b) -> bool:
    """Equal values of the same types (nan equal to nan, -0.0 apart from 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        nan = a.dtype.kind in "fc"
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=nan)
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


@pytest.mark.parametrize("answer", ANSWERS, ids=range(len(ANSWERS)))
def test_every_answer_the_checks_accept_travels_unchanged(answer):
    want = to_plain(answer)  # the checks' own conversion: what the grader must get
    got = wire.from_wire(wire.loads(student_worker.encode(student_worker.plain(answer))))
    assert same(got, want), (got, want)


def test_nan_travels():
    got = wire.loads(student_worker.encode([math.nan, complex(math.nan, 1)]))
    assert math.isnan(got[0]) and math.isnan(got[1].real) and got[1].imag == 1


# ------------------------------------------------------------------ section 4: handles by type


class Model:
    """Stands for the checks' objects passed to a student (a table model, a tagger)."""

    def __call__(self, x):
        return x * 2

    def __repr__(self) -> str:
        return "a model"


OLD_TAG = b"\x00nlpcourse-wire\x00"  # what the old wire compared a 4-tuple's first item with

# every kind of argument the checks pass (tests collect them from the checks: str, int, float,
# None, list, tuple, dict, Counter, float64 and int64 arrays, float64 and bool tensors, objects)
ARGUMENTS = [
    "the",
    7,
    0.25,
    None,
    ["a", "b"],
    ("<s>", "I"),
    {("I", "am"): 2},
    collections.Counter({("I",): 3}),
    np.linspace(0, 1, 4),
    np.arange(3, dtype=np.int64),
    torch.ones(2, 3, dtype=torch.float64),
    torch.tensor([True, False]),
    Model(),
    (np.ones(2), "handle", 1, "text"),  # a 4-tuple with an array first: issue 40, section 4
    (OLD_TAG, "handle", 1, "text"),  # what the old wire took for its own handle
]


def received(args: tuple):
    """What the worker's side makes of ``args`` sent by the grader, and the grader's objects."""
    handles: dict = {}
    message = ("call", "f", wire.to_wire(args, handles))
    _, _, got = student_worker.from_grader(wire.dumps(message))
    return got, handles


def same_argument(sent, got) -> bool:
    if isinstance(sent, Model):
        return type(got) is student_worker.Remote and repr(got) == "a model"
    if isinstance(sent, torch.Tensor):
        return type(got) is torch.Tensor and sent.dtype == got.dtype and torch.equal(sent, got)
    if isinstance(sent, tuple):
        return type(got) is tuple and all(
            same_argument(s, g) for s, g in zip(sent, got, strict=True)
        )
    return same(sent, got) and type(got) is type(sent)


@pytest.mark.parametrize("position", range(4))
@pytest.mark.parametrize("argument", ARGUMENTS, ids=range(len(ARGUMENTS)))
def test_every_argument_in_every_position_arrives_as_itself(argument, position):
    args = ["x", 1, 2.0, "y"]
    args[position] = argument
    got, handles = received(tuple(args))
    assert type(got) is tuple and len(got) == 4
    for sent, arrived in zip(args, got, strict=True):
        assert same_argument(sent, arrived), (sent, arrived)
    assert len(handles) == sum(isinstance(a, Model) for a in args)


def test_only_the_graders_objects_become_remote():
    model = Model()
    got, handles = received(((np.ones(2), model, 3, "z"), [model], {"m": model}))
    assert [type(x).__name__ for x in got[0]] == ["ndarray", "Remote", "int", "str"]
    assert type(got[1][0]) is type(got[2]["m"]) is student_worker.Remote
    assert len(handles) == 3 and all(h is model for h in handles.values())


def sandboxed(code: str) -> Worker:
    """A worker in the sandbox that has run ``code`` (a student's cell) and serves calls."""
    limits = Limits(call_seconds=8.0, notebook_seconds=40.0)
    cell = Cell("c0", code, "solution", "c0")
    started = Worker(limits, student_view.cached_view(), sandbox.isolation_available())
    started.started(time.monotonic() + 60)
    started.run_cell(cell, limits.call_seconds, time.monotonic() + 30, "the cell ran too long")
    return started


NEAREST = """
import numpy as np

def nearest_neighbours(vectors, word, k, vocab):
    scores = vectors @ vectors[vocab.index(word)]
    return [vocab[i] for i in np.argsort(-scores)[1 : k + 1]]

def kinds(*args):
    return [type(a).__name__ for a in args]
"""


def test_a_sandboxed_function_of_four_arguments_with_an_array_first_is_called():
    vectors = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    worker = sandboxed(NEAREST)
    try:
        deadline = time.monotonic() + 30
        args = (vectors, "cat", 1, ["cat", "kitten", "car"])
        assert worker.call("nearest_neighbours", args, deadline) == ["kitten"]
        kinds = worker.call("kinds", tuple(ARGUMENTS), deadline)
        assert kinds == ["Remote" if isinstance(a, Model) else type(a).__name__ for a in ARGUMENTS]
    finally:
        worker.stop()


def test_a_callback_still_reaches_the_graders_object():
    worker = sandboxed("def twice(model, x):\n    return model(x)\n")
    try:
        assert worker.call("twice", (Model(), 21), time.monotonic() + 30) == 42
    finally:
        worker.stop()


def test_the_grader_reads_no_pickle_at_all():
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    for data in (pickle.dumps(Evil()), pickle.dumps(("answer", 1), protocol=4)):
        with pytest.raises(Malformed):
            wire.loads(data)
