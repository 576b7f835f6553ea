"""How much work each cell of a chapter does: CPU seconds per cell, against the build's budget.

A chapter must execute in about 2 minutes on 2 idle CPU cores, and every cell in at most 60 s of CPU
(CONTRIBUTING.md, "A chapter"). These budgets bound the work, not the wall time: the build's cell
timeout (``execute.timeout`` in ``_config.yml``, 1800 s) only catches a hang, at least 30 times a
cell's budget, so that a busy machine slows the build but never breaks it. Wall-clock time on a
shared machine measures the machine; this script measures the work: it runs the chapter's code
cells in order in one Python process, with torch held to one thread, and reports each cell's
process (CPU) time, which on an idle core is about its wall time (and an upper bound for the two
threads the chapters use).

Usage, from the repository root::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/chapter_budget.py book/rnn.md [book/x.md ...]

Cells run from ``book/`` as in the build; glued values are computed but not stored, figures are
drawn off screen, and IPython magics (lines starting with ``%`` or ``!``) are skipped.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from nlpcourse.book import cell_timeout  # noqa: E402

CELL_BUDGET_S = 60  # the most CPU seconds one cell may take
CHAPTER_BUDGET_S = 120  # about 2 minutes for a whole chapter on an idle machine
HANG_MARGIN = 30  # the build's cell timeout is at least this many cell budgets: it catches hangs


def run_chapter(path: Path) -> list[tuple[int, float, float, str]]:
    """``(cell number, CPU seconds, wall seconds, first line)`` for each code cell of ``path``."""
    import jupytext
    import matplotlib

    matplotlib.use("Agg")
    import torch

    torch.set_num_threads(1)
    set_threads = torch.set_num_threads
    torch.set_num_threads = lambda n: None  # the chapter asks for 2: measure the work on one
    import myst_nb
    from IPython.display import display

    glue = myst_nb.glue
    myst_nb.glue = lambda name, value, display=True: None  # computed by the cell, not stored
    notebook = jupytext.read(path)
    namespace = {"__name__": "__main__", "display": display}
    here = os.getcwd()
    os.chdir(path.parent)
    rows = []
    try:
        for number, cell in enumerate(notebook.cells):
            if cell.cell_type != "code":
                continue
            lines = cell.source.splitlines()
            source = "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))
            cpu, wall = time.process_time(), time.perf_counter()
            exec(compile(source, f"{path.name}, cell {number}", "exec"), namespace)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            first = next((line for line in lines if line.strip()), "")[:60]
            rows.append((number, cpu, wall, first))
            print(f"  cell {number:3d}: {cpu:7.2f} s CPU {wall:8.2f} s wall  | {first}", flush=True)
    finally:
        os.chdir(here)
        torch.set_num_threads, myst_nb.glue = set_threads, glue
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="+", type=Path, help="chapters, e.g. book/rnn.md")
    args = parser.parse_args(argv)
    timeout = cell_timeout(REPO)
    status = 0
    if timeout < HANG_MARGIN * CELL_BUDGET_S:
        print(
            f"the cell timeout ({timeout:.0f} s) is under {HANG_MARGIN}x the cell budget "
            f"({CELL_BUDGET_S} s): a busy machine could break the build",
            file=sys.stderr,
        )
        status = 1
    for page in args.pages:
        print(f"{page}:")
        rows = run_chapter(page.resolve())
        total = sum(cpu for _, cpu, _, _ in rows)
        number, largest, _, first = max(rows, key=lambda row: row[1])
        print(
            f"{page}: {total:.1f} s CPU in all (budget about {CHAPTER_BUDGET_S} s); largest cell "
            f"{number} ({first!r}) {largest:.1f} s (budget {CELL_BUDGET_S} s; the build's "
            f"timeout, {timeout:.0f} s, is {timeout / max(largest, 1e-9):.0f}x that)"
        )
        if largest > CELL_BUDGET_S or total > CHAPTER_BUDGET_S:
            print(f"{page}: OVER BUDGET", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
