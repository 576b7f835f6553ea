"""Real services for the instructor's tests (issue 32): a throw-away PostgreSQL server, a course of
a few students graded by the command an instructor runs.

:func:`postgres_server` starts Debian's PostgreSQL (``bash .ci/tasks.sh setup`` installs it) in a
temporary folder: ``initdb`` as an unprivileged user (``nobody`` when the tests run as root, as in
CI: the server refuses to run as root), listening on a Unix socket in that folder only (no TCP
port), stopped and removed at the end. A test that needs it is skipped, with the reason, where it
cannot be started.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "autograder"))
import grading  # noqa: E402

PYTHON = sys.executable


def postgres_bin(program: str) -> str | None:
    """A PostgreSQL program: on PATH, else in Debian's /usr/lib/postgresql/<version>/bin."""
    found = shutil.which(program)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{program}"))
    return candidates[-1] if candidates else None


@contextmanager
def postgres_server() -> Iterator[str]:
    """A PostgreSQL server of its own with an empty database ``gradebook``; yields its URL
    (``postgresql+psycopg2://postgres@/gradebook?host=<socket folder>``)."""
    initdb, pg_ctl = postgres_bin("initdb"), postgres_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL is not installed (bash .ci/tasks.sh setup installs postgresql)")
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        pytest.skip("the driver psycopg2 is not installed (pip install -r requirements.txt)")
    top = Path(tempfile.mkdtemp(prefix="nlpcourse-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL will not run as root
        nobody = pwd.getpwnam("nobody")
        os.chown(top, nobody.pw_uid, nobody.pw_gid)
        setpriv = shutil.which("setpriv")
        if not setpriv:
            shutil.rmtree(top)
            pytest.skip("running as root without setpriv (util-linux) to start PostgreSQL")
        as_user = [setpriv, f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}"]
        as_user += ["--clear-groups", "--"]
    data, log = top / "data", top / "server.log"
    options = f"-k {top} -c listen_addresses='' -c fsync=off -c max_connections=60"
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    try:
        made = subprocess.run(
            [*as_user, initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "--no-sync"],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        if made.returncode != 0:
            pytest.skip(f"initdb failed: {made.stderr.strip()[-500:]}")
        started = subprocess.run(
            [*as_user, pg_ctl, "-D", str(data), "-l", str(log), "-w", "-o", options, "start"],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        if started.returncode != 0:
            why = log.read_text(errors="replace")[-500:] if log.exists() else started.stderr
            pytest.skip(f"the PostgreSQL server did not start: {why.strip()}")
        try:
            createdb = postgres_bin("createdb") or "createdb"
            subprocess.run(
                [createdb, "-h", str(top), "-U", "postgres", "gradebook"], check=True, env=env
            )
            yield f"postgresql+psycopg2://postgres@/gradebook?host={top}"
        finally:
            subprocess.run(
                [*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"],
                capture_output=True, env=env,
            )  # fmt: skip
    finally:
        shutil.rmtree(top, ignore_errors=True)


def make_course(root: Path, assignment: str) -> Path:
    """A course at ``root``: the repository's nbgrader configuration and
    ``solutions/<assignment>``; returns its ``autograder/`` folder."""
    folder = root / "autograder"
    folder.mkdir(parents=True, exist_ok=True)
    # as grading.copy_configuration (only those there are: this branch has no autograder/templates
    # yet), with the Jupyter server's configuration for formgrader
    for name in (*grading.COURSE_FILES, "jupyter_server_config.py", "jupyter"):
        path = grading.CONFIG_DIR / name
        if path.is_dir():
            shutil.copytree(path, folder / name)
        elif path.is_file():
            shutil.copy(path, folder / name)
    shutil.copytree(REPO / "solutions" / assignment, root / "solutions" / assignment)
    return root / "autograder"


def hand_in(root: Path, assignment: str, students: dict[str, object]) -> None:
    """Write each student's notebook where nbgrader's ``submitted`` folder has it."""
    import nbformat

    name = grading.notebook_path(REPO / "solutions", assignment).name
    for student, nb in students.items():
        folder = root / "autograder" / "submitted" / student / assignment
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, folder / name)


def grade_command(root: Path, assignment: str, db_url: str, *more: str) -> list[str]:
    """The instructor's command, for the course at ``root``."""
    return [
        PYTHON, "-m", "autograder", "grade", assignment, "--course", str(root / "autograder"),
        "--db-url", db_url, "--quiet", *more,
    ]  # fmt: skip


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def environment() -> dict[str, str]:
    """The grader's environment: this venv's scripts first, one thread per library."""
    bin_dir = str(Path(PYTHON).parent)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ["PATH"], "OMP_NUM_THREADS": "1"}


def stop_process_groups(processes: Iterable[subprocess.Popen], seconds: float = 30) -> None:
    """Stop each process (the last started first) with everything it started: each was started
    in a session of its own (``start_new_session=True``), so its process group holds its
    children (a Dask scheduler's, a shell's). SIGTERM, then SIGKILL after ``seconds``."""
    for process in reversed(list(processes)):
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def wait_for(url: str, server: subprocess.Popen, log: Path, seconds: float = 240) -> None:
    """Wait until ``url`` answers; fail with the end of ``log`` if ``server`` stops or never
    answers."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"the Jupyter server stopped: {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(1)
    pytest.fail(f"the Jupyter server did not answer: {log.read_text()[-3000:]}")


@contextmanager
def jupyter_server(
    course: Path, token: str, log: Path, env: dict[str, str] | None = None
) -> Iterator[str]:
    """The course's Jupyter server as the README starts it (``jupyter lab
    --config=jupyter_server_config.py`` from the course's ``autograder/`` folder ``course``, so
    that file and ``nbgrader_config.py`` apply), on 127.0.0.1 with ``token``, its output in
    ``log``; yields its base URL once it answers, and stops it at the end."""
    port = free_port()
    jupyter = str(Path(PYTHON).parent / "jupyter")
    with open(log, "w") as out:
        server = subprocess.Popen(
            [jupyter, "lab", "--config=jupyter_server_config.py", "--no-browser",
             "--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={token}",
             *(["--allow-root"] if os.geteuid() == 0 else [])],
            cwd=course, env=env or environment(), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/api/status?token={token}", server, log)
        yield base
    finally:
        stop_process_groups([server])


# ---------------------------------------------------------------- a class with known mistakes


def checked_in_process(data, name, source, *, assignment, student, limits, expected_name):
    """A grader for the course's own generated submissions (trusted: no sandbox), with the
    signature of ``grade_submission``: the source's setup cells and the student's solution cells
    run in one namespace, then each test cell of the source (hidden tests included) calls the
    real check. A part's message is the check's, as the sandboxed grader records it. What is
    tested with it is what happens to these messages after grading (the report, the CSVs)."""
    import contextlib
    import hashlib
    import io
    import json

    nb = json.loads(data)
    answers = {}
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):
            text = cell["source"]
            answers[meta["grade_id"]] = "".join(text) if isinstance(text, list) else text
    namespace: dict = {}
    parts = []
    for cell in source["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] != "code" or not meta.get("grade_id"):
            continue
        if meta.get("solution"):
            text = answers.get(meta["grade_id"], "raise NotImplementedError()")
        status, message = "passed", ""
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(text, meta["grade_id"], "exec"), namespace)  # noqa: S102
        except Exception as error:  # a test cell's check failed, or a solution cell raised
            status = "failed"
            message = str(error) if type(error).__name__ == "CheckFailed" else f"{error!r}"
        if meta.get("grade") and not meta.get("solution"):
            points = float(meta["points"])
            parts.append(
                {"grade_id": meta["grade_id"], "points": points if status == "passed" else 0.0,
                 "max_points": points, "status": status, "message": message}
            )  # fmt: skip
    score = sum(p["points"] for p in parts)
    misnamed = [f"expected {expected_name}, found {name}"] if name != expected_name else []
    return {
        "assignment": assignment, "student": student, "notebook": name,
        "checksum": hashlib.sha256(data).hexdigest(), "parts": parts,
        "status": "needs_review" if misnamed else "graded" if score else "zero",
        "reasons": misnamed + ([] if score else ["no part passed"]),
        "needs_review": bool(misnamed), "seconds": 0.01, "student_seconds": 0.01,
        "isolation": "none: the tests' in-process grader",
    }  # fmt: skip


# the demo class's mistakes, shared with autograder/grading.py demo-class (the tests' oracle)
MISTAKES, BLANK = grading.MISTAKES, grading.BLANK
class_plan, mistaken = grading.class_plan, grading.mistaken


def stamp(when: str) -> str:
    """nbgrader's ``timestamp.txt`` text for a UTC time ``"2026-11-20 12:00:00"``."""
    return f"{when}.000000 UTC\n"


def in_process_client():
    """A Dask client of one worker thread in this process (for :func:`checked_in_process`)."""
    from distributed import Client

    return Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=":0")


def grade_in_process(course, assignment: str, **options):
    """``classgrader.grade_assignment`` of ``course`` (a loaded course) with
    :func:`checked_in_process` on :func:`in_process_client`, no progress bar: the course's own
    generated submissions graded without a sandbox. ``options`` go to ``grade_assignment``."""
    from autograder import classgrader

    with in_process_client() as client:
        return classgrader.grade_assignment(
            course, assignment, client=client, grade_function=checked_in_process, progress=False,
            **options,
        )  # fmt: skip
