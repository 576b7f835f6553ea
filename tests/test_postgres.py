"""A gradebook in PostgreSQL (issue 32), on a throw-away server this file starts.

The instructor's route, as the README gives it: ``python -m autograder grade`` into a PostgreSQL
gradebook (a class graded, then resumed with a late submission, then one student regraded),
``nbgrader export`` reading it, a manual grade written as formgrader's ``PUT /formgrader/api/grade``
writes it and read back by ``nbgrader export``; and the errors that say what is wrong. The scores
expected are worked out from the source notebook's points, not from the grader.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import services  # noqa: E402

from autograder import postgres  # noqa: E402

pytestmark = pytest.mark.slow  # starts PostgreSQL, grades with the real sandbox
ASSIGNMENT = "01-ngrams"


@pytest.fixture(scope="module")
def server():
    with services.postgres_server() as url:
        yield url


def points() -> dict[str, float]:
    """Each graded cell's points, from the source notebook."""
    path = services.grading.notebook_path(services.REPO / "solutions", ASSIGNMENT)
    out = {}
    for cell in json.loads(path.read_text())["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("grade"):
            out[meta["grade_id"]] = float(meta["points"])
    return out


def grade(root: Path, db_url: str, *more: str) -> subprocess.CompletedProcess:
    command = services.grade_command(root, ASSIGNMENT, db_url, "--workers", "1", *more)
    return subprocess.run(
        command, cwd=services.REPO, env=services.environment(), capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip


def export(root: Path, db_url: str) -> dict[str, float]:
    """``nbgrader export`` run from the course folder: each student's score."""
    run = subprocess.run(
        [str(Path(sys.executable).parent / "nbgrader"), "export",
         f"--CourseDirectory.db_url={db_url}", "--to", str(root / "export.csv")],
        cwd=root / "autograder", env=services.environment(), capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    with open(root / "export.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["assignment"] == ASSIGNMENT]
    return {r["student_id"]: float(r["score"]) for r in rows}


def test_a_class_graded_resumed_regraded_exported_and_marked_by_hand(tmp_path, server):
    services.make_course(tmp_path, ASSIGNMENT)
    students = services.grading.sample_submissions(ASSIGNMENT)
    services.hand_in(tmp_path, ASSIGNMENT, {s: students[s] for s in ("full", "blank")})
    full_marks = sum(points().values())

    first = grade(tmp_path, server)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "graded 2 submission(s)" in first.stdout
    feedback = tmp_path / "autograder" / "feedback" / "full" / ASSIGNMENT / "ngrams.html"
    assert feedback.is_file(), first.stdout  # nbgrader's generate_feedback read the gradebook
    assert export(tmp_path, server) == {"full": full_marks, "blank": 0.0}

    # resumed: a late submission is graded, the others are not graded again
    services.hand_in(tmp_path, ASSIGNMENT, {"late": students["full"]})
    resumed = grade(tmp_path, server, "--no-feedback")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "graded 1 submission(s)" in resumed.stdout
    assert "skipped 2 already graded" in resumed.stdout

    # a manual grade as formgrader writes it (nbgrader's GradeHandler.put), read back
    from nbgrader.api import Gradebook

    test_cell = next(iter(points()))  # the first test cell; "blank" scored 0 there
    with Gradebook(server, "nlpcourse") as gb:
        grade_row = gb.find_grade(test_cell, "ngrams", ASSIGNMENT, "blank")
        grade_row.manual_score = points()[test_cell]
        grade_row.extra_credit = None
        grade_row.needs_manual_grade = (
            grade_row.manual_score is None and grade_row.auto_score is None
        )
        gb.db.commit()
    exported = export(tmp_path, server)
    assert exported == {"full": full_marks, "blank": points()[test_cell], "late": full_marks}
    # the CSV after review, from the gradebook: nbgrader's scores, the manual grade named
    after_review = tmp_path / "after-review.csv"
    made = subprocess.run(
        [sys.executable, "-m", "autograder.formgrader", "csv", ASSIGNMENT, "--course",
         str(tmp_path / "autograder"), "--db-url", server, "--to", str(after_review)],
        cwd=services.REPO, env=services.environment(), capture_output=True, text=True,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    with open(after_review) as f:
        reviewed = {row["student"]: row for row in csv.DictReader(f)}
    assert {s: float(r["score"]) for s, r in reviewed.items()} == exported
    assert reviewed["blank"]["manual"] == test_cell and reviewed["full"]["manual"] == ""
    assert float(reviewed["blank"][test_cell]) == points()[test_cell]

    # regraded: the student graded again, the manual grade kept
    regraded = grade(tmp_path, server, "--no-feedback", "--student", "blank", "--regrade")
    assert regraded.returncode == 0, regraded.stdout + regraded.stderr
    assert "graded 1 submission(s)" in regraded.stdout
    with Gradebook(server, "nlpcourse") as gb:
        again = gb.find_grade(test_cell, "ngrams", ASSIGNMENT, "blank")
        assert again.manual_score == points()[test_cell]
        assert again.auto_score == 0.0
        assert not again.needs_manual_grade  # the same file: the review stands
        assert len(gb.find_assignment(ASSIGNMENT).submissions) == 3
    assert export(tmp_path, server)["blank"] == points()[test_cell]

    # a changed file is graded anew, says so, and its reviewed part needs a manual grade again
    services.hand_in(tmp_path, ASSIGNMENT, {"blank": students["one-part"]})
    changed = grade(tmp_path, server, "--no-feedback")
    assert changed.returncode == 0, changed.stdout + changed.stderr
    assert "graded 1 submission(s)" in changed.stdout
    with Gradebook(server, "nlpcourse") as gb:
        anew = gb.find_grade(test_cell, "ngrams", ASSIGNMENT, "blank")
        assert anew.auto_score == points()[test_cell] and anew.needs_manual_grade
    with open(tmp_path / "autograder" / f"grades-{ASSIGNMENT}.csv") as f:
        reasons = {row["student"]: row["reasons"] for row in csv.DictReader(f)}
    assert "graded anew" in reasons["blank"] and "graded anew" not in reasons["full"]


def test_the_errors_say_what_is_wrong(tmp_path, server):
    services.make_course(tmp_path, ASSIGNMENT)
    blank = services.grading.sample_submissions(ASSIGNMENT)["blank"]
    services.hand_in(tmp_path, ASSIGNMENT, {"ana": blank})
    socket_dir = server.split("host=")[1]
    cases = {
        server.replace("/gradebook?", "/no_such_book?"): (
            f"the database 'no_such_book' on the socket in {socket_dir} does not exist"
        ),
        server.replace(f"host={socket_dir}", f"host={socket_dir}/gone"): (
            f"the PostgreSQL server of the database 'gradebook' on the socket in {socket_dir}/gone"
            " does not answer"
        ),
    }
    if importlib.util.find_spec("pg8000") is None:  # a driver this venv does not have
        cases[server.replace("+psycopg2", "+pg8000")] = (
            "needs the PostgreSQL driver 'pg8000', which is not installed"
        )
    for db_url, said in cases.items():
        run = grade(tmp_path, db_url, "--no-feedback")
        assert run.returncode == 2, (db_url, run.stdout, run.stderr)
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and said in lines[0], (said, run.stderr)


def test_the_driver_names_its_package():
    """The package of a missing driver, and the pinned one is the one requirements.txt names."""
    pinned = (services.REPO / "requirements.txt").read_text().splitlines()
    assert postgres.DRIVER["psycopg2"] in pinned


def test_nbgrader_names_a_missing_driver(tmp_path):
    """nbgrader's own commands, with a PostgreSQL ``db_url`` and no psycopg2 importable (a package
    of that name that fails to import stands in for it), say in one line what to install, through
    ``nbgrader_config.py``. No server is needed: the driver is looked for before connecting."""
    course = services.make_course(tmp_path, ASSIGNMENT)
    fake = tmp_path / "no_driver" / "psycopg2"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no psycopg2 in this test')\n")
    env = services.environment()
    env["PYTHONPATH"] = str(fake.parent)
    env["NLPCOURSE_DB_URL"] = f"postgresql+psycopg2://postgres@/gradebook?host={tmp_path}"
    nbgrader = str(Path(sys.executable).parent / "nbgrader")
    for command in (["export"], ["db", "student", "list"]):
        run = subprocess.run(
            [nbgrader, *command], cwd=course, env=env, capture_output=True, text=True, timeout=300
        )
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        assert run.returncode != 0, (command, run.stdout, run.stderr)
        assert len(lines) == 1, (command, run.stderr)
        assert "needs the PostgreSQL driver 'psycopg2'" in lines[0], lines
        assert f"pip install {postgres.DRIVER['psycopg2']}" in lines[0], lines


def test_nbgrader_says_in_one_line_what_is_wrong(tmp_path, server):
    """Issue 45 §3: a wrong database name or a server that does not answer, given as the README
    gives it (``NLPCOURSE_DB_URL``): nbgrader's own commands end in one line naming it (they
    printed 136-163 lines of traceback)."""
    course = services.make_course(tmp_path, ASSIGNMENT)
    socket_dir = server.split("host=")[1]
    cases = {
        server.replace("/gradebook?", "/no_such_book?"): "the database 'no_such_book'",
        server.replace(f"host={socket_dir}", f"host={socket_dir}/gone"): "does not answer",
    }
    nbgrader = str(Path(sys.executable).parent / "nbgrader")
    for db_url, said in cases.items():
        env = {**services.environment(), "NLPCOURSE_DB_URL": db_url}
        for command in (["export"], ["db", "student", "list"]):
            run = subprocess.run(
                [nbgrader, *command], cwd=course, env=env, capture_output=True, text=True,
                timeout=300,
            )  # fmt: skip
            lines = [line for line in run.stderr.splitlines() if line.strip()]
            assert run.returncode != 0, (command, run.stdout, run.stderr)
            assert len(lines) == 1 and said in lines[0], (command, run.stderr[-3000:])
            assert lines[0].startswith("nbgrader_config.py: "), lines


def test_formgrader_says_in_one_line_what_is_wrong(tmp_path, server):
    """Issue 45 §3: formgrader, with a PostgreSQL gradebook that cannot be opened, stayed at
    "Loading, please wait...": its pages loaded, and their calls to ``/formgrader/api/`` failed
    where the pages do not show it. Now its pages and its API answer 503 with the line nbgrader's
    own commands end in (read from ``nbgrader db student list`` run with the same URL). Two cases
    as an instructor meets them, in the course's Jupyter server started as the README says: a
    PostgreSQL server (one of this test's own) that stops while formgrader is in use (its pages
    answered before, the control), and a database name that does not exist."""
    import contextlib
    import html
    import re
    import urllib.error
    import urllib.request

    course = services.make_course(tmp_path, ASSIGNMENT)
    nbgrader = str(Path(sys.executable).parent / "nbgrader")
    token = "postgres-formgrader-token"
    pages = ["formgrader/manage_assignments", "formgrader/gradebook", "formgrader/api/assignments"]

    def get(url: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url, timeout=120) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def nbgrader_says(env: dict) -> str:
        run = subprocess.run(
            [nbgrader, "db", "student", "list"], cwd=course, env=env, capture_output=True,
            text=True, timeout=300,
        )  # fmt: skip
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        assert run.returncode != 0 and len(lines) == 1, run.stderr[-3000:]
        return lines[0].removeprefix("nbgrader_config.py: ")

    def check(base: str, env: dict, said: str) -> None:
        line = nbgrader_says(env)
        assert said in line, line
        for page in pages:
            status, text = get(f"{base}/{page}?token={token}")
            assert status == 503, (page, status, text[-2000:])
            if "/api/" in page:
                shown = json.loads(text)["message"]
            else:
                found = re.search(r'<p id="gradebook-error">(.*?)</p>', text, re.S)
                assert found, text[-2000:]
                shown = html.unescape(found.group(1))
                assert "Loading, please wait" not in text
            assert shown == line, (page, shown, line)

    socket_dir = server.split("host=")[1]
    with contextlib.ExitStack() as own_server:
        own = own_server.enter_context(services.postgres_server())
        env = {**services.environment(), "NLPCOURSE_DB_URL": own}
        with services.jupyter_server(course, token, tmp_path / "server-1.log", env) as base:
            for page in pages:  # the control: with the server up, formgrader answers
                status, text = get(f"{base}/{page}?token={token}")
                assert status == 200, (page, status, text[-2000:])
            own_server.close()  # the PostgreSQL server stops
            check(base, env, "does not answer")

    wrong = server.replace("/gradebook?", "/no_such_book?")
    env = {**services.environment(), "NLPCOURSE_DB_URL": wrong}
    said = f"the database 'no_such_book' on the socket in {socket_dir} does not exist"
    with services.jupyter_server(course, token, tmp_path / "server-2.log", env) as base:
        check(base, env, said)
