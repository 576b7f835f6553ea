"""Step 3c of grading one submission: the worker process that runs the student's code.

:class:`Worker` starts ``student_worker.py`` in the sandbox (:mod:`autograder.isolation`), with
resource limits the worker sets on itself before any student code runs (memory, processes, file
size, CPU time), and speaks the wire (:mod:`autograder.protocol`, :mod:`autograder.wire`) to it.

The grader asks for each cell and call with a number the answer must carry; anything else on the
pipe (the student's code can write to it) stops the worker with the reason (issue 40 §3).

Time limits are enforced as ``nbgrader autograde``'s kernel enforces them, so both routes give one
grade (issue 28): a cell or call that passes the seconds the grader gave it (``call_seconds``, or
what is left of the notebook's time, issue 41) is first *interrupted* (the worker's
own timer raises ``KeyboardInterrupt`` in it, which a Jupyter kernel's interrupt also does), so the
functions a cell defined before it got stuck are kept; what ignores the interrupt is *killed*
:data:`GRACE` seconds later, with its process group (with bubblewrap its whole process namespace).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from dataclasses import asdict
from pathlib import Path
from typing import Any

from autograder import protocol
from autograder.isolation import Isolation, bwrap_args, plain_env, unshare_args, worker_uid
from autograder.notebook import Cell
from autograder.protocol import CELL_TIMEOUT, HEADER, MAX_MESSAGE
from autograder.results import Limits, PartStatus
from autograder.wire import TooLarge, dumps, from_wire, loads, to_wire

WORKER_SCRIPT = Path(__file__).with_name("student_worker.py")
GRACE = 5.0  # seconds an interrupted cell or call has to stop before it is killed


class SandboxStop(BaseException):
    """The worker broke a limit, died or misbehaved: the part ends here (not a student error).

    A BaseException, so that a check's ``except Exception`` does not turn it into a message."""

    def __init__(self, status: PartStatus, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason
        self.alive = False  # whether the worker can go on (a call it interrupted itself)


def unasked(message: Any) -> str:
    """Words for a message that is not the answer the grader asked for (never its content)."""
    kind = message[0] if isinstance(message, (tuple, list)) and message else message
    what = ascii(kind)[:40] if isinstance(kind, str) else type(kind).__name__
    return f"the worker sent a message the grader did not ask for ({what}) on the grader's pipe"


class StudentRaised(Exception):
    """Base of the exceptions re-raised from the worker under the student's type name."""


_RAISED: dict[str, type[BaseException]] = {}


def _raised(type_name: str, message: str) -> BaseException:
    """The student's exception, rebuilt here with its type name (the class is never theirs)."""
    from nlpcourse.checks.core import NotPlainAnswer
    from nlpcourse.guard import ReferenceUsedError

    known: dict[str, type[BaseException]] = {
        "NotImplementedError": NotImplementedError,
        "ReferenceUsedError": ReferenceUsedError,
        "NotPlainAnswer": NotPlainAnswer,
    }
    if type_name in known:
        return known[type_name](message)
    name = type_name if type_name.isidentifier() else "Exception"
    if name not in _RAISED:
        _RAISED[name] = type(name, (StudentRaised,), {})
    return _RAISED[name](message)


class _Output(threading.Thread):
    """Reads the worker's stdout and stderr; keeps the first ``limit`` bytes, drops the rest."""

    def __init__(self, fd: int, limit: int):
        super().__init__(daemon=True)
        self.fd, self.limit = fd, limit
        self.kept = bytearray()
        self.total = 0

    def run(self) -> None:
        try:
            while chunk := os.read(self.fd, 1 << 16):
                self.total += len(chunk)
                if len(self.kept) < self.limit:
                    self.kept += chunk[: self.limit - len(self.kept)]
        except OSError:
            pass
        finally:
            os.close(self.fd)


def _wire_cell(cell: Cell) -> dict[str, str]:
    """What the worker needs of a cell to run it: its code and the label its errors carry."""
    return {"label": cell.label, "source": cell.source}


class Worker:
    """One sandboxed worker process, which runs the cells it is sent (see the module docstring).

    It is started before it knows any cell, so that one can be started ahead of its submission."""

    def __init__(self, limits: Limits, view: Path, isolation: Isolation):
        self.limits = limits
        self.staging = Path(tempfile.mkdtemp(prefix="nlpcourse-sandbox-"))
        self.staging.chmod(0o755)
        shutil.copy(WORKER_SCRIPT, self.staging / "student_worker.py")
        shutil.copy(protocol.__file__, self.staging / "protocol.py")  # the worker imports it
        in_r, self._to_worker = os.pipe()  # grader -> worker
        self._from_worker, out_w = os.pipe()  # worker -> grader
        log_r, log_w = os.pipe()  # the student's stdout and stderr
        bwrap = isolation.kind == "bubblewrap"
        home = self.staging / "home"
        if not bwrap:
            home.mkdir()
        uid = self.uid = worker_uid(bwrap)
        settings = {
            "uid": uid,
            "limits": asdict(limits),
            "view": "/view" if bwrap else str(view),
        }
        (self.staging / "program.json").write_text(json.dumps(settings), encoding="utf-8")
        for path in self.staging.iterdir():
            path.chmod(0o755 if path.is_dir() else 0o644)
        if not bwrap and uid is not None:
            os.chown(home, uid, uid)
        script = "/grader" if bwrap else str(self.staging)
        python = [
            sys.executable,
            "-I",
            "-u",  # unbuffered: what a worker printed before it was killed is kept
            "-B",
            f"{script}/student_worker.py",
            f"{script}/program.json",
        ]
        python += [str(in_r), str(out_w)]
        if bwrap:
            command = [shutil.which("bwrap") or "bwrap", *bwrap_args(self.staging, view, limits)]
            command += ["--", *python]
            env = None
        elif isolation.kind == "unshare":
            command = [shutil.which("unshare") or "unshare", *unshare_args(), *python]
            env = plain_env(home)
        else:
            command, env = python, plain_env(home)
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_w,
                stderr=log_w,
                pass_fds=(in_r, out_w),
                cwd=str(home) if not bwrap else None,
                env=env if env is not None else {"PATH": "/usr/bin:/bin"},
                start_new_session=True,
            )
        finally:
            for fd in (in_r, out_w, log_w):
                os.close(fd)
        self.output = _Output(log_r, limits.output_bytes)
        self.output.start()
        self.handles: dict[int, Any] = {}
        self.asked = 0  # the number of the last request sent
        self.ahead: list[tuple[int, Cell]] = []  # setup cells asked for before they are needed

    # -- messages

    def send(self, message: Any) -> None:
        try:
            protocol.write_message(self._to_worker, dumps(message))
        except OSError as err:
            raise self._death(f"could not be reached ({err})") from None

    def _read(self, n: int, deadline: float, doing: str) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SandboxStop("timed_out", doing)
            poll = select.poll()  # not select.select: a long-lived grader may hold fds > 1024
            poll.register(self._from_worker, select.POLLIN)
            if not poll.poll(min(left, 3600.0) * 1000):
                continue
            chunk = os.read(self._from_worker, min(n - len(chunks), 1 << 20))
            if not chunk:
                raise self._death("stopped")
            chunks += chunk
        return bytes(chunks)

    def receive(self, deadline: float, doing: str) -> Any:
        (n,) = HEADER.unpack(self._read(HEADER.size, deadline, doing))
        if n > MAX_MESSAGE:
            too_big = f"the worker sent a message of {n} bytes ({MAX_MESSAGE} at most)"
            raise SandboxStop("limit", too_big)
        data = self._read(n, deadline, doing)
        try:
            return loads(data)
        except TooLarge as err:
            bound = f"the worker sent a message past the grader's bounds: {err}"
            raise SandboxStop("limit", bound) from None
        except Exception as err:
            raise SandboxStop("crashed", f"the worker sent something unreadable ({err})") from None

    def _death(self, what: str) -> SandboxStop:
        """Why the worker is gone: its CPU time limit ("limit") or anything else ("crashed")."""
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            return SandboxStop(
                "limit", f"the worker {what}: its CPU time limit ({self.limits.cpu_seconds} s)"
            )
        signals = {signal.SIGKILL: "it was killed (out of memory?)", signal.SIGSEGV: "it crashed"}
        for number, words in signals.items():
            if code in (-number, 128 + number):
                return SandboxStop("crashed", f"the worker {what}: {words}")
        return SandboxStop(
            "crashed",
            f"the worker {what} (exit status {code}); did the code call os._exit or exit?",
        )

    # -- the program and calls

    def _ask(self, *request: Any) -> int:
        """Send a request with a number of its own; the answer must carry that number."""
        self.asked += 1
        self.send((request[0], self.asked, *request[1:]))
        return self.asked

    def _answer(self, number: int, deadline: float, doing: str, kinds: dict[str, int]) -> tuple:
        """The worker's answer to request ``number``: a tuple whose first item is one of
        ``kinds`` (with its length there). Anything else is not the worker's answer (the student's
        code can write to the pipe itself): :class:`SandboxStop`, and the submission is flagged.
        A ``("callback", ...)`` is let through while a call is under way (``kinds`` has it)."""
        message = self.receive(deadline, doing)
        if isinstance(message, list):
            message = tuple(message)
        if (
            isinstance(message, tuple)
            and message
            and isinstance(message[0], str)
            and kinds.get(message[0]) == len(message)
            and (message[0] == "callback" or (type(message[1]) is int and message[1] == number))
        ):
            return message
        raise SandboxStop("crashed", f"{unasked(message)} (did the student's code write to it?)")

    def started(self, deadline: float) -> None:
        """Wait until the worker has set its limits, before any cell."""
        message = self.receive(deadline, "the worker did not start in time")
        if message != ("started",) and message != ["started"]:
            raise SandboxStop("crashed", unasked(message))

    def ask_ahead(self, cell: Cell) -> None:
        """Ask now for a setup cell of the course's to be run with no time limit, before the
        submission is known (:class:`autograder.sandbox.Ahead`); :meth:`run_cell` of the same
        cell reads its answer later. The worker runs it while the grader does other work."""
        if cell.kind != "setup":
            raise ValueError(f"only the course's setup cells are run ahead, not {cell.label!r}")
        self.ahead.append((self._ask("run", _wire_cell(cell), None), cell))

    def run_cell(self, cell: Cell, seconds: float | None, deadline: float, doing: str) -> Any:
        """Run ``cell``, interrupted at ``seconds`` (``None``: not interrupted) and killed at
        ``deadline``; its error as the worker reported it, or None. ``doing`` is the reason given
        if the deadline passes. A cell asked for ahead (:meth:`ask_ahead`) is not asked again:
        its answer is read."""
        if self.ahead:
            number, asked = self.ahead.pop(0)
            if asked != cell or seconds is not None:
                raise ValueError(
                    f"the cell {asked.label!r} was asked for ahead, not {cell.label!r}"
                )
        else:
            number = self._ask("run", _wire_cell(cell), seconds)
        return self._answer(number, deadline, doing, {"done": 3})[2]

    def names(self, deadline: float) -> dict[str, str]:
        """The names the cells defined, and what each is ("callable" or its type's name)."""
        number = self._ask("names")
        names = self._answer(number, deadline, "the worker did not list its names", {"names": 3})
        return names[2] if isinstance(names[2], dict) else {}

    def call(
        self, name: str, args: tuple, deadline: float, seconds: float | None = None, limit: str = ""
    ) -> Any:
        """Call the student's ``name(*args)`` in the worker, interrupted at ``seconds`` (default
        ``call_seconds``) and killed at ``deadline``; its plain answer, or its exception.
        ``limit`` names the limit that gave ``seconds`` (per call or the notebook's), for the
        reason."""
        if seconds is None:
            seconds = self.limits.call_seconds
        limit = limit or f"its time limit ({seconds:g} s)"
        self.handles = {}
        number = self._ask("call", name, to_wire(args, self.handles), seconds)
        kinds = {"answer": 3, "raised": 5, "callback": 5}
        while True:
            message = self._answer(number, deadline, f"{name} ran past {limit}", kinds)
            if message[0] == "answer":
                try:
                    return from_wire(message[2])
                except (ValueError, TypeError) as err:
                    raise _raised(
                        "NotPlainAnswer", f"the answer could not be read ({err})"
                    ) from None
            if message[0] == "raised":
                type_name, text, where = (str(m)[:4000] for m in message[2:])
                if type_name == CELL_TIMEOUT:
                    stop = SandboxStop("timed_out", f"{name} ran past {limit} and was interrupted")
                    stop.alive = True  # the worker stopped the call itself, and goes on
                    raise stop
                if type_name == "MemoryError":
                    raise SandboxStop(
                        "limit", f"{name} ran out of memory (limit {self.limits.memory_mb} MB)"
                    )
                if where:
                    text = f"{text} (at {where})"
                raise _raised(type_name, text)
            self.send(self._serve(*message[1:]))

    def _serve(self, handle: Any, attribute: Any, args: Any, kwargs: Any) -> tuple:
        """Run a trusted object of the check (a model, a tagger) for the student's code.

        The student's code may read the object's public data attributes and call it or its own
        public methods, nothing else: no module, function or class it refers to."""
        try:
            target = self.handles[handle]
            if attribute is not None:
                if not isinstance(attribute, str) or attribute.startswith("_"):
                    raise AttributeError(f"no attribute {attribute!r}")
                value = getattr(target, attribute)
                own_method = isinstance(value, types.MethodType) and value.__self__ is target
                objects: dict[int, Any] = {}
                to_wire(value, objects)  # any object inside, not data, would become a handle
                if objects and not own_method:
                    raise AttributeError(f"{attribute!r} is not data or a method of the object")
            else:
                args = from_wire(args, self.handles)
                kwargs = from_wire(kwargs, self.handles)
                if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
                    raise TypeError("keyword arguments must have names")
                value = target(*args, **kwargs)
            return ("value", to_wire(value, self.handles))
        except Exception as err:
            return ("error", f"{type(err).__name__}: {err}")

    def stop(self) -> None:
        """End the worker and everything it started, and remove its files."""
        with contextlib.suppress(OSError, SandboxStop):
            self.send(("exit",))
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        for fd in (self._to_worker, self._from_worker):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.output.join(timeout=5)
        shutil.rmtree(self.staging, ignore_errors=True)
