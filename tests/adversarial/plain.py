"""Grade one submission in one plain Python process, as a student's kernel runs the checks.

``python -m adversarial.plain SOURCE SUBMISSION [SOURCE SUBMISSION ...]`` (run from ``tests/``)
grades each submission against its source notebook and writes ``SUBMISSION.scores.json``,
``{test cell grade_id: points}``. This is the grading rule with no sandbox at all, the oracle the
corpus's ``plain`` expectations are checked against: the setup cells and the test cells (hidden
tests included) come from the source notebook, the student's code only from the submission's
solution cells, found by grade_id; the setup runs, then every solution cell in the submission's
order (an error in one is kept and the rest run on), then each test cell in a copy of the
namespace: it scores its points if it raises nothing (nbgrader's rule). A file that is not a
UTF-8 nbformat notebook scores 0 on every part. Everything runs in this process, so a submission
that tampers with it changes the grade: that is what the ``plain`` expectation of an attack
records.

Each submission is graded in a child process forked from this one after the common imports (so a
submission's tampering reaches only its own grading, and the imports are paid once), killed if it
takes longer than ``TIMEOUT`` seconds.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

import nbformat

TIMEOUT = 300.0  # seconds for one submission


def meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def grade(data: bytes, source: nbformat.NotebookNode) -> dict[str, float]:
    tests = [c for c in source.cells if meta(c).get("grade")]
    zero = {meta(c)["grade_id"]: 0.0 for c in tests}
    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    except Exception:  # not a notebook this grader can read
        return zero
    solution_ids = {meta(c)["grade_id"] for c in source.cells if meta(c).get("solution")}
    namespace: dict = {"__name__": "__main__"}
    for cell in source.cells:  # the locked setup cells
        if cell.cell_type == "code" and meta(cell).get("locked") and not meta(cell).get("grade"):
            exec(compile(cell.source, "setup", "exec"), namespace)
    for cell in nb.cells:
        if cell.cell_type == "code" and meta(cell).get("grade_id") in solution_ids:
            try:
                exec(compile(cell.source, meta(cell)["grade_id"], "exec"), namespace)
            except BaseException:  # noqa: B036 (a submission's sys.exit must not end the run)
                traceback.print_exc()
    scores = dict(zero)
    for cell in tests:
        try:
            exec(compile(cell.source, meta(cell)["grade_id"], "exec"), dict(namespace))
            scores[meta(cell)["grade_id"]] = float(meta(cell)["points"])
        except BaseException:  # noqa: B036
            traceback.print_exc()
    return scores


def grade_in_child(source: Path, submission: Path) -> None:
    """Fork; the child grades ``submission`` and writes its scores; wait at most ``TIMEOUT``."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            scores = grade(submission.read_bytes(), nbformat.read(source, as_version=4))
            out = Path(str(submission) + ".scores.json")
            out.write_text(json.dumps(scores))
            code = 0
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def main() -> None:
    import nlpcourse.checks.hmm  # noqa: F401 (imported once, before the children fork)
    import nlpcourse.checks.ngram  # noqa: F401

    args = sys.argv[1:]
    for source, submission in zip(args[::2], args[1::2], strict=True):
        grade_in_child(Path(source), Path(submission))


if __name__ == "__main__":
    main()
