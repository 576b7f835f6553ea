"""Nothing a student hands in acts for the instructor who reads it (issue 40 §1 and §5's terminal).

* :func:`autograder.inert.for_terminal` and :func:`~autograder.inert.for_csv`, checked against
  Python's own ideas of a printable character, UTF-8 and the ``csv`` module; the class grader's
  summary keeps a flagged student's line whatever their exception message holds.
* The corpus of ``tests/adversarial/markup.py`` (more than 15 payloads: markdown, raw cells,
  attachments, outputs of every MIME type, metadata, a file name, an exception message, a comment)
  is handed in and opened in Chromium, with no network, on formgrader's submission page (graded by
  ``python -m autograder grade``, and as nbgrader's ``autograde`` leaves a notebook: with the
  outputs of the student's code) and in the feedback of ``nbgrader generate_feedback``. The test
  fails if any script of a payload runs (a mark on the page, a console message, a dialog, a
  request to the server), if the page keeps latent script (a ``javascript:`` URL, an event
  handler attribute, a frame, an object, a form) where the notebook is shown, or if the gradebook
  changes.
"""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import services  # noqa: E402
from adversarial import markup  # noqa: E402
from adversarial.notebooks import honest_code, release, replaced  # noqa: E402
from adversarial.notebooks import points as notebook_points  # noqa: E402
from adversarial.notebooks import test_of as cell_grading  # noqa: E402

from autograder import classgrader, inert  # noqa: E402

ASSIGNMENT = "01-ngrams"
TOKEN = "injection-test-token"

# ------------------------------------------------------------------------------ plain text

HOSTILE_TEXTS = [
    "done \udcff",  # a lone surrogate (a file name that is not UTF-8, a raised message)
    "ok\x1b[2K\x1b[1A\rgraded 12/12",  # erase the line, move up, overwrite
    "\x1b]0;title\x07\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\",  # OSC: window title, hyperlink
    "\x9b31m C1 CSI \x85 next line \x00 nul",
    "evil\u202eexe.txt\u2066\u2028\u2029",  # direction override, line separators
    "line one\nline two\ttab",
    '=HYPERLINK("http://x","click")',
    "+1+2",
    "-2+3",
    "@SUM(A1)",
    "\t=1",
    "\r=1",
    "plain text, é and 中文",
]


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
def test_for_terminal_is_one_printable_line(text):
    shown = inert.for_terminal(text)
    assert shown.isprintable(), repr(shown)  # Python's own rule: no control, format or surrogate
    assert "\x1b" not in shown and "\n" not in shown and "\r" not in shown
    shown.encode("utf-8")  # never raises
    plain = "".join(c for c in text if c.isprintable())
    if plain == text:
        assert shown == text  # plain text is left as it is


def test_for_terminal_shows_what_it_escaped_and_is_bounded():
    assert inert.for_terminal("a\x1bb\udcffc\n") == "a\\x1bb\\udcffc\\n"
    long = inert.for_terminal("x" * 50_000, limit=100)
    assert len(long) < 200 and long.startswith("x" * 100) and "49,900 more characters" in long


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
def test_for_csv_encodes_and_is_never_a_formula(text):
    field = inert.for_csv(text)
    buffer = io.StringIO()
    csv.writer(buffer).writerow([field, "next"])
    data = buffer.getvalue().encode("utf-8")  # never raises
    (row,) = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    assert row == [field, "next"]
    assert not row[0].startswith(("=", "+", "-", "@", "\t", "\r")), row[0]
    if text.isprintable() and not text.startswith(("=", "+", "-", "@")):
        assert field == text


def test_summary_keeps_every_line_whatever_a_student_raised():
    """§5: an exception message that erases lines and moves the cursor rewrote the summary."""
    attack = "x\x1b[2K\x1b[1A\x1b[2K\r  for review       0\n  graded           2\x1b]0;t\x07\udcff"
    summary = classgrader.Summary(ASSIGNMENT)
    summary.results = {
        "mallory\x1b[2K": {"status": "needs_review", "needs_review": True, "reasons": [attack]},
        "ana": {"status": "graded", "needs_review": False, "reasons": []},
    }
    summary.review = {"mallory\x1b[2K": ("needs_review", attack)}  # open in the gradebook
    summary.failed = {"eve\x1b[1A": "worker lost: \x1b[2K\rok"}
    text = summary.text()
    lines = text.split("\n")
    assert all(line.isprintable() for line in lines), [ln for ln in lines if not ln.isprintable()]
    assert "\x1b" not in text
    (flagged,) = [line for line in lines if "mallory" in line]
    assert "needs review" in flagged and "graded           2" in flagged  # shown, on its line
    assert any("eve" in line and "worker lost" in line for line in lines)
    text.encode("utf-8")  # printable on any terminal


# ------------------------------------------------------------------------------ HTML


def test_every_payload_is_in_the_corpus():
    """At least 15 payloads, covering every kind the issue names."""
    wheres = " ".join(p.where for p in markup.PAYLOADS)
    assert len(markup.PAYLOADS) >= 15
    for kind in ("markdown", "raw cell", "attachment", "text/html", "application/javascript",
                 "image/svg+xml", "widget", "metadata", "exception", "formula"):  # fmt: skip
        assert kind in wheres, kind


LATENT = """(top) => {
  const bad = [];
  const active = ["script", "frame", "object", "embed", "base", "meta", "link", "style", "applet",
                  "portal"];
  const scan = (root) => {
    for (const el of root.querySelectorAll("*")) {
      const tag = el.tagName.toLowerCase();
      if (active.includes(tag)) bad.push("<" + tag + ">");
      if (tag === "iframe") {
        // JupyterLab shows an "isolated" output in a frame of its own origin, written from the
        // output it rendered: what is inside is scanned. Any other frame must be sandboxed
        // without scripts.
        const sandbox = el.getAttribute("sandbox");
        if (el.classList.contains("jp-mod-isolated") && el.contentDocument) {
          scan(el.contentDocument);
        } else if (sandbox === null || sandbox.includes("allow-scripts")) {
          bad.push("<iframe>");
        }
      }
      for (const a of el.attributes) {
        const name = a.name.toLowerCase();
        const value = a.value.replace(/[\\s\\u0000-\\u001f]/g, "").toLowerCase();
        if (name.startsWith("on")) bad.push(tag + " " + name);
        if (name === "srcdoc") bad.push(tag + " srcdoc");
        if (/^(javascript|vbscript|data:text|data:application)/.test(value)) {
          bad.push(tag + " " + name + "=" + a.value.slice(0, 40));
        }
      }
    }
  };
  scan(top);
  return bad;
}"""


SCROLL_DOWN = """() => {
  const outer = document.querySelector(".jp-NotebookPanel .jp-WindowedPanel-outer");
  if (!outer) return true;
  const end = outer.scrollTop + outer.clientHeight >= outer.scrollHeight - 2;
  outer.scrollTop += outer.clientHeight / 2;
  return end;
}"""


SCROLL_TO_END = """() => {
  const outer = document.querySelector(".jp-NotebookPanel .jp-WindowedPanel-outer");
  if (outer) outer.scrollTop = outer.scrollHeight;
}"""


class Watch:
    """What a page did that only a running payload could have done."""

    def __init__(self, context, allowed: str):
        self.problems: list[str] = []
        self.allowed = allowed

        def route(r) -> None:
            url = r.request.url
            if urlparse(url).path.startswith("/pwned/"):  # what the probe fetches
                self.problems.append(f"a payload's request: {url}")
                r.abort()
            elif url.startswith(self.allowed):
                r.continue_()
            else:
                self.problems.append(f"a request left the page's origin: {url[:120]}")
                r.abort()

        context.route("**/*", route)

        def dialog(d) -> None:
            self.problems.append(f"a dialog: {d.message}")
            d.dismiss()

        self.dialog = dialog

    def page(self, context):
        page = context.new_page()
        page.set_default_timeout(240_000)
        page.on("dialog", self.dialog)
        page.on(
            "console",
            lambda m: (
                self.problems.append(f"console: {m.text[:120]}")
                if re.fullmatch(r"PWNED [\w-]+", m.text)  # what the probe logs
                else None
            ),
        )
        return page

    def look(self, page, where: str, notebook: str = "#notebook-container") -> None:
        """Give handlers a moment, then read the page's marks and scan the notebook's part (the
        element ``notebook`` selects)."""
        page.wait_for_timeout(3_000)  # onerror, onload, MathJax, the payload's own retries
        marks = page.evaluate("window.PWNED || []")
        if marks:
            self.problems.append(f"{where}: payloads ran: {marks}")
        if "PWNED" in page.title():
            self.problems.append(f"{where}: title {page.title()!r}")
        self.scan(page, where, notebook)

    def scan(self, page, where: str, notebook: str) -> None:
        """Latent script in the notebook's part of the page (the element ``notebook`` selects; a
        page without it, e.g. one a payload replaced, is recorded as such)."""
        if page.locator(notebook).count() == 0:
            self.problems.append(f"{where}: no {notebook} on the page ({page.url[:80]})")
            return
        latent = page.evaluate(LATENT, page.locator(notebook).first.element_handle())
        if latent and f"{where}: latent script: {latent[:10]}" not in self.problems:
            self.problems.append(f"{where}: latent script: {latent[:10]}")


@contextmanager
def watched_page(allowed: str) -> Iterator[tuple[Watch, Any]]:
    """A page in Chromium, watched (:class:`Watch`): every request outside ``allowed`` (an
    origin, or a ``file://`` folder) is refused and recorded; yields ``(watch, page)``."""
    from test_browser import ARGS, CHROMIUM, sync_playwright

    with sync_playwright()() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            context = chromium.new_context()
            watch = Watch(context, allowed)
            yield watch, watch.page(context)
            context.close()
        finally:
            chromium.close()


def server_refuses_writes(base: str, root: Path) -> list[str]:
    """What the course's server let through of writes to the course (it must refuse all), and
    whether its pages carry the course's Content-Security-Policy."""
    import urllib.error
    import urllib.request

    problems = []
    config = root / "autograder" / "nbgrader_config.py"
    before = config.read_bytes()
    body = json.dumps({"type": "file", "format": "text", "content": "import os  # appended"})
    for method, path in [
        ("PUT", "autograder/nbgrader_config.py"),  # the issue's attack: the config, rewritten
        ("PUT", "autograder/new_module.py"),
        ("PUT", f"solutions/{ASSIGNMENT}/ngrams.ipynb"),
        ("DELETE", "autograder/course_nbgrader.py"),
        ("PATCH", "autograder/inert.py"),
    ]:
        data = body.encode() if method == "PUT" else json.dumps({"path": "x.py"}).encode()
        request = urllib.request.Request(
            f"{base}/api/contents/{path}?token={TOKEN}", data=data, method=method
        )
        try:
            with urllib.request.urlopen(request) as answer:
                problems.append(f"{method} {path}: the server answered {answer.status}")
        except urllib.error.HTTPError as error:
            if error.code != 403:
                problems.append(f"{method} {path}: {error.code}, not 403")
    if config.read_bytes() != before or not (root / "autograder" / "course_nbgrader.py").exists():
        problems.append("the server changed the course's configuration")
    for page, inline in [("lab", False), ("formgrader/manage_assignments", True)]:
        with urllib.request.urlopen(f"{base}/{page}?token={TOKEN}") as answer:
            policy = answer.headers.get("Content-Security-Policy", "")
        script = next((d for d in policy.split(";") if d.strip().startswith("script-src")), "")
        if "object-src 'none'" not in policy or ("'unsafe-inline'" in script) != inline:
            problems.append(f"/{page}: Content-Security-Policy {policy!r}")
    return problems


def gradebook_state(root: Path) -> dict:
    """Every score, comment and flag in the course's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'autograder' / 'gradebook.db'}", "nlpcourse") as gb:
        state = {}
        for student in ("mallory", "trudy"):
            nb = gb.find_submission_notebook("ngrams", ASSIGNMENT, student)
            state[student] = {
                "flagged": nb.flagged,
                "grades": sorted(
                    (g.name, g.auto_score, g.manual_score, g.extra_credit) for g in nb.grades
                ),
                "comments": sorted((c.name, c.auto_comment, c.manual_comment) for c in nb.comments),
            }
            state[student]["id"] = nb.id
        return state


def hostile_course(root: Path) -> None:
    """A course of two students, graded by ``python -m autograder grade``:

    * mallory handed in every payload, a solution that raises a message of markup, under a file
      name of markup (so the submission is flagged for review, as the issue's attack arranged);
    * trudy's autograded notebook is then replaced by what nbgrader's ``autograde`` leaves of the
      same payloads: the student's cells with the outputs of their code.

    Both get a grader's comment of markup (as the issue's attack stored one)."""
    from nbgrader.api import Gradebook

    services.make_course(root, ASSIGNMENT)
    first, second = list(honest_code(ASSIGNMENT))[:2]
    raising = replaced(ASSIGNMENT, second, f"raise ValueError({markup.EXCEPTION!r})")
    nb = release(ASSIGNMENT, (first,))
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == second:
            cell.source = raising
    hostile = markup.with_payloads(nb)
    folder = root / "autograder" / "submitted" / "mallory" / ASSIGNMENT
    folder.mkdir(parents=True)
    (folder / markup.FILE_NAME).write_text(markup.to_text(hostile))
    services.hand_in(root, ASSIGNMENT, {"trudy": release(ASSIGNMENT, (first,))})
    db_url = f"sqlite:///{root / 'autograder' / 'gradebook.db'}"
    graded = subprocess.run(
        services.grade_command(root, ASSIGNMENT, db_url, "--workers", "1", "--no-feedback"),
        cwd=services.REPO, env=services.environment(), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert "\x1b" not in graded.stdout + graded.stderr  # §5: the terminal got no control sequence

    autograded = root / "autograder" / "autograded" / "trudy" / ASSIGNMENT / "ngrams.ipynb"
    as_nbgrader_leaves_it = markup.with_payloads(nbformat.read(autograded, as_version=4))
    autograded.write_text(markup.to_text(as_nbgrader_leaves_it))

    with Gradebook(db_url, "nlpcourse") as gb:
        for student in ("mallory", "trudy"):
            submission = gb.find_submission_notebook("ngrams", ASSIGNMENT, student)
            for comment in submission.comments:
                comment.manual_comment = markup.COMMENT
        gb.db.commit()


@pytest.mark.slow  # grades with the real sandbox, starts a Jupyter server and Chromium
def test_no_payload_runs_in_formgrader_or_the_feedback(tmp_path):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from test_browser import sync_playwright
    from test_formgrader import became_true

    sync_playwright()  # skips, with the reason, without playwright or chromium
    hostile_course(tmp_path)
    before = gradebook_state(tmp_path)

    problems: list[str] = []
    log = tmp_path / "server.log"
    with services.jupyter_server(tmp_path / "autograder", TOKEN, log) as base:
        with watched_page(base) as (watch, page):
            for student in ("mallory", "trudy"):
                page.goto(f"{base}/formgrader/submissions/{before[student]['id']}/?token={TOKEN}")
                # loaded, with the grades fetched (what a probe waits for before it saves them)
                ready = "window.formgrader && formgrader.grades && formgrader.grades.loaded"
                if not became_true(page, f"{ready} && MathJax.loaded", 120):
                    watch.problems.append(f"formgrader, {student}: the page did not load")
                # the page still shows the student's work (the payloads' text, inert)
                cells = page.locator("#notebook-container .cell").count()
                if cells < 10:
                    watch.problems.append(f"formgrader, {student}: {cells} cells shown")
                watch.look(page, f"formgrader, {student}")
            # the course's JupyterLab opens the same notebook without running any of it
            lab = f"{base}/lab/tree/autograder/autograded/trudy/{ASSIGNMENT}/ngrams.ipynb"
            page.goto(lab)
            cell = page.locator(".jp-NotebookPanel .jp-Cell").first
            cell.wait_for(state="attached", timeout=180_000)  # JupyterLab runs under the CSP
            for _ in range(100):  # JupyterLab renders the cells in view: scroll through all
                page.wait_for_timeout(300)
                watch.scan(page, "JupyterLab, trudy", ".jp-NotebookPanel")
                if page.evaluate(SCROLL_DOWN):
                    break
            try:  # the last cells, once JupyterLab has rendered them (a busy machine lags)
                page.evaluate(SCROLL_TO_END)
                last = page.get_by_text("A cell whose id is markup.").first
                last.wait_for(state="attached", timeout=60_000)
                watch.scan(page, "JupyterLab, trudy", ".jp-NotebookPanel")
            except PlaywrightTimeout:
                watch.problems.append("JupyterLab did not show the notebook's last cells")
            watch.look(page, "JupyterLab, trudy", ".jp-NotebookPanel")
            problems += watch.problems
            problems += server_refuses_writes(base, tmp_path)
    after = gradebook_state(tmp_path)

    feedback = subprocess.run(
        [str(Path(sys.executable).parent / "nbgrader"), "generate_feedback", ASSIGNMENT, "--force"],
        cwd=tmp_path / "autograder", env=services.environment(), capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    if feedback.returncode != 0:
        problems.append("generate_feedback failed: " + (feedback.stdout + feedback.stderr)[-2000:])
    with watched_page("file://" + str(tmp_path / "autograder" / "feedback")) as (watch, page):
        for student in ("mallory", "trudy"):
            html = tmp_path / "autograder" / "feedback" / student / ASSIGNMENT / "ngrams.html"
            if not html.exists():
                watch.problems.append(f"feedback, {student}: no page written")
                continue
            if "Well done" not in html.read_text():  # the grader's comment, inert
                watch.problems.append(f"feedback, {student}: the comment is missing")
            page.goto(html.as_uri())
            started = "window.MathJax && MathJax.startup && MathJax.startup.promise"
            if became_true(page, started, 60):
                page.evaluate("MathJax.startup.promise")
            else:  # (a changed configuration wrote a page from a CDN)
                watch.problems.append(f"feedback, {student}: MathJax did not start")
            if page.locator("mjx-container").count() == 0:
                watch.problems.append(f"feedback, {student}: no formula typeset")
            if page.locator("meta[http-equiv='Content-Security-Policy']").count() != 1:
                watch.problems.append(f"feedback, {student}: no Content-Security-Policy")
            watch.look(page, f"feedback, {student}")
        problems += watch.problems
    if after != before:  # the issue's attack: the student's scores raised through formgrader's API
        problems.append("the gradebook changed: " + json.dumps([before, after], default=str))
    assert problems == [], "\n".join(problems)


def test_the_grader_writes_student_text_it_cannot_encode(tmp_path):
    """§5: a lone surrogate or a control sequence in a student's text neither stops the writers
    of the autograded notebook and of what the code printed, nor reaches the instructor's
    terminal through the printed file; the notebook reads back as the student's text."""
    course = classgrader.load_course(services.make_course(tmp_path, ASSIGNMENT))
    assignment = classgrader.Assignment(ASSIGNMENT, "ngrams.ipynb", {}, nbformat.v4.new_notebook())
    folder = tmp_path / "autograder" / "submitted" / "eve" / ASSIGNMENT
    sub = classgrader.Submission("eve", folder, "ngrams.ipynb", b"", "c", None)
    text = "done \udcff \x1b[2K\x1b[1A\rgraded 12/12\nsecond line\tend"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text)])
    classgrader.write_autograded(course, assignment, sub, nb)
    written = course.folder(course.coursedir.autograded_directory, "eve", ASSIGNMENT)
    back = nbformat.read(written / "ngrams.ipynb", as_version=4)
    assert back.cells[0].source == text  # the JSON escape reads back as the same text

    classgrader.write_output(course, assignment, sub, text)
    printed = classgrader.printed_path(course, ASSIGNMENT, "eve").read_text(encoding="utf-8")
    assert "\x1b" not in printed and "\r" not in printed
    assert printed.splitlines() == [
        "done \\udcff \\x1b[2K\\x1b[1A\\rgraded 12/12",
        "second line\tend",
    ]


def test_a_file_name_of_markup_is_shown_as_text():
    """The reasons of a file the grader could not read name the file: in the autograded notebook
    they are text, not markup, whatever the name."""
    import copy

    from nbgrader.utils import compute_checksum  # noqa: F401 (autograded_notebook needs nbgrader)

    nb = release(ASSIGNMENT)
    assignment = classgrader.Assignment(ASSIGNMENT, "ngrams.ipynb", {}, copy.deepcopy(nb))
    sub = classgrader.Submission("eve", Path("x"), markup.FILE_NAME, b"", "c", None)
    result = {
        "status": "rejected",
        "reasons": [f"expected ngrams.ipynb, found {markup.FILE_NAME}"],
        "parts": [],
    }
    shown, _ = classgrader.autograded_notebook(assignment, sub, result)
    html = inert.markdown_html(shown.cells[0].source)
    assert '&lt;img src="x" onerror=' in html and "<img" not in html


def test_nbgrader_routes_messages_show_names_inertly(tmp_path):
    """The course's messages on ``nbgrader autograde``'s route name a student's files and id on
    the instructor's terminal: control sequences in them are shown as escapes."""
    import logging

    sys.path.insert(0, str(services.REPO / "autograder"))
    import course_nbgrader
    from traitlets.log import get_logger

    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger = get_logger()
    level = logger.level  # an earlier test's nbgrader application may have left it at CRITICAL
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)  # nbgrader's default level
    try:
        check = course_nbgrader.file_name_check(str(services.REPO / "solutions"))
        folder = tmp_path / "submitted" / "m\x1b[2K" / ASSIGNMENT
        check(ASSIGNMENT, "m\x1b[2K", [str(folder / "evil\x1b[1A\r\udcff.ipynb")])
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    (message,) = [m for m in seen if "expected" in m]
    assert "\x1b" not in message and "\r" not in message and "\\x1b[1A" in message
    report = course_nbgrader.ExplainedFailure()
    report.students = ["m\x1b[2K"]
    report.filter(
        logging.makeLogRecord({"msg": "error processing assignment 'a' for student 'm\x1b[2K'"})
    )
    assert "\x1b" not in report.summary(ASSIGNMENT) and "m\\x1b[2K" in report.summary(ASSIGNMENT)


# ------------------------------------------------------------------------------ formgrader's pages

ISSUE_CELL = '<img src=x style="display:none" onerror="{}">'  # the issue's markdown cell


def mallory_score(root: Path) -> tuple[float, list[str]]:
    """mallory's score in the gradebook, and the cells given a manual score."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'autograder' / 'gradebook.db'}", "nlpcourse") as gb:
        nb = gb.find_submission_notebook("ngrams", ASSIGNMENT, "mallory")
        return float(nb.score), sorted(g.name for g in nb.grades if g.manual_score is not None)


@pytest.mark.slow  # starts a Jupyter server and Chromium
def test_a_markdown_cell_cannot_give_its_student_full_marks_through_formgrader(tmp_path):
    """§1's headline, as the issue did it: a student solves the first part only, adds one markdown
    cell whose script saves every grade at its maximum through formgrader's API (in the
    instructor's session: their cookie, their XSRF token), and misnames the file so that the
    instructor opens it for review. After the instructor has opened it in formgrader and the page
    has fetched its grades (what the script waits for), the gradebook still holds the first
    part's points (from the source notebook) and no manual score, and no mark of the script is
    on the page. (On the configuration before issue 40 the gradebook went to full marks.)"""
    from nbgrader.api import Gradebook
    from test_browser import sync_playwright
    from test_formgrader import wait_in

    sync_playwright()  # skips, with the reason, without playwright or chromium
    services.make_course(tmp_path, ASSIGNMENT)
    first = next(iter(honest_code(ASSIGNMENT)))
    nb = release(ASSIGNMENT, (first,))
    nb.cells.append(nbformat.v4.new_markdown_cell(ISSUE_CELL.format(markup.probe("issue"))))
    folder = tmp_path / "autograder" / "submitted" / "mallory" / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / "ngrams-Copy1.ipynb")  # misnamed: flagged, opened for review
    course = classgrader.load_course(tmp_path / "autograder")
    summary = services.grade_in_process(course, ASSIGNMENT, feedback=False)
    assert summary.results["mallory"]["needs_review"], summary.text()
    earned = notebook_points(ASSIGNMENT)[cell_grading(ASSIGNMENT, first)]
    assert mallory_score(tmp_path) == (earned, [])  # 2 of 12 before the instructor looks
    with Gradebook(f"sqlite:///{tmp_path / 'autograder' / 'gradebook.db'}", "nlpcourse") as gb:
        submission_id = gb.find_submission_notebook("ngrams", ASSIGNMENT, "mallory").id
    problems: list[str] = []
    with services.jupyter_server(tmp_path / "autograder", TOKEN, tmp_path / "server.log") as base:
        with watched_page(base) as (watch, page):
            page.goto(f"{base}/formgrader/submissions/{submission_id}/?token={TOKEN}")
            wait_in(page, "window.formgrader && formgrader.grades && formgrader.grades.loaded")
            page.wait_for_timeout(5_000)  # the script's saves, had it run, have been answered
            watch.look(page, "formgrader, mallory")
            problems += watch.problems
    score, manual = mallory_score(tmp_path)
    if (score, manual) != (earned, []):
        problems.insert(0, f"the gradebook changed: {earned} -> {score}, manual scores {manual}")
    assert problems == [], "\n".join(problems)


@pytest.mark.slow  # starts a Jupyter server
def test_the_page_of_a_missing_notebook_names_it_as_text(tmp_path):
    """Formgrader's page for a submission whose autograded notebook is missing names the file, whose
    path holds the student's id. nbgrader writes it unescaped (formgrader renders its own pages
    without Jinja's autoescape), and in nbgrader 0.9.6 the page did not render at all (its
    template imports one nbgrader does not ship: HTTP 500, no file named). A student id of markup
    (as an LMS roster or a folder name can bring) with no autograded notebook: the page answers
    404, its element for the file holds the path as text, and no element of the id's markup is in
    the page (read with Python's HTML parser)."""
    import urllib.error
    import urllib.request
    from html.parser import HTMLParser

    from nbgrader.api import Gradebook

    student = '<img src=x onerror="window.PWNED=1">'
    services.make_course(tmp_path, ASSIGNMENT)
    course = classgrader.load_course(tmp_path / "autograder")
    classgrader.prepare_assignment(course, ASSIGNMENT)
    with Gradebook(f"sqlite:///{tmp_path / 'autograder' / 'gradebook.db'}", "nlpcourse") as gb:
        gb.add_student(student)
        gb.add_submission(ASSIGNMENT, student)
        submission_id = gb.find_submission_notebook("ngrams", ASSIGNMENT, student).id
    missing = tmp_path / "autograder" / "autograded" / student / ASSIGNMENT / "ngrams.ipynb"

    with services.jupyter_server(tmp_path / "autograder", TOKEN, tmp_path / "server.log") as base:
        url = f"{base}/formgrader/submissions/{submission_id}/?token={TOKEN}"
        try:
            with urllib.request.urlopen(url, timeout=120) as answer:
                status, page = answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            status, page = error.code, error.read().decode()

    class Page(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.images: list[dict] = []  # every <img>: the id's markup would make one
            self.named, self.inside = "", False  # the text of the element naming the file

        def handle_starttag(self, tag: str, attrs: list) -> None:
            if tag == "img":
                self.images.append(dict(attrs))
            self.inside = self.inside or ("id", "missing-file") in attrs

        def handle_endtag(self, tag: str) -> None:
            self.inside = self.inside and tag != "code"

        def handle_data(self, data: str) -> None:
            self.named += data if self.inside else ""

    parsed = Page()
    parsed.feed(page)
    assert status == 404, (status, page[-1500:])
    assert parsed.named == str(missing), (parsed.named, page[-1500:])
    assert parsed.images == [], parsed.images
