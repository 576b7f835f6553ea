"""The class report (issue 45 §4): per part, the class's scores and the mistakes the checks named.

Oracle: a class of 33 generated submissions of 01-ngrams (``services.class_plan``), each with the
mistakes it was made with (a solution edited: '</s>' left out, n '<s>' padded, 1 added in place of
k, perplexity left blank), and one hostile student whose exception message forges a named mistake
and a case and carries markup. Graded by the class grader with the real checks (in process:
``services.checked_in_process``), then ``python -m autograder report`` is run as the README
writes it. The counts the report gives are compared with the plan; the page is opened in Chromium
with every request refused; a second, small class is graded by plain ``nbgrader autograde`` and
reported from its autograded notebooks.
"""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import services  # noqa: E402

from autograder import classgrader, report  # noqa: E402
from autograder.inert import escaped  # noqa: E402

pytestmark = pytest.mark.slow  # grades a class of 33 on an in-process Dask cluster
ASSIGNMENT = "01-ngrams"
HOSTILE = "s99"
HOSTILE_NAME = "<img src=x onerror=window.pwned=1>.ipynb"  # handed in misnamed: a flagged reason
FORGED = "<script>window.pwned = 1</script> forged"
HOSTILE_CODE = (
    "def count_ngrams(sentences, n):\n"
    f"    raise ValueError({FORGED!r} + '\\nlikely mistake: ' + {FORGED!r}"
    " + '\\non case 99 of 99 (forged):')\n"
)


def points() -> dict[str, float]:
    path = services.grading.notebook_path(services.REPO / "solutions", ASSIGNMENT)
    cells = json.loads(path.read_text())["cells"]
    return {
        c["metadata"]["nbgrader"]["grade_id"]: float(c["metadata"]["nbgrader"]["points"])
        for c in cells
        if c["metadata"].get("nbgrader", {}).get("grade")
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class of 33 graded into a gradebook of its own; the report written by the command."""
    root = tmp_path_factory.mktemp("report")
    services.make_course(root, ASSIGNMENT)
    plan = services.class_plan(32)
    students = {s: services.mistaken(ASSIGNMENT, made) for s, made in plan.items()}
    hostile = services.mistaken(ASSIGNMENT, [])
    for cell in hostile.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "count_ngrams":
            cell.source = HOSTILE_CODE
    students[HOSTILE] = hostile
    services.hand_in(root, ASSIGNMENT, students)
    folder = root / "autograder" / "submitted" / HOSTILE / ASSIGNMENT
    (folder / "ngrams.ipynb").rename(folder / HOSTILE_NAME)
    course = classgrader.load_course(root / "autograder")
    summary = services.grade_in_process(course, ASSIGNMENT, feedback=False)
    assert len(summary.results) == 33 and not summary.failed, summary.text()
    made = subprocess.run(
        [sys.executable, "-m", "autograder", "report", ASSIGNMENT, "--course",
         str(root / "autograder")],
        cwd=services.REPO, env=services.environment(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    folder = root / "autograder" / "reports"
    data = json.loads((folder / f"{ASSIGNMENT}.json").read_text())
    return {"root": root, "plan": plan, "folder": folder, "data": data, "said": made.stdout}


def expected_score(made: list[str]) -> dict[str, float]:
    """Each test cell's points for a student who made ``made`` (the plan, not the grader)."""
    failing = {services.MISTAKES[m][3] for m in made if m != "blank"}
    failing |= {services.BLANK[1]} if "blank" in made else set()
    return {gid: 0.0 if gid in failing else p for gid, p in points().items()}


def test_the_parts_are_the_plans(graded):
    plan, data = graded["plan"], graded["data"]
    scores = {s: expected_score(made) for s, made in plan.items()}
    scores[HOSTILE] = {**expected_score([]), "test_count_ngrams": 0.0}
    assert data["submitted"] == 33
    for part in data["parts"]:
        gid, column = part["grade_id"], [s[part["grade_id"]] for s in scores.values()]
        assert part["points"] == points()[gid]
        assert part["mean"] == pytest.approx(statistics.fmean(column)), gid
        assert part["median"] == pytest.approx(statistics.median(column)), gid
        assert part["full_marks"] == pytest.approx(sum(c == points()[gid] for c in column) / 33)
        assert sum(part["distribution"].values()) == 33
    totals = {row["student"]: row["score"] for row in graded["data"]["rows"]}
    assert totals == {s: sum(v.values()) for s, v in scores.items()}


def test_the_named_mistakes_are_counted_across_the_class(graded):
    plan, data = graded["plan"], graded["data"]
    named = {p["grade_id"]: p["mistakes"] for p in data["parts"]}
    for mistake, (_, _, _, test_cell, words) in services.MISTAKES.items():
        who = sorted(s for s, made in plan.items() if mistake in made)
        found = [m for m in named[test_cell] if words in m[0]]
        assert len(found) == 1, (mistake, named[test_cell])
        text, n, students = found[0]
        assert (n, sorted(students)) == (len(who), who), mistake
    every = [m[0] for ms in named.values() for m in ms]
    assert not any("forged" in m for m in every)  # the hostile student's line is not a mistake
    assert named["test_perplexity"] == []  # left blank: "not written yet" names no mistake
    cases = {p["grade_id"]: dict(p["cases"]) for p in data["parts"]}
    assert not any("forged" in c or c.startswith("99") for cs in cases.values() for c in cs)
    # every wrong count_ngrams (the hostile one too) fails the first case, a unigram of one word
    n_count = sum(1 for made in plan.values() if {"no_eos", "n_bos"} & set(made))
    assert cases["test_count_ngrams"] == {"1 of 8": n_count + 1}


def test_the_csv_and_json_say_what_the_page_says(graded):
    folder, data = graded["folder"], graded["data"]
    with open(folder / f"{ASSIGNMENT}-mistakes.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    expected = [(p["grade_id"], m[0], m[1]) for p in data["parts"] for m in p["mistakes"]]
    assert [(r["part"], r["mistake"], int(r["submissions"])) for r in rows] == expected
    with open(folder / f"{ASSIGNMENT}-students.csv", encoding="utf-8") as f:
        students = {r["student"]: float(r["score"]) for r in csv.DictReader(f)}
    assert students == {r["student"]: r["score"] for r in data["rows"]}
    page = (folder / f"{ASSIGNMENT}.html").read_text(encoding="utf-8")
    assert "<img src=x" not in page and "&lt;img src=x" in page  # the file name, shown as text
    for part in data["parts"]:
        for mistake, n, _ in part["mistakes"]:
            assert f"{escaped(mistake)}</td><td class=n>{n} of 33" in page
    flagged = {f["student"]: f["reasons"] for f in data["flagged"]}
    assert list(flagged) == [HOSTILE] and HOSTILE_NAME in flagged[HOSTILE][0]


def test_the_page_renders_offline_in_chromium(graded):
    from test_browser import ARGS, CHROMIUM, sync_playwright

    page_path = graded["folder"] / f"{ASSIGNMENT}.html"
    with sync_playwright()() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = chromium.new_page()
            refused: list[str] = []
            errors: list[str] = []

            def route(r) -> None:
                if r.request.url.startswith(("file:", "data:")):
                    r.continue_()
                else:
                    refused.append(r.request.url)
                    r.abort()

            page.route("**/*", route)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_path.as_uri())
            width = page.eval_on_selector("#distribution", "img => img.naturalWidth")
            assert width > 100  # the figure decoded from its data URI
            assert page.evaluate("window.pwned") is None  # the hostile markup did not run
            text = page.inner_text("body")
        finally:
            chromium.close()
    assert not refused and not errors, (refused, errors)
    assert "you left out the end symbol" in text
    assert HOSTILE_NAME in text  # the reason for review, as the student named the file


def test_the_nbgrader_route_is_reported_from_its_autograded_notebooks(tmp_path):
    """Three students graded by plain nbgrader (generate, autograde, feedback, export): the report
    reads each test cell's error output, and names the mistake."""
    students = {
        "full": services.mistaken(ASSIGNMENT, []),
        "eos": services.mistaken(ASSIGNMENT, ["no_eos"]),
        "k": services.mistaken(ASSIGNMENT, ["one_for_k", "blank"]),
    }
    services.grading.grade(tmp_path, ASSIGNMENT, students)
    course = classgrader.load_course(
        services.grading.CONFIG_DIR,
        root=tmp_path,
        db_url=f"sqlite:///{tmp_path / 'autograder' / 'gradebook.db'}",
    )
    made = report.class_report(course, ASSIGNMENT)
    named = {p.grade_id: {m: who for m, _, who in p.mistakes} for p in made.parts}
    eos = [m for m in named["test_count_ngrams"] if "left out the end symbol" in m]
    assert len(eos) == 1 and named["test_count_ngrams"][eos[0]] == ["eos"]
    k = [m for m in named["test_addk_prob"] if "1 in place of k" in m]
    assert len(k) == 1 and named["test_addk_prob"][k[0]] == ["k"]
    assert {r["student"]: r["score"] for r in made.rows} == {
        s: sum(expected_score(m).values())
        for s, m in {"full": [], "eos": ["no_eos"], "k": ["one_for_k", "blank"]}.items()
    }
    assert all(r["status"] == "graded by nbgrader" for r in made.rows)
