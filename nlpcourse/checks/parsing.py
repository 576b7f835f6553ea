"""Checks for exercise 03-parsing (chapter 3): cases, answers and usual mistakes.

Each check compares a student's function with the reference of the same name in
:mod:`nlpcourse.parsing` (which takes the same plain data: trees as nested tuples
``(label, child, ...)``, rules as ``(lhs, rhs)`` or ``(lhs, rhs, logp)``) through
:func:`nlpcourse.checks.core.run_check`, which documents the machinery. The usual mistakes (a
rightmost derivation, CKY without the unary closure or with a split point off by one, counts added
where they multiply, a max where a sum belongs, probabilities where logs belong, unlabelled or
set-valued brackets, ...) are computed here by small versions of the algorithms written to make
them, so that a wrong answer is named by what it shows.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from nlpcourse import parsing
from nlpcourse.checks.core import (
    Case,
    Expected,
    Mistake,
    compare_numbers,
    compare_scores,
    impossible_log_probability,
    n_random,
    py_rng,
    run_check,
    show,
    with_args,
)

EXAM_TREE = (
    "S",
    ("NP", ("Det", "the"), ("N", "cat")),
    ("VP", ("V", "caught"), ("NP", ("Det", "the"), ("N", "rat"))),
)
EXAM_RULES = [
    ("S", ("NP", "VP")),
    ("VP", ("V", "NP")),
    ("NP", ("Det", "N")),
    ("Det", ("the",)),
    ("N", ("cat",)),
    ("N", ("rat",)),
    ("V", ("caught",)),
]
UNIT_RULES = EXAM_RULES + [("VP", ("V",)), ("V", ("ran",)), ("NP", ("N",)), ("N", ("cats",))]
# listed so that one pass over the unit rules, in this order or the reverse, misses S
CHAIN_RULES = [("S", ("VP",)), ("VB", ("V",)), ("VP", ("VB",)), ("V", ("run",))]
TOY_PCFG = [
    ("S", ("NP", "VP"), math.log(1.0)),
    ("NP", ("Det", "N"), math.log(0.5)),
    ("NP", ("NP", "PP"), math.log(0.2)),
    ("NP", ("I",), math.log(0.3)),
    ("VP", ("V", "NP"), math.log(0.7)),
    ("VP", ("VP", "PP"), math.log(0.3)),
    ("PP", ("P", "NP"), math.log(1.0)),
    ("Det", ("the",), math.log(0.6)),
    ("Det", ("a",), math.log(0.4)),
    ("N", ("man",), math.log(0.5)),
    ("N", ("telescope",), math.log(0.3)),
    ("N", ("park",), math.log(0.2)),
    ("V", ("saw",), math.log(1.0)),
    ("P", ("with",), math.log(0.6)),
    ("P", ("in",), math.log(0.4)),
]
# A grammar and sentence where, in the cells of the best tree, the best derivation is neither the
# first nor the last one tried in any usual loop order (split points up or down, the rules in
# their order or reversed, splits or rules outside): a Viterbi CKY that overwrites the back
# pointer with every candidate, not only a better one, returns another tree (issue 42).
LAST_TRIED_RULES = [
    (lhs, rhs, math.log(p))
    for lhs, rhs, p in [
        ("A", ("A", "B"), 0.22),
        ("A", ("A", "C"), 0.27),
        ("A", ("a",), 0.25),
        ("A", ("c",), 0.26),
        ("B", ("A", "C"), 0.14),
        ("B", ("B", "C"), 0.3),
        ("B", ("C", "C"), 0.25),
        ("B", ("b",), 0.31),
        ("C", ("A", "A"), 0.38),
        ("C", ("c",), 0.62),
        ("S", ("C", "A"), 1.0),
    ]
]
SYMBOLS = ["S", "A", "B", "C"]
WORDS = ["a", "b", "c"]


# ------------------------------------------------------------------------------ shared helpers


def _nonterminals(rules: list) -> set[str]:
    return {r[0] for r in rules}


def _plain_tree(value: Any) -> Any:
    """A tree answer with lists read as tuples (``["S", ["NP", ...]]`` equals ``("S", ...)``)."""
    if isinstance(value, list | tuple):
        return tuple(_plain_tree(v) for v in value)
    return value


def _random_cnf(rng: random.Random, n_binary: int, unary: bool = False) -> list[tuple]:
    """A random grammar over S, A, B, C and the words a, b, c: ``n_binary`` rules X -> Y Z, each
    word under one or two nonterminals, and (if ``unary``) two unit rules X -> Y."""
    rules: set[tuple] = set()
    while len(rules) < n_binary:
        rules.add((rng.choice(SYMBOLS), (rng.choice(SYMBOLS[1:]), rng.choice(SYMBOLS[1:]))))
    for w in WORDS:
        for x in rng.sample(SYMBOLS[1:], rng.choice([1, 1, 2])):
            rules.add((x, (w,)))
    for x in SYMBOLS[1:]:  # every nonterminal has a rule, so that no symbol is read as a word
        if not any(r[0] == x for r in rules):
            rules.add((x, (rng.choice(WORDS),)))
    if unary:
        for _ in range(2):
            x, y = rng.sample(SYMBOLS, 2)
            rules.add((x, (y,)))
    return sorted(rules)


def _with_logps(rng: random.Random, rules: list[tuple]) -> list[tuple]:
    """The rules with random log probabilities that sum to 1 over each left side."""
    weights = [rng.uniform(0.2, 1.0) for _ in rules]
    total: dict[str, float] = {}
    for (lhs, _), w in zip(rules, weights, strict=True):
        total[lhs] = total.get(lhs, 0.0) + w
    return [
        (lhs, rhs, math.log(w / total[lhs])) for (lhs, rhs), w in zip(rules, weights, strict=True)
    ]


def _sentence(rng: random.Random, rules: list[tuple], max_len: int) -> list[str] | None:
    """A sentence the grammar derives from S (depth-first random expansion), or None."""
    by_lhs: dict[str, list] = {}
    for r in rules:
        by_lhs.setdefault(r[0], []).append(r[1])
    if "S" not in by_lhs:
        return None
    for _ in range(50):
        out: list[str] = []
        todo = ["S"]
        while todo and len(out) + len(todo) <= max_len:
            symbol = todo.pop()
            if symbol in by_lhs:
                todo.extend(reversed(rng.choice(by_lhs[symbol])))
            else:
                out.append(symbol)
        if not todo and 2 <= len(out) <= max_len:
            return out
    return None


# ------------------------------------------------------------------- part 1: leftmost derivation


def _derivation(tree: tuple, order: str) -> list[tuple[str, ...]]:
    """Sentential forms, rewriting the leftmost or the rightmost nonterminal node each time
    (``order``), or every node of one depth level at once (``"levels"``)."""
    form: list = [tree]
    forms: list[tuple[str, ...]] = [(tree[0],)]
    while any(isinstance(x, tuple) for x in form):
        nodes = [k for k, x in enumerate(form) if isinstance(x, tuple)]
        chosen = {"left": nodes[:1], "right": nodes[-1:], "levels": nodes}[order]
        new: list = []
        for k, x in enumerate(form):
            new.extend(x[1:] if k in chosen else [x])
        form = new
        forms.append(tuple(x[0] if isinstance(x, tuple) else x for x in form))
    return forms


def _derivation_mistakes(tree: tuple) -> list[Mistake]:
    left = _derivation(tree, "left")
    return [
        Mistake(
            "you rewrote the rightmost nonterminal first: a leftmost derivation always rewrites "
            "the leftmost one (visit the nodes in preorder, parent before children, left to "
            "right)",
            _derivation(tree, "right"),
        ),
        Mistake(
            "you rewrote a whole level of the tree at once: rewrite one nonterminal per step",
            _derivation(tree, "levels"),
        ),
        Mistake("the derivation starts with the form (root,), e.g. ('S',): add it", left[1:]),
        Mistake(
            "the last form is missing: the derivation ends with the sentence itself, the words "
            "alone (the form after the last preterminal is rewritten)",
            left[:-1],
        ),
        Mistake(
            "the derivation stops at the preterminals: it goes on down to the words, so rewrite "
            "each preterminal by its word too ('Det' -> 'the')",
            _derivation(_without_words(tree), "left"),
        ),
    ]


def _without_words(tree: Any) -> Any:
    """The tree with each preterminal ``(tag, word)`` replaced by its tag (a leaf)."""
    if len(tree) == 2 and isinstance(tree[1], str):
        return tree[0]
    return (tree[0], *(_without_words(c) for c in tree[1:]))


def _random_tree(rng: random.Random, depth: int) -> tuple:
    """A random tree over the labels S, NP, VP, PP, X, the preterminals D, N, V, P and words."""
    if depth <= 0 or rng.random() < 0.25:
        pre = rng.choice(["D", "N", "V", "P"])
        return (pre, rng.choice(["the", "cat", "saw", "in", "a", "dog"]))
    label = rng.choice(["S", "NP", "VP", "PP", "X"])
    return (label, *(_random_tree(rng, depth - 1) for _ in range(rng.choice([1, 2, 2, 3]))))


def check_leftmost_derivation(leftmost_derivation: Callable, hidden: bool = False) -> None:
    """The leftmost derivation of a tree, as a list of sentential forms (tuples of symbols)."""
    names = ("tree",)
    hint = (
        "start from (root,); at every step replace the leftmost nonterminal (a label of a node "
        "not yet rewritten) by the labels and words of that node's children"
    )
    cases = [
        Case((("NP", ("Det", "the"), ("N", "cat")),), names, hint, "a noun phrase"),
        Case((EXAM_TREE,), names, hint, "the exam sentence"),
        Case((("S", ("VP", ("V", "ran"))),), names, hint, "a unary chain S -> VP -> V"),
    ]
    rng = py_rng(hidden)
    for _ in range(n_random(hidden)):
        tree = ("S", _random_tree(rng, 3), _random_tree(rng, 3))
        cases.append(Case((tree,), names, hint, "a random tree"))

    def compare(expected: Any, got: Any) -> str:
        if not isinstance(got, list | tuple):
            return f"expected a list of sentential forms, got {show(got)}"
        got_forms = [tuple(f) if isinstance(f, list | tuple) else f for f in got]
        want = [tuple(f) for f in expected]
        if got_forms == want:
            return ""
        if len(got_forms) != len(want):
            return f"expected {len(want)} sentential forms, got {len(got_forms)}"
        k = next(i for i, (a, b) in enumerate(zip(want, got_forms, strict=True)) if a != b)
        message = f"form {k + 1} should be {show(want[k])}, got {show(got_forms[k])}"
        if k == 0:
            return message + "\nhint: the first form is the root alone, (root,)"
        before, after = want[k - 1], want[k]
        p = next((i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), 0)
        return (
            f"{message}\nhint: form {k + 1} rewrites {before[p]!r}, symbol {p + 1} of form {k}: "
            "the leftmost one not yet rewritten (a node's label), replaced by its children"
        )

    def same(a: Any, b: Any) -> bool:
        return compare(a, b) == ""

    run_check(
        "leftmost_derivation",
        leftmost_derivation,
        parsing.leftmost_derivation,
        cases,
        compare,
        mistakes=_derivation_mistakes,
        same=same,
    )


# ------------------------------------------------------------- parts 2 and 3: the CKY chart


def _cky(
    rules: list,
    words: list[str],
    closure: bool | str = True,
    splits: str = "right",
    combine: str = "count",
) -> tuple[dict, dict]:
    """A small CKY written for the mistakes: the table of nonterminals and of counts per cell.

    ``closure=False`` forgets the unit rules, ``closure="once"`` applies them in one pass (in
    the order of the rules); ``splits`` ``"short"`` leaves out the last split
    point; ``combine="add"`` adds the two halves' counts where they multiply."""
    n = len(words)
    nts = _nonterminals(rules)
    lexical = [(r[0], r[1][0]) for r in rules if len(r[1]) == 1 and r[1][0] not in nts]
    unit = [(r[0], r[1][0]) for r in rules if len(r[1]) == 1 and r[1][0] in nts]
    binary = [(r[0], r[1][0], r[1][1]) for r in rules if len(r[1]) == 2]
    count: dict = {}

    def close(i: int, j: int) -> None:
        if not closure:
            return
        for _ in range(len(nts) if closure != "once" else 1):  # add A for A -> B until no change
            for a, b in unit:
                if b in count[(i, j)] and a not in count[(i, j)]:
                    count[(i, j)][a] = count[(i, j)][b]

    for i, w in enumerate(words):
        count[(i, i + 1)] = Counter()
        for a, word in lexical:
            if word == w:
                count[(i, i + 1)][a] += 1
        close(i, i + 1)
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            count[(i, j)] = Counter()
            last = j - 1 if splits == "right" else j - 2
            for k in range(i + 1, last + 1):
                for a, b, c in binary:
                    nb, nc = count[(i, k)].get(b, 0), count[(k, j)].get(c, 0)
                    if nb and nc:
                        count[(i, j)][a] += nb * nc if combine == "count" else nb + nc
            close(i, j)
    table = {cell: set(c) for cell, c in count.items() if c}
    return table, count


def _table(value: Any) -> dict | None:
    """A table answer as {(i, j): set of labels}, empty cells dropped; None if not a table."""
    if not isinstance(value, dict):
        return None
    out = {}
    for key, labels in value.items():
        if not (isinstance(key, list | tuple) and len(key) == 2):
            return None
        if isinstance(labels, str) or not isinstance(labels, list | tuple | set | frozenset):
            return None
        if labels:
            out[(int(key[0]), int(key[1]))] = set(labels)
    return out


def _compare_tables(expected: Any, got: Any) -> str:
    table = _table(got)
    if table is None:
        return (
            "expected a dict {(i, j): set of nonterminals}, e.g. {(0, 1): {'Det'}, ...}, got "
            + show(got)
        )
    want = {cell: set(labels) for cell, labels in expected.items() if labels}
    lines = []
    for cell in sorted(set(want) | set(table), key=lambda c: (c[1] - c[0], c[0])):
        a, b = want.get(cell, set()), table.get(cell, set())
        if a != b:
            lines.append(
                f"cell {cell} (words {cell[0] + 1} to {cell[1]}): expected {sorted(a)}, got "
                f"{sorted(b)}"
            )
    return "\n".join(lines[:4])


def _compare_table_case(want: Expected, got: Any) -> str:
    """:func:`_compare_tables` (the cells that differ, shortest span first), then a hint about
    the first of them, from what it holds: a label that a unit rule of the cell's own labels
    adds, a label no rule puts there, or a cell of one word."""
    problem = _compare_tables(want.value, got)
    table = _table(got)
    if not problem or table is None:
        return problem
    rules, words, _ = want.args
    unit = [(r[0], r[1][0]) for r in rules if len(r[1]) == 1 and r[1][0] in _nonterminals(rules)]
    right = {cell: set(labels) for cell, labels in want.value.items() if labels}
    cell = min(
        (c for c in set(right) | set(table) if right.get(c, set()) != table.get(c, set())),
        key=lambda c: (c[1] - c[0], c[0]),
    )
    mine, theirs = table.get(cell, set()), right.get(cell, set())
    missing, extra = sorted(theirs - mine), sorted(mine - theirs)
    by_unit = [(a, b) for a, b in unit if a in missing and b in mine]
    span = f"cell {cell}"
    if by_unit:
        a, b = by_unit[0]
        hint = (
            f"{span} has {b} but not {a}, and the unit rule {a} -> {b} puts {a} over every span "
            f"where {b} is: after filling a cell, add the unit rules' left sides, again and again "
            "until nothing changes (a chain A -> B -> C needs two rounds)"
        )
    elif extra:
        hint = (
            f"{span} has {extra[0]}, which no rule derives from words {cell[0] + 1} to "
            f"{cell[1]}: a label goes in a cell only through a rule whose right side is there "
            "(X -> Y Z with Y over (i, k) and Z over (k, j) for some split i < k < j)"
        )
    elif cell[1] - cell[0] == 1:
        hint = (
            f"{span} is the word {words[cell[0]]!r}: it holds every A with A -> {words[cell[0]]!r}"
        )
    else:
        hint = (
            f"{span} lacks {missing[0]}: try every rule {missing[0]} -> Y Z and every split "
            f"point k with {cell[0]} < k < {cell[1]}, Y in cell ({cell[0]}, k) and Z in cell "
            f"(k, {cell[1]})"
        )
    return f"{problem}\nhint: {hint}"


def _table_mistakes(rules: list, words: list[str], start: str = "S") -> list[Mistake]:
    return [
        Mistake(
            "the unit rules (A -> B) are not applied: after filling a cell, add A for every unit "
            "rule A -> B whose B is in the cell, and repeat until nothing changes",
            _cky(rules, words, closure=False)[0],
        ),
        Mistake(
            "the unit rules were applied in one pass: a chain A -> B -> C needs one pass per "
            "link, so repeat the pass until nothing changes (the cell's unary closure)",
            _cky(rules, words, closure="once")[0],
        ),
        Mistake(
            "a split point is missing: for the span (i, j) try every k with i < k < j, the "
            "last one k = j - 1 included (eq. (parse-cky))",
            _cky(rules, words, splits="short")[0],
        ),
    ]


def _table_cases(hidden: bool) -> list[Case]:
    names = ("rules", "words", "start")
    hint = "cell (i, j) holds the nonterminals that derive words i+1 .. j (spans, not positions)"
    cases = [
        Case((EXAM_RULES, ["the", "cat"], "S"), names, hint, "two words"),
        Case((EXAM_RULES, "the cat caught the rat".split(), "S"), names, hint, "the exam sentence"),
        Case((UNIT_RULES, "cats ran".split(), "S"), names, hint, "unit rules NP -> N, VP -> V"),
        Case(
            (EXAM_RULES + [("S", ("VP",)), ("VP", ("V",))], "caught the rat".split(), "S"),
            names,
            "the unit rules S -> VP and VP -> V, over spans longer than one word too",
            "a unit rule over a longer span",
        ),
        Case(
            (CHAIN_RULES, ["run"], "S"),
            names,
            "a chain of unit rules S -> VP -> VB -> V over one word",
            "a chain of unit rules",
        ),
        Case((EXAM_RULES, "the cat the rat".split(), "S"), names, hint, "not a sentence: no S"),
    ]
    rng = py_rng(hidden)
    while len(cases) < 6 + n_random(hidden):
        rules = _random_cnf(rng, rng.randint(4, 8), unary=rng.random() < 0.5)
        words = _sentence(rng, rules, 6 if hidden else 5)
        if words is not None:
            cases.append(Case((rules, words, "S"), names, hint, f"random, {len(words)} words"))
    return cases


def check_cky_recognize(cky_recognize: Callable, hidden: bool = False) -> None:
    """The CKY table {(i, j): set of nonterminals} of a CNF grammar with unit rules."""
    run_check(
        "cky_recognize",
        cky_recognize,
        with_args(parsing.cky_recognize),
        _table_cases(hidden),
        _compare_table_case,
        mistakes=_table_mistakes,
        same=lambda a, b: _compare_tables(a, b) == "",
    )


def _count_mistakes(rules: list, words: list[str], start: str = "S") -> list[Mistake]:
    table, count = _cky(rules, words)
    top = count[(0, len(words))]
    return [
        Mistake(
            "True or False is whether the sentence is recognised, not how many trees it has: "
            "keep a count "
            "per nonterminal and cell, count(A, i, j) = sum over rules A -> B C and splits k of "
            "count(B, i, k) * count(C, k, j)",
            start in table.get((0, len(words)), set()),  # a bool: recognition's answer
        ),
        Mistake(
            "the two halves' counts are added: each tree of B over (i, k) combines with each tree "
            "of C over (k, j), so multiply them",
            _cky(rules, words, combine="add")[1][(0, len(words))].get(start, 0),
        ),
        Mistake(
            "a split point is missing: for the span (i, j) try every k with i < k < j",
            _cky(rules, words, splits="short")[1][(0, len(words))].get(start, 0),
        ),
        Mistake(
            f"you counted the trees of every nonterminal of the top cell: count only the start "
            f"symbol {start!r}",
            sum(top.values()),
            key="every nonterminal of the top cell",
        ),
    ]


def check_count_parses(count_parses: Callable, hidden: bool = False) -> None:
    """The number of trees of a sentence under a CNF grammar."""
    names = ("rules", "words", "start")
    hint = "count(A, i, j) = sum over rules A -> B C and splits i < k < j of count(B) * count(C)"
    catalan_rules = [("X", ("X", "X")), ("X", ("a",))]
    pp_rules = [r[:2] for r in TOY_PCFG]
    cases = [
        Case((catalan_rules, ["a"] * 4, "X"), names, hint, "X -> X X | 'a', 4 words"),
        Case((pp_rules, "I saw the man with a telescope".split(), "S"), names, hint, "PP"),
        Case((catalan_rules, ["a"] * 8, "X"), names, hint, "X -> X X | 'a', 8 words"),
        Case(
            (pp_rules, "I saw the man in the park with a telescope".split(), "S"),
            names,
            hint,
            "two PPs",
        ),
    ]
    rng = py_rng(hidden)
    while len(cases) < 4 + n_random(hidden):
        rules = _random_cnf(rng, rng.randint(5, 9))
        words = _sentence(rng, rules, 7)
        if words is not None:
            cases.append(Case((rules, words, "S"), names, hint, f"random, {len(words)} words"))
    n_long = 40 if hidden else 37  # C_36 = 11,959,798,385,860,453,492 > 2^63: no int64 holds it
    cases.append(
        Case(
            (catalan_rules, ["a"] * n_long, "X"),
            names,
            f"X -> X X | 'a' over {n_long} words has C_{n_long - 1} trees (a Catalan number), "
            "above 2^63",
            f"X -> X X | 'a', {n_long} words",
            shown={"words": f"['a'] * {n_long}"},
        )
    )

    def compare(expected: Any, got: Any) -> str:
        if isinstance(got, bool) or not isinstance(got, int | float) or got != int(got):
            return f"expected a whole number of trees, got {show(got)}"
        if got == expected:  # exactly: a float above 2^53 is not the count it rounds to
            return ""
        if got < 0:
            return (
                f"expected {expected}, got {int(got)}: a count cannot be negative; a numpy "
                "integer (int64) overflows past 2^63 - 1 and wraps around\nhint: keep the "
                "counts in Python ints (a dict or a list), which never overflow"
            )
        if isinstance(got, float) and expected > 2**53:
            return (
                f"expected {expected}, got {got!r} (a float): a float holds 53 bits, so counts "
                "above 2^53 come out rounded\nhint: count with Python ints"
            )
        return (
            f"expected {expected}, got {int(got)}\nhint: you counted "
            + ("more" if got > expected else "fewer")
            + " trees than there are: count(A, i, j) = sum over rules A -> B C and splits "
            "i < k < j of count(B, i, k) * count(C, k, j), each (rule, split) once, and the "
            "answer is the start symbol's count over the whole sentence"
        )

    run_check(
        "count_parses",
        count_parses,
        parsing.count_parses,
        cases,
        compare,
        mistakes=_count_mistakes,
        same=lambda a, b: (type(b) is bool and a == b) if type(a) is bool else compare(a, b) == "",
    )


# -------------------------------------------------------- parts 4 and 5: Viterbi CKY and inside


def _dp(rules: list, words: list[str], combine: str, logs: bool = True) -> float:
    """The best (``"max"``) or total (``"sum"``) log probability of the words under S, by a
    plain loop; ``logs=False`` multiplies probabilities (underflows on long sentences)."""
    value = _dp_chart(rules, words, combine, logs)[(0, len(words))].get("S")
    if value is None:
        return -math.inf if logs else 0.0
    return value


def _dp_chart(rules: list, words: list[str], combine: str, logs: bool = True) -> dict:
    """The chart of :func:`_dp`: {(i, j): {nonterminal: score over words i+1 .. j}}."""
    n = len(words)
    score: dict = {}
    for i, w in enumerate(words):
        cell: dict = {}
        for lhs, rhs, lp in rules:
            if rhs == (w,):
                cell[lhs] = _add(cell.get(lhs), math.exp(lp) if not logs else lp, combine, logs)
        score[(i, i + 1)] = cell
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            cell = {}
            for k in range(i + 1, j):
                for lhs, rhs, lp in rules:
                    if len(rhs) != 2 or rhs[0] not in score[(i, k)] or rhs[1] not in score[(k, j)]:
                        continue
                    b, c = score[(i, k)][rhs[0]], score[(k, j)][rhs[1]]
                    term = lp + b + c if logs else math.exp(lp) * b * c
                    cell[lhs] = _add(cell.get(lhs), term, combine, logs)
            score[(i, j)] = cell
    return score


def _add(old: float | None, new: float, combine: str, logs: bool) -> float:
    if old is None:
        return new
    if combine == "max":
        return max(old, new)
    return _logaddexp(old, new) if logs else old + new


def _logaddexp(a: float, b: float) -> float:
    m = max(a, b)
    return m + math.log(math.exp(a - m) + math.exp(b - m)) if m > -math.inf else -math.inf


def _pcfg_cases(hidden: bool, long_case: bool) -> list[Case]:
    """Hand-picked and random PCFG cases; every random one has one best tree."""
    names = ("rules", "words")
    cases = [
        Case((TOY_PCFG, "I saw the man".split()), names, "", "one tree"),
        Case((TOY_PCFG, "I saw the man with a telescope".split()), names, "", "two trees"),
        Case((TOY_PCFG, "the man saw".split()), names, "", "no tree: the answer is -inf"),
        Case(
            (LAST_TRIED_RULES, ["c"] * 5),
            names,
            "",
            "the best derivation of a cell is not the last one tried",
        ),
    ]
    rng = py_rng(hidden)
    while len(cases) < 4 + n_random(hidden):
        rules = _with_logps(rng, _random_cnf(rng, rng.randint(5, 9)))
        words = _sentence(rng, rules, 7)
        if words is None:
            continue
        g = parsing._as_pcfg(rules)
        logps = sorted(
            (g.tree_logprob(parsing.Tree.from_cnf(t)) for t in parsing.cky(g.cnf(), words).trees()),
            reverse=True,
        )
        if len(logps) > 1 and logps[0] - logps[1] < 1e-6:
            continue  # two best trees: draw again
        cases.append(Case((rules, words), names, "", f"random, {len(words)} words"))
    if long_case:
        n = 150 if hidden else 120
        rules = [("S", ("S", "S"), math.log(0.9995)), ("S", ("a",), math.log(0.0005))]
        cases.append(
            Case(
                (rules, ["a"] * n),
                names,
                "P(words) is far below the smallest float (1e-308): stay in log space",
                f"{n} words, log P about {_closed_form(n):.0f}",
                shown={"words": f"['a'] * {n}"},
            )
        )
    return cases


def _closed_form(n: int) -> float:
    """log P(a^n) under S -> S S [0.9995] | 'a' [0.0005]: C_{n-1} trees, each with n-1 binary
    rules and n words."""
    return (
        math.log(math.comb(2 * n - 2, n - 1) // n)
        + (n - 1) * math.log(0.9995)
        + n * math.log(0.0005)
    )


def _viterbi_reference(rules: list, words: list[str]) -> tuple:
    tree, logp = parsing.viterbi_cky(rules, words)
    return (None if tree is None else parsing.as_tuple(tree), logp)


def _chart_hint(rules: list, words: list[str], combine: str) -> str:
    """A hint with the right chart's scores (``combine`` ``"sum"``: inside, ``"max"``: Viterbi)
    of the first word, the first two words and the whole sentence, to compare with the
    student's own chart (a single number does not say which cell went wrong); '' for a sentence
    too long to show."""
    if len(words) > 12:
        return ""
    chart = _dp_chart(rules, words, combine)
    cells = sorted({(0, 1), (0, min(2, len(words))), (0, len(words))}, key=lambda c: c[1])
    shown = "; ".join(
        f"cell {cell}: " + (", ".join(f"{a} {v:.6g}" for a, v in sorted(chart[cell].items()))
                            or "empty")
        for cell in cells
    )  # fmt: skip
    what = "inside log probabilities" if combine == "sum" else "best log probabilities (Viterbi)"
    return f"\nhint: compare your chart of {what} with the right one, cell by cell: {shown}"


def _compare_viterbi_case(want: Expected, got: Any) -> str:
    """:func:`_compare_viterbi`, with the right chart when the log probability is wrong."""
    problem = _compare_viterbi(want.value, got)
    if problem.startswith("the log probability: ") and "cannot be above 0" not in problem:
        rules, words = want.args
        problem += _chart_hint(rules, words, "max")
    return problem


def _compare_viterbi(expected: Any, got: Any) -> str:
    if not isinstance(got, list | tuple) or len(got) != 2:
        return f"expected a pair (tree, log probability), got {show(got)}"
    tree, logp = expected
    problem = compare_numbers(logp, got[1])
    if problem:
        return f"the log probability: {problem}" + impossible_log_probability(got[1])
    mine = _plain_tree(got[0])
    if mine != tree:
        message = f"the log probability is right but the tree is not: expected {show(tree)}"
        try:
            right, yours = _brackets(tree, True, True), _brackets(mine, True, True)
        except (TypeError, IndexError, ValueError):
            return message
        lost, added = sorted((right - yours).elements()), sorted((yours - right).elements())
        return (
            f"{message}\nnodes (label, first word, end) of the best tree that yours lacks: "
            f"{show(lost[:4])}; in yours and not in it: {show(added[:4])}\nhint: the score is "
            "the best one, so the back pointers are off: store (rule, split) only when a "
            "candidate beats the cell's best so far, and rebuild the tree from those"
        )
    return ""


def _viterbi_mistakes(rules: list, words: list[str]) -> list[Mistake]:
    return [
        Mistake(
            "your log probability is the sentence's, summed over all trees: Viterbi takes the max "
            "over rules and split points where the inside algorithm sums",
            (None, _dp(rules, words, "sum")),
        ),
        Mistake(
            "you returned a probability, not its log",
            (None, math.exp(_dp(rules, words, "max"))),
        ),
    ]


def check_viterbi_cky(viterbi_cky: Callable, hidden: bool = False) -> None:
    """The best tree (nested tuples) and its log probability, by Viterbi CKY."""

    def same(a: Any, b: Any) -> bool:  # a mistake is recognised by its log probability alone
        return isinstance(b, list | tuple) and len(b) == 2 and compare_numbers(a[1], b[1]) == ""

    run_check(
        "viterbi_cky",
        viterbi_cky,
        with_args(_viterbi_reference),
        _pcfg_cases(hidden, long_case=False),
        _compare_viterbi_case,
        mistakes=_viterbi_mistakes,
        same=same,
    )


def _inside_mistakes(rules: list, words: list[str]) -> list[Mistake]:
    total = _dp(rules, words, "sum")
    return [
        Mistake(
            "this is the best tree's log probability: the inside algorithm sums over rules and "
            "split points (a logsumexp) where Viterbi takes the max",
            _dp(rules, words, "max"),
        ),
        Mistake(
            "you returned P(words), not its log",
            math.exp(total),
        ),
        Mistake(
            "the probability underflowed to 0 (log 0 = -inf): add log probabilities and use a "
            "logsumexp instead of multiplying and adding probabilities",
            -math.inf if total < -745 else None,  # only where P(words) is below the floats
        ),
    ]


def check_inside(inside: Callable, hidden: bool = False) -> None:
    """log P(words), summed over all trees, by the inside algorithm."""

    def compare(want: Expected, got: Any) -> str:
        """:func:`compare_numbers`, a sanity message for a value above 0, or else the right
        inside scores of the two shortest spans and of the whole sentence, to compare with the
        student's own chart (a single number does not say which cell went wrong)."""
        problem = compare_numbers(want.value, got)
        if not problem:
            return ""
        sanity = impossible_log_probability(got, "log P(words)")
        rules, words = want.args
        return problem + (sanity or _chart_hint(rules, words, "sum"))

    run_check(
        "inside",
        inside,
        with_args(parsing.inside),
        _pcfg_cases(hidden, long_case=True),
        compare,
        mistakes=_inside_mistakes,
    )


# -------------------------------------------------------------------------- part 6: PARSEVAL


def _brackets(tree: tuple, labelled: bool, preterminals: bool) -> Counter:
    out: Counter = Counter()

    def walk(node: Any, start: int) -> int:
        if isinstance(node, str):
            return start + 1
        end = start
        for c in node[1:]:
            end = walk(c, end)
        is_pre = len(node) == 2 and isinstance(node[1], str)
        if preterminals or not is_pre:
            out[(node[0] if labelled else "", start, end)] += 1
        return end

    walk(tree, 0)
    return out


def _scores(
    gold: list,
    predicted: list,
    labelled: bool = True,
    pre: bool = False,
    sets: bool = False,
    whole_trees: bool = False,
) -> dict:
    matched = n_gold = n_pred = exact = 0
    for g, p in zip(gold, predicted, strict=True):
        gb = _brackets(g, labelled, pre)
        pb = _brackets(p, labelled, pre) if p is not None else Counter()
        if sets:
            gb, pb = Counter(set(gb)), Counter(set(pb))
        m = sum((gb & pb).values())
        matched, n_gold, n_pred = matched + m, n_gold + sum(gb.values()), n_pred + sum(pb.values())
        exact += (g == p) if whole_trees else (gb == pb)
    precision = matched / n_pred if n_pred else 0.0
    recall = matched / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "exact": exact / len(gold)}


def _parseval_mistakes(gold: list, predicted: list) -> list[Mistake]:
    return [
        Mistake(
            "preterminals (a tag over a word, like ('Det', 'the')) are not brackets: count only "
            "the nodes above them",
            _scores(gold, predicted, pre=True),
        ),
        Mistake(
            "the brackets must carry their labels: ('NP', 2, 4) and ('VP', 2, 4) differ",
            _scores(gold, predicted, labelled=False),
        ),
        Mistake(
            "exact match compares the two bracket multisets, not the whole trees: a sentence "
            "whose brackets all match is exact even when a tag (a preterminal) differs",
            _scores(gold, predicted, whole_trees=True),
        ),
        Mistake(
            "brackets are a multiset: two nodes with the same label and span (a unary chain "
            "X -> X) count twice; use collections.Counter and its & (minimum of counts)",
            _scores(gold, predicted, sets=True),
        ),
    ]


def _parseval_cases(hidden: bool) -> list[Case]:
    names = ("gold", "predicted")
    hint = (
        "sum matched, gold and predicted bracket counts over all sentences, then divide "
        "as micro-averages; a prediction None has no brackets"
    )
    noun = _tuple(
        "(S (NP (Pro I)) (VP (V saw) (NP (NP (D the) (N man)) (PP (P with) (NP (D a) (N dog))))))"
    )
    verb = _tuple(
        "(S (NP (Pro I)) (VP (V saw) (NP (D the) (N man)) (PP (P with) (NP (D a) (N dog)))))"
    )
    chain = ("S", ("NP", ("NP", ("N", "dogs"))), ("VP", ("V", "bark")))
    flat = ("S", ("NP", ("N", "dogs")), ("VP", ("V", "bark")))
    swapped = ("S", ("VP", ("N", "dogs")), ("NP", ("V", "bark")))  # right spans, wrong labels
    retagged = ("S", ("NP", ("V", "dogs")), ("VP", ("V", "bark")))  # a tag differs, no bracket
    cases = [
        Case(([noun], [noun]), names, hint, "the same tree"),
        Case(([noun], [verb]), names, hint, "PP attached to the verb instead of the noun"),
        Case(([chain, noun], [flat, verb]), names, hint, "two sentences, a unary chain NP -> NP"),
        Case(([noun, verb], [verb, None]), names, hint, "one parse failed (None)"),
        Case(([flat], [swapped]), names, hint, "the right spans with the wrong labels"),
        Case(([flat], [retagged]), names, hint, "one tag differs: all brackets match"),
        Case(
            ([noun, flat], [None, None]),
            names,
            "no parse at all: no predicted bracket, so precision, recall and F1 are all 0",
            "every parse failed",
        ),
    ]
    rng = py_rng(hidden)
    for _ in range(n_random(hidden)):
        k = rng.randint(1, 4)
        gold = [rng.choice([noun, verb, chain, flat]) for _ in range(k)]
        predicted = []
        for g in gold:
            options = [t for t in (noun, verb) if len(g) > 0 and _leaves(t) == _leaves(g)]
            options += [t for t in (chain, flat, swapped, retagged) if _leaves(t) == _leaves(g)]
            predicted.append(rng.choice(options + [None]))
        cases.append(Case((gold, predicted), names, hint, f"random, {k} sentences"))
    return cases


def _tuple(text: str) -> tuple:
    return parsing.as_tuple(parsing.Tree.fromstring(text))


def _leaves(tree: Any) -> list[str]:
    if isinstance(tree, str):
        return [tree]
    return [w for c in tree[1:] for w in _leaves(c)]


PARSEVAL_KEYS = ("precision", "recall", "f1", "exact")
PARSEVAL_HINTS = {  # the hint of a wrong answer: about the first key that differs
    "precision": "precision = the matched brackets / all predicted brackets, summed over all "
    "sentences before dividing (a None prediction has no brackets)",
    "recall": "recall = the matched brackets / all gold brackets, summed over all sentences "
    "before dividing (the brackets of a sentence whose prediction is None count too)",
    "f1": "f1 = 2 precision recall / (precision + recall), 0 when both are 0",
    "exact": "exact = the share of sentences whose predicted brackets equal the gold ones, "
    "each bracket as often as it occurs (a tag over a word makes no bracket)",
}


def _compare_parseval(expected: Any, got: Any) -> str:
    return compare_scores(expected, got, PARSEVAL_KEYS, PARSEVAL_HINTS)


def check_parseval(parseval: Callable, hidden: bool = False) -> None:
    """Labelled-bracket precision, recall, F1 and exact match (a dict of the four)."""
    run_check(
        "parseval",
        parseval,
        parsing.parseval,
        _parseval_cases(hidden),
        _compare_parseval,
        mistakes=_parseval_mistakes,
    )
