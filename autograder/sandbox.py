"""Grading one submission: the student's code in a sandboxed worker, the checks in the grader.

Issue 11 (the class-scale grader), the part that makes a grade mean what it says. The design's
"Grading" section in one function, :func:`grade_submission`, which the class grader
(:mod:`autograder.classgrader`) runs once per submission, as a Dask task:

1. **Read the submission safely** (:func:`read_notebook`): a size cap, UTF-8, JSON, nbformat 4
   (nbformat 3 is upgraded); anything else is "rejected" with the reason, never an exception.
2. **Take the code by nbgrader metadata, not by position** (:func:`build_program`): the course's
   setup cells (locked, not graded) come from the trusted ``source`` notebook (``solutions/``);
   the student's solution cells are found by their ``grade_id``. The program is the setup and
   solution cells in the source's order. Test cells, scratch cells and outputs of the submission
   are never run: a tampered, deleted or pasted test cell changes nothing.
3. **Run the student's code in a worker** (:class:`Worker`, :mod:`autograder.student_worker`): one
   process per submission, started in a sandbox (bubblewrap where it is installed: no network, own
   process and IPC namespaces, a file system holding only the Python installation, the *student
   view* of ``nlpcourse`` (:mod:`autograder.student_view`, where every reference function raises
   and no check exists) and a private, size-capped home directory; as an unprivileged user with a
   user id of its own), with resource limits it sets on itself before any student code runs
   (memory, processes, file size, CPU time) and wall-clock limits the grader enforces by killing
   the worker and everything it started (a cell or a call: ``call_seconds``; everything:
   ``notebook_seconds``): its process group, and with bubblewrap its whole process namespace.
4. **Run the trusted checks in the grader**: each graded test cell of ``source`` (hidden tests
   included) is executed here, in a fresh namespace where every function the student defined is a
   :class:`StudentFunction` proxy, inside :func:`nlpcourse.checks.core.use_caller`. The proxy sends
   the arguments through a pipe (length-prefixed pickles); the worker calls the function and sends
   back plain data, which the grader reads with a restricted unpickler (builtins only; arrays come
   as bytes with a numeric dtype), so no object of the student's ever exists in the grader and no
   code of theirs runs here. Arguments that are objects (a model passed to ``perplexity``, a
   tagger, a decoder's ``step``) stay in the grader: the worker gets a handle, and calling it asks
   the grader to run the trusted object. A test cell earns its points when it raises nothing
   (nbgrader's rule).
5. **Limits**: a cell or call that breaks a limit gets 0 for its part (status "timed_out" or
   "limit"), a reason and the "needs review" flag; the worker is restarted, without a cell that
   hung, for the parts still to grade. The rest of the class is untouched.

What the sandbox leaves open is listed in the README ("What the sandboxed grader closes, and what
it leaves open") and in :func:`isolation_available`'s words: without bubblewrap, the fallbacks
(``unshare``, or limits alone) isolate less, and every result says so in its ``isolation``.
No check runs trusted code beside the student's in the worker today (no autograd through a
student's function); one that must would load it before the student's cells and would trust that
the student's code cannot change it, which inside one interpreter nothing guarantees.

``grade_submission`` is not thread-safe (the checks' caller stack is per process): grade one
submission at a time per process.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import hashlib
import io
import json
import os
import pickle
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autograder import student_view

WORKER_SCRIPT = Path(__file__).with_name("student_worker.py")
TAG = b"\x00nlpcourse-wire\x00"  # as in student_worker.py
HEADER = struct.Struct(">Q")
MAX_MESSAGE = 64 * 2**20  # the largest message the grader reads from a worker


# ------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class Limits:
    """What one submission may use; every limit can be changed (the CLI maps flags onto them)."""

    memory_mb: int = 2048  # address space of the worker (RLIMIT_AS)
    processes: int = 256  # processes and threads of the worker's own user (RLIMIT_NPROC)
    file_size_mb: int = 64  # the largest file it may write (RLIMIT_FSIZE), and its disk space
    output_bytes: int = 1_000_000  # student stdout+stderr kept, the rest dropped
    cpu_seconds: int = 600  # CPU time of the worker (RLIMIT_CPU)
    call_seconds: float = 60.0  # one call of a student's function, or one cell
    notebook_seconds: float = 180.0  # the whole submission's time in student code
    submission_mb: int = 100  # the notebook file; larger ones are rejected


@dataclass
class PartResult:
    """One graded test cell."""

    grade_id: str  # the test cell's grade_id, e.g. "test_count_ngrams"
    points: float  # earned
    max_points: float
    # "passed" | "failed" | "error" | "timed_out" | "crashed" | "limit" | "missing"
    status: str
    message: str  # what the student may see: the check's message or the reason; never test code


@dataclass
class SubmissionResult:
    """The grade of one submission: plain data (picklable; JSON with dataclasses.asdict).

    ``status``, the first that applies: "rejected" (the file could not be read, or has the wrong
    name; every part 0), "timed_out" (a part or cell ran past a time limit), "crashed" (the
    worker died, broke its memory or CPU limit, or could not start), "needs_review" (graded, but
    something to look at), "zero" (graded, no points), "graded". ``needs_review`` is true exactly
    for the first four."""

    assignment: str
    student: str
    notebook: str  # the file name, e.g. "ngrams.ipynb"
    checksum: str  # sha256 of the submitted notebook's bytes
    parts: list[PartResult]
    # "graded" | "zero" | "timed_out" | "crashed" | "needs_review" | "rejected"
    status: str
    reasons: list[str]  # why, in words
    needs_review: bool
    seconds: float  # wall-clock of the whole grading of this submission
    student_seconds: float  # wall-clock spent inside the student's code (cells + calls)
    isolation: str  # how the student's code was isolated, in words

    @property
    def score(self) -> float:
        return sum(part.points for part in self.parts)

    @property
    def max_score(self) -> float:
        return sum(part.max_points for part in self.parts)

    def as_dict(self) -> dict:
        return asdict(self)


class Rejected(Exception):
    """A submission that cannot be graded at all (the message says why)."""


# ------------------------------------------------------------------------------ notebooks


def read_notebook(data: bytes, limits: Limits = Limits()) -> dict:
    """The submission as an nbformat 4 dict, or :class:`Rejected` saying what is wrong with it."""
    if not data.strip():
        raise Rejected("the notebook file is empty")
    if len(data) > limits.submission_mb * 2**20:
        raise Rejected(
            f"the notebook file is {len(data) / 2**20:.0f} MB, over the limit of "
            f"{limits.submission_mb} MB (clear the outputs and hand it in again)"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise Rejected(
            f"the notebook file is not UTF-8 text (byte {err.start}); a .ipynb saved by Jupyter "
            "always is"
        ) from None
    try:
        notebook = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as err:
        raise Rejected(f"the notebook file is not valid JSON ({err})") from None
    if not isinstance(notebook, dict):
        raise Rejected("the notebook file is JSON but not a notebook (no cells)")
    major = notebook.get("nbformat")
    if major == 4:
        if not isinstance(notebook.get("cells"), list):
            raise Rejected("the notebook has no list of cells")
        return notebook
    if major == 3:
        try:
            import nbformat

            upgraded = nbformat.convert(nbformat.from_dict(notebook), 4)
            return json.loads(nbformat.writes(upgraded, version=4))
        except Exception as err:
            raise Rejected(f"the nbformat 3 notebook could not be upgraded ({err})") from None
    raise Rejected(f"unsupported notebook format nbformat={major!r} (expected 4)")


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def _nbgrader(cell: dict) -> dict:
    metadata = cell.get("metadata")
    meta = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return meta if isinstance(meta, dict) else {}


@dataclass
class Part:
    """A graded test cell of the source and the solution cells it checks (those before it)."""

    grade_id: str
    points: float
    test_source: str
    solution_ids: list[str] = field(default_factory=list)


@dataclass
class Program:
    """What the worker runs, and what the grader checks."""

    cells: list[dict]  # {"label", "source", "kind": "setup" | "solution", "grade_id"}
    parts: list[Part]
    reasons: list[str]


def build_program(submission: dict, source: dict) -> Program:
    """The setup cells of ``source`` and the student's solution cells of ``submission``, by
    nbgrader ``grade_id``, in the source's order; and the source's graded test cells."""
    reasons: list[str] = []
    student: dict[str, list[str]] = {}
    for cell in submission.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        meta = _nbgrader(cell)
        grade_id = meta.get("grade_id")
        if meta.get("solution") and isinstance(grade_id, str):
            student.setdefault(grade_id, []).append(_source(cell))
    cells: list[dict] = []
    parts: list[Part] = []
    pending: list[str] = []  # solution ids since the last test cell
    known: set[str] = set()
    for cell in source["cells"]:
        meta = _nbgrader(cell)
        grade_id = meta.get("grade_id")
        if cell.get("cell_type") != "code" or not isinstance(grade_id, str):
            continue
        if meta.get("solution"):
            known.add(grade_id)
            pending.append(grade_id)
            copies = student.get(grade_id, [])
            if not copies:
                reasons.append(f"the solution cell {grade_id!r} is missing from the notebook")
            elif len(copies) > 1:
                same = len(set(copies)) == 1
                reasons.append(
                    f"the solution cell {grade_id!r} appears {len(copies)} times"
                    + (" (identical copies)" if same else "; they were run in order")
                )
                copies = copies[:1] if same else copies
            for text in copies:
                cells.append(
                    {"label": grade_id, "source": text, "kind": "solution", "grade_id": grade_id}
                )
        elif meta.get("grade"):
            points = float(meta.get("points", 0) or 0)
            parts.append(Part(grade_id, points, _source(cell), pending))
            pending = []
        elif meta.get("locked"):
            cells.append(
                {"label": grade_id, "source": _source(cell), "kind": "setup", "grade_id": grade_id}
            )
    unknown = sorted(set(student) - known)
    if unknown:
        reasons.append(
            f"solution cells with grade_ids the assignment does not have were not run: {unknown}"
        )
    return Program(cells, parts, reasons)


# ------------------------------------------------------------------------------ isolation

_isolation: list[str] = []


def _bwrap_works() -> bool:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    try:
        done = subprocess.run(
            [bwrap, *_bwrap_args(None, None, Limits()), "--", sys.executable, "-c", "pass"],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _unshare_works() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    try:
        done = subprocess.run(
            [unshare, *_unshare_args(), sys.executable, "-c", "pass"],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _unshare_args() -> list[str]:
    namespaces = ["--net", "--ipc", "--pid", "--fork", "--kill-child"]
    if os.geteuid() == 0:
        return [*namespaces, "--mount", "--mount-proc"]
    return ["--user", *namespaces]


def isolation_available() -> str:
    """How :func:`grade_submission` isolates student code on this machine, in words."""
    if not _isolation:
        user = "as an unprivileged user id of its own" if os.geteuid() == 0 else "as this user"
        alone = "as an unprivileged user id of its own" if _worker_uid(False) else "as this user"
        if _bwrap_works():
            _isolation.append(
                "bubblewrap (net, pid, ipc namespaces; a file system with only Python, "
                f"the student view of nlpcourse and a private home; {user})"
            )
        elif _unshare_works():
            _isolation.append(
                "unshare (net, pid, ipc namespaces; NO private file system: the files "
                f"are readable as their permissions allow; {alone}); install bubblewrap"
            )
        else:
            _isolation.append(
                f"none: no bubblewrap or unshare here; rlimits and time limits only, {alone}, with "
                "network and the file system as their permissions allow; install bubblewrap"
            )
    return _isolation[0]


_next_uid = [0]


def _world_readable(path: Path) -> bool:
    """Whether every folder above ``path`` lets other users through (``o+x``)."""
    return all(os.stat(p).st_mode & 0o001 for p in path.resolve().parents)


def _worker_uid(bwrap: bool = True) -> int | None:
    """The unprivileged user id a worker switches to before any student code runs, one of its own
    (so that its process limit counts only its own processes); None unless the grader is root,
    or, without bubblewrap, where another user could not read the Python installation."""
    if os.geteuid() != 0:
        return None
    if not bwrap and not all(_world_readable(Path(p)) for p in (sys.base_prefix, sys.prefix)):
        return None
    _next_uid[0] += 1
    return 200_000 + (os.getpid() * 64 + _next_uid[0] % 64) % 500_000


def _bind_python() -> list[str]:
    """bwrap arguments that show the Python installation (and nothing of the course)."""
    args: list[str] = []
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for etc in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives"):
        if os.path.exists(etc):
            args += ["--ro-bind", etc, etc]
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    prefixes.add(str(Path(sys.executable).resolve().parent.parent))
    # never a folder that holds the course, the temporary files (submissions, other sandboxes) or
    # the home folders: a Python installed right under / would otherwise show all of them
    private = [student_view.PACKAGE.parent, Path(tempfile.gettempdir()), Path.home()]
    private = [p.resolve() for p in private]
    prefixes = {
        p for p in prefixes if not any(Path(p).resolve() in (q, *q.parents) for q in private)
    }
    made: set[str] = set()
    for prefix in sorted(prefixes):
        if not prefix.startswith(("/usr/", "/bin/", "/lib")) and prefix != "/usr":
            for parent in reversed(Path(prefix).parents[:-1]):  # readable by the worker's user
                if str(parent) not in made:
                    made.add(str(parent))
                    args += ["--perms", "0755", "--dir", str(parent)]
            args += ["--ro-bind", prefix, prefix]
    # the real package (an installed, non-editable copy) and the course never show
    course = student_view.PACKAGE.parent
    repository = [course] if (course / "solutions").is_dir() else []  # not site-packages
    for hidden in (student_view.PACKAGE, *repository):
        if any(str(hidden).startswith(prefix.rstrip("/") + "/") for prefix in prefixes):
            args += ["--tmpfs", str(hidden)]
    return args


def _bwrap_args(staging: Path | None, view: Path | None, limits: Limits) -> list[str]:
    space = str(max(limits.file_size_mb, 16) * 2**20)
    if os.geteuid() == 0:  # the worker switches to an unprivileged user id itself
        namespaces = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    else:  # an unprivileged user namespace, as nobody
        namespaces = ["--unshare-all", "--uid", "65534", "--gid", "65534"]
    args = [
        *namespaces,
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--hostname", "sandbox",
        "--proc", "/proc",
        "--dev", "/dev",
        # the private /tmp first: a Python installed under /tmp (a virtual environment in a
        # checkout there) is bound on top of it, not hidden by it
        "--perms", "1777", "--size", space, "--tmpfs", "/tmp",
        "--perms", "0777", "--size", space, "--tmpfs", "/home/student",
        *_bind_python(),
        "--chdir", "/home/student",
        "--setenv", "HOME", "/home/student",
        "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
        "--setenv", "LANG", "C.UTF-8",
        "--setenv", "OMP_NUM_THREADS", "1",
        "--setenv", "MKL_NUM_THREADS", "1",
        "--setenv", "MPLBACKEND", "Agg",
    ]  # fmt: skip
    if staging is not None and view is not None:
        args += ["--ro-bind", str(staging), "/grader", "--ro-bind", str(view), "/view"]
    return args


# ------------------------------------------------------------------------------ the wire


class _Unpickler(pickle.Unpickler):
    """Reads what a worker sends: builtins only, never a class of the student's."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in ("complex", "set", "frozenset"):
            return getattr(builtins, name)
        raise pickle.UnpicklingError(f"the worker sent an object of {module}.{name}")


def _loads(data: bytes) -> Any:
    return _Unpickler(io.BytesIO(data)).load()


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
    """A worker's plain data as Python values: tagged arrays become numpy arrays (tensors become
    tensors and handles their objects where ``handles`` is given: arguments of a callback)."""
    if depth > 60:
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


# ------------------------------------------------------------------------------ the worker


class SandboxStop(BaseException):
    """The worker broke a limit, died or misbehaved: the part ends here (not a student error).

    A BaseException, so that a check's ``except Exception`` does not turn it into a message."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


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


class Worker:
    """One sandboxed worker process running a program (see the module docstring)."""

    def __init__(self, program: list[dict], limits: Limits, view: Path, isolation: str):
        self.limits = limits
        self.cells = program
        self.staging = Path(tempfile.mkdtemp(prefix="nlpcourse-sandbox-"))
        self.staging.chmod(0o755)
        shutil.copy(WORKER_SCRIPT, self.staging / "student_worker.py")
        in_r, self._to_worker = os.pipe()  # grader -> worker
        self._from_worker, out_w = os.pipe()  # worker -> grader
        log_r, log_w = os.pipe()  # the student's stdout and stderr
        bwrap = isolation.startswith("bubblewrap")
        home = self.staging / "home"
        if not bwrap:
            home.mkdir()
        uid = self.uid = _worker_uid(bwrap)
        settings = {
            "uid": uid,
            "cells": program,
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
            "-B",
            f"{script}/student_worker.py",
            f"{script}/program.json",
        ]
        python += [str(in_r), str(out_w)]
        if bwrap:
            command = [shutil.which("bwrap") or "bwrap", *_bwrap_args(self.staging, view, limits)]
            command += ["--", *python]
            env = None
        elif isolation.startswith("unshare"):
            command = [shutil.which("unshare") or "unshare", *_unshare_args(), *python]
            env = _plain_env(home)
        else:
            command, env = python, _plain_env(home)
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

    # -- messages

    def send(self, message: Any) -> None:
        data = pickle.dumps(message, protocol=4)
        view = memoryview(HEADER.pack(len(data)) + data)
        try:
            while view:
                view = view[os.write(self._to_worker, view) :]
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
            raise SandboxStop("crashed", f"the worker sent a message of {n} bytes")
        data = self._read(n, deadline, doing)
        try:
            return _loads(data)
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

    def run_cells(self, deadline_of: Callable[[bool], float]) -> tuple[dict[str, str], list, float]:
        """Run the program's cells; the names they defined, each cell's error (or None) and the
        time of the student's cells (measured in the worker; not the setup cells or starting
        Python).
        A cell that breaks a limit raises :class:`SandboxStop` with ``self.cell`` its index.
        ``deadline_of(trusted)``: starting Python and the course's setup cells (importing torch
        on a busy machine) are not the student's doing and get the notebook's time left."""
        errors: list = []
        seconds = 0.0
        self.cell, running = -1, False
        while True:
            trusted = self.cell < 0 or (running and self.cells[self.cell]["kind"] == "setup")
            message = self.receive(deadline_of(trusted), "a cell ran past its time limit")
            if not isinstance(message, tuple) or not message:
                raise SandboxStop("crashed", "the worker broke the protocol")
            if message[0] == "cell" and len(message) == 5 and isinstance(message[1], int):
                _, index, what, error, took = message
                if not 0 <= index < len(self.cells):
                    raise SandboxStop("crashed", "the worker broke the protocol")
                self.cell, running = index, what == "start"
                if what == "done":
                    errors.append(error)
                    if self.cells[index]["kind"] != "setup" and isinstance(took, float):
                        seconds += min(max(took, 0.0), self.limits.notebook_seconds)
                continue
            if message[0] == "ready" and len(message) == 3 and isinstance(message[1], dict):
                return message[1], errors, seconds
            raise SandboxStop("crashed", "the worker broke the protocol")

    def call(self, name: str, args: tuple, deadline: float) -> Any:
        """Call the student's ``name(*args)`` in the worker; its plain answer, or its exception."""
        self.handles = {}
        self.send(("call", name, to_wire(args, self.handles)))
        while True:
            message = self.receive(deadline, f"{name} ran past its time limit")
            if not isinstance(message, tuple) or not message:
                raise SandboxStop("crashed", "the worker broke the protocol")
            if message[0] == "answer" and len(message) == 2:
                try:
                    return from_wire(message[1])
                except (ValueError, TypeError) as err:
                    raise _raised(
                        "NotPlainAnswer", f"the answer could not be read ({err})"
                    ) from None
            if message[0] == "raised" and len(message) == 4:
                type_name, text, where = (str(m)[:4000] for m in message[1:])
                if type_name == "MemoryError":
                    raise SandboxStop(
                        "limit", f"{name} ran out of memory (limit {self.limits.memory_mb} MB)"
                    )
                if where:
                    text = f"{text} (at {where})"
                raise _raised(type_name, text)
            if message[0] == "callback" and len(message) == 5:
                self.send(self._serve(*message[1:]))
                continue
            raise SandboxStop("crashed", "the worker broke the protocol")

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


def _plain_env(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "MPLBACKEND": "Agg",
    }


# ------------------------------------------------------------------------------ the proxy


class StudentFunction:
    """Stands for a function of the student's in the grader: calling it goes through the check's
    caller (:func:`nlpcourse.checks.core.call_student`) to the worker."""

    def __init__(self, name: str, grader: _Grader):
        self.__name__ = self.__qualname__ = name
        self._grader = grader

    def __call__(self, *args: Any) -> Any:
        return self._grader.call(self, args)

    def __repr__(self) -> str:
        return f"<your function {self.__name__}>"


class _Grader:
    """The state of grading one submission: the worker, the clock, the reasons."""

    def __init__(self, program: Program, limits: Limits, view: Path, isolation: str):
        self.program, self.limits, self.view, self.isolation = program, limits, view, isolation
        self.worker: Worker | None = None
        self.names: dict[str, str] = {}
        self.cell_errors: dict[str, str] = {}
        self.skipped: set[int] = set()  # cells that broke a limit: left out of every restart
        self.cell_status: dict[str, tuple[str, str]] = {}  # grade_id -> (status, reason)
        self.spent = 0.0  # wall-clock spent waiting for the worker (the limits count this)
        self._since: float | None = None  # when the wait under way began
        self.student_seconds = 0.0  # the cells' own time (as the worker measured it) and calls
        self.reasons: list[str] = []
        self.needs_review = False
        self.unstartable = ""  # why no worker can be started (then no part tries again)

    # -- the clock: a call or cell gets call_seconds, the whole submission notebook_seconds

    def used(self) -> float:
        """Seconds of the notebook's time limit used so far."""
        return self.spent + (time.monotonic() - self._since if self._since is not None else 0.0)

    def deadline(self, trusted: bool = False) -> float:
        """When the wait under way must end: ``call_seconds`` for a cell or call of the student's
        (``trusted=False``), at most what is left of ``notebook_seconds``."""
        left = max(0.0, self.limits.notebook_seconds - self.used())
        return time.monotonic() + (left if trusted else min(self.limits.call_seconds, left))

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        self._since = time.monotonic()
        try:
            yield
        finally:
            self.spent += time.monotonic() - self._since
            self._since = None

    def out_of_time(self) -> bool:
        return self.used() >= self.limits.notebook_seconds - 0.01

    # -- the worker

    def start(self) -> bool:
        """Start a worker and run the program; False when no worker could be made ready."""
        while not self.out_of_time():
            cells = [c for i, c in enumerate(self.program.cells) if i not in self.skipped]
            indices = [i for i in range(len(self.program.cells)) if i not in self.skipped]
            try:
                self.worker = Worker(cells, self.limits, self.view, self.isolation)
            except OSError as err:
                self.unstartable = f"the sandbox could not start: {err}"
                self.reasons.append(self.unstartable)
                self.needs_review = True
                return False
            try:
                with self.timed():
                    names, errors, seconds = self.worker.run_cells(self.deadline)
                self.student_seconds += seconds
            except SandboxStop as stop:
                self.student_seconds += self.limits.call_seconds if self.worker.cell >= 0 else 0
                cell = self.worker.cell
                self.worker.stop()
                said = self.worker.output.kept.decode("utf-8", "replace")[-2000:].strip()
                self.worker = None
                if not 0 <= cell < len(indices):
                    self.unstartable = f"the worker could not start: {stop.reason}" + (
                        f"; it printed: {said}" if said else ""
                    )
                    self.reasons.append(self.unstartable)
                    self.needs_review = True
                    return False
                bad = self.program.cells[indices[cell]]
                self.skipped.add(indices[cell])
                status = "timed_out" if stop.status == "timed_out" else stop.status
                reason = f"the cell {bad['label']!r} was stopped: {stop.reason}"
                self.cell_status.setdefault(bad["grade_id"], (status, reason))
                self.reasons.append(reason + "; it was left out and the rest graded")
                self.needs_review = True
                continue
            self.names = names
            for cell, error in zip(cells, errors, strict=False):
                if error and cell["label"] not in self.cell_errors:
                    if not (isinstance(error, tuple) and len(error) == 3):
                        error = ("an error", repr(error)[:200], "")  # not what the worker sends
                    type_name, message, where = (str(e) for e in error)
                    text = f"{type_name}: {message}"[:500] + (f" (at {where})" if where else "")
                    self.cell_errors[cell["label"]] = text
            return True
        return False

    def call(self, function: StudentFunction, args: tuple) -> Any:
        if self.worker is None:
            raise SandboxStop("crashed", "no worker is running")
        if self.out_of_time():
            raise SandboxStop(
                "timed_out", f"the notebook's time limit ({self.limits.notebook_seconds:g} s)"
            )
        started = time.monotonic()
        try:
            with self.timed():
                return self.worker.call(function.__name__, args, self.deadline())
        finally:
            self.student_seconds += time.monotonic() - started

    def caller(self, function: Callable, args: tuple) -> Any:
        """The checks' caller: a proxy goes to the worker; anything else runs here as before."""
        if isinstance(function, StudentFunction):
            return function(*args)
        from nlpcourse.checks.core import call_in_process

        return call_in_process(function, args)

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.worker = None

    # -- one test cell

    def grade(self, part: Part) -> PartResult:
        from nlpcourse.checks.core import use_caller

        for grade_id in part.solution_ids:
            if grade_id in self.cell_status:
                status, reason = self.cell_status[grade_id]
                return PartResult(part.grade_id, 0.0, part.points, status, reason)
        if self.unstartable:
            return PartResult(part.grade_id, 0.0, part.points, "crashed", self.unstartable)
        if self.worker is None and not self.start():
            if self.unstartable:
                return PartResult(part.grade_id, 0.0, part.points, "crashed", self.unstartable)
            reason = f"the notebook's time limit ({self.limits.notebook_seconds:g} s) was reached"
            return PartResult(part.grade_id, 0.0, part.points, "timed_out", reason)
        namespace: dict[str, Any] = {"__name__": "__grader__", "__builtins__": builtins}
        for name, kind in self.names.items():
            if kind == "callable" and isinstance(name, str) and name.isidentifier():
                namespace[name] = StudentFunction(name, self)
        printed = io.StringIO()
        try:
            code = compile(part.test_source, f"<test {part.grade_id}>", "exec")
            with (
                use_caller(self.caller),
                contextlib.redirect_stdout(printed),
                contextlib.redirect_stderr(printed),
            ):
                exec(code, namespace)
        except SandboxStop as stop:
            self.stop()  # a fresh worker for the parts still to grade
            self.needs_review = True
            self.reasons.append(f"{part.grade_id}: {stop.reason}")
            return PartResult(part.grade_id, 0.0, part.points, stop.status, stop.reason)
        except NameError as err:
            return PartResult(part.grade_id, 0.0, part.points, "missing", self._missing(part, err))
        except AssertionError as err:  # CheckFailed
            return PartResult(part.grade_id, 0.0, part.points, "failed", str(err))
        except Exception as err:
            return PartResult(
                part.grade_id, 0.0, part.points, "error", f"{type(err).__name__}: {err}"
            )
        return PartResult(part.grade_id, part.points, part.points, "passed", "")

    def _missing(self, part: Part, err: NameError) -> str:
        name = getattr(err, "name", None) or str(err)
        kind = self.names.get(name)
        if kind is not None:
            return f"{name} is a {kind}, not a function"
        cells = [self.cell_errors[g] for g in part.solution_ids if g in self.cell_errors]
        if cells:
            return f"{name} is not defined: its cell raised {cells[0]}"
        return (
            f"{name} is not defined: no solution cell of the notebook defines it (the cell "
            f"with nbgrader grade_id {part.solution_ids[0] if part.solution_ids else name!r} "
            "must hold it)"
        )


# ------------------------------------------------------------------------------ grading


def grade_submission(
    notebook_bytes: bytes,
    notebook_name: str,
    source: dict,
    *,
    assignment: str,
    student: str,
    limits: Limits = Limits(),
    expected_name: str | None = None,
) -> SubmissionResult:
    """Grade one submitted notebook against the ``source`` (solutions/) notebook; never raises for
    anything the submission does (see the module docstring)."""
    started = time.monotonic()
    checksum = hashlib.sha256(notebook_bytes).hexdigest()
    isolation = isolation_available()
    empty = build_program({"cells": []}, source)

    def result(parts: list[PartResult], status: str, reasons: list[str], review: bool,
               student_seconds: float = 0.0) -> SubmissionResult:  # fmt: skip
        return SubmissionResult(
            assignment, student, notebook_name, checksum, parts, status, reasons, review,
            time.monotonic() - started, student_seconds, isolation,
        )  # fmt: skip

    def zeros(status: str, message: str) -> list[PartResult]:
        return [PartResult(p.grade_id, 0.0, p.points, status, message) for p in empty.parts]

    if expected_name is not None and notebook_name != expected_name:
        reason = f"expected the notebook {expected_name}, found {notebook_name}"
        return result(zeros("missing", reason), "rejected", [reason], True)
    try:
        submission = read_notebook(notebook_bytes, limits)
    except Rejected as err:
        return result(zeros("missing", str(err)), "rejected", [str(err)], True)
    program = build_program(submission, source)
    grader = _Grader(program, limits, student_view.cached_view(), isolation)
    grader.reasons += program.reasons
    parts: list[PartResult] = []
    try:
        for part in program.parts:
            parts.append(grader.grade(part))
    finally:
        grader.stop()
    reasons = grader.reasons
    for label, error in grader.cell_errors.items():
        reasons.append(f"the cell {label!r} raised {error}")
    statuses = {p.status for p in parts}
    if "timed_out" in statuses:
        status = "timed_out"
    elif statuses & {"crashed", "limit"}:
        status = "crashed"
    elif grader.needs_review:
        status = "needs_review"
    elif sum(p.points for p in parts) == 0:
        status = "zero"
    else:
        status = "graded"
    review = status in ("timed_out", "crashed", "needs_review")
    return result(parts, status, reasons, review, grader.student_seconds)


def grade_file(path: str | Path, source_path: str | Path, **kwargs: Any) -> SubmissionResult:
    """:func:`grade_submission` of a notebook file against a source notebook file."""
    path, source_path = Path(path), Path(source_path)
    source = json.loads(source_path.read_text(encoding="utf-8"))
    kwargs.setdefault("assignment", source_path.parent.name)
    kwargs.setdefault("student", path.parent.name)
    kwargs.setdefault("expected_name", source_path.name)
    return grade_submission(path.read_bytes(), path.name, source, **kwargs)
