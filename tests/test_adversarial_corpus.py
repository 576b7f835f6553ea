"""The adversarial corpus itself: each maker makes what it says, and its expectation holds.

The corpus (``tests/adversarial/``) says, for each kind of submission, which parts it breaks. Two
checks here need no grader:

* each maker makes what it says: a notebook that parses and validates (nbformat 4, or 3 for that
  kind) with every solution cell valid Python, or, for a file the grader must reject, bytes that
  are not a UTF-8 nbformat notebook; every part of ``solutions/`` has an expected score;
* graded in one plain process with no sandbox (``adversarial/plain.py``, the grading rule alone),
  each kind scores what its ``plain`` expectation says: honest and noisy kinds score exactly what
  the sandboxed grader must give them, and each attack *works* there (a guard bypass passes, a
  read of ``solutions/`` succeeds, a write lands), which shows the attack is real. The attacks
  aim at a copy of the repository and a copy of the course, never at the real ones.

``tests/test_adversarial_grading.py`` grades the whole corpus with the sandboxed class grader.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from adversarial import (
    ALL,
    FLAGGED,
    REJECTED,
    Kind,
    Target,
    escape,
    interpreter,
    kinds,
    limits,
    noise,
)
from adversarial.escape import MARKER
from adversarial.listener import Listener
from adversarial.notebooks import NOTEBOOK, REPO, canary, filled, points, source, to_bytes

TESTS = Path(__file__).resolve().parent
KINDS = kinds()
HOSTILE = [k for k in KINDS if not k.honest]
VICTIM = {"01-ngrams": "honest-full-ngrams", "02-hmm": "honest-full-hmm"}

# What the issue asks the corpus to hold, each by the name of a kind
ISSUE_ITEMS = {
    "infinite loop in a function": "loop-in-function",
    "infinite loop at top level": "loop-at-top-level",
    "a loop ignoring KeyboardInterrupt": "loop-ignoring-signals",
    "memory bomb": "memory-bomb",
    "process bomb": "process-bomb",
    "sys.exit in a function": "sys-exit-in-function",
    "os._exit in a function": "os-exit-in-function",
    "SystemExit in a function": "raise-system-exit",
    "huge output": "huge-output",
    "tampered test cells": "tampered-test-cells",
    "deleted test cells": "deleted-test-cells",
    "duplicated test cells": "duplicated-test-cells",
    "renamed test cells": "renamed-test-cell-and-points",
    "renamed solution cells": "renamed-solution-cell",
    "monkeypatched checks": "monkeypatched-checks",
    "monkeypatched builtins": "monkeypatched-builtins",
    "input transformers": "input-transformer",
    "equality-faking return values": "equality-faking",
    "NaN": "nan",
    "guard bypass through the closure": "guard-saved-code",
    "guard bypass by importlib.reload": "guard-reload",
    "guard bypass by reading the package source": "guard-package-source",
    "reading solutions/": "reads-hidden-tests",
    "reading the gradebook": "reads-gradebook",
    "writing another student's files": "writes-other-student",
    "writing the gradebook": "writes-gradebook",
    "writing the course files": "writes-course-files",
    "network calls": "network",
    "malformed JSON": "malformed-json",
    "nbformat 3": "nbformat-3",
    "empty file": "empty-file",
    "wrong file name": "wrong-file-name",
    "a 50 MB notebook": "notebook-50mb",
    "non-UTF-8": "non-utf8",
    "changing the working directory": "changes-directory",
    "global random seeds": "global-seeds",
    "warnings on stderr": "warnings-ngrams",
}


def test_the_corpus_holds_every_kind_the_issue_lists():
    names = {k.name for k in HOSTILE}
    missing = {item: name for item, name in ISSUE_ITEMS.items() if name not in names}
    assert not missing, missing
    assert len(HOSTILE) >= 30
    assert {k.assignment for k in HOSTILE} == {"01-ngrams", "02-hmm"}
    for assignment in ("01-ngrams", "02-hmm"):
        honest = {k.name for k in KINDS if k.honest and k.assignment == assignment}
        assert VICTIM[assignment].removeprefix("honest-") in honest


def is_notebook(data: bytes) -> bool:
    try:
        nbformat.reads(data.decode("utf-8"), as_version=4)
        return True
    except Exception:
        return False


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Target:
    """Paths for makers that need them; nothing is written there by the makers."""
    root = tmp_path_factory.mktemp("targets")
    return Target(REPO, root / "course", root / "canary", 9, "honest-full-ngrams")


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.student)
def test_each_maker_makes_what_it_says(kind: Kind, target: Target):
    submission = kind.make(target)
    assert kind.make(target) == submission, "a maker must make the same bytes every time"
    assert set(kind.expected()) == set(points(kind.assignment))
    assert all(
        0 <= kind.expected()[p] <= points(kind.assignment)[p] for p in points(kind.assignment)
    )
    if kind.statuses == REJECTED:
        assert kind.broken == ALL
        assert not is_notebook(submission.data), "a file to reject must not read as a notebook"
        return
    nb = nbformat.reads(submission.data.decode("utf-8"), as_version=nbformat.NO_CONVERT)
    nbformat.validate(nb)
    assert nb.nbformat == (3 if kind.name == "nbformat-3" else 4)
    nb = nbformat.reads(submission.data.decode("utf-8"), as_version=4)
    for cell in nb.cells:
        if is_solution(cell):
            ast.parse(cell.source)  # every solution cell is Python
    if submission.name != NOTEBOOK[kind.assignment]:  # graded all the same, and flagged
        assert kind.broken == () and kind.statuses == FLAGGED
    solutions = {c.metadata["nbgrader"]["grade_id"] for c in nb.cells if is_solution(c)}
    wanted = {
        c.metadata["nbgrader"]["grade_id"] for c in source(kind.assignment).cells if is_solution(c)
    }
    if kind.broken == ():  # full marks: every part's solution cell is there, by grade_id
        assert solutions == wanted or kind.statuses == FLAGGED  # or renamed, and flagged


CODE_ATTACKS = [k for m in (escape, interpreter, limits, noise) for k in m.KINDS]


@pytest.mark.parametrize("kind", CODE_ATTACKS, ids=lambda k: k.student)
def test_each_code_attack_sits_in_a_solution_cell(kind: Kind, target: Target):
    """Issue 28, fault 7: an attack placed in a test cell or a scratch cell is never run by the
    grader, so its zero (or its full marks) would prove nothing about the sandbox. Each kind of
    code attack differs from the honest full notebook in solution cells only, which both routes
    run."""
    changed = changed_solution_cells(kind, target)
    assert changed, "the attack changes no cell"
    for grade_id, code in changed.items():  # and says, as it runs, that it ran
        assert canary(kind.assignment, grade_id) in code, f"{grade_id} writes no canary"


def changed_solution_cells(kind: Kind, target: Target) -> dict[str, str]:
    """``{grade_id: code}`` of the cells where ``kind`` differs from the honest full notebook,
    all of them solution cells (asserted)."""
    nb = nbformat.reads(kind.make(target).data.decode("utf-8"), as_version=4)
    honest = filled(kind.assignment)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    assert ids == [c.metadata.get("nbgrader", {}).get("grade_id") for c in honest.cells], (
        "the attack adds, removes or moves cells"
    )
    changed = {}
    for cell, same in zip(nb.cells, honest.cells, strict=True):
        if cell.source != same.source:
            assert is_solution(cell), f"{cell.metadata} changed but is not a solution cell"
            changed[cell.metadata["nbgrader"]["grade_id"]] = cell.source
    return changed


def is_solution(cell) -> bool:
    return cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution", False)


# ------------------------------------------------------------ graded in one plain process


def make_course(root: Path, with_config: bool = True) -> Path:
    """A course (or repository) copy the attacks may damage: sources, config, a gradebook."""
    from nbgrader.api import Gradebook

    for assignment in NOTEBOOK:
        shutil.copytree(REPO / "solutions" / assignment, root / "solutions" / assignment)
        shutil.copytree(REPO / "exercises" / assignment, root / "exercises" / assignment)
    (root / "autograder").mkdir()
    if with_config:
        shutil.copy(REPO / "autograder" / "nbgrader_config.py", root / "autograder")
    path = os.environ.get("PATH", "")  # nbgrader runs `alembic`, which sits beside python
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{path}"
    try:
        with Gradebook(f"sqlite:///{root / 'autograder' / 'gradebook.db'}"):
            pass
    finally:
        os.environ["PATH"] = path
    return root


@pytest.fixture(scope="module")
def plain_target(tmp_path_factory):
    """A copy of the repository and of a course, a canary folder and a listening port."""
    root = tmp_path_factory.mktemp("plain")
    repo = make_course(root / "repo")
    for name in ("checks/ngram.py", "testing.py", "hmm.py", "guard.py"):
        (repo / "nlpcourse" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "nlpcourse" / name, repo / "nlpcourse" / name)
    course = make_course(root / "course")
    (root / "canary").mkdir()
    (root / "canary" / MARKER).write_text("a file of the host\n")
    (root / "home").mkdir()
    listener = Listener()
    target = Target(repo, course, root / "canary", listener.port, VICTIM["01-ngrams"])
    for assignment, victim in VICTIM.items():
        path = target.submitted(victim, assignment)
        path.parent.mkdir(parents=True)
        path.write_bytes(to_bytes(filled(assignment)))
    yield target, listener, root
    listener.socket.close()


PLAIN = [k for k in KINDS if k.plain is not None]


@pytest.fixture(scope="module")
def plain_scores(plain_target) -> dict[str, dict | str]:
    """Every kind that is safe to run so, graded by ``adversarial/plain.py`` in one run (one
    process, a child forked per submission): ``{student: scores}``, or what it printed."""
    target, listener, root = plain_target
    args = []
    for kind in PLAIN:
        submission = kind.make(target)
        path = root / "submissions" / kind.student / submission.name
        path.parent.mkdir(parents=True)
        path.write_bytes(submission.data)
        args += [str(REPO / "solutions" / kind.assignment / NOTEBOOK[kind.assignment]), str(path)]
    env = {**os.environ, "PYTHONPATH": str(TESTS), "HOME": str(root / "home")}
    result = subprocess.run(
        [sys.executable, "-m", "adversarial.plain", *args],
        cwd=target.course,
        env={**env, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    scores: dict[str, dict | str] = {}
    for kind, path in zip(PLAIN, args[1::2], strict=True):
        out = Path(path + ".scores.json")
        scores[kind.student] = json.loads(out.read_text()) if out.exists() else result.stderr
    return scores


@pytest.mark.slow
@pytest.mark.parametrize("kind", PLAIN, ids=lambda k: k.student)
def test_graded_in_one_plain_process_each_kind_scores_its_plain_expectation(
    kind, plain_scores, plain_target
):
    assert plain_scores[kind.student] == kind.expected_plain()
    if kind.name == "network":
        listener = plain_target[1]
        assert listener.connections, "the network attack never reached the local port"
