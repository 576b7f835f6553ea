"""The whole adversarial corpus graded in one class run, beside honest students (issue 11).

Every kind of ``tests/adversarial/`` (hostile and honest, of ``01-ngrams`` and ``02-hmm``) is
handed in to a temporary copy of the course, with its own gradebook, and graded with the
instructor's command, ``python -m autograder grade <assignment>`` (two local Dask workers; no
feedback HTML, which ``tests/test_classgrader.py`` covers). The honest students are also graded
alone, in a second copy. Asserted:

* every kind scores what the corpus says on every part (derived from the parts it breaks), with a
  status it allows and, for a file the grader rejects, a reason;
* the honest students' grades are the same with and without the hostile ones in the class;
* the gradebook holds exactly the students handed in, and no grade anyone set by hand;
* nothing outside the sandbox was written: the repository's ``solutions/``, ``exercises/``,
  ``nlpcourse/`` and ``autograder/*.py`` hash the same before and after, and so do the course
  copy's submissions, sources and configuration; no file appeared where the attacks aim (a
  world-writable canary folder, beside the course, beside the repository); no connection reached
  the port the test listens on.

Limits are cut for the test (a call or cell may take 20 s, a notebook 90 s) so that the loops cost
seconds, not minutes; they are still far above what an honest submission of these two assignments
needs on a busy machine.
"""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from adversarial import GRADED, Kind, Target, kinds
from adversarial.escape import MARKER
from adversarial.listener import Listener
from adversarial.notebooks import NOTEBOOK, REPO, canary, grading
from test_adversarial_corpus import CODE_ATTACKS, changed_solution_cells

pytestmark = pytest.mark.slow  # grades about 60 submissions with Dask (a few minutes)

KINDS = kinds()
HONEST = [k for k in KINDS if k.honest]
VICTIM = "honest-full-ngrams"  # the honest student the attacks go after
LIMITS = ["--call-seconds", "20", "--notebook-seconds", "90"]
WATCHED = ["solutions", "exercises", "nlpcourse", "autograder"]  # in the repository


def tree_hashes(root: Path, parts: list[str], pattern: str = "*") -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``root/part`` (``autograder``: its .py)."""
    out = {}
    for part in parts:
        top = root / part
        if not top.exists():
            continue
        files = top.glob("*.py") if part == "autograder" else top.rglob(pattern)
        for path in files:
            if path.is_file() and "__pycache__" not in path.parts:
                out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def make_course(root: Path) -> Path:
    """A course at ``root`` as nbgrader lays it out: ``autograder/`` with the configuration,
    ``solutions/`` with both assignments; the gradebook is made by the grader."""
    (root / "autograder").mkdir(parents=True)
    grading.copy_configuration(root / "autograder")
    for assignment in NOTEBOOK:
        shutil.copytree(REPO / "solutions" / assignment, root / "solutions" / assignment)
    return root


def hand_in(target: Target, kinds: list[Kind]) -> None:
    for kind in kinds:
        submission = kind.make(target)
        folder = target.course / "autograder" / "submitted" / kind.student / kind.assignment
        folder.mkdir(parents=True)
        (folder / submission.name).write_bytes(submission.data)
        (folder / "timestamp.txt").write_text("2026-11-23 12:00:00.000000 UTC\n")


def grade_class(course: Path, assignment: str) -> subprocess.CompletedProcess:
    """The instructor's command, run from the repository root."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "autograder", "grade", assignment]
    command += ["--course", str(course / "autograder"), "--workers", "2", "--quiet", *LIMITS]
    command += ["--no-feedback"]  # feedback is tested in test_classgrader.py; here it costs minutes
    command += ["--csv", str(course / f"grades-{assignment}.csv")]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    return result


def gradebook(course: Path, assignment: str) -> dict[str, dict]:
    """``{student: {"parts": {grade_id: score}, "manual": [manual scores set]}}`` of an assignment,
    read with nbgrader's own API; and the set of students under the key ``"*students"``."""
    from nbgrader.api import Gradebook, MissingEntry

    out: dict[str, dict] = {}
    with Gradebook(f"sqlite:///{course / 'autograder' / 'gradebook.db'}") as gb:
        out["*students"] = {"ids": {s.id for s in gb.students}}
        notebook = Path(NOTEBOOK[assignment]).stem
        for student in out["*students"]["ids"]:
            try:
                nb = gb.find_submission_notebook(notebook, assignment, student)
            except MissingEntry:
                continue
            out[student] = {
                "parts": {g.name: g.score for g in nb.grades},
                "manual": [g.manual_score for g in nb.grades if g.manual_score is not None],
            }
    return out


def csv_rows(course: Path, assignment: str) -> dict[str, dict]:
    with open(course / f"grades-{assignment}.csv") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class run and the honest-only run; what was hashed before and after."""
    tmp = tmp_path_factory.mktemp("adversarial")
    canary = Path(tempfile.mkdtemp(prefix="adversarial-canary-"))
    os.chmod(canary, 0o777)  # world-writable: a submission that can see it could write in it
    (canary / MARKER).write_text("a file of the host\n")
    listener = Listener()
    course = make_course(tmp / "class")
    honest_course = make_course(tmp / "honest")
    target = Target(REPO, course, canary, listener.port, VICTIM)
    hand_in(target, KINDS)
    hand_in(Target(REPO, honest_course, canary, listener.port, VICTIM), HONEST)
    before = {
        "repo": tree_hashes(REPO, WATCHED),
        "course": tree_hashes(course, ["autograder/submitted", "solutions", "autograder"]),
    }
    real_gradebook = REPO / "autograder" / "gradebook.db"
    gradebook_before = real_gradebook.read_bytes() if real_gradebook.exists() else None

    start = time.monotonic()
    runs = {a: grade_class(course, a) for a in NOTEBOOK}
    seconds = time.monotonic() - start
    for assignment in NOTEBOOK:
        grade_class(honest_course, assignment)

    yield {
        "course": course,
        "honest_course": honest_course,
        "target": target,
        "runs": runs,
        "seconds": seconds,
        "before": before,
        "after": {
            "repo": tree_hashes(REPO, WATCHED),
            "course": tree_hashes(course, ["autograder/submitted", "solutions", "autograder"]),
        },
        "real_gradebook": (gradebook_before, real_gradebook),
        "listener": listener,
    }
    listener.socket.close()
    shutil.rmtree(canary, ignore_errors=True)
    for leaked in WATCHED:  # a file an attack created in the repository (the test has failed)
        for path in (REPO / leaked).glob("adversarial_canary*"):
            path.unlink()


def test_every_kind_is_graded_as_the_corpus_expects(graded):
    wrong = []
    for assignment in NOTEBOOK:
        book = gradebook(graded["course"], assignment)
        rows = csv_rows(graded["course"], assignment)
        for kind in (k for k in KINDS if k.assignment == assignment):
            got = book.get(kind.student, {}).get("parts")
            row = rows.get(kind.student, {})
            if got != kind.expected():
                wrong.append(f"{kind.student}: expected {kind.expected()}, got {got} ({row})")
            elif row.get("status") not in kind.statuses:
                wrong.append(f"{kind.student}: status {row.get('status')}, not {kind.statuses}")
            elif row.get("status") not in GRADED and not row.get("reasons"):
                wrong.append(f"{kind.student}: {row.get('status')} with no reason given")
    assert not wrong, "\n".join(wrong)


def test_every_code_attack_ran_under_the_grader(graded):
    """Issue 28, fault 7: each code attack's zero (or full marks) counts as the sandbox's doing only
    if the attack ran. Each one writes a canary to its stdout as it starts (in every solution cell
    it changes), which the grader keeps with the result; read back here, per student."""
    missing = []
    for kind in CODE_ATTACKS:
        changed = changed_solution_cells(kind, graded["target"])
        printed = graded["course"] / "autograder" / "autograded" / kind.student
        path = printed / f"{kind.assignment}-printed.txt"
        text = path.read_text() if path.exists() else ""
        missing += [
            f"{kind.student}: {sid}" for sid in changed if canary(kind.assignment, sid) not in text
        ]
    assert not missing, "attacks with no canary in their result (never ran?):\n" + "\n".join(
        missing
    )


def test_honest_grades_do_not_depend_on_the_hostile_students(graded):
    for assignment in NOTEBOOK:
        with_hostile = gradebook(graded["course"], assignment)
        alone = gradebook(graded["honest_course"], assignment)
        for kind in (k for k in HONEST if k.assignment == assignment):
            assert with_hostile[kind.student]["parts"] == alone[kind.student]["parts"]
            assert alone[kind.student]["parts"] == kind.expected()
        alone_rows = csv_rows(graded["honest_course"], assignment)
        rows = csv_rows(graded["course"], assignment)
        for kind in (k for k in HONEST if k.assignment == assignment):
            assert rows[kind.student]["status"] == alone_rows[kind.student]["status"]


def test_the_gradebook_holds_the_class_and_nothing_else(graded):
    students = {k.student for k in KINDS}
    for assignment in NOTEBOOK:
        book = gradebook(graded["course"], assignment)
        assert book["*students"]["ids"] == students  # no "intruder"
        handed_in = {k.student for k in KINDS if k.assignment == assignment}
        assert {s for s in book if s != "*students"} == handed_in
        assert not any(book[s]["manual"] for s in handed_in), "a grade was set by hand"
    before, real = graded["real_gradebook"]
    assert (real.read_bytes() if real.exists() else None) == before


def test_nothing_outside_the_sandbox_was_written(graded):
    before, after = graded["before"]["repo"], graded["after"]["repo"]
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    # The attacks never change a file of the repository (they create new ones or open existing
    # ones without writing), so a change here is the grader's, or another process's where several
    # people share one working tree: CI grades on a clean clone, where nothing else runs.
    assert not changed, f"files of the repository changed during the class run: {changed}"
    assert graded["after"]["course"] == graded["before"]["course"]
    target = graded["target"]
    leaked = [
        path
        for path in [
            *(p for p in target.canary.iterdir() if p.name != MARKER),
            *target.course.parent.glob("adversarial_canary*"),
            *REPO.parent.glob("adversarial_canary*"),
            *(p for w in WATCHED for p in (REPO / w).glob("adversarial_canary*")),
            *(target.course / "autograder").glob("adversarial_canary*"),
        ]
    ]
    assert not leaked
    assert not graded["listener"].connections, "a submission reached the network"
