"""Benchmark: the class grader on classes of 50, 200 and 500 submissions (issue 41 §5).

One seeded class of ``01-ngrams`` submissions of the size asked, the mix an instructor of a large
class sees: full marks, partial work, honest mistakes, blank notebooks, slow but right work (a
cell that takes :data:`SLOW_SECONDS`, half the call limit the run is given), broken files
(cut-off JSON, an empty file, Latin-1 bytes, a second notebook under another name) and a few
hostile ones (a function that loops forever, a memory bomb, a read of the hidden tests, a
notebook of 100,000 tiny cells, a sparse ``timestamp.txt`` of a gigabyte, one that links
elsewhere, a notebook whose name is not UTF-8). The first ``n`` students of it are graded, for
each ``n`` asked, each in a course of its own, by ``python -m autograder grade --no-feedback``:

* on a ``LocalCluster`` of ``--workers`` processes (the grader's default);
* through a real ``dask scheduler`` and two ``dask worker --nthreads 1`` processes started as the
  README says (the repository on ``PYTHONPATH``), all on 127.0.0.1, started once for all sizes.

For each run it prints the wall time, the throughput, and the coordinator's peak memory (the
``python -m autograder grade`` process's own peak resident set, ``ru_maxrss``, read as it exits:
with a ``LocalCluster`` the scheduler runs in it too; the workers are processes of their own).

``nbgrader autograde`` (the course's configuration, given the same limits per cell and per
notebook) grades the class of 50 itself, every file of it, hostile ones included, as an
instructor's ``nbgrader autograde`` would meet them (the memory bomb takes 8 GB in nbgrader's
kernel, which has no memory limit: run this on a machine with that to spare). Each student's time
is read from nbgrader's log (the time of the first line that names the student, to the next
student's); nbgrader's time on a larger class is its start plus each of the class's students'
time, by kind, from the class of 50 (every kind is in it). Two ratios are printed: to nbgrader on
the same class (the goal's), and to nbgrader charged only for the class's honest students and the
looping one (nothing for the broken and hostile files, whose cost to nbgrader is most of its time:
a conservative ratio). The script asserts that no honest student scores below nbgrader's score,
part by part.

Goals (issue 41 §5): the coordinator's peak memory within 1.2 times from 50 to 500 submissions;
throughput at least 4 times nbgrader's; no honest submission below nbgrader's score on any part.

Run:  OMP_NUM_THREADS=1 .venv/bin/python benchmarks/grading_scale.py [--sizes 50 200 500]
      [--routes local scheduler] [--record nbgrader.json | --nbgrader-times nbgrader.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
import nbformat  # noqa: E402

from autograder import grading  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))
import services  # noqa: E402 (the tests' free port and process-group stop, shared)

_spec = importlib.util.spec_from_file_location(
    "grading_benchmark", Path(__file__).with_name("grading.py")
)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)  # the class and course makers of benchmarks/grading.py

ASSIGNMENT, NOTEBOOK = bench.ASSIGNMENT, bench.NOTEBOOK
# The limits of every run, both routes: small enough that a hostile submission costs seconds.
CALL_SECONDS, NOTEBOOK_SECONDS = 6, 30
LIMITS = ["--call-seconds", str(CALL_SECONDS), "--notebook-seconds", str(NOTEBOOK_SECONDS)]
NBGRADER_LIMITS = [
    f"--TimeLimitedExecute.timeout={CALL_SECONDS}",
    f"--TimeLimitedExecute.notebook_timeout={NOTEBOOK_SECONDS}",
]
SLOW_SECONDS = CALL_SECONDS / 2  # the cell of a slow student takes half the call limit
# One period of the class: 50 students, repeated. Honest kinds first.
HONEST = ["full"] * 20 + ["partial"] * 8 + ["mistake"] * 6 + ["blank"] * 4 + ["slow"] * 2
HONEST_WORK = {*HONEST, "loop"}  # what the conservative ratio charges nbgrader for
BROKEN = ["cut-json", "empty", "latin-1", "two-notebooks"]
HOSTILE = ["memory", "hidden-tests"]  # in every period
ONCE = ["loop", "many-cells", "sparse-stamp", "linked-stamp", "odd-name"]  # once in a class
PERIOD = HONEST + BROKEN + HOSTILE + ["full"] * 4  # 50
ONCE_AT = (0, 46, 47, 48, 49)  # ONCE's students take the place of these (all "full")
STAMP = "2026-11-20 12:00:00.000000 UTC\n"
DASK = str(Path(sys.executable).parent / "dask")
# The coordinator, run so that it reports its own peak resident set (kB) as it exits.
MEASURED = (
    "import atexit, resource, runpy, sys\n"
    "out = sys.argv.pop(1)\n"
    "atexit.register(lambda: open(out, 'w').write(\n"
    "    str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))\n"
    "runpy.run_module('autograder', run_name='__main__')\n"
)


def first_body_line(code: str) -> int:
    """The index of the line after a function's docstring."""
    lines = code.splitlines()
    return next(i for i, line in enumerate(lines) if line.rstrip().endswith('"""')) + 1


def with_body(code: str, body: str) -> str:
    """The function of a solution cell with ``body`` at the start of its body."""
    lines = code.splitlines(keepends=True)
    end = first_body_line(code)
    return "".join(lines[:end]) + body + "".join(lines[end:])


def student_files(kind: str, i: int, code: dict[str, str], rng_parts: list[str]) -> dict:
    """``{file name: bytes}`` a student of ``kind`` hands in (``timestamp.txt`` as ``None`` when
    the caller makes it specially)."""
    parts = list(code)
    if kind == "full":
        filled = dict(code)
    elif kind == "partial":
        filled = {p: code[p] for p in rng_parts}
    elif kind == "mistake":
        part = list(bench.MISTAKES)[i % len(bench.MISTAKES)]
        filled = {**code, part: bench.wrong(code, part)}
    elif kind == "blank":
        filled = {}
    elif kind == "slow":  # a cell that takes half the call limit to run
        pause = f"\nimport time\ntime.sleep({SLOW_SECONDS})\n"
        filled = {**code, parts[0]: code[parts[0]] + pause}
    elif kind == "loop":
        filled = {**code, parts[0]: with_body(code[parts[0]], "    while True:\n        pass\n")}
    elif kind == "memory":
        filled = {**code, parts[0]: code[parts[0]] + "\n_hog = bytearray(8 * 2**30)\n"}
    elif kind == "hidden-tests":
        steal = f"    open({str(REPO / 'solutions' / ASSIGNMENT / NOTEBOOK)!r}).read()\n"
        filled = {**code, parts[0]: with_body(code[parts[0]], steal)}
    else:
        filled = dict(code)
    nb = grading.submission(ASSIGNMENT, filled)
    nb.metadata["student_number"] = i  # every file its own bytes
    if kind == "latin-1":  # saved as Latin-1: the "é" is the byte 0xE9, not UTF-8
        nb.cells.insert(0, nbformat.v4.new_markdown_cell("café"))
    data = json.dumps(nb, ensure_ascii=False).encode(
        "latin-1" if kind == "latin-1" else "utf-8", "replace"
    )
    files: dict[str, bytes | None] = {NOTEBOOK: data, "timestamp.txt": STAMP.encode()}
    if kind == "cut-json":
        files[NOTEBOOK] = data[: len(data) // 2]
    elif kind == "empty":
        files[NOTEBOOK] = b""
    elif kind == "two-notebooks":
        files[NOTEBOOK.replace(".ipynb", "-Copy1.ipynb")] = data
        files["ngrams (1).ipynb"] = files.pop(NOTEBOOK)
    elif kind == "many-cells":
        raw = json.loads(data)
        tiny = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": []}
        raw["cells"] += [dict(tiny, id=f"c{j}", source="x = 1") for j in range(100_000)]
        files[NOTEBOOK] = json.dumps(raw).encode()
    elif kind in ("sparse-stamp", "linked-stamp"):
        files["timestamp.txt"] = None
    elif kind == "odd-name":
        files[os.fsdecode(b"ngrams \xff\x1b[31m.ipynb")] = files.pop(NOTEBOOK)
    return files


def make_class(n: int) -> list[tuple[str, str]]:
    """``(student, kind)`` of the first ``n`` students: :data:`PERIOD` repeated, with each kind
    of :data:`ONCE` once, in the first period."""
    kinds = [PERIOD[i % len(PERIOD)] for i in range(n)]
    for at, kind in zip(ONCE_AT, ONCE, strict=True):
        if at < n:
            kinds[at] = kind
    return [(f"s{i:03d}-{kind}", kind) for i, kind in enumerate(kinds)]


def kind_of(student: str) -> str:
    """The kind of a student of :func:`make_class` (``"s007-full"``: ``"full"``)."""
    return student.split("-", 1)[1]


def hand_in(root: Path, students: list[tuple[str, str]]) -> None:
    """The course at ``root`` (benchmarks/grading.py's) with every student's files."""
    import random

    bench.make_course(root, {})
    code = grading.solution_code(ASSIGNMENT)
    rng = random.Random(0)
    for i, (student, kind) in enumerate(students):
        folder = root / "autograder" / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        some = rng.sample(list(code), rng.randint(1, len(code) - 1))
        for name, data in student_files(kind, i, code, some).items():
            if data is not None:
                (folder / name).write_bytes(data)
        if kind == "sparse-stamp":
            with open(folder / "timestamp.txt", "wb") as f:
                f.truncate(2**30)
        elif kind == "linked-stamp":
            (folder / "timestamp.txt").symlink_to(REPO / "README.md")


def grade(root: Path, where: list[str]) -> dict:
    """Run the class grader on the course at ``root``: wall seconds, its peak memory (MB) and
    its printed summary."""
    peak = root / "coordinator-maxrss.txt"
    command = [sys.executable, "-c", MEASURED, str(peak), "grade", ASSIGNMENT, "--quiet"]
    command += ["--course", str(root / "autograder"), "--no-feedback", *LIMITS, *where]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    began = time.perf_counter()
    out = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - began
    if out.returncode != 0:
        raise RuntimeError(f"the grader failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return {"wall": wall, "peak_mb": int(peak.read_text()) / 1024, "printed": out.stdout}


def scores(root: Path) -> dict[str, dict[str, float]]:
    return bench.gradebook_scores(root)


def start_cluster(logs: Path) -> tuple[str, list[subprocess.Popen]]:
    """``dask scheduler`` and two ``dask worker --nthreads 1``, as the README starts them."""
    port = services.free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    commands = [[DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                 "--dashboard-address", ":0"]]  # fmt: skip
    commands += [[DASK, "worker", address, "--nthreads", "1", "--name", f"w{n}",
                  "--dashboard-address", ":0"] for n in range(2)]  # fmt: skip
    processes = []
    for k, command in enumerate(commands):
        with open(logs / f"cluster-{k}.log", "w") as log:
            processes.append(
                subprocess.Popen(command, cwd=REPO, env=env, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
            )  # fmt: skip
        if k == 0:
            time.sleep(3)
    from distributed import Client

    with Client(address, timeout="120s") as client:
        client.wait_for_workers(2, timeout=300)
    return address, processes


def summary_line(printed: str) -> str:
    return next((line.strip() for line in printed.splitlines() if "time:" in line), "")


# nbgrader's log, a line: "2026-11-29 04:12:10.552 [INFO] Autograding .../s000-loop/..."
LOG_FORMAT = [
    "--Application.log_format=%(asctime)s.%(msecs)03d [%(levelname)s] %(message)s",
    "--Application.log_datefmt=%Y-%m-%d %H:%M:%S",
]
LOG_PIECE = 2**16  # characters of a log line read at a time
LOG_LINE = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \[\w+\] .*?\b(s\d{3}-[a-z0-9-]+)")


def student_seconds(log: Path, began: float, ended: float) -> tuple[float, dict[str, float]]:
    """nbgrader's start (seconds before its first student) and each student's seconds, from its
    log: from the first line that names the student to the first that names the next (the last
    student's, to the end of the run). The log is read a bounded piece at a time: nbgrader echoes
    the gigabyte ``timestamp.txt`` in one line of it."""
    from datetime import datetime

    first: dict[str, float] = {}
    with open(log, encoding="utf-8", errors="replace") as lines:
        while piece := lines.readline(LOG_PIECE):
            if match := LOG_LINE.match(piece):
                when = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S.%f").timestamp()
                first.setdefault(match[2], when)
    order = sorted(first, key=first.get)
    ends = [first[s] for s in order[1:]] + [ended]
    return first[order[0]] - began, {s: end - first[s] for s, end in zip(order, ends, strict=True)}


def nbgrader_class(tmp: Path) -> tuple[Path, dict]:
    """``nbgrader autograde`` of the class of 50 (every file, the run's limits): its course, and
    its times: ``{"wall": s, "start": s, "students": {student: s}}``."""
    root = tmp / "nbgrader"
    hand_in(root, make_class(len(PERIOD)))
    bench.release(root)
    db = root / "autograder" / "gradebook.db"
    command = [sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT,
               f"--CourseDirectory.root={root}", f"--CourseDirectory.db_url=sqlite:///{db}",
               *NBGRADER_LIMITS, *LOG_FORMAT]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # PATH holds `alembic` (main sets it)
    log = tmp / "nbgrader.log"  # to a file: this process's memory is in the coordinator's peak
    with open(log, "wb") as out:  # (a child's ru_maxrss starts from its parent's resident set)
        began = time.time()
        subprocess.run(command, cwd=grading.CONFIG_DIR, env=env, stdout=out, stderr=out)
        ended = time.time()
    start, students = student_seconds(log, began, ended)
    return root, {"wall": ended - began, "start": start, "students": students}


def by_kind(times: dict) -> dict[str, float]:
    """nbgrader's mean seconds per student of each kind."""
    seconds: dict[str, list[float]] = {}
    for student, s in times["students"].items():
        seconds.setdefault(kind_of(student), []).append(s)
    return {kind: sum(v) / len(v) for kind, v in seconds.items()}


def nbgrader_seconds(times: dict, n: int, kinds: set[str] | None = None) -> float:
    """nbgrader's seconds on the class of ``n`` (only students of ``kinds``, if given): its start
    plus each student's time by kind."""
    per = by_kind(times)
    return times["start"] + sum(
        per[kind] for _, kind in make_class(n) if kinds is None or kind in kinds
    )


def below_nbgrader(ours: Path, theirs: Path) -> dict[str, dict]:
    """``{student: {part: (ours, nbgrader's)}}`` of every part scored below nbgrader's score by a
    student both routes graded."""
    mine, other = scores(ours), scores(theirs)
    below = {
        student: {g: (mine[student].get(g), other[student][g]) for g in other[student]
                  if (mine[student].get(g) or 0.0) < other[student][g]}
        for student in other if student in mine
    }  # fmt: skip
    return {s: parts for s, parts in below.items() if parts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 200, 500])
    parser.add_argument("--workers", type=int, default=2, help="LocalCluster processes")
    parser.add_argument("--routes", nargs="+", default=["local", "scheduler"])
    parser.add_argument(
        "--nbgrader-times", type=Path, help="nbgrader's times (JSON) from an earlier run's record"
    )
    parser.add_argument(
        "--record", type=Path, help="write nbgrader's times here (JSON), for --nbgrader-times"
    )
    args = parser.parse_args()
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    tmp = Path(tempfile.mkdtemp(prefix="grading-scale-"))
    print(
        f"load at the start: {os.getloadavg()}; {os.cpu_count()} cores; limits {' '.join(LIMITS)}"
    )
    rows = []
    try:
        nb_course = None
        if args.nbgrader_times is not None:
            times = json.loads(args.nbgrader_times.read_text())
            print(f"nbgrader autograde: times as recorded in {args.nbgrader_times}")
        else:
            load = os.getloadavg()[0]
            nb_course, times = nbgrader_class(tmp)
            print(
                f"nbgrader autograde, the class of {len(PERIOD)}: {times['wall']:.1f} s "
                f"(load {load:.1f} -> {os.getloadavg()[0]:.1f}); start {times['start']:.1f} s; "
                "mean seconds by kind: "
                + ", ".join(f"{k} {v:.2f}" for k, v in sorted(by_kind(times).items())),
                flush=True,
            )
            if args.record is not None:
                args.record.write_text(json.dumps(times, indent=1))

        for route in args.routes:
            with ExitStack() as cluster:
                where = ["--workers", str(args.workers)]
                if route == "scheduler":  # started for its route only: idle, it takes CPU too
                    address, processes = start_cluster(tmp)
                    cluster.callback(services.stop_process_groups, processes)
                    where = ["--scheduler", address]
                for n in args.sizes:
                    root = tmp / f"{route}-{n}"
                    students = make_class(n)
                    hand_in(root, students)
                    bench.release(root)  # as nbgrader's course was: neither timing pays for it
                    load = os.getloadavg()[0]
                    run = grade(root, where)
                    shutil.rmtree(root / "autograder" / "submitted", ignore_errors=True)
                    theirs = nbgrader_seconds(times, n)
                    honest = nbgrader_seconds(times, n, HONEST_WORK)
                    row = (route, n, run["wall"], 60 * n / run["wall"], run["peak_mb"],
                           theirs / run["wall"], honest / run["wall"], load,
                           os.getloadavg()[0])  # fmt: skip
                    rows.append(row)
                    print(
                        f"{route:9s} n={n:4d} wall {run['wall']:7.1f} s, "
                        f"{row[3]:6.1f} per minute, coordinator peak {row[4]:6.1f} MB, "
                        f"ratio to nbgrader {row[5]:.2f} (its {theirs:.0f} s), on honest work "
                        f"{row[6]:.2f} (its {honest:.0f} s) (load {load:.1f} -> {row[8]:.1f}); "
                        + summary_line(run["printed"]),
                        flush=True,
                    )
                    if nb_course is not None and n == len(PERIOD):  # the same files, both routes
                        below = below_nbgrader(root, nb_course)
                        honest_below = {s: p for s, p in below.items() if kind_of(s) in HONEST}
                        print(f"  parts below nbgrader's: honest students "
                              f"{honest_below or 'none'}; others {below or 'none'}")  # fmt: skip
                        assert not honest_below, honest_below
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("| route | submissions | wall s | per minute | coordinator peak MB | ratio to nbgrader, "
          "same class | on honest work only | load before → after |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for route, n, wall, rate, peak, ratio, honest_ratio, before, after in rows:
        print(f"| {route} | {n} | {wall:.1f} | {rate:.1f} | {peak:.0f} | {ratio:.2f} | "
              f"{honest_ratio:.2f} | {before:.1f} → {after:.1f} |")  # fmt: skip
    for route in args.routes:
        peaks = {n: peak for r, n, _, _, peak, *_ in rows if r == route}
        if len(peaks) > 1:
            small, large = peaks[min(peaks)], peaks[max(peaks)]
            print(f"{route}: coordinator peak {max(peaks)} / {min(peaks)} submissions: "
                  f"{large / small:.2f}x (goal at most 1.2)")  # fmt: skip


if __name__ == "__main__":
    main()
