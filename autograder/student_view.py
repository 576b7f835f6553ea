"""The student view of ``nlpcourse``: the package as the sandboxed grader lets student code see it.

Issue 11, "the checks outside the student's interpreter". A submission's code runs in a sandboxed
worker (:mod:`autograder.sandbox`) that imports this view instead of the real package. It is a
generated copy of ``nlpcourse`` in which

- every function marked :func:`nlpcourse.guard.reference` keeps its name, signature and docstring,
  but its body is one line that raises :class:`nlpcourse.guard.ReferenceUsedError`: the reference
  code does not exist where the student's code runs, so no way around the guard (a closure, a
  saved code object, ``importlib.reload``, reading the source file) can reach it;
- ``nlpcourse/checks/`` and ``nlpcourse/testing.py`` are left out: the cases, the expected answers
  and the oracles (hidden cases included) live only in the grader's process.

Everything else (the worked examples of :mod:`nlpcourse.examples` that the setup cells import, the
helpers that are not a reference) is copied as it is, so a setup cell behaves as in JupyterLab.
The copy is made from the package's syntax tree (:mod:`ast`), so comments are not kept.
"""

from __future__ import annotations

import ast
import atexit
import hashlib
import shutil
import tempfile
from pathlib import Path

import nlpcourse

PACKAGE = Path(nlpcourse.__file__).resolve().parent
LEFT_OUT = ("checks", "testing.py", "__pycache__")  # never copied into the view


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


def view_source(path: Path, module: str) -> tuple[str, list[str]]:
    """The view of one module's source, and the qualified names of the functions stubbed."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    stubber = _StubReferences(module)
    tree = stubber.visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n", stubber.stubbed


def _fingerprint(package: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def build_view(into: Path, package: Path = PACKAGE) -> list[str]:
    """Write the student view of ``package`` to ``into/nlpcourse``; return the stubbed names."""
    target = into / "nlpcourse"
    stubbed: list[str] = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if relative.parts[0] in LEFT_OUT:
            continue
        module = ".".join(("nlpcourse", *relative.with_suffix("").parts)).removesuffix(".__init__")
        source, names = view_source(path, module)
        stubbed += names
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        (target / relative).write_text(source, encoding="utf-8")
    return stubbed


_built: dict[str, Path] = {}


def cached_view(package: Path = PACKAGE) -> Path:
    """A directory holding the view of the package as it is now (built once per process and
    content), world-readable so that the sandbox's unprivileged user can import it."""
    key = _fingerprint(package)
    if key in _built and (_built[key] / "nlpcourse" / "__init__.py").exists():
        return _built[key]
    root = Path(tempfile.mkdtemp(prefix=f"nlpcourse-view-{key}-"))
    build_view(root, package)
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
