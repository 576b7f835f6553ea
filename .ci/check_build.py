"""Check a finished book build: fail when any page shows a failed execution or a missing number.

``jupyter-book build`` only re-executes and re-renders what changed. When a chapter's execution
failed (a cell error, the cell timeout), the next build can find "no targets out of date", exit 0
and leave the broken page in ``_build/html``. This script looks at the state the build leaves
behind instead of at what the last build happened to redo. For every page in ``_toc.yml`` that is
a notebook (a MyST Markdown file with a ``kernelspec``, or an ``.ipynb`` that is executed):

1. the execution cache (``_build/.jupyter_cache``) holds a *successful* execution of the page's
   current code (jupyter-cache stores a notebook only when it ran without error; a failed run
   leaves a traceback on its project record instead, which is printed);
2. that execution has no error output, and it glued every value the page's text shows with
   ``{glue:...}`` (a glue key the notebook never stored renders as a blank);
3. the built page exists and shows no traceback.

A page that fails 1. is executed again by the next build (``_ext/bookbuild.py`` marks it out of
date), so a build that met a busy machine or a passing error mends itself on the next run.

Usage: ``python .ci/check_build.py [build_dir]`` (default ``_build``); exit status 1 on a problem.
``bash .ci/tasks.sh book`` runs it after every build.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml
from jupyter_cache import get_cache
from myst_nb.core.read import is_myst_markdown_notebook

from nlpcourse import book

REPO = Path(__file__).resolve().parent.parent

# {glue}`key`, {glue:}`key`, {glue:text}`key:.2f`, ... and ```{glue:figure} key
GLUE_ROLE = re.compile(r"\{glue(?::\w*)?\}`([^`]+)`")
GLUE_DIRECTIVE = re.compile(r"^[`:]{3,}\{glue(?::\w*)?\}\s+(\S+)", re.MULTILINE)
# the line of a traceback that names the exception: "nbclient.exceptions.CellTimeoutError: ..."
EXCEPTION = re.compile(r"^[\w.]*(Error|Exception|Interrupt|Exit)\b")
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the colours of an IPython traceback


def toc_pages(repo: Path = REPO) -> list[str]:
    """Every file of ``_toc.yml`` (root, chapters, parts and sections), without suffix."""
    return book.toc_pages(repo)


def source_of(page: str, repo: Path = REPO) -> Path:
    for suffix in (".md", ".ipynb"):
        path = repo / (page + suffix)
        if path.is_file():
            return path
    raise FileNotFoundError(f"_toc.yml names {page!r}, but neither {page}.md nor .ipynb exists")


def executed_pages(repo: Path = REPO) -> list[tuple[str, Path]]:
    """The pages the build executes: MyST notebooks outside the execution exclude patterns."""
    config = yaml.safe_load((repo / "_config.yml").read_text())
    excluded = config.get("execute", {}).get("exclude_patterns", [])
    pages = []
    for page in toc_pages(repo):
        path = source_of(page, repo)
        if any(path.relative_to(repo).match(pattern) for pattern in excluded):
            continue
        if path.suffix == ".md" and not is_myst_markdown_notebook(path.read_text()):
            continue
        pages.append((page, path))
    return pages


def read_notebook(path: Path):
    """The page's notebook, read the way the build reads it."""
    return book.read_page_notebook(path)


def glue_keys_used(text: str) -> set[str]:
    """The glue keys a page's text shows (``key:.2f`` -> ``key``)."""
    keys = set(GLUE_ROLE.findall(text)) | set(GLUE_DIRECTIVE.findall(text))
    # a key glued from another page ("page::key") is that page's business
    return {key.split(":")[0].strip() for key in keys if "::" not in key}


def glue_keys_stored(notebook) -> set[str]:
    keys = set()
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                keys.add(name)
    return keys


def problems_of(page: str, path: Path, build: Path) -> list[str]:
    cache = get_cache(str(build / ".jupyter_cache"))
    notebook = read_notebook(path)
    if book.cached_execution(build / ".jupyter_cache", path) is None:
        message = f"{page}: no successful execution of its current code in the cache"
        for record in cache.list_project_records():
            if Path(record.uri).resolve() == path.resolve() and record.traceback:
                lines = ANSI.sub("", record.traceback).strip().splitlines()
                errors = [line for line in lines if EXCEPTION.match(line)] or lines[-1:]
                message += f"; its last execution failed: {errors[-1][:300]}"
        return [message + " (the next build executes it again)"]
    _, executed = cache.merge_match_into_notebook(notebook)
    problems = []
    for cell in executed.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                problems.append(
                    f"{page}: a cell raised {output.get('ename')}: {output.get('evalue')}"
                )
    missing = glue_keys_used(path.read_text()) - glue_keys_stored(executed)
    if missing:
        problems.append(f"{page}: glued values never stored by its cells: {sorted(missing)}")
    return problems


def html_problems(page: str, build: Path) -> list[str]:
    html = build / "html" / f"{page}.html"
    if not html.is_file():
        return [f"{page}: the built page {html} is missing"]
    text = html.read_text()
    if "Traceback (most recent call last)" in text or '"output traceback' in text:
        return [f"{page}: the built page shows a traceback"]
    return []


def main(argv: list[str]) -> int:
    build = Path(argv[1]).resolve() if len(argv) > 1 else REPO / "_build"
    problems = []
    for page, path in executed_pages():
        problems += problems_of(page, path, build)
    for page in toc_pages():
        problems += html_problems(page, build)
    if problems:
        print("The book build is broken:", file=sys.stderr)
        for problem in problems:
            print("  - " + problem, file=sys.stderr)
        return 1
    print(f"check_build: {len(toc_pages())} pages built, every chapter executed, every value glued")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
