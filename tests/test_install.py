"""The package declares what it needs (issue 44): ``pyproject.toml``'s dependencies and extras are
requirements.txt's pins, every package the code imports is declared where the module that imports
it needs it, and ``pip install .`` into a fresh virtual environment gives a package whose modules
all import.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Modules that need an extra: the book's tools read the chapters' MyST (nlpcourse.book,
# nlpcourse.numbering), and the checks' traceback hook, which only IPython calls, imports IPython
# there; every other module needs only the dependencies.
NEEDS_EXTRA = {
    "nlpcourse.book": "book",
    "nlpcourse.numbering": "book",
    "nlpcourse.scaffold": "book",  # a chapter run alone, one page's warnings: the book's tools
    "nlpcourse.checks.core": "grader",
}


def normalized(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement(line: str) -> tuple[str, str]:
    name, _, version = line.partition("==")
    assert version, f"not pinned with ==: {line!r}"
    return normalized(name.strip()), version.strip()


def pyproject_groups() -> dict[str, dict[str, str]]:
    """The pins of ``pyproject.toml``: "" for the dependencies, then each extra's."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    groups = {"": project["dependencies"], **project["optional-dependencies"]}
    return {group: dict(map(requirement, lines)) for group, lines in groups.items()}


def requirements_files() -> dict[str, str]:
    """The pins of requirements.txt and requirements-test.txt (but ``-e .``)."""
    pins: dict[str, str] = {}
    for name in ("requirements.txt", "requirements-test.txt"):
        for line in (REPO / name).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line and not line.startswith("-e"):
                pins.update([requirement(line)])
    return pins


def test_pyproject_pins_are_the_requirements_pins():
    groups = pyproject_groups()
    assert set(groups) == {"", "book", "grader", "dev"}
    declared: dict[str, str] = {}
    for pins in groups.values():
        assert not set(pins) & set(declared), "a package in two groups"
        declared.update(pins)
    assert declared == requirements_files()


def third_party_imports(path: Path) -> set[str]:
    """The top-level names of the packages outside the standard library that ``path`` imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"nlpcourse", "__future__"}


def module_names() -> list[str]:
    paths = sorted((REPO / "nlpcourse").rglob("*.py"))
    names = [".".join(p.relative_to(REPO).with_suffix("").parts) for p in paths]
    return [n.removesuffix(".__init__") for n in names]


def test_every_imported_package_is_declared_where_it_is_needed():
    """A module's imports (read with ``ast``, all of them, at the top or in a function) come from
    the dependencies, or from its extra (:data:`NEEDS_EXTRA`)."""
    groups = pyproject_groups()
    distributions = importlib.metadata.packages_distributions()
    for name in module_names():
        path = REPO / (name.replace(".", "/") + ".py")
        if not path.exists():
            path = REPO / name.replace(".", "/") / "__init__.py"
        allowed = set(groups[""]) | set(groups.get(NEEDS_EXTRA.get(name, ""), {}))
        for package in third_party_imports(path):
            owners = {normalized(d) for d in distributions.get(package, [package])}
            assert owners & allowed, f"{name} imports {package} ({owners}), not declared for it"


IMPORT_ALL = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as err:
        failed.append(f"{name}: {err.name}")
print("\\n".join(failed))
"""


@pytest.mark.slow
def test_pip_install_into_a_fresh_venv_imports_every_module(tmp_path):
    """``pip install .`` (a copy of the package and pyproject.toml) into a new virtual environment,
    from the local wheels and index pip is configured with (``pip config list``), then every
    module is imported there; those of :data:`NEEDS_EXTRA` may miss only their extra's packages."""
    source = tmp_path / "src"
    shutil.copytree(
        REPO / "nlpcourse", source / "nlpcourse", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(REPO / "pyproject.toml", source)
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    python = str(tmp_path / "venv" / "bin" / "python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", str(source)], capture_output=True, text=True
    )
    if install.returncode != 0 and re.search(
        r"No matching distribution|Could not find a version", install.stderr
    ):
        pytest.skip(f"no wheel for a dependency here (offline?): {install.stderr[-500:]}")
    assert install.returncode == 0, install.stderr[-3000:]
    out = subprocess.run(
        [python, "-c", IMPORT_ALL, *module_names()],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    groups, distributions = pyproject_groups(), importlib.metadata.packages_distributions()
    for line in filter(None, out.stdout.splitlines()):
        module, _, missing = line.partition(": ")
        extra = NEEDS_EXTRA.get(module)
        owners = {normalized(d) for d in distributions.get(missing.split(".")[0], [missing])}
        assert extra and owners & set(groups[extra]), (
            f"{module} misses {missing} after pip install ."
        )
