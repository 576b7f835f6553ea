"""A small Sphinx extension for the book's build: what Jupyter Book 1 does not do on its own.

Loaded from ``_config.yml`` (``sphinx: local_extensions``). It

- serves MathJax from the built site: the pinned ``sphinx-mathjax-offline`` package ships MathJax
  3.2.2, which is copied into ``_build/html/_static/mathjax`` at the end of every build (even one
  that rebuilt nothing), so every formula renders with no network;
- writes each page's scripts once: ``sphinx-thebe`` registers its configuration script again on
  every read of the environment, and a page that declares ``const THEBE_JS_URL`` twice stops
  with a JavaScript error;
- labels the bibliography the way the text cites it ("Bengio et al., 2003" instead of
  ``[BDVJ03]``), sorted by author;
- copies each chapter's executed notebook (``_build/jupyter_execute``) next to the pages as
  ``_build/html/notebooks/<chapter>.ipynb``, so a reader can download and run a chapter, and offers
  it as ``.ipynb`` in the page's download menu, beside the ``.md`` source;
- keeps the book's bookkeeping out of the reader's way: in the code shown on a page, the lines that
  only check or record a result (``assert ...`` and ``keep("name", value)``, which glues a number
  into the prose) move into a collapsed "show the checks" block under the cell's code. The cell
  runs unchanged (the notebook and its download keep every line); only the shown source is split;
- executes again every chapter whose last execution failed: Sphinx re-reads only the pages whose
  source changed, so a chapter that failed once (a cell error, or the cell timeout on a busy
  machine) would keep its failure, with no successful execution in the cache, until its code
  changed or someone cleared the cache by hand. Before reading, every executed page without a
  successful execution of its current code in the cache is marked out of date, and myst-nb
  executes it again;
- marks the figures of many small heat maps (``plot.attention_heads``, ``plot.masks``,
  ``plot.heads_beside_single``) as wide, so that on a phone they keep a readable size and scroll
  sideways inside their box (``book.css``) instead of shrinking to a blur.
"""

from __future__ import annotations

import ast
import importlib
import re
import shutil
from pathlib import Path, PurePosixPath

from docutils import nodes
from myst_nb.core.read import is_myst_markdown_notebook
from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from sphinx.application import Sphinx
from sphinx.util.fileutil import copy_asset

from nlpcourse.book import cached_execution


def mathjax_source() -> Path:
    """The MathJax 3 files of the pinned ``sphinx-mathjax-offline`` wheel."""
    module = importlib.import_module("sphinx-mathjax-offline")  # the wheel's module has a dash
    return Path(module.__file__).parent / "static" / "mathjax"


def copy_mathjax(app: Sphinx, exc: Exception | None) -> None:
    if app.builder.format == "html":
        copy_asset(str(mathjax_source()), str(Path(app.outdir) / "_static" / "mathjax"))


def copy_notebooks(app: Sphinx, exc: Exception | None) -> None:
    """The executed chapter notebooks as downloads: ``_build/html/notebooks/<name>.ipynb``."""
    executed = Path(app.outdir).parent / "jupyter_execute" / "book"
    if app.builder.format != "html" or not executed.is_dir():
        return
    target = Path(app.outdir) / "notebooks"
    target.mkdir(exist_ok=True)
    for notebook in executed.glob("*.ipynb"):
        shutil.copy2(notebook, target / notebook.name)


def offer_notebook(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Offer a chapter's executed notebook in the page's download menu, beside its ``.md``.

    sphinx-book-theme adds an ``.ipynb`` entry when ``context["ipynb_source"]`` names a file in
    ``_sources`` (its launch buttons set it only when a Binder or JupyterHub is configured), so the
    executed notebook is copied there and named, before the theme builds its buttons.
    """
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if app.builder.format != "html" or not executed.is_file() or context.get("ipynb_source"):
        return
    if Path(app.env.doc2path(pagename)).suffix == ".ipynb":
        return  # an exercise page: its source is the notebook, which the menu offers already
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def executed_here(app: Sphinx, path: Path) -> bool:
    """Whether myst-nb executes ``path`` through the cache: a notebook outside the exclude patterns
    (matched as myst-nb matches them), in ``execute_notebooks: cache`` mode."""
    config = app.env.mystnb_config  # myst-nb's settings, resolved when the builder started
    if config.execution_mode != "cache" or path.suffix not in (".md", ".ipynb"):
        return False
    if path.suffix == ".md" and not is_myst_markdown_notebook(path.read_text()):
        return False
    relative = PurePosixPath(path.relative_to(app.srcdir).as_posix())
    return not any(relative.match(pattern) for pattern in config.execution_excludepatterns)


def failed_executions(app: Sphinx, env, added: set, changed: set, removed: set) -> list[str]:
    """The pages to read again although their source did not change: those without a successful
    execution of their current code in the execution cache (their last execution failed)."""
    cache = Path(app.env.mystnb_config.execution_cache_path)  # myst-nb's: _build/.jupyter_cache
    again = []
    for docname in sorted(env.found_docs - added - changed - removed):
        path = Path(env.doc2path(docname))
        if executed_here(app, path) and cached_execution(cache, path) is None:
            again.append(docname)
    return again


def is_check(statement: ast.stmt) -> bool:
    """An ``assert``, a bare ``keep(...)`` call, or a loop or ``if`` made only of them."""
    if isinstance(statement, ast.Assert):
        return True
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        function = statement.value.func
        return isinstance(function, ast.Name) and function.id == "keep"
    if isinstance(statement, (ast.For, ast.If, ast.With)) and not getattr(statement, "orelse", []):
        return all(is_check(inner) for inner in statement.body)
    return False


def check_lines(source: str) -> tuple[set[int], set[int]]:
    """The 0-based line numbers of ``source`` that belong to checks (see :func:`is_check`), with
    the comment lines directly above a check; and the header lines (``for ...:``) of the blocks a
    nested check sits in, shown above it for context. Empty when the source is not Python."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(), set()
    lines: set[int] = set()
    context: set[int] = set()

    def visit(statements: list[ast.stmt], headers: list[int]) -> None:
        for statement in statements:
            if is_check(statement):
                lines.update(range(statement.lineno - 1, statement.end_lineno or statement.lineno))
                context.update(headers)
                continue
            for field in ("body", "handlers", "orelse", "finalbody"):
                inner = getattr(statement, field, []) or []
                if inner:
                    header = range(statement.lineno - 1, inner[0].lineno - 1)
                    visit(inner, headers + list(header))

    visit(tree.body, [])
    text = source.splitlines()
    for number in sorted(lines, reverse=True):  # a comment that introduces a check goes with it
        above = number - 1
        while above >= 0 and above not in lines and text[above].lstrip().startswith("#"):
            lines.add(above)
            above -= 1
    return lines, context - lines


def trim_blank(lines: list[str]) -> list[str]:
    """``lines`` without blank lines at the start and the end, and without runs of blank lines."""
    kept: list[str] = []
    for line in lines:
        if line.strip() or (kept and kept[-1].strip()):
            kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    return kept


def copy_code(block: nodes.literal_block, lines: list[str]) -> nodes.literal_block:
    """A copy of a code block with other lines. Its ``rawsource`` must equal its text, or Sphinx
    takes it for a parsed literal and does not highlight it."""
    code = block.deepcopy()
    code.rawsource = "\n".join(lines)
    code.children = [nodes.Text(code.rawsource)]
    return code


def fold_checks(app: Sphinx, doctree: nodes.document) -> None:
    """Move each code cell's checks into a collapsed "show the checks" block under its code, on
    the chapters (``book/``); the exercise notebooks are shown as a student receives them."""
    if not app.env.docname.startswith("book/"):
        return
    for cell_input in list(doctree.findall(nodes.container)):
        if cell_input.get("nb_element") != "cell_code_source":
            continue
        blocks = [child for child in cell_input.children if isinstance(child, nodes.literal_block)]
        if len(blocks) != 1:
            continue
        block = blocks[0]
        source = block.astext()
        checks, context = check_lines(source)
        if not checks:
            continue
        text = source.splitlines()
        shown = trim_blank([line for i, line in enumerate(text) if i not in checks])
        hidden = trim_blank([line for i, line in enumerate(text) if i in checks | context])
        try:
            ast.parse("\n".join(shown))  # a block left with no body: show the cell as it is
        except SyntaxError:
            continue
        index = cell_input.index(block)
        cell_input.remove(block)
        parts: list[nodes.Node] = []
        if shown:
            code = copy_code(block, shown)
            parts.append(code)
        count = len([i for i in checks if text[i].strip()])
        summary = f"show the checks ({count} line{'s' if count > 1 else ''})"
        parts.append(
            nodes.raw(
                "",
                f'<details class="book-checks"><summary>{summary}</summary>',
                format="html",
            )
        )
        checked = copy_code(block, hidden)
        checked["ids"] = []
        parts.append(checked)
        parts.append(nodes.raw("", "</details>", format="html"))
        for offset, part in enumerate(parts):
            cell_input.insert(index + offset, part)


# figures with many small panels: on a phone, shown at a readable width inside a scrolling box
WIDE_FIGURES = re.compile(r"\bplot\.(attention_heads|masks|heads_beside_single)\(")


def mark_wide_figures(app: Sphinx, doctree: nodes.document) -> None:
    """Give the outputs of a cell that draws many heat maps the class ``book-wide-figure``."""
    for cell in list(doctree.findall(nodes.container)):
        if cell.get("nb_element") != "cell_code":
            continue
        source = "".join(
            block.astext()
            for block in cell.findall(nodes.literal_block)
            if block.parent.get("nb_element") == "cell_code_source"
        )
        if WIDE_FIGURES.search(source):
            for output in cell.findall(nodes.container):
                if output.get("nb_element") == "cell_code_output":
                    output["classes"].append("book-wide-figure")


def unique_scripts(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Drop a script that is already on the page (same file, same inline body)."""
    seen = set()
    scripts = []
    for script in context.get("script_files", []):
        key = (script.filename or "", script.attributes.get("body", ""))  # None and "" alike
        if key not in seen:
            seen.add(key)
            scripts.append(script)
    context["script_files"] = scripts


def last_names(persons) -> str:
    names = [Text.from_latex(" ".join(p.last_names)).render_as("text") for p in persons]
    if not names:
        return ""
    if len(names) == 1:
        return names[0]
    if len(names) == 2:
        return f"{names[0]} and {names[1]}"
    return f"{names[0]} et al."


class AuthorYearLabels(BaseLabelStyle):
    """A reference's label is its citation: "Kneser and Ney, 1995", "Bengio et al., 2003"."""

    def format_labels(self, sorted_entries):
        labels = []
        for entry in sorted_entries:
            persons = entry.persons.get("author") or entry.persons.get("editor") or []
            who = last_names(persons) or entry.fields.get("organization") or entry.key
            labels.append(f"{who}, {entry.fields.get('year', 'n.d.')}")
        seen: dict[str, int] = {}
        for label in labels:  # two references with one label: "Bengio et al., 2003a", "...b"
            if labels.count(label) > 1:
                seen[label] = seen.get(label, 0) + 1
                label += "abcdefghijklmnopqrstuvwxyz"[seen[label] - 1]
            yield label


class AuthorYearStyle(PlainStyle):
    """pybtex's plain style (sorted by author, year, title) with author-year labels."""

    default_label_style = "authoryear"


register_plugin("pybtex.style.labels", "authoryear", AuthorYearLabels)
register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)


def setup(app: Sphinx) -> dict:
    app.config.mathjax_path = "mathjax/tex-chtml.js"
    app.connect("env-get-outdated", failed_executions)
    app.connect("build-finished", copy_mathjax)
    app.connect("build-finished", copy_notebooks)
    app.connect("html-page-context", unique_scripts, priority=900)  # after the themes' handlers
    app.connect("html-page-context", offer_notebook, priority=500)  # before the theme's buttons
    app.connect("doctree-read", mark_wide_figures)  # before the checks leave the cell's source
    app.connect("doctree-read", fold_checks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
