"""Adding a chapter is a checklist, and this test enforces the parts of it a program can check.

CONTRIBUTING.md lists everything a chapter touches. Everything here is found from the repository
itself, never from a fixed list of chapters: a chapter is any name that one of its pieces declares,
so the test names what is missing from the first file a contributor creates: the page
``book/<name>.md`` (any page but the front and back matter of ``MATTER``), an entry
``book/<name>`` of ``_toc.yml``, an assignment folder ``solutions/NN-name/`` or a row of the
README's exercise table.
The topic of an assignment's checks (``nlpcourse.checks.<topic>`` in its graded test cells) names
the package module (the chapter's name until the notebook has test cells). For each chapter, the
test asks for

- the source notebook ``solutions/NN-name/<name>.ipynb``, with at least ``MIN_PARTS`` (two)
  graded parts (``tests/test_exercises.py`` asserts it with the real nbgrader, minutes later);
- the chapter page ``book/<name>.md``, in ``_toc.yml`` in the order of the chapter numbers (the
  front page builds its list of chapters from ``_toc.yml``); the student notebook in ``_toc.yml``
  too, if the book shows the other exercises there;
- the package module ``nlpcourse/<topic>.py`` and its checks ``nlpcourse/checks/<topic>.py``;
- the tests ``tests/test_<topic>.py`` (package against oracles) and
  ``tests/test_checks_<topic>.py`` (the checks: right answers pass, mistakes are named);
- the generated student notebook ``exercises/NN-name/<name>.ipynb``;
- the benchmark ``benchmarks/<topic>.py`` and its section in ``benchmarks/README.md``;
- its row in the README's exercise table (and the table has no row without an assignment).

For the whole book: every equation label that the package's code names exists in the book; every
``{eq}`` reference and every citation key of a page is defined; every page in ``_toc.yml`` exists
and every page in ``book/`` is in ``_toc.yml``; no chapter redefines the book helper ``keep``.

A failure names the chapter and what is missing, so the message alone says what to add. The stubs
that ``python -m nlpcourse.scaffold`` writes count as present; each ``SCAFFOLD-TODO`` left in them
is listed as an expected failure (``pytest -ra``), and the stub tests themselves fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import yaml

from nlpcourse.book import chapter_title
from nlpcourse.scaffold import MIN_PARTS  # the fewest graded parts, and why, defined once

REPO = Path(__file__).resolve().parent.parent
BOOK = REPO / "book"
# Pages of the book that are not chapters: the front page, the exercises' page, the back matter.
MATTER = {"intro", "exercises", "notation", "references"}
TODO = "SCAFFOLD-TODO"  # what nlpcourse.scaffold leaves where the contributor has work to do


def assignments(repo: Path = REPO) -> list[str]:
    """The assignment folders ``solutions/NN-name``."""
    folder = repo / "solutions"
    return sorted(
        p.name
        for p in (folder.iterdir() if folder.is_dir() else [])
        if p.is_dir() and re.fullmatch(r"\d\d-\w+", p.name)
    )


ASSIGNMENTS = assignments()

# An equation label is cited in the code as ``eq. (label)``, or bare as ``(label)`` in a comment
# beside the line that implements it. A bare ``(word-word)`` in the code is taken for a label
# unless it is one of these ordinary hyphenated words.
NOT_LABELS = {
    "add-one",
    "encoder-decoder",
    "maximum-likelihood",
    "non-empty",
    "one-hot",
    "top-p",
}

# Chapters being written, whose missing pieces are reported as expected failures (xfail, listed by
# `pytest -ra`) instead of failing the suite: {assignment: why}. A chapter leaves this list when it
# is complete; the test fails if a listed chapter lacks nothing, so the list cannot go stale.
PENDING: dict[str, str] = {}


def toc_pages(repo: Path = REPO) -> list[str]:
    """The pages of ``_toc.yml`` in book order, as paths without suffix (``book/ngrams``)."""
    toc = yaml.safe_load((repo / "_toc.yml").read_text())
    pages = [toc["root"]]

    def walk(entries: list[dict] | None) -> None:
        for entry in entries or []:
            if "file" in entry:
                pages.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    walk(toc.get("chapters"))
    for part in toc.get("parts") or []:
        walk(part.get("chapters"))
    return [str(Path(page).with_suffix("")) for page in pages]


def checks_topic(assignment: str, repo: Path = REPO) -> str | None:
    """The topic whose checks the assignment's graded test cells call (``nlpcourse.checks.X``)."""
    notebooks = sorted((repo / "solutions" / assignment).glob("*.ipynb"))
    if len(notebooks) != 1:
        return None
    nb = nbformat.read(notebooks[0], 4)
    topics = {
        m.group(1)
        for cell in nb.cells
        if cell.metadata.get("nbgrader", {}).get("grade")
        for m in re.finditer(r"nlpcourse\.checks\.(\w+)", cell.source)
    }
    return topics.pop() if len(topics) == 1 else None


def readme_exercise_rows(repo: Path = REPO) -> dict[str, str]:
    """{assignment: row} for the rows of the README's exercise table."""
    rows = {}
    for line in (repo / "README.md").read_text().splitlines():
        m = re.match(r"\|\s*`exercises/(\d\d-\w+)/[\w-]+\.ipynb`\s*\|", line)
        if m:
            rows[m.group(1)] = line
    return rows


def chapters(repo: Path = REPO) -> dict[str, str | None]:
    """{name: its assignment ``NN-name``, or None if it has none yet} for every chapter that any of
    its pieces declares: a page of ``book/``, an entry of ``_toc.yml``, a folder of
    ``solutions/``, a row of the README's exercise table."""
    found: dict[str, str | None] = {}
    for assignment in [*assignments(repo), *readme_exercise_rows(repo)]:
        found[assignment.split("-", 1)[1]] = assignment
    pages = [md.stem for md in (repo / "book").glob("*.md")]
    pages += [p.removeprefix("book/") for p in toc_pages(repo) if p.startswith("book/")]
    for name in pages:
        if name not in MATTER:
            found.setdefault(name, None)
    return found


def graded_parts(notebook: Path) -> list[str]:
    """The parts of a source notebook as ``tests/test_exercises.py`` counts them: the grade_ids of
    the solution cells that a graded test cell follows."""
    nb = nbformat.read(notebook, 4)
    parts, part = [], None
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            part = meta["grade_id"]
        if meta.get("grade") and part is not None and part not in parts:
            parts.append(part)
    return parts


def missing_for(chapter: str, repo: Path = REPO) -> list[str]:
    """What ``chapter`` (its name, or its assignment ``NN-name``) lacks, one line per piece."""
    name = chapter.split("-", 1)[1] if re.fullmatch(r"\d\d-\w+", chapter) else chapter
    assignment = chapter if chapter != name else chapters(repo).get(name)
    if assignment is None:
        return [
            f"the source notebook solutions/NN-{name}/{name}.ipynb, NN its chapter number "
            f'(`python -m nlpcourse.scaffold NN {name} "Title" part ...` writes every piece '
            "that does not exist yet)"
        ] + missing_pieces(name, name, repo)
    return missing_pieces(assignment, name, repo)


def missing_pieces(assignment: str, name: str, repo: Path) -> list[str]:
    """What the chapter lacks; ``assignment`` is ``NN-name``, or ``name`` if there is none."""
    number = assignment.split("-", 1)[0] if assignment != name else "NN"
    released = f"{number}-{name}"  # the assignment's folder name, NN- until it has a number
    missing = []

    def need(path: str, what: str) -> bool:
        if not (repo / path).is_file():
            missing.append(f"{what}: {path}")
            return False
        return True

    folder = repo / "solutions" / assignment
    notebooks = [p.name for p in folder.glob("*.ipynb")] if assignment != name else []
    if assignment != name and notebooks != [f"{name}.ipynb"]:
        missing.append(
            f"the source notebook: solutions/{assignment}/{name}.ipynb alone (found {notebooks})"
        )
    if notebooks == [f"{name}.ipynb"]:
        parts = graded_parts(folder / f"{name}.ipynb")
        if len(parts) < MIN_PARTS:
            missing.append(
                f"at least {MIN_PARTS} graded parts in solutions/{assignment}/{name}.ipynb "
                f"(tests/test_exercises.py asserts it); it has {len(parts)}: {parts}"
            )
    need(
        f"exercises/{released}/{name}.ipynb",
        "the student notebook generated by `nbgrader generate_assignment`",
    )
    if need(f"book/{name}.md", "the chapter page"):
        if f"book/{name}" not in toc_pages(repo):
            missing.append(f"an entry `- file: book/{name}` in _toc.yml")
    shown = [page for page in toc_pages(repo) if page.startswith("exercises/")]
    if shown and f"exercises/{released}/{name}" not in shown:
        missing.append(
            f"the student notebook in _toc.yml, `- file: exercises/{released}/{name}` under "
            "book/exercises, as the other exercises are"
        )
    topic = checks_topic(assignment, repo) if notebooks else name
    if topic is None:
        missing.append(
            "graded test cells that call the checks of one topic, `nlpcourse.checks.<topic>`"
        )
    else:
        need(f"nlpcourse/{topic}.py", "the package module")
        need(f"nlpcourse/checks/{topic}.py", "the exercise checks")
        need(f"tests/test_{topic}.py", "the tests of the package module against oracles")
        need(f"tests/test_checks_{topic}.py", "the tests of the checks")
        if need(f"benchmarks/{topic}.py", "the benchmark"):
            bench_readme = (repo / "benchmarks" / "README.md").read_text()
            if not re.search(rf"^#+ .*`benchmarks/{topic}\.py`", bench_readme, re.M):
                missing.append(
                    f"a section of benchmarks/README.md headed with `benchmarks/{topic}.py` "
                    "and the figures it printed"
                )
    if assignment not in readme_exercise_rows(repo):
        missing.append(
            f"a row in the README's exercise table: | `exercises/{released}/{name}.ipynb` | "
            f"{number.lstrip('0') or 'N'}, <chapter title> | <what you write> |"
        )
    return missing


@pytest.mark.parametrize("chapter", sorted(chapters()))
def test_chapter_checklist(chapter):
    missing = missing_for(chapter)
    assignment = chapters()[chapter] or chapter
    message = (
        f"the chapter {assignment} is incomplete (see the checklist in "
        "CONTRIBUTING.md); it lacks\n  - " + "\n  - ".join(missing)
    )
    if assignment in PENDING:
        assert missing, f"{assignment} is complete: take it off PENDING in tests/test_structure.py"
        pytest.xfail(f"{PENDING[assignment]}: {message}")
    assert not missing, message


def pending_topics() -> dict[str, str]:
    """{topic: why} for the chapters in PENDING, and {book page name: why}."""
    topics = {}
    for assignment, why in PENDING.items():
        topics[assignment.split("-", 1)[1]] = why
        topic = checks_topic(assignment) if (REPO / "solutions" / assignment).is_dir() else None
        if topic:
            topics[topic] = why
    return topics


def make_chapter(repo: Path, number: str, name: str, topic: str, parts: int = MIN_PARTS) -> None:
    """Every piece of the checklist for one chapter, as empty stand-ins, in a scratch repo."""
    nb = nbformat.v4.new_notebook()
    for part in "abcdefg"[:parts]:
        nb.cells.append(nbformat.v4.new_code_cell(f"def {part}(): ..."))
        nb.cells[-1].metadata["nbgrader"] = {"solution": True, "grade_id": part}
        nb.cells.append(nbformat.v4.new_code_cell(f"nlpcourse.checks.{topic}.check_{part}({part})"))
        nb.cells[-1].metadata["nbgrader"] = {"grade": True, "grade_id": f"test_{part}", "points": 1}
    files = {
        f"exercises/{number}-{name}/{name}.ipynb": "",
        f"book/{name}.md": "",
        f"nlpcourse/{topic}.py": "",
        f"nlpcourse/checks/{topic}.py": "",
        f"tests/test_{topic}.py": "",
        f"tests/test_checks_{topic}.py": "",
        f"benchmarks/{topic}.py": "",
    }
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    (repo / "solutions" / f"{number}-{name}").mkdir(parents=True)
    nbformat.write(nb, repo / "solutions" / f"{number}-{name}" / f"{name}.ipynb")
    with open(repo / "_toc.yml", "a") as toc:
        toc.write(f"  - file: book/{name}\n")
        toc.write("  - file: book/exercises\n    sections:\n")
        toc.write(f"      - file: exercises/{number}-{name}/{name}\n")
    with open(repo / "benchmarks" / "README.md", "a") as bench:
        bench.write(f"## {name}: `benchmarks/{topic}.py`\n")
    with open(repo / "README.md", "a") as readme:
        readme.write(f"| `exercises/{number}-{name}/{name}.ipynb` | {int(number)}, {name} | x |\n")


def empty_repo(root):
    """A repository with the files a chapter adds entries to, and no chapter yet."""
    (root / "book").mkdir()
    (root / "benchmarks").mkdir()
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n")
    (root / "benchmarks" / "README.md").write_text("# Benchmarks\n")
    (root / "README.md").write_text("| exercise | chapter | what you write |\n|---|---|---|\n")


def test_checklist_passes_a_complete_chapter_and_names_what_is_missing(tmp_path):
    empty_repo(tmp_path)
    make_chapter(tmp_path, "07", "tagging", "crf")
    assert missing_for("07-tagging", tmp_path) == []
    # take away the chapter's toc entry, the tests of its checks and its benchmark section
    toc = (tmp_path / "_toc.yml").read_text()
    (tmp_path / "_toc.yml").write_text(toc.replace("  - file: book/tagging\n", ""))
    (tmp_path / "tests" / "test_checks_crf.py").unlink()
    (tmp_path / "benchmarks" / "README.md").write_text("# Benchmarks\n")
    missing = missing_for("07-tagging", tmp_path)
    assert len(missing) == 3, missing
    assert "- file: book/tagging" in missing[0]
    assert "tests/test_checks_crf.py" in missing[1]
    assert "`benchmarks/crf.py`" in missing[2]


def test_checklist_starts_from_the_page_and_counts_the_parts(tmp_path):
    empty_repo(tmp_path)
    for matter in MATTER:
        (tmp_path / "book" / f"{matter}.md").write_text("")
    (tmp_path / "book" / "embeddings.md").write_text("")  # the first file of a new chapter
    assert sorted(chapters(tmp_path)) == ["embeddings"]
    missing = missing_for("embeddings", tmp_path)
    assert "solutions/NN-embeddings/embeddings.ipynb" in missing[0]
    assert any("exercises/NN-embeddings/embeddings.ipynb" in line for line in missing)
    assert any("- file: book/embeddings" in line for line in missing)
    assert any("nlpcourse/embeddings.py" in line for line in missing)
    assert any("`exercises/NN-embeddings/embeddings.ipynb`" in line for line in missing)
    # an entry of _toc.yml alone declares a chapter too
    with open(tmp_path / "_toc.yml", "a") as toc:
        toc.write("  - file: book/tagging\n")
    assert sorted(chapters(tmp_path)) == ["embeddings", "tagging"]
    assert "the chapter page: book/tagging.md" in missing_for("tagging", tmp_path)
    # an exercise of one part is named before nbgrader runs
    make_chapter(tmp_path, "08", "parsers", "parsers", parts=1)
    assert chapters(tmp_path)["parsers"] == "08-parsers"
    (few,) = missing_for("parsers", tmp_path)
    assert "at least 2 graded parts" in few


def test_an_exercise_of_two_parts_is_complete(tmp_path):
    """Two parts are enough (MIN_PARTS says why: one part alone must differ from the whole); the
    minimum is read from one place, by this test, the scaffold and tests/test_exercises.py."""
    empty_repo(tmp_path)
    make_chapter(tmp_path, "07", "tagging", "crf", parts=2)
    assert missing_for("07-tagging", tmp_path) == []
    exercises = (REPO / "tests" / "test_exercises.py").read_text()
    assert "MIN_PARTS" in exercises and not re.search(r"len\(points\) >= \d", exercises)


def scaffold_todos(repo: Path = REPO) -> list[str]:
    """``path:line`` of every SCAFFOLD-TODO left in the pieces of the chapters."""
    found = []
    folders = ["book", "nlpcourse", "tests", "benchmarks", "solutions"]
    for path in sorted(p for folder in folders for p in (repo / folder).rglob("*") if p.is_file()):
        if path.suffix not in {".md", ".py", ".ipynb"} or path == Path(__file__):
            continue
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if TODO in line and "scaffold" not in path.stem:
                found.append(f"{path.relative_to(repo)}:{lineno}")
    found += [
        f"README.md:{n}" for n, line in enumerate(_lines(repo / "README.md"), 1) if TODO in line
    ]
    found += [
        f"benchmarks/README.md:{n}"
        for n, line in enumerate(_lines(repo / "benchmarks" / "README.md"), 1)
        if TODO in line
    ]
    return found


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.is_file() else []


def test_no_scaffold_todo_left():
    """The scaffold's stubs count as present for the checklist; what is left to write in them is
    listed here as an expected failure (the stub tests fail on their own)."""
    todos = scaffold_todos()
    if todos:
        pytest.xfail(f"{len(todos)} {TODO} left to write:\n  " + "\n  ".join(todos))


def test_readme_exercise_table_matches_solutions():
    rows = readme_exercise_rows()
    extra = sorted(set(rows) - set(ASSIGNMENTS))
    assert not extra, f"the README's exercise table lists assignments with no solutions/: {extra}"
    for assignment, row in rows.items():
        name = assignment.split("-", 1)[1]
        assert f"`exercises/{assignment}/{name}.ipynb`" in row, row
        chapter = re.match(r"\|[^|]*\|\s*(\d+),", row)
        assert chapter and int(chapter.group(1)) == int(assignment[:2]), (
            f"the README row of {assignment} should give its chapter number "
            f"{int(assignment[:2])}: {row}"
        )
    assert list(rows) == sorted(rows), "the README's exercise table should be in chapter order"


def test_chapters_are_in_toc_in_number_order():
    pages = toc_pages()
    in_toc = [a for a in ASSIGNMENTS if f"book/{a.split('-', 1)[1]}" in pages]
    positions = [pages.index(f"book/{a.split('-', 1)[1]}") for a in in_toc]
    assert positions == sorted(positions), (
        f"_toc.yml should list the chapters in the order of their numbers: {in_toc}"
    )


def test_toc_and_book_pages_agree():
    pages = toc_pages()
    for page in pages:
        assert any((REPO / f"{page}{suffix}").is_file() for suffix in (".md", ".ipynb")), (
            f"_toc.yml lists {page}, which has no .md or .ipynb file"
        )
    outside = [f"book/{md.stem}" for md in BOOK.glob("*.md") if f"book/{md.stem}" not in pages]
    pending = pending_topics()
    if outside and all(page.removeprefix("book/") in pending for page in outside):
        pytest.xfail(f"pages of chapters being written are not in _toc.yml yet: {outside}")
    assert not outside, f"{outside} are not in _toc.yml (add them, or remove the files)"


def book_labels() -> set[str]:
    """Equation labels the book defines: ``$$ ... $$ (label)`` and ``:label:`` of a math block."""
    labels = set()
    for md in BOOK.glob("*.md"):
        text = md.read_text()
        labels.update(re.findall(r"\$\$\s*\(([\w-]+)\)[ \t]*$", text, re.M))
        labels.update(re.findall(r"^:label:\s*([\w-]+)\s*$", text, re.M))
    return labels


def cited_labels(text: str) -> set[str]:
    """Equation labels a piece of code names: ``eq. (label)``, ``eq. label``, ``eqs. (a) and (b)``,
    and any bare ``(word-word)`` that is not an ordinary hyphenated word."""
    label = r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*"
    cited = set()
    more = rf"((?:(?:\s*,\s*|\s+and\s+|\s+or\s+)\({label}\))*)"
    for m in re.finditer(rf"\beqs?\.\s*\(?({label})\)?" + more, text, re.I):
        cited.add(m.group(1))
        cited.update(re.findall(rf"\(({label})\)", m.group(2)))
    for m in re.finditer(r"\(([a-z][a-z0-9]*(?:-[a-z][a-z0-9]*)+)\)", text):
        if m.group(1) not in NOT_LABELS:
            cited.add(m.group(1))
    return cited


def test_equation_labels_named_in_the_code_exist_in_the_book():
    labels = book_labels()
    assert labels, "found no equation labels in book/*.md: has the label syntax changed?"
    unknown, pending = [], pending_topics()
    for path in sorted((REPO / "nlpcourse").rglob("*.py")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            for label in sorted(cited_labels(line) - labels):
                unknown.append((path.stem, f"{path.relative_to(REPO)}:{lineno}: ({label})"))
    message = (
        "the code names equation labels that no page of the book defines (define them with "
        "`$$ ... $$ (label)`, fix the name, or, for an ordinary hyphenated word, add it to "
        "NOT_LABELS in tests/test_structure.py):\n  " + "\n  ".join(where for _, where in unknown)
    )
    if unknown and all(module in pending for module, _ in unknown):
        pytest.xfail(f"modules of chapters being written: {message}")
    assert not unknown, message


def test_cited_labels_are_recognised():
    """The label finder itself, on the forms the code uses."""
    assert cited_labels("# (lstm-c), (B, H)") == {"lstm-c"}
    assert cited_labels("eq. (hmm-viterbi) and (hmm-backptr)") == {"hmm-viterbi", "hmm-backptr"}
    assert cited_labels("(eq. hmm-gamma) and") == {"hmm-gamma"}
    assert cited_labels("Eq. (wer)") == {"wer"}
    assert cited_labels("Rabiner eq. 40, SLP3 eq. 3.40-3.41, (m-1)-grams (one-hot)") == set()


def test_eq_references_and_citations_of_the_book_are_defined():
    labels = book_labels()
    bib = (BOOK / "references.bib").read_text()
    keys = set(re.findall(r"^@\w+\{\s*([^,\s]+)\s*,", bib, re.M))
    problems = []
    for md in sorted(BOOK.glob("*.md")):
        text = md.read_text()
        for ref in re.findall(r"\{eq\}`([^`]+)`", text):
            if ref not in labels:
                problems.append(f"{md.name}: {{eq}}`{ref}` names no equation label")
        for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", text):
            for key in group.split(","):
                if key.strip() not in keys:
                    problems.append(
                        f"{md.name}: citation key {key.strip()!r} not in references.bib"
                    )
    pending = pending_topics()
    if problems and all(problem.split(".md:")[0] in pending for problem in problems):
        pytest.xfail("pages of chapters being written:\n" + "\n".join(problems))
    assert not problems, "\n".join(problems)


def test_chapters_use_the_shared_book_helper():
    """``keep`` lives in ``nlpcourse.book``; a chapter imports it instead of redefining it."""
    for md in sorted(BOOK.glob("*.md")):
        assert not re.search(r"^def keep\(", md.read_text(), re.M), (
            f"{md.name} defines its own keep(): use `from nlpcourse.book import keep`"
        )


# ---------------------------------------------- the layout, as CONTRIBUTING and the README give it


def layout_table(repo: Path = REPO) -> str:
    """The rows of CONTRIBUTING.md's layout table (the one headed "where | what | who reads it")."""
    lines = (repo / "CONTRIBUTING.md").read_text().splitlines()
    start = lines.index("| where | what | who reads it |")
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return "\n".join(rows)


def tracked_files(repo: Path = REPO) -> list[str]:
    import subprocess

    out = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_contributing_layout_names_every_module_and_test_file():
    """Every Python file git tracks in nlpcourse/, autograder/, tests/ and benchmarks/ (their top
    level) is named in CONTRIBUTING's layout table, by its name, or, for a chapter's own module,
    test or benchmark, by the ``<topic>`` rows (the topics: the checks modules' names)."""
    named = {name.rsplit("/", 1)[-1] for name in re.findall(r"`([^`]+)`", layout_table())}
    topics = {p.stem for p in (REPO / "nlpcourse" / "checks").glob("*.py")} - {"__init__", "core"}
    missing = []
    for path in tracked_files():
        folder, _, name = path.partition("/")
        if folder not in ("nlpcourse", "autograder", "tests", "benchmarks") or "/" in name:
            continue
        stem = name.removesuffix(".py")
        if not name.endswith(".py") or name in named:
            continue
        if folder in ("nlpcourse", "benchmarks") and stem in topics:
            continue
        if (
            folder == "tests"
            and {stem.removeprefix("test_"), stem.removeprefix("test_checks_")} & topics
        ):
            continue
        missing.append(path)
    assert not missing, f"CONTRIBUTING.md's layout table does not name: {missing}"


def test_readme_layout_names_every_module_of_the_package():
    """The README's Layout lists the package's modules by name, in parentheses: each module is
    there, and every name listed is a module (or the ``checks/`` package), so a module removed or
    renamed leaves no stale name behind."""
    text = (REPO / "README.md").read_text()
    layout = text[text.index("## Layout") :]
    block = layout[layout.index("nlpcourse/") : layout.index("solutions/")]
    named = {
        name.strip() for group in re.findall(r"\(([^)]*)\)", block) for name in group.split(",")
    }
    modules = {p.stem for p in (REPO / "nlpcourse").glob("*.py")} - {"__init__"}
    assert modules <= named, f"the README's Layout does not name {sorted(modules - named)}"
    stale = named - modules - {"checks/"}
    assert not stale, f"the README's Layout names {sorted(stale)}, which nlpcourse/ does not have"


NUMBER_WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()


def test_readme_lists_the_chapters_of_the_toc():
    """The README's opening lists the numbered chapters of ``_toc.yml`` by their titles, in book
    order, and counts them in words ("Each of the six chapters")."""
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    numbered = [
        entry["file"]
        for part in toc.get("parts", [])
        if part.get("numbered")
        for entry in part["chapters"]
    ]
    titles = [chapter_title(REPO / f"{page}.md") for page in numbered]
    text = " ".join((REPO / "README.md").read_text().split())  # lines joined
    listing = re.search(r"Chapters: (.*?)\. Each of the (\w+) chapters has", text)
    assert listing, "the README's opening should say 'Chapters: <title> · <title> ... . Each of "
    assert listing.group(1).split(" · ") == titles, (
        f"the README's chapter list should be the titles of _toc.yml's chapters: {titles}"
    )
    assert listing.group(2) == NUMBER_WORDS[len(titles)]
