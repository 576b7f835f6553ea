"""Equation numbers as the book shows them, for the exercise notebooks that cite equations by label.

The book numbers its chapters in ``_toc.yml`` (the part with ``numbered: true``) and, with Sphinx's
``numfig_secnum_depth: 1``, numbers the labelled display equations of chapter ``k`` as ``k.1``,
``k.2``, ... in the order they appear (an equation without a label gets no number). This module
computes the same numbers from the same sources the build reads: ``_toc.yml`` for the chapter
numbers, and each chapter's MyST Markdown, parsed by the build's own Markdown parser (markdown-it
with MyST's ``dollarmath`` plugin), for the labelled equations ``$$ ... $$ (label)``.
``tests/test_numbering.py`` compares these numbers with the ones on the built pages.

An exercise cites an equation as "eq. (parse-cky)". :func:`fill` writes the book's number in front
of the label, "eq. (3.5, parse-cky)", keeping the label so that it can be searched for; running it
again changes nothing, and when the book renumbers, it replaces the old number with the new one.

Usage (after the book's equations changed; then regenerate the student notebooks)::

    python -m nlpcourse.numbering fill solutions     # write the numbers into solutions/*/*.ipynb
    python -m nlpcourse.numbering check solutions exercises   # exit 1 if a number is missing or old
    python -m nlpcourse.numbering list               # label -> number, in book order
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def numbered_chapters(repo: Path = REPO) -> list[tuple[int, str]]:
    """``[(number, page)]`` of the numbered chapters of ``_toc.yml``, e.g. ``(3, "book/parsing")``.

    Chapters are numbered 1, 2, ... in the order of the toc's numbered parts (each numbered part
    starts again at 1, as Sphinx numbers each numbered toctree on its own; the book has one).
    """
    toc = yaml.safe_load((repo / "_toc.yml").read_text())
    parts = toc.get("parts") or [{"chapters": toc.get("chapters", []), **toc.get("options", {})}]
    chapters = []
    for part in parts:
        if part.get("numbered"):
            chapters += [(i, entry["file"]) for i, entry in enumerate(part["chapters"], start=1)]
    return chapters


def equation_labels(markdown: str) -> list[str]:
    """The labels of the numbered display equations of a MyST page, in the order they appear."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.front_matter import front_matter_plugin

    parser = MarkdownIt("commonmark").use(front_matter_plugin).use(dollarmath_plugin)
    return [token.info for token in parser.parse(markdown) if token.type == "math_block_label"]


def equation_numbers(repo: Path = REPO) -> dict[str, str]:
    """``{label: number}`` for every numbered equation of the book (``"parse-cky": "3.5"``)."""
    numbers: dict[str, str] = {}
    for chapter, page in numbered_chapters(repo):
        labels = equation_labels((repo / f"{page}.md").read_text())
        for index, label in enumerate(labels, start=1):
            if label in numbers:
                raise ValueError(f"equation label {label!r} is defined twice ({page})")
            numbers[label] = f"{chapter}.{index}"
    return numbers


def citation(label: str) -> re.Pattern[str]:
    """A citation of ``label``: right after "(" or "eq. " ("eqs. "), as in "eq. (parse-cky)",
    "(eq. rnn-y)", "(lstm-c)", with the number a previous :func:`fill` wrote (group ``number``).
    A label that is also a word ("per") is cited only in that form, never in running text."""
    return re.compile(
        rf"(?P<before>\(|\b[Ee]qs?\. )(?P<number>\d+\.\d+, )?{re.escape(label)}(?![\w-])"
    )


def fill(text: str, numbers: dict[str, str]) -> str:
    """``text`` with the book's number before each equation label it cites: "(3.5, parse-cky)"."""
    for label, number in numbers.items():
        text = citation(label).sub(rf"\g<before>{number}, {label}", text)
    return text


def cited(text: str, numbers: dict[str, str]) -> list[str]:
    """The equation labels that ``text`` cites, in the order of ``numbers``."""
    return [label for label in numbers if citation(label).search(text)]


def markdown_cells(notebook: dict) -> list[dict]:
    return [cell for cell in notebook["cells"] if cell["cell_type"] == "markdown"]


def source_text(cell: dict) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def fill_notebook(path: Path, numbers: dict[str, str]) -> bool:
    """Fill the numbers into the markdown cells of the notebook at ``path``; True if it changed.

    Only markdown cell sources change; the file is written back in nbformat's layout (one space
    of indentation, non-ASCII kept), so an unchanged notebook stays byte for byte the same.
    """
    text = path.read_text()
    notebook = json.loads(text)
    for cell in markdown_cells(notebook):
        old = source_text(cell)
        new = fill(old, numbers)
        if new != old:
            lines = new.splitlines(keepends=True)
            cell["source"] = new if isinstance(cell["source"], str) else lines
    result = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
    if result == text:
        return False
    path.write_text(result)
    return True


def stale_citations(path: Path, numbers: dict[str, str]) -> list[str]:
    """The citations of a notebook's markdown that do not show the book's number."""
    problems = []
    for index, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        text = source_text(cell)
        for label in cited(text, numbers):
            for found in citation(label).finditer(text):
                if found["number"] != f"{numbers[label]}, ":
                    problems.append(
                        f"{path} cell {index}: {found.group()!r} should read "
                        f"'{found['before']}{numbers[label]}, {label}'"
                    )
    return problems


def notebooks(folders: list[str]) -> list[Path]:
    return sorted(p for folder in folders for p in Path(folder).glob("*/*.ipynb"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nlpcourse.numbering", description=__doc__)
    parser.add_argument("command", choices=["fill", "check", "list"])
    parser.add_argument("folders", nargs="*", default=["solutions"])
    args = parser.parse_args(argv)
    numbers = equation_numbers()
    if args.command == "list":
        for label, number in numbers.items():
            print(f"{number}\t{label}")
        return 0
    if args.command == "fill":
        for path in notebooks(args.folders):
            if fill_notebook(path, numbers):
                print(f"filled the equation numbers into {path}")
        return 0
    problems = [
        problem for path in notebooks(args.folders) for problem in stale_citations(path, numbers)
    ]
    print("\n".join(problems) or "every cited equation shows the book's number")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
