"""Benchmark: the sandboxed class grader against ``nbgrader autograde``, on one class of 50.

Issue 11. One class of ``01-ngrams`` submissions, a seeded mix an instructor sees: full marks,
partial work (some parts left blank), blank notebooks, honest mistakes, and a few slow but right
submissions (busy work in every call of two functions). The same files are graded twice on this
machine, in one run of this script, each route in its own temporary course with its own gradebook:

* the plain route, ``nbgrader autograde`` with the course's ``autograder/nbgrader_config.py``
  (one submission after another, the student's code in a kernel with the instructor's rights);
* the class grader, ``python -m autograder grade`` (student code in a sandboxed worker, the checks
  in the grader; one Dask worker per core by default), without feedback, as autograde writes none.

Both courses are released first (``nbgrader generate_assignment``, :func:`release`), as an
instructor releases an assignment before students hand it in; neither route's time includes it.

It asserts that both give every student the same score on every part, and prints each route's
wall-clock time, the CPU time of everything it ran (its child processes, reaped), the throughput
ratio, and the class grader's overhead per submission beyond the student's own code: the time
``grade_submission`` took minus the time spent inside the student's cells and calls (p50, p95),
both recorded in the gradebook by the grader. Goals (issue 28, which raised issue 11's 1.7): at
least 4 times nbgrader's throughput on 2 idle cores, overhead at most 1 s per submission.

Takes about 5 minutes on 2 CPU cores. Run:  .venv/bin/python benchmarks/grading.py [--n 50]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from autograder import grading  # noqa: E402 (solution code, release notebook, running nbgrader)

ASSIGNMENT = "01-ngrams"
NOTEBOOK = "ngrams.ipynb"
# Honest mistakes: count_ngrams without the end marker, add-k without k|V| in the denominator.
MISTAKES = {
    "count_ngrams": (
        "padded = [BOS] * (n - 1) + list(sentence) + [EOS]",
        "padded = [BOS] * (n - 1) + list(sentence)",
    ),
    "addk_prob": ("(c_context + k * vocab_size)", "(c_context + k)"),
}
BUSY = "    for _busy in range(300_000):  # a slow student: busy work in every call\n        pass\n"


def slow(code: str) -> str:
    """The function of a solution cell with busy work at the start of its body."""
    lines = code.splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if line.rstrip().endswith('"""'))  # docstring
    return "".join(lines[: end + 1]) + BUSY + "".join(lines[end + 1 :])


def wrong(code: dict[str, str], part: str) -> str:
    old, new = MISTAKES[part]
    assert old in code[part], f"the honest mistake of {part} no longer applies"
    return code[part].replace(old, new)


def make_class(n: int, seed: int = 0) -> dict[str, object]:
    """``{student: notebook}``: half full, a fifth partial, a tenth each blank, with one honest
    mistake, and slow."""
    code = grading.solution_code(ASSIGNMENT)
    parts = list(code)
    rng = random.Random(seed)
    kinds = ["full"] * 10 + ["partial"] * 4 + ["blank"] * 2 + ["mistake"] * 2 + ["slow"] * 2
    students = {}
    for i in range(n):
        kind = kinds[i % len(kinds)]
        if kind == "full":
            filled = dict(code)
        elif kind == "partial":
            filled = {p: code[p] for p in rng.sample(parts, rng.randint(1, len(parts) - 1))}
        elif kind == "blank":
            filled = {}
        elif kind == "mistake":
            part = rng.choice(list(MISTAKES))
            filled = {**code, part: wrong(code, part)}
        else:
            filled = {**code, "count_ngrams": slow(code["count_ngrams"])}
            filled["perplexity"] = slow(code["perplexity"])
        students[f"{i:02d}-{kind}"] = grading.submission(ASSIGNMENT, filled)
    return students


def make_course(root: Path, students: dict) -> None:
    """A course at ``root``: the configuration, the source, and every submission handed in."""
    import nbformat

    (root / "autograder").mkdir(parents=True)
    grading.copy_configuration(root / "autograder")
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, root / "solutions" / ASSIGNMENT)
    for student, nb in students.items():
        folder = root / "autograder" / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / NOTEBOOK)


def release(course: Path) -> None:
    """``nbgrader generate_assignment`` of the course at ``course``, as the instructor runs it to
    hand the assignment out: it makes the course's gradebook, whose first creation costs nbgrader
    a subprocess (``alembic heads``, several seconds on a loaded machine). Both routes' courses
    are released before either is timed, so neither timing pays for it."""
    grading.run_nbgrader("generate_assignment", ASSIGNMENT, "--force", root=course)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(run) -> tuple[float, float]:
    """Wall-clock and reaped children's CPU seconds of ``run()``."""
    wall, cpu = time.perf_counter(), children_cpu()
    run()
    return time.perf_counter() - wall, children_cpu() - cpu


def gradebook_scores(root: Path) -> dict[str, dict[str, float]]:
    """``{student: {grade_id: score}}`` of the course at ``root``; a student with no graded
    submission (one nbgrader could not grade) is left out."""
    from nbgrader.api import Gradebook, MissingEntry

    scores = {}
    with Gradebook(f"sqlite:///{root / 'autograder' / 'gradebook.db'}") as gb:
        for student in gb.students:
            try:
                nb = gb.find_submission_notebook(Path(NOTEBOOK).stem, ASSIGNMENT, student.id)
            except MissingEntry:
                continue
            scores[student.id] = {g.name: g.score for g in nb.grades}
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50, help="submissions in the class")
    parser.add_argument("--workers", type=int, help="class grader's workers (default: cores)")
    args = parser.parse_args()
    students = make_class(args.n)
    tmp = Path(tempfile.mkdtemp(prefix="grading-benchmark-"))
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    try:
        plain, ours = tmp / "nbgrader", tmp / "autograder"
        make_course(plain, students)
        make_course(ours, students)
        for course in (plain, ours):  # released, as the instructor did before students handed in
            release(course)

        nb_wall, nb_cpu = timed(lambda: grading.run_nbgrader("autograde", ASSIGNMENT, root=plain))
        command = [sys.executable, "-m", "autograder", "grade", ASSIGNMENT, "--quiet"]
        command += ["--course", str(ours / "autograder"), "--no-feedback"]
        if args.workers:
            command += ["--workers", str(args.workers)]
        printed: list[str] = []
        our_wall, our_cpu = timed(
            lambda: printed.append(
                subprocess.run(command, cwd=REPO, check=True, capture_output=True, text=True).stdout
            )
        )
        breakdown = [line.strip() for line in printed[0].splitlines() if "time:" in line]

        nb_scores, our_scores = gradebook_scores(plain), gradebook_scores(ours)
        assert nb_scores == our_scores, {
            s: (nb_scores.get(s), our_scores.get(s))
            for s in students
            if nb_scores.get(s) != our_scores.get(s)
        }
        from autograder import classgrader, gradebook_writer

        course = classgrader.load_course(ours / "autograder")
        gb = gradebook_writer.open_gradebook(course.db_url, course.course_id)
        try:
            rows = gradebook_writer.recorded(gb, ASSIGNMENT)
        finally:
            gb.close()
        overhead = sorted(r.seconds - r.student_seconds for r in rows.values())
        worker_seconds = [r.seconds for r in rows.values()]
        student = sorted(r.student_seconds for r in rows.values())
        isolation = {r.isolation for r in rows.values()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    n = len(students)
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.1f} at the end"
    )
    print(f"{n} submissions of {ASSIGNMENT}; same score on every part by both routes: yes")
    print(f"sandbox: {'; '.join(sorted(isolation))}")
    print(f"{'route':32s} {'wall s':>8s} {'CPU s':>8s} {'subm./min':>10s}")
    for name, wall, cpu in [
        ("nbgrader autograde", nb_wall, nb_cpu),
        ("python -m autograder grade", our_wall, our_cpu),
    ]:
        print(f"{name:32s} {wall:8.1f} {cpu:8.1f} {60 * n / wall:10.1f}")
    print("class grader's own breakdown: " + " ".join(breakdown))
    print(f"throughput ratio (autograder / nbgrader): {nb_wall / our_wall:.2f} (goal >= 4)")

    def pct(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, round(q * (len(values) - 1)))]

    workers = args.workers or os.cpu_count() or 1
    print(
        f"class grader: {sum(worker_seconds):.1f} s in grade_submission over {n} submissions "
        f"(mean {statistics.mean(worker_seconds):.2f} s); with {workers} workers that is "
        f"{sum(worker_seconds) / workers:.1f} s of the {our_wall:.1f} s wall clock, the rest is "
        "starting the cluster, recording results and waiting for the last ones"
    )
    print(
        f"overhead per submission beyond the student's code: p50 {pct(overhead, 0.5):.2f} s, "
        f"p95 {pct(overhead, 0.95):.2f} s, max {overhead[-1]:.2f} s (goal <= 1 s); "
        f"student's own code: median {statistics.median(student):.2f} s, max {student[-1]:.2f} s"
    )


if __name__ == "__main__":
    main()
