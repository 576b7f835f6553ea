"""Adding a chapter as one command: the stubs and the entries of CONTRIBUTING.md's checklist.

    python -m nlpcourse.scaffold 07 embeddings "Word embeddings" ppmi svd similarity analogy nearest

writes, for chapter ``NN`` called ``name`` with the exercise parts ``part ...`` (at least
:data:`MIN_PARTS`, two: ``tests/test_exercises.py`` asserts it),

- the page ``book/<name>.md`` (the jupytext header of the first chapter of ``_toc.yml``, the
  opening and closing sections, one numbered equation ``(<name>-todo)``);
- the module ``nlpcourse/<name>.py`` with one ``@reference`` function per part, each naming the
  label; the checks ``nlpcourse/checks/<name>.py``; the tests ``tests/test_<name>.py`` and
  ``tests/test_checks_<name>.py``; the benchmark ``benchmarks/<name>.py``;
- the nbgrader source notebook ``solutions/NN-<name>/<name>.ipynb``: a locked introduction and
  setup cell, then per part a locked markdown cell, a solution cell (``grade_id`` = the part) and
  a graded test cell (``test_<part>``, 1 point) that calls the part's check, hidden tests too;
- the entries: ``_toc.yml`` (the page and the student notebook, in chapter order), the README's
  exercise table row and grading walk-through line, and the heading in ``benchmarks/README.md``;

then regenerates the student notebook with ``nbgrader generate_assignment`` (``--no-generate``
skips it). It refuses to overwrite anything: when any file it would write exists, or the chapter
number or name is taken, it writes nothing and says what exists.

    python -m nlpcourse.scaffold glued <name>

executes that one chapter alone and runs its glued-value assertions of ``tests/test_book.py`` on
it (checklist item 12), without building the book.

    python -m nlpcourse.scaffold warnings <name>

prints the Sphinx warnings of one page (``book/<name>.md``) that the book command would fail on,
executing only that page (:func:`page_warnings`).

Every stub says ``SCAFFOLD-TODO`` where the contributor has work to do. The stubs are honest: the
functions and checks raise ``NotImplementedError`` and the stub tests fail, so nothing scaffolded
passes for done; ``tests/test_structure.py`` accepts the scaffolded files as present (the
checklist's pieces exist) and lists every ``SCAFFOLD-TODO`` left as an expected failure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from nlpcourse.book import cell_timeout, read_page_notebook, toc_pages

REPO = Path(__file__).resolve().parent.parent
TODO = "SCAFFOLD-TODO"
# The fewest graded parts an exercise may have. Each part is graded on its own so that partial work
# earns partial credit (DESIGN.md, "An exercise"), and the grading invariants prove it by solving
# one part alone: with a single part that notebook is the whole solution and proves nothing, so an
# exercise has at least two. The six chapters have five or six (tests/test_structure.py counts
# them); that is their habit, not a rule. Read by tests/test_structure.py and test_exercises.py.
MIN_PARTS = 2


class ScaffoldError(Exception):
    """The chapter cannot be scaffolded as asked; the message says why and what to do."""


def _nbgrader(grade_id: str, *, locked: bool, solution: bool = False, points: int = 0) -> dict:
    meta: dict = {
        "grade": points > 0,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if points:
        meta["points"] = points
    return {"nbgrader": meta}


def _cell(kind: str, source: str, metadata: dict) -> dict:
    cell: dict[str, Any] = {"cell_type": kind, "metadata": metadata, "source": source}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def source_notebook(number: str, name: str, title: str, parts: list[str], kernelspec: dict) -> str:
    """The nbgrader source notebook of the exercise, as JSON text."""
    n = int(number)
    cells = [
        _cell(
            "markdown",
            f"# Exercise {n}: {title.lower()}\n\n{TODO}: what the student writes, and where "
            f"chapter {n} of the book derives it.",
            _nbgrader("intro", locked=True),
        ),
        _cell(
            "code",
            f"# {TODO}: the imports and data every part uses",
            _nbgrader("setup", locked=True),
        ),
    ]
    for i, part in enumerate(parts, 1):
        cells += [
            _cell(
                "markdown",
                f"## Part {i}: `{part}` (1 point)\n\n{TODO}: what `{part}` takes and returns, "
                f"eq. ({name}-todo) of the book.",
                _nbgrader(f"part{i}", locked=True),
            ),
            _cell(
                "code",
                f"def {part}(*args):\n    ### BEGIN SOLUTION\n"
                f'    raise NotImplementedError("{TODO}: the solution of {part}")\n'
                "    ### END SOLUTION",
                _nbgrader(part, locked=False, solution=True),
            ),
            _cell(
                "code",
                f"from nlpcourse.checks.{name} import check_{part}\n\ncheck_{part}({part})\n"
                f"### BEGIN HIDDEN TESTS\ncheck_{part}({part}, hidden=True)\n### END HIDDEN TESTS",
                _nbgrader(f"test_{part}", locked=True, points=1),
            ),
        ]
    for i, cell in enumerate(cells):
        cell["id"] = f"{name}-{i}"
    notebook = {
        "cells": cells,
        "metadata": {"kernelspec": kernelspec, "language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(notebook, indent=1) + "\n"


def page(header: str, number: str, name: str, title: str) -> str:
    return f"""{header}
# {title}

{TODO}: what the reader will be able to do by the end of chapter {int(number)}.

## {TODO}: the first idea

{TODO}: derive it as numbered equations; name each label in the code that implements it.

$$
y = f(x)
$$ ({name}-todo)

## Summary

{TODO}: what the chapter showed.

## Exercises

{TODO}: pen-and-paper exercises with folded answers, and the graded exercise
`exercises/{number}-{name}/{name}.ipynb`.
"""


def module(number: str, name: str, title: str, parts: list[str]) -> str:
    functions = "".join(
        f'''

@reference
def {part}(*args: object) -> object:
    """{TODO}: what {part} computes, eq. ({name}-todo)."""
    raise NotImplementedError("{TODO}: the reference {part}")
'''
        for part in parts
    )
    return f'''"""{title}: the reference implementation of chapter {int(number)} (book/{name}.md).

{TODO}: what this module implements, what it is based on, and any departure from the book.
"""

from __future__ import annotations

from nlpcourse.guard import reference
{functions}'''


def checks(number: str, name: str, parts: list[str]) -> str:
    functions = "".join(
        f'''

def check_{part}(func: Callable, hidden: bool = False) -> None:
    """{TODO}: the cases of {part}, smallest first, against nlpcourse.{name}.{part}."""
    raise NotImplementedError("{TODO}: check_{part}, on nlpcourse.checks.core")
'''
        for part in parts
    )
    return f'''"""Checks for exercise {number}-{name} (chapter {int(number)}).

{TODO}: where the answers come from, and the mistakes each check names.
"""

from __future__ import annotations

from collections.abc import Callable
{functions}'''


def stub_tests(doc: str, fail: str, parts: list[str], prefix: str) -> str:
    """A test file whose every test fails with ``fail`` (``{part}`` filled in) until written."""
    tests = "".join(
        f'''

def test_{prefix}{part}():
    pytest.fail("{TODO}: {fail.format(part=part)}")
'''
        for part in parts
    )
    return f'"""{TODO}: {doc}\n"""\n\nimport pytest\n{tests}'


def benchmark(name: str) -> str:
    return f'''"""Speed of nlpcourse.{name} against the peer a user would pick, as ratios.

{TODO}: the peer, the sizes, and the ratios printed. Run it alone:
.venv/bin/python benchmarks/{name}.py, and copy its figures into benchmarks/README.md.
"""

raise SystemExit("{TODO}: benchmarks/{name}.py measures nothing yet")
'''


def _assignments(repo: Path) -> list[str]:
    solutions = repo / "solutions"
    if not solutions.is_dir():
        return []
    return sorted(p.name for p in solutions.iterdir() if re.fullmatch(r"\d\d-\w+", p.name))


def _insert_after(text: str, anchor: str, line: str) -> str:
    """``text`` with ``line`` inserted after the line whose stripped text is ``anchor`` (the last
    one if several), at that line's indentation."""
    lines = text.splitlines(keepends=True)
    where = max(i for i, old in enumerate(lines) if old.strip() == anchor)
    indent = lines[where][: len(lines[where]) - len(lines[where].lstrip())]
    lines.insert(where + 1, indent + line + "\n")
    return "".join(lines)


def _insert_before(text: str, anchor: str, line: str) -> str:
    """``text`` with ``line`` inserted before the first line whose stripped text starts with
    ``anchor``, at that line's indentation."""
    lines = text.splitlines(keepends=True)
    where = next(i for i, old in enumerate(lines) if old.strip().startswith(anchor))
    indent = lines[where][: len(lines[where]) - len(lines[where].lstrip())]
    lines.insert(where, indent + line + "\n")
    return "".join(lines)


def toc_with(toc: str, number: str, name: str, before: list[str]) -> str:
    """``_toc.yml`` with the page and the student notebook after those of the chapter before
    (with or without the toc's ``parts``; each entry takes the indentation of its neighbour)."""
    pages = set(re.findall(r"- file: (\S+)", toc))
    previous = [a for a in before if f"book/{a.split('-', 1)[1]}" in pages]
    if previous:
        toc = _insert_after(
            toc, f"- file: book/{previous[-1].split('-', 1)[1]}", f"- file: book/{name}"
        )
    else:  # the first chapter: before the first page of the book's chapters
        toc = _insert_before(toc, "- file: book/", f"- file: book/{name}")
    shown = [a for a in before if f"exercises/{a}/{a.split('-', 1)[1]}" in pages]
    entry = f"- file: exercises/{number}-{name}/{name}"
    if shown:
        return _insert_after(
            toc, f"- file: exercises/{shown[-1]}/{shown[-1].split('-', 1)[1]}", entry
        )
    if "- file: exercises/" in toc:
        return _insert_before(toc, "- file: exercises/", entry)
    return toc


def readme_with(readme: str, number: str, name: str, title: str, parts: list[str]) -> str:
    """The README with the exercise table row and the grading walk-through line."""
    what = f"{TODO}: {', '.join(parts)}"
    row = f"| `exercises/{number}-{name}/{name}.ipynb` | {int(number)}, {title.lower()} | {what} |"
    table = [line for line in readme.splitlines() if re.match(r"\|\s*`exercises/\d\d-", line)]
    rows = [line for line in table if line.split("`exercises/", 1)[1][:2] < number]
    anchor = rows[-1] if rows else (table[0] if table else None)
    if anchor is None:
        raise ScaffoldError("README.md has no exercise table (rows `| `exercises/NN-name/...`)")
    if rows:
        readme = _insert_after(readme, anchor, row)
    else:
        readme = readme.replace(anchor + "\n", row + "\n" + anchor + "\n", 1)
    walk = (
        f"`{number}-{name}` ({len(parts)} parts, {len(parts)} points) is graded the same way: "
        f"`.venv/bin/python autograder/grading.py demo {number}-{name}`.\n\n"
    )
    marker = "**Grade a class.**"
    if marker not in readme:  # the walk-through was rewritten: say so, write the rest
        print(
            f"scaffold: README.md has no {marker!r}; add this line by hand: {walk}", file=sys.stderr
        )
        return readme
    return readme.replace(marker, walk + marker, 1)


def plan(repo: Path, number: str, name: str, title: str, parts: list[str]) -> dict[Path, str]:
    """{path: new text} for every file the chapter writes or edits; raises ScaffoldError."""
    if not re.fullmatch(r"\d\d", number) or number == "00":
        raise ScaffoldError(f"the chapter number is two digits, 01 to 99: got {number!r}")
    if not re.fullmatch(r"[a-z][a-z0-9]*", name):
        raise ScaffoldError(
            f"the chapter name is lower-case letters and digits (it names the page, the module "
            f"and the equation labels' prefix): got {name!r}"
        )
    if len(parts) < MIN_PARTS:
        raise ScaffoldError(
            f"an exercise has at least {MIN_PARTS} graded parts (tests/test_exercises.py asserts "
            f"it): got {len(parts)}"
        )
    bad = [p for p in parts if not re.fullmatch(r"[a-z_][a-z0-9_]*", p) or p.startswith("test_")]
    if bad or len(set(parts)) != len(parts):
        raise ScaffoldError(
            f"each part is a distinct lower-case Python name not starting with test_: {parts}"
        )
    assignments = _assignments(repo)
    taken = [a for a in assignments if a[:2] == number or a[3:] == name]
    if taken:
        raise ScaffoldError(
            f"chapter {number} or the name {name!r} is taken by solutions/{taken[0]}"
        )

    toc_text = (repo / "_toc.yml").read_text()
    first = toc_pages(repo)[1]  # the first chapter (toc_pages starts with the root page)
    first_page = (repo / f"{first}.md").read_text()
    header = first_page[: first_page.index("\n---\n", 4) + 5]
    kernelspec = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    if assignments:
        existing = next((repo / "solutions" / assignments[0]).glob("*.ipynb"))
        kernelspec = json.loads(existing.read_text())["metadata"]["kernelspec"]

    assignment = f"{number}-{name}"
    new = {
        f"book/{name}.md": page(header, number, name, title),
        f"nlpcourse/{name}.py": module(number, name, title, parts),
        f"nlpcourse/checks/{name}.py": checks(number, name, parts),
        f"tests/test_{name}.py": stub_tests(
            f"the tests of nlpcourse.{name} against oracles independent of it\n"
            "(brute force on tiny inputs, a hand-worked example, a library such as nltk or torch).",
            f"test {name}.{{part}} against an oracle",
            parts,
            "",
        ),
        f"tests/test_checks_{name}.py": stub_tests(
            f"the tests of nlpcourse.checks.{name}: a right answer written differently\n"
            "passes, each recognised mistake is named, an unforeseen wrong answer shows the case.",
            "test check_{part}",
            parts,
            "check_",
        ),
        f"solutions/{assignment}/{name}.ipynb": source_notebook(
            number, name, title, parts, kernelspec
        ),
        f"benchmarks/{name}.py": benchmark(name),
    }
    exists = [path for path in new if (repo / path).exists()]
    if exists:
        raise ScaffoldError(
            "these files exist already, so nothing was written: " + ", ".join(exists)
        )

    before = [a for a in assignments if a < assignment]
    bench = (repo / "benchmarks" / "README.md").read_text().rstrip("\n")
    edited = {
        "_toc.yml": toc_with(toc_text, number, name, before),
        "README.md": readme_with((repo / "README.md").read_text(), number, name, title, parts),
        "benchmarks/README.md": f"{bench}\n\n## {title}: `benchmarks/{name}.py`\n\n"
        f"{TODO}: the command, the machine (and `uptime`) and the ratios it printed.\n",
    }
    return {repo / path: text for path, text in {**new, **edited}.items()}


def generate(repo: Path, assignment: str) -> None:
    """``nbgrader generate_assignment`` from ``autograder/``, with this Python's tools on PATH."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(
        [str(bin_dir / "nbgrader"), "generate_assignment", assignment, "--force"],
        cwd=repo / "autograder",
        env=env,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise ScaffoldError(
            f"nbgrader generate_assignment {assignment} failed:\n{result.stdout}{result.stderr}"
        )


def scaffold(
    repo: Path, number: str, name: str, title: str, parts: list[str], *, run_nbgrader: bool = True
) -> list[Path]:
    """Write the chapter's stubs and entries (nothing if any check fails); the paths written."""
    files = plan(repo, number, name, title, parts)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    # the source notebook cites the page's equations: write the book's numbers in front, as
    # `python -m nlpcourse.numbering fill solutions` does (tests/test_numbering.py checks them)
    from nlpcourse import numbering

    numbering.fill_notebook(repo / "solutions" / f"{number}-{name}" / f"{name}.ipynb",
                            numbering.equation_numbers(repo))  # fmt: skip
    if run_nbgrader:
        generate(repo, f"{number}-{name}")
    return list(files)


def execute_alone(repo: Path, name: str, out: Path) -> Path:
    """Execute the page ``book/<name>.md`` alone into ``out/<name>.out.ipynb`` (returned), as the
    build executes it: read by myst-nb's reader and run by jupyter-cache's executor, the kernel in
    ``book/`` wherever the notebook is written (a chapter reads ``../_toc.yml`` and
    ``results/``), each cell within the build's timeout. A failed cell raises
    :class:`ScaffoldError` with its traceback."""
    import nbformat
    from jupyter_cache.executors.utils import single_nb_execution

    notebook = read_page_notebook(repo / "book" / f"{name}.md")
    result = single_nb_execution(
        notebook, cwd=str(repo / "book"), timeout=int(cell_timeout(repo)), allow_errors=False
    )
    if result.err is not None:
        raise ScaffoldError(f"book/{name}.md failed to execute:\n{result.exc_string}")
    out.mkdir(parents=True, exist_ok=True)
    executed = out / f"{name}.out.ipynb"
    nbformat.write(notebook, executed)
    return executed


def check_glued(repo: Path, name: str, out: Path) -> int:
    """Execute ``book/<name>.md`` alone into ``out/<name>.out.ipynb`` (:func:`execute_alone`) and
    run ``tests/test_book.py`` on it: the chapter's glued-value assertions run, the other
    chapters' skip. The exit status of pytest."""
    try:
        executed = execute_alone(repo, name, out)
    except ScaffoldError as error:
        print(error, file=sys.stderr)
        return 1
    env = {**os.environ, "NLPCOURSE_BOOK_CHAPTER": str(executed)}
    test = [sys.executable, "-m", "pytest", "tests/test_book.py", "-q", "-rs"]
    return subprocess.run(test, cwd=repo, env=env).returncode


def page_warnings(repo: Path, page: str, out: Path) -> list[str]:
    """The Sphinx warnings of one page of the book (``book/<name>``, as in ``_toc.yml``), without
    executing the others: the lines the book command (``jupyter-book build . -W -n``) would fail
    on for this page.

    Sphinx resolves a page's references against the whole book, so a page cannot be built alone
    (``jupyter-book build book/<name>.md`` looks for ``_static`` and ``references.bib`` beside
    it and reports warnings the book does not have). Instead this builds the whole book into
    ``out`` with the book's own configuration, except that only ``page`` is executed: through the
    book's execution cache (``_build/.jupyter_cache``), so a page whose code has not changed since
    the last build is not run again, and a page executed here is not run again by the next build.
    The other pages are read and written without outputs; their warnings (glued values missing,
    at least) are dropped, and only those located in ``page``, or nowhere, are returned. One
    thing this cannot check: a reference from ``page`` to a figure that another page's cell
    draws reads as undefined here; the full build checks it.
    """
    import yaml

    pages = toc_pages(repo)
    if page not in pages:
        raise ScaffoldError(f"{page} is not a page of _toc.yml: {pages}")
    config = yaml.safe_load((repo / "_config.yml").read_text())
    execute = config.setdefault("execute", {})
    others = [f"{other}.*" for other in pages if other != page]
    execute["exclude_patterns"] = [*execute.get("exclude_patterns", []), *others]
    execute["cache"] = str(repo / "_build" / ".jupyter_cache")
    extensions = config.get("sphinx", {}).get("local_extensions") or {}
    for name, folder in extensions.items():  # relative to the configuration file, now in out/
        extensions[name] = str(repo / folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / "_config.yml").write_text(yaml.safe_dump(config))
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    build = [str(jupyter_book), "build", str(repo), "-n", "--config", str(out / "_config.yml")]
    build += ["--path-output", str(out)]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(build, cwd=repo, env=env, capture_output=True, text=True)
    log = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)  # no colours
    found = []
    for line in log.splitlines():
        where, warning, _ = line.partition(": WARNING: ")
        if not warning:
            where, warning, _ = line.partition(": ERROR: ")
        if not warning and not line.startswith(("WARNING: ", "ERROR: ")):
            continue
        source = Path(re.sub(r"(:\d*)+$", "", where))  # "path:12" or "path:" to the path
        source = source if source.is_absolute() else repo / source
        if not where or source.resolve().with_suffix("") == (repo / page).resolve():
            found.append(line)
    if result.returncode != 0 and not found:
        found.append(f"jupyter-book build failed ({result.returncode}):\n{log[-3000:]}")
    return found


def next_steps(number: str, name: str) -> str:
    """What to do after the scaffold: replace the TODOs, then every test a new chapter must pass
    (CONTRIBUTING's checklist), each as a command."""
    folder = f"{number}-{name}"
    tests = [
        "tests/test_structure.py",
        "tests/test_numbering.py",
        f"tests/test_checks_{name}.py",
        "tests/test_checks_properties.py",
        f"tests/test_{name}.py",
        f"tests/test_exercises.py -k {folder}",
        f"tests/test_sandbox.py -k {folder}",
    ]
    lines = [f"next: replace every {TODO} (grep -rn {TODO} .), then run each of:"]
    lines += [f"  .venv/bin/pytest -ra {test}" for test in tests]
    lines.append(f"  .venv/bin/python -m nlpcourse.scaffold glued {name}   # the chapter alone")
    lines.append("  .venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["glued"]:
        if len(argv) != 2:
            print("usage: python -m nlpcourse.scaffold glued <name>", file=sys.stderr)
            return 2
        return check_glued(REPO, argv[1], Path(tempfile.mkdtemp(prefix=f"{argv[1]}-")))
    if argv[:1] == ["warnings"]:
        if len(argv) != 2:
            print("usage: python -m nlpcourse.scaffold warnings <name>", file=sys.stderr)
            return 2
        page = argv[1] if "/" in argv[1] else f"book/{argv[1]}"
        out = Path(tempfile.mkdtemp(prefix=f"{Path(page).name}-warnings-"))
        try:
            warnings = page_warnings(REPO, str(Path(page).with_suffix("")), out)
        except ScaffoldError as error:
            print(f"scaffold: {error}", file=sys.stderr)
            return 2
        print("\n".join(warnings) or f"{page}: no Sphinx warning (the book built in {out})")
        return 1 if warnings else 0
    parser = argparse.ArgumentParser(
        prog="python -m nlpcourse.scaffold", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("number", help="the chapter number, two digits (07)")
    parser.add_argument("name", help="the page, module and topic name (embeddings)")
    parser.add_argument("title", help='the chapter title ("Word embeddings")')
    parser.add_argument("parts", nargs="+", help=f"the exercise's parts, at least {MIN_PARTS}")
    parser.add_argument(
        "--no-generate", action="store_true", help="skip nbgrader generate_assignment"
    )
    parser.add_argument("--repo", type=Path, default=REPO, help="the repository (default: this)")
    args = parser.parse_args(argv)
    try:
        written = scaffold(
            args.repo,
            args.number,
            args.name,
            args.title,
            args.parts,
            run_nbgrader=not args.no_generate,
        )
    except ScaffoldError as error:
        print(f"scaffold: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path.relative_to(args.repo)}")
    if not args.no_generate:
        print(f"generated exercises/{args.number}-{args.name}/{args.name}.ipynb")
    print(next_steps(args.number, args.name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
