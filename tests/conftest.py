"""Fixtures shared by the test files.

``book_build`` builds the book once for the whole test session (``tests/test_book.py`` and
``tests/test_browser.py`` both read the pages it leaves in ``_build/html``), the way
``bash .ci/tasks.sh book`` does: ``jupyter-book build . -W -n --keep-going``, then
``.ci/check_build.py``, which fails when a chapter's last execution failed or a glued value is
missing even when Sphinx rebuilt nothing.

Set ``NLPCOURSE_BOOK_OUT`` to a folder to build into ``$NLPCOURSE_BOOK_OUT/_build`` instead of
the repository's ``_build`` (handy when several people share one working tree), and
``NLPCOURSE_BOOK_REUSE=1`` to skip ``jupyter-book build`` and only check and test the build that
is already there (``.ci/check_build.py`` still fails on a stale or broken one).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@dataclass
class BookBuild:
    """A finished, checked build: where it is, and what the build printed."""

    build: Path  # the _build folder
    output: str  # jupyter-book's and check_build's output

    @property
    def html(self) -> Path:
        return self.build / "html"


def run(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True)


@pytest.fixture(scope="session")
def book_build() -> BookBuild:
    bin_dir = Path(sys.executable).parent
    command = [str(bin_dir / "jupyter-book"), "build", ".", "-W", "-n", "--keep-going"]
    out = os.environ.get("NLPCOURSE_BOOK_OUT")
    build = Path(out).resolve() / "_build" if out else REPO / "_build"
    if out:
        command += ["--path-output", str(Path(out).resolve())]
    output = ""
    if os.environ.get("NLPCOURSE_BOOK_REUSE") != "1":
        env_path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
        result = subprocess.run(
            command, cwd=REPO, capture_output=True, text=True, env={**os.environ, "PATH": env_path}
        )
        output = result.stdout + result.stderr
        warnings = [
            line
            for line in output.splitlines()
            if ("WARNING" in line or "ERROR" in line) and "Kernel is running over TCP" not in line
        ]
        assert result.returncode == 0, "the book build failed:\n" + "\n".join(warnings or [output])
    check = run([sys.executable, str(REPO / ".ci" / "check_build.py"), str(build)])
    assert check.returncode == 0, check.stdout + check.stderr
    return BookBuild(build=build, output=output + check.stdout)


@pytest.fixture(autouse=True)
def _torch_default_dtype_unchanged():
    """A test that changes torch's default dtype must put it back: the next test (a recorded
    run's first losses, a layer's choice of path) would silently compute in another precision.
    Checked after every test; a test that first imports torch starts from its float32."""
    torch = sys.modules.get("torch")
    before = torch.get_default_dtype() if torch else "torch.float32"
    yield
    torch = sys.modules.get("torch")
    if torch is None:
        return
    after = torch.get_default_dtype()
    if str(after) != str(before):
        torch.set_default_dtype(torch.float32 if isinstance(before, str) else before)
        pytest.fail(f"the test left torch's default dtype {before} as {after}")
