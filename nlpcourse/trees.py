"""Constituency trees and grammar rules: what chapter 3's parsers build and the treebank reader
(:mod:`nlpcourse.data`) reads (chapter 3, ``book/parsing.md``).

:class:`Tree` reads and writes the bracketed format of the Penn Treebank and of ``nltk.Tree``,
reads its rules and spans off, and undoes the Chomsky normal form of
:func:`nlpcourse.parsing.to_cnf` (:meth:`Tree.from_cnf`), whose marks it therefore knows
(:data:`BIN_MARK`, :data:`UNIT_MARK`, ``<w>`` for a word inside a long rule). It lives below
both the data loading and the parsers, so that loading data does not import the parsers:
:mod:`nlpcourse.parsing` imports it from here, and
``nlpcourse.parsing.Tree`` is the same class.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from typing import NamedTuple

BIN_MARK = "|<"  # binarised nodes: A|<C-D> stands for the rest "C D" of a rule A -> B C D
UNIT_MARK = "+"  # collapsed unit chains: a node A+B is A over B


def _term_symbol(word: str) -> str:
    """The nonterminal that stands for a terminal inside a long rule (CNF step TERM)."""
    return f"<{word}>"


@functools.lru_cache(maxsize=4096)
def _is_term_symbol(label: str) -> bool:
    return label.startswith("<") and label.endswith(">") and BIN_MARK not in label


@functools.lru_cache(maxsize=4096)
def _chain(label: str) -> tuple[str, ...]:
    """The labels of a collapsed unit chain ``A+B+C`` (a word wrapper ``<w+x>`` stays whole)."""
    parts: list[str] = []
    for piece in label.split(UNIT_MARK):
        if parts and parts[-1].startswith("<") and not parts[-1].endswith(">"):
            parts[-1] += UNIT_MARK + piece
        else:
            parts.append(piece)
    return tuple(parts)


# ------------------------------------------------------------------------------------------ trees


class Tree:
    """A constituency tree: a ``label`` and ``children``, each a :class:`Tree` or a word (``str``).

    ``str(tree)`` is the bracketed format, ``(S (NP (Det the) (N cat)) (VP ...))``, which
    :meth:`fromstring` reads back and ``nltk.Tree.fromstring`` reads too.
    """

    def __init__(self, label: str, children: Sequence[Tree | str]):
        self.label = label
        self.children = list(children)

    # --- reading and writing
    @classmethod
    def fromstring(cls, text: str) -> Tree:
        """Read a bracketed tree; ``ValueError`` naming the position of a bracket out of place."""
        tokens = [(m.group(), m.start()) for m in re.finditer(r"\(|\)|[^\s()]+", text)]
        if not tokens:
            raise ValueError("empty tree string")
        pos = 0

        def parse() -> Tree:
            nonlocal pos
            if tokens[pos][0] != "(":
                raise ValueError(f"expected '(' at character {tokens[pos][1]} of {text!r}")
            pos += 1
            if pos >= len(tokens) or tokens[pos][0] in "()":
                raise ValueError(f"a tree needs a label after '(' in {text!r}")
            label = tokens[pos][0]
            pos += 1
            children: list[Tree | str] = []
            while pos < len(tokens) and tokens[pos][0] != ")":
                if tokens[pos][0] == "(":
                    children.append(parse())
                else:
                    children.append(tokens[pos][0])
                    pos += 1
            if pos >= len(tokens):
                raise ValueError(f"missing ')' at the end of {text!r}")
            pos += 1
            return cls(label, children)

        tree = parse()
        if pos != len(tokens):
            raise ValueError(f"text after the tree at character {tokens[pos][1]} of {text!r}")
        return tree

    def __str__(self) -> str:
        inner = " ".join(str(c) for c in self.children)
        return f"({self.label} {inner})" if inner else f"({self.label})"

    def __repr__(self) -> str:
        return f"Tree.fromstring({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tree) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    # --- reading off
    def leaves(self) -> list[str]:
        """The words, left to right."""
        out: list[str] = []
        for c in self.children:
            out.extend(c.leaves() if isinstance(c, Tree) else [c])
        return out

    def is_preterminal(self) -> bool:
        """A node over exactly one word, such as ``(N cat)``."""
        return len(self.children) == 1 and isinstance(self.children[0], str)

    def subtrees(self) -> Iterator[Tree]:
        """Every node, in preorder (the root first)."""
        yield self
        for c in self.children:
            if isinstance(c, Tree):
                yield from c.subtrees()

    def rules(self) -> list[Rule]:
        """The rule used at every node, in preorder (a leftmost derivation's order)."""
        out = []
        for node in self.subtrees():
            out.append(
                Rule(
                    node.label, tuple(c.label if isinstance(c, Tree) else c for c in node.children)
                )
            )
        return out

    def spans(self) -> list[tuple[str, int, int]]:
        """``(label, i, j)`` of every node covering words ``i+1 .. j``, in preorder."""
        out: list[tuple[str, int, int]] = []

        def walk(node: Tree, start: int) -> int:
            entry = len(out)
            out.append((node.label, start, start))
            end = start
            for c in node.children:
                end = walk(c, end) if isinstance(c, Tree) else end + 1
            out[entry] = (node.label, start, end)
            return end

        walk(self, 0)
        return out

    def depth(self) -> int:
        """Number of nodes on the longest path from the root to a word."""
        return 1 + max((c.depth() for c in self.children if isinstance(c, Tree)), default=0)

    # --- back from Chomsky normal form
    @classmethod
    def from_cnf(cls, tree: Tree) -> Tree:
        """The original grammar's tree for a tree of the CNF grammar made by :func:`to_cnf`.

        Undoes the three steps: a node ``A|<...>`` (binarisation) is spliced into its parent, a node
        ``A+B+C`` (a collapsed unit chain) becomes ``A`` over ``B`` over ``C``, and a node
        ``<w>`` (a terminal inside a long rule) becomes the word ``w`` itself.
        """

        def convert(node: Tree | str) -> list[Tree | str]:
            """What ``node`` becomes in the original tree: a list, to splice into its parent."""
            if isinstance(node, str):
                return [node]
            inner: list[Tree | str] = [x for c in node.children for x in convert(c)]
            for label in reversed(_chain(node.label)):
                if BIN_MARK in label or _is_term_symbol(label):
                    continue  # binarisation helper or word wrapper: its children stay as they are
                inner = [cls(label, inner)]
            return inner

        out = convert(tree)
        if len(out) != 1 or not isinstance(out[0], Tree):
            raise ValueError(f"{tree} is not a tree of a CNF grammar made by to_cnf")
        return out[0]


class Rule(NamedTuple):
    """A rule ``lhs -> rhs``: ``rhs`` a tuple of symbols (nonterminals and words)."""

    lhs: str
    rhs: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.lhs} -> {' '.join(self.rhs)}"
