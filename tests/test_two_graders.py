"""Two ``python -m autograder grade`` runs at once (issue 32), on SQLite and on PostgreSQL.

Two runs on the same assignment and gradebook: one grades the class, the other stops at once with
one line naming the run that holds the assignment (its process id); nothing is written twice.
Two runs of different assignments on a new, empty gradebook: both grade their class (they wait for
each other only while they create the gradebook's tables and rows).

The counts are read from the gradebook with SQL, independently of the grader: one submitted
assignment and one grader's row per student, one grade per graded cell of the source notebook.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent))
import services  # noqa: E402

pytestmark = pytest.mark.slow  # grades with the real sandbox, starts PostgreSQL


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def backend(request):
    """The kind of gradebook; PostgreSQL's server is started once for the module."""
    if request.param == "sqlite":
        yield None
    else:
        with services.postgres_server() as url:
            yield url


def empty_gradebook(backend: str | None, root: Path) -> str:
    """A new gradebook's URL: a SQLite file in the course, or the PostgreSQL database emptied."""
    if backend is None:
        return f"sqlite:///{root / 'autograder' / 'gradebook.db'}"
    engine = create_engine(backend)
    with engine.begin() as db:
        db.execute(text("DROP SCHEMA public CASCADE"))
        db.execute(text("CREATE SCHEMA public"))
    engine.dispose()
    return backend


def graded_cells(assignment: str) -> int:
    """How many test cells (graded, not solution) the source notebook has."""
    nb = json.loads(
        services.grading.notebook_path(services.REPO / "solutions", assignment).read_text()
    )
    cells = [c["metadata"].get("nbgrader", {}) for c in nb["cells"]]
    return sum(1 for m in cells if m.get("grade") and not m.get("solution"))


def counts(db_url: str, assignment: str) -> dict[str, int]:
    engine = create_engine(db_url)
    with engine.connect() as db:
        one = lambda sql: db.execute(text(sql), {"a": assignment}).scalar_one()  # noqa: E731
        out = {
            "submissions": one(
                "SELECT count(*) FROM submitted_assignment s JOIN assignment a"
                " ON s.assignment_id = a.id WHERE a.name = :a"
            ),
            "results": one("SELECT count(*) FROM autograder_results WHERE assignment = :a"),
            "grades": one(
                "SELECT count(*) FROM grade g JOIN submitted_notebook n ON g.notebook_id = n.id"
                " JOIN submitted_assignment s ON n.assignment_id = s.id"
                " JOIN assignment a ON s.assignment_id = a.id WHERE a.name = :a"
            ),
            "assignments": one("SELECT count(*) FROM assignment WHERE name = :a"),
        }
    engine.dispose()
    return out


def start(root: Path, assignment: str, db_url: str) -> subprocess.Popen:
    command = services.grade_command(root, assignment, db_url, "--workers", "1", "--no-feedback")
    return subprocess.Popen(
        command, cwd=services.REPO, env=services.environment(), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def test_a_second_run_on_the_assignment_stops_naming_the_first(tmp_path, backend):
    db_url = empty_gradebook(backend, tmp_path)
    services.make_course(tmp_path, "01-ngrams")
    students = services.grading.sample_submissions("01-ngrams")
    services.hand_in(tmp_path, "01-ngrams", {s: students[s] for s in ("full", "blank")})

    runs = [start(tmp_path, "01-ngrams", db_url) for _ in range(2)]
    outputs = [run.communicate(timeout=600) for run in runs]
    codes = [run.returncode for run in runs]
    assert sorted(codes) == [0, 2], (codes, outputs)
    winner, loser = (0, 1) if codes[0] == 0 else (1, 0)
    out, err = outputs[loser]
    said = [line for line in err.splitlines() if line.strip()]
    assert said[-1].startswith("python -m autograder grade: 01-ngrams"), err
    assert f"pid {runs[winner].pid} " in said[-1] and "being graded by" in said[-1], err
    assert "graded 2 submission(s)" in outputs[winner][0], outputs[winner]

    cells = graded_cells("01-ngrams")
    assert counts(db_url, "01-ngrams") == {
        "submissions": 2, "results": 2, "grades": 2 * cells, "assignments": 1,
    }  # fmt: skip

    # the run that holds the assignment is gone: a run now grades (nothing: both are graded)
    again = subprocess.run(
        services.grade_command(tmp_path, "01-ngrams", db_url, "--workers", "1", "--no-feedback"),
        cwd=services.REPO, env=services.environment(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "skipped 2 already graded" in again.stdout


def test_two_assignments_at_once_on_a_new_gradebook(tmp_path, backend):
    db_url = empty_gradebook(backend, tmp_path)
    for assignment in ("01-ngrams", "02-hmm"):
        if not (tmp_path / "autograder").exists():
            services.make_course(tmp_path, assignment)
        else:
            services.shutil.copytree(
                services.REPO / "solutions" / assignment, tmp_path / "solutions" / assignment
            )
        blank = services.grading.sample_submissions(assignment)["blank"]
        services.hand_in(tmp_path, assignment, {"ana": blank})

    runs = [start(tmp_path, a, db_url) for a in ("01-ngrams", "02-hmm")]
    outputs = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    for assignment in ("01-ngrams", "02-hmm"):
        cells = graded_cells(assignment)
        assert counts(db_url, assignment) == {
            "submissions": 1, "results": 1, "grades": cells, "assignments": 1,
        }  # fmt: skip
