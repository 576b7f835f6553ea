"""Mutation testing of the exercise checks, part by part (issue 42, section 6).

The reference solution of each part (its solution cell in ``solutions/``) is changed by one small
edit of its syntax tree at a time: an operator swapped (+ and -, * and /, < and <=, ...), an
integer constant moved by one (an index, an axis, an initial value), a float constant changed, a
term of a sum or product dropped, the first two arguments of a call swapped, a unary minus
dropped, ``max`` and ``min`` (and methods such as ``sum`` and ``mean``) swapped, a condition
negated, a keyword argument dropped, a variable read as itself plus one or as another of the
function's variables, a method call or an index dropped. Each mutant is run through the part's
visible check, and, if that passes it, through the hidden check. A mutant the hidden cases kill
and the visible cases miss fails the test: the self-check would pass an answer the grade fails. A
mutant both pass is equivalent (it computes the same thing, or differs only where no case can
reach); each is listed in ``EQUIVALENT`` with the reason, and a survivor not listed fails the test
too. The test prints, per part: the mutants, how many the visible check killed, and the
equivalent ones.

At most ``PER_PART`` mutants per part, spread evenly over the sites found (a solution of one or
two lines has fewer than 20 such edits: it gets all of them), each given
``TIME_LIMIT`` seconds for each check: a mutant that runs past it on the visible check is killed (as
the notebook's own run would show); one that passes the visible check and runs past it on the
hidden one is counted as too slow to tell (reported, not failed: its answers were right so far).
"""

import ast
import copy
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from nlpcourse.checks import CheckFailed

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "solutions").glob("*/*.ipynb"))
PER_PART = 24  # mutants per part (at least 20 where the solution has that many sites)
TIME_LIMIT = 20  # seconds for one mutant's visible and hidden checks

SHAPE = "only its shape is read, and adding 1 keeps the shape"
SHIFT = "adding the same number to every score of a row changes no softmax and no argmax"
DEFAULT = "every case passes this argument, so its default value is never used"
STRICT = "every case gives sequences of equal length, so zip's strict= changes nothing"
SAME_START = "both start from zero (0 and 0.0 are the same number)"
OUTSIDE = "the extra loop reaches only cells outside the sentence or empty cells, which add nothing"
ONE_LEXICAL = "a grammar has one rule per nonterminal and word, so a cell's first value is its best"

# (part, the text of the line the mutant edits, the edit): why it computes what the solution
# computes on every input the exercise allows (a mutant both checks pass must be listed here, or
# the test fails). A line is named by its text, its comment left out, not by its number, which
# moves when a line is added above it; a listed mutant that the solution no longer makes fails
# test_every_listed_equivalent_mutant_is_one_of_the_parts_mutants.
EQUIVALENT: dict[tuple[str, str, str], str] = {
    (
        "addk_prob",
        "def addk_prob(counts, context, word, vocab_size, k=1.0):",
        "1.0 -> 2.0",
    ): DEFAULT,
    (
        "addk_tables",
        "def addk_tables(tagged_sentences, tags, words, k=1.0):",
        "1.0 -> 2.0",
    ): DEFAULT,
    ("layer_norm", "def layer_norm(x, gamma, beta, eps=1e-5):", "1e-05 -> 1.00001"): DEFAULT,
    ("perplexity", "total_log, N = 0.0, 0", "the first two items of a tuple swapped"): SAME_START,
    ("forward", "for t in range(1, len(log_emit)):", "log_emit -> log_emit + 1"): SHAPE,
    (
        "tagging_accuracy",
        "for (word, gold), tag in zip(sentence, tags, strict=True):",
        "the argument strict= dropped",
    ): STRICT,
    ("count_parses", "for k in range(i + 1, j):", "Add keeps only its right term"): OUTSIDE,
    (
        "masked_softmax",
        "return torch.softmax(scores.masked_fill(~mask, -math.inf), dim=-1)",
        "unary minus dropped (2nd)",
    ): "dim=1 is dim=-1 for (B, S) scores",
    (
        "masked_softmax",
        "return torch.softmax(scores.masked_fill(~mask, -math.inf), dim=-1)",
        "scores -> scores + 1",
    ): SHIFT,
    ("greedy_decode", "y = int(torch.argmax(log_probs))", "log_probs -> log_probs + 1"): SHIFT,
    (
        "scaled_dot_product_attention",
        "weights = torch.softmax(scores, dim=-1)",
        "scores -> scores + 1",
    ): SHIFT,
    (
        "scaled_dot_product_attention",
        'scores = scores.masked_fill(~mask, float("-inf"))',
        "scores -> scores + 1",
    ): SHIFT,
    (
        "scaled_dot_product_attention",
        "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)",
        "k -> k + 1",
    ): ("the scores of a query all grow by the sum of the query over sqrt(d_k): " + SHIFT),
    (
        "causal_mask",
        "return torch.ones(T, T, dtype=torch.bool).tril()",
        "the argument dtype= dropped",
    ): ("a mask of 1.0 and 0.0 is accepted as the booleans it stands for"),
    (
        "split_heads",
        "return x.view(B, T, H, D // H).transpose(1, 2)",
        "the first two arguments of a call swapped",
    ): ("transpose(2, 1) is transpose(1, 2)"),
    ("split_heads", "B, T, D = x.shape", "x -> x + 1"): SHAPE,
    ("merge_heads", "B, H, T, Dh = x.shape", "x -> x + 1"): SHAPE,
    (
        "merge_heads",
        "return x.transpose(1, 2).reshape(B, T, H * Dh)",
        "the first two arguments of a call swapped (2nd)",
    ): ("transpose(2, 1) is transpose(1, 2)"),
    (
        "kn_bigram_prob",
        "max(n_left[word] - d, 0) / len(bigram_types)",
        "the first two arguments of a call swapped",
    ): "max is symmetric",
    ("viterbi", "backptr = np.zeros((T, N), dtype=int)", "the argument dtype= dropped"): (
        "a back pointer stored as a float is read back through int()"
    ),
    ("viterbi", "path = [int(np.argmax(delta))]", "delta -> delta + 1"): SHIFT,
    ("rnn_backward", "for t in range(len(x), 0, -1):", "x -> x + 1"): SHAPE,
    ("cky_recognize", "for k in range(i + 1, j):", "1 -> 0"): OUTSIDE,
    ("count_parses", "for i in range(n - length + 1):", "Sub -> Add"): OUTSIDE,
    ("count_parses", "for i in range(n - length + 1):", "n -> n + 1"): OUTSIDE,
    (
        "viterbi_cky",
        "if rhs == (word,) and logp > delta[(i, i + 1)].get(lhs, -math.inf):",
        "lhs -> logp",
    ): ONE_LEXICAL,
    (
        "viterbi_cky",
        "if rhs == (word,) and logp > delta[(i, i + 1)].get(lhs, -math.inf):",
        "1 -> 0",
    ): ONE_LEXICAL,
    ("viterbi_cky", "if score > delta[(i, j)].get(lhs, -math.inf):", "Gt -> GtE"): (
        "no case has two best derivations (tests/test_checks_ties.py), so >= and > choose alike"
    ),
    ("inside", "if a == -math.inf:", "a -> b"): (
        "with a = -inf the sum falls through to max(a, b) + log1p(exp(-inf)) = b, as before"
    ),
    ("inside", "for k in range(i + 1, j):", "j -> j + 1"): OUTSIDE,
    ("parseval", "return start + 1", "Add -> Sub"): (
        "the words are numbered downwards in gold and predicted trees alike: the same brackets "
        "match"
    ),
    (
        "edit_distance",
        "current = [i] + [0] * len(b)",
        "0 -> 1",
    ): "every entry but the first is overwritten before read",
    (
        "dot_attention",
        "weights = torch.softmax(scores.masked_fill(~mask, -math.inf), dim=-1)",
        "scores -> scores + 1",
    ): SHIFT,
    (
        "beam_search",
        "for v, lp in enumerate(log_probs.tolist()):",
        "the call .tolist(...) dropped",
    ): ("iterating over the tensor gives the same numbers, as 0-d tensors"),
    (
        "beam_search",
        "candidates.append((score, ys, s, True))",
        "s -> s + 1",
    ): "an ended hypothesis's state is never read again",
    (
        "sinusoidal_encoding",
        "t = torch.arange(T, dtype=torch.float64)[:, None]",
        "the argument dtype= dropped",
    ): ("the angles are float64 anyway: the positions are divided by a float64 tensor"),
    (
        "sinusoidal_encoding",
        "two_i = torch.arange(0, D, 2, dtype=torch.float64)",
        "the argument dtype= dropped",
    ): ("the angles are float64 anyway: the exponents are divided by D and raise a float"),
}


def _line_text(line: str) -> str:
    """A source line as a mutant's description names it: stripped, its comment left out."""
    return line.split("  #")[0].strip()


def describe(line: str, edit: str) -> str:
    """The description of the mutant that makes ``edit`` on the line whose text is ``line``."""
    return f"`{_line_text(line)}`: {edit}"


LISTED = {(part, describe(line, edit)): why for (part, line, edit), why in EQUIVALENT.items()}


class TooSlow(BaseException):  # not an Exception: run_check must not take it for the student's
    """A mutant ran past TIME_LIMIT (a loop that never ends, say)."""


def _cells(notebook: Path) -> list[tuple[str, str, str]]:
    """(grade_id, kind, source) of the notebook's graded cells: kind "setup", "solution" or
    "test"."""
    out = []
    for cell in json.loads(notebook.read_text())["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] != "code" or not meta.get("grade_id"):
            continue
        kind = "solution" if meta.get("solution") else "test" if meta.get("grade") else "setup"
        out.append((meta["grade_id"], kind, "".join(cell["source"])))
    return out


def _check_call(test_source: str) -> tuple[str, str]:
    """The check module and function a test cell calls (``from M import check_x``)."""
    line = next(x for x in test_source.splitlines() if x.startswith("from nlpcourse.checks"))
    module, name = line.removeprefix("from ").split(" import ")
    return module.strip(), name.strip()


# ------------------------------------------------------------------------------ the mutants

SWAPS = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.MatMult: ast.Mult,
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.And: ast.Or, ast.Or: ast.And, ast.In: ast.NotIn,
}  # fmt: skip


def _sites(tree: ast.AST, source: str) -> Iterator[tuple[str, object]]:
    """(description, how) of every edit this file knows, in ``ast.walk`` order. A description
    names the line of ``source`` it edits by its text, not its number (a number moves when a line
    is added above; the text stays), and counts repeats: the second edit of the same kind on a
    line of the same text ends in "(2nd)"."""
    seen: dict[str, int] = {}
    for description, how in _raw_sites(tree, source.splitlines()):
        seen[description] = seen.get(description, 0) + 1
        count = seen[description]
        yield description + (f" ({_ordinal(count)})" if count > 1 else ""), how


def _ordinal(n: int) -> str:
    return f"{n}" + {2: "nd", 3: "rd"}.get(n, "th")


def _raw_sites(tree: ast.AST, lines: list[str]) -> Iterator[tuple[str, object]]:
    """(description, how) of every edit, the description starting with the edited line's text."""
    local = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)} | {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }  # the function's own variables (not modules or builtins)
    for node in ast.walk(tree):
        number = getattr(node, "lineno", None)
        where = f"`{_line_text(lines[number - 1])}`" if number else "`?`"
        if isinstance(node, ast.BinOp | ast.BoolOp) and type(node.op) in SWAPS:
            yield (
                f"{where}: {type(node.op).__name__} -> {SWAPS[type(node.op)].__name__}",
                (
                    "op",
                    node,
                ),
            )
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in SWAPS:
                    yield (
                        f"{where}: {type(op).__name__} -> {SWAPS[type(op)].__name__}",
                        (
                            "cmp",
                            node,
                            i,
                        ),
                    )
        if isinstance(node, ast.Constant) and type(node.value) is int:
            for delta in (1, -1):
                yield f"{where}: {node.value} -> {node.value + delta}", ("int", node, delta)
        if isinstance(node, ast.Constant) and type(node.value) is float:
            yield f"{where}: {node.value} -> {node.value + 1.0}", ("float", node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult):
            for side in ("left", "right"):
                yield (
                    f"{where}: {type(node.op).__name__} keeps only its {side} term",
                    (
                        "drop",
                        node,
                        side,
                    ),
                )
        if isinstance(node, ast.Call) and len(node.args) >= 2:
            yield f"{where}: the first two arguments of a call swapped", ("args", node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            yield f"{where}: unary minus dropped", ("neg", node)
        if isinstance(node, ast.Name) and node.id in ("max", "min"):
            yield f"{where}: {node.id} -> {'min' if node.id == 'max' else 'max'}", ("name", node)
        if isinstance(node, ast.Attribute) and node.attr in ATTRIBUTES:
            yield f"{where}: .{node.attr} -> .{ATTRIBUTES[node.attr]}", ("attr", node)
        if isinstance(node, ast.If | ast.While | ast.IfExp):
            yield f"{where}: the condition negated", ("not", node)
        if isinstance(node, ast.Call):
            for i, keyword in enumerate(node.keywords):
                yield f"{where}: the argument {keyword.arg}= dropped", ("keyword", node, i)
        if isinstance(node, ast.Tuple) and len(node.elts) >= 2:
            yield f"{where}: the first two items of a tuple swapped", ("tuple", node)
        if isinstance(node, ast.Constant) and type(node.value) is bool:
            yield f"{where}: {node.value} -> {not node.value}", ("bool", node)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in local:
            yield f"{where}: {node.id} -> {node.id} + 1", ("plus1", node)
            names = sorted(local)
            other = names[(names.index(node.id) + 1) % len(names)]
            if other != node.id:
                yield f"{where}: {node.id} -> {other}", ("rename", node, other)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if not isinstance(node.func.value, ast.Name) or node.func.value.id in local:
                yield f"{where}: the call .{node.func.attr}(...) dropped", ("call", node)
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            yield f"{where}: the index [...] dropped", ("subscript", node)
        if isinstance(node, ast.comprehension) and node.ifs:
            yield f"{where}: the condition of a comprehension dropped", ("ifs", node)


ATTRIBUTES = {  # a method or function swapped for its usual confusion
    "sum": "mean", "mean": "sum", "max": "min", "min": "max", "argmax": "argmin",
    "argmin": "argmax", "exp": "log", "log": "exp", "tanh": "sigmoid", "sigmoid": "tanh",
    "logaddexp": "maximum", "maximum": "logaddexp", "tril": "triu", "triu": "tril",
    "sin": "cos", "cos": "sin", "sqrt": "exp", "transpose": "permute", "append": "remove",
}  # fmt: skip


class _Apply(ast.NodeTransformer):
    """Applies one edit, found by the position of its node in ``ast.walk`` order."""

    def __init__(self, target: ast.AST, how: tuple):
        self.target, self.how = target, how

    def generic_visit(self, node: ast.AST) -> ast.AST:
        node = super().generic_visit(node)
        if node is not self.target:
            return node
        kind = self.how[0]
        if kind == "op":
            node.op = SWAPS[type(node.op)]()
        elif kind == "cmp":
            node.ops[self.how[2]] = SWAPS[type(node.ops[self.how[2]])]()
        elif kind == "int":
            node.value += self.how[2]
        elif kind == "float":
            node.value += 1.0
        elif kind == "drop":
            return getattr(node, self.how[2])
        elif kind == "args":
            node.args[0], node.args[1] = node.args[1], node.args[0]
        elif kind == "neg":
            return node.operand
        elif kind == "name":
            node.id = "min" if node.id == "max" else "max"
        elif kind == "attr":
            node.attr = ATTRIBUTES[node.attr]
        elif kind == "not":
            node.test = ast.UnaryOp(ast.Not(), node.test)
        elif kind == "keyword":
            del node.keywords[self.how[2]]
        elif kind == "tuple":
            node.elts[0], node.elts[1] = node.elts[1], node.elts[0]
        elif kind == "bool":
            node.value = not node.value
        elif kind == "ifs":
            node.ifs = []
        elif kind == "rename":
            node.id = self.how[2]
        elif kind == "plus1":
            return ast.BinOp(node, ast.Add(), ast.Constant(1))
        elif kind == "call":
            return node.func.value
        elif kind == "subscript":
            return node.value
        return node


def mutants(source: str, limit: int | None = PER_PART) -> list[tuple[str, str]]:
    """(description, source) of up to PER_PART mutants of ``source``: sites spread evenly over
    the source first, then the others, skipping edits that change nothing."""
    tree = ast.parse(source)
    n = len(list(_sites(tree, source)))
    spread = sorted({int(i * n / PER_PART) for i in range(PER_PART)} & set(range(n)))
    order = spread + [i for i in range(n) if i not in spread]
    out: list[tuple[str, str]] = []
    for index in order:
        if len(out) == limit:
            break
        copied = copy.deepcopy(tree)
        description, how = list(_sites(copied, source))[index]
        text = ast.unparse(ast.fix_missing_locations(_Apply(how[1], how).visit(copied)))
        if text != ast.unparse(tree) and text not in (t for _, t in out):
            out.append((description, text))
    return out


# ------------------------------------------------------------------------------ running them


def _alarm(signum, frame):
    raise TooSlow


def _verdict(check, function, hidden: bool) -> str:
    """ "killed" (the check fails the mutant), "slow" (it ran past the time limit) or "passed"."""
    try:
        with np.errstate(all="ignore"):
            check(function, hidden=hidden)
    except CheckFailed:
        return "killed"
    except TooSlow:
        return "slow"
    return "passed"


def _parts() -> list:
    params = []
    for notebook in NOTEBOOKS:
        cells = _cells(notebook)
        for i, (grade_id, kind, source) in enumerate(cells):
            if kind == "solution" and grade_id != "architecture_for":  # an answer table
                test = next(src for _, k, src in cells[i + 1 :] if k == "test")
                params.append(pytest.param(notebook, grade_id, source, test, id=grade_id))
    return params


def run_part(notebook: Path, part: str, source: str, test: str) -> dict[str, list]:
    """The part's mutants sorted into "killed" (by the visible check), "missed" (killed by the
    hidden check only), "slow" (passed the visible check, ran past the time limit on the hidden
    one), "equivalent" (listed) and "unexplained" (survivors not listed)."""

    import torch

    # the notebook's setup cells run in this process and may change torch's default dtype (04-rnn
    # sets float64): the next tests must find it as it was
    dtype = torch.get_default_dtype()
    try:
        return _run_part(notebook, part, source, test)
    finally:
        torch.set_default_dtype(dtype)


def _run_part(notebook: Path, part: str, source: str, test: str) -> dict[str, list]:
    import importlib

    namespace: dict = {}
    for _, kind, cell in _cells(notebook):  # the setup cells and every solution, unchanged
        if kind != "test":
            exec(compile(cell, str(notebook), "exec"), namespace)
    module, name = _check_call(test)
    check = getattr(importlib.import_module(module), name)
    out: dict[str, list] = {
        "killed": [], "slow": [], "missed": [], "equivalent": [], "unexplained": []
    }  # fmt: skip
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for description, text in mutants(source):
            scope = dict(namespace)
            exec(compile(text, f"<mutant of {part}>", "exec"), scope)
            signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT)
            try:
                visible = _verdict(check, scope[part], hidden=False)
                hidden = "passed" if visible != "passed" else _verdict(check, scope[part], True)
                if visible != "passed":
                    kind = "killed"  # a visible check that never ends fails in the notebook too
                elif hidden == "killed":
                    kind = "missed"
                elif hidden == "slow":
                    kind = "slow"  # right answers, found too slowly to tell
                elif (part, description) in LISTED:
                    kind = "equivalent"
                else:
                    kind = "unexplained"
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            out[kind].append((description, text))
    finally:
        signal.signal(signal.SIGALRM, previous)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("notebook, part, source, test", _parts())
def test_every_mutant_the_hidden_cases_kill_the_visible_ones_kill(
    notebook, part, source, test, capsys
):
    result = run_part(notebook, part, source, test)
    capsys.readouterr()  # the checks' own lines
    n = sum(map(len, result.values()))
    with capsys.disabled():
        print(
            f"\n{part}: {n} mutants, {len(result['killed'])} killed visibly, "
            f"{len(result['equivalent'])} equivalent, {len(result['slow'])} too slow to tell"
        )
    available = len(mutants(source, limit=None))
    assert n >= min(20, available), f"{part}: only {n} mutants of {available}"
    missed = [d for d, _ in result["missed"]]
    assert not missed, f"{part}: the hidden cases kill these and the visible ones miss: {missed}"
    unexplained = [d for d, _ in result["unexplained"]]
    assert not unexplained, f"{part}: survivors not listed as equivalent: {unexplained}"


PARTS = _parts()


def test_every_listed_equivalent_mutant_is_one_of_the_parts_mutants():
    """A listed mutant the solution no longer makes (its line edited or gone) fails here, so the
    list cannot keep a reason for a mutant that does not exist (fast: only the mutants' text)."""
    made = {param.values[1]: {d for d, _ in mutants(param.values[2])} for param in PARTS}
    stale = [(part, d) for part, d in LISTED if d not in made.get(part, set())]
    assert not stale, f"listed as equivalent, but no such mutant is made: {stale}"


@pytest.mark.parametrize("notebook, part, source, test", PARTS)
def test_a_mutants_description_stays_when_lines_are_added_above_it(notebook, part, source, test):
    """A mutant is named by the text of the line it edits: a comment added above a solution's
    first line moves every line down by one and changes no description (with line numbers, every
    listed reason came loose from its mutant)."""
    moved = "# a line added above the solution\n" + source
    assert [d for d, _ in mutants(moved)] == [d for d, _ in mutants(source)]
