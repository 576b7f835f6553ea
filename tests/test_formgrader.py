"""Reviewing in formgrader with no network (issue 32), in Chromium.

A course of two students (one notebook handed in under the wrong name, so flagged for review) is
graded by ``python -m autograder grade``; the course's Jupyter server is started as the README
says (``jupyter lab --config=jupyter_server_config.py`` from the course's ``autograder/`` folder,
so that file and ``nbgrader_config.py`` apply) on 127.0.0.1, and formgrader's page for the flagged
submission is opened in Debian's Chromium with every request that leaves 127.0.0.1 refused. On
that page:

* no script error (formgrade.js used to stop at "MathJax is not defined"), no request refused,
  and the notebook's formulas typeset by the MathJax the server serves from the course's
  environment;
* the reason for review is shown in the comment boxes, where formgrader shows automatic comments;
* opened as an instructor opens it (the token in the link only), a deep link to an assignment's
  notebook (``/formgrader/gradebook/<assignment>/<notebook>?token=...``) lists its submissions;
* "?" shows the keyboard shortcuts, Tab and Shift-Tab move between the score and comment fields;
* a comment typed and saved with Escape is in the gradebook and still there after a reload;
* Control-Shift-F flags and unflags the submission (read back from the gradebook);
* the Manage Assignments page links to the assignment's folder, and the server's root serves it.
"""

from __future__ import annotations

import posixpath
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import services  # noqa: E402
from test_browser import ARGS, CHROMIUM, sync_playwright  # noqa: E402

pytestmark = pytest.mark.slow  # grades with the real sandbox, starts a Jupyter server and Chromium
ASSIGNMENT = "01-ngrams"
TOKEN = "formgrader-test-token"


def gradebook(root: Path):
    from nbgrader.api import Gradebook

    return Gradebook(f"sqlite:///{root / 'autograder' / 'gradebook.db'}", "nlpcourse")


def test_formgrader_offline_keeps_comments_and_flags(tmp_path):
    sync_playwright()  # skips, with the reason, without playwright or chromium
    services.make_course(tmp_path, ASSIGNMENT)
    samples = services.grading.sample_submissions(ASSIGNMENT)
    services.hand_in(tmp_path, ASSIGNMENT, {"ana": samples["full"]})
    misnamed = tmp_path / "autograder" / "submitted" / "ben" / ASSIGNMENT
    services.hand_in(tmp_path, ASSIGNMENT, {"ben": samples["one-part"]})
    (misnamed / "ngrams.ipynb").rename(misnamed / "ngrams-Copy1.ipynb")
    db_url = f"sqlite:///{tmp_path / 'autograder' / 'gradebook.db'}"
    graded = subprocess.run(
        services.grade_command(tmp_path, ASSIGNMENT, db_url, "--workers", "1", "--no-feedback"),
        cwd=services.REPO, env=services.environment(), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert graded.returncode == 0, graded.stdout + graded.stderr
    with gradebook(tmp_path) as gb:
        nb = gb.find_submission_notebook("ngrams", ASSIGNMENT, "ben")
        submission_id, flagged_before = nb.id, nb.flagged
    assert flagged_before, graded.stdout  # a misnamed notebook is graded and flagged

    log = tmp_path / "server.log"
    with services.jupyter_server(tmp_path / "autograder", TOKEN, log) as base:
        check_the_student_side_is_off(base)
        with sync_playwright()() as p:
            chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            try:
                check_the_pages(chromium, base, submission_id, tmp_path)
            finally:
                chromium.close()
    text = log.read_text()
    assert "Unwritable directory" not in text, text[-3000:]
    assert "not a subdirectory of the notebook server root" not in text, text[-3000:]


def became_true(page, expression: str, seconds: float = 240) -> bool:
    """Whether ``expression`` becomes true in the page within ``seconds``. Playwright's
    ``wait_for_function`` evaluates its predicate with ``eval``, which the course's
    Content-Security-Policy refuses on formgrader's pages and the feedback's (no 'unsafe-eval': an
    EvalError as soon as the first try is false); ``page.evaluate`` runs as the browser's devtools
    do, outside it."""
    deadline = time.monotonic() + seconds
    while not page.evaluate(f"Boolean({expression})"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.25)
    return True


def wait_in(page, expression: str, seconds: float = 240) -> None:
    """Wait until ``expression`` is true in the page (:func:`became_true`), or fail."""
    if not became_true(page, expression, seconds):
        pytest.fail(f"the page never had {expression}")


def check_the_student_side_is_off(base: str) -> None:
    """Issue 45 §3: JupyterLab's "Assignment List" (and "Course List") called nbgrader's
    student-side server extensions, which the course switches off, and hung. The page JupyterLab
    serves must leave their plugins out (its config data lists the disabled plugins)."""
    import json

    with urllib.request.urlopen(f"{base}/lab?token={TOKEN}", timeout=60) as answer:
        page = answer.read().decode()
    data = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                     page, re.S)  # fmt: skip
    assert data, page[:2000]
    disabled = json.loads(data.group(1)).get("disabledExtensions", [])
    for plugin in ("@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:course-list"):
        assert plugin in disabled, disabled


def check_the_pages(chromium, base: str, submission_id: str, root: Path) -> None:
    # as an instructor's browser: the token only in the first link opened, then the login cookie
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(240_000)  # formgrader converts the notebook at each visit
    problems: list[str] = []

    def route(r) -> None:
        if r.request.url.startswith(base):
            r.continue_()
        else:
            problems.append(f"a request left the machine: {r.request.url}")
            r.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda e: problems.append(f"JavaScript error: {e}"))

    # a deep link to the assignment's notebook lists its submissions (it used to stay at "Loading,
    # please wait...": the login cookie was set for that page's folder only, so the page's calls to
    # /formgrader/api/ were sent to the login page)
    page.goto(f"{base}/formgrader/gradebook/{ASSIGNMENT}/ngrams?token={TOKEN}")
    wait_in(page, "window.models && models.loaded", 120)
    rows = page.locator("#main-table tr")
    assert rows.count() == 2, page.locator("#main-table").inner_text()
    assert "Loading" not in page.locator("#main-table").inner_text()

    url = f"{base}/formgrader/submissions/{submission_id}/?token={TOKEN}"
    page.goto(url)
    ready = "window.formgrader && formgrader.loaded && MathJax.loaded"
    wait_in(page, ready, 120)
    assert page.locator("mjx-container").count() > 0  # the formulas typeset, offline
    loaded = "formgrader.comments && formgrader.comments.loaded"  # the comments fetched, shown
    wait_in(page, loaded)
    box = page.locator("textarea.comment[placeholder^='Needs review:']").first
    placeholder = box.get_attribute("placeholder") or ""
    assert "ngrams-Copy1.ipynb" in placeholder, placeholder

    # "?" opens the list of keyboard shortcuts (issue 45: only a click on the icon did)
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.keyboard.press("?")
    help_dialog = page.locator("#help-dialog")
    help_dialog.wait_for(state="visible")
    assert "Keyboard shortcuts" in help_dialog.inner_text()
    assert "control-shift-f" in help_dialog.inner_text()
    help_dialog.locator("button.btn-primary").click()
    help_dialog.wait_for(state="detached")

    # Tab and Shift-Tab move between the score and comment fields, in the page's order
    fields = page.locator(".tabbable")
    assert fields.count() >= 3
    fields.first.focus()
    focused = "$('.tabbable').index(document.activeElement)"
    moves = []
    for key in ("Tab", "Tab", "Shift+Tab"):
        page.keyboard.press(key)
        moves.append(page.evaluate(focused))
    assert moves == [1, 2, 1]
    page.keyboard.press("Escape")

    # a comment saved with Escape survives a reload
    box_id = box.get_attribute("id")
    box.click()
    box.fill("Good start; see $n-1$ start symbols.")
    with page.expect_response(lambda r: "/api/comment/" in r.url and r.request.method == "PUT"):
        page.keyboard.press("Escape")
    page.reload()
    wait_in(page, loaded)
    assert page.locator(f"#{box_id}").input_value() == "Good start; see $n-1$ start symbols."

    # Control-Shift-F flags and unflags
    seen = []
    for _ in range(2):
        page.locator("body").click(position={"x": 5, "y": 300})
        with page.expect_response(lambda r: r.url.endswith("/flag")):
            page.keyboard.press("Control+Shift+F")
        with gradebook(root) as gb:
            seen.append(gb.find_submission_notebook_by_id(submission_id).flagged)
    assert seen == [False, True]

    # Manage Assignments links to the assignment's folder, which the server's root serves
    page.goto(f"{base}/formgrader/manage_assignments?token={TOKEN}")
    link = page.locator(f"a[href*='solutions/{ASSIGNMENT}']").first
    link.wait_for(timeout=60_000)
    href = link.get_attribute("href") or ""
    assert "/../" not in href, href
    folder = posixpath.normpath(re.sub(r"^.*?/tree/", "", href).strip("/"))
    with urllib.request.urlopen(f"{base}/api/contents/{folder}?token={TOKEN}") as answer:
        assert answer.status == 200
    assert problems == [], problems


def test_a_part_stopped_by_a_limit_needs_a_manual_grade(tmp_path):
    """Recorded as the coordinator records it: the timed-out part is left to the instructor."""
    from autograder import classgrader, gradebook_writer

    course = classgrader.load_course(services.make_course(tmp_path, ASSIGNMENT))
    assignment = classgrader.prepare_assignment(course, ASSIGNMENT)
    tests = assignment.test_cells()
    parts = [
        {"grade_id": gid, "points": points if i == 0 else 0.0, "max_points": points,
         "status": "passed" if i == 0 else "timed_out" if i == 1 else "failed", "message": ""}
        for i, (gid, points) in enumerate(tests)
    ]  # fmt: skip
    result = {
        "assignment": ASSIGNMENT, "student": "cal", "notebook": "ngrams.ipynb", "checksum": "c1",
        "parts": parts, "status": "timed_out", "reasons": ["a cell ran past 60 s"],
        "needs_review": True,
    }  # fmt: skip
    gb = gradebook_writer.open_gradebook(course.db_url, course.course_id)
    try:
        gradebook_writer.record(
            gb, result, notebook_id="ngrams", timestamp=None, unanswered=set(),
            config=course.config,
        )  # fmt: skip
        nb = gb.find_submission_notebook("ngrams", ASSIGNMENT, "cal")
        needs = {g.name for g in nb.grades if g.needs_manual_grade}
        graded = {g.name for g in nb.grades}
        answers = {c.name for c in nb.notebook.solution_cells if c.name in graded}  # by hand
        assert needs == {tests[1][0]} | answers
        assert {c.auto_comment for c in nb.comments} == {"Needs review: a cell ran past 60 s"}
    finally:
        gb.close()
