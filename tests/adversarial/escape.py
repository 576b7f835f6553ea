"""Submissions that try to get out of the sandbox: read, write, connect.

Each attack runs inside the student's function (so at call time, where the checks' inputs are) and
the function returns the honest answer only if *every* attempt failed; if one succeeded it returns
``None``, a wrong answer. Graded in the sandbox, every such part scores its points; graded in a
plain process (``plain``), the attempts succeed and the part scores 0, which shows each attack
really reaches what it aims at. Destructive writes aim only at the temporary course being graded;
in the real repository an attack only creates new files or opens existing ones for writing without
writing, so a missing sandbox cannot damage the working tree (the test removes any file created).
A write counts as a success only where it reached the host: an existing file opened for writing,
or a new file beside a file of the host's (a marker), never a file made in the sandbox's own
private folders.
"""

from __future__ import annotations

from . import Kind, Target
from .notebooks import NOTEBOOK, maker, wrapped

MARKER = "host-marker"  # a file the test puts in the canary folder: seen only from the host

NG, HMM = "01-ngrams", "02-hmm"

READS = """
import os
from pathlib import Path


def _leaked():
    for path in {paths!r}:
        try:
            with open(path, "rb") as f:
                f.read(1)
            return path
        except OSError:
            pass
    here = Path.cwd().resolve()
    for folder in [here, *here.parents]:  # the course, found by walking up
        if (folder / "solutions").is_dir() or (folder / "autograder" / "gradebook.db").exists():
            return str(folder)
    for module in {modules!r}:
        try:
            __import__(module)
            return module
        except ImportError:
            pass
    return None
"""

LEAK_THEN_WRONG = """
if _leaked() is not None:
    return None
"""

WRITES = """
import os
import sqlite3


def _wrote():
    done = []
    for path, data in {overwrite!r}:  # files of the course being graded: destroy them
        try:
            with open(path, "r+b") as f:  # only a file that is there, never one made here
                f.truncate(0)
                f.write(data)
            done.append(path)
        except OSError:
            pass
    for path in {touch!r}:  # files of the real repository: open for writing, write nothing
        try:
            with open(path, "r+b"):
                done.append(path)
        except OSError:
            pass
    for path, marker in {create!r}:  # a new file beside a file of the host's (the marker)
        try:
            with open(path, "x") as f:
                f.write("written by a submission\\n")
            if os.path.exists(marker):  # else it landed in the sandbox's own folders
                done.append(path)
        except OSError:
            pass
    for path in {databases!r}:  # the gradebook: every grade to full marks, a student added
        try:
            db = sqlite3.connect(f"file:{{path}}?mode=rw", uri=True, timeout=1)
            with db:
                db.execute("UPDATE grade SET manual_score = 1000")
                db.execute("INSERT INTO student (id) VALUES ('intruder')")
            db.close()
            done.append(path)
        except sqlite3.Error:
            pass
    return done
"""

WROTE_THEN_WRONG = """
if _wrote():
    return None
"""

NETWORK = """
import socket

_NETWORK = []


def _connected():
    if not _NETWORK:  # once per process: each try may wait for its timeout
        _NETWORK.append(_try_network())
    return _NETWORK[0]


def _try_network():
    for address, timeout in [(("127.0.0.1", {port}), 2), (("pypi.org", 443), 3)]:
        try:
            with socket.create_connection(address, timeout=timeout) as s:
                s.sendall(b"hello from a submission\\n")
            return address
        except OSError:
            pass
    try:
        socket.getaddrinfo("pypi.org", 443)
        return "dns"
    except OSError:
        pass
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"x", ("8.8.8.8", 53))
        return "udp"
    except OSError:
        pass
    return None
"""

CONNECTED_THEN_WRONG = """
if _connected() is not None:
    return None
"""


def with_prelude(assignment: str, solution_id: str, prelude: str, body: str) -> str:
    return prelude.strip("\n") + "\n\n\n" + wrapped(assignment, solution_id, body)


def read_hidden_tests(target: Target) -> dict[str, str]:
    paths = [
        target.repo / "solutions" / NG / NOTEBOOK[NG],
        target.course / "solutions" / NG / NOTEBOOK[NG],
        target.repo / "nlpcourse" / "checks" / "ngram.py",
        target.repo / "nlpcourse" / "testing.py",
    ]
    prelude = READS.format(
        paths=[str(p) for p in paths], modules=["nlpcourse.checks.ngram", "nlpcourse.testing"]
    )
    return {"count_ngrams": with_prelude(NG, "count_ngrams", prelude, LEAK_THEN_WRONG)}


def read_gradebook(target: Target) -> dict[str, str]:
    paths = [
        target.gradebook,
        target.repo / "autograder" / "gradebook.db",
        target.submitted(target.victim, NG),
    ]
    prelude = READS.format(paths=[str(p) for p in paths], modules=[])
    return {"mle_prob": with_prelude(NG, "mle_prob", prelude, LEAK_THEN_WRONG)}


def writes(overwrite=(), touch=(), create=(), databases=()) -> str:
    return WRITES.format(
        overwrite=[(str(p), data) for p, data in overwrite],
        touch=[str(p) for p in touch],
        create=[(str(p), str(marker)) for p, marker in create],
        databases=[str(p) for p in databases],
    )


def write_other_student(target: Target) -> dict[str, str]:
    victim = target.victim
    course = target.course / "autograder"
    overwrite = [
        (target.submitted(victim, NG), b'{"cells": [], "nbformat": 4, "nbformat_minor": 5}'),
        (course / "autograded" / victim / NG / NOTEBOOK[NG], b"{}"),
        (course / "feedback" / victim / NG / "ngrams.html", b"<p>100/100</p>"),
    ]
    prelude = writes(overwrite=overwrite)
    return {"addk_prob": with_prelude(NG, "addk_prob", prelude, WROTE_THEN_WRONG)}


def write_gradebook(target: Target) -> dict[str, str]:
    prelude = writes(
        databases=[target.gradebook], touch=[target.repo / "autograder" / "gradebook.db"]
    )
    return {"perplexity": with_prelude(NG, "perplexity", prelude, WROTE_THEN_WRONG)}


def write_course_files(target: Target) -> dict[str, str]:
    course, repo = target.course, target.repo
    overwrite = [
        (course / "autograder" / "nbgrader_config.py", b"raise SystemExit('config replaced')\n"),
        (course / "solutions" / NG / NOTEBOOK[NG], b"{}"),
    ]
    touch = [
        repo / "solutions" / NG / NOTEBOOK[NG],
        repo / "exercises" / NG / NOTEBOOK[NG],
        repo / "nlpcourse" / "checks" / "ngram.py",
        repo / "nlpcourse" / "guard.py",
        repo / "autograder" / "nbgrader_config.py",
    ]
    create = [
        (repo / "nlpcourse" / "adversarial_canary.py", repo / "nlpcourse" / "checks"),
        (repo / "autograder" / "adversarial_canary.py", repo / "autograder" / "nbgrader_config.py"),
        (repo / "solutions" / "adversarial_canary", repo / "solutions" / NG),
        (
            course / "autograder" / "adversarial_canary.py",
            course / "autograder" / "nbgrader_config.py",
        ),
    ]
    prelude = writes(overwrite=overwrite, touch=touch, create=create)
    return {"continuation_prob": with_prelude(NG, "continuation_prob", prelude, WROTE_THEN_WRONG)}


def write_outside(target: Target) -> dict[str, str]:
    create = [
        (target.canary / "written-by-a-submission", target.canary / MARKER),
        (target.repo.parent / "adversarial_canary", target.repo / "solutions"),
        (target.course.parent / "adversarial_canary", target.gradebook),
    ]
    prelude = writes(create=create)
    return {"addk_tables": with_prelude(HMM, "addk_tables", prelude, WROTE_THEN_WRONG)}


def network(target: Target) -> dict[str, str]:
    prelude = NETWORK.format(port=target.port)
    return {"kn_bigram_prob": with_prelude(NG, "kn_bigram_prob", prelude, CONNECTED_THEN_WRONG)}


KINDS = [
    Kind(
        "reads-hidden-tests",
        NG,
        "count_ngrams looks for solutions/, the checks and the oracles (by path and by import)",
        maker(NG, read_hidden_tests),
        plain=("count_ngrams",),
    ),
    Kind(
        "reads-gradebook",
        NG,
        "mle_prob reads the gradebook and another student's submission",
        maker(NG, read_gradebook),
        plain=("mle_prob",),
    ),
    Kind(
        "writes-other-student",
        NG,
        "addk_prob overwrites another student's submission, autograded notebook and feedback",
        maker(NG, write_other_student),
        plain=("addk_prob",),
    ),
    Kind(
        "writes-gradebook",
        NG,
        "perplexity sets every grade in the gradebook to 1000 and adds a student",
        maker(NG, write_gradebook),
        plain=("perplexity",),
    ),
    Kind(
        "writes-course-files",
        NG,
        "continuation_prob replaces the course's config and source, creates files in the repo",
        maker(NG, write_course_files),
        plain=("continuation_prob",),
    ),
    Kind(
        "writes-outside",
        HMM,
        "addk_tables creates files in a world-writable folder and beside the course",
        maker(HMM, write_outside),
        plain=("addk_tables",),
    ),
    Kind(
        "network",
        NG,
        "kn_bigram_prob connects to a local port and to pypi.org, resolves a name, sends UDP",
        maker(NG, network),
        plain=("kn_bigram_prob",),
    ),
]
