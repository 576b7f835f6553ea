"""The class grader (``python -m autograder grade``, issue 11): Dask, the gradebook, resuming.

The grading of one submission (:func:`autograder.sandbox.grade_submission`) has its own tests
(``tests/test_sandbox.py``, ``tests/test_adversarial_grading.py``); here the tasks run
:func:`stand_in`, a grader with the same signature that gives a part its points when its solution
cell no longer raises ``NotImplementedError`` and sleeps as long as a notebook asks. What is tested
is what happens around it:

* a two-worker ``LocalCluster`` grades a class into a real gradebook, which ``nbgrader export``
  reads back, and the rows are the ones ``nbgrader autograde`` itself writes for the same class;
* a worker killed mid-run: the batch still completes, with every grade recorded exactly once;
* resuming: a second run grades nothing, a changed file is graded again, ``--regrade`` grades all;
* only the coordinator writes: audit hooks in the worker processes see no gradebook connection
  and no file of the course opened for writing;
* the submitted files are never modified, and no hidden test reaches a student.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "autograder"))
import grading  # noqa: E402

from autograder import classgrader  # noqa: E402

ASSIGNMENT = "01-ngrams"
pytestmark = pytest.mark.slow  # starts a Dask cluster and runs nbgrader


# ------------------------------------------------------------------------------ the stand-in


def stand_in(data, name, source, *, assignment, student, limits, expected_name):
    """A stand-in for ``grade_submission``: a part scores its points when the student's solution
    cell for it (the last solution cell before the test cell in the source) no longer raises
    ``NotImplementedError``. Sleeps ``metadata["stand_in_sleep"]`` seconds first, and appends
    "start <student> <pid> <time>" to ``metadata["stand_in_log"]`` if given."""
    misnamed = [f"expected {expected_name}, found {name}"] if name != expected_name else []
    nb = json.loads(data)
    meta = nb.get("metadata", {})
    if meta.get("stand_in_log"):
        with open(meta["stand_in_log"], "a") as log:
            log.write(f"start {student} {os.getpid()} {time.time()}\n")
    time.sleep(float(meta.get("stand_in_sleep", 0)))
    answers = {}
    for cell in nb["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        answers[gid] = "NotImplementedError" not in text
    parts, solution = [], None
    for cell in source["cells"]:
        info = cell.get("metadata", {}).get("nbgrader", {})
        if info.get("solution"):
            solution = info["grade_id"]
        elif info.get("grade"):
            ok = answers.get(solution, False)
            parts.append(
                {
                    "grade_id": info["grade_id"],
                    "points": float(info["points"]) if ok else 0.0,
                    "max_points": float(info["points"]),
                    "status": "passed" if ok else "failed",
                    "message": "" if ok else f"{solution} is not written yet",
                }
            )
    score = sum(p["points"] for p in parts)
    return {  # as grade_submission: a misnamed notebook is graded and flagged (issue 28)
        "assignment": assignment,
        "student": student,
        "notebook": name,
        "checksum": hashlib.sha256(data).hexdigest(),
        "parts": parts,
        "status": "needs_review" if misnamed else "graded" if score else "zero",
        "reasons": misnamed + ([] if score else ["no part passed"]),
        "needs_review": bool(misnamed),
        "seconds": 0.1,
        "student_seconds": 0.05,
        "isolation": "none: stand-in",
    }


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def client():
    """Two single-threaded worker processes, shared by the tests of this file."""
    with classgrader.dask_client(None, 2) as made:
        yield made


def make_course(root: Path) -> classgrader.Course:
    """A course at ``root``: the repository's nbgrader configuration, ``solutions/01-ngrams``,
    and an empty gradebook of its own."""
    (root / "autograder").mkdir(parents=True)
    grading.copy_configuration(root / "autograder")
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, root / "solutions" / ASSIGNMENT)
    return classgrader.load_course(root / "autograder")


def hand_in(root: Path, student: str, nb, name: str = "ngrams.ipynb", stamp: str = "") -> Path:
    folder = root / "autograder" / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / name)
    if stamp:
        (folder / "timestamp.txt").write_text(stamp)
    return folder / name


def file_hashes(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def rows(db: Path, query: str) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return sorted(con.execute(query).fetchall(), key=repr)


# the points of each test cell, read from the source notebook (independently of the grader)
def source_points() -> dict[str, float]:
    nb = json.loads((REPO / "solutions" / ASSIGNMENT / "ngrams.ipynb").read_text())
    out = {}
    for cell in nb["cells"]:
        info = cell["metadata"].get("nbgrader", {})
        if info.get("grade") and not info.get("solution"):
            out[info["grade_id"]] = float(info["points"])
    return out


# ------------------------------------------------------------------------------ the tests


def install_write_audit(course_root: str) -> None:
    """In a worker: record every sqlite connection and every file under the course opened for
    writing, in ``sys._autograder_audit`` (read back with ``client.run``)."""
    import sys as _sys

    if hasattr(_sys, "_autograder_audit"):
        _sys._autograder_audit.clear()
        _sys._autograder_root = course_root
        return
    _sys._autograder_audit = []
    _sys._autograder_root = course_root

    def hook(event, args):
        if event == "sqlite3.connect":
            _sys._autograder_audit.append(f"sqlite3.connect {args}")
        elif event == "open" and isinstance(args[0], str | bytes):
            path = os.fsdecode(args[0])
            mode = args[1] or "r"
            flags = args[2] if len(args) > 2 else 0
            writing = any(c in str(mode) for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR)
            if writing and os.path.abspath(path).startswith(_sys._autograder_root):
                _sys._autograder_audit.append(f"open {path} {mode}")

    _sys.addaudithook(hook)


def test_two_workers_grade_a_class_into_the_gradebook(tmp_path, client):
    course = make_course(tmp_path)
    code = grading.solution_code(ASSIGNMENT)
    first = next(iter(code))
    full = grading.submission(ASSIGNMENT, code)
    one = grading.submission(ASSIGNMENT, {first: code[first]})
    blank = grading.submission(ASSIGNMENT, {})
    hand_in(tmp_path, "ana", full, stamp="2026-01-10 12:00:00.000000 UTC")
    hand_in(tmp_path, "ben", one)
    hand_in(tmp_path, "cleo", blank)
    hand_in(tmp_path, "dan", full, name="ngrams-Copy1.ipynb")  # misnamed, alone: graded, flagged
    (tmp_path / "autograder" / "submitted" / "eve" / ASSIGNMENT).mkdir(parents=True)  # nothing
    submitted = tmp_path / "autograder" / "submitted"
    before = file_hashes(submitted)
    client.run(install_write_audit, str(tmp_path))

    summary = classgrader.grade_assignment(
        course,
        ASSIGNMENT,
        client=client,
        grade_function=stand_in,
        csv_path=tmp_path / "grades.csv",
        progress=False,
    )

    assert file_hashes(submitted) == before  # the submissions are never modified
    audit = client.run(lambda: list(sys._autograder_audit))
    assert audit and all(events == [] for events in audit.values()), audit  # workers wrote nothing
    points = source_points()
    total, part_one = sum(points.values()), points[f"test_{first}"]  # count_ngrams, test_...
    expected = {"ana": total, "ben": part_one, "cleo": 0.0, "dan": total, "eve": 0.0}
    assert {s: sum(p["points"] for p in r["parts"]) for s, r in summary.results.items()} == expected
    assert summary.results["eve"]["status"] == "zero"
    # nbgrader's timestamp.txt is read as the submission time, not listed as a file of the
    # student's that was not graded (it was, beside ana's notebook, before)
    assert not any("timestamp.txt" in reason for reason in summary.results["ana"]["reasons"])
    assert "no notebook handed in" in summary.results["eve"]["reasons"][0]
    assert summary.results["dan"]["notebook"] == "ngrams-Copy1.ipynb"
    assert summary.results["dan"]["status"] == "needs_review"
    assert "expected ngrams.ipynb" in summary.results["dan"]["reasons"][0]
    # the summary's counts add up (issue 28): one status each, the flagged ones all listed
    text = summary.text()
    counts = {line.split()[0]: int(line.split()[-1]) for line in text.splitlines()[1:7]}
    assert sum(counts.values()) == len(expected), text
    flagged = [s for s, r in summary.results.items() if r["needs_review"]]
    assert f"for review    {len(flagged):4d}" in text and "dan (needs review)" in text, text
    assert f"CSV:       {tmp_path / 'grades.csv'}" in text
    assert "autograded:" in text and "feedback:" in text
    # nbgrader reads the gradebook back: its own export
    exported = tmp_path / "export.csv"
    grading.run_nbgrader("export", f"--to={exported}", root=tmp_path)
    with open(exported) as f:
        got = {row["student_id"]: float(row["score"]) for row in csv.DictReader(f)}
    assert got == expected
    with open(tmp_path / "grades.csv") as f:
        table = list(csv.DictReader(f))
    ours = {row["student"]: (float(row["score"]), float(row["max"])) for row in table}
    assert ours == {s: (v, total) for s, v in expected.items()}
    for row in table:  # a column per part, which adds up to the score
        assert sum(float(row[test]) for test in points) == float(row["score"])
        assert row["isolation"] in ("none: stand-in", "not run")  # eve handed in nothing

    # the autograded notebooks and the feedback show no hidden test
    autograded = tmp_path / "autograder" / "autograded"
    feedback = tmp_path / "autograder" / "feedback"
    for student in expected:
        text = (autograded / student / ASSIGNMENT / "ngrams.ipynb").read_text()
        html = (feedback / student / ASSIGNMENT / "ngrams.html").read_text()
        for shown in (text, html):
            assert "HIDDEN TESTS" not in shown and "hidden=True" not in shown
    assert "is not written yet" in (feedback / "ben" / ASSIGNMENT / "ngrams.html").read_text()
    assert (autograded / "ana" / ASSIGNMENT / "timestamp.txt").read_text().startswith("2026-01-10")

    # resuming: nothing to do; a changed file is graded again; --regrade grades everything
    again = classgrader.grade_assignment(
        course, ASSIGNMENT, client=client, grade_function=stand_in, progress=False, feedback=False
    )
    assert again.results == {} and sorted(again.skipped) == sorted(expected)
    hand_in(tmp_path, "cleo", one)
    again = classgrader.grade_assignment(
        course, ASSIGNMENT, client=client, grade_function=stand_in, progress=False, feedback=False
    )
    assert list(again.results) == ["cleo"]
    assert sum(p["points"] for p in again.results["cleo"]["parts"]) == part_one
    again = classgrader.grade_assignment(
        course,
        ASSIGNMENT,
        client=client,
        grade_function=stand_in,
        progress=False,
        regrade=True,
        feedback=False,
    )
    assert sorted(again.results) == sorted(expected)
    # regrading two students rewrites the CSV with the whole class (issue 28: it shrank to two)
    again = classgrader.grade_assignment(
        course, ASSIGNMENT, students=["ana", "ben"], regrade=True, client=client,
        grade_function=stand_in, progress=False, feedback=False, csv_path=tmp_path / "grades.csv",
    )  # fmt: skip
    assert sorted(again.results) == ["ana", "ben"]
    with open(tmp_path / "grades.csv") as f:
        assert sorted(row["student"] for row in csv.DictReader(f)) == sorted(expected)
    db = tmp_path / "autograder" / "gradebook.db"
    assert len(rows(db, "select student_id from submitted_assignment")) == len(expected)


def test_a_killed_worker_loses_no_grade_and_grades_none_twice(tmp_path, client):
    course = make_course(tmp_path)
    log = tmp_path / "starts.log"
    blank = grading.submission(ASSIGNMENT, {})
    blank.metadata["stand_in_sleep"] = 1.5
    blank.metadata["stand_in_log"] = str(log)
    students = [f"s{i}" for i in range(6)]
    for student in students:
        hand_in(tmp_path, student, blank)
    killed, done = [], set()

    def kill_a_busy_worker(result, dask):
        """After the first result, kill a worker that started a task less than a second ago (it is
        mid-task: the stand-in sleeps 1.5 s)."""
        done.add(result["student"])
        if killed:
            return
        for _ in range(200):
            starts = [line.split()[1:] for line in log.read_text().splitlines()]
            running = [
                (student, int(pid))
                for student, pid, when in starts
                if student not in done and time.time() - float(when) < 1.0
            ]
            if running:
                student, pid = running[-1]
                os.kill(pid, signal.SIGKILL)
                killed.append(student)
                return
            time.sleep(0.05)

    summary = classgrader.grade_assignment(
        course,
        ASSIGNMENT,
        client=client,
        grade_function=stand_in,
        progress=False,
        feedback=False,
        on_result=kill_a_busy_worker,
    )
    assert killed
    assert sorted(summary.results) == students and summary.failed == {}
    starts = [line.split()[1] for line in log.read_text().splitlines()]
    assert starts.count(killed[0]) >= 2  # the task of the killed worker ran again
    db = tmp_path / "autograder" / "gradebook.db"
    assert rows(db, "select student_id from submitted_assignment") == [(s,) for s in students]
    assert rows(db, "select student from autograder_results") == [(s,) for s in students]
    n_tests = len(source_points())
    assert rows(db, "select count(*) from grade") == [(n_tests * len(students),)]


def gradebook_rows(db: Path, students: list[str]) -> dict:
    """What a gradebook holds for each student of the assignment, read through nbgrader's API."""
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{db}") as gb:
        for student in students:
            sub = gb.find_submission(ASSIGNMENT, student)
            nb = gb.find_submission_notebook("ngrams", ASSIGNMENT, student)
            out[student] = {
                "timestamp": sub.timestamp,
                "score": nb.score,
                "flagged": nb.flagged,
                "late_submission_penalty": nb.late_submission_penalty,
                "grades": sorted(
                    (g.name, g.auto_score, g.manual_score, g.needs_manual_grade) for g in nb.grades
                ),
                "comments": sorted((c.name, c.auto_comment) for c in nb.comments),
            }
    return out


def test_the_gradebook_holds_what_nbgrader_autograde_writes(tmp_path, client):
    """The same class graded by ``nbgrader autograde`` and by the class grader: the same rows."""
    code = grading.solution_code(ASSIGNMENT)
    first = next(iter(code))
    class_ = {
        "ana": grading.submission(ASSIGNMENT, code),
        "ben": grading.submission(ASSIGNMENT, {first: code[first]}),
        "cleo": grading.submission(ASSIGNMENT, {}),
    }
    stamp = "2026-01-10 12:00:00.000000 UTC"
    for root in (tmp_path / "nbgrader", tmp_path / "ours"):
        make_course(root)
        for student, nb in class_.items():
            hand_in(root, student, nb, stamp=stamp if student == "ana" else "")
    grading.run_nbgrader("generate_assignment", ASSIGNMENT, "--force", root=tmp_path / "nbgrader")
    # nbgrader's generate_assignment rewrites the release folder of its root, which is tmp_path
    grading.run_nbgrader("autograde", ASSIGNMENT, root=tmp_path / "nbgrader")
    course = classgrader.load_course(tmp_path / "ours" / "autograder")
    classgrader.grade_assignment(
        course, ASSIGNMENT, client=client, grade_function=stand_in, progress=False, feedback=False
    )
    theirs = gradebook_rows(tmp_path / "nbgrader" / "autograder" / "gradebook.db", list(class_))
    ours = gradebook_rows(tmp_path / "ours" / "autograder" / "gradebook.db", list(class_))
    assert ours == theirs
    assert theirs["ana"]["score"] == sum(source_points().values())  # the run was a real one


def test_a_result_is_recorded_whole_or_not_at_all(tmp_path):
    """A result the gradebook refuses halfway leaves no trace: no student, no submission, no row
    of the grader's table (so a coordinator stopped mid-write loses only that result)."""
    from autograder import gradebook_writer

    course = make_course(tmp_path)
    assignment = classgrader.prepare_assignment(course, ASSIGNMENT)
    good = stand_in(
        nbformat.writes(grading.submission(ASSIGNMENT, {})).encode(),
        "ngrams.ipynb",
        assignment.source,
        assignment=ASSIGNMENT,
        student="ana",
        limits={},
        expected_name="ngrams.ipynb",
    )
    bad = json.loads(json.dumps(good))
    bad["parts"][-1]["points"] = "many"  # fails after the student and the submission were added
    gb = gradebook_writer.open_gradebook(course.db_url, course.course_id)
    try:
        with pytest.raises(ValueError):
            gradebook_writer.record(
                gb,
                bad,
                notebook_id="ngrams",
                timestamp=None,
                unanswered=set(),
                config=course.config,
            )
    finally:
        gb.close()
    db = tmp_path / "autograder" / "gradebook.db"
    assert rows(db, "select id from student") == []
    assert rows(db, "select id from submitted_assignment") == []
    assert rows(db, "select student from autograder_results") == []


def test_the_command_says_what_is_wrong(tmp_path):
    import subprocess

    make_course(tmp_path)

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "autograder", "grade", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
        )

    out = run(ASSIGNMENT, "--course", str(tmp_path / "autograder"), "--call-seconds", "0")
    assert out.returncode == 2 and "limits must be positive: --call-seconds 0" in out.stderr
    out = run("99-none", "--course", str(tmp_path / "autograder"), "--workers", "1")
    assert out.returncode != 0 and "assignment '99-none': no notebook in" in out.stderr
    out = run(ASSIGNMENT, "--course", str(tmp_path))
    assert out.returncode != 0 and "no nbgrader_config.py in" in out.stderr


def test_the_autograded_notebook_shows_the_release_test_cells_once(tmp_path):
    """Tampered, deleted, duplicated and retyped cells: the autograded notebook has each test cell
    of the release exactly once, as released (no hidden test), and is a valid notebook."""
    release = nbformat.read(REPO / "exercises" / ASSIGNMENT / "ngrams.ipynb", as_version=4)
    source = json.loads((REPO / "solutions" / ASSIGNMENT / "ngrams.ipynb").read_text())
    assignment = classgrader.Assignment(ASSIGNMENT, "ngrams.ipynb", source, release)
    nb = grading.submission(ASSIGNMENT, grading.solution_code(ASSIGNMENT))
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
    by_id["test_count_ngrams"].source = "pass  # edited"
    nb.cells.remove(by_id["test_mle_prob"])  # deleted
    pasted = copy.deepcopy(by_id["test_addk_prob"])  # pasted twice: JupyterLab gives the copy
    pasted.id = "pasted-copy"  # a cell id of its own and keeps its metadata, grade_id included
    nb.cells.append(pasted)
    by_id["test_perplexity"].cell_type = "markdown"  # retyped
    del by_id["test_perplexity"]["outputs"], by_id["test_perplexity"]["execution_count"]
    by_id["kn_bigram_prob"].metadata.nbgrader["grade_id"] = "mine"  # a renamed solution cell
    data = nbformat.writes(nb).encode()
    sub = classgrader.Submission("ana", tmp_path, "ngrams.ipynb", data, "x", None)
    result = stand_in(
        data, "ngrams.ipynb", source, assignment=ASSIGNMENT, student="ana", limits={},
        expected_name="ngrams.ipynb",
    )  # fmt: skip
    shown, unanswered = classgrader.autograded_notebook(assignment, sub, result)
    nbformat.validate(shown)
    released = {c.metadata["nbgrader"]["grade_id"]: c.source for c in release.cells
                if c.metadata.get("nbgrader", {}).get("grade")}  # fmt: skip
    got = [(c.metadata["nbgrader"]["grade_id"], c.source, c.cell_type) for c in shown.cells
           if c.metadata.get("nbgrader", {}).get("grade")]  # fmt: skip
    assert sorted(gid for gid, _, _ in got) == sorted(released)
    assert all(text == released[gid] and kind == "code" for gid, text, kind in got)
    assert "HIDDEN" not in nbformat.writes(shown)
    assert unanswered == {"kn_bigram_prob"}  # renamed away: put back as handed out


# ------------------------------------------------------------------------------ issue 41 §4

STAMP = "2026-01-10 12:00:00.000000 UTC"


def graded_with_stand_in(tmp_path, client, **kwargs) -> classgrader.Summary:
    course = classgrader.load_course(tmp_path / "autograder")
    return classgrader.grade_assignment(
        course, ASSIGNMENT, client=client, grade_function=stand_in, progress=False,
        feedback=False, **kwargs,
    )  # fmt: skip


def test_a_huge_linked_or_malformed_timestamp_is_not_read_and_is_flagged(tmp_path, client):
    """Issue 41 §4: ``timestamp.txt`` was read whole, through links, copied and echoed; a
    malformed one left the student "not graded" on every run. Now a sparse file of 64 MB, a link
    to another file (a valid timestamp, elsewhere) and text that is no date are each graded with
    full points, flagged with one reason naming timestamp.txt, never quoted, never copied."""
    make_course(tmp_path)
    full = grading.submission(ASSIGNMENT, grading.solution_code(ASSIGNMENT))
    secret = tmp_path / "elsewhere.txt"
    secret.write_text("2030-01-01 00:00:00.000000 UTC\n")
    marker = "\x1b[2JNOT-A-DATE-MARKER"
    for student in ("big", "link", "bad", "good"):
        hand_in(tmp_path, student, full, stamp=STAMP if student == "good" else "")
    folder = tmp_path / "autograder" / "submitted"
    with open(folder / "big" / ASSIGNMENT / "timestamp.txt", "wb") as f:
        f.write(STAMP.encode())
        f.truncate(64 * 2**20)  # sparse: 64 MB on paper, nothing on disk
    (folder / "link" / ASSIGNMENT / "timestamp.txt").symlink_to(secret)
    (folder / "bad" / ASSIGNMENT / "timestamp.txt").write_text(marker * 20)

    summary = graded_with_stand_in(tmp_path, client)

    assert summary.failed == {}, summary.failed  # every student graded: none "not graded"
    total = sum(source_points().values())
    autograded = tmp_path / "autograder" / "autograded"
    text = summary.text()
    assert marker not in text and "NOT-A-DATE" not in text
    for student, why in [("big", "over the limit"), ("link", "is a link"), ("bad", "not a date")]:
        result = summary.results[student]
        assert sum(p["points"] for p in result["parts"]) == total
        assert result["needs_review"] and result["status"] == "needs_review"
        flagged = [r for r in result["reasons"] if r.startswith("timestamp.txt")]
        assert len(flagged) == 1 and why in flagged[0], result["reasons"]
        assert not (autograded / student / ASSIGNMENT / "timestamp.txt").exists()
    good = summary.results["good"]
    assert good["status"] == "graded" and not good["needs_review"]
    assert (autograded / "good" / ASSIGNMENT / "timestamp.txt").read_text().strip() == STAMP
    # the gradebook keeps the good timestamp and none for the others (nbgrader's own API)
    rows = gradebook_rows(tmp_path / "autograder" / "gradebook.db", ["big", "link", "bad", "good"])
    assert [rows[s]["timestamp"] is None for s in ("big", "link", "bad", "good")] == [
        True, True, True, False,
    ]  # fmt: skip


def test_reading_a_submission_folder_is_bounded(tmp_path):
    """The notebook and timestamp.txt are never read through a link or past their limits: a
    notebook that is a link to a file outside is refused without being read; a timestamp of a
    gigabyte (sparse) costs no memory."""
    import tracemalloc

    course = make_course(tmp_path)
    assignment = classgrader.Assignment(ASSIGNMENT, "ngrams.ipynb", {}, nbformat.v4.new_notebook())
    folder = tmp_path / "autograder" / "submitted" / "ana" / ASSIGNMENT
    folder.mkdir(parents=True)
    outside = tmp_path / "someone-else.ipynb"
    outside.write_text(nbformat.writes(grading.submission(ASSIGNMENT, {})))
    (folder / "ngrams.ipynb").symlink_to(outside)
    with open(folder / "timestamp.txt", "wb") as f:
        f.truncate(2**30)
    tracemalloc.start()
    try:
        subs, refused = classgrader.find_submissions(course, assignment)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert refused == {} and [s.student for s in subs] == ["ana"]
    (sub,) = subs
    assert sub.problem == "ngrams.ipynb is a link, not a file" and sub.data == b""
    assert sub.timestamp is None and "timestamp.txt is 1,024.0 MB" in sub.flags[0]
    assert peak < 2**20, peak  # nothing of the gigabyte was read
    # a file that grew over the limit after it was found is refused when it is read
    (folder / "ngrams.ipynb").unlink()
    (folder / "ngrams.ipynb").write_bytes(b"{}")
    (sub,), _ = classgrader.find_submissions(course, assignment, max_mb=1)
    assert sub.problem == "" and sub.size == 2
    (folder / "ngrams.ipynb").write_bytes(b" " * (2**20 + 1))
    with pytest.raises(classgrader.Unreadable, match="over the limit of 1.0 MB"):
        classgrader.load(sub, max_mb=1)


def test_odd_file_names_are_graded_shown_escaped_and_recorded(tmp_path, client):
    """Issue 40 §5: a notebook whose name is not UTF-8 and holds a terminal escape, beside a file
    with a control character in its name, is graded (and flagged as misnamed, as any other name)
    and recorded; the names are shown escaped, in the gradebook and on the terminal. A student
    folder whose name is not UTF-8 cannot be a student id: it is reported, the rest graded."""
    make_course(tmp_path)
    full = grading.submission(ASSIGNMENT, grading.solution_code(ASSIGNMENT))
    odd = os.fsdecode(b"ngrams \xff\x1b[31m.ipynb")
    hand_in(tmp_path, "ana", full, name=odd)
    (tmp_path / "autograder" / "submitted" / "ana" / ASSIGNMENT / "notes\rx.txt").write_text("")
    hand_in(tmp_path, "ben", full)
    hand_in(tmp_path, os.fsdecode(b"caf\xe9"), full)

    summary = graded_with_stand_in(tmp_path, client)

    total = sum(source_points().values())
    assert sorted(summary.results) == ["ana", "ben"]
    assert (
        list(summary.failed) == ["caf\\xe9"] and "rename the folder" in summary.failed["caf\\xe9"]
    )
    ana = summary.results["ana"]
    assert sum(p["points"] for p in ana["parts"]) == total and ana["needs_review"]
    assert ana["notebook"] == "ngrams \\xff\\x1b[31m.ipynb"
    assert any("notes\\rx.txt" in r for r in ana["reasons"]), ana["reasons"]
    text = summary.text()
    text.encode("utf-8")  # printable: no lone surrogate
    assert "\x1b" not in text and "\r" not in text
    db = tmp_path / "autograder" / "gradebook.db"
    assert rows(db, "select student, notebook from autograder_results") == [
        ("ana", "ngrams \\xff\\x1b[31m.ipynb"), ("ben", "ngrams.ipynb"),
    ]  # fmt: skip


def test_a_notebook_of_a_hundred_thousand_cells_is_rejected_with_the_reason(tmp_path):
    """Issue 41 §4: 100,000 tiny cells (about 10 MB, under the size limit) cost the coordinator
    minutes of feedback and recording. The cell count is bounded like the other limits (and can be
    raised); over it, the submission is rejected and flagged with the count, never run, and its
    autograded notebook is the release's (tens of cells), not 100,000."""
    from autograder.notebook import Rejected, read_notebook
    from autograder.results import Limits

    nb = json.loads(
        nbformat.writes(grading.submission(ASSIGNMENT, grading.solution_code(ASSIGNMENT)))
    )
    tiny = {
        "cell_type": "code",
        "execution_count": None,
        "metadata": {},
        "outputs": [],
        "source": "x = 1",
    }
    nb["cells"] += [dict(tiny, id=f"c{i}") for i in range(100_000)]
    data = json.dumps(nb).encode()
    assert len(data) < Limits().submission_mb * 2**20
    with pytest.raises(
        Rejected, match="the notebook has 100,0[0-9][0-9] cells, over the limit of 5,000"
    ):
        read_notebook(data)
    assert len(read_notebook(data, Limits(notebook_cells=200_000))["cells"]) == len(nb["cells"])

    course = make_course(tmp_path)
    assignment = classgrader.prepare_assignment(course, ASSIGNMENT)
    result = classgrader.grade_task(
        data, "ngrams.ipynb", assignment.source, ASSIGNMENT, "ana", {}, "ngrams.ipynb"
    )  # the real grade_submission: rejected before anything runs
    assert result["status"] == "rejected" and result["needs_review"]
    assert any("100,0" in r and "cells" in r for r in result["reasons"]), result["reasons"]
    assert all(p["points"] == 0 for p in result["parts"])
    hand_in(tmp_path, "ana", nbformat.v4.new_notebook())
    sub = classgrader.Submission("ana", tmp_path, "ngrams.ipynb", data, result["checksum"], None)
    shown, _ = classgrader.autograded_notebook(assignment, sub, result)
    assert len(shown.cells) <= len(assignment.release.cells) + 1


def test_the_coordinator_holds_a_few_submissions_not_the_class(tmp_path, client):
    """Issue 41 §4: every file was read and submitted up front, so the coordinator's memory was
    about twice the class's bytes. Now files stream (read when their task is sent, a few in
    flight): the coordinator's peak of traced memory (this process runs the local cluster's
    scheduler too) for a class of 24 files of 1 MB is about that of a class of 4 (all in flight
    at once), and below the class's bytes (it was twice them)."""
    import tracemalloc

    padded = grading.submission(ASSIGNMENT, {})
    padded.cells.append(nbformat.v4.new_markdown_cell("x" * 2**20))
    peaks = {}
    for n in (4, 24):
        root = tmp_path / f"class-{n}"
        make_course(root)
        for i in range(n):
            padded.metadata["student_number"] = i  # a file of its own each
            hand_in(root, f"s{i:02d}", padded)
        tracemalloc.start()
        try:
            summary = graded_with_stand_in(root, client)
            peaks[n] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert len(summary.results) == n and summary.failed == {}
    class_bytes = 24 * 2**20
    assert peaks[24] < 1.3 * peaks[4], peaks
    assert peaks[24] < class_bytes, (peaks, class_bytes)


def test_a_dask_worker_imports_no_nbformat_for_its_tasks():
    """A Dask worker unpickles its tasks from :mod:`autograder.classgrader` and grades with
    :mod:`autograder.sandbox`; neither may import nbformat, whose import (jsonschema's format
    checkers with it) takes seconds of CPU in every worker process (3.5 s on the machine of
    benchmarks/README.md: grading_scale's class of 50). Only the coordinator needs it."""
    probe = (
        "import sys\n"
        "import autograder.classgrader, autograder.sandbox\n"
        "print(sorted(m for m in ('nbformat', 'jsonschema') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
