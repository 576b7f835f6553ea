"""Equation and figure numbers per chapter, and the exercises citing the numbers the book shows.

:mod:`nlpcourse.numbering` computes each labelled equation's number from the book's sources;
these tests compare it with hand-worked examples and with the numbers Sphinx wrote into the built
pages, and check that every equation an exercise notebook cites shows that number.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nlpcourse import numbering

REPO = Path(__file__).resolve().parent.parent

CHAPTER = """---
kernelspec:
  name: python3
---
# A chapter

$$
P(w) = \\frac{c(w)}{N}
$$ (first)

An equation without a label is not numbered:

$$
x = 1
$$

```{code-cell} ipython3
text = '''
$$
y = 2
$$ (in-a-code-cell)
'''
```

$$ a = b $$ (second)
"""


def test_equation_labels_in_order_without_code_or_unlabelled():
    assert numbering.equation_labels(CHAPTER) == ["first", "second"]


def test_numbered_chapters_from_the_numbered_part(tmp_path):
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nparts:\n"
        "  - caption: Chapters\n    numbered: true\n"
        "    chapters:\n      - file: a\n      - file: b\n"
        "  - caption: Reference\n    chapters:\n      - file: c\n"
    )
    assert numbering.numbered_chapters(tmp_path) == [(1, "a"), (2, "b")]
    (tmp_path / "a.md").write_text(CHAPTER)
    (tmp_path / "b.md").write_text("# B\n\n$$\nz\n$$ (third)\n")
    assert numbering.equation_numbers(tmp_path) == {"first": "1.1", "second": "1.2", "third": "2.1"}


def test_fill_writes_the_number_once_and_keeps_the_label():
    numbers = {"parse-cky": "3.5", "parse-cky-accept": "3.6", "rnn-h": "4.1", "per": "5.2"}
    text = (
        "for eq. (parse-cky), and\n(parse-cky-accept); (eq. rnn-h); not (parse-cky-x), "
        "(my-rnn-h) or rnn-h; eqs. (per) and \\text{(per)}, one row per word"
    )
    filled = numbering.fill(text, numbers)
    assert filled == (
        "for eq. (3.5, parse-cky), and\n(3.6, parse-cky-accept); (eq. 4.1, rnn-h); not "
        "(parse-cky-x), (my-rnn-h) or rnn-h; eqs. (5.2, per) and \\text{(5.2, per)}, one row "
        "per word"
    )
    assert numbering.fill(filled, numbers) == filled  # idempotent
    renumbered = numbering.fill(filled, {**numbers, "parse-cky": "3.7"})
    assert "(3.7, parse-cky)" in renumbered and "3.5" not in renumbered


def test_fill_notebook_changes_only_markdown(tmp_path):
    import json

    notebook = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["eq. (rnn-h) here\n", "end"]},
            {
                "cell_type": "code",
                "metadata": {},
                "source": "# rnn-h",
                "outputs": [],
                "execution_count": None,
            },
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
    assert numbering.fill_notebook(path, {"rnn-h": "4.1"})
    cells = json.loads(path.read_text())["cells"]
    assert cells[0]["source"] == ["eq. (4.1, rnn-h) here\n", "end"]
    assert cells[1]["source"] == "# rnn-h"
    assert not numbering.fill_notebook(path, {"rnn-h": "4.1"})  # a second run changes nothing
    assert numbering.stale_citations(path, {"rnn-h": "4.1"}) == []
    assert numbering.stale_citations(path, {"rnn-h": "4.2"})


def test_every_cited_equation_shows_the_books_number():
    """The exercise notebooks (sources and the student notebooks generated from them) cite each
    equation with the number the book shows beside its label: "eq. (3.5, parse-cky)"."""
    numbers = numbering.equation_numbers()
    folders = [REPO / "solutions", REPO / "exercises"]
    paths = numbering.notebooks([str(folder) for folder in folders])
    assert paths, "no exercise notebook found"
    cited = {label for path in paths for label in numbering.cited(path.read_text(), numbers)}
    assert cited, "the exercises cite no equation of the book"
    problems = [problem for path in paths for problem in numbering.stale_citations(path, numbers)]
    assert not problems, (
        "run `python -m nlpcourse.numbering fill solutions`, then regenerate the student "
        "notebooks (CONTRIBUTING.md):\n" + "\n".join(problems)
    )


@pytest.mark.slow
@pytest.mark.corpus
def test_the_built_pages_show_these_numbers(book_build):
    """Sphinx numbered the equations and figures per chapter, as :mod:`nlpcourse.numbering` says:
    equation ``(k.n)`` and ``Fig. k.n`` on chapter ``k``, n = 1, 2, ... in page order, and every
    reference to an equation (``{eq}``) shows that number."""
    numbers = numbering.equation_numbers()
    shown: dict[str, str] = {}
    for chapter, page in numbering.numbered_chapters():
        html = (book_build.html / f"{page}.html").read_text()
        equations = re.findall(r'id="equation-([\w-]+)">\s*<span class="eqno">\(([\d.]+)\)', html)
        shown.update(equations)
        figures = re.findall(r'<span class="caption-number">Fig\. ([\d.]+) </span>', html)
        expected = [f"{chapter}.{n}" for n in range(1, len(figures) + 1)]
        assert figures == expected, f"{page}: figures numbered {figures}"
        references = re.findall(r'href="[\w./]*#equation-([\w-]+)">\(([\d.]+)\)</a>', html)
        assert references, f"{page} refers to no equation"
        wrong = [(label, n) for label, n in references if numbers.get(label) != n]
        assert not wrong, f"{page}: equation references that show another number: {wrong}"
    assert shown == numbers
