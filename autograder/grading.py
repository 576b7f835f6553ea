"""Instructor tools around nbgrader: sample submissions and a complete grading run in a sandbox.

``python autograder/grading.py demo 01-ngrams`` grades three sample submissions of an assignment
end to end with the real nbgrader (generate_assignment, autograde, generate_feedback, export) in
a separate course folder, ``autograder/demo/``, with its own gradebook, so an instructor can see
what grading does without touching the real gradebook or any student's work. The sample
submissions are made from the release notebook in ``exercises/`` (what students get):

* ``full``: every solution cell filled in with the code from ``solutions/``;
* ``one-part``: only the first part filled in;
* ``blank``: the release notebook untouched.

``python autograder/grading.py timing`` runs each solution notebook as the autograder would and
prints its slowest cells (wall-clock and CPU time): the figures the time limits of
``nbgrader_config.py`` are chosen from.

The tests (``tests/test_exercises.py``, ``tests/test_nbgrader_route.py``) use the same functions to
prove the exercise invariants and that an honest slip never stops a class or costs a right answer.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script (python autograder/grading.py): the package too
    sys.path.insert(0, str(REPO))
CONFIG_DIR = REPO / "autograder"  # where nbgrader_config.py lives
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
DEMO_MARKER = ".nlpcourse-demo"


def run_nbgrader(*args: str, root: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``nbgrader <args>`` with the course configuration; ``root`` replaces the course root
    (and its gradebook) for a sandbox. Raises with nbgrader's output if it fails."""
    command = [sys.executable, "-m", "nbgrader", *args]
    if root is not None:
        db = root / "autograder" / "gradebook.db"
        command += [f"--CourseDirectory.root={root}", f"--CourseDirectory.db_url=sqlite:///{db}"]
    env = dict(os.environ)  # nbgrader calls the `alembic` script, which sits beside python
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    result = subprocess.run(command, cwd=CONFIG_DIR, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


# a course's configuration (postgres.py: nbgrader_config.py names a missing PostgreSQL driver)
COURSE_FILES = ("nbgrader_config.py", "course_nbgrader.py", "inert.py", "postgres.py", "templates")


def copy_configuration(folder: Path) -> None:
    """Copy the course's nbgrader configuration (with its preprocessors and feedback template) to
    ``folder``, the ``autograder/`` of another course root (a test's, the benchmark's)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in COURSE_FILES:
        if (CONFIG_DIR / name).is_dir():
            shutil.copytree(CONFIG_DIR / name, folder / name, dirs_exist_ok=True)
        else:
            shutil.copy(CONFIG_DIR / name, folder / name)


def notebook_path(folder: Path, assignment: str) -> Path:
    """The one notebook of an assignment folder (each assignment has exactly one)."""
    notebooks = sorted((folder / assignment).glob("*.ipynb"))
    if len(notebooks) != 1:
        raise FileNotFoundError(
            f"expected one notebook in {folder / assignment}, found {notebooks}"
        )
    return notebooks[0]


def solution_code(assignment: str) -> dict[str, str]:
    """The solution of every solution cell of ``solutions/<assignment>``, by grade_id, with the
    ``### BEGIN/END SOLUTION`` marker lines removed."""
    nb = nbformat.read(notebook_path(REPO / "solutions", assignment), as_version=4)
    code = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            lines = [ln for ln in cell.source.splitlines() if ln.strip() not in (BEGIN, END)]
            code[meta["grade_id"]] = "\n".join(lines)
    return code


def submission(assignment: str, filled: dict[str, str]) -> nbformat.NotebookNode:
    """The release notebook with the solution cells named in ``filled`` replaced by its code."""
    nb = nbformat.read(notebook_path(REPO / "exercises", assignment), as_version=4)
    unknown = set(filled) - {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells}
    if unknown:
        raise KeyError(f"no cells with grade_id {sorted(unknown)} in {assignment}")
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in filled:
            cell.source = filled[grade_id]
    return nb


def sample_submissions(assignment: str) -> dict[str, nbformat.NotebookNode]:
    """The three demo students: ``full``, ``one-part`` and ``blank``."""
    code = solution_code(assignment)
    first = next(iter(code))
    return {
        "full": submission(assignment, code),
        "one-part": submission(assignment, {first: code[first]}),
        "blank": submission(assignment, {}),
    }


# Mistakes the checks of 01-ngrams name, each made by editing the solution's code: (solution
# cell, what is replaced, what replaces it, the test cell that fails, words of the named mistake)
MISTAKES = {
    "no_eos": ("count_ngrams", "list(sentence) + [EOS]", "list(sentence)", "test_count_ngrams",
               "you left out the end symbol '</s>'"),
    "n_bos": ("count_ngrams", "[BOS] * (n - 1)", "[BOS] * n", "test_count_ngrams",
              "you padded with n = "),
    "one_for_k": ("addk_prob", "0) + k) / (c_context + k * vocab_size)",
                  "0) + 1) / (c_context + vocab_size)", "test_addk_prob",
                  "you used 1 in place of k"),
}  # fmt: skip
BLANK = ("perplexity", "test_perplexity")  # left as handed out: "not written yet", no mistake


def class_plan(n: int) -> dict[str, list[str]]:
    """Which mistakes each of ``n`` students makes (``s01``: ["no_eos", ...]); "blank" leaves
    perplexity as handed out. Every fourth student leaves out '</s>', the next pads n '<s>',
    every third adds 1 in place of k, every fifth leaves perplexity blank."""
    plan = {}
    for i in range(1, n + 1):
        made = []
        made += ["no_eos"] if i % 4 == 0 else ["n_bos"] if i % 4 == 1 else []
        made += ["one_for_k"] if i % 3 == 0 else []
        made += ["blank"] if i % 5 == 0 else []
        plan[f"s{i:02d}"] = made
    return plan


def mistaken(assignment: str, mistakes: list[str]) -> nbformat.NotebookNode:
    """The release notebook of 01-ngrams with every part solved, but with ``mistakes``."""
    code = solution_code(assignment)
    for name in mistakes:
        if name == "blank":
            del code[BLANK[0]]
            continue
        cell, old, new, _, _ = MISTAKES[name]
        assert old in code[cell], (name, code[cell])  # the solution still reads as expected
        code[cell] = code[cell].replace(old, new)
    return submission(assignment, code)


def grade(
    root: Path,
    assignment: str,
    submissions: dict[str, nbformat.NotebookNode],
    options: Sequence[str] = (),
    progress: bool = False,
) -> dict:
    """Set up a course at ``root`` (a copy of ``solutions/<assignment>``), submit, autograde
    (with the extra command-line ``options``, e.g. ``--TimeLimitedExecute.timeout=10``), write
    feedback and export ``grades.csv``. Returns ``{student: {grade_id: score, ..., "total":
    score}}`` read back from the gradebook, and the CSV's path under ``"csv"``."""
    from nbgrader.api import Gradebook

    from autograder.gradebook_writer import class_grades

    started = time.monotonic()

    def step(*args: str) -> None:
        if progress:
            print(f"[{time.monotonic() - started:5.1f} s] nbgrader {args[0]}...", flush=True)
        run_nbgrader(*args, root=root)

    (root / "autograder").mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "solutions" / assignment, root / "solutions" / assignment)
    step("generate_assignment", assignment, "--force")
    name = notebook_path(REPO / "solutions", assignment).name
    for student, nb in submissions.items():
        folder = root / "autograder" / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / name)
    step("autograde", assignment, *options)  # a kernel per student: the slow step
    step("generate_feedback", assignment)
    csv_path = root / "autograder" / "grades.csv"
    step("export", f"--to={csv_path}")
    if progress:
        print(f"[{time.monotonic() - started:5.1f} s] done", flush=True)

    scores: dict = {"csv": csv_path}
    # read by the course's one reader of grades, as every course output is (issue 45): the total
    # is the score nbgrader export gives (late penalty included)
    with Gradebook(f"sqlite:///{root / 'autograder' / 'gradebook.db'}") as gb:
        _, rows = class_grades(gb, assignment, order=grade_order(assignment))
    for row in rows:
        if row.student in submissions:
            scores[row.student] = {**row.cells, "total": row.score}
    return scores


def grade_order(assignment: str) -> list[str]:
    """The grade_ids of ``solutions/<assignment>``'s notebook, in order."""
    nb = nbformat.read(notebook_path(REPO / "solutions", assignment), as_version=4)
    return [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "nbgrader" in c.metadata]


def solution_timing(assignment: str) -> dict:
    """Run the solution notebook of ``assignment`` once, as the autograder would, and time it:
    ``{"kernel": s, "notebook": s, "notebook_cpu": s, "cells": [(wall s, cpu s, cell name), ...]
    slowest first}``. ``cpu`` is the kernel process's CPU time (user + system), which a busy
    machine does not inflate as it does the wall-clock time. The time limits in
    ``nbgrader_config.py`` are chosen from these figures."""
    import psutil  # installed with ipykernel
    from nbclient import NotebookClient

    path = notebook_path(REPO / "solutions", assignment)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, resources={"metadata": {"path": str(path.parent)}})
    cells = []
    start = time.monotonic()
    with client.setup_kernel():
        kernel = time.monotonic() - start
        process = psutil.Process(client.km.provisioner.process.pid)

        def cpu() -> float:
            t = process.cpu_times()
            return t.user + t.system + t.children_user + t.children_system

        cpu_start = cpu()
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            wall, used = time.monotonic(), cpu()
            client.execute_cell(cell, index)
            name = cell.metadata.get("nbgrader", {}).get("grade_id", f"cell {index}")
            cells.append((time.monotonic() - wall, cpu() - used, name))
        notebook_cpu = cpu() - cpu_start
    return {
        "kernel": kernel,
        "notebook": time.monotonic() - start,
        "notebook_cpu": notebook_cpu,
        "cells": sorted(cells)[::-1],
    }


def demo(assignment: str, folder: Path) -> None:
    """Grade the sample submissions in ``folder`` and print what an instructor gets."""
    _fresh(folder)
    samples = sample_submissions(assignment)
    print(f"grading {len(samples)} sample submissions of {assignment} in {folder}", flush=True)
    scores = grade(folder, assignment, samples, progress=True)
    csv_path = scores.pop("csv")
    parts = [k for k in scores["full"] if k != "total"]
    width = {p: max(17, len(p) - 5) for p in parts}  # a column as wide as its part's name
    header = " ".join(f"{p[5:]:>{width[p]}s}" for p in parts)
    print(f"{'student':10s} {header} {'total':>6s}")
    for student, row in scores.items():
        cells = " ".join(f"{row[p]:{width[p]}g}" for p in parts)
        print(f"{student:10s} {cells} {row['total']:6g}")
    print(f"\ngradebook: {folder / 'autograder' / 'gradebook.db'}")
    print(f"CSV:       {csv_path}")
    with open(csv_path) as f:
        for row in csv.reader(f):
            print("   ", ",".join(row))
    feedback = sorted((folder / "autograder" / "feedback").rglob("*.html"))
    print("feedback:  " + "\n           ".join(str(p) for p in feedback))


def demo_class(folder: Path, students: int = 32) -> None:
    """Grade a demo class of 01-ngrams in ``folder`` with the sandboxed class grader: ``students``
    submissions with the known mistakes of :func:`class_plan`; then write its class report
    (``python -m autograder report``) and print the mistakes it names, as the README shows."""
    import json

    assignment = "01-ngrams"
    _fresh(folder)
    copy_configuration(folder / "autograder")
    shutil.copytree(REPO / "solutions" / assignment, folder / "solutions" / assignment)
    name = notebook_path(REPO / "solutions", assignment).name
    for student, made in class_plan(students).items():
        target = folder / "autograder" / "submitted" / student / assignment
        target.mkdir(parents=True)
        nbformat.write(mistaken(assignment, made), target / name)
    # its own gradebook, whatever NLPCOURSE_DB_URL names (the instructor's PostgreSQL gradebook)
    db = f"sqlite:///{folder / 'autograder' / 'gradebook.db'}"
    course = ["--course", str(folder / "autograder"), "--db-url", db]
    for command in (
        ["grade", assignment, *course, "--no-feedback"],
        ["report", assignment, *course],
    ):
        print(f"python -m autograder {' '.join(command[:2])} ...", flush=True)
        subprocess.run([sys.executable, "-m", "autograder", *command], cwd=REPO, check=True)
    data = json.loads((folder / "autograder" / "reports" / f"{assignment}.json").read_text())
    for part in data["parts"]:
        full = f"{100 * part['full_marks']:.0f}%"
        print(
            f"{part['grade_id']}: mean {part['mean']:.2f} of {part['points']:g}, full marks {full}"
        )
        for mistake, n, _ in part["mistakes"]:
            print(f"    {n} of {data['submitted']}: {mistake}")


def _fresh(folder: Path) -> None:
    """Make ``folder`` empty for a demo: refused if it exists and a demo did not make it."""
    if folder.exists():
        if not (folder / DEMO_MARKER).exists():
            sys.exit(f"{folder} exists and was not made by this demo; not touching it.")
        shutil.rmtree(folder)  # a previous demo run, made by this script
    folder.mkdir(parents=True)
    (folder / DEMO_MARKER).write_text("made by autograder/grading.py; safe to delete\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="grade three sample submissions in a sandbox course")
    p.add_argument("assignment", help="e.g. 01-ngrams")
    p.add_argument("--dir", type=Path, default=CONFIG_DIR / "demo", help="sandbox folder")
    p = sub.add_parser("demo-class", help="grade and report a class of 32 with known mistakes")
    p.add_argument("--dir", type=Path, default=CONFIG_DIR / "demo-class", help="sandbox folder")
    p = sub.add_parser("timing", help="time the solution notebooks against the time limits")
    p.add_argument("assignments", nargs="*", help="default: every assignment in solutions/")
    args = parser.parse_args()
    if args.command == "demo":
        demo(args.assignment, args.dir.resolve())
        return
    if args.command == "demo-class":
        demo_class(args.dir.resolve())
        return
    names = args.assignments or sorted(p.name for p in (REPO / "solutions").iterdir() if p.is_dir())
    for name in names:
        t = solution_timing(name)
        slowest = ", ".join(f"{w:.2f} s ({c:.2f} s CPU) {cell}" for w, c, cell in t["cells"][:3])
        print(
            f"{name}: kernel start {t['kernel']:.1f} s, notebook {t['notebook']:.1f} s "
            f"({t['notebook_cpu']:.1f} s CPU in cells); slowest cells: {slowest}"
        )


if __name__ == "__main__":
    main()
