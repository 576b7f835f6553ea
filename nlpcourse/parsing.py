"""Constituency parsing: CFGs, top-down and bottom-up parsing, CKY, PCFGs (chapter 3).

Based on Jurafsky & Martin, *Speech and Language Processing* (3rd ed. draft, "SLP3"), chapters 17
(context-free grammars and constituency parsing) and Appendix C (statistical constituency parsing),
and on Manning & Schütze (1999), *Foundations of Statistical NLP*, chapter 11 (PCFGs, the inside
and outside probabilities, inside-outside re-estimation) and Lari & Young (1990). Equation labels
``(parse-...)`` are the book's (``book/parsing.md``).

What is here, in the order of the chapter:

* :class:`Tree`, a constituency tree that reads and writes the bracketed format of the Penn
  Treebank and of ``nltk.Tree`` (``(S (NP (Det the) (N cat)) ...)``);
* :class:`Rule` and :class:`CFG`, a context-free grammar written as text (``S -> NP VP | VP``,
  terminals in quotes, as ``nltk.CFG.fromstring`` reads it);
* :func:`recursive_descent` (top-down, depth-first, with backtracking) and :func:`shift_reduce`
  (bottom-up, every shift and reduce tried), both recording every step they take;
* :func:`to_cnf`, the conversion to Chomsky normal form, and :meth:`Tree.from_cnf`, which maps a
  tree of the converted grammar back to the original grammar's tree;
* :func:`cky`, the CKY recogniser and parser for a CNF grammar: a :class:`Chart` that says whether
  the sentence is in the language, how many trees it has, and lists them lazily;
* :class:`PCFG`, a probabilistic CFG: relative-frequency estimation from trees (:meth:`PCFG.fit`),
  sampling, Viterbi CKY (:meth:`PCFG.viterbi`), the inside and outside algorithms, expected rule
  counts and inside-outside (EM) re-estimation (:meth:`PCFG.inside_outside`);
* :func:`parseval`, labelled-bracket precision, recall, F1 and exact match.

The Penn Treebank reader (:func:`read_mrg`, :func:`treebank_sample`) is in :mod:`nlpcourse.data`
(and importable from here too).

The probabilistic dynamic programs, for a CNF grammar with binary rules ``A -> B C`` and lexical
rules ``A -> w``, words ``w_1 .. w_n`` and spans ``(i, j)`` covering ``w_{i+1} .. w_j``:

    inside   beta_A(i, i+1) = log P(A -> w_{i+1})                                 (parse-inside)
             beta_A(i, j)   = logsumexp_{A -> B C, i<k<j} [log P(A -> B C)
                                                           + beta_B(i, k) + beta_C(k, j)]
             log P(w_1 .. w_n) = beta_S(0, n)                                    (parse-sentence)
    Viterbi  delta_A(i, j)  = the same with max for logsumexp, with back pointers (parse-viterbi)
    outside  alpha_S(0, n)  = 0 (log 1)                                           (parse-outside)
             alpha_B(i, k) = logsumexp over parents [alpha_A(i, j) + log P(A -> B C) + beta_C(k, j)]
                             and alpha_C(k, j) likewise with beta_B(i, k)
    expected count of a rule                                                       (parse-count)
             E[c(A -> B C)] = sum_{i<k<j} exp(alpha_A(i, j) + log P(A -> B C)
                                             + beta_B(i, k) + beta_C(k, j) - log P(w))

Deliberate departures from the book's presentation:

* Everything probabilistic is in log space (the book multiplies probabilities), so that a 100-word
  sentence does not underflow; sums of probabilities become ``logsumexp``.
* The book's loops over spans, split points and rules are here: :func:`cky` (the recogniser that
  counts and lists trees), :func:`viterbi_cky_loop` and :func:`inside_loop`. Their fast twin,
  :mod:`nlpcourse.parsing_fast`, does the same sums with numpy over all spans of one length, all
  split points and all rules at once, and over many sentences of one length together; the public
  functions :func:`inside`, :func:`viterbi_cky`, :func:`viterbi_batch`,
  :func:`inside_outside_tables` and the methods of :class:`PCFG` call it. The tests check the loops
  and the fast twin against each other, against brute-force enumeration and against ``nltk``.
* The symbols ``beta`` (inside) and ``alpha`` (outside) follow Manning & Schütze. Written as a
  right-branching PCFG (a state's nonterminal spans the rest of the sentence), an HMM's backward
  probabilities ``beta`` are inside probabilities and its forward probabilities ``alpha``
  outside ones, which is why they chose these letters.
* :func:`to_cnf` removes unit rules by *collapsing* each chain ``A -> B -> ... -> rhs`` into one
  rule ``A -> rhs`` whose tree node is labelled ``A+B+...`` (so the tree can be mapped back); chains
  that repeat a symbol (unit cycles) are left out, since they would give infinitely many trees.
  A grammar with empty (epsilon) rules keeps its language (minus the empty string); the empty
  constituents the conversion drops are put back when trees are read off the chart, each
  nullable symbol with one empty tree (the first found), so a grammar whose nullable symbols have
  several empty trees gets only one of them. PCFGs with epsilon rules or unit cycles are refused,
  with the reason: their empty or unit derivations would have to be summed for the inside
  probability but maximised for Viterbi, which one set of collapsed rules cannot do both of.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from nlpcourse import parsing_fast as fast
from nlpcourse.data import TREEBANK_DIR as TREEBANK_DIR  # the treebank reader lives in data
from nlpcourse.data import read_mrg as read_mrg
from nlpcourse.data import treebank_sample as treebank_sample
from nlpcourse.guard import reference
from nlpcourse.trees import BIN_MARK as BIN_MARK  # the trees live below this module
from nlpcourse.trees import UNIT_MARK as UNIT_MARK
from nlpcourse.trees import Rule as Rule
from nlpcourse.trees import Tree as Tree
from nlpcourse.trees import _chain, _term_symbol

# ---------------------------------------------------------------------------------------- grammars


_ARROW = re.compile(r"^\s*([^\s'\"]+)\s*->(.*)$")
_SYMBOL = re.compile(r"'([^']*)'|\"([^\"]*)\"|\[([^\]]*)\]|(\S+)")


def _read_rules(text: str, probabilities: bool) -> tuple[list[Rule], list[float], set[str]]:
    """Rules (and their ``[p]`` if ``probabilities``) from text, and the set of quoted symbols.

    A line that starts with ``|`` continues the alternatives of the line above; ``#`` starts a
    comment."""
    rules: list[Rule] = []
    probs: list[float] = []
    terminals: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#")[0].strip()
        if not line:
            continue
        m = _ARROW.match(line)
        if m:
            lhs, alternatives = m.group(1), m.group(2)
        elif line.startswith("|") and rules:  # more alternatives of the rule above
            lhs, alternatives = rules[-1].lhs, line[1:]
        else:
            raise ValueError(f"line {number}: {line!r} is not a rule of the form 'A -> B C | ...'")
        for alternative in alternatives.split("|"):
            rhs: list[str] = []
            p = None
            for sm in _SYMBOL.finditer(alternative):
                word, word2, prob, symbol = sm.groups()
                if prob is not None:
                    try:
                        p = float(prob)
                    except ValueError:
                        raise ValueError(f"line {number}: bad probability [{prob}]") from None
                elif symbol is not None:
                    if "'" in symbol or '"' in symbol:
                        raise ValueError(f"line {number}: unbalanced quote in {symbol!r}")
                    rhs.append(symbol)
                else:
                    terminal = word if word is not None else word2
                    rhs.append(terminal)
                    terminals.add(terminal)
            if probabilities:
                if p is None:
                    raise ValueError(f"line {number}: rule {lhs} -> {' '.join(rhs)} has no [p]")
                probs.append(p)
            elif p is not None:
                raise ValueError(f"line {number}: a CFG rule has no probability; use PCFG")
            rules.append(Rule(lhs, tuple(rhs)))
    if not rules:
        raise ValueError("the grammar text has no rules")
    return rules, probs, terminals


@dataclass
class CFG:
    """A context-free grammar: rules and a start symbol.

    The nonterminals are the symbols on the left of some rule; every other symbol is a terminal
    (a word). ``CFG.fromstring`` reads the text form: one or more rules per line, alternatives
    separated by ``|``, terminals in quotes, the first rule's left side the start symbol::

        S -> NP VP
        NP -> Det N | NP PP
        Det -> 'the'
    """

    rules: list[Rule]
    start: str
    nonterminals: set[str] = field(init=False)

    def __post_init__(self) -> None:
        self.rules = [Rule(r.lhs, tuple(r.rhs)) for r in self.rules]
        self.nonterminals = {r.lhs for r in self.rules}
        if self.start not in self.nonterminals:
            raise ValueError(f"the start symbol {self.start!r} has no rule")

    @classmethod
    def fromstring(cls, text: str) -> CFG:
        """Read a grammar; ``ValueError`` naming the line of a malformed rule, an unquoted symbol
        that has no rule, or a quoted word that is also a nonterminal."""
        rules, _, terminals = _read_rules(text, probabilities=False)
        _validate(rules, terminals)
        return cls(rules, rules[0].lhs)

    def __str__(self) -> str:
        return "\n".join(self._format(r) for r in self.rules)

    def _format(self, rule: Rule) -> str:
        return f"{rule.lhs} -> " + " ".join(
            s if s in self.nonterminals else repr(s) for s in rule.rhs
        )

    def is_terminal(self, symbol: str) -> bool:
        return symbol not in self.nonterminals

    def weighted(self) -> list[tuple[Rule, float]]:
        """Each rule with its log probability: 0 (log 1) in a CFG, its own in a :class:`PCFG`."""
        return [(r, 0.0) for r in self.rules]

    def by_lhs(self) -> dict[str, list[Rule]]:
        """The rules of each nonterminal, in the grammar's order."""
        out: dict[str, list[Rule]] = defaultdict(list)
        for r in self.rules:
            out[r.lhs].append(r)
        return out

    def is_cnf(self) -> bool:
        """Every rule is ``A -> B C`` (two nonterminals) or ``A -> w`` (one word)."""
        return all(_cnf_problem(self, r) == "" for r in self.rules)

    def left_recursive(self) -> set[str]:
        """The nonterminals ``A`` with a derivation ``A =>+ A ...`` (ignoring empty rules)."""
        first: dict[str, set[str]] = {a: set() for a in self.nonterminals}
        for r in self.rules:
            if r.rhs and r.rhs[0] in self.nonterminals:
                first[r.lhs].add(r.rhs[0])
        changed = True
        while changed:  # transitive closure of "can start with"
            changed = False
            for a in first:
                new = set().union(*(first[b] for b in first[a])) - first[a]
                if new:
                    first[a] |= new
                    changed = True
        return {a for a in first if a in first[a]}

    def language(self, max_len: int) -> set[tuple[str, ...]]:
        """Every string of 1 to ``max_len`` words the grammar derives (brute force, for tests).

        Expands the leftmost nonterminal of every sentential form, depth first, dropping forms
        with more than ``max_len`` words; without empty rules every nonterminal yields at least one
        word, so forms longer than ``max_len`` symbols are dropped too (with empty rules, longer
        than ``3 max_len + 3``).
        """
        out: set[tuple[str, ...]] = set()
        todo: list[tuple[str, ...]] = [(self.start,)]
        seen = set(todo)
        rules = self.by_lhs()
        cap = 3 * max_len + 3 if any(len(r.rhs) == 0 for r in self.rules) else max_len
        while todo:
            form = todo.pop()
            idx = next((k for k, s in enumerate(form) if s in self.nonterminals), None)
            if idx is None:
                if 0 < len(form) <= max_len:
                    out.add(form)
                continue
            for r in rules[form[idx]]:
                new = form[:idx] + r.rhs + form[idx + 1 :]
                n_words = sum(1 for s in new if s not in self.nonterminals)
                if n_words <= max_len and len(new) <= cap and new not in seen:
                    seen.add(new)
                    todo.append(new)
        return out


def _validate(rules: Sequence[Rule], terminals: set[str]) -> None:
    nonterminals = {r.lhs for r in rules}
    clash = terminals & nonterminals
    if clash:
        raise ValueError(f"{sorted(clash)[0]!r} is both a quoted word and a nonterminal")
    for r in rules:
        for s in r.rhs:
            if s not in terminals and s not in nonterminals:
                raise ValueError(
                    f"rule {r}: {s!r} is not quoted (so a nonterminal) but has no rule; "
                    f"quote words, e.g. '{s}'"
                )


def _cnf_problem(g: CFG, r: Rule) -> str:
    """'' if the rule is in CNF, else what is wrong with it."""
    if len(r.rhs) == 1 and g.is_terminal(r.rhs[0]):
        return ""
    if len(r.rhs) == 2 and all(s in g.nonterminals for s in r.rhs):
        return ""
    if len(r.rhs) == 0:
        return "it is empty (an epsilon rule)"
    if len(r.rhs) == 1:
        return "it is a unit rule (one nonterminal on the right)"
    if len(r.rhs) == 2:
        return "a word stands beside a nonterminal"
    return f"it has {len(r.rhs)} symbols on the right"


# ------------------------------------------------------------------------- top-down and bottom-up


class Step(NamedTuple):
    """One step of a parser: ``action`` (``expand``, ``match``, ``fail``, ``backtrack``, ``shift``,
    ``reduce``, ``parse``), what it acted on, the position in the sentence and the parser's state
    (the symbols still to expand, or the stack) as text."""

    action: str
    what: str
    position: int
    state: str


class StepLimitExceeded(RuntimeError):
    """A naive parser took more than ``max_steps`` steps (left recursion or a unit cycle)."""


@reference
def recursive_descent(
    grammar: CFG, words: Sequence[str], trace: bool = False, max_steps: int = 100_000
) -> tuple[list[Step], list[Tree]]:
    """Top-down, depth-first parsing with backtracking; returns ``(steps, trees)``.

    The parser keeps the list of symbols it still has to find (its *frontier*, at first the start
    symbol). It always works on the leftmost one: a nonterminal is *expanded* with each of its
    rules in turn (the grammar's order), a word is *matched* against the next word of the
    sentence; when a word does not match, or the words run out, it *backtracks* to the last
    choice and tries the next rule. Every complete parse is collected, in the order found (the
    leftmost derivation of each tree is the sequence of its ``expand`` steps).

    ``steps`` lists every step if ``trace`` (else it is empty). More than ``max_steps`` steps, or
    more than ``200 + 10 n`` symbols left to find, raise :class:`StepLimitExceeded`: a
    left-recursive rule ``A -> A ...`` makes this naive parser expand forever.
    """
    words = _check_words(grammar, words)
    steps: list[Step] = []
    trees: list[Tree] = []
    count = 0
    rules = grammar.by_lhs()

    def record(action: str, what: str, pos: int, frontier: list) -> None:
        nonlocal count
        count += 1
        if count > max_steps:
            raise StepLimitExceeded(
                f"recursive descent took more than {max_steps} steps; left-recursive "
                f"nonterminals: {sorted(grammar.left_recursive()) or 'none'}"
            )
        if trace:
            state = " ".join(sym for sym, _ in frontier)
            steps.append(Step(action, what, pos, state))

    def search(frontier: list[tuple[str, Tree | None]], pos: int, root: Tree) -> None:
        if len(frontier) > max_frontier:
            raise StepLimitExceeded(
                f"recursive descent has {len(frontier)} symbols left to find for "
                f"{len(words) - pos} words; left-recursive nonterminals: "
                f"{sorted(grammar.left_recursive()) or 'none'}"
            )
        if not frontier:
            if pos == len(words):
                record("parse", str(root), pos, frontier)
                trees.append(Tree.fromstring(str(root)))
            else:
                record("fail", f"the tree is complete but {words[pos]!r} is left", pos, frontier)
            return
        symbol, node = frontier[0]
        rest = frontier[1:]
        if grammar.is_terminal(symbol):
            if pos < len(words) and words[pos] == symbol:
                record("match", symbol, pos, frontier)
                search(rest, pos + 1, root)
            else:
                got = repr(words[pos]) if pos < len(words) else "the end of the sentence"
                record("fail", f"{symbol!r} does not match {got}", pos, frontier)
            return
        assert node is not None
        for i, rule in enumerate(rules[symbol]):
            if i > 0:
                record("backtrack", f"undo {grammar._format(rules[symbol][i - 1])}", pos, frontier)
            node.children = []
            new: list[tuple[str, Tree | None]] = []
            for s in rule.rhs:
                if grammar.is_terminal(s):
                    node.children.append(s)
                    new.append((s, None))
                else:
                    child = Tree(s, [])
                    node.children.append(child)
                    new.append((s, child))
            record("expand", grammar._format(rule), pos, frontier)
            search(new + rest, pos, root)
        node.children = []

    # a naive parser lets the symbols to find pile up (a left-recursive rule adds one at every
    # expansion): stop before Python's recursion limit does
    max_frontier = 200 + 10 * len(words)
    root = Tree(grammar.start, [])
    search([(grammar.start, root)], 0, root)
    return steps, trees


@reference
def shift_reduce(
    grammar: CFG, words: Sequence[str], trace: bool = False, max_steps: int = 100_000
) -> tuple[list[Step], list[Tree]]:
    """Bottom-up parsing: every sequence of shifts and reductions, with backtracking.

    The parser keeps a *stack* of trees and the words not yet read. At each state it first tries
    every *reduction* (a rule whose right side matches the top of the stack replaces those trees
    by one tree with the rule's left side), in the grammar's order, then a *shift* (push the next
    word); it parses when the stack holds one tree labelled with the start symbol and no word is
    left, and backtracks when nothing applies. Returns ``(steps, trees)`` as
    :func:`recursive_descent`. Grammars with empty rules are refused (a reduction of nothing
    could be applied forever).
    """
    words = _check_words(grammar, words)
    if any(len(r.rhs) == 0 for r in grammar.rules):
        raise ValueError("shift_reduce needs a grammar without empty (epsilon) rules")
    steps: list[Step] = []
    trees: list[Tree] = []
    count = 0

    def label(x: Tree | str) -> str:
        return x.label if isinstance(x, Tree) else x

    def record(action: str, what: str, pos: int, stack: list) -> None:
        nonlocal count
        count += 1
        if count > max_steps:
            raise StepLimitExceeded(f"shift-reduce took more than {max_steps} steps")
        if trace:
            state = " ".join(label(x) for x in stack) + " | " + " ".join(words[pos:])
            steps.append(Step(action, what, pos, state))

    def search(stack: list[Tree | str], pos: int) -> None:
        if pos == len(words) and len(stack) == 1 and label(stack[0]) == grammar.start:
            if isinstance(stack[0], Tree):
                record("parse", str(stack[0]), pos, stack)
                trees.append(stack[0])
        tried = False
        for rule in grammar.rules:
            k = len(rule.rhs)
            if k <= len(stack) and tuple(label(x) for x in stack[len(stack) - k :]) == rule.rhs:
                if tried:
                    record("backtrack", "", pos, stack)
                tried = True
                new = stack[: len(stack) - k] + [Tree(rule.lhs, stack[len(stack) - k :])]
                record("reduce", grammar._format(rule), pos, new)
                search(new, pos)
        if pos < len(words):
            if tried:
                record("backtrack", "", pos, stack)
            record("shift", words[pos], pos + 1, stack + [words[pos]])
            search(stack + [words[pos]], pos + 1)

    search([], 0)
    return steps, trees


def _check_words(grammar: CFG, words: Sequence[str]) -> list[str]:
    """The words as a list; ``ValueError`` naming words no rule of the grammar produces."""
    if isinstance(words, str):
        raise ValueError(f"pass a list of words, not the string {words!r} (use .split())")
    words = list(words)
    if not words:
        raise ValueError("the sentence is empty: there is nothing to parse")
    known = {s for r in grammar.rules for s in r.rhs if grammar.is_terminal(s)}
    unknown = [w for w in words if w not in known]
    if unknown:
        raise ValueError(
            f"the grammar has no rule for the word(s) {sorted(set(unknown))!r}: "
            "no tree can cover them"
        )
    return words


# ------------------------------------------------------------------------ Chomsky normal form


@dataclass
class CNFRule:
    """A rule of a grammar in Chomsky normal form, with what it stands for in the original.

    ``label`` is the label its tree node gets (``A``, or ``A+B`` for a collapsed unit chain, see
    :meth:`Tree.from_cnf`); ``origin`` lists the original grammar's rules one use of this rule
    stands for (empty for the helper rules that binarisation and TERM add); ``logp`` its log
    probability (0 in a CFG).
    """

    lhs: str
    rhs: tuple[str, ...]
    label: str
    origin: tuple[Rule, ...]
    logp: float = 0.0
    gaps: tuple[tuple[tuple[int, Tree], ...], ...] = ()


def _cnf_node(rule: CNFRule, children: list[Tree | str]) -> Tree:
    """The tree node of one use of a CNF rule over its children: ``Tree(rule.label, children)``;
    or, for a rule that stands for empty constituents the conversion dropped (``rule.gaps``: for
    each label of its chain, the positions and empty trees to put back), the chain spelled out
    node by node with them put back. :meth:`Tree.from_cnf` maps either to the original tree."""
    if not rule.gaps:
        return Tree(rule.label, children)
    labels = _chain(rule.label)
    node = Tree(labels[-1], _with_gaps(children, rule.gaps[-1]))
    for label, gaps in zip(reversed(labels[:-1]), reversed(rule.gaps[:-1]), strict=True):
        node = Tree(label, _with_gaps([node], gaps))
    return node


def _with_gaps(kept: list[Tree | str], gaps: tuple[tuple[int, Tree], ...]) -> list[Tree | str]:
    """The children of a rule with the empty trees put back at their positions (ascending)."""
    out = list(kept)
    for position, tree in gaps:
        out.insert(position, tree)
    return out


class CNFGrammar(CFG):
    """A CFG in Chomsky normal form, made by :func:`to_cnf`: each rule has its :class:`CNFRule`
    (``cnf_rules[i]`` for ``rules[i]``). :func:`cky` takes one of these, or any CFG in CNF."""

    def __init__(self, cnf_rules: list[CNFRule], start: str, source: CFG | None = None):
        self.cnf_rules = cnf_rules
        self.source = source
        super().__init__([Rule(r.lhs, r.rhs) for r in cnf_rules], start)


def _as_cnf_grammar(grammar: CFG) -> CNFGrammar:
    """A CNF grammar as a :class:`CNFGrammar`, or ``ValueError`` naming a rule that is not CNF."""
    if isinstance(grammar, CNFGrammar):
        return grammar
    for r in grammar.rules:
        problem = _cnf_problem(grammar, r)
        if problem:
            raise ValueError(
                f"the grammar is not in Chomsky normal form: the rule {grammar._format(r)} is not "
                f"A -> B C or A -> 'w' ({problem}); convert it with to_cnf(grammar)"
            )
    return CNFGrammar(
        [CNFRule(r.lhs, r.rhs, r.lhs, (r,), lp) for r, lp in grammar.weighted()],
        grammar.start,
        grammar,
    )


def to_cnf(grammar: CFG) -> CNFGrammar:
    """The grammar in Chomsky normal form, eq. (parse-cnf): rules ``A -> B C`` and ``A -> w``.

    Four steps, in this order (SLP3 17.5, Hopcroft, Motwani & Ullman 7.1):

    1. TERM: a word ``w`` inside a rule with two or more symbols is replaced by a new
       nonterminal ``<w>`` with the rule ``<w> -> w``;
    2. BIN: a rule ``A -> B C D ...`` becomes ``A -> B A|<C-D-...>``, ``A|<C-D-...> -> C A|<D-...>``
       and so on, each new rule binary;
    3. DEL (only if there are empty rules): every nonterminal that can derive the empty string is
       *nullable*; each rule gets a copy without each subset of its nullable symbols, except a
       subset that would leave the right-hand side empty (``A -> X B`` with ``B`` nullable gives
       ``A -> X``; ``A -> B`` gives no empty copy), and the empty rules go. The empty string
       itself leaves the language. Each copy remembers what it dropped (``CNFRule.gaps``: the
       position and the symbol's first-found empty tree), so that trees read off the chart get
       their empty constituents back;
    4. UNIT: each chain of unit rules ``A -> B -> ... -> Z`` followed by a non-unit rule
       ``Z -> rhs`` becomes one rule ``A -> rhs`` labelled ``A+B+...+Z``; chains that repeat a
       symbol are left out.

    For a :class:`PCFG` the rules keep probabilities: the rule that begins a binarised chain
    carries the original probability, the helper rules probability 1, a collapsed chain the
    product along it. Every tree of the CNF grammar then maps to one tree of the original
    (:meth:`Tree.from_cnf`) with the same probability. PCFGs with empty rules or unit cycles are
    refused with the reason (see the module's docstring).
    """
    is_pcfg = isinstance(grammar, PCFG)
    has_empty = any(len(r.rhs) == 0 for r in grammar.rules)
    if is_pcfg and has_empty:
        empty = next(r for r in grammar.rules if not r.rhs)
        raise ValueError(
            f"to_cnf does not convert PCFGs with empty rules ({grammar._format(empty)}): "
            "dropping an empty constituent must multiply a rule by the sum of the probabilities "
            "of its empty derivations for the inside algorithm but by the largest for Viterbi; "
            "write the rules without the empty symbol instead (A -> B C with C optional becomes "
            "A -> B C | B, with the probabilities split)"
        )
    is_nt = grammar.nonterminals.__contains__

    # 1. TERM and 2. BIN; rules as (lhs, rhs, logp, origin, gaps): gaps are the empty
    # constituents step 3 leaves out, (position in rhs, empty tree)
    Gaps = tuple[tuple[int, Tree], ...]
    work: list[tuple[str, tuple[str, ...], float, tuple[Rule, ...], Gaps]] = []
    added: set[tuple[str, tuple[str, ...]]] = set()

    def add_helper(lhs: str, rhs: tuple[str, ...]) -> None:
        if (lhs, rhs) not in added:
            added.add((lhs, rhs))
            work.append((lhs, rhs, 0.0, (), ()))

    for rule, lp in grammar.weighted():
        rhs = rule.rhs
        if len(rhs) >= 2:
            new_rhs: list[str] = []
            for s in rhs:
                if is_nt(s):
                    new_rhs.append(s)
                else:
                    add_helper(_term_symbol(s), (s,))
                    new_rhs.append(_term_symbol(s))
            rhs = tuple(new_rhs)
        if len(rhs) <= 2:
            work.append((rule.lhs, rhs, lp, (rule,), ()))
            continue
        name = f"{rule.lhs}{BIN_MARK}{'-'.join(rhs[1:])}>"
        work.append((rule.lhs, (rhs[0], name), lp, (rule,), ()))
        for k in range(1, len(rhs) - 2):
            nxt = f"{rule.lhs}{BIN_MARK}{'-'.join(rhs[k + 1 :])}>"
            add_helper(name, (rhs[k], nxt))
            name = nxt
        add_helper(name, rhs[-2:])

    nonterminals = {lhs for lhs, *_ in work}

    # 3. DEL; each nullable symbol's empty tree is the first one found (its rule's order)
    if has_empty:
        empty_tree: dict[str, Tree] = {}  # the nullable symbols
        changed = True
        while changed:
            changed = False
            for lhs, rhs, *_ in work:
                if lhs not in empty_tree and all(s in empty_tree for s in rhs):
                    empty_tree[lhs] = Tree(lhs, [empty_tree[s] for s in rhs])
                    changed = True
        new_work: list[tuple[str, tuple[str, ...], float, tuple[Rule, ...], Gaps]] = []
        seen = set()
        for lhs, rhs, lp, origin, _ in work:
            drop_options = [(False, True) if s in empty_tree else (False,) for s in rhs]
            for drops in itertools.product(*drop_options):
                kept = tuple(s for s, drop in zip(rhs, drops, strict=True) if not drop)
                gaps = tuple((k, empty_tree[rhs[k]]) for k, drop in enumerate(drops) if drop)
                if kept and (lhs, kept, origin, drops) not in seen:
                    seen.add((lhs, kept, origin, drops))
                    new_work.append((lhs, kept, lp, origin, gaps))
        work = new_work

    # 4. UNIT: collapse chains
    def is_unit(rhs: tuple[str, ...]) -> bool:
        return len(rhs) == 1 and rhs[0] in nonterminals

    units: dict[str, list[tuple[str, float, tuple[Rule, ...], Gaps]]] = defaultdict(list)
    for lhs, rhs, lp, origin, gaps in work:
        if is_unit(rhs):
            units[lhs].append((rhs[0], lp, origin, gaps))
    # chains[A] = [(Z, chain labels A..Z, logp, origin, gaps of each unit rule)], every
    # cycle-free chain from A
    Chain = tuple[str, tuple[str, ...], float, tuple[Rule, ...], tuple[Gaps, ...]]
    chains: dict[str, list[Chain]] = {}
    for a in sorted(nonterminals):
        found: list[Chain] = [(a, (a,), 0.0, (), ())]
        todo = list(found)
        while todo:
            z, labels, lp, origin, link_gaps = todo.pop()
            for b, lp2, origin2, gaps in units.get(z, []):
                if b in labels:
                    if is_pcfg:
                        raise ValueError(
                            f"the PCFG has a unit cycle through {' -> '.join(labels + (b,))}: "
                            "its trees can repeat the cycle any number of times; the inside sum "
                            "over them is a geometric series ((I - U)^-1) but the Viterbi max "
                            "takes none, and to_cnf's collapsed rules cannot be both"
                        )
                    continue
                item = (b, labels + (b,), lp + lp2, origin + origin2, link_gaps + (gaps,))
                found.append(item)
                todo.append(item)
        chains[a] = found
    by_lhs: dict[str, list] = defaultdict(list)
    for lhs, rhs, lp, origin, gaps in work:
        if not is_unit(rhs):
            by_lhs[lhs].append((rhs, lp, origin, gaps))
    cnf_rules = []
    for a in sorted(nonterminals, key=lambda s: (s != grammar.start, s)):
        for z, labels, lp, origin, link_gaps in chains[a]:
            for rhs, lp2, origin2, gaps in by_lhs.get(z, []):
                label = UNIT_MARK.join(labels)
                all_gaps = link_gaps + (gaps,) if any(link_gaps) or gaps else ()
                cnf_rules.append(CNFRule(a, rhs, label, origin + origin2, lp + lp2, all_gaps))
    if not any(r.lhs == grammar.start for r in cnf_rules):
        raise ValueError("the grammar derives no sentence of one word or more")
    # drop rules using nonterminals that have no rule left (e.g. only empty ones)
    while True:
        lhs_set = {r.lhs for r in cnf_rules}
        usable = [r for r in cnf_rules if len(r.rhs) == 1 or all(s in lhs_set for s in r.rhs)]
        if len(usable) == len(cnf_rules):
            break
        cnf_rules = usable
    out = CNFGrammar(cnf_rules, grammar.start, grammar)
    for r in cnf_rules:  # a word must stay a word: no nonterminal of that name
        if len(r.rhs) == 1 and r.rhs[0] in out.nonterminals:
            raise AssertionError(f"unit rule left after UNIT: {r}")
    return out


# -------------------------------------------------------------------------------------------- CKY


@dataclass
class Chart:
    """The CKY chart of a sentence: ``cells[i][j]`` maps each nonterminal ``A`` that derives words
    ``i+1 .. j`` to its back pointers, one per way to build it: ``(rule index, k)`` for a binary
    rule split at ``k``, ``(rule index, None)`` for a word. ``counts[i][j][A]`` is the number of
    trees of ``A`` over the span (a Python int: exact however large)."""

    grammar: CNFGrammar
    words: list[str]
    cells: list[list[dict[str, list[tuple[int, int | None]]]]]
    counts: list[list[dict[str, int]]]

    @property
    def n(self) -> int:
        return len(self.words)

    def recognises(self) -> bool:
        """Whether the start symbol derives the whole sentence, eq. (parse-cky-accept)."""
        return self.grammar.start in self.cells[0][self.n]

    def count(self) -> int:
        """The number of trees of the whole sentence."""
        return self.counts[0][self.n].get(self.grammar.start, 0)

    def table(self) -> dict[tuple[int, int], list[str]]:
        """``{(i, j): sorted nonterminals}`` for every non-empty cell (for the chart figure)."""
        return {
            (i, j): sorted(self.cells[i][j])
            for i in range(self.n)
            for j in range(i + 1, self.n + 1)
            if self.cells[i][j]
        }

    def trees(self, symbol: str | None = None, i: int = 0, j: int | None = None) -> Iterator[Tree]:
        """Every tree of ``symbol`` over the span, generated lazily (CNF labels; map them back
        with :meth:`Tree.from_cnf`)."""
        symbol = self.grammar.start if symbol is None else symbol
        j = self.n if j is None else j
        for rule_index, k in self.cells[i][j].get(symbol, []):
            rule = self.grammar.cnf_rules[rule_index]
            if k is None:
                yield _cnf_node(rule, [self.words[i]])
                continue
            b, c = rule.rhs
            for left in self.trees(b, i, k):
                for right in self.trees(c, k, j):
                    yield _cnf_node(rule, [left, right])


@reference
def cky(grammar: CFG, words: Sequence[str]) -> Chart:
    """The CKY chart of ``words`` for a grammar in CNF, eq. (parse-cky).

    For spans of length 1, the cell ``(i, i+1)`` gets every ``A`` with a rule ``A -> w_{i+1}``;
    for longer spans, shortest first, the cell ``(i, j)`` gets ``A`` for every rule ``A -> B C``
    and split ``i < k < j`` with ``B`` in ``(i, k)`` and ``C`` in ``(k, j)``, with a back pointer,
    and ``count(A, i, j) = sum count(B, i, k) count(C, k, j)`` over those. Time
    ``O(n^3 |G|)`` for ``n`` words and ``|G|`` binary rules. A grammar not in CNF, or a word
    without a lexical rule, raises ``ValueError`` naming it.
    """
    cnf = _as_cnf_grammar(grammar)
    words = _check_words(cnf, words)
    n = len(words)
    lexical: dict[str, list[int]] = defaultdict(list)
    binary: dict[tuple[str, str], list[int]] = defaultdict(list)  # (B, C) -> rules A -> B C
    for index, r in enumerate(cnf.cnf_rules):
        if len(r.rhs) == 1:
            lexical[r.rhs[0]].append(index)
        else:
            binary[(r.rhs[0], r.rhs[1])].append(index)
    cells: list[list[dict]] = [[defaultdict(list) for _ in range(n + 1)] for _ in range(n + 1)]
    counts: list[list[dict]] = [[defaultdict(int) for _ in range(n + 1)] for _ in range(n + 1)]
    for i, w in enumerate(words):
        for index in lexical[w]:
            a = cnf.cnf_rules[index].lhs
            cells[i][i + 1][a].append((index, None))
            counts[i][i + 1][a] += 1
    for length in range(2, n + 1):
        for i in range(0, n - length + 1):
            j = i + length
            for k in range(i + 1, j):
                for b, count_b in counts[i][k].items():
                    for c, count_c in counts[k][j].items():
                        for index in binary.get((b, c), ()):
                            a = cnf.cnf_rules[index].lhs
                            cells[i][j][a].append((index, k))
                            counts[i][j][a] += count_b * count_c
    return Chart(
        cnf,
        words,
        [[dict(c) for c in row] for row in cells],
        [[dict(c) for c in row] for row in counts],
    )


def parse(grammar: CFG, words: Sequence[str]) -> list[Tree]:
    """Every tree of ``words`` under any CFG, in the original grammar's labels (CKY on the CNF)."""
    cnf = grammar if grammar.is_cnf() and not isinstance(grammar, PCFG) else to_cnf(grammar)
    return [Tree.from_cnf(t) for t in cky(cnf, words).trees()]


# ------------------------------------------------------------------------------------------ PCFGs


class PCFG(CFG):
    """A probabilistic CFG: each rule has a probability, and the rules of each nonterminal sum to 1.

    The probability of a tree is the product of the probabilities of its rules, eq.
    (parse-tree-prob); of a sentence, the sum over its trees, eq. (parse-sentence). Each rule is
    stored with its log probability: ``logp[rule]``, in the grammar's order (``rules`` lists the
    same rules, for what a CFG does). Two PCFGs are equal when they have the same rules, in the
    same order, with the same probabilities, and the same start symbol. Text form:
    ``S -> NP VP [0.9] | VP [0.1]``.
    """

    def __init__(self, rules: list[Rule], start: str, probs: Sequence[float], tol: float = 1e-6):
        super().__init__(rules, start)
        probs = [float(p) for p in probs]
        if len(probs) != len(self.rules):
            raise ValueError(f"{len(self.rules)} rules but {len(probs)} probabilities")
        self.logp: dict[Rule, float] = {}
        total: dict[str, float] = defaultdict(float)
        for r, p in zip(self.rules, probs, strict=True):
            if not 0 <= p <= 1 or math.isnan(p):
                raise ValueError(f"the rule {self._format(r)} has probability {p}, not in [0, 1]")
            if r in self.logp:
                raise ValueError(f"the rule {self._format(r)} is given twice; give it once")
            self.logp[r] = math.log(p) if p > 0 else -math.inf
            total[r.lhs] += p
        for a, s in total.items():
            if abs(s - 1) > tol:
                raise ValueError(f"the probabilities of the rules of {a} sum to {s:.6g}, not 1")
        self._cnf: CNFGrammar | None = None
        self._tables: fast.Tables | None = None
        self._sampler: dict[str, tuple[list[float], list[Rule]]] | None = None

    @classmethod
    def fromstring(cls, text: str) -> PCFG:
        rules, probs, terminals = _read_rules(text, probabilities=True)
        _validate(rules, terminals)
        return cls(rules, rules[0].lhs, probs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PCFG):
            return NotImplemented
        return self.start == other.start and list(self.logp.items()) == list(other.logp.items())

    __hash__ = None  # type: ignore[assignment]  # mutable, as a CFG

    def __str__(self) -> str:
        return "\n".join(f"{self._format(r)} [{math.exp(lp):.12g}]" for r, lp in self.logp.items())

    def weighted(self) -> list[tuple[Rule, float]]:
        return list(self.logp.items())

    def prob(self, rule: Rule) -> float:
        """P(rule), 0 for a rule the grammar does not have."""
        return math.exp(self.logp.get(rule, -math.inf))

    # --- estimation
    @classmethod
    def fit(cls, trees: Iterable[Tree]) -> PCFG:
        """Relative-frequency (maximum-likelihood) estimate from a treebank, eq. (parse-mle):
        ``P(A -> rhs) = c(A -> rhs) / c(A)``. The start symbol is the roots' label."""
        counts: Counter[Rule] = Counter()
        roots: Counter[str] = Counter()
        for t in trees:
            roots[t.label] += 1
            counts.update(t.rules())
        if not counts:
            raise ValueError("PCFG.fit needs at least one tree")
        if len(roots) > 1:
            raise ValueError(f"the trees have different root labels: {dict(roots)}")
        return cls.from_counts(counts, next(iter(roots)))

    @classmethod
    def from_counts(cls, counts: Mapping[Rule, float], start: str) -> PCFG:
        """The PCFG with ``P(A -> rhs) = counts[A -> rhs] / sum of A's counts``."""
        total: dict[str, float] = defaultdict(float)
        for r, c in counts.items():
            total[r.lhs] += c
        rules = sorted(counts, key=lambda r: (r.lhs != start, r.lhs, r.rhs))
        return cls(rules, start, [counts[r] / total[r.lhs] for r in rules])

    # --- sampling
    def sample(self, rng: np.random.Generator, max_depth: int = 40) -> Tree:
        """A tree drawn top-down from the grammar; ``RuntimeError`` past ``max_depth`` levels.

        Each nonterminal's rule is drawn by inverting the cumulative distribution of its rules'
        probabilities at a uniform number from ``rng``."""
        if self._sampler is None:
            table: dict[str, tuple[list[float], list[Rule]]] = {}
            for r, lp in self.logp.items():
                cumulative, rules = table.setdefault(r.lhs, ([], []))
                cumulative.append((cumulative[-1] if cumulative else 0.0) + math.exp(lp))
                rules.append(r)
            self._sampler = table
        table = self._sampler

        def draw(symbol: str, depth: int) -> Tree:
            if depth > max_depth:
                raise RuntimeError(f"sampled tree deeper than {max_depth}: resample")
            cumulative, rules = table[symbol]
            u = rng.random() * cumulative[-1]
            rule = rules[min(bisect.bisect_right(cumulative, u), len(rules) - 1)]
            return Tree(
                symbol,
                [draw(s, depth + 1) if s in self.nonterminals else s for s in rule.rhs],
            )

        return draw(self.start, 0)

    def tree_logprob(self, tree: Tree) -> float:
        """log P(tree) = sum of the log probabilities of its rules, eq. (parse-tree-prob)."""
        return float(sum(self.logp.get(r, -math.inf) for r in tree.rules()))

    # --- the dynamic programs
    def cnf(self) -> CNFGrammar:
        """The grammar in CNF (cached; see :func:`to_cnf`)."""
        if self._cnf is None:
            self._cnf = to_cnf(self)
        return self._cnf

    def _arrays(self) -> fast.Tables:
        """The CNF grammar as the arrays of the fast twin (cached)."""
        if self._tables is None:
            self._tables = fast.Tables(self.cnf())
        return self._tables

    def viterbi(self, words: Sequence[str]) -> tuple[Tree | None, float]:
        """The most probable tree and its log probability, by Viterbi CKY, eq. (parse-viterbi).

        Returns ``(None, -inf)`` if no tree covers the sentence.
        """
        return viterbi_cky(self, words)

    def viterbi_batch(self, sentences: Sequence[Sequence[str]]) -> list[tuple[Tree | None, float]]:
        """:meth:`viterbi` of each sentence, sentences of one length computed together."""
        return viterbi_batch(self, sentences)

    def inside(self, words: Sequence[str]) -> float:
        """log P(words), the sum over all trees, by the inside algorithm, eq. (parse-inside)."""
        return inside(self, words)

    def outside(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The inside and outside tables of ``words``, each ``(n+1, n+1, N)`` (see
        :func:`inside_outside_tables`)."""
        tables = inside_outside_tables(self, words)
        return tables.inside, tables.outside

    def expected_counts(self, words: Sequence[str]) -> dict[Rule, float]:
        """E[c(rule) | words] for each rule of this grammar, eq. (parse-count)."""
        return inside_outside_tables(self, words).expected_counts()

    def inside_outside(
        self, sentences: Sequence[Sequence[str]], iters: int = 5, tol: float = 0.0
    ) -> tuple[PCFG, list[float]]:
        """Inside-outside (EM) re-estimation, eq. (parse-em); returns ``(new grammar, history)``.

        Each iteration computes the expected rule counts over all ``sentences`` under the current
        grammar (E step) and re-normalises them (M step): ``P'(A -> rhs) = E[c(A -> rhs)] /
        E[c(A)]``. ``history[t]`` is the total log likelihood ``sum log P(sentence)`` under the
        grammar of iteration ``t`` (``history[0]`` the initial grammar's); EM guarantees it never
        decreases. Stops early when it improves by less than ``tol``. A rule whose expected count
        is 0 keeps probability 0; a nonterminal never used keeps its old probabilities.
        """
        grammar: PCFG = self
        history: list[float] = []
        sents = [_pcfg_words(self, words) for words in sentences]
        for it in range(iters + 1):
            tab = grammar._arrays()
            cnf_counts, loglik = fast.corpus_counts(tab, sents)  # E step
            history.append(loglik)
            if it == iters or (it > 0 and history[-1] - history[-2] < tol):
                break
            grammar = grammar._reestimate(_credit(grammar, tab, cnf_counts))  # M step
        return grammar, history

    def log_likelihoods(self, sentences: Sequence[Sequence[str]]) -> np.ndarray:
        """``log P(sentence)`` of each sentence (the inside algorithm, sentences of one length
        computed together)."""
        sents = [_pcfg_words(self, words) for words in sentences]
        return fast.log_likelihoods(self._arrays(), sents)

    def _reestimate(self, counts: dict[Rule, float]) -> PCFG:
        total: dict[str, float] = defaultdict(float)
        for r in self.rules:
            total[r.lhs] += counts.get(r, 0.0)
        probs = [
            counts.get(r, 0.0) / total[r.lhs] if total[r.lhs] > 0 else math.exp(lp)
            for r, lp in self.logp.items()
        ]
        return PCFG(self.rules, self.start, probs)


def _as_pcfg(grammar: PCFG | Iterable[PlainRule]) -> PCFG:
    """A PCFG, or one made from plain rules ``(lhs, rhs, logp)`` with start symbol ``S``."""
    if isinstance(grammar, PCFG):
        return grammar
    pcfg = _plain_cfg(grammar, "S")
    if not isinstance(pcfg, PCFG):
        raise ValueError("plain rules of a PCFG are (lhs, rhs, log probability)")
    return pcfg


def _pcfg_words(grammar: PCFG, words: Sequence[str]) -> list[str]:
    if not isinstance(grammar, PCFG):
        raise TypeError(f"expected a PCFG, got a {type(grammar).__name__}")
    if isinstance(words, str):
        raise ValueError(f"pass a list of words, not the string {words!r} (use .split())")
    words = list(words)
    if not words:
        raise ValueError("the sentence is empty: there is nothing to parse")
    return words


def _logaddexp(x: float, y: float) -> float:
    """``log(exp(x) + exp(y))`` for two log probabilities (either may be -inf)."""
    if x < y:
        x, y = y, x
    return x if y == -math.inf else x + math.log1p(math.exp(y - x))


# --- the readable versions: the book's loops over spans, split points and rules


def _loop_tables(
    grammar: PCFG, words: Sequence[str]
) -> tuple[CNFGrammar, list[str], dict[str, list[int]], list[int]]:
    """The CNF grammar, the words, the lexical rules of each word and the binary rules (as
    indices into ``cnf.cnf_rules``), for the loop versions."""
    grammar = _as_pcfg(grammar)
    words = _pcfg_words(grammar, words)
    cnf = grammar.cnf()
    lexical: dict[str, list[int]] = defaultdict(list)
    binary: list[int] = []
    for index, r in enumerate(cnf.cnf_rules):
        if len(r.rhs) == 1:
            lexical[r.rhs[0]].append(index)
        else:
            binary.append(index)
    unknown = sorted({w for w in words if w not in lexical})
    if unknown:
        raise ValueError(f"the grammar has no rule for the word(s) {unknown!r}")
    return cnf, words, lexical, binary


@reference
def inside_loop(grammar: PCFG | Iterable[PlainRule], words: Sequence[str]) -> float:
    """log P(words), the inside algorithm as the book writes it, eq. (parse-inside): loops over
    span lengths, spans, split points and binary rules, a dictionary per cell. The same result
    as :func:`inside`, which does the same sums with numpy, all spans of one length at once."""
    cnf, words, lexical, binary = _loop_tables(_as_pcfg(grammar), words)
    n = len(words)
    beta: list[list[dict[str, float]]] = [[{} for _ in range(n + 1)] for _ in range(n + 1)]
    for i, w in enumerate(words):
        for index in lexical[w]:
            r = cnf.cnf_rules[index]
            beta[i][i + 1][r.lhs] = _logaddexp(beta[i][i + 1].get(r.lhs, -math.inf), r.logp)
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            for k in range(i + 1, j):
                for index in binary:
                    r = cnf.cnf_rules[index]  # A -> B C
                    b, c = r.rhs
                    if b in beta[i][k] and c in beta[k][j]:
                        term = r.logp + beta[i][k][b] + beta[k][j][c]
                        beta[i][j][r.lhs] = _logaddexp(beta[i][j].get(r.lhs, -math.inf), term)
    return beta[0][n].get(cnf.start, -math.inf)


@reference
def viterbi_cky_loop(
    grammar: PCFG | Iterable[PlainRule], words: Sequence[str]
) -> tuple[Tree | None, float]:
    """Viterbi CKY as the book writes it, eq. (parse-viterbi): :func:`inside_loop` with max for
    the sum, and a back pointer ``(rule, split)`` for each cell entry. The same result as
    :func:`viterbi_cky` (which may return another tree when two trees tie)."""
    cnf, words, lexical, binary = _loop_tables(_as_pcfg(grammar), words)
    n = len(words)
    delta: list[list[dict[str, float]]] = [[{} for _ in range(n + 1)] for _ in range(n + 1)]
    backptr: dict[tuple[int, int, str], tuple[int, int]] = {}  # (i, j, A) -> (rule, split k)
    for i, w in enumerate(words):
        for index in lexical[w]:
            r = cnf.cnf_rules[index]
            if r.logp > delta[i][i + 1].get(r.lhs, -math.inf):
                delta[i][i + 1][r.lhs] = r.logp
                backptr[(i, i + 1, r.lhs)] = (index, i + 1)
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            for k in range(i + 1, j):
                for index in binary:
                    r = cnf.cnf_rules[index]  # A -> B C
                    b, c = r.rhs
                    if b in delta[i][k] and c in delta[k][j]:
                        score = r.logp + delta[i][k][b] + delta[k][j][c]
                        if score > delta[i][j].get(r.lhs, -math.inf):
                            delta[i][j][r.lhs] = score
                            backptr[(i, j, r.lhs)] = (index, k)
    if cnf.start not in delta[0][n]:
        return None, -math.inf

    def build(i: int, j: int, a: str) -> Tree:
        index, k = backptr[(i, j, a)]
        rule = cnf.cnf_rules[index]
        if j == i + 1:
            return _cnf_node(rule, [words[i]])
        return _cnf_node(rule, [build(i, k, rule.rhs[0]), build(k, j, rule.rhs[1])])

    return Tree.from_cnf(build(0, n, cnf.start)), delta[0][n][cnf.start]


# --- the vectorised versions


@reference
def inside(grammar: PCFG | Iterable[PlainRule], words: Sequence[str]) -> float:
    """log P(words) summed over every tree, the inside algorithm, eq. (parse-inside)."""
    grammar = _as_pcfg(grammar)
    words = _pcfg_words(grammar, words)
    return float(fast.inside_batch(grammar._arrays(), [words])[0, 0, -1, 0])


@reference
def viterbi_cky(
    grammar: PCFG | Iterable[PlainRule], words: Sequence[str]
) -> tuple[Tree | None, float]:
    """The most probable tree (original grammar's labels) and its log probability, Viterbi CKY,
    eq. (parse-viterbi): the inside recursion with max instead of sum. ``(None, -inf)`` if no
    tree covers the words. :func:`viterbi_cky_loop` is the same as plain loops; the numpy
    version is :func:`nlpcourse.parsing_fast.viterbi_sentences`."""
    grammar = _as_pcfg(grammar)
    words = _pcfg_words(grammar, words)
    return fast.viterbi_sentences(grammar._arrays(), [words])[0]


@reference
def viterbi_batch(
    grammar: PCFG, sentences: Sequence[Sequence[str]]
) -> list[tuple[Tree | None, float]]:
    """:func:`viterbi_cky` of each sentence, the sentences of one length computed together
    (faster for a corpus: numpy's fixed cost per call is shared)."""
    grammar = _as_pcfg(grammar)
    sents = [_pcfg_words(grammar, words) for words in sentences]
    out: list[tuple[Tree | None, float]] = [(None, -math.inf)] * len(sents)
    for group in fast.by_length(sents, max_rows=fast.BATCH_ROWS):
        for k, result in zip(
            group, fast.viterbi_sentences(grammar._arrays(), [sents[k] for k in group]), strict=True
        ):
            out[k] = result
    return out


@dataclass
class InsideOutside:
    """The inside table ``inside`` (``beta``), the outside table ``outside`` (``alpha``), both
    ``(n+1, n+1, N)`` indexed by the nonterminals of ``tables.symbols``, and ``logZ`` =
    log P(words)."""

    grammar: PCFG
    words: list[str]
    tables: fast.Tables
    inside: np.ndarray
    outside: np.ndarray
    logZ: float

    def expected_counts(self) -> dict[Rule, float]:
        """E[c(rule) | words] for the original grammar's rules, eq. (parse-count)."""
        if self.logZ == -math.inf:
            return {}
        cnf_counts = fast.cnf_counts_batch(
            self.tables,
            [self.words],
            self.inside[None],
            self.outside[None],
            np.array([self.logZ]),
        )
        return _credit(self.grammar, self.tables, cnf_counts)


def _credit(grammar: PCFG, tab: fast.Tables, cnf_counts: np.ndarray) -> dict[Rule, float]:
    """Expected counts of the CNF rules credited to the original rules each stands for."""
    out: dict[Rule, float] = defaultdict(float)
    for rule, c in zip(tab.cnf.cnf_rules, cnf_counts, strict=True):
        for r in rule.origin:
            out[r] += c
    return {r: out.get(r, 0.0) for r in grammar.rules}


@reference
def inside_outside_tables(grammar: PCFG, words: Sequence[str]) -> InsideOutside:
    """Inside and outside tables of ``words``, eq. (parse-inside) and (parse-outside).

    The outside pass visits parent spans longest first and hands each parent's outside score to
    its two children: for ``A -> B C`` over ``(i, j)`` split at ``k``,
    ``alpha_B(i, k) += alpha_A(i, j) P(A -> B C) beta_C(k, j)`` and
    ``alpha_C(k, j) += alpha_A(i, j) P(A -> B C) beta_B(i, k)`` (sums in log space). A span's
    outside score is complete once every longer span has been visited.
    """
    words = _pcfg_words(grammar, words)
    tab = grammar._arrays()
    beta = fast.inside_batch(tab, [words])  # (1, n+1, n+1, N)
    alpha = fast.outside_batch(tab, beta)
    n = len(words)
    return InsideOutside(grammar, words, tab, beta[0], alpha[0], float(beta[0, 0, n, 0]))


# -------------------------------------------------------------------------------------- evaluation


def brackets(
    tree: Tree,
    punctuation: Iterable[str] = (),
    ignore_labels: Iterable[str] = ("TOP", "ROOT"),
) -> Counter[tuple[str, int, int]]:
    """The labelled brackets ``(label, i, j)`` of a tree, as a multiset (evalb's conventions).

    Every node counts except preterminals (a tag over a word) and nodes labelled with one of
    ``ignore_labels``; the root counts. Words whose preterminal label is in ``punctuation`` are
    removed first: positions are counted without them, and a bracket left with no word is dropped.
    Two nodes with the same label and span (a unary chain ``X -> X``) count twice.
    """
    punctuation, ignore_labels = set(punctuation), set(ignore_labels)
    out: Counter[tuple[str, int, int]] = Counter()

    def walk(node: Tree, start: int) -> int:
        if node.is_preterminal():
            return start + (0 if node.label in punctuation else 1)
        end = start
        for c in node.children:
            if isinstance(c, Tree):
                end = walk(c, end)
            else:
                end += 1
        if end > start and node.label not in ignore_labels:
            out[(node.label, start, end)] += 1
        return end

    walk(tree, 0)
    return out


@reference
def parseval(
    gold: Sequence[Tree | PlainTree | str],
    predicted: Sequence[Tree | PlainTree | str | None],
    punctuation: Iterable[str] = (),
    ignore_labels: Iterable[str] = ("TOP", "ROOT"),
) -> dict[str, float]:
    """Labelled-bracket precision, recall, F1 and exact match over a corpus, eq. (parse-f1).

    Micro-averaged, as evalb: ``P = matched / predicted brackets``, ``R = matched / gold
    brackets``, ``F1 = 2PR / (P + R)``, where ``matched`` sums, over sentences, the size of the
    multiset intersection of the two trees' brackets (:func:`brackets`). ``exact`` is the share of
    sentences whose bracket multisets are equal. A prediction ``None`` (the parser failed) has no
    brackets. Returns ``{"precision", "recall", "f1", "exact"}``.
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold trees but {len(predicted)} predicted ones")
    gold_trees = [as_tree(g) for g in gold]
    predicted_trees = [None if p is None else as_tree(p) for p in predicted]
    if not gold:
        raise ValueError("no trees to evaluate")
    matched = n_gold = n_pred = exact = 0
    punctuation = list(punctuation)
    for g, p in zip(gold_trees, predicted_trees, strict=True):
        gb = brackets(g, punctuation, ignore_labels)
        pb = brackets(p, punctuation, ignore_labels) if p is not None else Counter()
        if p is not None and g.leaves() != p.leaves():
            raise ValueError(f"gold and predicted trees have different words: {g.leaves()}")
        matched += sum((gb & pb).values())
        n_gold += sum(gb.values())
        n_pred += sum(pb.values())
        exact += gb == pb
    precision = matched / n_pred if n_pred else 0.0
    recall = matched / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "exact": exact / len(gold)}


# ------------------------------------------------------------------- brute force, for the checks


def catalan(n: int) -> int:
    """The n-th Catalan number ``C_n = (2n)! / ((n+1)! n!)``: the binary trees with n+1 leaves."""
    return math.comb(2 * n, n) // (n + 1)


def log_tree_count(grammar: CFG, words: Sequence[str]) -> float:
    """log of the number of trees of ``words`` (the inside algorithm with every rule weighted 1).

    The count of trees can pass 1e300 on long sentences of an ambiguous grammar, so it is kept as a
    log; :meth:`Chart.count` gives the exact integer on short ones. ``-inf`` if there is none.
    """
    cnf = to_cnf(grammar) if not isinstance(grammar, CNFGrammar) else grammar
    tab = fast.Tables(cnf, counting=True)
    return float(fast.inside_batch(tab, [list(words)])[0, 0, -1, 0])


# ----------------------------------------------------------------- the chapter's two grammars

BROWN_TAG_GRAMMAR = """
# A PCFG over the 12 universal tags of Brown (chapter 2), written by hand; the words are the tags.
# The probabilities are guesses, re-estimated by inside-outside in the chapter.
S -> NP VP [0.55] | VP [0.05] | S '.' [0.12] | '.' S [0.04] | S '.' S [0.07]
   | S 'CONJ' S [0.05] | 'CONJ' S [0.03] | ADVP S [0.04] | PP S [0.05]
NP -> 'DET' NOM [0.3] | NOM [0.22] | 'PRON' [0.15] | NP PP [0.15] | NP 'CONJ' NP [0.04]
    | NP '.' NP [0.02] | 'PRON' NOM [0.03] | 'NUM' [0.02] | 'DET' [0.02] | NP SBAR [0.05]
NOM -> 'NOUN' [0.59] | ADJP NOM [0.2] | 'NOUN' NOM [0.15] | 'NUM' NOM [0.05] | 'X' [0.01]
ADJP -> 'ADJ' [0.8] | ADVP ADJP [0.1] | ADJP 'CONJ' ADJP [0.05] | ADJP '.' ADJP [0.05]
ADVP -> 'ADV' [0.85] | 'ADV' ADVP [0.15]
VP -> 'VERB' [0.15] | 'VERB' NP [0.25] | 'VERB' NP NP [0.02] | 'VERB' PP [0.06]
    | 'VERB' ADJP [0.06] | 'VERB' VP [0.1] | VP PP [0.12] | VP ADVP [0.05] | ADVP VP [0.04]
    | 'PRT' VP [0.06] | 'VERB' 'PRT' [0.02] | VP 'CONJ' VP [0.04] | 'VERB' SBAR [0.03]
PP -> 'ADP' NP [0.9] | 'ADP' SBAR [0.05] | 'ADP' VP [0.05]
SBAR -> 'ADP' S [0.5] | 'PRON' VP [0.3] | 'DET' S [0.2]
"""

_TAGS = ("NOUN", "VERB", "ADJ", "ADV", "PRON", "DET", "ADP", "NUM", "CONJ", "PRT", ".", "X")


def brown_tag_pcfg(fallback: float = 0.01) -> PCFG:
    """The chapter's PCFG over universal tags: :data:`BROWN_TAG_GRAMMAR` under a new start symbol
    ``TOP``, with a fallback so that every tag sequence has a tree.

    ``TOP -> S`` with probability ``1 - fallback``; ``TOP -> FRAG`` with ``fallback``, where a
    fragment is a sequence of pieces, each a constituent of the grammar or a single tag
    (``FRAG -> PIECE FRAG | PIECE``, ``PIECE -> S | NP | VP | PP | ADJP | ADVP | XP``,
    ``XP -> 'NOUN' | ... | 'X'``), with uniform probabilities. ``fallback=0`` gives the grammar
    without the fallback (``TOP -> S`` only).
    """
    lines = [f"TOP -> S [{1 - fallback}]" + (f" | FRAG [{fallback}]" if fallback > 0 else "")]
    lines.append(BROWN_TAG_GRAMMAR)
    if fallback > 0:
        pieces = ["S", "NP", "VP", "PP", "ADJP", "ADVP", "XP"]
        lines.append("FRAG -> PIECE FRAG [0.5] | PIECE [0.5]")
        lines.append("PIECE -> " + " | ".join(f"{p} [{1 / len(pieces)}]" for p in pieces))
        lines.append("XP -> " + " | ".join(f"'{t}' [{1 / len(_TAGS)}]" for t in _TAGS))
    return PCFG.fromstring("\n".join(lines))


TREEBANK_GRAMMAR = """
S -> NP VP [0.9] | S Conj S [0.1]
NP -> Det N [0.4] | Det Adj N [0.15] | Pro [0.2] | NP PP [0.15] | N [0.1]
VP -> V NP [0.45] | V [0.15] | VP PP [0.2] | V NP PP [0.1] | Adv VP [0.1]
PP -> P NP [1.0]
"""
TREEBANK_TAGS = {  # preterminal of the treebank grammar: (universal tag, number of Brown words)
    "N": ("NOUN", 40),
    "V": ("VERB", 40),
    "Adj": ("ADJ", 20),
    "Det": ("DET", 8),
    "Pro": ("PRON", 8),
    "P": ("ADP", 12),
    "Adv": ("ADV", 10),
    "Conj": ("CONJ", 3),
}


def treebank_pcfg(tagged_sentences: Iterable[Sequence[tuple[str, str]]]) -> PCFG:
    """The chapter's *true* PCFG for sampled treebanks: :data:`TREEBANK_GRAMMAR` with a lexicon of
    Brown words.

    Each preterminal of :data:`TREEBANK_TAGS` gets the most frequent lower-case alphabetic words
    of its universal tag in ``tagged_sentences`` (a word goes to the tag it has most often), with
    probabilities proportional to their counts.
    """
    counts: Counter[tuple[str, str]] = Counter()
    for sentence in tagged_sentences:
        for word, tag in sentence:
            if word.isalpha():
                counts[(word.lower(), tag)] += 1
    best_tag: dict[str, tuple[int, str]] = {}
    for (word, tag), c in counts.items():
        if c > best_tag.get(word, (0, ""))[0]:
            best_tag[word] = (c, tag)
    lines = [TREEBANK_GRAMMAR]
    for pre, (tag, size) in TREEBANK_TAGS.items():
        words = sorted(
            ((c, w) for w, (c, t) in best_tag.items() if t == tag), key=lambda cw: (-cw[0], cw[1])
        )[:size]
        total = sum(c for c, _ in words)
        lines.append(f"{pre} -> " + " | ".join(f"'{w}' [{c / total!r}]" for c, w in words))
    return PCFG.fromstring("\n".join(lines))


# --------------------------------------------------------- plain-data versions, for exercise 03

PlainTree = tuple  # ("S", ("NP", ("Det", "the"), ("N", "cat")), ...): a label, then children
PlainRule = tuple  # (lhs, rhs) or (lhs, rhs, logp), rhs a tuple of symbols


def as_tree(tree: Tree | PlainTree | str) -> Tree:
    """A :class:`Tree` from a Tree, a bracketed string, or nested tuples ``(label, *children)``
    (a child a word or another tuple); ``ValueError`` for anything else."""
    if isinstance(tree, Tree):
        return tree
    if isinstance(tree, str):
        return Tree.fromstring(tree)
    if isinstance(tree, (tuple, list)) and tree and isinstance(tree[0], str):
        return Tree(tree[0], [c if isinstance(c, str) else as_tree(c) for c in tree[1:]])
    raise ValueError(f"not a tree: {tree!r}; write a tree as (label, child, ...)")


def as_tuple(tree: Tree) -> PlainTree:
    """The nested-tuple form of a tree (see :func:`as_tree`)."""
    return (tree.label, *(c if isinstance(c, str) else as_tuple(c) for c in tree.children))


def _plain_cfg(rules: Iterable[PlainRule], start: str) -> CFG:
    """A CFG (or a PCFG if the rules carry log probabilities) from plain ``(lhs, rhs[, logp])``;
    a symbol that is on no left side is a word."""
    rules = [tuple(r) for r in rules]
    if not rules:
        raise ValueError("no rules")
    plain = [Rule(r[0], tuple(r[1])) for r in rules]
    if all(len(r) == 3 for r in rules):
        return PCFG(plain, start, [math.exp(r[2]) for r in rules])
    return CFG(plain, start)


@reference
def leftmost_derivation(tree: Tree | PlainTree | str) -> list[tuple[str, ...]]:
    """The leftmost derivation of a tree, eq. (parse-derive): the sentential forms from
    ``(root,)`` to the words, each made from the one before by rewriting its leftmost nonterminal
    with the rule used at that node of the tree (the nodes in preorder)."""
    tree = as_tree(tree)
    forms: list[tuple[str, ...]] = [(tree.label,)]
    form: list[Tree | str] = [tree]
    while True:
        k = next((i for i, x in enumerate(form) if isinstance(x, Tree)), None)
        if k is None:
            return forms
        node = form[k]
        assert isinstance(node, Tree)
        form = form[:k] + list(node.children) + form[k + 1 :]
        forms.append(tuple(x.label if isinstance(x, Tree) else x for x in form))


@reference
def cky_recognize(
    rules: Iterable[PlainRule], words: Sequence[str], start: str = "S"
) -> dict[tuple[int, int], set[str]]:
    """The CKY table, eq. (parse-cky), of a grammar in CNF that may also have unit rules
    ``A -> B``: ``{(i, j): the nonterminals that derive words i+1 .. j}`` for every non-empty
    cell. A unit rule adds its left side to every cell its right side is in (the cell's *unary
    closure*)."""
    grammar = _plain_cfg([(r[0], r[1]) for r in rules], start)
    chart = cky(to_cnf(grammar), words)
    return {
        (i, j): set(chart.cells[i][j])
        for i in range(len(chart.words))
        for j in range(i + 1, len(chart.words) + 1)
        if chart.cells[i][j]
    }


@reference
def count_parses(rules: Iterable[PlainRule], words: Sequence[str], start: str = "S") -> int:
    """The number of trees of ``words`` (CKY with counts, for a CNF grammar)."""
    return cky(to_cnf(_plain_cfg([(r[0], r[1]) for r in rules], start)), words).count()
