"""Records of long training runs, shown in the book beside the short runs the build executes.

A chapter must execute within its build budget (about 2 minutes on 2 CPU cores), so a neural model
that needs longer to reach its best result is trained by a seeded command of the package. That
command writes a small record, ``book/results/<name>.json``, holding what is needed to trust and
reproduce it: the command, its configuration, the commit, the date, the machine, the minutes it
took, the final metrics and the learning curve. The page reads the record and shows it, labelled as
a recorded run; a test re-runs the command's first steps and checks that they reproduce the
recorded losses, so a record cannot be typed by hand (DESIGN.md, "Long training runs").

Usage, inside a training command (a recorder is a logger of :func:`nlpcourse.training.train_loop`)::

    rec = Recorder("transformer_lm", command="python -m nlpcourse.lm_runs transformer", config=cfg)
    for step in range(1, steps + 1):
        ...
        if step % every == 0:
            rec.log(step, train_loss=loss, valid_ppl=ppl)
    rec.finish(test_ppl=test_ppl)        # writes book/results/transformer_lm.json

and in the book: ``record = load_record("transformer_lm")``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from nlpcourse.book import plain

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "book" / "results"
KEYS = ("name", "command", "config", "commit", "date", "machine", "minutes", "metrics", "curve")


def git_commit() -> str:
    """The commit the code was run at (with ``+dirty`` if the work tree had changes)."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def machine() -> str:
    """A one-line description of the machine: processor, cores, torch threads, load."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    parts = [cpu, f"{os.cpu_count()} cores"]
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        threads = torch.get_num_threads()
        parts.append(f"torch {torch.__version__}, {threads} thread{'s' if threads > 1 else ''}")
    if hasattr(os, "getloadavg"):
        parts.append(f"load average at the end {os.getloadavg()[0]:.1f}")
    return ", ".join(parts)


def _plain(value: Any) -> Any:
    """JSON-ready: numpy/torch scalars to numbers, tuples to lists, nan/inf kept as strings."""
    value = plain(value)  # numpy and torch scalars to numbers
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class Recorder:
    """Collects a run's learning curve and writes its record when the run finishes."""

    def __init__(self, name: str, command: str, config: dict[str, Any]):
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"a record name is a plain file name, got {name!r}")
        self.name = name
        self.command = command
        self.config = dict(config)
        self.curve: list[dict[str, Any]] = []
        self.commit = git_commit()  # the code that runs, read before any later commit
        self._start = time.perf_counter()

    def log(self, step: int, **values: Any) -> None:
        """Add one point of the learning curve (the values measured at ``step``)."""
        minutes = (time.perf_counter() - self._start) / 60
        self.curve.append({"step": int(step), "minutes": round(minutes, 3), **_plain(values)})

    def finish(self, path: Path | None = None, **metrics: Any) -> Path:
        """Write ``book/results/<name>.json`` (or ``path``) and return where it went."""
        record = {
            "name": self.name,
            "command": self.command,
            "config": _plain(self.config),
            "commit": self.commit,
            "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "machine": machine(),
            "minutes": round((time.perf_counter() - self._start) / 60, 2),
            "metrics": _plain(metrics),
            "curve": self.curve,
        }
        path = Path(path) if path is not None else RESULTS_DIR / f"{self.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1) + "\n")
        return path


def load_record(name: str, directory: Path | None = None) -> dict[str, Any]:
    """Read the record ``<name>.json`` and check that it has every field a record must have."""
    path = (directory or RESULTS_DIR) / f"{name}.json"
    if not path.exists():
        known = sorted(p.stem for p in (directory or RESULTS_DIR).glob("*.json"))
        raise FileNotFoundError(
            f"no recorded run {name!r} at {path}; recorded runs: {known or 'none'}. "
            "Records are written by the package's training commands (see nlpcourse.records)."
        )
    record = json.loads(path.read_text())
    missing = [k for k in KEYS if k not in record]
    if missing:
        raise ValueError(f"{path} is not a complete record: it lacks {missing}")
    return record
