"""A gradebook in PostgreSQL: what is wrong said plainly, and advisory locks (issue 32).

nbgrader opens any SQLAlchemy URL, e.g. ``postgresql+psycopg2://grader@/nlpcourse?host=/run/
postgresql`` (a Unix socket) or ``postgresql+psycopg2://grader:secret@db.example:5432/nlpcourse``.
When something is wrong it says little: a missing driver ends in "Please see the above traceback
for details" with no traceback, and a database that does not exist in advice to run ``nbgrader db
upgrade``. :func:`check_gradebook` connects first and says which driver to install, which database
does not exist, or which server does not answer; :func:`import_driver`, which
``nbgrader_config.py`` calls, gives nbgrader's own commands and formgrader the first of these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# the driver requirements.txt pins (the one an instructor installs for PostgreSQL)
DRIVER = {"psycopg2": "psycopg2-binary==2.9.13"}


class GradebookError(Exception):
    """The gradebook cannot be opened; the message says why and what to do."""


def check_gradebook(db_url: str) -> None:
    """Raise :class:`GradebookError` when the PostgreSQL gradebook at ``db_url`` cannot be reached:
    its driver missing, its server not answering, its database missing. Other URLs pass."""
    from sqlalchemy.engine import make_url

    url = make_url(db_url)
    if url.get_backend_name() != "postgresql":
        return
    _connect(db_url).close()


def import_driver(db_url: str) -> Any:
    """The DB-API module of the URL's driver, or :class:`GradebookError` naming the package to
    install. ``nbgrader_config.py`` calls it so that nbgrader's own commands and formgrader say
    so too."""
    from sqlalchemy.engine import make_url

    url = make_url(db_url)
    try:
        return url.get_dialect().import_dbapi()
    except ImportError as error:
        driver = url.get_driver_name()
        pinned = " (pinned in requirements.txt)" if driver in DRIVER else ""
        raise GradebookError(
            f"the gradebook {url.render_as_string()} needs the PostgreSQL driver {driver!r}, which "
            f"is not installed ({error}): pip install {DRIVER.get(driver, driver)}{pinned}"
        ) from None


def where(db_url: str) -> str:
    """The server and database of a URL in words, password left out."""
    from sqlalchemy.engine import make_url

    url = make_url(db_url)
    socket_dir = url.query.get("host")
    server = f"the socket in {socket_dir}" if socket_dir else f"{url.host or 'localhost'}"
    if url.port and not socket_dir:
        server += f":{url.port}"
    return f"database {url.database!r} on {server}"


def _connect(db_url: str, application_name: str = "") -> Any:
    """A DB-API connection of the URL's driver (not a pooled one), or :class:`GradebookError`."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import OperationalError
    from sqlalchemy.pool import NullPool

    url = make_url(db_url)
    dbapi = import_driver(db_url)
    args = {"application_name": application_name[:63]} if application_name else {}
    engine = create_engine(url, poolclass=NullPool, connect_args=args)
    try:
        return engine.raw_connection()
    except (OperationalError, dbapi.OperationalError) as error:
        text = " ".join(str(getattr(error, "orig", error)).split())
        if "does not exist" in text and "database" in text:
            raise GradebookError(
                f"the {where(db_url)} does not exist: create it (createdb {url.database}, as a "
                f"user who may) or correct db_url in nbgrader_config.py. The server said: {text}"
            ) from None
        raise GradebookError(
            f"the PostgreSQL server of the {where(db_url)} does not answer or refuses the "
            f"connection: is it running, and is the URL right? The driver said: {text}"
        ) from None


@contextmanager
def advisory_lock(
    db_url: str,
    key1: int,
    key2: int,
    holder: str,
    *,
    wait: bool,
    busy: Callable[[str], Exception] = RuntimeError,
) -> Iterator[None]:
    """Hold the session advisory lock ``(key1, key2)`` on a connection of its own, named
    ``holder``; released when the block ends or the process dies. With ``wait=False`` a lock
    held elsewhere raises ``busy(message)`` naming the holder (:mod:`autograder.lock` passes its
    ``Busy``: this module imports nothing of the lock's, so the two make no import circle)."""
    connection = _connect(db_url, holder)
    try:
        cursor = connection.cursor()
        if wait:
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", (key1, key2))
        else:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", (key1, key2))
            if not cursor.fetchone()[0]:
                raise busy(
                    f"{holder.split(' pid ')[0].removeprefix('grade ')} in the {where(db_url)} "
                    f"is being graded by {_holder(cursor, key1, key2)}: wait for it to finish (or "
                    "stop it), then run again"
                )
        connection.commit()
        yield
    finally:
        connection.close()  # ends the session: the lock goes


def _holder(cursor: Any, key1: int, key2: int) -> str:
    """The ``application_name`` of the session that holds the advisory lock ``(key1, key2)``."""
    cursor.execute(
        "SELECT a.application_name, a.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
        " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s"
        " AND l.objsubid = 2",
        (key1 & 0xFFFFFFFF, key2 & 0xFFFFFFFF),
    )
    row = cursor.fetchone()
    if row is None:
        return "another run (it has just finished: run again)"
    return row[0] or f"the server's process {row[1]}"


def check_for_nbgrader(db_url: str) -> None:
    """What ``nbgrader_config.py`` checks of a PostgreSQL gradebook (issue 45). In nbgrader's own
    commands (``nbgrader export``, ``nbgrader db ...``: the process's application is an nbgrader
    application), that it opens (driver, database, server: :func:`check_gradebook`), so that they
    say in one line what is wrong instead of 136-163 lines of traceback. Anywhere else, only that
    the driver imports: the class grader checks for itself, and the Jupyter server loads that
    file again at each of formgrader's requests, where a ``SystemExit`` would stop the server
    (its application is JupyterLab's; ``NbGrader.initialized()``, asked before, is true there
    too: traitlets reads the singleton of a parent class, JupyterApp's, so a wrong database
    stopped the server as it started). Formgrader says what is wrong on its pages instead
    (``jupyter_server_config.py``)."""
    from nbgrader.apps.baseapp import NbGrader
    from traitlets.config import Application

    running = Application.instance() if Application.initialized() else None
    if isinstance(running, NbGrader):
        check_gradebook(db_url)
    else:
        import_driver(db_url)
