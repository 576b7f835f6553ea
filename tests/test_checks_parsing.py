"""Tests of the checks of exercise 03-parsing: right answers written differently pass, each usual
mistake is named, an unanticipated wrong answer shows its input, the expected answer and what came
back, and calling the reference instead of doing the work fails.

The right answers here are written independently of the solution notebook and of
nlpcourse.parsing: brute force over all trees where that is short, plain loops elsewhere.
"""

import math
from collections import Counter, defaultdict

import numpy as np
import pytest
from checks_corpus import passes_visible_and_hidden, wrong_with_right_name_or_none

import nlpcourse.checks.parsing as checks
from nlpcourse import parsing
from nlpcourse.checks import CheckFailed

# ------------------------------------------------------------------------- right answers


def derivation(tree, rightmost=False, start_form=True, last_form=True, to_tags=False):
    """A derivation written with a stack of nodes (recursion order), as lists of lists."""
    if to_tags:  # the mistake: stop at the preterminals (each one a leaf)
        tree = _tags_as_leaves(tree)
    forms = [[tree[0]]] if start_form else []
    form = [tree]
    while any(isinstance(x, tuple) for x in form):
        nodes = [k for k, x in enumerate(form) if isinstance(x, tuple)]
        k = nodes[-1] if rightmost else nodes[0]
        form[k : k + 1] = list(form[k][1:])
        forms.append([x[0] if isinstance(x, tuple) else x for x in form])
    return forms if last_form else forms[:-1]


def _tags_as_leaves(node):
    if isinstance(node[1], str) and len(node) == 2:
        return node[0]
    return (node[0], *map(_tags_as_leaves, node[1:]))


def cky_table(
    rules, words, start="S", closure=True, last_split=True, as_lists=False, one_pass=None
):
    """``one_pass``: the mistake of one pass over the unit rules, "forward" or "reverse"."""
    nonterminals = {r[0] for r in rules}
    n = len(words)
    table = defaultdict(set)

    def close(cell):
        if not closure:
            return
        order = rules[::-1] if one_pass == "reverse" else rules
        for _ in range(1 if one_pass else len(nonterminals)):
            for lhs, rhs in order:
                if len(rhs) == 1 and rhs[0] in cell:
                    cell.add(lhs)

    for i, w in enumerate(words):
        table[(i, i + 1)] |= {lhs for lhs, rhs in rules if rhs == (w,)}
        close(table[(i, i + 1)])
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            for k in range(i + 1, j if last_split else j - 1):
                for lhs, rhs in rules:
                    if len(rhs) == 2 and rhs[0] in table[(i, k)] and rhs[1] in table[(k, j)]:
                        table[(i, j)].add(lhs)
            close(table[(i, j)])
    if as_lists:  # another right form: lists of labels, every cell present, empty ones too
        return {cell: sorted(labels) for cell, labels in table.items()}
    return {cell: labels for cell, labels in table.items() if labels}


def count(rules, words, start="S", add=False, recognise=False):
    n = len(words)
    c = defaultdict(Counter)
    for i, w in enumerate(words):
        for lhs, rhs in rules:
            if rhs == (w,):
                c[(i, i + 1)][lhs] += 1
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            for k in range(i + 1, j):
                for lhs, rhs in rules:
                    if len(rhs) == 2 and c[(i, k)][rhs[0]] and c[(k, j)][rhs[1]]:
                        b, cc = c[(i, k)][rhs[0]], c[(k, j)][rhs[1]]
                        c[(i, j)][lhs] += b + cc if add else b * cc
    if recognise:
        return c[(0, n)][start] > 0
    total = c[(0, n)][start]
    return float(total) if total < 2**53 else total  # a float with a whole value is a count


def best_and_total(rules, words, combine, logs=True):
    """Viterbi (max) or inside (sum) by a plain loop; logs=False multiplies probabilities."""
    n = len(words)
    score = defaultdict(dict)
    back = {}
    for i, w in enumerate(words):
        for lhs, rhs, lp in rules:
            if rhs == (w,):
                value = lp if logs else math.exp(lp)
                old = score[(i, i + 1)].get(lhs)
                score[(i, i + 1)][lhs] = value if old is None else merge(old, value, combine, logs)
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            for k in range(i + 1, j):
                for lhs, rhs, lp in rules:
                    if len(rhs) != 2 or rhs[0] not in score[(i, k)] or rhs[1] not in score[(k, j)]:
                        continue
                    b, c = score[(i, k)][rhs[0]], score[(k, j)][rhs[1]]
                    value = lp + b + c if logs else math.exp(lp) * b * c
                    old = score[(i, j)].get(lhs)
                    new = value if old is None else merge(old, value, combine, logs)
                    if old is None or new != old:
                        back[(i, j, lhs)] = (rhs[0], rhs[1], k)
                    score[(i, j)][lhs] = new
    return score, back


def merge(old, new, combine, logs):
    if combine == "max":
        return max(old, new)
    return float(np.logaddexp(old, new)) if logs else old + new


def viterbi_lists(rules, words):
    """Viterbi returning the tree as nested lists and the log probability as a numpy float."""
    score, back = best_and_total(rules, words, "max")
    n = len(words)
    if "S" not in score[(0, n)]:
        return [None, -math.inf]

    def build(i, j, a):
        if j == i + 1:
            return [a, words[i]]
        b, c, k = back[(i, j, a)]
        return [a, build(i, k, b), build(k, j, c)]

    return [build(0, n, "S"), np.float64(score[(0, n)]["S"])]


def viterbi_with_sum(rules, words):
    """The best tree, but the sentence's total log probability beside it."""
    score, _ = best_and_total(rules, words, "sum")
    return (viterbi_lists(rules, words)[0], score[(0, len(words))].get("S", -math.inf))


def inside_right(rules, words):
    score, _ = best_and_total(rules, words, "sum")
    return np.float32(score[(0, len(words))].get("S", -math.inf))  # float32: another right form


def inside_max(rules, words):
    score, _ = best_and_total(rules, words, "max")
    return score[(0, len(words))].get("S", -math.inf)


def inside_probabilities(rules, words):
    score, _ = best_and_total(rules, words, "sum", logs=False)
    p = score[(0, len(words))].get("S", 0.0)
    return math.log(p) if p > 0 else -math.inf


def brackets(tree, labelled=True, preterminals=False, sets=False):
    out = Counter()

    def walk(node, start):
        if isinstance(node, str):
            return start + 1
        end = start
        for child in node[1:]:
            end = walk(child, end)
        if preterminals or not (len(node) == 2 and isinstance(node[1], str)):
            out[(node[0] if labelled else "X", start, end)] += 1
        return end

    walk(tree, 0)
    return Counter(set(out)) if sets else out


def parseval_with(gold, predicted, extra_key=False, whole_trees=False, **kind):
    m = g_total = p_total = exact = 0
    for g, p in zip(gold, predicted, strict=True):
        gb = brackets(g, **kind)
        pb = brackets(p, **kind) if p is not None else Counter()
        m += sum((gb & pb).values())
        g_total += sum(gb.values())
        p_total += sum(pb.values())
        exact += (g == p) if whole_trees else (gb == pb)
    prec = m / p_total if p_total else 0.0
    rec = m / g_total if g_total else 0.0
    out = {
        "precision": prec,
        "recall": rec,
        "f1": 2 * prec * rec / (prec + rec) if prec + rec else 0.0,
        "exact": exact / len(gold),
    }
    if extra_key:
        out["matched"] = m  # an extra key is allowed
    return out


# ----------------------------------------------------------------------------------- tests

RIGHT = [
    (checks.check_leftmost_derivation, derivation),
    (checks.check_cky_recognize, lambda r, w, s="S": cky_table(r, w, s, as_lists=True)),
    (checks.check_count_parses, count),
    (checks.check_viterbi_cky, viterbi_lists),
    (checks.check_inside, inside_right),
    (checks.check_parseval, lambda g, p: parseval_with(g, p, extra_key=True)),
    # the same answers in other containers and number types
    (checks.check_leftmost_derivation, lambda t: tuple(tuple(f) for f in derivation(t))),
    (checks.check_cky_recognize, lambda r, w, s="S": {
        (np.int64(i), j): frozenset(v) for (i, j), v in cky_table(r, w, s).items()}),
    (checks.check_count_parses,  # a numpy integer where the count fits in one
     lambda r, w, s="S": np.int64(int(count(r, w, s))) if len(w) < 30 else count(r, w, s)),
    (checks.check_viterbi_cky, lambda r, w: [viterbi_lists(r, w)[0],
                                             np.float64(viterbi_lists(r, w)[1])]),
    (checks.check_inside, lambda r, w: np.float64(inside_right(r, w))),
    (checks.check_parseval,
     lambda g, p: {k: np.float32(v) for k, v in parseval_with(g, p).items()}),
]  # fmt: skip


@pytest.mark.parametrize("check, student", RIGHT)
def test_right_answers_in_other_forms_pass(check, student, capsys):
    passes_visible_and_hidden(check, student, capsys)


MISTAKES = [
    (checks.check_leftmost_derivation, lambda t: derivation(t, rightmost=True), "rightmost"),
    (checks.check_leftmost_derivation, lambda t: derivation(t, start_form=False), "(root,)"),
    (checks.check_leftmost_derivation, lambda t: derivation(t, last_form=False), "last form is"),
    (checks.check_leftmost_derivation, lambda t: derivation(t, to_tags=True), "stops at the pre"),
    (checks.check_cky_recognize, lambda r, w, s: cky_table(r, w, s, closure=False), "not applied"),
    (
        checks.check_cky_recognize,
        lambda r, w, s: cky_table(r, w, s, one_pass="forward"),
        "applied in one pass",
    ),
    (
        checks.check_cky_recognize,
        lambda r, w, s: cky_table(r, w, s, last_split=False),
        "split point is missing",
    ),
    (checks.check_count_parses, lambda r, w, s: count(r, w, s, recognise=True), "recognised"),
    (checks.check_count_parses, lambda r, w, s: count(r, w, s, add=True), "multiply"),
    (checks.check_viterbi_cky, viterbi_with_sum, "summed over all trees"),
    (checks.check_inside, inside_max, "best tree's"),
    (checks.check_inside, inside_probabilities, "underflowed"),
    (checks.check_parseval, lambda g, p: parseval_with(g, p, preterminals=True), "preterminals"),
    (checks.check_parseval, lambda g, p: parseval_with(g, p, labelled=False), "labels"),
    (checks.check_parseval, lambda g, p: parseval_with(g, p, sets=True), "brackets are a multi"),
    (checks.check_parseval, lambda g, p: parseval_with(g, p, whole_trees=True), "whole trees"),
]


def derivation_children_reversed(tree):
    form, forms = [tree], [(tree[0],)]
    while any(isinstance(x, tuple) for x in form):
        k = next(i for i, x in enumerate(form) if isinstance(x, tuple))
        form[k : k + 1] = list(form[k][1:])[::-1]
        forms.append(tuple(x[0] if isinstance(x, tuple) else x for x in form))
    return forms


def cky_closure_on_words_only(rules, words, start="S"):
    """The unary closure applied to the one-word cells only."""
    nonterminals = {r[0] for r in rules}
    n = len(words)
    table = defaultdict(set)
    for i, w in enumerate(words):
        cell = table[(i, i + 1)]
        cell |= {lhs for lhs, rhs in rules if rhs == (w,)}
        for _ in nonterminals:
            cell |= {lhs for lhs, rhs in rules if len(rhs) == 1 and rhs[0] in cell}
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            for k in range(i + 1, i + length):
                for lhs, rhs in rules:
                    if (
                        len(rhs) == 2
                        and rhs[0] in table[(i, k)]
                        and rhs[1] in table[(k, i + length)]
                    ):
                        table[(i, i + length)].add(lhs)
    return {c: v for c, v in table.items() if v}


def count_combinations(rules, words, start="S"):
    """Counts 1 per rule and split where both halves exist, not the product of their counts."""
    table = cky_table(rules, words, start)
    n = len(words)
    total = 0
    for k in range(1, n):
        for lhs, rhs in rules:
            if lhs == start and len(rhs) == 2:
                total += rhs[0] in table.get((0, k), ()) and rhs[1] in table.get((k, n), ())
    return int(total)


def count_max(rules, words, start="S"):
    """A max over rules and splits where the counts are summed."""
    n = len(words)
    c = defaultdict(Counter)
    for i, w in enumerate(words):
        for lhs, rhs in rules:
            c[(i, i + 1)][lhs] += rhs == (w,)
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            for k in range(i + 1, i + length):
                for lhs, rhs in rules:
                    if len(rhs) == 2:
                        here = c[(i, k)][rhs[0]] * c[(k, i + length)][rhs[1]]
                        c[(i, i + length)][lhs] = max(c[(i, i + length)][lhs], here)
    return c[(0, n)][start]


def viterbi_log10(rules, words):
    tree, logp = viterbi_lists(rules, words)
    return tree, logp / math.log(10) if logp > -math.inf else logp


def inside_adding_logs(rules, words):
    """Alternatives combined by adding their logs (a product) instead of a logsumexp."""
    score, _ = best_and_total(rules, words, "max")
    return score[(0, len(words))].get("S", -math.inf) * 1.0 if len(words) < 3 else -1.0


def inside_without_rule_probabilities(rules, words):
    return inside_right([(a, b, 0.0 if len(b) == 2 else lp) for a, b, lp in rules], words)


def parseval_macro(gold, predicted):
    """F1 averaged over sentences instead of summed counts (macro-average)."""
    scores = [parseval_with([g], [p]) for g, p in zip(gold, predicted, strict=True)]
    return {k: sum(s[k] for s in scores) / len(scores) for k in scores[0]}


def parseval_without_root(gold, predicted):
    strip = [(("ROOT", *t[1:]) if t is not None else None) for t in gold]
    pred = [(("ROOT2", *t[1:]) if t is not None else None) for t in predicted]
    return parseval_with(strip, pred)


def parseval_skipping_failures(gold, predicted):
    pairs = [(g, p) for g, p in zip(gold, predicted, strict=True) if p is not None]
    if not pairs:
        return {"precision": 0.0, "recall": 0.0, "f1": 0.0, "exact": 0.0}
    return parseval_with([g for g, _ in pairs], [p for _, p in pairs])


UNNAMED = [  # at least three plausible wrong answers per part that no check names
    (checks.check_leftmost_derivation, derivation_children_reversed),
    (checks.check_leftmost_derivation, lambda t: [[x for x in f if x.isupper() or x[0].isupper()]
                                                  for f in derivation(t)]),  # words dropped
    (checks.check_leftmost_derivation, lambda t: [" ".join(f) for f in derivation(t)]),
    (checks.check_cky_recognize, cky_closure_on_words_only),
    (checks.check_cky_recognize, lambda r, w, s="S": {(i, j - 1): v
                                                      for (i, j), v in cky_table(r, w, s).items()}),
    (checks.check_cky_recognize, lambda r, w, s="S": {c: v for c, v in cky_table(r, w, s).items()
                                                      if c[1] - c[0] > 1}),
    (checks.check_count_parses, count_combinations),
    (checks.check_count_parses, count_max),
    (checks.check_count_parses, lambda r, w, s="S": count(r, [*w, w[-1]], s)),
    (checks.check_viterbi_cky, viterbi_log10),
    (checks.check_viterbi_cky, lambda r, w: (viterbi_lists(r, w)[0], -viterbi_lists(r, w)[1])),
    (checks.check_viterbi_cky, lambda r, w: (None, viterbi_lists(r, w)[1])),
    (checks.check_inside, inside_without_rule_probabilities),
    (checks.check_inside, lambda r, w: inside_right(r, w) / math.log(10)),
    (checks.check_inside, lambda r, w: inside_right(r, w[:-1]) if len(w) > 1 else -1.0),
    (checks.check_parseval, parseval_macro),
    (checks.check_parseval, parseval_without_root),
    (checks.check_parseval, parseval_skipping_failures),
]  # fmt: skip


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, student, message", MISTAKES)
def test_each_mistake_is_caught_by_the_visible_cases_and_named_right(
    check, student, message, hidden
):
    """Visible and hidden alike: the message names this mistake and no other of the part."""
    with pytest.raises(CheckFailed, match="likely mistake") as err:
        check(student, hidden=hidden)
    assert message in str(err.value)
    for other_check, _, other in MISTAKES:
        if other_check is check and other != message:
            assert other not in str(err.value), str(err.value)


@pytest.mark.parametrize("check, student", UNNAMED)
def test_plausible_mistakes_nobody_named_fail_on_the_visible_cases_with_expected_and_got(
    check, student
):
    """Wrong answers no check names: the visible cases catch them, with no wrong name."""
    wrong_with_right_name_or_none(check, student, None)


def test_an_unanticipated_wrong_answer_shows_input_expected_and_got():
    with pytest.raises(CheckFailed) as err:
        checks.check_count_parses(lambda rules, words, start: 7)
    text = str(err.value)
    assert "case 1 of" in text and "words = ['a', 'a', 'a', 'a']" in text
    assert "expected: 5" in text and "got:      7" in text


def test_calling_the_reference_scores_nothing():
    with pytest.raises(CheckFailed, match="switched off"):
        checks.check_inside(lambda rules, words: parsing.inside(rules, words))
    with pytest.raises(CheckFailed, match="switched off"):
        checks.check_cky_recognize(parsing.cky_recognize)


def test_a_missing_function_is_reported():
    def not_written(*args):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="not written yet"):
        checks.check_viterbi_cky(not_written)


# ------------------------------------------ issue 42: counts above 2^63 are seen by the self-check


def count_numpy(rules, words, start="S", dtype=np.int64):
    """Counts in a numpy array: int64 overflows (with a RuntimeWarning at most), float64 rounds."""
    n = len(words)
    symbols = sorted({r[0] for r in rules})
    c = np.zeros((n + 1, n + 1, len(symbols)), dtype=dtype)
    for i, w in enumerate(words):
        for lhs, rhs in rules:
            if rhs == (w,):
                c[i, i + 1, symbols.index(lhs)] += 1
    with np.errstate(over="ignore"):
        for length in range(2, n + 1):
            for i in range(n - length + 1):
                j = i + length
                for k in range(i + 1, j):
                    for lhs, rhs in rules:
                        if len(rhs) == 2:
                            b = c[i, k, symbols.index(rhs[0])]
                            cc = c[k, j, symbols.index(rhs[1])]
                            c[i, j, symbols.index(lhs)] += b * cc
    return c[0, n, symbols.index(start)] if start in symbols else 0


@pytest.mark.parametrize(
    "student,message",
    [
        (count_numpy, "a count cannot be negative"),
        (lambda r, w, s="S": count_numpy(r, w, s, dtype=np.float64), "a float holds 53 bits"),
        (lambda r, w, s="S": float(count(r, w, s)), "a float holds 53 bits"),
    ],
)
def test_a_count_that_overflows_or_rounds_fails_the_visible_check(student, message):
    with pytest.raises(CheckFailed) as failed:
        checks.check_count_parses(student)
    assert message in str(failed.value) and "37 words" in str(failed.value)


# --------------------------- issue 42: a back pointer overwritten by every candidate is caught


def viterbi_last_wins(rules, words, k_outer=True, k_down=False, rules_reversed=False):
    """Viterbi CKY whose score takes the max but whose back pointer is overwritten by every
    candidate (the last one tried wins), in one of the usual loop orders."""
    n = len(words)
    best, back = {}, {}
    for i, w in enumerate(words):
        for lhs, rhs, lp in rules:
            if rhs == (w,):
                best[(i, i + 1, lhs)], back[(i, i + 1, lhs)] = lp, w
    binary = [r for r in rules if len(r[1]) == 2][:: -1 if rules_reversed else 1]
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            splits = list(range(i + 1, j))[:: -1 if k_down else 1]
            order = [(k, r) for k in splits for r in binary]
            if not k_outer:
                order = [(k, r) for r in binary for k in splits]
            for k, (lhs, rhs, lp) in order:
                b, c = best.get((i, k, rhs[0])), best.get((k, j, rhs[1]))
                if b is not None and c is not None:
                    best[(i, j, lhs)] = max(best.get((i, j, lhs), -math.inf), lp + b + c)
                    back[(i, j, lhs)] = (k, rhs)

    def tree(i, j, a):
        if isinstance(back[(i, j, a)], str):
            return (a, back[(i, j, a)])
        k, (b, c) = back[(i, j, a)]
        return (a, tree(i, k, b), tree(k, j, c))

    if (0, n, "S") not in best:
        return None, -math.inf
    return tree(0, n, "S"), best[(0, n, "S")]


@pytest.mark.parametrize("k_outer", [True, False])
@pytest.mark.parametrize("k_down", [True, False])
@pytest.mark.parametrize("rules_reversed", [True, False])
def test_a_back_pointer_overwritten_by_every_candidate_fails_the_visible_check(
    k_outer, k_down, rules_reversed
):
    def student(rules, words):
        return viterbi_last_wins(rules, words, k_outer, k_down, rules_reversed)

    with pytest.raises(CheckFailed, match="the tree is not"):
        checks.check_viterbi_cky(student)
