"""The one place that makes what a student wrote inert wherever the course shows it (issue 40).

A submission is hostile text: a markdown cell, an output, a file name or an exception message can
carry markup, script, terminal control sequences or a spreadsheet formula. Each writer of the
course passes student text through one function of this module before showing it:

* :func:`html` (and :func:`markdown_html`, :func:`inert_notebook`): HTML for formgrader's pages and
  the feedback, cleaned by `nh3 <https://nh3.readthedocs.io>`_ (the Rust sanitiser *ammonia*, a
  maintained allow-list sanitiser, not a hand-written filter): no script, no event handler, no
  ``style``, no frame, no form, links only to ``http(s):``/``mailto:``, images only from ``data:``
  URLs of image types (an SVG shown as an ``<img>`` cannot run script);
* :func:`for_terminal`: one line for the instructor's terminal or a log, with control characters
  (ESC, so CSI and OSC sequences; CR; BEL; newlines), Unicode line separators and direction
  overrides, and lone surrogates shown as visible escapes (``\\x1b``, ``\\u202e``, ``\\udcff``),
  and the length bounded;
* :func:`for_csv`: a CSV field that always encodes as UTF-8 (lone surrogates escaped) and that a
  spreadsheet does not read as a formula (a leading ``= + - @``, tab or CR gets a ``'`` before it,
  as OWASP recommends).

This module needs only the standard library and ``nh3``, so that both ``autograder.inert`` (the
class grader) and ``inert`` (nbgrader's configuration, loaded from ``autograder/``) import it.
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from typing import Any

import nh3

# ------------------------------------------------------------------------------ plain text

TERMINAL_LIMIT = 2_000  # characters of one student text kept in a terminal line or a log
# DEL and C1 controls, Unicode line and paragraph separators, direction embeddings, overrides and
# isolates, lone surrogates: never shown as they are
_UNSAFE = r"\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_SHOWN = re.compile(rf"[\x00-\x1f{_UNSAFE}]")  # on one line: every C0 control too


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    """``\\n``, ``\\r``, ``\\t``; ``\\x1b`` for another code point below 256, ``\\u202e`` for
    the others (lone surrogates included)."""
    if match.group() in _NAMED:
        return _NAMED[match.group()]
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(text: Any, limit: int = TERMINAL_LIMIT) -> str:
    """``text`` as one inert line for a terminal or a log: every control character (newlines,
    tabs, ESC and so every CSI/OSC sequence, CR, BEL, C1 controls), Unicode line and paragraph
    separators, direction overrides and lone surrogates are written as visible escapes, and a text
    longer than ``limit`` characters is cut with a note of how much was left out."""
    text = str(text)
    cut = ""
    if len(text) > limit:
        cut = f" ... ({len(text) - limit:,} more characters)"
        text = text[:limit]
    return _SHOWN.sub(_escape, text) + cut


_TEXT_SHOWN = re.compile(rf"[\x00-\x08\x0b-\x1f{_UNSAFE}]")  # C0 but newline and tab


def for_text(text: Any) -> str:
    """``text`` as lines for a text file the instructor reads (what a student's code printed):
    as :func:`for_terminal`, but newlines and tabs are kept and the length is not bounded (the
    grader bounds output where it captures it)."""
    return _TEXT_SHOWN.sub(_escape, str(text))


_SURROGATE = re.compile(r"[\ud800-\udfff]")
_CSV_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # newline and tab are fine in CSV
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet read a formula


def for_csv(text: Any) -> str:
    """``text`` as a CSV field: lone surrogates (a file name that is not UTF-8, a ``'\\udcff'`` in
    an exception message) and control characters other than newline and tab become visible
    escapes, so the file always encodes as UTF-8; a field that starts like a formula gets a ``'``
    in front, so a spreadsheet shows it as text."""
    text = _CSV_CONTROL.sub(_escape, _SURROGATE.sub(_escape, str(text)))
    if text.startswith(FORMULA_STARTS):
        text = "'" + text
    return text


# ------------------------------------------------------------------------------ HTML

# nh3's defaults (ammonia's allow-list of tags and attributes) plus what notebooks' outputs use,
# with `class` limited to the names pandas and nbconvert give: a student's class names could
# restyle or be picked up by formgrader's own page.
TAGS = nh3.ALLOWED_TAGS | {"tfoot"}
ATTRIBUTES = {
    **{tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()},
    "table": {"border", *nh3.ALLOWED_ATTRIBUTES.get("table", ())},
    "a": {"href", "title"},
    "img": {"src", "alt", "width", "height", "title"},
}
CLASSES = {
    "table": {"dataframe"},
    "a": {"anchor-link"},
    "span": {"math", "ansi-bold"},
    "code": {"language-python"},
}
LINK_SCHEMES = ("http:", "https:", "mailto:")
IMAGE_URL = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml);base64,[A-Za-z0-9+/=\s]*\Z")


def _url_filter(tag: str, attribute: str, value: str) -> str | None:
    """Links go to the web or to an e-mail address, images come from ``data:`` URLs of image
    types (the page makes no request for them, and an SVG shown as an image runs no script)."""
    if attribute == "src":
        return value if IMAGE_URL.match(value.strip()) else None
    if attribute == "href":
        return value if value.strip().lower().startswith(LINK_SCHEMES) else None
    return value


def html(fragment: Any) -> str:
    """``fragment`` (HTML a student's cell or output produced) with everything active removed:
    only the allow-listed tags and attributes stay; ``<script>`` and ``<style>`` go with their
    content; links keep ``http(s):``/``mailto:`` targets and images ``data:`` image URLs only."""
    if isinstance(fragment, bytes):
        fragment = fragment.decode("utf-8", errors="replace")
    return nh3.clean(
        _SURROGATE.sub("\ufffd", str(fragment)),
        tags=TAGS,
        attributes=ATTRIBUTES,
        allowed_classes=CLASSES,
        url_schemes={"http", "https", "mailto", "data"},
        attribute_filter=_url_filter,
        link_rel="noopener noreferrer nofollow",
    )


def escaped(text: Any) -> str:
    """``text`` shown as text in HTML (``<`` ``>`` ``&`` ``"`` ``'`` escaped)."""
    import html as html_module

    return html_module.escape(_SURROGATE.sub("\ufffd", str(text)), quote=True)


def markdown_html(source: str) -> str:
    """Markdown rendered as nbconvert renders a cell, then cleaned by :func:`html`."""
    from nbconvert.filters.markdown import markdown2html_mistune

    return html(markdown2html_mistune(str(source)))


# ------------------------------------------------------------------------------ notebooks

CELL_ID = re.compile(r"[A-Za-z0-9_\-]{1,64}\Z")  # nbformat's pattern for a cell id
SAFE_TOKEN = re.compile(r"[A-Za-z0-9_.\-]{1,200}\Z")  # a grade_id, a kernel name, a cell tag
NBGRADER_KEYS = {  # what nbgrader's templates read of a cell's nbgrader metadata, and its type
    "grade": bool,
    "solution": bool,
    "locked": bool,
    "task": bool,
    "points": (int, float),
    "score": (int, float),
    "schema_version": int,
    "grade_id": str,
    "checksum": str,
    "cell_type": str,
    "comment": str,
}
OUTPUT_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg")


def _token(value: Any) -> str | None:
    return value if isinstance(value, str) and SAFE_TOKEN.match(value) else None


def _nbgrader_metadata(meta: Any) -> dict:
    """The keys nbgrader reads, each of its type; a ``grade_id`` or ``checksum`` that is not a
    plain token (templates put it in an ``id`` attribute) is dropped with the cell's grading."""
    if not isinstance(meta, dict):
        return {}
    kept = {}
    for key, kind in NBGRADER_KEYS.items():
        value = meta.get(key)
        if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            kept[key] = value
    for key in ("grade_id", "checksum", "cell_type"):
        if key in kept and _token(kept[key]) is None:
            return {}
    return kept


def _base64(data: Any) -> str | None:
    """``data`` if it is base64 (what nbformat stores for an image), else None."""
    if not isinstance(data, str):
        return None
    compact = re.sub(r"\s", "", data)
    try:
        base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return None
    return compact


def _output_data(data: Any) -> dict:
    """An output's MIME bundle with only what can be shown inert: text, cleaned HTML (an SVG as
    a ``data:`` image, markdown rendered and cleaned), LaTeX as text for MathJax (which the course
    configures safe), PNG and JPEG as base64. JavaScript, widget views and unknown types go."""
    data = data if isinstance(data, dict) else {}
    kept: dict[str, str] = {}
    text = lambda key: "".join(data[key]) if isinstance(data.get(key), list) else data.get(key)  # noqa: E731
    if isinstance(text("text/plain"), str):
        kept["text/plain"] = text("text/plain")
    if isinstance(text("text/html"), str):
        kept["text/html"] = html(text("text/html"))
    elif isinstance(text("text/markdown"), str):
        kept["text/html"] = markdown_html(text("text/markdown"))
    if isinstance(text("image/svg+xml"), str):
        svg = base64.b64encode(text("image/svg+xml").encode("utf-8", "replace")).decode()
        kept["text/html"] = f'<img src="data:image/svg+xml;base64,{svg}" alt="SVG output">'
    if isinstance(text("text/latex"), str):
        kept["text/latex"] = text("text/latex")
    for image in ("image/png", "image/jpeg"):
        encoded = _base64(data.get(image))
        if encoded is not None:
            kept[image] = encoded
    if not kept:
        kept["text/plain"] = "[output of a type the grader does not show]"
    return kept


def _output(output: Any) -> dict | None:
    """One output with only its inert parts; None when it is not a known output at all."""
    if not isinstance(output, dict):
        return None
    kind = output.get("output_type")
    if kind == "stream":
        name = output.get("name") if output.get("name") in ("stdout", "stderr") else "stdout"
        text = output.get("text", "")
        return {
            "output_type": kind,
            "name": name,
            "text": "".join(text) if isinstance(text, list) else str(text),
        }
    if kind == "error":
        traceback = output.get("traceback")
        traceback = [str(line) for line in traceback] if isinstance(traceback, list) else []
        return {
            "output_type": kind,
            "ename": str(output.get("ename", "")),
            "evalue": str(output.get("evalue", "")),
            "traceback": traceback,
        }
    if kind in ("execute_result", "display_data"):
        new: dict[str, Any] = {
            "output_type": kind,
            "data": _output_data(output.get("data")),
            "metadata": {},
        }
        if kind == "execute_result":
            count = output.get("execution_count")
            new["execution_count"] = (
                count if isinstance(count, int) and not isinstance(count, bool) else None
            )
        return new
    return None


# a 1x1 transparent PNG, in place of an attachment that is not an image (nbconvert refuses to
# render a markdown cell whose attachment is missing)
BLANK_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)
ATTACHMENT_TYPES = ("image/png", "image/jpeg", "image/gif", "image/svg+xml")  # shown as <img>


def _attachments(attachments: Any) -> dict:
    """A markdown cell's attachments: images only (base64, shown as ``<img>``, so an SVG runs no
    script), each other one a blank image under its name."""
    kept = {}
    for name, bundle in (attachments if isinstance(attachments, dict) else {}).items():
        if not isinstance(name, str) or not isinstance(bundle, dict):
            continue
        kept[name] = {"image/png": BLANK_PNG}
        for mime in ATTACHMENT_TYPES:
            encoded = _base64(bundle.get(mime))
            if encoded is not None:
                kept[name] = {mime: encoded}
                break
    return kept


def inert_notebook(nb: Any) -> Any:
    """``nb`` (an nbformat v4 notebook, changed in place and returned) with only what can be shown
    inert: the notebook's metadata cut to its kernel's and language's names; each cell's metadata
    to nbgrader's keys (each of its type) and plain tags; outputs to inert MIME types
    (:func:`_output_data`); attachments to images; raw cells lose their format (a raw cell marked
    ``text/html`` is otherwise written into the page), so they are not shown; execution counts
    to integers.
    Markdown itself stays markdown: the course's templates clean it after rendering
    (:func:`markdown_html`)."""
    from nbformat import from_dict

    old = nb.get("metadata", {}) if isinstance(nb.get("metadata"), dict) else {}
    metadata: dict[str, Any] = {}
    spec = old.get("kernelspec")
    if isinstance(spec, dict) and _token(spec.get("name")):
        metadata["kernelspec"] = {
            "name": spec["name"],
            "display_name": _token(spec.get("display_name")) or spec["name"],
            "language": _token(spec.get("language")) or "python",
        }
    info = old.get("language_info")
    if isinstance(info, dict) and _token(info.get("name")):
        metadata["language_info"] = {"name": info["name"]}
    nb["metadata"] = from_dict(metadata)
    ids: set[str] = set()
    for cell in nb.get("cells", []):
        if "id" in cell:  # nbconvert writes it into an id attribute: a plain, unique token
            if not (isinstance(cell["id"], str) and CELL_ID.match(cell["id"])) or cell["id"] in ids:
                cell["id"] = uuid.uuid4().hex[:8]
            ids.add(cell["id"])
        meta = cell.get("metadata", {}) if isinstance(cell.get("metadata"), dict) else {}
        new_meta: dict[str, Any] = {}
        if "nbgrader" in meta:
            new_meta["nbgrader"] = _nbgrader_metadata(meta["nbgrader"])
            if not new_meta["nbgrader"]:
                del new_meta["nbgrader"]
        tags = meta.get("tags")
        if isinstance(tags, list):
            new_meta["tags"] = [tag for tag in tags if _token(tag)]
        cell["metadata"] = from_dict(new_meta)
        if not isinstance(cell.get("source"), str):
            source = cell.get("source", "")
            cell["source"] = "".join(source) if isinstance(source, list) else str(source)
        if cell.get("cell_type") == "code":
            count = cell.get("execution_count")
            if not (isinstance(count, int) and not isinstance(count, bool)):
                cell["execution_count"] = None
            outputs = [_output(out) for out in cell.get("outputs", []) or []]
            cell["outputs"] = [from_dict(out) for out in outputs if out is not None]
        elif cell.get("cell_type") == "markdown":
            if "attachments" in cell:
                cell["attachments"] = from_dict(_attachments(cell["attachments"]))
        else:  # raw (or unknown): not written into the page
            cell["cell_type"] = "raw"
            cell.pop("attachments", None)
    return nb
