"""The student view of ``nlpcourse``: the package as the sandboxed grader lets student code see it.

Issue 11, "the checks outside the student's interpreter", and issue 40 section 2, "the package
answers for the student". A submission's code runs in a sandboxed worker (:mod:`autograder.sandbox`)
that imports this view instead of the real package. It is a generated copy of ``nlpcourse`` that,
by construction, computes nothing but what the exercise notebooks' own setup cells use:

- the *used names* are read from the syntax trees of the setup cells (the locked, ungraded code
  cells of ``solutions/*/*.ipynb``, the cells the worker runs before the student's): every
  ``from nlpcourse.m import name`` and every ``nlpcourse.m.name`` they write. A used name keeps its
  code, and so does every top-level name of its module that it refers to, and so on, across
  modules (:func:`kept_names`);
- the modules of the inputs (:data:`nlpcourse.guard.INPUT_MODULES`: the worked examples and the
  corpus loaders, which students' cells use as the book does, ``brown_sents()``; no part grades
  them) keep all their code, but what they import from another module of the package is that
  module's view;
- every other function and class of every module, public or private, at any depth (methods,
  nested functions), becomes a *stub* with its name and docstring whose call raises
  :class:`nlpcourse.guard.ReferenceUsedError`; every other top-level name (a constant, a table)
  is gone, and reading it raises the same error (the module's ``__getattr__``). So a function
  added to a chapter module is covered without anyone listing it;
- functions marked :func:`nlpcourse.guard.reference` are stubs even when kept (none is today);
- ``nlpcourse/checks/`` and ``nlpcourse/testing.py`` are left out: the cases, the expected answers
  and the oracles (hidden cases included) live only in the grader's process; ``guard.py`` is
  copied whole (it defines the error).

The reference code does not exist where the student's code runs, so no way around the guard (a
closure, a saved code object, ``importlib.reload``, reading the source file) can reach it. The
copy is made from the package's syntax tree (:mod:`ast`), so comments are not kept.
"""

from __future__ import annotations

import ast
import atexit
import hashlib
import json
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

import nlpcourse
from nlpcourse.guard import INPUT_MODULES

PACKAGE = Path(nlpcourse.__file__).resolve().parent
SOLUTIONS = PACKAGE.parent / "solutions"  # the notebooks whose setup cells say what is used
LEFT_OUT = ("checks", "testing.py", "__pycache__")  # never copied into the view
COPIED_WHOLE = ("guard.py",)  # defines ReferenceUsedError, which every stub raises
_REFUSE = "raise __import__('nlpcourse.guard', fromlist=['_']).refusal({!r})"


def module_name(relative: Path) -> str:
    """``nlpcourse.x.y`` of a file ``x/y.py`` (or ``x/y/__init__.py``) of the package."""
    return ".".join(("nlpcourse", *relative.with_suffix("").parts)).removesuffix(".__init__")


def _modules(package: Path) -> dict[str, Path]:
    """Every module of ``package`` that the view holds, by its dotted name."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if relative.parts[0] not in LEFT_OUT:
            found[module_name(relative)] = path
    return found


def setup_cells(solutions: Path = SOLUTIONS) -> list[str]:
    """The source of every setup cell (code, locked, neither solution nor graded) of the course's
    notebooks: the cells the worker runs before the student's."""
    sources = []
    for notebook in sorted(solutions.glob("*/*.ipynb")):
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.get("cell_type") != "code" or not meta.get("locked"):
                continue
            if not meta.get("solution") and not meta.get("grade"):
                source = cell["source"]
                sources.append(source if isinstance(source, str) else "".join(source))
    return sources


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` of an attribute chain on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def used_names(sources: list[str], modules: set[str]) -> dict[str, set[str]]:
    """``{module: names}`` that the code ``sources`` imports from (or reads off) the modules
    ``modules`` of the package."""
    used: dict[str, set[str]] = defaultdict(set)
    for source in sources:
        tree = ast.parse(source)
        aliases: dict[str, str] = {}  # a local name -> the module of the package it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in modules and not node.level:
                for alias in node.names:
                    inner = f"{node.module}.{alias.name}"
                    if inner in modules:
                        aliases[alias.asname or alias.name] = inner
                    else:
                        used[node.module].add(alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules:
                        top = alias.asname or alias.name.split(".")[0]
                        aliases[top] = alias.name if alias.asname else top
        for node in ast.walk(tree):
            dotted = _dotted(node) if isinstance(node, ast.Attribute) else None
            if dotted is None or dotted.split(".")[0] not in aliases:
                continue
            first, *rest = dotted.split(".")
            path = aliases[first].split(".") + rest
            for cut in range(len(path) - 1, 0, -1):  # the longest module, then the name used
                if ".".join(path[:cut]) in modules:
                    used[".".join(path[:cut])].add(path[cut])
                    break
    return used


def _top_level(tree: ast.Module) -> dict[str, list[ast.stmt]]:
    """The statements of a module that bind each top-level name."""
    binds: dict[str, list[ast.stmt]] = defaultdict(list)
    for statement in tree.body:
        for name in _bound(statement):
            binds[name].append(statement)
    return binds


def _bound(statement: ast.stmt) -> set[str]:
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {statement.name}
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in statement.names}
    names = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
    return names


def kept_names(trees: dict[str, ast.Module], used: dict[str, set[str]]) -> dict[str, set[str]]:
    """The top-level names of each module that keep their code: the ``used`` ones and, to a fixed
    point, every top-level name a kept statement refers to, in its module or (through
    ``from nlpcourse.m import name``) in another."""
    binds = {module: _top_level(tree) for module, tree in trees.items()}
    kept: dict[str, set[str]] = defaultdict(set)
    work = [(module, name) for module, names in used.items() for name in names]
    while work:
        module, name = work.pop()
        if module not in trees or name in kept[module] or name not in binds[module]:
            continue
        kept[module].add(name)
        for statement in binds[module][name]:
            if isinstance(statement, ast.ImportFrom) and statement.module in trees:
                work += [(statement.module, a.name) for a in statement.names]
            for node in ast.walk(statement):
                if isinstance(node, ast.Name):
                    work.append((module, node.id))
    return kept


def _stub_function(name: str, docstring: str | None, qualname: str) -> ast.stmt:
    """``def name(*args, **kwargs)`` with the docstring, whose body raises the refusal."""
    stub = ast.parse(f"def {name}(*args, **kwargs):\n    {_REFUSE.format(qualname)}\n").body[0]
    if docstring:
        stub.body.insert(0, ast.Expr(ast.Constant(docstring)))  # type: ignore[attr-defined]
    return stub


def _stub_class(node: ast.ClassDef, qualname: str) -> ast.stmt:
    """The class with its docstring and every method a stub (``__init__`` too): no base, no data."""
    stub = ast.parse(f"class {node.name}:\n    pass\n").body[0]
    assert isinstance(stub, ast.ClassDef)
    docstring = ast.get_docstring(node, clean=False)
    body: list[ast.stmt] = [ast.Expr(ast.Constant(docstring))] if docstring else []
    methods = [n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    if not any(m.name == "__init__" for m in methods):
        body.append(_stub_function("__init__", None, qualname))
    for method in methods:
        doc = ast.get_docstring(method, clean=False)
        body.append(_stub_function(method.name, doc, f"{qualname}.{method.name}"))
    for inner in node.body:
        if isinstance(inner, ast.ClassDef):
            body.append(_stub_class(inner, f"{qualname}.{inner.name}"))
    stub.body = body
    return stub


def _refusing_getattr(module: str, submodules: set[str]) -> list[ast.stmt]:
    """A module ``__getattr__``: a name the view left out raises the refusal (a submodule is
    imported as usual, a dunder is simply missing)."""
    source = (
        "def __getattr__(name):\n"
        f"    if name.startswith('__') or name in {sorted(submodules)!r}:\n"
        "        raise AttributeError(name)\n"
        f"    guard = __import__('nlpcourse.guard', fromlist=['_'])\n"
        f"    raise guard.refusal({module!r} + '.' + name)\n"
    )
    return ast.parse(source).body


def view_module(tree: ast.Module, module: str, kept: set[str], submodules: set[str]) -> ast.Module:
    """The view of one module: the ``kept`` top-level names as they are, every other function and
    class a stub, every other statement gone, and a refusing ``__getattr__``."""
    body: list[ast.stmt] = []
    if ast.get_docstring(tree, clean=False) is not None:
        body.append(tree.body[0])
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
            body.append(statement)
        elif _bound(statement) & kept:
            body.append(statement)
        elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(statement, clean=False)
            body.append(_stub_function(statement.name, doc, f"{module}.{statement.name}"))
        elif isinstance(statement, ast.ClassDef):
            body.append(_stub_class(statement, f"{module}.{statement.name}"))
    body += _refusing_getattr(module, submodules)
    return ast.Module(body, [])


def _is_reference(decorator: ast.expr) -> bool:
    """Whether a decorator is ``@reference`` or ``@guard.reference`` (any ``.reference``)."""
    if isinstance(decorator, ast.Name):
        return decorator.id == "reference"
    return isinstance(decorator, ast.Attribute) and decorator.attr == "reference"


class _StubReferences(ast.NodeTransformer):
    """Replace the body of every ``@reference`` function with a ``raise ReferenceUsedError``."""

    def __init__(self, module: str):
        self.module = module
        self.scope: list[str] = []
        self.stubbed: list[str] = []

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()
        return node

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        if not any(_is_reference(d) for d in node.decorator_list):
            self.scope.append(node.name)
            self.generic_visit(node)
            self.scope.pop()
            return node
        qualname = ".".join([self.module, *self.scope, node.name])
        self.stubbed.append(qualname)
        docstring = ast.get_docstring(node, clean=False)
        raise_line = ast.parse(
            "raise __import__('nlpcourse.guard', fromlist=['_']).refusal(" + repr(qualname) + ")"
        ).body
        node.body = ([ast.Expr(ast.Constant(docstring))] if docstring else []) + raise_line
        node.decorator_list = [d for d in node.decorator_list if not _is_reference(d)]
        return node

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function


def view_source(
    path: Path, module: str, kept: set[str] | None = None, submodules: set[str] = frozenset()
) -> tuple[str, list[str]]:
    """The view of one module's source (``kept=None``: the whole module, its ``@reference``
    functions stubbed), and the qualified names of the reference functions stubbed."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    if kept is not None:
        tree = view_module(tree, module, kept, submodules)
    stubber = _StubReferences(module)
    tree = stubber.visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n", stubber.stubbed


def _fingerprint(package: Path, solutions: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted([*package.rglob("*.py"), *solutions.glob("*/*.ipynb")]):
        digest.update(str(path).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def build_view(into: Path, package: Path = PACKAGE, solutions: Path = SOLUTIONS) -> list[str]:
    """Write the student view of ``package`` to ``into/nlpcourse`` (the names the setup cells of
    ``solutions`` use kept, see the module docstring); return the stubbed reference names."""
    target = into / "nlpcourse"
    modules = _modules(package)
    trees = {
        m: ast.parse(p.read_text(encoding="utf-8"), filename=str(p)) for m, p in modules.items()
    }
    kept = kept_names(trees, used_names(setup_cells(solutions), set(modules)))
    for module in INPUT_MODULES:  # whole, but what they import from other modules stays a view
        if module in trees:
            kept[module] = set(_top_level(trees[module]))
    stubbed: list[str] = []
    for module, path in modules.items():
        relative = path.relative_to(package)
        submodules = {m.rpartition(".")[2] for m in modules if m.rpartition(".")[0] == module}
        if relative.name in COPIED_WHOLE and len(relative.parts) == 1:
            source, names = view_source(path, module)
        else:
            source, names = view_source(path, module, kept.get(module, set()), submodules)
        stubbed += names
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        (target / relative).write_text(source, encoding="utf-8")
    return stubbed


_built: dict[str, Path] = {}


def cached_view(package: Path = PACKAGE, solutions: Path = SOLUTIONS) -> Path:
    """A directory holding the view of the package as it is now (built once per process and
    content), world-readable so that the sandbox's unprivileged user can import it."""
    key = _fingerprint(package, solutions)
    if key in _built and (_built[key] / "nlpcourse" / "__init__.py").exists():
        return _built[key]
    root = Path(tempfile.mkdtemp(prefix=f"nlpcourse-view-{key}-"))
    build_view(root, package, solutions)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    _built[key] = root
    return root


@atexit.register
def remove_cached_views() -> None:
    """Delete the views this process built (when it exits)."""
    for root in _built.values():
        shutil.rmtree(root, ignore_errors=True)
    _built.clear()
