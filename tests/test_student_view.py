"""Tests of the student view of nlpcourse (autograder/student_view.py), issue 40 section 2: while a
student's code runs in the sandbox, nothing of the package that computes what a part grades may
answer, by construction rather than by a list.

Oracles: the view itself, imported by a separate Python as the worker imports it, and walked
whole (every module, every public and private name, every method of every class), each callable
called; the setup cells' own import lines, read with a regular expression (not the syntax-tree
reading under test), for what may answer; and the sandboxed grader's points for submissions whose
parts only call the package (the issue's four functions earned full points before).
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the autograder package, as `python -m autograder` sees it

from autograder import grading, student_view  # noqa: E402
from autograder.results import Limits  # noqa: E402
from autograder.sandbox import grade_submission  # noqa: E402
from nlpcourse.guard import INPUT_MODULES  # noqa: E402

# Walks the view in a fresh interpreter (python -I, the view first on sys.path, as the worker):
# prints {qualified name: "refused" | "answered" | other exception} as JSON.
WALK = r"""
import importlib, inspect, json, pkgutil, sys, types
sys.path.insert(0, sys.argv[1])
import nlpcourse
from nlpcourse.guard import ReferenceUsedError
assert nlpcourse.__file__.startswith(sys.argv[1]), nlpcourse.__file__
seen = {}

def attempt(name, call):
    try:
        call()
        seen[name] = "answered"
    except ReferenceUsedError:
        seen[name] = "refused"
    except Exception as err:
        seen[name] = type(err).__name__

def walk_class(name, cls, depth=0):
    attempt(name, lambda: cls())
    for attr, value in vars(cls).items():
        inner = getattr(value, "__func__", value)
        if isinstance(inner, types.FunctionType):
            attempt(f"{name}.{attr}", lambda f=inner: f(object(), 1, 2))
        elif isinstance(value, type) and depth < 5:
            walk_class(f"{name}.{attr}", value, depth + 1)

modules = [nlpcourse] + [
    importlib.import_module(info.name)
    for info in pkgutil.walk_packages(nlpcourse.__path__, "nlpcourse.")
]
for module in modules:
    if module.__name__ == "nlpcourse.guard":
        continue  # the guard itself: it defines the error and computes no answer
    attempt(f"{module.__name__}.<a name the view left out>", lambda m=module: m.NOT_A_NAME_1234)
    for attr in [a for a in dir(module) if a != "__getattr__"]:  # tested just above
        value = getattr(module, attr)
        name = f"{module.__name__}.{attr}"
        if isinstance(value, type) and value.__module__.startswith("nlpcourse"):
            walk_class(name, value)
        elif callable(value) and str(getattr(value, "__module__", "")).startswith("nlpcourse"):
            attempt(name, lambda f=value: f(1, 2))  # functions, and wrappers (functools.cache)
print(json.dumps(seen))
"""


def walk(view: Path) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-I", "-c", WALK, str(view)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout)


def setup_imports() -> set[str]:
    """``module.name`` of every name a setup cell imports from nlpcourse, read line by line."""
    names = set()
    for source in student_view.setup_cells():
        for module, listed in re.findall(
            r"^from (nlpcourse[\w.]*) import ([\w, ]+)$", source, re.M
        ):
            names |= {f"{module}.{name.strip()}" for name in listed.split(",")}
    return names


def test_nothing_in_the_view_answers_but_what_the_setup_cells_use():
    seen = walk(student_view.cached_view())
    answered = {name for name, outcome in seen.items() if outcome != "refused"}
    imported = setup_imports()
    assert imported == {
        "nlpcourse.examples.i_am_nlp",
        "nlpcourse.examples.SCHOOL_TAGS",
        "nlpcourse.examples.i_go_to_school_log",
    }  # if this changes, the setup cells changed: the rest of the test still holds
    # The inputs answer: the worked examples (the setup cells import them) and the corpus
    # loaders (a student's cell loads Brown as the book does, and nbgrader's route gives it its
    # points); no part grades them. Nothing of any other module answers.
    assert INPUT_MODULES == ("nlpcourse.examples", "nlpcourse.data")
    assert {name.rsplit(".", 1)[0] for name in imported} <= set(INPUT_MODULES)
    outside = {n for n in answered if not n.startswith(tuple(m + "." for m in INPUT_MODULES))}
    assert not outside, outside
    assert imported - {"nlpcourse.examples.SCHOOL_TAGS"} <= answered
    assert {"nlpcourse.data.brown_sents", "nlpcourse.data.universal_tag"} <= answered
    # and the walk saw the whole package: the issue's four, private names, methods, constants,
    # what an input module imports from a chapter (the parse trees, whose rules and spans are
    # answers of chapter 3)
    for name in (
        "nlpcourse.ngram.kn_prob",
        "nlpcourse.parsing._as_pcfg",
        "nlpcourse.parsing.PCFG.log_likelihoods",
        "nlpcourse.parsing_fast.log_likelihoods",
        "nlpcourse.seq2seq.align",
        "nlpcourse.transformer.causal_mask_last",
        "nlpcourse.ngram.NGramLM.prob",
        "nlpcourse.ngram.<a name the view left out>",
        "nlpcourse.data.Tree",
        "nlpcourse.trees.Tree.rules",
        "nlpcourse.trees.Tree.spans",
    ):
        assert seen.get(name) == "refused", (name, seen.get(name))
    assert len(seen) > 300


def test_every_function_body_of_the_view_is_a_refusal_but_the_inputs():
    view = student_view.cached_view() / "nlpcourse"

    bodies = 0
    for path in sorted(view.rglob("*.py")):
        if path.name == "guard.py" and path.parent == view:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if node.name == "__getattr__":  # the view's own, raising on each path (walked above)
                assert all(isinstance(s, ast.If | ast.Assign | ast.Raise) for s in node.body)
                continue
            statements = [s for s in node.body if not isinstance(s, ast.Expr)]  # docstring
            refuses = len(statements) == 1 and isinstance(statements[0], ast.Raise)
            if not refuses:
                bodies += 1
                where = f"{path.relative_to(view)}:{node.name}"
                assert path.name in ("examples.py", "data.py") and path.parent == view, where
    assert bodies > 10  # the inputs' code is there


NEW_MODULE = '''"""A chapter added after the view was written."""
import math


def new_answer(x):
    return math.sqrt(x)


class NewModel:
    def __init__(self):
        self.table = {1: 2}

    def predict(self, x):
        return self.table.get(x)

    @staticmethod
    def helper(x):
        return x + 1


ANSWERS = {"architecture": "encoder-decoder"}
'''


def test_a_function_added_to_the_package_is_covered_without_listing_it(tmp_path):
    package = tmp_path / "src" / "nlpcourse"
    shutil.copytree(student_view.PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "newchapter.py").write_text(NEW_MODULE)
    with (package / "ngram.py").open("a") as file:
        file.write("\n\ndef _another_private_answer(counts):\n    return sum(counts.values())\n")
    student_view.build_view(tmp_path / "view", package)
    seen = walk(tmp_path / "view")
    for name in (
        "nlpcourse.newchapter.new_answer",
        "nlpcourse.newchapter.NewModel",
        "nlpcourse.newchapter.NewModel.predict",
        "nlpcourse.newchapter.NewModel.helper",
        "nlpcourse.newchapter.<a name the view left out>",
        "nlpcourse.ngram._another_private_answer",
    ):
        assert seen[name] == "refused", (name, seen.get(name))
    assert "nlpcourse.newchapter.ANSWERS" not in seen  # data left out: reading it refuses
    code = "import sys; sys.path.insert(0, sys.argv[1])\nfrom nlpcourse.newchapter import ANSWERS"
    done = subprocess.run(
        [sys.executable, "-I", "-c", code, str(tmp_path / "view")], capture_output=True, text=True
    )
    assert "ReferenceUsedError" in done.stderr and "nlpcourse.newchapter.ANSWERS" in done.stderr


def test_a_student_may_still_import_any_name_and_call_it_only_to_be_refused():
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from nlpcourse.ngram import kn_prob\n"  # importing works, as in JupyterLab
        "import nlpcourse.parsing as parsing\n"
        "from nlpcourse import examples\n"
        "print(examples.i_am_nlp()[0])\n"
        "try:\n"
        "    kn_prob({}, (), 'a', 3)\n"
        "except Exception as err:\n"
        "    print(type(err).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", code, str(student_view.cached_view())],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split("\n")[:2] == ["['I', 'am', 'NLP']", "ReferenceUsedError"]


# The issue's four: a part whose body only calls the package earned its points by both routes.
CHEATS = {
    ("01-ngrams", "kn_bigram_prob", "test_kn_bigram_prob"): (
        "from nlpcourse.ngram import kn_prob\n"
        "def kn_bigram_prob(bigram_counts, context, word, vocab_size, d=0.75):\n"
        "    return kn_prob(bigram_counts, context, word, vocab_size, d)\n"
    ),
    ("03-parsing", "inside", "test_inside"): (
        "from nlpcourse.parsing import _as_pcfg\n"
        "def inside(rules, words):\n"
        "    return float(_as_pcfg(rules).log_likelihoods([words])[0])\n"
    ),
    ("05-seq2seq", "edit_distance", "test_edit_distance"): (
        "from nlpcourse.seq2seq import align\n"
        "def edit_distance(a, b):\n"
        "    return sum(p != r for p, r in align(list(a), list(b)))\n"
    ),
    ("06-transformer", "causal_mask", "test_causal_mask"): (
        "from nlpcourse.transformer import causal_mask_last\n"
        "def causal_mask(T):\n"
        "    return causal_mask_last(T, T)\n"
    ),
}


@pytest.mark.parametrize("key", CHEATS, ids=[k[0] for k in CHEATS])
def test_the_issues_four_functions_earn_nothing_in_the_sandbox(key):
    assignment, function, part = key
    code = grading.solution_code(assignment)
    code[function] = CHEATS[key]
    notebook = grading.submission(assignment, code)
    source_path = grading.notebook_path(REPO / "solutions", assignment)
    result = grade_submission(
        json.dumps(notebook).encode(),
        source_path.name,
        json.loads(source_path.read_text()),
        assignment=assignment,
        student="s",
        limits=Limits(call_seconds=20.0, notebook_seconds=120.0),
        expected_name=source_path.name,
    )
    earned = {p.grade_id: p for p in result.parts}
    assert earned[part].points == 0, earned[part]
    assert "switched off" in earned[part].message, earned[part].message
    others = [p for p in result.parts if p.grade_id != part]
    assert all(p.points == p.max_points for p in others), others
