"""The README's instructor commands, run as written (issue 45 §2 and §5).

The commands are read from the README at test time (every line of every ``bash`` block of the
section "For instructors: grading with nbgrader"), not copied here, and run with bash, each block
as one script (so ``source`` and ``cd`` hold within it), from the root of a copy of the course in
a temporary folder: the repository's ``autograder/`` configuration, ``solutions/``,
``exercises/``, ``nlpcourse/`` and a link to ``.venv``, with students' folders filled in as the
README tells the instructor to. What is changed before a command runs, and why:

* ``host`` in ``tcp://host:8786`` is 127.0.0.1 (the README's placeholder for your machine);
* the ``export NLPCOURSE_DB_URL=...`` lines set the URL of a throw-away PostgreSQL server
  (``services.postgres_server``), as an instructor sets theirs;
* long-running services (``dask scheduler``, ``dask worker``, ``jupyter lab``) are started in the
  background, as written, and stopped once they answer (``--allow-root`` added when the tests run
  as root, as the README says);
* ``--student ana ben`` names two students of the copy;
* ``--nworkers 16`` (a worker machine of 16 cores) is ``--nworkers 2``;
* on SQLite, the block of "A gradebook in PostgreSQL" is left out (its URLs name your server; the
  PostgreSQL round runs it);
* on PostgreSQL, the demos (``grading.py demo`` and ``demo-class``) are left out: each grades in a
  course folder with a SQLite gradebook of its own, whatever ``NLPCOURSE_DB_URL`` says, so the
  SQLite round has run them already.

A command whose service cannot start (PostgreSQL, bubblewrap) is skipped with the reason.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import services  # noqa: E402

REPO = services.REPO
README = REPO / "README.md"
SECTION = "## For instructors: grading with nbgrader"
SERVICES = ("dask scheduler", "dask worker", "jupyter lab")
PG_BLOCK = "export NLPCOURSE_DB_URL="  # how the PostgreSQL block starts
DEMO = "autograder/grading.py demo"  # the demos: a sandbox course with its own SQLite gradebook
ASSIGNMENT = "01-ngrams"


def blocks() -> list[list[str]]:
    """Every ``bash`` block of the README's instructor section, as its lines (blank ones left
    out; a line's own ``#`` comment stays: bash reads it as a comment)."""
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start : end if end != -1 else len(text)]
    found = re.findall(r"^```bash\n(.*?)^```", section, flags=re.S | re.M)
    return [[line for line in block.splitlines() if line.strip()] for block in found]


def commands() -> list[str]:
    return [line for block in blocks() for line in block]


def test_the_readme_has_the_walk_through():
    """The section names each step of the round, and its commands are the ones run below."""
    lines = commands()
    for step in ("autograder grade", "autograder report", "autograder lms", "formgrader csv",
                 "formgrader extend", "generate_feedback", "nbgrader export", "jupyter lab",
                 "db student import", "zip_collect", "db assignment add"):  # fmt: skip
        assert any(step in line for line in lines), step


def test_every_dask_process_has_the_repository_on_its_path():
    """Issue 45 §2: the scheduler unpickles the grading task too; without the repository on its
    ``PYTHONPATH`` every submission came back "not graded" (No module named 'autograder')."""
    dask = [line for line in commands() if re.search(r"dask (scheduler|worker)\b", line)]
    assert len(dask) >= 2
    for line in dask:
        assert line.startswith("PYTHONPATH=$PWD "), line


# ------------------------------------------------------------------------ running them


def course_copy(root: Path) -> Path:
    """A copy of the course at ``root`` (what the commands read and write), the venv linked."""
    for name in ("solutions", "exercises", "nlpcourse"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    keep = shutil.ignore_patterns(
        "__pycache__", "submitted", "autograded", "feedback", "gradebook.db*", "grades*.csv",
        "demo*", "exchange", "reports", "lms", "downloaded",
    )  # fmt: skip
    shutil.copytree(REPO / "autograder", root / "autograder", ignore=keep)
    (root / ".venv").symlink_to(REPO / ".venv")
    return root


def hand_in(root: Path, students: dict[str, list[str]]) -> None:
    """Students' notebooks where the README says to put them (``mistaken`` ones: known scores)."""
    for student, made in students.items():
        services.hand_in(root, ASSIGNMENT, {student: services.mistaken(ASSIGNMENT, made)})


def as_run(line: str, port: int, db_url: str | None) -> str:
    """The README's line with the placeholders of the module docstring filled in."""
    line = line.replace("tcp://host:8786", f"tcp://127.0.0.1:{port}").replace(
        "--port 8786", f"--port {port}"
    )
    line = line.replace("--nworkers 16", "--nworkers 2")
    if db_url is not None and line.startswith(PG_BLOCK):
        return f"export NLPCOURSE_DB_URL='{db_url}'"
    if "jupyter lab" in line and os.geteuid() == 0:
        line = line.replace("--no-browser", "--no-browser --allow-root")
    return line


def is_service(line: str) -> bool:
    return any(name in line for name in SERVICES)


def bash(script: str, root: Path, env: dict, timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script], cwd=root, env=env, capture_output=True,
        text=True, timeout=timeout,
    )  # fmt: skip


class Services:
    """The README's long-running commands, started in the background as written."""

    def __init__(self, root: Path, env: dict):
        self.root, self.env, self.running = root, env, []

    def start(self, line: str, ready: str, seconds: float = 180) -> None:
        """Start ``line`` (with bash, from the course root); wait until its output has ``ready``."""
        log = self.root / f"service-{len(self.running)}.log"
        with open(log, "w") as out:
            process = subprocess.Popen(
                ["bash", "-c", line],  # its own session: stopped with all it started
                cwd=self.root, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.running.append(process)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace")
            if ready in text:
                return
            if process.poll() is not None:
                pytest.fail(f"{line!r} stopped: {text[-3000:]}")
            time.sleep(1)
        pytest.fail(f"{line!r} did not get ready: {log.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        services.stop_process_groups(self.running)
        self.running = []


def environment() -> dict[str, str]:
    env = services.environment()
    env.pop("NLPCOURSE_DB_URL", None)
    return env


def run_round(root: Path, db_url: str | None) -> dict[str, str]:
    """Every block of the section, in order, from the course root: the Dask scheduler and worker
    first (a grading line of an earlier block uses them), the Jupyter server until it answers.
    Returns each command's output, by line."""
    env, port = environment(), services.free_port()
    if db_url is not None:
        env["NLPCOURSE_DB_URL"] = db_url
    running = Services(root, env)
    said: dict[str, str] = {}
    try:
        for line in commands():
            if re.search(r"dask scheduler\b", line):
                running.start(as_run(line, port, db_url), "Scheduler at:")
        for line in commands():
            if re.search(r"dask worker\b", line):
                running.start(as_run(line, port, db_url), "Registered to:")
        for block in blocks():
            if db_url is None and any(
                line.startswith("export NLPCOURSE_DB_URL=") for line in block
            ):
                continue  # the PostgreSQL block: run by the PostgreSQL round
            if db_url is not None and any(DEMO in line for line in block):
                continue  # a demo grades in a course and gradebook of its own: run once, on SQLite
            script: list[str] = []
            for line in block:
                if is_service(line) and "jupyter lab" not in line:
                    continue  # started above
                if "jupyter lab" in line:
                    flush(script, root, env, said)
                    running.start(as_run(line, port, db_url), "http://127.0.0.1:")
                    said[line] = "started"
                    continue
                script.append(as_run(line, port, db_url))
            flush(script, root, env, said)
    finally:
        running.stop()
    return said


def flush(script: list[str], root: Path, env: dict, said: dict[str, str]) -> None:
    """Run the lines gathered so far as one bash script; fail with its output if one fails."""
    if not script:
        return
    run = bash("\n".join(script), root, env)
    text = run.stdout + run.stderr
    assert run.returncode == 0, ("\n".join(script), text[-6000:])
    said["\n".join(script)] = text
    script.clear()


def prepare(root: Path) -> None:
    """The course copy with what an instructor brings: submissions (ana full marks, ben one
    mistake), a roster, and a zip downloaded from Canvas (cal, dan)."""
    course_copy(root)
    hand_in(root, {"ana": [], "ben": ["no_eos"]})
    (root / "autograder" / "roster.csv").write_text(
        "id,first_name,last_name,email\nana,Ana,Alves,ana@example.org\n"
        "ben,Ben,Berg,ben@example.org\ncal,Cal,Chen,cal@example.org\n"
        "dan,Dan,Diaz,dan@example.org\neve,Eve,Eng,eve@example.org\n"
    )
    archive = root / "autograder" / "downloaded" / ASSIGNMENT / "archive"
    archive.mkdir(parents=True)
    import nbformat

    with zipfile.ZipFile(archive / "submissions.zip", "w") as z:  # Canvas's names
        z.writestr("cal_1234_5678_ngrams.ipynb", nbformat.writes(services.mistaken(ASSIGNMENT, [])))
        z.writestr(
            "dan_LATE_2345_6789_ngrams.ipynb",
            nbformat.writes(services.mistaken(ASSIGNMENT, ["one_for_k"])),
        )


def sandbox_or_skip() -> None:
    if shutil.which("bwrap") is None and shutil.which("unshare") is None:
        pytest.skip("neither bubblewrap nor unshare: the sandboxed grader's commands cannot run")


def check_the_outputs(root: Path) -> None:
    """The round's files agree: the CSV after review, the LMS files, the report."""
    import json

    expected = {"ana": 12.0, "ben": 10.0, "cal": 12.0, "dan": 10.0, "eve": 0.0}
    with open(root / "autograder" / f"grades-{ASSIGNMENT}.csv", encoding="utf-8") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert {s: float(r["score"]) for s, r in rows.items()} == expected
    assert rows["eve"]["status"] == "not submitted"  # on the roster, nothing handed in
    from autograder import lms

    folder = root / "autograder" / "lms"  # Canvas's written last, Moodle's before the zip
    assert lms.read_scores(folder / f"{ASSIGNMENT}-canvas.csv", "canvas") == expected
    assert (folder / f"{ASSIGNMENT}-moodle.csv").exists()
    canvas = (folder / f"{ASSIGNMENT}-canvas.csv").read_text()
    assert "Alves, Ana" in canvas  # the roster's names
    data = json.loads((root / "autograder" / "reports" / f"{ASSIGNMENT}.json").read_text())
    named = {p["grade_id"]: [m[0] for m in p["mistakes"]] for p in data["parts"]}
    assert any("left out the end symbol" in m for m in named["test_count_ngrams"])
    assert any("1 in place of k" in m for m in named["test_addk_prob"])


@pytest.mark.slow  # the whole round: nbgrader (kernels), the sandboxed grader, Dask, Jupyter
def test_every_command_runs_as_written_on_sqlite(tmp_path):
    sandbox_or_skip()
    root = tmp_path / "course"
    prepare(root)
    run_round(root, None)
    check_the_outputs(root)


@pytest.mark.slow
def test_every_command_runs_as_written_on_postgresql(tmp_path):
    sandbox_or_skip()
    root = tmp_path / "course"
    prepare(root)
    with services.postgres_server() as db_url:
        run_round(root, db_url)
        check_the_outputs(root)
