"""The wire between the grader and a worker: its constants and its framing, defined once.

Issue 11 (the sandboxed grader) and issue 28 (bounded messages). Each message is an 8-byte
big-endian length (:data:`HEADER`) and a pickle of at most :data:`MAX_MESSAGE` bytes. Arrays and
tensors travel as ``(TAG, "ndarray"|"tensor", dtype, shape, bytes)``, objects that stay in the
grader as handles ``(TAG, "handle", id, text)``.

This module uses the standard library only: :mod:`autograder.worker` copies it into the sandbox
beside ``student_worker.py``, where nothing of the course can be imported, and both sides read
the same definitions.
"""

from __future__ import annotations

import os
import struct

TAG = b"\x00nlpcourse-wire\x00"  # marks the tagged tuples above; no student value holds it
HEADER = struct.Struct(">Q")  # the length of the pickle that follows
MAX_MESSAGE = 64 * 2**20  # bytes: the largest message either side reads
MAX_OBJECTS = 1_000_000  # objects a message from a worker may expand to (shared ones counted)
MAX_DEPTH = 60  # levels of nesting of a message
MAX_DECODE_SECONDS = 10.0  # grader time spent reading one message from a worker
CELL_TIMEOUT = "CellTimeLimit"  # the type name of the interrupt a cell or call gets at its limit


def write_message(fd: int, data: bytes) -> None:
    """Write the pickle ``data`` to ``fd`` with its length in front."""
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]
