"""The plain nbgrader route: an honest slip never stops the class or costs a right answer.

Each test is a slip that happened when a class was graded with ``nbgrader autograde`` and
nbgrader's defaults (issue 16, items 1-7; issue 9, the stderr bullet), graded here with the real
nbgrader and the course's ``autograder/nbgrader_config.py`` in a temporary copy of the course
(never the real gradebook). The submissions are the release notebook of ``01-ngrams`` with the
solution code filled in and one slip added; the expected points come from the test cells'
metadata and the slip, not from an earlier run. The mechanics of the time and output limits are
also tested on small notebooks run by :class:`course_nbgrader.TimeLimitedExecute` alone.
"""

from __future__ import annotations

import copy
import csv
import html
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "autograder"))
import course_nbgrader as course  # noqa: E402
import grading  # noqa: E402

pytestmark = pytest.mark.slow

ASSIGNMENT = "01-ngrams"
NOTEBOOK = "ngrams.ipynb"
FULL = 12.0  # the points of 01-ngrams (2 + 2 + 2 + 2 + 1 + 3)
CODE = grading.solution_code(ASSIGNMENT)
VENV_BIN = Path(sys.executable).parent


def full() -> nbformat.NotebookNode:
    return grading.submission(ASSIGNMENT, CODE)


def cell_index(nb: nbformat.NotebookNode, grade_id: str) -> int:
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    return ids.index(grade_id)


def pasted_copy(nb: nbformat.NotebookNode, grade_id: str) -> nbformat.NotebookNode:
    """``nb`` with a copy of a cell pasted at the end, as Jupyter pastes it (a new cell id, the
    same metadata)."""
    nb = copy.deepcopy(nb)
    cell = copy.deepcopy(nb.cells[cell_index(nb, grade_id)])
    cell["id"] = uuid.uuid4().hex[:8]
    nb.cells.append(cell)
    return nb


def with_code(grade_id: str, code: str) -> nbformat.NotebookNode:
    """The full submission with one solution cell's code replaced."""
    return grading.submission(ASSIGNMENT, {**CODE, grade_id: code})


def warning_in_count_ngrams(line: str) -> nbformat.NotebookNode:
    """A right ``count_ngrams`` that writes a warning to stderr each time it runs."""
    code = CODE["count_ngrams"]
    assert "    counts = Counter()" in code
    return with_code(
        "count_ngrams",
        code.replace("    counts = Counter()", f"    {line}\n    counts = Counter()"),
    )


def without(nb: nbformat.NotebookNode, *grade_ids: str) -> nbformat.NotebookNode:
    nb = copy.deepcopy(nb)
    nb.cells = [
        c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in grade_ids
    ]
    return nb


def course_copy(root: Path) -> Path:
    """A temporary course at ``root``: the nbgrader configuration and the course's preprocessors,
    the assignment's source, and the virtual environment linked in. Returns ``root``."""
    (root / "autograder").mkdir(parents=True)
    grading.copy_configuration(root / "autograder")
    shutil.copytree(grading.REPO / "solutions" / ASSIGNMENT, root / "solutions" / ASSIGNMENT)
    (root / ".venv").symlink_to(VENV_BIN.parent)
    return root


def submit(root: Path, student: str, nb: nbformat.NotebookNode, name: str = NOTEBOOK) -> None:
    folder = root / "autograder" / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / name)


def readme_commands() -> str:
    """The README's "Grade a class" commands, as an instructor copies them."""
    text = (grading.REPO / "README.md").read_text()
    block = re.search(r"\*\*Grade a class\.\*\*.*?```bash\n(.*?)```", text, re.S)
    assert block, "README.md has no 'Grade a class' bash block"
    return block.group(1)


def run_bash(root: Path, commands: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        ["bash", "-e", "-c", commands], cwd=root, env=env, capture_output=True, text=True
    )


def csv_scores(path: Path) -> dict[str, float]:
    with open(path) as f:
        return {row["student_id"]: float(row["score"]) for row in csv.DictReader(f)}


# -- item 1: a pasted test cell, graded with the README's own commands -------------------------


def test_pasted_test_cell_does_not_stop_the_class(tmp_path):
    root = course_copy(tmp_path)
    submit(root, "pasted-test", pasted_copy(full(), "test_mle_prob"))
    submit(root, "full", full())
    submit(root, "blank", grading.submission(ASSIGNMENT, {}))
    result = run_bash(root, readme_commands())
    log = result.stdout + result.stderr
    assert result.returncode == 0, log
    scores = csv_scores(root / "autograder" / "grades.csv")
    assert scores == {"pasted-test": FULL, "full": FULL, "blank": 0.0}
    # issue 28: no false alarm about untouched test cells (their hidden tests make nbgrader's
    # checksums differ), no SQLAlchemy warning, and one line that sums the run up
    assert "has changed!" not in log and "SAWarning" not in log, log
    assert "autograde 01-ngrams: 3 of 3 student(s) graded" in log, log
    feedback = root / "autograder" / "feedback"
    for student in scores:
        assert (feedback / student / ASSIGNMENT / "ngrams.html").exists()


# -- item 6: a misnamed notebook is named ------------------------------------------------------


def test_misnamed_notebook_says_what_was_expected_and_found(tmp_path):
    root = course_copy(tmp_path)
    submit(root, "misnamed", full(), name="ngrams-Copy1.ipynb")
    submit(root, "full", full())
    result = run_bash(
        root,
        "source .venv/bin/activate\ncd autograder\n"
        f"nbgrader generate_assignment {ASSIGNMENT} --force\n"
        f"nbgrader autograde {ASSIGNMENT} || true\n",
    )
    log = result.stdout + result.stderr
    message = re.search(r"Student 'misnamed', assignment '01-ngrams': (.*)", log)
    assert message, log
    assert "expected ngrams.ipynb, found ngrams-Copy1.ipynb" in message.group(1)
    # and nbgrader's misleading "did you forget to run generate_assignment?" with its traceback
    # is not said after it (issue 28); the last line names the student not graded
    assert "did you forget" not in log and "Traceback" not in log, log
    assert "1 of 2 student(s) graded; not graded (see the errors above): misnamed" in log
    assert (root / "autograder" / "autograded" / "full" / ASSIGNMENT / NOTEBOOK).exists()


# -- items 1-5 and the stderr bullet: one class, graded by grading.grade ------------------------

STUCK = """def mle_prob(counts, context, word):
    import time
    while True:  # ignores the interrupt
        try:
            time.sleep(0.05)
        except KeyboardInterrupt:
            pass
"""

WARNINGS = {
    "numpy RuntimeWarning": "import numpy as np; np.log(np.zeros(1))",
    "warnings.warn": "import warnings; warnings.warn('counting n-grams')",
    "logging.warning": "import logging; logging.warning('counting n-grams')",
    "torch UserWarning": "import torch; torch.tensor(torch.zeros(1))",
}


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """Grade a class of slips once; the tests below read its gradebook, notebooks and feedback."""
    root = tmp_path_factory.mktemp("class")
    subs = {
        "full": full(),
        "duplicated-solution": pasted_copy(full(), "count_ngrams"),
        "deleted-tests": without(full(), *[f"test_{part}" for part in CODE]),
        "deleted-part": without(full(), "mle_prob", "test_mle_prob"),
        "big-output": with_code("count_ngrams", "print('x' * 20_000_000)\n" + CODE["count_ngrams"]),
        "stuck": with_code("mle_prob", STUCK),
        "wrong": grading.submission(
            ASSIGNMENT,
            {
                **CODE,
                "count_ngrams": CODE["count_ngrams"].replace(" + [EOS]", ""),
                "mle_prob": "def mle_prob(counts, context, word):\n    return 1 / 0",
            },
        ),
    }
    for kind, line in WARNINGS.items():
        subs[f"warns-{kind.split()[0].replace('.', '-')}"] = warning_in_count_ngrams(line)
    start = time.monotonic()
    # a short cell limit for the stuck student; honest cells of 01-ngrams take under a second
    scores = grading.grade(root, ASSIGNMENT, subs, options=["--TimeLimitedExecute.timeout=20"])
    scores["seconds"] = time.monotonic() - start
    scores["root"] = root
    return scores


def autograded(graded_class, student: str) -> nbformat.NotebookNode:
    path = graded_class["root"] / "autograder" / "autograded" / student / ASSIGNMENT / NOTEBOOK
    return nbformat.read(path, as_version=4)


def feedback_text(graded_class, student: str) -> str:
    """The feedback page as a student reads it: the HTML without its tags."""
    root = graded_class["root"]
    page = (root / "autograder" / "feedback" / student / ASSIGNMENT / "ngrams.html").read_text()
    body = page[page.index("<body") :]
    return html.unescape(re.sub(r"<[^>]*>", "", body))


def test_control_student_gets_full_marks(graded_class):
    assert graded_class["full"]["total"] == FULL


def test_duplicated_solution_cell_is_graded(graded_class):
    assert graded_class["duplicated-solution"]["total"] == FULL


def test_deleted_test_cells_are_put_back(graded_class):
    assert graded_class["deleted-tests"]["total"] == FULL
    nb = autograded(graded_class, "deleted-tests")
    for part in CODE:  # each test cell back right after its solution cell
        assert cell_index(nb, f"test_{part}") == cell_index(nb, part) + 1


def test_deleted_solution_and_test_cell_costs_only_that_part(graded_class):
    row = graded_class["deleted-part"]
    assert row["test_mle_prob"] == 0
    assert row["total"] == FULL - 2


@pytest.mark.parametrize("kind", WARNINGS)
def test_warning_on_stderr_costs_nothing(graded_class, kind):
    student = f"warns-{kind.split()[0].replace('.', '-')}"
    assert graded_class[student]["total"] == FULL
    nb = autograded(graded_class, student)
    test = nb.cells[cell_index(nb, "test_count_ngrams")]
    text = "".join(o.get("text", "") for o in test.outputs)
    assert "counting n-grams" in text or "Warning" in text, "the warning is still shown"


def test_huge_output_is_cut_by_bytes(graded_class):
    assert graded_class["big-output"]["total"] == FULL
    root = graded_class["root"] / "autograder"
    nb_bytes = (root / "autograded" / "big-output" / ASSIGNMENT / NOTEBOOK).stat().st_size
    html = (root / "feedback" / "big-output" / ASSIGNMENT / "ngrams.html").stat().st_size
    html_full = (root / "feedback" / "full" / ASSIGNMENT / "ngrams.html").stat().st_size
    assert nb_bytes < 1_000_000
    assert html < html_full + 1_000_000
    assert "output cut" in feedback_text(graded_class, "big-output")


def test_stuck_cell_keeps_the_points_before_it(graded_class):
    row = graded_class["stuck"]
    assert row["test_count_ngrams"] == 2
    assert row["total"] == 2
    nb = autograded(graded_class, "stuck")
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    stops = [o.evalue for o in errors if o.get("ename") == course.NOT_RUN]
    assert any("did not stop when interrupted" in e for e in stops)
    assert "GradingStopped" in feedback_text(graded_class, "stuck")


def test_feedback_renders_math_with_no_network(graded_class):
    # issue 28: the page loaded MathJax 2 from a CDN; it loads MathJax 3 from beside it
    feedback = graded_class["root"] / "autograder" / "feedback"
    page = (feedback / "full" / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")).read_text()
    scripts = re.findall(r'<script[^>]*src="([^"]+)"', page)
    assert scripts and not any("//" in src for src in scripts), scripts
    mathjax = [src for src in scripts if "mathjax" in src.lower()]
    assert mathjax, scripts
    for src in mathjax:  # each resolves, from the page's folder, to a file that is there
        assert (feedback / "full" / ASSIGNMENT / src).resolve().is_file(), src
    # $...$ is math, as in the notebook: MathJax's configuration is a file beside the page (the
    # feedback's Content-Security-Policy allows no inline script)
    here = feedback / "full" / ASSIGNMENT
    loaded = [(here / src).resolve() for src in scripts]
    assert any("inlineMath" in f.read_text(errors="replace") for f in loaded if f.is_file())
    typeset_offline(feedback, f"full/{ASSIGNMENT}/{NOTEBOOK.replace('.ipynb', '.html')}")


def typeset_offline(folder: Path, page: str) -> None:
    """Open ``folder/page`` in Chromium, served on localhost with every other request aborted, and
    check that MathJax typeset its formulas (skipped where no browser runs, as the book's test)."""
    import functools
    import http.server
    import threading

    from test_browser import ARGS, CHROMIUM, QuietHandler, sync_playwright

    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with sync_playwright()() as p:
            try:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            except Exception as error:  # noqa: BLE001 - a browser that cannot start: a skip
                pytest.skip(f"chromium does not start: {error}")
            tab = browser.new_page()
            tab.set_default_timeout(180_000)  # a busy machine: 2 MB of MathJax to read and run
            local = re.compile(r"https?://127\.0\.0\.1[:/]")
            tab.route("**/*", lambda r: r.continue_() if local.match(r.request.url) else r.abort())
            tab.goto(f"http://127.0.0.1:{server.server_address[1]}/{page}")
            tab.wait_for_function(
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise"
            )
            typeset = tab.evaluate(
                "() => MathJax.startup.promise.then("
                "() => document.querySelectorAll('mjx-container').length)"
            )
            browser.close()
    finally:
        server.shutdown()
    assert typeset > 0, "no formula was typeset"


def test_feedback_shows_the_message_and_nothing_else(graded_class):
    text = feedback_text(graded_class, "wrong")
    for shown in ("count_ngrams gives a wrong answer", "expected:", "got:", "hint:"):
        assert shown in text
    assert "mle_prob raised ZeroDivisionError" in text
    assert re.search(r"----> 2\s+return 1 / 0", text)  # the student's own frame: the failing line
    for student in graded_class:
        if student in ("csv", "seconds", "root"):
            continue
        text = feedback_text(graded_class, student)
        assert "Traceback (most recent call last)" not in text, student
        assert "nlpcourse/checks" not in text, f"{student}'s feedback shows the checker's frames"
        assert "hidden=True" not in text, f"{student}'s feedback shows the hidden tests"
        for path in (grading.REPO, graded_class["root"], Path(sys.prefix)):
            assert str(path) not in text, f"{student}'s feedback shows {path}"


# -- the limits themselves, on small notebooks -------------------------------------------------


def execute(sources: list[str], **limits) -> tuple[nbformat.NotebookNode, float]:
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    start = time.monotonic()
    course.TimeLimitedExecute(**limits).preprocess(nb, {})
    return nb, time.monotonic() - start


def errors(cell) -> list[str]:
    return [f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error"]


def test_cell_limit_interrupts_and_the_notebook_goes_on():
    nb, _ = execute(["import time\ntime.sleep(60)", "x = 1\nprint(x)"], timeout=3)
    assert any("ran past the limit of 3 s per cell" in e for e in errors(nb.cells[0]))
    assert not errors(nb.cells[1]) and nb.cells[1].outputs[0].text == "1\n"


def test_cell_that_ignores_the_interrupt_stops_the_notebook_not_the_class():
    nb, seconds = execute(["x = 1", STUCK + "mle_prob(0, 0, 0)", "y = 2"], timeout=3)
    assert not errors(nb.cells[0])
    assert any("did not stop when interrupted" in e for e in errors(nb.cells[1]))
    assert any(e.startswith(f"{course.NOT_RUN}: not run") for e in errors(nb.cells[2]))
    assert seconds < 60


def test_dead_kernel_keeps_the_cells_before_it():
    nb, _ = execute(["x = 1", "import os\nos._exit(1)", "y = 2"], timeout=30)
    assert not errors(nb.cells[0])
    assert any("kernel died" in e for e in errors(nb.cells[1]))
    assert errors(nb.cells[2])


def test_notebook_limit_stops_a_notebook_of_slow_cells():
    cells = ["x = 1"] + ["import time\ntime.sleep(2)"] * 10
    nb, seconds = execute(cells, timeout=30, notebook_timeout=12)
    assert not errors(nb.cells[0])
    assert any("12 s for the whole notebook" in e for e in errors(nb.cells[-1]))
    assert seconds < 12 + 20  # the limit, and the kernel's start and shutdown


def test_output_is_capped_by_bytes_and_errors_are_always_kept():
    sources = ["print('x' * 5_000_000)", "print('y' * 3000)", "print('z')", "1 / 0"]
    nb, _ = execute(sources, max_cell_bytes=2000, max_notebook_bytes=3000)
    first = "".join(o.text for o in nb.cells[0].outputs)
    assert first.startswith("x" * 1000) and "output cut" in first and len(first) < 2500
    assert "output cut" in "".join(o.text for o in nb.cells[1].outputs)
    third = "".join(o.text for o in nb.cells[2].outputs)  # nothing left of the notebook's budget
    assert "z" not in third.split("[")[0] and "output cut" in third
    assert errors(nb.cells[3]) == ["ZeroDivisionError: division by zero"]


# -- the preprocessors on hand-made cells (no kernel) -------------------------------------------


def graded_notebook() -> nbformat.NotebookNode:
    """The release notebook, with the nbgrader metadata that ``generate_assignment`` wrote."""
    return nbformat.read(grading.notebook_path(grading.REPO / "exercises", ASSIGNMENT), 4)


def test_remove_duplicate_ids_leaves_valid_metadata():
    from nbgrader.nbgraderformat import MetadataValidator, SchemaTooOldError
    from nbgrader.preprocessors import DeduplicateIds

    pasted = pasted_copy(graded_notebook(), "test_mle_prob")
    nbgraders, _ = DeduplicateIds().preprocess(copy.deepcopy(pasted), {})
    with pytest.raises(SchemaTooOldError):  # nbgrader's own: the reason a class run stopped
        MetadataValidator().validate_nb(nbgraders)
    ours, _ = course.RemoveDuplicateIds().preprocess(copy.deepcopy(pasted), {})
    MetadataValidator().validate_nb(ours)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in ours.cells]
    assert ids.count("test_mle_prob") == 1 and ids[-1] == "test_mle_prob"  # the last copy
    assert len(ours.cells) == len(pasted.cells)


def test_stderr_is_kept_as_text_and_costs_nothing():
    from nbgrader.utils import determine_grade

    nb = graded_notebook()
    cell = nb.cells[cell_index(nb, "test_count_ngrams")]
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stderr", text="RuntimeWarning: divide by zero\n"),
        nbformat.v4.new_output("stream", name="stdout", text="count_ngrams: all 8 cases pass\n"),
    ]
    assert determine_grade(cell)[0] == 0  # nbgrader's rule: stderr in a test cell is a failure
    course.StderrIsNotAnError()(nb, {})  # as nbgrader calls it (IgnorePattern is off by default)
    assert determine_grade(cell)[0] == 2
    assert "divide by zero" in cell.outputs[0].text


# -- the limits fit every assignment with a wide margin -----------------------------------------


def configured_limits() -> tuple[float, float]:
    """The per-cell and per-notebook limits that ``nbgrader_config.py`` sets."""
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(grading.CONFIG_DIR)).load_config()
    return config.TimeLimitedExecute.timeout, config.TimeLimitedExecute.notebook_timeout


@pytest.mark.parametrize(
    "assignment", sorted(p.name for p in (grading.REPO / "solutions").iterdir() if p.is_dir())
)
def test_time_limits_fit_every_solution_five_times_over(assignment):
    cell_limit, notebook_limit = configured_limits()
    timing = grading.solution_timing(assignment)
    # CPU time of the kernel: what a busy machine does not inflate (wall-clock times are printed
    # by `python autograder/grading.py timing`)
    slowest = max(cpu for _, cpu, _ in timing["cells"])
    assert 5 * slowest <= cell_limit, f"{assignment}: a cell used {slowest:.1f} s of CPU"
    assert 5 * timing["notebook_cpu"] <= notebook_limit
