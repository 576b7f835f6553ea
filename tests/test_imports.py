"""The package and the grader import without circles (issue 44): their import graph, read from the
code with ``ast``, is acyclic.

A circle forces its modules to import each other lazily or in a certain order, and hides which one
sits below the other; data loading sits below the algorithms, and the compiled loops below the
readable code that calls them. Every ``import`` counts, at the top of a module or inside a
function, except under ``if TYPE_CHECKING:`` (read only by the type checker).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("nlpcourse", "autograder")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, name: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that the module ``name`` imports, outside ``if TYPE_CHECKING``."""
    found: set[str] = set()
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(max(node.level - 1, 0)):
                base = base.rpartition(".")[0]
            module = node.module or ""
            base = f"{base}.{module}".strip(".") if node.level else module
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    files = [p for package in PACKAGES for p in sorted((REPO / package).rglob("*.py"))]
    names = {module_name(p): p for p in files}
    known = set(names)
    return {
        name: imported(ast.parse(path.read_text()), name, path.name == "__init__.py", known)
        for name, path in names.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each strongly connected group of modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_is_read_from_the_code():
    graph = import_graph()
    assert "nlpcourse.lm" in graph["nlpcourse.ngram"]
    assert "nlpcourse.arpa_fast" in graph["nlpcourse.arpa"]


def test_nlpcourse_and_autograder_import_without_circles():
    found = cycles(import_graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)
