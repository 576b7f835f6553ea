"""One class grader per assignment and gradebook, one gradebook writer at a time (issue 32).

Two ``python -m autograder grade`` runs on the same assignment and gradebook would grade every
student twice, and on a new gradebook or a new assignment both would create the same rows (a
duplicate ``CREATE TYPE`` or ``UNIQUE constraint failed: course.id``). So:

* **one run per assignment**: :func:`one_run_per_assignment` holds a lock for the whole run of
  ``grade_assignment``. A second run on the same assignment and gradebook does not wait (it would
  then grade nothing, or everything again): it stops at once with :class:`Busy`, one line naming
  the run that holds the assignment (host, process id, when it started);
* **one writer at a time**: :func:`one_writer_at_a_time` holds a second lock, per gradebook, while
  a function creates or writes gradebook rows (the assignment recorded, the grader's table
  created, one result recorded). Graders of different assignments wait for each other there, a
  fraction of a second each time, so a new student or a new gradebook is never created twice.

The locks live where the gradebook does, so they hold for every process that uses it:

* SQLite: ``flock`` on a file beside the database (``gradebook.db.<name>.lock``), which also holds
  the holder's description. ``sqlite://`` (in memory) belongs to one process and needs no lock;
* PostgreSQL: the server's session advisory locks (``pg_try_advisory_lock``), held by a connection
  of their own whose ``application_name`` describes the run. A process killed in any way releases
  both kinds of lock (the kernel closes the file, the server ends the session).

Other databases get no lock, and the grader says so.
"""

from __future__ import annotations

import fcntl
import functools
import inspect
import os
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from autograder import postgres

P = ParamSpec("P")
R = TypeVar("R")

# The first key of every advisory lock the grader takes on a PostgreSQL server (its other key names
# the assignment), so that the grader's locks do not meet those of another program.
PG_CLASS = 0x4E4C50  # "NLP"
PG_WRITER = 0  # the second key of the writer's lock; an assignment's is never 0


class Busy(Exception):
    """Another run holds the assignment; the message names it."""


def describe_run(assignment: str) -> str:
    """How a run is named to another one: assignment, host, process id, start time (UTC)."""
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"grade {assignment} pid {os.getpid()} on {socket.gethostname()} since {started}"


def _assignment_key(assignment: str) -> int:
    """A nonzero signed 32-bit key for the assignment's advisory lock."""
    key = zlib.crc32(assignment.encode()) & 0x7FFFFFFF
    return key or 1


def _sqlite_path(db_url: str) -> Path | None:
    """The database file of a SQLite URL, or None for an in-memory database."""
    from sqlalchemy.engine import make_url

    database = make_url(db_url).database
    if not database or database == ":memory:":
        return None
    return Path(database).resolve()


def _backend(db_url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(db_url).get_backend_name()


# ---------------------------------------------------------------------- one run per assignment


@contextmanager
def assignment_lock(db_url: str, assignment: str) -> Iterator[None]:
    """Hold ``assignment`` of the gradebook at ``db_url`` for one run, or raise :class:`Busy`."""
    backend = _backend(db_url)
    if backend == "sqlite":
        path = _sqlite_path(db_url)
        if path is None:
            yield
            return
        with _file_lock(path, f"grading-{assignment}", describe_run(assignment), wait=False):
            yield
    elif backend == "postgresql":
        key, holder = _assignment_key(assignment), describe_run(assignment)
        with postgres.advisory_lock(db_url, PG_CLASS, key, holder, wait=False, busy=Busy):
            yield
    else:
        print(f"note: no lock on a {backend} gradebook: run one grader per assignment at a time")
        yield


def one_run_per_assignment(function: Callable[P, R]) -> Callable[P, R]:
    """Decorate ``grade_assignment(course, assignment_name, ...)``: the run holds the assignment."""

    first_two = list(inspect.signature(function).parameters)[:2]

    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        given = inspect.signature(function).bind_partial(*args, **kwargs).arguments
        course, assignment = (given[name] for name in first_two)
        db_url = str(course.db_url)
        postgres.check_gradebook(db_url)
        with assignment_lock(db_url, str(assignment)):
            return function(*args, **kwargs)

    return run


# ------------------------------------------------------------------------ one writer at a time

_held = threading.local()  # the writer's locks this thread holds, by URL: a decorated function may
# call another one


@contextmanager
def writer_lock(db_url: str) -> Iterator[None]:
    """Wait until no other process writes the gradebook at ``db_url``, then hold it."""
    held: dict[str, int] = getattr(_held, "urls", None) or {}
    _held.urls = held
    if held.get(db_url):
        held[db_url] += 1
        try:
            yield
        finally:
            held[db_url] -= 1
        return
    backend = _backend(db_url)
    if backend == "sqlite" and _sqlite_path(db_url) is not None:
        path = _sqlite_path(db_url)
        assert path is not None
        lock: Any = _file_lock(path, "writer", describe_run("(writing)"), wait=True)
    elif backend == "postgresql":
        lock = postgres.advisory_lock(db_url, PG_WRITER, 0, describe_run("(writing)"), wait=True)
    else:
        lock = _nothing()
    with lock:
        held[db_url] = 1
        try:
            yield
        finally:
            held[db_url] = 0


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _url_of(first: Any) -> str:
    """The gradebook URL of a decorated function's first argument: a URL, a course (``db_url``) or
    an nbgrader ``Gradebook`` (its engine's URL, password included)."""
    if isinstance(first, str):
        return first
    if hasattr(first, "db_url"):
        return str(first.db_url)
    return str(first.engine.url.render_as_string(hide_password=False))


def one_writer_at_a_time(function: Callable[P, R]) -> Callable[P, R]:
    """Decorate a function whose first argument is a gradebook URL, a course or a ``Gradebook``:
    it runs while no other process writes that gradebook."""

    first = list(inspect.signature(function).parameters)[0]

    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        given = inspect.signature(function).bind_partial(*args, **kwargs).arguments
        with writer_lock(_url_of(given[first])):
            return function(*args, **kwargs)

    return run


# ------------------------------------------------------------------------------ SQLite: flock


def _holder(fd: int, tries: int = 50, pause_s: float = 0.02) -> str:
    """Who holds the lock file ``fd``: its text. The holder writes it just after taking the lock,
    so an empty file is read again for up to ``tries * pause_s`` seconds."""
    for _ in range(tries):
        text = os.pread(fd, 4096, 0).decode(errors="replace").strip()
        if text:
            return text
        time.sleep(pause_s)
    return ""


@contextmanager
def _file_lock(database: Path, name: str, holder: str, *, wait: bool) -> Iterator[None]:
    """``flock`` on ``<database>.<name>.lock``; the file says who holds it."""
    path = database.with_name(f"{database.name}.{name}.lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            other = _holder(fd) or "another run"
            raise Busy(
                f"{name.removeprefix('grading-')} of {database} is being graded by {other}: "
                "wait for it to finish (or stop it), then run again"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
