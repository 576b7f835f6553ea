"""The adversarial corpus: hostile and honest submissions of ``01-ngrams`` and ``02-hmm``.

Each :class:`Kind` is one kind of submission (issue 11): a small function that makes it from the
course's notebooks (``tests/adversarial/notebooks.py``), and, written beside it, the score it must
get on every graded part. The expected score is derived from which parts the kind breaks, not from
running a grader: a part it breaks scores 0, every other part its full points (from the test cells
of ``solutions/``), and a file the grader must refuse scores 0 on every part.

Where the kind tries to get out of the sandbox (read the hidden tests, write the gradebook, reach
the network), its function returns the honest answer only if the attempt *failed*, and a wrong
answer (``None``) if it succeeded. So a leak shows as lost points, and a grader that wrongly gives
0 shows too: both differ from the expected full marks.

The kinds, by module:

* :mod:`.limits`: infinite loops (in a function, at top level, ignoring signals), memory and
  process bombs (bounded, so a missing limit cannot hurt the machine), ``sys.exit``, ``os._exit``
  and ``SystemExit`` in a function, huge output;
* :mod:`.cells`: tampered, deleted, duplicated and renamed test cells, renamed, deleted, pasted
  and moved solution cells;
* :mod:`.interpreter`: monkeypatched checks and builtins, input transformers, equality-faking
  answers, NaN, the reference called directly and around the guard (closure and saved code,
  ``importlib.reload``, the package's source, the guard's saved originals);
* :mod:`.escape`: reading ``solutions/``, the checks, the gradebook or another student's work;
  writing another student's files, the gradebook, the course files or anywhere outside the
  sandbox; network calls;
* :mod:`.noise`: what must never cost a right answer its points: warnings and logging on stderr,
  a changed working directory, global random seeds, answers in any reasonable form;
* :mod:`.files`: malformed JSON, nbformat 3, an empty file, a wrong file name, a 50 MB notebook,
  non-UTF-8 bytes;
* :mod:`.honest`: honest students (full, blank, one part, partly wrong), graded beside the hostile
  ones and alone, whose grades must not differ.

Hostile code aims at the paths of a :class:`Target`: the real repository, the course being graded
(a temporary copy), a canary folder outside every sandbox, a TCP port the test listens on, and an
honest student to go after.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .notebooks import ASSIGNMENTS, NOTEBOOK, Submission, points, test_of

ALL = "*"  # ``broken=ALL``: every part scores 0
SAME = "same"  # ``plain=SAME``: graded in a plain process, the same parts break
# Statuses of a submission (autograder.sandbox.SubmissionResult.status)
GRADED = frozenset({"graded", "zero"})  # graded normally (``zero`` when every part scored 0)
FLAGGED = frozenset({"timed_out", "crashed", "needs_review"})  # a limit broken: look at it
REJECTED = frozenset({"rejected"})  # not a notebook the grader can read


def scores(assignment: str, broken: tuple[str, ...] | str) -> dict[str, float]:
    """Full points on every part but the broken ones (solution grade_ids, or :data:`ALL`)."""
    parts = points(assignment)
    if broken == ALL:
        return dict.fromkeys(parts, 0.0)
    zero = {test_of(assignment, solution_id) for solution_id in broken}
    return {test: 0.0 if test in zero else p for test, p in parts.items()}


@dataclass(frozen=True)
class Target:
    """What hostile code goes after; every path is absolute."""

    repo: Path  # the real repository: solutions/, nlpcourse/, autograder/
    course: Path  # the root of the course being graded (autograder/ with the gradebook inside)
    canary: Path  # a folder outside every sandbox: nothing may appear in it
    port: int  # a TCP port on 127.0.0.1 the test listens on: no connection may arrive
    victim: str  # an honest student (of the same assignment) whose files hostile code attacks

    def submitted(self, student: str, assignment: str) -> Path:
        return (
            self.course / "autograder" / "submitted" / student / assignment / NOTEBOOK[assignment]
        )

    @property
    def gradebook(self) -> Path:
        return self.course / "autograder" / "gradebook.db"


@dataclass(frozen=True)
class Kind:
    """One kind of submission and the grade it must get.

    ``broken`` names the *solution* cells (by grade_id) whose parts score 0, or is :data:`ALL`.
    ``statuses`` are the submission statuses that are right for it.

    ``plain`` is what the same checks give when the notebook is graded in one plain Python
    process with no sandbox, as a student's kernel runs them (``tests/test_adversarial_corpus.py``
    grades every kind that way): the broken parts, :data:`SAME` for the same as ``broken``, or
    ``None`` for a kind not safe to run that way (loops, bombs). For an attack it differs from
    ``broken``: there the attack works (a guard bypass passes, a read of ``solutions/``
    succeeds), which shows the kind is a real attack, not code that fails for a reason of its
    own."""

    name: str
    assignment: str
    what: str
    make: Callable[[Target], Submission]
    broken: tuple[str, ...] | str = ()
    statuses: frozenset[str] = GRADED
    honest: bool = False
    plain: tuple[str, ...] | str | None = None

    @property
    def student(self) -> str:
        return ("honest-" if self.honest else "adv-") + self.name

    def expected(self) -> dict[str, float]:
        """``{test cell grade_id: points}`` this kind must score in the sandboxed grader."""
        return scores(self.assignment, self.broken)

    def expected_plain(self) -> dict[str, float]:
        """``{test cell grade_id: points}`` it scores in one plain process (see ``plain``)."""
        assert self.plain is not None, f"{self.name} is not graded in a plain process"
        return scores(self.assignment, self.broken if self.plain == SAME else self.plain)

    @property
    def total(self) -> float:
        return sum(self.expected().values())


def kinds() -> list[Kind]:
    """Every kind of the corpus, hostile and honest, of both assignments."""
    from . import cells, escape, files, honest, interpreter, limits, noise

    found = [k for m in (honest, limits, cells, interpreter, escape, noise, files) for k in m.KINDS]
    names = [k.student for k in found]
    duplicates = {n for n in names if names.count(n) > 1}
    assert not duplicates, f"two kinds with one name: {duplicates}"
    return found


__all__ = [
    "ALL",
    "SAME",
    "ASSIGNMENTS",
    "FLAGGED",
    "GRADED",
    "REJECTED",
    "Kind",
    "Submission",
    "Target",
    "kinds",
]
