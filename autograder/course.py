"""The course as nbgrader sees it: its configuration, its folders, its notebooks' graded cells.

Every command of the course's grading tools starts here: the class grader
(:mod:`autograder.classgrader`), the CSV writer (:mod:`autograder.formgrader`), the class report
(:mod:`autograder.report`) and the LMS files (:mod:`autograder.lms`). It sits below all of them,
so none of them imports another only to find the course.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported for its type only: nbformat's import costs seconds per process
    from nbformat.notebooknode import NotebookNode

HERE = Path(__file__).resolve().parent  # the default course folder: the one with nbgrader_config.py


class CourseError(Exception):
    """The course or assignment cannot be graded as asked (the message says what to do);
    the commands print it and exits with status 2."""


@dataclass
class Course:
    """nbgrader's view of the course: its configuration and folders."""

    config_dir: Path  # the folder of nbgrader_config.py
    config: Any  # traitlets Config
    coursedir: Any  # nbgrader.coursedir.CourseDirectory

    @property
    def db_url(self) -> str:
        return str(self.coursedir.db_url)

    @property
    def course_id(self) -> str:
        return str(self.coursedir.course_id)

    def folder(self, step: str, student: str, assignment: str) -> Path:
        """``<root>/<step>/<student>/<assignment>`` as nbgrader lays it out."""
        return Path(os.path.normpath(self.coursedir.format_path(step, student, assignment)))


def load_course(
    config_dir: Path = HERE, *, root: Path | None = None, db_url: str | None = None
) -> Course:
    """Load ``config_dir/nbgrader_config.py`` as nbgrader does; ``root`` and ``db_url`` replace
    the course root and the gradebook it names."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    config_dir = Path(config_dir).resolve()
    if not (config_dir / "nbgrader_config.py").is_file():
        raise CourseError(
            f"no nbgrader_config.py in {config_dir} (give the course folder: --course)"
        )
    # nbgrader runs the `alembic` script installed beside python when it creates a gradebook
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    config = PyFileConfigLoader("nbgrader_config.py", path=str(config_dir)).load_config()
    if root is not None:
        config.CourseDirectory.root = str(Path(root).resolve())
    if db_url is not None:
        config.CourseDirectory.db_url = db_url
    return Course(config_dir, config, CourseDirectory(config=config))


def grade_ids(nb: dict | NotebookNode) -> list[tuple[str, dict, dict]]:
    """``(grade_id, nbgrader metadata, cell)`` of every nbgrader cell, in order."""
    out = []
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader")
        if isinstance(meta, dict) and meta.get("grade_id"):
            out.append((meta["grade_id"], meta, cell))
    return out


def is_test_cell(meta: dict) -> bool:
    return bool(meta.get("grade")) and not meta.get("solution")


def add_course_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of every command of the course: the assignment, its course, its gradebook."""
    p.add_argument("assignment", help="e.g. 01-ngrams")
    p.add_argument("--course", type=Path, default=HERE, help="folder of nbgrader_config.py")
    p.add_argument("--db-url", help="gradebook URL (default: nbgrader_config.py's db_url)")
