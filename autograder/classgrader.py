"""The class grader: ``python -m autograder grade <assignment>`` grades a whole class (issue 11).

An instructor runs it instead of ``nbgrader autograde``. It reads nbgrader's layout and
configuration (``autograder/nbgrader_config.py``: ``submitted/<student>/<assignment>/<nb>.ipynb``,
the source notebook in ``solutions/<assignment>/``, the gradebook's ``db_url``) and keeps nbgrader's
files and gradebook, so ``nbgrader export``, ``nbgrader generate_feedback`` and formgrader keep
working. How one run goes:

1. **The assignment** is recorded in the gradebook as ``nbgrader generate_assignment`` records it
   (its converter is run, writing the release version to a temporary folder, so ``exercises/`` is
   not touched); that release version is what students see of the test cells.
2. **The submissions** are found, each file's bytes hashed (sha256) and none kept. A student
   whose result is already in the gradebook for a file with the same checksum is skipped
   (``--regrade`` grades again), so a run resumes where an earlier one stopped and a changed file
   is graded again. Every file is read bounded before a byte of it is read (its size on the open
   file, never through a link, ``timestamp.txt`` included), and file names that are not UTF-8 or
   hold control characters are shown escaped (issue 41 §4, issue 40 §5).
3. **One Dask task per submission** calls :func:`autograder.sandbox.grade_submission` with the
   file's bytes and the source notebook (sent with the task: workers need no shared filesystem),
   on a local cluster sized to the machine (``--workers``) or on an existing scheduler
   (``--scheduler tcp://host:8786``). The task runs the student's code in a sandbox and returns
   plain data. Workers never touch the gradebook or the course's files. The submissions stream:
   a file is read when its task is sent, and only a few tasks per worker thread are in flight,
   so the coordinator's memory does not grow with the class.
4. **One coordinator** (this process) takes results as they arrive (``distributed.as_completed``)
   and for each one writes the autograded notebook (``autograded/<student>/<assignment>/``: the
   student's notebook with the test cells as the release version shows them, no hidden tests, and
   each failed check's message as the cell's output; ``timestamp.txt`` copied), then records the
   grades in one transaction (:mod:`autograder.gradebook_writer`). Killing the coordinator loses
   only the submissions in flight. A task that fails for a reason that is not the student's (a
   worker lost three times, a broken worker environment) is reported and left ungraded, so the
   next run grades it.
5. **What the instructor sees**: a progress bar, the per-student feedback HTML (nbgrader's
   ``generate_feedback`` with the course's configuration, which shows the check messages and never
   hidden tests), a summary (graded / zero / timed out / crashed / rejected / needs review, with the
   reasons), and a CSV (student, score, max, status, needs review, reasons).

The submitted files are only read, never modified. Each Dask worker process grades one submission
at a time (the checks' caller and the reference guard are process-wide), so start remote workers
with one thread each (``dask worker tcp://host:8786 --nworkers 16 --nthreads 1``), with this
repository's environment installed (``pip install -r requirements.txt``).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import errno
import functools
import hashlib
import json
import logging
import os
import shutil
import socket
import stat
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autograder import lock, postgres
from autograder.course import (
    Course,
    CourseError,
    add_course_arguments,
    grade_ids,
    is_test_cell,
    load_course,
)
from autograder.inert import escaped, for_terminal, for_text
from autograder.results import (
    DEFAULT_LIMITS,
    REVIEWED,
    STATUSES,
    Limits,
    PartStatus,
    Status,
    SubmissionResult,
    zero_parts,
)

# nbformat is imported where the coordinator uses it, not here: each Dask worker imports this
# module for its tasks, and importing nbformat (jsonschema's format checkers with it) takes seconds
# of CPU in every process that does (3.5 s on the 2-core machine of benchmarks/README.md)
if TYPE_CHECKING:
    from nbformat.notebooknode import NotebookNode

# A busy machine (a class graded beside other work) may leave a worker unanswered for longer than
# Dask's defaults (30 s) allow; a file of 50 MB or more takes a while to send.
PATIENT = {"distributed.comm.timeouts.connect": "120s", "distributed.comm.timeouts.tcp": "600s"}
# The memory of each local Dask worker (the grader's own process; the sandbox limits each student):
# a message is bounded on the wire, and this bounds the grader if anything else grows.
WORKER_MEMORY = "4GiB"
ENAMES: dict[PartStatus, str] = {  # how a part that scored nothing shows in the feedback
    "failed": "CheckFailed",
    "error": "Error",
    "timed_out": "TimedOut",
    "crashed": "Crashed",
    "limit": "LimitExceeded",
    "missing": "Missing",
}


@dataclass
class Assignment:
    """An assignment as the grader needs it."""

    name: str  # e.g. "01-ngrams"
    notebook: str  # the notebook's file name, e.g. "ngrams.ipynb"
    source: dict  # the solutions/ notebook as JSON: setup, tests (hidden included), points
    release: NotebookNode  # what students got: test cells without the hidden tests

    @property
    def notebook_id(self) -> str:
        return Path(self.notebook).stem

    def test_cells(self) -> list[tuple[str, float]]:
        """``(grade_id, points)`` of every test cell of the source, in order."""
        return [
            (gid, float(m["points"])) for gid, m, _ in grade_ids(self.source) if is_test_cell(m)
        ]


def source_notebook(course: Course, name: str) -> tuple[Path, dict]:
    """The path of the assignment's source notebook (it must have exactly one), and its JSON."""
    folder = course.folder(course.coursedir.source_directory, ".", name)
    notebooks = sorted(folder.glob("*.ipynb"))
    if not notebooks:
        raise CourseError(f"assignment {name!r}: no notebook in {folder}")
    if len(notebooks) > 1:
        raise CourseError(
            f"assignment {name!r}: the class grader grades one notebook per assignment, "
            f"{folder} has {len(notebooks)}: {', '.join(p.name for p in notebooks)}"
        )
    return notebooks[0], json.loads(notebooks[0].read_text(encoding="utf-8"))


@lock.one_writer_at_a_time  # a new gradebook, course or assignment is created once (issue 32)
def prepare_assignment(course: Course, name: str) -> Assignment:
    """Read the assignment's source notebook and record the assignment in the gradebook as
    ``nbgrader generate_assignment`` does, without writing to the release folder."""
    from nbgrader.converters import GenerateAssignment

    notebook, source = source_notebook(course, name)
    config = copy.deepcopy(course.config)
    with tempfile.TemporaryDirectory(prefix="autograder-release-") as release_dir:
        config.CourseDirectory.release_directory = release_dir
        from nbgrader.coursedir import CourseDirectory

        coursedir = CourseDirectory(config=config)
        coursedir.assignment_id = name
        converter = GenerateAssignment(coursedir=coursedir, config=config)
        converter.force = True
        converter.log.setLevel(logging.WARNING)
        converter.start()
        import nbformat

        release = nbformat.read(Path(release_dir) / name / notebook.name, as_version=4)
    return Assignment(name, notebook.name, source, release)


# ------------------------------------------------------------------------------ submissions

# Everything the grader reads from a submission folder is bounded before it is read (issue 41 §4):
# nbgrader's timestamp.txt is one line of about 30 characters; a folder holds a few files.
TIMESTAMP = "timestamp.txt"  # the submission time, written by nbgrader beside the notebook
TIMESTAMP_BYTES = 1024
FOLDER_ENTRIES = 1000  # names listed in one submission folder; more and the folder is refused
NAMES_SHOWN = 10  # file names a reason lists before "and N more"
CHUNK = 2**20  # bytes read at a time


class Unreadable(Exception):
    """A file of a submission folder the grader will not read; the message says why, without
    quoting the file."""


def read_chunks(path: Path, limit: int) -> Iterator[bytes]:
    """The bytes of the plain file ``path``, at most ``limit`` of them, in chunks; else
    :class:`Unreadable`. The file is opened without following a link (``O_NOFOLLOW``) and without
    waiting on a FIFO (``O_NONBLOCK``); its type and size are checked on the open file before a
    byte is read, and no more than ``limit + 1`` bytes are ever read, so a link, a device or a
    sparse file of a gigabyte costs nothing (issue 41 §4)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise Unreadable("is a link, not a file") from None
        raise Unreadable(f"cannot be opened ({error.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable("is not a plain file")
        if info.st_size > limit:
            raise Unreadable(f"is {size_text(info.st_size)}, over the limit of {size_text(limit)}")
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, CHUNK))
            if not chunk:
                return
            left -= len(chunk)
            if left <= 0:
                raise Unreadable(f"grew over the limit of {size_text(limit)} while it was read")
            yield chunk
    finally:
        os.close(fd)


def read_bounded(path: Path, limit: int) -> bytes:
    """The whole of :func:`read_chunks`."""
    return b"".join(read_chunks(path, limit))


def size_text(n: int) -> str:
    """A size in words: ``"512 bytes"``, ``"3.0 MB"``, ``"1,024 MB"``."""
    return f"{n:,} bytes" if n < 2**20 else f"{n / 2**20:,.1f} MB"


def shown_name(name: str) -> str:
    """A file or folder name as reasons, the gradebook and the terminal show it: each byte that is
    not UTF-8 (Python keeps it as a lone surrogate) written ``\\xff``, and every control character
    and the like escaped by :func:`autograder.inert.for_terminal`; a plain name is unchanged."""
    try:
        name = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file system gave: for_terminal escapes it
        pass
    return for_terminal(name)


def is_odd_name(name: str) -> bool:
    """A name that cannot be stored in the gradebook or printed as it is (:func:`shown_name`)."""
    return shown_name(name) != name


def names_text(names: Sequence[str]) -> str:
    """Some file names for a reason, each shown safely, at most :data:`NAMES_SHOWN` of them."""
    shown = ", ".join(shown_name(n) for n in names[:NAMES_SHOWN])
    more = len(names) - NAMES_SHOWN
    return shown + (f" and {more:,} more" if more > 0 else "")


@dataclass
class Submission:
    """One student's handed-in notebook, as read (never written) by the grader.

    Found by :func:`find_submissions`, which hashes the file but keeps none of it; its bytes are
    read into ``data`` when its task is sent and dropped once its result is recorded, so the
    coordinator holds only the files in flight, whatever the size of the class (issue 41 §4)."""

    student: str
    folder: Path  # submitted/<student>/<assignment>
    name: str  # the file's name as shown (see shown_name); "" when there is none
    data: bytes  # the file's bytes while it is graded
    checksum: str  # sha256 of the file, or of why there is nothing to grade
    timestamp: str | None  # nbgrader's timestamp.txt, when it is one
    problem: str = ""  # why it is not sent to a worker ("" when it is)
    notes: list[str] = field(default_factory=list)  # said beside the result
    path: Path | None = None  # the file to grade, under its real name
    size: int = 0  # its size in bytes when it was found
    flags: list[str] = field(default_factory=list)  # said beside the result, which is flagged


def find_submissions(
    course: Course,
    assignment: Assignment,
    students: Sequence[str] = (),
    max_mb: int = DEFAULT_LIMITS.submission_mb,
) -> tuple[list[Submission], dict[str, str]]:
    """Every student folder ``submitted/<student>/<assignment>/``, sorted by student id; and the
    folders that cannot be graded at all (a student id that is not UTF-8 text or holds control
    characters cannot be stored in the gradebook), by their shown name, with the reason."""
    step = course.coursedir.submitted_directory
    top = course.folder(step, ".", ".")
    found, refused = [], {}
    if top.is_dir():
        for folder in sorted(top.iterdir()):
            if students and folder.name not in students:
                continue
            if not (folder / assignment.name).is_dir():
                continue
            if is_odd_name(folder.name):
                refused[shown_name(folder.name)] = (
                    "the student folder's name is not UTF-8 text or holds control characters, "
                    "so it cannot be a student id: rename the folder"
                )
                continue
            found.append(read_submission(folder.name, folder / assignment.name, assignment, max_mb))
    missing = sorted(set(students) - {s.student for s in found})
    if missing:
        print(f"no submission of {assignment.name} in {top} for: {names_text(missing)}")
    return found, refused


def read_timestamp(folder: Path) -> tuple[str | None, list[str]]:
    """nbgrader's ``timestamp.txt`` of a submission folder, and a flag when it is there but not a
    timestamp nbgrader reads (too large, a link, not UTF-8, not a date). Such a submission is
    graded without a time (no late penalty) and flagged; the file is never quoted."""
    from autograder.gradebook_writer import timestamp_utc

    path = folder / TIMESTAMP
    if not os.path.lexists(path):
        return None, []
    try:
        text = read_bounded(path, TIMESTAMP_BYTES).decode("utf-8").strip()
        timestamp_utc(text)
    except Unreadable as error:
        why = str(error)
    except UnicodeDecodeError:
        why = "is not UTF-8 text"
    except (ValueError, OverflowError):
        why = "is not a date and time"
    else:
        return text, []
    return None, [
        f"timestamp.txt {why}: graded without a submission time, so no late penalty was "
        "applied; put nbgrader's timestamp there (or remove the file) and run again with --regrade"
    ]


def read_submission(
    student: str, folder: Path, assignment: Assignment, max_mb: int = DEFAULT_LIMITS.submission_mb
) -> Submission:
    """Find the notebook a student handed in (the expected name first, else the only notebook)
    and hash it; nothing of it is kept. A folder or file that is a link, a folder of more than
    :data:`FOLDER_ENTRIES` entries, and a notebook over ``max_mb`` are refused with the reason."""
    names: list[str] = []
    timestamp: str | None = None
    flags: list[str] = []

    def refused(problem: str) -> Submission:
        digest = hashlib.sha256(os.fsencode("no file: " + "\0".join(names))).hexdigest()
        return Submission(student, folder, "", b"", digest, timestamp, problem, flags=flags)

    for path in (folder.parent, folder):
        if path.is_symlink():
            return refused(f"{shown_name(path.name)} is a link, not a folder: nothing was read")
    timestamp, flags = read_timestamp(folder)
    with os.scandir(folder) as entries:
        for entry in entries:
            if len(names) == FOLDER_ENTRIES:
                return refused(f"the folder holds more than {FOLDER_ENTRIES:,} files")
            names.append(entry.name)
    names.sort()
    notebooks = [n for n in names if n.endswith(".ipynb")]
    expected = assignment.notebook
    if expected in notebooks:
        chosen = expected
    elif len(notebooks) == 1:
        chosen = notebooks[0]
    elif not notebooks:
        return refused(f"no notebook handed in: expected {expected} in {folder}")
    else:
        return refused(
            f"expected {expected}, found {' and '.join(shown_name(n) for n in notebooks)}: "
            f"rename the one to grade to {expected} and run the grader again"
        )
    path, name = folder / chosen, shown_name(chosen)
    limit = max_mb * 2**20
    digest = hashlib.sha256()
    try:
        for chunk in read_chunks(path, limit):
            digest.update(chunk)
    except Unreadable as error:
        return refused(f"{name} {error}")
    size = path.lstat().st_size
    sub = Submission(student, folder, name, b"", digest.hexdigest(), timestamp, path=path)
    sub.size, sub.flags = size, flags
    others = [n for n in names if n not in (chosen, TIMESTAMP)]
    if others:
        sub.notes.append(f"not graded, not part of the assignment: {names_text(others)}")
    return sub


def load(sub: Submission, max_mb: int) -> None:
    """Read the submission's file into ``sub.data`` (bounded as when it was found), just before
    its task is sent; a file changed since gets its new checksum. :class:`Unreadable` when it can
    no longer be read."""
    assert sub.path is not None
    sub.data = read_bounded(sub.path, max_mb * 2**20)
    sub.checksum = hashlib.sha256(sub.data).hexdigest()


def local_result(assignment: Assignment, sub: Submission, status: Status, reason: str) -> dict:
    """A result for a submission that no worker grades: every part 0."""
    parts = zero_parts(assignment.test_cells(), "missing", reason)
    result = SubmissionResult(
        assignment.name, sub.student, sub.name, sub.checksum, parts, status, [reason],
        status in REVIEWED, 0.0, 0.0, "not run",
    )  # fmt: skip
    return result.as_dict()


# ------------------------------------------------------------------------------ the Dask task

_one_at_a_time = threading.Lock()  # one grading per worker process (see the module docstring)


def grade_task(
    data: bytes,
    name: str,
    source: dict,
    assignment: str,
    student: str,
    limits: dict,
    expected_name: str,
    grade_function: Callable | None = None,
) -> dict:
    """What a Dask worker runs for one submission: ``grade_submission`` on the bytes, its result
    as a plain dict. ``grade_function`` replaces ``grade_submission`` (tests use a stand-in with
    the same signature; it gets ``limits`` as a dict)."""
    with _one_at_a_time:
        if grade_function is None:
            from autograder.sandbox import grade_submission

            # each Dask worker grades one submission after another: the next one's sandboxed
            # worker starts while this one is graded (autograder.sandbox.Ahead)
            grade: Callable = functools.partial(grade_submission, ahead=True)
            bounds: Any = Limits(**limits)
        else:
            grade, bounds = grade_function, dict(limits)
        result = grade(
            data,
            name,
            source,
            assignment=assignment,
            student=student,
            limits=bounds,
            expected_name=expected_name,
        )
    out = dataclasses.asdict(result) if dataclasses.is_dataclass(result) else dict(result)
    out["worker"] = f"{socket.gethostname()}:{os.getpid()}"
    return out


def warm_task(source: dict, limits: dict) -> str:
    """What each Dask worker runs first, while the coordinator prepares the assignment: import
    what grading needs and start the sandboxed worker of its first submission
    (:func:`autograder.sandbox.start_ahead`), so that the first submission costs what the others
    do."""
    with _one_at_a_time:
        from autograder.sandbox import start_ahead

        start_ahead(source, Limits(**limits))
    return f"{socket.gethostname()}:{os.getpid()}"


def done_task() -> str:
    """What each Dask worker runs once the class is graded: stop the sandboxed worker it started
    for a next submission that will not come (a worker process that is killed, not closed, would
    leave it behind: its sandbox dies with the process, its staging folder would not)."""
    with _one_at_a_time:
        from autograder.sandbox import AHEAD

        AHEAD.discard()
    return f"{socket.gethostname()}:{os.getpid()}"


def on_every_worker(dask: Any, task: Callable, *args: Any) -> list[Any]:
    """Send ``task(*args)`` to every worker of the cluster, as a task (so it waits for the one
    under way there); its futures."""
    workers = list(dask.scheduler_info().get("workers", {}))
    return [
        dask.submit(task, *args, workers=[address], allow_other_workers=False, pure=False,
                    key=f"{task.__name__}-{address}-{uuid.uuid4().hex[:8]}")
        for address in workers
    ]  # fmt: skip


def _wait_quietly(futures: list[Any], seconds: float = 60) -> None:
    """Wait for ``futures`` (a worker lost meanwhile is not an error of the class's)."""
    from distributed import wait

    with contextlib.suppress(Exception):
        wait(futures, timeout=seconds)
    for future in futures:
        future.release()


def submitted_any(course: Course, assignment: str, students: Sequence[str]) -> bool:
    """Whether any student folder holds a submission of ``assignment`` (a cheap look, before the
    submissions are read: the cluster then starts while the assignment is prepared)."""
    top = course.folder(course.coursedir.submitted_directory, ".", ".")
    folders = (top / s for s in students) if students else top.glob("*")
    return any((folder / assignment).is_dir() for folder in folders)


@contextmanager
def dask_client(scheduler: str | None, workers: int | None) -> Iterator[Any]:
    """A client of the scheduler at ``scheduler``, or of a local cluster of ``workers`` processes
    (default: one per CPU core this process may use), each with one thread."""
    import dask
    from distributed import Client, LocalCluster

    if scheduler:
        with Client(scheduler) as client:
            yield client
        return
    n = workers or len(os.sched_getaffinity(0))
    with (
        dask.config.set(PATIENT),
        LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # any free port: several graders may run on one machine
            memory_limit=WORKER_MEMORY,
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


# ------------------------------------------------------------------------------ the coordinator


def error_output(ename: str, evalue: str) -> NotebookNode:
    """An ``error`` output as a kernel sends it: nbgrader reads such a test cell as failed."""
    import nbformat

    return nbformat.from_dict(
        {
            "output_type": "error",
            "ename": ename,
            "evalue": evalue,
            "traceback": [f"{ename}: {evalue}"],
        }
    )


def autograded_notebook(
    assignment: Assignment, sub: Submission, result: dict
) -> tuple[NotebookNode, set[str]]:
    """The autograded notebook of a result, and the grade_ids of the solution cells left as handed
    out. The student's notebook with outputs cleared, every test and setup cell as the release
    version has it (a deleted one put back, a duplicated one graded once), and each test cell's
    output the check's message when it did not pass. A file that cannot be read as a notebook is
    shown as the release notebook with the reasons on top."""
    import nbformat
    from nbgrader.utils import compute_checksum

    release = {gid: cell for gid, _, cell in grade_ids(assignment.release)}
    nb = None
    if sub.data and result["status"] != "rejected":
        try:
            nb = nbformat.reads(sub.data.decode("utf-8"), as_version=4)
            nb.cells = [c for c in nb.cells if c.get("cell_type") in ("code", "markdown", "raw")]
        except Exception:  # malformed: the worker said why, in the result's reasons
            nb = None
    if nb is None:
        nb = copy.deepcopy(assignment.release)
        # the reasons name the student's file: shown as text (markup in a name is not markup)
        note = "**Not graded as handed in.** " + escaped(" ".join(result["reasons"]))
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(note))
        return _with_outputs(nb, result), set(release) & _solution_ids(assignment)

    seen: set[str] = set()
    for index in reversed(range(len(nb.cells))):  # the last copy of a grade_id counts, as nbgrader
        cell = nb.cells[index]
        meta = cell.get("metadata", {}).get("nbgrader")
        gid = meta.get("grade_id") if isinstance(meta, dict) else None
        if gid is None:
            continue
        if gid in seen or gid not in release:  # a copy, or a renamed cell: a plain cell
            del cell.metadata["nbgrader"]
            continue
        seen.add(gid)
        ref = release[gid]
        if ref.metadata["nbgrader"].get("solution") and cell.cell_type == ref.cell_type:
            cell.metadata["nbgrader"] = copy.deepcopy(ref.metadata["nbgrader"])
        else:  # test and setup cells (and a solution cell of the wrong type): the release's
            nb.cells[index] = copy.deepcopy(ref)
    order = list(release)
    for gid in order:  # put back deleted cells after the nearest earlier cell still there
        if gid in seen:
            continue
        present = [c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.cells]
        before = [i for i, g in enumerate(present) if g in order[: order.index(gid)]]
        nb.cells.insert(before[-1] + 1 if before else 0, copy.deepcopy(release[gid]))
        seen.add(gid)
    ids: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        if "id" in cell and cell.id in ids:  # a pasted copy, or a cell put back
            cell.id = uuid.uuid4().hex[:8]
        ids.add(cell.get("id"))
    unanswered = set()
    for gid, meta, cell in grade_ids(nb):
        if meta.get("solution") and meta.get("checksum") == compute_checksum(cell):
            unanswered.add(gid)
    return _with_outputs(nb, result), unanswered


def _solution_ids(assignment: Assignment) -> set[str]:
    return {gid for gid, meta, _ in grade_ids(assignment.release) if meta.get("solution")}


def _with_outputs(nb: NotebookNode, result: dict) -> NotebookNode:
    parts = {p["grade_id"]: p for p in result["parts"]}
    for gid, _, cell in grade_ids(nb):
        part = parts.get(gid)
        if part is None or cell.get("cell_type") != "code":
            continue
        if float(part["points"]) < float(part["max_points"]):
            message = part["message"] or f"this part scored {part['points']:g}"
            cell.outputs = [error_output(ENAMES.get(part["status"], "Error"), message)]
    return nb


def write_autograded(
    course: Course, assignment: Assignment, sub: Submission, nb: NotebookNode
) -> None:
    """Write the autograded notebook (and ``timestamp.txt``) in place of an earlier one."""
    import nbformat

    dest = course.folder(course.coursedir.autograded_directory, sub.student, assignment.name)
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / assignment.notebook
    tmp = dest / f".{assignment.notebook}.part"
    # a lone surrogate in the student's text (a JSON "\\udcff") is written as that JSON escape
    tmp.write_bytes(nbformat.writes(nb).encode("utf-8", "backslashreplace"))
    os.replace(tmp, target)
    if sub.timestamp is not None:
        (dest / TIMESTAMP).write_text(sub.timestamp + "\n")
    elif (dest / TIMESTAMP).exists():
        (dest / TIMESTAMP).unlink()


def printed_path(course: Course, assignment: str, student: str) -> Path:
    """Where :func:`write_output` puts what a student's code printed: ``autograded/<student>/
    <assignment>-printed.txt``, beside the assignment's folder, not in it (nbgrader's feedback
    copies every file of that folder to the student)."""
    folder = course.folder(course.coursedir.autograded_directory, student, assignment)
    return folder.parent / f"{assignment}-printed.txt"


def write_output(course: Course, assignment: Assignment, sub: Submission, text: str) -> None:
    """Write what the student's code printed while graded, for the instructor; remove an earlier
    file when it printed nothing."""
    path = printed_path(course, assignment.name, sub.student)
    if text:  # control sequences and lone surrogates escaped (issue 40 §5), lines kept
        path.write_text(for_text(text), encoding="utf-8")
    elif path.exists():
        path.unlink()


def generate_feedback(course: Course, assignment: Assignment, students: Sequence[str]) -> str:
    """nbgrader's ``generate_feedback`` (with the course's configuration) for ``students``'
    autograded notebooks; returns "" or what went wrong."""
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    problems = []
    for student in students:
        old = course.folder(course.coursedir.feedback_directory, student, assignment.name)
        if old.exists():
            shutil.rmtree(old)
        coursedir = CourseDirectory(config=course.config)
        coursedir.assignment_id, coursedir.student_id = assignment.name, student
        converter = GenerateFeedback(coursedir=coursedir, config=course.config)
        converter.force = True
        converter.log.setLevel(logging.CRITICAL)
        try:
            converter.start()
        except Exception as error:
            problems.append(f"{student}: {error}")
    return "; ".join(problems)


@dataclass
class Summary:
    """What one run did."""

    assignment: str
    results: dict[str, dict] = field(default_factory=dict)  # graded this run, by student
    skipped: list[str] = field(default_factory=list)  # already graded, same file
    failed: dict[str, str] = field(default_factory=dict)  # not graded: the grader's own trouble
    seconds: float = 0.0  # the whole run, feedback and CSV excluded
    phases: dict[str, float] = field(default_factory=dict)  # wall-clock seconds of each step
    coordinator_seconds: float = 0.0  # wall-clock spent recording results (autograded + gradebook)
    feedback_problems: str = ""
    outputs: dict[str, Path | str] = field(default_factory=dict)  # where each output went, by name
    # the reviews open in the gradebook after the run, by student: (status, why); see open_reviews
    review: dict[str, tuple[str, str]] = field(default_factory=dict)

    def counts(self) -> Counter:
        return Counter(r["status"] for r in self.results.values())

    def text(self) -> str:
        """The run in words: one line per status (they add up to the submissions graded this run),
        every submission whose review is open in the gradebook, with why (:attr:`review`: this
        run's and earlier runs', none that was resolved in formgrader), and where the outputs
        went."""
        n = len(self.results)
        rate = f", {n / self.seconds * 60:.1f} per minute" if n and self.seconds else ""
        lines = [
            f"{self.assignment}: graded {n} submission(s) in {self.seconds:.1f} s{rate}; "
            f"skipped {len(self.skipped)} already graded (same file; --regrade to grade again)"
        ]
        counts = self.counts()
        for status in STATUSES:
            lines.append(f"  {status.replace('_', ' '):13s} {counts[status]:4d}")
        review = self.review
        lines.append(f"  for review    {len(review):4d}" + (" (why:)" if review else ""))
        for student, (status, why) in sorted(review.items()):
            # student text is shown inert (issue 40 §5): one line each
            shown = status.replace("_", " ")
            lines.append(f"      {for_terminal(student)} ({shown}): {for_terminal(why)}")
        lines.append(
            f"  not graded    {len(self.failed):4d}"
            + (" (run again to grade them)" if self.failed else "")
        )
        for student, why in sorted(self.failed.items()):
            lines.append(f"      {for_terminal(student)}: {for_terminal(why)}")
        if self.feedback_problems:
            lines.append(f"  feedback not written for: {for_terminal(self.feedback_problems)}")
        if self.phases:
            steps = ", ".join(f"{k} {v:.1f} s" for k, v in self.phases.items())
            per = self.coordinator_seconds / max(1, n)
            lines.append(f"  time: {steps}; recording {per:.2f} s per result")
        for name, path in self.outputs.items():
            lines.append(f"{name + ':':11s}{path}")
        return "\n".join(lines)


class Phases:
    """Wall-clock seconds of each step of a run, in the order they happen."""

    def __init__(self, into: dict[str, float]):
        self.into, self.since = into, time.monotonic()

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.into[name] = self.into.get(name, 0.0) + now - self.since
        self.since = now


def to_grade(
    course: Course, assignment: Assignment, subs: list[Submission], gb: Any, regrade: bool
) -> tuple[list[Submission], list[str]]:
    """The submissions to grade, and the students skipped: graded before, from a file with the
    same checksum, with the autograded notebook still there (unless ``regrade``)."""
    from autograder import gradebook_writer

    done = gradebook_writer.recorded(gb, assignment.name)
    todo, skipped = [], []
    for sub in subs:
        autograded = course.folder(
            course.coursedir.autograded_directory, sub.student, assignment.name
        )
        old = done.get(sub.student)
        fresh = old is not None and old.checksum == sub.checksum
        if fresh and not regrade and (autograded / assignment.notebook).is_file():
            skipped.append(sub.student)
        else:
            todo.append(sub)
    return todo, skipped


@dataclass
class Recorder:
    """The coordinator's one writer: the autograded notebook and the gradebook, per result."""

    course: Course
    assignment: Assignment
    gb: Any
    summary: Summary

    def record(self, sub: Submission, result: dict) -> None:
        began = time.monotonic()
        from autograder import gradebook_writer

        assignment = self.assignment
        result.update(assignment=assignment.name, student=sub.student, checksum=sub.checksum)
        result["notebook"] = sub.name or result.get("notebook", "")
        result["reasons"] = [*result.get("reasons", []), *sub.notes, *sub.flags]
        if sub.flags:  # something about the folder for a person to look at
            result["needs_review"] = True
            if result.get("status") in ("graded", "zero"):
                result["status"] = "needs_review"
        try:
            nb, unanswered = autograded_notebook(assignment, sub, result)
            write_autograded(self.course, assignment, sub, nb)
        except Exception as error:  # a notebook nbformat cannot write back: show the release
            shown = Submission(sub.student, sub.folder, sub.name, b"", "", sub.timestamp)
            shown_result = dict(result, reasons=[*result["reasons"], f"not shown: {error}"])
            nb, unanswered = autograded_notebook(assignment, shown, shown_result)
            write_autograded(self.course, assignment, sub, nb)
        write_output(self.course, assignment, sub, str(result.get("output", "")))
        gradebook_writer.record(
            self.gb,
            result,
            notebook_id=assignment.notebook_id,
            timestamp=sub.timestamp,
            unanswered=unanswered,
            config=self.course.config,
        )
        # kept for the summary without what the student's code printed (up to output_bytes
        # each): the coordinator's memory must not grow with the class
        self.summary.results[sub.student] = {k: v for k, v in result.items() if k != "output"}
        self.summary.coordinator_seconds += time.monotonic() - began


# Submissions stream through the cluster (issue 41 §4): at most this many tasks per worker thread
# are in flight, and at most IN_FLIGHT_BYTES of files (always at least one), so the coordinator
# and the scheduler hold a few files at a time, not the class.
TASKS_PER_THREAD = 2
IN_FLIGHT_BYTES = 512 * 2**20


@dataclass
class InFlight:
    """The submissions sent and not yet recorded, and whether one more may be sent."""

    dask: Any
    tasks: dict[str, tuple[Any, Submission]] = field(default_factory=dict)  # by task key
    bytes: int = 0
    most: int = 2 * TASKS_PER_THREAD
    checked: float = -1.0  # when the cluster's threads were last counted

    def room_for(self, sub: Submission) -> bool:
        now = time.monotonic()
        if now - self.checked > 1.0:  # workers come and go: count them at most once a second
            self.checked = now
            threads = sum(self.dask.nthreads().values())
            self.most = TASKS_PER_THREAD * max(2, threads)
        if not self.tasks:
            return True
        return len(self.tasks) < self.most and self.bytes + sub.size <= IN_FLIGHT_BYTES

    def add(self, future: Any, sub: Submission) -> None:
        self.tasks[future.key] = (future, sub)
        self.bytes += sub.size

    def pop(self, future: Any) -> Submission:
        sub = self.tasks.pop(future.key)[1]
        self.bytes -= sub.size
        return sub


def grade_on_dask(
    dask: Any,
    assignment: Assignment,
    subs: list[Submission],
    recorder: Recorder,
    *,
    limits: dict,
    progress: bool,
    grade_function: Callable | None,
    on_result: Callable[[dict, Any], None] | None,
) -> None:
    """One task per submission, a few in flight at a time (:class:`InFlight`): each file is read
    when its task is sent, and each result recorded as it arrives, which sends the next."""
    from dask import config as dask_config
    from distributed import as_completed

    summary = recorder.summary
    bar = _progress(len(subs), progress)
    # every file is sent with its task, not scattered: scattered data lives on the workers there
    # when it was sent, and a worker lost mid-run (or while a file was sent to it) took it with it,
    # leaving submissions "not graded" (issue 32). The scheduler keeps each task, file included,
    # until it is done. Dask warns of a task graph over 10 MB: files up to the limit are expected.
    max_mb = int(limits.get("submission_mb", DEFAULT_LIMITS.submission_mb))
    expected = {"distributed.admin.large-graph-warning-threshold": f"{max_mb + 1}MiB"}
    waiting = deque(subs)
    flight = InFlight(dask)
    done = as_completed()

    def send_more() -> None:
        while waiting and flight.room_for(waiting[0]):
            sub = waiting.popleft()
            try:
                load(sub, max_mb)
            except Unreadable as error:  # replaced or grown since it was found
                sub.size = 0
                sub.problem = f"{sub.name} {error}"
                recorder.record(sub, local_result(assignment, sub, "rejected", sub.problem))
                bar.update(1)
                continue
            try:
                with dask_config.set(expected):
                    future = dask.submit(
                        grade_task,
                        sub.data,
                        sub.name,
                        assignment.source,
                        assignment.name,
                        sub.student,
                        limits,
                        assignment.notebook,
                        grade_function,
                        key=f"grade-{assignment.name}-{sub.student}-{sub.checksum[:16]}",
                        pure=False,
                    )
            except Exception as error:  # the file could not be sent: the others go on
                summary.failed[sub.student] = f"not sent: {type(error).__name__}: {error}"
                sub.data = b""
                bar.update(1)
                continue
            flight.add(future, sub)
            done.add(future)

    send_more()
    for future in done:
        sub = flight.pop(future)
        if future.status == "finished":
            result = future.result()
            try:
                recorder.record(sub, result)
            except Exception as error:  # nothing was recorded (one transaction)
                summary.failed[sub.student] = f"not recorded: {error!r}"
            else:
                if on_result is not None:
                    on_result(result, dask)
        else:
            error = future.exception()
            summary.failed[sub.student] = f"{type(error).__name__}: {error}"
        sub.data = b""
        future.release()
        bar.update(1)
        send_more()
    bar.close()


@lock.one_run_per_assignment  # a second run on the assignment stops, naming this one (issue 32)
def grade_assignment(
    course: Course,
    assignment_name: str,
    *,
    students: Sequence[str] = (),
    regrade: bool = False,
    scheduler: str | None = None,
    workers: int | None = None,
    client: Any = None,
    limits: dict | None = None,
    feedback: bool = True,
    csv_path: Path | None = None,
    progress: bool = True,
    grade_function: Callable | None = None,
    on_result: Callable[[dict, Any], None] | None = None,
) -> Summary:
    """Grade every (or each named) student's submission of ``assignment_name``; see the module
    docstring. ``client`` is an existing Dask client (else one is made from ``scheduler`` or
    ``workers``); ``limits`` maps fields of :class:`autograder.results.Limits` to values;
    ``on_result(result, client)`` is called in the coordinator after each result is recorded."""
    from autograder import gradebook_writer

    start = time.monotonic()
    summary = Summary(assignment_name)
    phases = Phases(summary.phases)
    limits = dict(limits or {})
    _, source = source_notebook(course, assignment_name)  # the course's mistakes before a cluster
    warming: list[Any] = []  # held until the class is graded: a future let go is cancelled
    with ExitStack() as cluster:
        dask = None
        if submitted_any(course, assignment_name, students):
            # the cluster starts, and its workers warm up, while the assignment is prepared
            dask = cluster.enter_context(_client(client, scheduler, workers))
            phases.done("cluster start")
            if grade_function is None:  # not waited for: a worker that fails to warm up grades
                warming = on_every_worker(dask, warm_task, source, limits)  # all the same
        assignment = prepare_assignment(course, assignment_name)
        max_mb = int(limits.get("submission_mb", DEFAULT_LIMITS.submission_mb))
        subs, summary.failed = find_submissions(course, assignment, students, max_mb)
        gb = gradebook_writer.open_gradebook(course.db_url, course.course_id)
        try:
            todo, summary.skipped = to_grade(course, assignment, subs, gb, regrade)
            recorder = Recorder(course, assignment, gb, summary)
            for sub in (s for s in todo if s.problem):  # nothing a worker could grade
                status: Status = "zero" if sub.problem.startswith("no notebook") else "rejected"
                recorder.record(sub, local_result(assignment, sub, status, sub.problem))
            remote = [s for s in todo if not s.problem]
            phases.done("prepare")
            if remote:
                if dask is None:  # a student named who had not handed in then, and has now
                    dask = cluster.enter_context(_client(client, scheduler, workers))
                    phases.done("cluster start")
                grade_on_dask(
                    dask, assignment, remote, recorder, limits=limits, progress=progress,
                    grade_function=grade_function, on_result=on_result,
                )  # fmt: skip
                phases.done("grading")
            summary.review = open_reviews(gb, assignment.name)
        finally:
            gb.close()
            for future in warming:
                future.release()
            if dask is not None and grade_function is None:
                _wait_quietly(on_every_worker(dask, done_task))
    if dask is not None:
        phases.done("cluster stop")
    summary.seconds = time.monotonic() - start
    autograded = course.folder(course.coursedir.autograded_directory, "*", assignment.name)
    summary.outputs["autograded"] = autograded / assignment.notebook
    if feedback and summary.results:
        summary.feedback_problems = generate_feedback(course, assignment, sorted(summary.results))
        phases.done("feedback")
        feedback_dir = course.folder(course.coursedir.feedback_directory, "*", assignment.name)
        summary.outputs["feedback"] = feedback_dir / f"{assignment.notebook_id}.html"
    summary.outputs["gradebook"] = course.db_url  # a URL: Path would fold its "//"
    if csv_path is not None:
        write_csv(course, assignment, csv_path)
        summary.outputs["CSV"] = csv_path
    return summary


def open_reviews(gb: Any, assignment: str) -> dict[str, tuple[str, str]]:
    """The submissions of ``assignment`` whose review is open in the gradebook now (flagged in
    formgrader, or a cell still to grade by hand), by student: the grader's status and why. Read
    by the one reader of grades (:func:`autograder.gradebook_writer.class_grades`), so that the
    run's summary agrees with formgrader: it listed this run's results, which showed a review
    resolved in formgrader as open again after a regrade, and left out the open reviews of the
    students it did not grade (issue 45)."""
    from autograder import gradebook_writer

    _, rows = gradebook_writer.class_grades(gb, assignment)
    out = {}
    for row in rows:
        if row.review != "open":
            continue
        why = list(row.reasons)
        if row.needs_manual_grade:
            why.append("to grade by hand: " + ", ".join(row.needs_manual_grade))
        out[row.student] = (row.status, "; ".join(why) or "flagged in formgrader")
    return out


@contextmanager
def _client(client: Any, scheduler: str | None, workers: int | None) -> Iterator[Any]:
    if client is not None:
        yield client
    else:
        with dask_client(scheduler, workers) as made:
            yield made


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, show: bool) -> Any:
    if not show or total == 0:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, unit="submission", desc="grading", file=sys.stderr)


def write_csv(course: Course, assignment: Assignment, path: Path) -> None:
    """The class CSV of ``assignment``, written from the gradebook as it is now (manual grades, late
    penalties and the whole class included) by the one writer of grades,
    :func:`autograder.formgrader.write_csv` (issue 45: it was written from this run's results,
    which undid every review)."""
    from autograder import formgrader

    formgrader.write_csv(course, assignment.name, path)


# ------------------------------------------------------------------------------ the command


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m autograder grade``; ``argv`` is what follows ``grade`` (``__main__.py`` lists
    the commands and passes each the arguments after its name)."""
    parser = argparse.ArgumentParser(
        prog="python -m autograder grade",
        description="Grade a class: student code in a sandbox, checks outside it, on Dask.",
    )
    add_course_arguments(parser)
    parser.add_argument("--root", type=Path, help="course root (default: from nbgrader_config.py)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--scheduler", help="address of a Dask scheduler, e.g. tcp://host:8786")
    where.add_argument("--workers", type=int, help="local worker processes (default: CPU cores)")
    parser.add_argument(
        "--student", nargs="+", action="extend", default=[], help="only these students"
    )
    parser.add_argument("--regrade", action="store_true", help="grade again what is already graded")
    parser.add_argument(
        "--csv", type=Path, help="CSV path (default: <course>/grades-<assignment>.csv)"
    )
    parser.add_argument("--no-feedback", action="store_true", help="do not write feedback HTML")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    box = parser.add_argument_group("sandbox limits, per submission")
    for name, kind, default, unit, meaning in Limits.described():
        box.add_argument(
            "--" + name.replace("_", "-"),
            type=kind,
            metavar=unit.upper() if unit in ("s", "MB") else "N",
            help=f"{meaning} (default: {default:,} {unit})",
        )
    args = parser.parse_args(argv)

    names = [name for name, *_ in Limits.described()]
    limits = {k: getattr(args, k) for k in names if getattr(args, k) is not None}
    bad = [f"--{k.replace('_', '-')} {v}" for k, v in limits.items() if v <= 0]
    if bad:
        parser.error(f"limits must be positive: {', '.join(bad)}")
    if args.workers is not None and args.workers < 1:
        parser.error("--workers must be at least 1")
    try:
        course = load_course(args.course, root=args.root, db_url=args.db_url)
        csv_path = args.csv or course.config_dir / f"grades-{args.assignment}.csv"
        summary = grade_assignment(
            course,
            args.assignment,
            students=args.student,
            regrade=args.regrade,
            scheduler=args.scheduler,
            workers=args.workers,
            limits=limits,
            feedback=not args.no_feedback,
            csv_path=csv_path,
            progress=not args.quiet,
        )
    except (CourseError, lock.Busy, postgres.GradebookError) as error:
        parser.exit(2, f"{parser.prog}: {error}\n")
    except KeyboardInterrupt:
        print("\nstopped: every result recorded so far is in the gradebook; run again to go on")
        raise SystemExit(130) from None
    print(summary.text())
    if summary.failed:
        raise SystemExit(1)
