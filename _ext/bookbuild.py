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
  ``_build/html/notebooks/<chapter>.ipynb``, so a reader can download and run a chapter.
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from sphinx.application import Sphinx
from sphinx.util.fileutil import copy_asset


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
    app.connect("build-finished", copy_mathjax)
    app.connect("build-finished", copy_notebooks)
    app.connect("html-page-context", unique_scripts, priority=900)  # after the themes' handlers
    return {"parallel_read_safe": True, "parallel_write_safe": True}
