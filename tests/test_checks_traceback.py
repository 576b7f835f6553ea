"""What a student sees in Jupyter when a check fails: their own cell's line and the message.

Each test runs a small notebook through a real IPython kernel (nbclient, as JupyterLab's kernel
runs it) and reads the error output the kernel sends back: its traceback must show the student's
frames (the ``Cell In[...]`` blocks) and the check's message, and nothing of the checker's files
(``nlpcourse/checks/``). The oracle is the kernel's own rendering, not the checks' code.
"""

import re

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _error_of_last_cell(*sources: str) -> dict:
    """Run the cells in one kernel; the error output of the last one (which must fail)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)"}
    client = NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True)
    client.execute()
    errors = [o for o in nb.cells[-1].outputs if o.output_type == "error"]
    assert errors, nb.cells[-1].outputs
    return errors[0]


def _text(error: dict) -> str:
    return ANSI.sub("", "\n".join(error["traceback"]))


@pytest.mark.parametrize(
    "student,check_cell,message",
    [
        (  # a wrong answer
            "def edit_distance(a, b):\n    return abs(len(a) - len(b)) + 7\n",
            "from nlpcourse.checks.seq2seq import check_edit_distance\n\n"
            "check_edit_distance(edit_distance)\n",
            "edit_distance gives a wrong answer on case 1",
        ),
        (  # a function that raises: its own line is shown, then the message
            "def edit_distance(a, b):\n    return len(a) / (len(b) - len(b))\n",
            "from nlpcourse.checks.seq2seq import check_edit_distance\n\n"
            "check_edit_distance(edit_distance)\n",
            "edit_distance raised ZeroDivisionError",
        ),
    ],
)
def test_a_failed_check_shows_the_students_frames_and_the_message_only(
    student, check_cell, message
):
    error = _error_of_last_cell(student, check_cell)
    text = _text(error)
    assert error["ename"] == "CheckFailed" and message in error["evalue"]
    assert message in text
    assert "check_edit_distance(edit_distance)" in text  # the student's test cell line
    assert "nlpcourse/checks" not in text and "core.py" not in text, text
    assert "run_check" not in text and "_check_case" not in text, text
    if "raised" in message:
        assert "len(a) / (len(b) - len(b))" in text  # the line of the student's function
    assert len(text.splitlines()) < 40, text


def test_a_failing_student_function_outside_a_check_keeps_its_full_traceback():
    """Only the checks' own failures are trimmed: any other error shows IPython's traceback."""
    error = _error_of_last_cell("import json\njson.loads('{')\n")
    assert error["ename"] == "JSONDecodeError"
    assert "json/decoder.py" in _text(error) or "decoder.py" in _text(error)


def test_nbclient_raises_on_the_check_cell_with_the_message():
    """Run All stops at the failing check with the message (what `nbconvert --execute` shows)."""
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("def edit_distance(a, b):\n    return 7\n"),
            nbformat.v4.new_code_cell(
                "from nlpcourse.checks.seq2seq import check_edit_distance\n"
                "check_edit_distance(edit_distance)\n"
            ),
        ]
    )
    with pytest.raises(CellExecutionError) as err:
        NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    assert "expected: 0" in str(err.value) and "nlpcourse/checks" not in str(err.value)
