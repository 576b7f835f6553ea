"""The class grader on a Dask cluster of separate processes, as the README starts one (issue 32).

``dask scheduler`` and two ``dask worker --nthreads 1`` processes (the repository on
``PYTHONPATH``), all on 127.0.0.1; ``python -m autograder grade --scheduler`` grades a class of
four whose notebooks each take a few seconds, three of them files over 1 MB (which the
grader once scattered to one worker, lost with it); one worker (its nanny and its
worker process) is killed with SIGKILL while it grades. Every submission is still graded, every
grade recorded exactly once (counted in the gradebook with SQL), and each student's score is what
the source notebook's points say it should be.
"""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import services  # noqa: E402

pytestmark = pytest.mark.slow  # starts a cluster of processes, grades with the real sandbox
ASSIGNMENT = "01-ngrams"
DASK = str(Path(sys.executable).parent / "dask")


def start(command: list[str], log: Path) -> subprocess.Popen:
    """A process of the cluster in a session of its own (killed with everything it started)."""
    env = {**services.environment(), "PYTHONPATH": str(services.REPO)}
    with open(log, "w") as out:
        return subprocess.Popen(
            command, cwd=services.REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def slow(nb, seconds: float):
    """The notebook with a pause in its first solution cell (a student's slow code)."""
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "code":
            cell.source += f"\nimport time\ntime.sleep({seconds})\n"
            return nb
    raise AssertionError("no solution cell")


def sandboxed_workers() -> set[int]:
    """The processes running the sandbox's student_worker.py now (the class grader's workers)."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"student_worker.py" in (entry / "cmdline").read_bytes():
                found.add(int(entry.name))
        except OSError:
            pass
    return found


def test_a_cluster_of_processes_grades_a_class_despite_a_killed_worker(tmp_path):
    before = sandboxed_workers()
    services.make_course(tmp_path, ASSIGNMENT)
    samples = services.grading.sample_submissions(ASSIGNMENT)
    kinds = ["full", "full", "one-part", "blank"]
    class_ = {f"s{i}-{kind}": slow(copy.deepcopy(samples[kind]), 4) for i, kind in enumerate(kinds)}
    for i, nb in enumerate(class_.values()):  # files over 1 MB
        if i < 3:
            nb.cells.append(nbformat.v4.new_markdown_cell("x" * (3 * 2**19)))
    services.hand_in(tmp_path, ASSIGNMENT, class_)
    path = services.grading.notebook_path(services.REPO / "solutions", ASSIGNMENT)
    cells = [c["metadata"].get("nbgrader", {}) for c in json.loads(path.read_text())["cells"]]
    points = {m["grade_id"]: float(m["points"]) for m in cells if m.get("grade")}
    first = next(iter(points))  # the part "one-part" solves

    port = services.free_port()
    address = f"tcp://127.0.0.1:{port}"
    logs = tmp_path / "logs"
    logs.mkdir()
    cluster = [
        start([DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port),
               "--dashboard-address", ":0"], logs / "scheduler.log"),
    ]  # fmt: skip
    try:
        from distributed import Client

        for n in range(2):
            cluster.append(
                start([DASK, "worker", address, "--nthreads", "1", "--name", f"w{n}",
                       "--dashboard-address", ":0"], logs / f"w{n}.log")
            )  # fmt: skip
        with Client(address, timeout="120s") as client:
            client.wait_for_workers(2, timeout=180)
            db = tmp_path / "autograder" / "gradebook.db"
            grader = subprocess.Popen(
                services.grade_command(tmp_path, ASSIGNMENT, f"sqlite:///{db}", "--scheduler",
                                       address, "--no-feedback"),
                cwd=services.REPO, env=services.environment(), text=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            killed = None
            deadline = time.monotonic() + 300
            while killed is None and time.monotonic() < deadline and grader.poll() is None:
                busy = {w: keys for w, keys in client.processing().items() if keys}
                if len(busy) == 2:  # both graders at work: kill one of them mid-submission
                    names = {w: i["name"] for w, i in client.scheduler_info()["workers"].items()}
                    killed = names[sorted(busy)[0]]
                    stop(cluster[1 + int(str(killed)[1:])])
                time.sleep(0.2)
            out, err = grader.communicate(timeout=900)
            # each worker started one ahead for a next submission; the class done, none is left
            # running (the killed worker's died with it, the other's was stopped)
            left = sandboxed_workers() - before
    finally:
        for process in reversed(cluster):
            stop(process)
    assert killed is not None, ("no worker was killed mid-run", out, err)
    assert grader.returncode == 0, out + err
    assert f"graded {len(class_)} submission(s)" in out, out
    assert re.search(r"not graded +0\b", out), out
    assert not left, f"sandboxed workers still running after the class: {sorted(left)}"

    with sqlite3.connect(db) as con:
        one = lambda sql: con.execute(sql).fetchall()  # noqa: E731
        per_student = one(
            "SELECT st.id, count(*), sum(coalesce(g.auto_score, 0)) FROM grade g"
            " JOIN submitted_notebook n ON g.notebook_id = n.id"
            " JOIN submitted_assignment s ON n.assignment_id = s.id"
            " JOIN student st ON s.student_id = st.id GROUP BY st.id"
        )
        results = one("SELECT student, count(*) FROM autograder_results GROUP BY student")
    full = sum(points.values())
    expected = {"s0-full": full, "s1-full": full, "s2-one-part": points[first], "s3-blank": 0.0}
    assert {s: (n, score) for s, n, score in per_student} == {
        s: (len(points), score) for s, score in expected.items()
    }
    assert dict(results) == {s: 1 for s in class_}
