"""Helpers the chapters share when they execute in the book build.

Every number on a page comes from an executed cell. A chapter measures a value, then
``keep("name", value)`` glues it under ``name`` so the prose can show it with
``{glue:text}`name:.1f```; nothing is typed by hand. This module holds the one copy of that helper
(each chapter used to define its own).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def plain(value: Any) -> Any:
    """``value`` as a plain Python object: numpy and torch scalars become ``int``/``float``."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        return value.item()
    return value


def keep(name: str, value: Any) -> Any:
    """Glue ``value`` into the page under ``name`` (not displayed where the cell runs).

    Returns the plain value, so a cell can keep a number and go on computing with it.
    """
    from myst_nb import glue  # imported here: the package does not need myst-nb outside the book

    value = plain(value)
    glue(name, value, display=False)
    return value


def toc_pages(repo: Path) -> list[str]:
    """Every page of the book's ``_toc.yml`` in ``repo``, in book order: ``["book/intro", ...]``."""
    toc = yaml.safe_load((repo / "_toc.yml").read_text())
    pages = [toc["root"]]

    def walk(entries: list[dict]) -> None:
        for entry in entries:
            if "file" in entry:
                pages.append(entry["file"])
            walk(entry.get("sections", []))

    walk(toc.get("chapters", []))
    for part in toc.get("parts", []):
        walk(part.get("chapters", []))
    return pages


def chapter_title(path: Path) -> str:
    """The title of a MyST page: its first ``# `` heading."""
    for line in path.read_text().splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    raise ValueError(f"{path} has no '# ' title")


def read_page_notebook(path: Path) -> Any:
    """The notebook of a book page as the build reads it: a MyST Markdown file or an ``.ipynb``."""
    import nbformat
    from myst_nb.core.read import read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    if path.suffix == ".ipynb":
        return nbformat.read(path, as_version=4)
    return read_myst_markdown_notebook(
        path.read_text(), config=MdParserConfig(), add_source_map=True, path=str(path)
    )


def cached_execution(cache_dir: Path, path: Path) -> Any | None:
    """The successful execution of ``path``'s current code in the build's execution cache, or None.

    jupyter-cache (myst-nb's ``execute_notebooks: cache``) stores an executed notebook only when it
    ran without error, keyed by a hash of its code; a failed run (a cell error, the cell timeout)
    leaves only a traceback on the page's project record. So None means the page must be executed
    again: its code changed, or its last execution failed, or the cache was cleared. Returns the
    cache record (``.pk``, ``.created``), to be merged into the notebook by the caller.
    """
    from jupyter_cache import get_cache

    try:
        return get_cache(str(cache_dir)).match_cache_notebook(read_page_notebook(path))
    except KeyError:
        return None


def cell_timeout(repo: Path) -> float:
    """The build's cell timeout in seconds, ``execute.timeout`` in ``repo``'s ``_config.yml``: one
    place for every tool that executes a chapter the way the build does."""
    config = yaml.safe_load((repo / "_config.yml").read_text())
    return float(config["execute"]["timeout"])
