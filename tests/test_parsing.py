"""Tests of nlpcourse.parsing against independent oracles.

Oracles: nltk's RecursiveDescentParser, ChartParser, ViterbiParser and induce_pcfg on the same
grammars; brute-force enumeration of every string a grammar derives up to a length
(CFG.language) and of every tree of a sentence (nltk's chart parser on the original grammar); the
Catalan numbers and the closed form log P(a^n) = log C_{n-1} + (2n-1) log 1/2 for the grammar
X -> X X | 'a'; the exam sentence's steps and a PARSEVAL example worked by hand.
"""

import itertools
import math
from collections import Counter

import nltk
import numpy as np
import pytest

from nlpcourse import parsing, parsing_fast
from nlpcourse.parsing import (
    CFG,
    PCFG,
    Rule,
    StepLimitExceeded,
    Tree,
    as_tree,
    as_tuple,
    brackets,
    brown_tag_pcfg,
    catalan,
    cky,
    cky_recognize,
    count_parses,
    inside,
    leftmost_derivation,
    log_tree_count,
    parse,
    parseval,
    recursive_descent,
    shift_reduce,
    to_cnf,
    treebank_pcfg,
    viterbi_cky,
)

EXAM = """
S -> NP VP
VP -> V NP
NP -> Det N
Det -> 'the'
N -> 'cat' | 'rat'
V -> 'caught'
"""
EXAM_WORDS = "the cat caught the rat".split()

# PP attachment and coordination, no left recursion (for the top-down parser and nltk's)
PP = """
S -> NP VP
NP -> Det N | Det N PP | 'I' | NP 'and' NP
VP -> V NP | V NP PP
PP -> P NP
Det -> 'the' | 'a'
N -> 'man' | 'telescope' | 'park' | 'dog'
V -> 'saw'
P -> 'with' | 'in'
"""

# long rules with words inside, unit chains, a unit rule to a word
MIXED = """
S -> NP VP | S 'and' S | VP
NP -> 'she' | Det N | NP PP | N
VP -> V | V NP | V NP PP | 'go' 'home' NP
PP -> P NP
Det -> 'the'
N -> 'dog' | 'park'
V -> 'runs' | 'sees'
P -> 'in'
"""

# empty rules: optional determiners and adjectives
EPSILON = """
S -> NP V
NP -> D A N
D -> 'the' |
A -> 'big' | A A |
N -> 'dog' | 'cat'
V -> 'runs'
"""

CATALAN = "X -> X X | 'a'"


def nltk_trees(text, words):
    parser = nltk.ChartParser(nltk.CFG.fromstring(text))
    return {str(Tree.fromstring(str(t))) for t in parser.parse(words)}


def strs(trees):
    return {str(t) for t in trees}


# ------------------------------------------------------------------------------------------- trees


def test_tree_round_trip_and_nltk():
    text = "(S (NP (Det the) (N cat)) (VP (V caught) (NP (Det the) (N rat))))"
    t = Tree.fromstring(text)
    assert str(t) == text
    assert str(Tree.fromstring(str(nltk.Tree.fromstring(text)).replace("\n", " "))) == text
    assert nltk.Tree.fromstring(str(t)) == nltk.Tree.fromstring(text)
    assert t.leaves() == EXAM_WORDS
    assert [str(r) for r in t.rules()][:3] == ["S -> NP VP", "NP -> Det N", "Det -> the"]
    assert ("VP", 2, 5) in t.spans() and ("S", 0, 5) in t.spans()


@pytest.mark.parametrize("bad", ["", "(S (NP a)", "(S a))", "S a", "( (NP a))"])
def test_tree_bad_input(bad):
    with pytest.raises(ValueError):
        Tree.fromstring(bad)


# ----------------------------------------------------------------------------------------- grammar


@pytest.mark.parametrize(
    "bad, says",
    [
        ("S -> NP VP\nNP -> 'a'", "'VP'"),  # VP unquoted and undefined
        ("S NP VP", "not a rule"),
        ("S -> 'S'", "both"),
        ("", "no rules"),
        ("S -> 'a' [0.5]", "probability"),
    ],
)
def test_cfg_bad_input(bad, says):
    with pytest.raises(ValueError, match=says):
        CFG.fromstring(bad)


def test_pcfg_probabilities_must_sum_to_one():
    with pytest.raises(ValueError, match="sum to 0.9"):
        PCFG.fromstring("S -> 'a' [0.5] | 'b' [0.4]")
    with pytest.raises(ValueError, match="no \\[p\\]"):
        PCFG.fromstring("S -> 'a'")


def test_pcfg_equality_includes_the_probabilities():
    # the oracle: the probabilities written in the text, compared by hand
    a = PCFG.fromstring("S -> S S [0.3] | 'a' [0.7]")
    assert a == PCFG.fromstring("S -> S S [0.3]\nS -> 'a' [0.7]")  # the same rules, other layout
    assert a != PCFG.fromstring("S -> S S [0.4] | 'a' [0.6]")  # the same rules, other numbers
    assert a != PCFG.fromstring("S -> 'a' [0.7] | S S [0.3]")  # the same numbers, other order
    assert a != CFG.fromstring("S -> S S | 'a'") and CFG.fromstring("S -> S S | 'a'") != a
    assert a.prob(Rule("S", ("S", "S"))) == pytest.approx(0.3)
    assert a.prob(Rule("S", ("b",))) == 0.0
    assert a.weighted() == [
        (Rule("S", ("S", "S")), math.log(0.3)),
        (Rule("S", ("a",)), math.log(0.7)),
    ]
    with pytest.raises(ValueError, match="given twice"):
        PCFG.fromstring("S -> 'a' [0.5] | 'a' [0.5]")


def test_left_recursion_found():
    g = CFG.fromstring("S -> NP VP\nNP -> NP PP | 'I'\nPP -> 'in' NP\nVP -> 'ran'")
    assert g.left_recursive() == {"NP"}
    assert CFG.fromstring(PP).left_recursive() == {"NP"}
    assert CFG.fromstring(EXAM).left_recursive() == set()


# ------------------------------------------------------------------------ top-down and bottom-up


def test_recursive_descent_exam_steps_by_hand():
    g = CFG.fromstring(EXAM)
    steps, trees = recursive_descent(g, EXAM_WORDS, trace=True)
    first_parse = next(i for i, s in enumerate(steps) if s.action == "parse")
    first = [(s.action, s.what) for s in steps[: first_parse + 1]]
    assert first == [
        ("expand", "S -> NP VP"),
        ("expand", "NP -> Det N"),
        ("expand", "Det -> 'the'"),
        ("match", "the"),
        ("expand", "N -> 'cat'"),
        ("match", "cat"),
        ("expand", "VP -> V NP"),
        ("expand", "V -> 'caught'"),
        ("match", "caught"),
        ("expand", "NP -> Det N"),
        ("expand", "Det -> 'the'"),
        ("match", "the"),
        ("expand", "N -> 'cat'"),
        ("fail", "'cat' does not match 'rat'"),
        ("backtrack", "undo N -> 'cat'"),
        ("expand", "N -> 'rat'"),
        ("match", "rat"),
        ("parse", "(S (NP (Det the) (N cat)) (VP (V caught) (NP (Det the) (N rat))))"),
    ]
    # the leftmost derivation, written by hand, is the tree's rules in preorder
    assert [str(r) for r in trees[0].rules()] == [
        "S -> NP VP",
        "NP -> Det N",
        "Det -> the",
        "N -> cat",
        "VP -> V NP",
        "V -> caught",
        "NP -> Det N",
        "Det -> the",
        "N -> rat",
    ]
    # it is also the sequence of expansions on the successful path (the undone one left out)
    kept = [s.what for s in steps[:18] if s.action == "expand" and s != steps[12]]
    assert [w.replace("'", "") for w in kept] == [str(r) for r in trees[0].rules()]


@pytest.mark.parametrize(
    "text, sentence",
    [
        (EXAM, "the cat caught the rat"),
        (EXAM, "the rat caught the cat"),
        (PP.replace(" | NP 'and' NP", ""), "I saw the man with the telescope"),
        (
            PP.replace(" | NP 'and' NP", ""),
            "I saw the man in the park with a telescope",
        ),
    ],
)
def test_top_down_and_bottom_up_against_nltk(text, sentence):
    words = sentence.split()
    g = CFG.fromstring(text)
    expected = {
        str(Tree.fromstring(str(t)))
        for t in nltk.RecursiveDescentParser(nltk.CFG.fromstring(text)).parse(words)
    }
    assert expected == nltk_trees(text, words)
    assert strs(recursive_descent(g, words)[1]) == expected
    assert strs(shift_reduce(g, words)[1]) == expected
    assert strs(parse(g, words)) == expected


def test_left_recursion_makes_top_down_loop_but_not_the_others():
    g = CFG.fromstring(PP)
    words = "I and I saw the dog".split()
    with pytest.raises(StepLimitExceeded, match="NP"):
        recursive_descent(g, words, max_steps=5_000)
    expected = nltk_trees(PP, words)
    assert len(expected) == 1
    assert strs(shift_reduce(g, words)[1]) == expected
    assert strs(parse(g, words)) == expected


def test_unknown_word_and_empty_sentence():
    g = CFG.fromstring(EXAM)
    for parser in (recursive_descent, shift_reduce, cky):
        grammar = to_cnf(g) if parser is cky else g
        with pytest.raises(ValueError, match="'dog'"):
            parser(grammar, "the dog caught the rat".split())
        with pytest.raises(ValueError, match="empty"):
            parser(grammar, [])


# --------------------------------------------------------------------------- CNF and the chart


@pytest.mark.parametrize("text", [EXAM, PP, MIXED, EPSILON, CATALAN])
def test_cnf_keeps_the_language(text):
    g = CFG.fromstring(text)
    cnf = to_cnf(g)
    assert cnf.is_cnf()
    for rule in cnf.rules:
        assert len(rule.rhs) in (1, 2)
    max_len = 6 if text in (EXAM, CATALAN, EPSILON) else 5
    language = g.language(max_len)
    assert language == cnf.language(max_len)
    assert len(language) > 0
    # and CKY recognises exactly those strings, among all strings over the words up to length 4
    vocabulary = sorted({w for s in language for w in s})
    for n in range(1, 4):
        for words in itertools.product(vocabulary, repeat=n):
            assert cky(cnf, words).recognises() == (words in language), words


@pytest.mark.parametrize(
    "text, sentence",
    [
        (EXAM, "the cat caught the rat"),
        (PP, "I saw the man with the telescope in the park"),
        (PP, "I saw the man and the dog with a telescope"),
        (MIXED, "she sees the dog in the park and the dog runs"),
        (MIXED, "go home the dog in the park"),
        (MIXED, "runs"),
    ],
)
def test_cky_trees_mapped_back_equal_nltk(text, sentence):
    words = sentence.split()
    expected = nltk_trees(text, words)
    chart = cky(to_cnf(CFG.fromstring(text)), words)
    trees = [Tree.from_cnf(t) for t in chart.trees()]
    assert chart.count() == len(trees) == len(expected)
    assert strs(trees) == expected
    assert chart.recognises() == bool(expected)


# empty constituents, each nullable symbol with one empty tree: optional determiners, adjectives,
# objects and modifiers (two in a row: "runs now" has the modifier in either place)
EPSILON_TREES = """
S -> NP VP
NP -> D ADJ N | NP PP | 'it'
D -> 'the' | 'a' |
ADJ -> 'big' | ADJ OLD |
OLD -> 'old'
N -> 'dog' | 'cat'
VP -> V OBJ | V OBJ MOD MOD | VP PP
OBJ -> NP |
MOD -> 'now' |
V -> 'runs' | 'sees'
PP -> P NP
P -> 'in'
"""


def test_cnf_trees_mapped_back_keep_empty_constituents():
    g = CFG.fromstring(EPSILON_TREES)
    cnf = to_cnf(g)
    parser = nltk.ChartParser(nltk.CFG.fromstring(EPSILON_TREES))  # handles empty rules
    language = sorted(g.language(4))
    assert len(language) > 200
    for words in [w for w in language if len(w) <= 3] + language[::8]:
        chart = cky(cnf, words)
        ours = sorted(str(Tree.from_cnf(t)) for t in chart.trees())
        expected = sorted(str(Tree.fromstring(str(t))) for t in parser.parse(list(words)))
        assert ours == expected, words
        assert chart.count() == len(expected)
    # by hand: the modifier in either of its two places, the empty object and modifier kept
    assert {str(t) for t in parse(g, "it runs now".split())} == {
        "(S (NP it) (VP (V runs) (OBJ) (MOD now) (MOD)))",
        "(S (NP it) (VP (V runs) (OBJ) (MOD) (MOD now)))",
    }
    assert {str(t) for t in parse(g, "dog runs".split())} == {
        "(S (NP (D) (ADJ) (N dog)) (VP (V runs) (OBJ)))",
        "(S (NP (D) (ADJ) (N dog)) (VP (V runs) (OBJ) (MOD) (MOD)))",
    }


def test_cky_counts_are_catalan_numbers():
    cnf = CFG.fromstring(CATALAN)
    for n in range(1, 16):
        assert cky(cnf, ["a"] * n).count() == catalan(n - 1)
    assert cky(cnf, ["a"] * 60).count() == math.comb(118, 59) // 60  # exact big integer
    assert [catalan(n) for n in range(6)] == [1, 1, 2, 5, 14, 42]


def test_cky_refuses_a_grammar_not_in_cnf():
    with pytest.raises(ValueError, match="NP -> Det N PP"):
        cky(CFG.fromstring(PP), "I saw the dog".split())


# ------------------------------------------------------------------------------------------ PCFGs

TOY_PCFG = """
S -> NP VP [1.0]
NP -> Det N [0.5] | NP PP [0.2] | 'I' [0.3]
VP -> V NP [0.7] | VP PP [0.3]
PP -> P NP [1.0]
Det -> 'the' [0.6] | 'a' [0.4]
N -> 'man' [0.5] | 'telescope' [0.3] | 'park' [0.2]
V -> 'saw' [1.0]
P -> 'with' [0.6] | 'in' [0.4]
"""

# not in CNF: a long rule with a word inside, unit chains
TOY_PCFG_MIXED = """
S -> NP VP [0.8] | VP [0.2]
NP -> Det N [0.5] | NP PP [0.1] | N [0.2] | 'I' [0.2]
VP -> V NP [0.5] | V [0.2] | V NP PP [0.2] | V 'and' V NP [0.1]
PP -> P NP [1.0]
Det -> 'the' [1.0]
N -> 'man' [0.6] | 'park' [0.4]
V -> 'saw' [0.7] | 'walked' [0.3]
P -> 'in' [1.0]
"""

PCFG_SENTENCES = [
    "I saw the man",
    "I saw the man with the telescope",
    "I saw the man in the park with a telescope",
    "the man saw a man in the park with the telescope in a park",
]
MIXED_SENTENCES = ["saw", "I saw the man in the park", "man saw and walked park in the park"]


def all_trees(text, words):
    """Every tree of the sentence under the original grammar (nltk's chart parser)."""
    g = nltk.PCFG.fromstring(text)
    return [Tree.fromstring(str(t)) for t in nltk.ChartParser(g).parse(words)]


@pytest.mark.parametrize(
    "text, sentence",
    [(TOY_PCFG, s) for s in PCFG_SENTENCES] + [(TOY_PCFG_MIXED, s) for s in MIXED_SENTENCES],
)
def test_viterbi_and_inside_against_nltk_and_brute_force(text, sentence):
    words = sentence.split()
    g = PCFG.fromstring(text)
    trees = all_trees(text, words)
    logps = np.array([g.tree_logprob(t) for t in trees])
    assert len(trees) >= 1
    best, logp = g.viterbi(words)
    assert logp == pytest.approx(logps.max(), rel=1e-12)
    assert g.tree_logprob(best) == pytest.approx(logp, rel=1e-12)
    assert str(best) in {
        str(t) for t, lp in zip(trees, logps, strict=True) if lp > logps.max() - 1e-9
    }
    assert g.inside(words) == pytest.approx(np.logaddexp.reduce(logps), rel=1e-12)
    nltk_best = next(nltk.ViterbiParser(nltk.PCFG.fromstring(text)).parse(words))
    assert math.log(nltk_best.prob()) == pytest.approx(logp, rel=1e-9)
    if text == TOY_PCFG:
        assert str(Tree.fromstring(str(nltk.Tree.convert(nltk_best)))) == str(best)


@pytest.mark.parametrize(
    "text, sentence",
    [(TOY_PCFG, s) for s in PCFG_SENTENCES] + [(TOY_PCFG_MIXED, s) for s in MIXED_SENTENCES],
)
def test_loop_versions_against_brute_force(text, sentence):
    words = sentence.split()
    g = PCFG.fromstring(text)
    logps = np.array([g.tree_logprob(t) for t in all_trees(text, words)])
    best, logp = parsing.viterbi_cky_loop(g, words)
    assert logp == pytest.approx(logps.max(), rel=1e-12)
    assert g.tree_logprob(best) == pytest.approx(logp, rel=1e-12)
    assert parsing.inside_loop(g, words) == pytest.approx(np.logaddexp.reduce(logps), rel=1e-12)


def test_vectorised_equal_the_loops_on_brown_tag_sequences():
    g = brown_tag_pcfg()
    tags = list(parsing._TAGS)
    rng = np.random.default_rng(3)
    sentences = [list(rng.choice(tags, size=n)) for n in range(1, 13) for _ in range(2)]
    batched = g.log_likelihoods(sentences)
    for words, batch_logz in zip(sentences, batched, strict=True):
        best_loop, logp_loop = parsing.viterbi_cky_loop(g, words)
        best, logp = g.viterbi(words)
        assert logp == pytest.approx(logp_loop, rel=1e-12, abs=1e-12)
        assert g.tree_logprob(best) == pytest.approx(logp_loop, rel=1e-12, abs=1e-12)
        logz = parsing.inside_loop(g, words)
        assert g.inside(words) == pytest.approx(logz, rel=1e-12)
        assert batch_logz == pytest.approx(logz, rel=1e-12)
    # the batched Viterbi, sentences of several lengths mixed, one without a tree
    toy = PCFG.fromstring(TOY_PCFG)
    toy_sentences = [s.split() for s in PCFG_SENTENCES + ["I", "I saw the man", "the man"]]
    for grammar, sents in [(g, sentences[::-1]), (toy, toy_sentences)]:
        for words, (best, logp) in zip(sents, grammar.viterbi_batch(sents), strict=True):
            best_loop, logp_loop = parsing.viterbi_cky_loop(grammar, words)
            assert logp == pytest.approx(logp_loop, rel=1e-12, abs=1e-12)
            assert (best is None) == (best_loop is None)
            if best is not None:
                assert grammar.tree_logprob(best) == pytest.approx(logp, rel=1e-12)


def test_loop_versions_refuse_unknown_words():
    g = PCFG.fromstring(TOY_PCFG)
    for f in (parsing.viterbi_cky_loop, parsing.inside_loop):
        with pytest.raises(ValueError, match="'dog'"):
            f(g, "I saw the dog".split())
    assert parsing.viterbi_cky_loop(g, "the man".split()) == (None, -math.inf)
    assert parsing.inside_loop(g, "the man".split()) == -math.inf


def test_inside_no_underflow_on_100_words_closed_form():
    g = PCFG.fromstring("X -> X X [0.5] | 'a' [0.5]")
    for n in (1, 2, 7, 100):
        expected = math.log(catalan(n - 1)) + (2 * n - 1) * math.log(0.5)
        assert inside(g, ["a"] * n) == pytest.approx(expected, rel=1e-10)
    best, logp = viterbi_cky(g, ["a"] * 100)
    assert logp == pytest.approx(199 * math.log(0.5))
    assert best.leaves() == ["a"] * 100


def test_viterbi_no_parse_and_unknown_word():
    g = PCFG.fromstring(TOY_PCFG)
    assert g.viterbi("the man".split()) == (None, -math.inf)
    assert g.inside("the man".split()) == -math.inf
    with pytest.raises(ValueError, match="'dog'"):
        g.viterbi("I saw the dog".split())


@pytest.mark.parametrize(
    "text, sentence",
    [
        (TOY_PCFG, PCFG_SENTENCES[2]),
        (TOY_PCFG, PCFG_SENTENCES[3]),
        (TOY_PCFG_MIXED, MIXED_SENTENCES[1]),
        (TOY_PCFG_MIXED, MIXED_SENTENCES[2]),
    ],
)
def test_expected_counts_equal_brute_force_posterior_counts(text, sentence):
    words = sentence.split()
    g = PCFG.fromstring(text)
    trees = all_trees(text, words)
    logps = np.array([g.tree_logprob(t) for t in trees])
    posterior = np.exp(logps - np.logaddexp.reduce(logps))
    expected = Counter()
    for t, p in zip(trees, posterior, strict=True):
        for r in t.rules():
            expected[r] += p
    got = g.expected_counts(words)
    assert set(got) == set(g.rules)
    for r in g.rules:
        assert got[r] == pytest.approx(expected.get(r, 0.0), abs=1e-10), r
    # outside x inside of the start symbol over the whole sentence is the sentence probability
    beta, alpha = g.outside(words)
    assert alpha[0, len(words), 0] == 0.0
    assert beta[0, len(words), 0] == pytest.approx(np.logaddexp.reduce(logps))


def test_inside_outside_log_likelihood_never_decreases():
    rng = np.random.default_rng(0)
    truth = PCFG.fromstring(TOY_PCFG)
    sentences = []
    while len(sentences) < 30:
        t = truth.sample(rng)
        if len(t.leaves()) <= 12:
            sentences.append(t.leaves())
    # start from the same rules with uniform probabilities
    uniform = PCFG.from_counts({r: 1.0 for r in truth.rules}, truth.start)
    new, history = uniform.inside_outside(sentences, iters=6)
    assert len(history) == 7
    assert all(b >= a - 1e-9 for a, b in itertools.pairwise(history))
    assert history[-1] > history[0] + 1
    assert sum(new.inside(s) for s in sentences) == pytest.approx(history[-1])
    # the batched inside pass (sentences of one length together) equals one at a time
    batched = new.log_likelihoods(sentences)
    assert np.allclose(batched, [new.inside(s) for s in sentences], rtol=1e-12)


def test_fit_equals_nltk_induce_pcfg_and_recovers_the_truth():
    rng = np.random.default_rng(1)
    truth = PCFG.fromstring(TOY_PCFG_MIXED)
    trees = [truth.sample(rng) for _ in range(3000)]
    fitted = PCFG.fit(trees)
    nltk_g = nltk.induce_pcfg(
        nltk.Nonterminal("S"),
        [p for t in trees for p in nltk.Tree.fromstring(str(t)).productions()],
    )
    nltk_probs = {
        Rule(str(p.lhs()), tuple(str(s) for s in p.rhs())): p.prob() for p in nltk_g.productions()
    }
    assert len(nltk_probs) == len(fitted.rules)
    for r in fitted.rules:
        assert fitted.prob(r) == pytest.approx(nltk_probs[r], rel=1e-12)
    for r in truth.rules:  # 3000 trees: every probability within 0.05 of the truth
        assert abs(fitted.prob(r) - truth.prob(r)) < 0.05, r


def test_cnf_of_a_pcfg_keeps_tree_probabilities():
    g = PCFG.fromstring(TOY_PCFG_MIXED)
    words = MIXED_SENTENCES[2].split()
    chart = cky(g.cnf(), words)
    probs = {}
    for t in chart.trees():
        probs[str(Tree.from_cnf(t))] = sum(r.logp for r in _cnf_rules_used(g.cnf(), t))
    for t in all_trees(TOY_PCFG_MIXED, words):
        assert probs[str(t)] == pytest.approx(g.tree_logprob(t), rel=1e-12)
    assert len(probs) == len(all_trees(TOY_PCFG_MIXED, words))


def _cnf_rules_used(cnf, tree):
    by_label = {(r.label, r.rhs): r for r in cnf.cnf_rules}
    out = []
    for node in tree.subtrees():
        rhs = tuple(c.label if isinstance(c, Tree) else c for c in node.children)
        rhs = tuple(_lhs(cnf, x) for x in rhs)
        out.append(by_label[(node.label, rhs)])
    return out


def _lhs(cnf, label):
    for r in cnf.cnf_rules:
        if r.label == label:
            return r.lhs
    return label


def test_pcfg_refuses_unit_cycles_and_empty_rules_saying_why():
    g = PCFG.fromstring("S -> A [0.5] | 'a' [0.5]\nA -> S [0.5] | 'b' [0.5]")
    for f in (g.viterbi, g.inside):
        with pytest.raises(
            ValueError,
            match=r"unit cycle through (S -> A -> S|A -> S -> A).*"
            r"geometric series",
        ):
            f(["a"])
    g = PCFG.fromstring("S -> 'a' B [1.0]\nB -> 'b' [0.6] | [0.4]")
    with pytest.raises(ValueError, match=r"empty rules \(B -> \).*sum.*largest for Viterbi"):
        g.inside(["a"])


# -------------------------------------------------------------------------------------- PARSEVAL


def test_parseval_by_hand():
    gold = Tree.fromstring(
        "(S (NP (PRP I)) (VP (V saw) (NP (NP (D the) (N man)) (PP (P with) (NP (D a) (N dog)))))"
        " (. .))"
    )
    pred = Tree.fromstring(
        "(S (NP (PRP I)) (VP (V saw) (NP (D the) (N man)) (PP (P with) (NP (D a) (N dog)))) (. .))"
    )
    # words: I(0) saw(1) the(2) man(3) with(4) a(5) dog(6) .(7)
    # gold: S 0-8, NP 0-1, VP 1-7, NP 2-7, NP 2-4, PP 4-7, NP 5-7 (7 brackets)
    # pred: S 0-8, NP 0-1, VP 1-7, NP 2-4, PP 4-7, NP 5-7 (6 brackets, all in gold)
    hand = [("S", 0, 8), ("NP", 0, 1), ("VP", 1, 7), ("NP", 2, 7), ("NP", 2, 4), ("PP", 4, 7)]
    assert brackets(gold) == Counter(hand + [("NP", 5, 7)])
    scores = parseval([gold], [pred])
    assert scores["precision"] == 1.0
    assert scores["recall"] == pytest.approx(6 / 7)
    assert scores["f1"] == pytest.approx(2 * 6 / 7 / (1 + 6 / 7))
    assert scores["exact"] == 0.0
    # evalb leaves out punctuation: S then spans 0-7
    assert ("S", 0, 7) in brackets(gold, punctuation=["."])
    assert ("S", 0, 8) not in brackets(gold, punctuation=["."])
    # a failed parse counts its gold brackets as missed; a perfect one as exact
    both = parseval([gold, gold], [None, gold])
    assert both["recall"] == pytest.approx(0.5) and both["precision"] == 1.0
    assert both["exact"] == 0.5
    with pytest.raises(ValueError, match="different words"):
        parseval([gold], [Tree.fromstring("(S (NP (PRP you)))")])


# ------------------------------------------------------- fast path, counting, the two grammars


@pytest.mark.parametrize(
    "text, sentence", [(TOY_PCFG, PCFG_SENTENCES[3]), (TOY_PCFG_MIXED, MIXED_SENTENCES[2])]
)
def test_scaled_matrix_products_equal_the_log_space_recursions(text, sentence, monkeypatch):
    words = sentence.split()
    fast = PCFG.fromstring(text).outside(words), PCFG.fromstring(text).expected_counts(words)
    monkeypatch.setattr(parsing_fast, "SAFE_EXPONENT", 1.0)  # every span takes the path in logs
    slow = PCFG.fromstring(text).outside(words), PCFG.fromstring(text).expected_counts(words)
    for a, b in zip(fast[0], slow[0], strict=True):
        assert np.array_equal(np.isfinite(a), np.isfinite(b))
        assert np.allclose(a[np.isfinite(a)], b[np.isfinite(b)], rtol=1e-12, atol=1e-12)
    for r in fast[1]:
        assert fast[1][r] == pytest.approx(slow[1][r], abs=1e-12)


def test_tiny_probabilities_take_the_exact_path():
    # B over "a a" is 1e-200 * 1e-200 times as likely as A: the matrix products would lose it
    g = PCFG.fromstring(
        "S -> A A [0.5] | B C [0.5]\nA -> 'a' [1.0]\nB -> 'a' [1e-200] | 'b' [1.0]\n"
        "C -> B S [0.5] | 'c' [0.5]"
    )
    words = "a a".split()
    expected = math.log(0.5) + 0.0
    assert g.inside(words) == pytest.approx(expected)
    words = "a a a".split()  # only S -> B C, C -> B S ... no tree: -inf
    assert g.inside(words) == -math.inf
    words = ["a", "a", "a", "a"]  # B(a) C(B(a) S(A A)): 0.5 * 1e-200 * 0.5 * 1e-200 * 0.5
    assert g.inside(words) == pytest.approx(3 * math.log(0.5) + 2 * math.log(1e-200))


def test_log_tree_count_equals_the_chart_count():
    g = CFG.fromstring(PP)
    for sentence in ["I saw the man with the telescope in the park", "I saw the dog and the man"]:
        words = sentence.split()
        count = len(nltk_trees(PP, words))
        assert math.exp(log_tree_count(g, words)) == pytest.approx(count)
    assert log_tree_count(CFG.fromstring(CATALAN), ["a"] * 30) == pytest.approx(
        math.log(catalan(29))
    )
    # the probabilities of a PCFG play no part
    fair = PCFG.fromstring("X -> X X [0.3] | 'a' [0.7]")
    for g in (fair, fair.cnf()):
        assert log_tree_count(g, ["a"] * 12) == pytest.approx(math.log(catalan(11)))


def test_brown_tag_grammar_parses_every_tag_sequence():
    g, core = brown_tag_pcfg(), brown_tag_pcfg(fallback=0.0)
    rng = np.random.default_rng(0)
    tags = ["NOUN", "VERB", "ADJ", "ADV", "PRON", "DET", "ADP", "NUM", "CONJ", "PRT", ".", "X"]
    for n in (1, 2, 5, 12):
        words = list(rng.choice(tags, size=n))
        assert g.inside(words) > -math.inf
    assert core.inside("DET NOUN VERB .".split()) > -math.inf
    assert core.inside("CONJ CONJ".split()) == -math.inf
    # the fallback's share: P_core(tags) = P(TOP -> S) P_S(tags) is part of P(tags)
    words = "DET NOUN VERB .".split()
    assert g.inside(words) > core.inside(words) + math.log(0.99) - 1e-9


def test_treebank_pcfg_lexicon_from_tagged_sentences():
    tagged = [[("The", "DET"), ("dog", "NOUN"), ("runs", "VERB"), ("fast", "ADV"), ("in", "ADP")]]
    tagged += [[("a", "DET"), ("dog", "NOUN"), ("and", "CONJ"), ("he", "PRON"), ("big", "ADJ")]]
    g = treebank_pcfg(tagged)
    assert g.prob(Rule("Det", ("the",))) == 0.5 and g.prob(Rule("N", ("dog",))) == 1.0
    tree = g.sample(np.random.default_rng(0))
    assert g.tree_logprob(tree) > -math.inf


# --------------------------------------------------------------- plain-data versions (exercise)

EXAM_TUPLE = (
    "S",
    ("NP", ("Det", "the"), ("N", "cat")),
    ("VP", ("V", "caught"), ("NP", ("Det", "the"), ("N", "rat"))),
)


def test_leftmost_derivation_of_the_exam_tree_by_hand():
    forms = leftmost_derivation(EXAM_TUPLE)
    assert [" ".join(f) for f in forms] == [
        "S",
        "NP VP",
        "Det N VP",
        "the N VP",
        "the cat VP",
        "the cat V NP",
        "the cat caught NP",
        "the cat caught Det N",
        "the cat caught the N",
        "the cat caught the rat",
    ]
    assert leftmost_derivation(str(as_tree(EXAM_TUPLE))) == forms
    assert as_tuple(as_tree(EXAM_TUPLE)) == EXAM_TUPLE
    with pytest.raises(ValueError, match="not a tree"):
        as_tree(42)


def test_cky_recognize_by_hand_with_a_unit_rule():
    rules = [
        ("S", ("NP", "VP")),
        ("VP", ("V", "NP")),
        ("VP", ("V",)),  # a unit rule: VP -> V
        ("NP", ("Det", "N")),
        ("Det", ("the",)),
        ("N", ("cat",)),
        ("N", ("rat",)),
        ("V", ("caught",)),
        ("V", ("ran",)),
    ]
    table = cky_recognize(rules, "the cat caught the rat".split())
    assert table == {
        (0, 1): {"Det"},
        (1, 2): {"N"},
        (2, 3): {"V", "VP"},
        (3, 4): {"Det"},
        (4, 5): {"N"},
        (0, 2): {"NP"},
        (3, 5): {"NP"},
        (2, 5): {"VP"},
        (0, 3): {"S"},
        (0, 5): {"S"},
    }
    assert count_parses(rules, "the cat caught the rat".split()) == 1
    assert count_parses([("X", ("X", "X")), ("X", ("a",))], ["a"] * 9, start="X") == catalan(8)


def test_plain_rules_give_the_pcfg_answers():
    g = PCFG.fromstring(TOY_PCFG)
    rules = [(r.lhs, r.rhs, lp) for r, lp in g.logp.items()]
    words = PCFG_SENTENCES[2].split()
    assert inside(rules, words) == pytest.approx(g.inside(words), rel=1e-12)
    best, logp = viterbi_cky(rules, words)
    assert (str(best), logp) == (str(g.viterbi(words)[0]), pytest.approx(g.viterbi(words)[1]))
    gold = [EXAM_TUPLE, str(as_tree(EXAM_TUPLE))]
    assert parseval(gold, gold)["f1"] == 1.0


def test_a_grammar_without_binary_rules():
    g = PCFG.fromstring("S -> 'a' [0.25] | 'b' [0.75]")
    assert g.viterbi(["a", "b"]) == (None, -math.inf)
    assert g.inside(["a", "b"]) == -math.inf
    best, logp = g.viterbi(["b"])
    assert str(best) == "(S b)" and logp == pytest.approx(math.log(0.75))
