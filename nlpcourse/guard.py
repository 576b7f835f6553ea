"""Switching the reference implementation off while a student's code is checked.

The exercise checks in :mod:`nlpcourse.checks` compare a student's function with the course's own
answer. A student could pass by simply calling the reference, so while a check runs the student's
code (inside :func:`reference_switched_off`), every function marked with :func:`reference` refuses
to run and raises :class:`ReferenceUsedError`, which the check turns into a message the student can
act on.

How. :func:`reference` does not wrap: it records the function in a registry and returns the very
same function, so ``inspect.getsource(nlpcourse.hmm.viterbi)`` and Jupyter's ``??`` show the
algorithm. On entering :func:`reference_switched_off`, the code object of every registered function
(``func.__code__``) is swapped for one that raises :class:`ReferenceUsedError`, with the same name
and the same free variables; on leaving, the original code is put back. Because the function
object itself changes, every way of reaching it is switched off at once: a direct call, a name
imported or saved before the check (``my_viterbi = viterbi``), a closure or a ``functools.partial``
holding it, a bound method (``NGramLM.fit``). A function registered while the switch is off (a
module re-executed by ``importlib.reload`` inside the student's function) is switched off at once.

Not only the marked functions. While the switch is off, *every* function of the package's
modules that are loaded (public and private, methods, static and class methods and properties of
their classes included) refuses the same way, found by walking the modules, so that a helper that
is not marked (``kn_prob``, ``align``, a method of a class) answers no more than the reference,
and a function added to a chapter is covered without anyone listing it (issue 40 section 2). Left
working: this module, the checks (:mod:`nlpcourse.checks`, whose objects a check hands to the
student's function, a table model or a tagger) and the inputs (:data:`INPUT_MODULES`: the worked
examples and the corpus loaders, which the notebooks' setup cells and students' cells use; no part
grades them).

What stays open inside one process: functions of a module first imported or re-executed while the
switch is off and not marked (the marked ones refuse at once, see above), closures the package made
before the check, compiled functions (numba's), and a submission that builds a new function from a
code object it saved before the check (``types.FunctionType(code, globals())``), that executes a
copy of the package's source with the decorator removed, that reads the saved originals out of this
module, or that puts the code back itself. Inside one Python process these cannot be prevented,
only made deliberate: none of them is an honest slip. The sandboxed class grader
(``autograder/sandbox.py``, the design's "Grading") closes them: student code runs in a separate
worker that imports a copy of the package in which every function but those the setup cells use has
no body but a ``raise`` of :class:`ReferenceUsedError` (``autograder/student_view.py``), so no code
object, source file or saved original of the reference exists where the student's code runs.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

F = TypeVar("F", bound=Callable)

_switched_off = 0  # how many nested `reference_switched_off` blocks are open
# id(function) -> (the function, its own code, the code that refuses)
_registry: dict[int, tuple[types.FunctionType, types.CodeType, types.CodeType]] = {}
# the package's other functions: id -> (the function, its own code, the code that refuses)
_package: dict[int, tuple[types.FunctionType, types.CodeType, types.CodeType]] = {}
_found: dict[str, tuple[int, int, list[types.FunctionType]]] = {}  # module -> its functions
_off: list[tuple[types.FunctionType, types.CodeType]] = []  # switched off now, with their code
_modules_key = -1  # len(sys.modules) when the package's modules were last listed
_modules: list[tuple[str, types.ModuleType]] = []  # the modules listed then
_plan_key: list[tuple[int, int]] = []  # the modules (id, number of names) the plan was made for
_plan_list: list[tuple[types.FunctionType, types.CodeType]] = []
# The modules of the inputs: the book's worked examples and the corpus loaders, which the
# notebooks' setup cells and the students' own cells use as the book does (loading Brown), and
# which no part grades. The student view keeps them whole too (autograder/student_view.py).
INPUT_MODULES = ("nlpcourse.examples", "nlpcourse.data")
LEFT_WORKING = ("nlpcourse.guard", "nlpcourse.checks", *INPUT_MODULES)  # and their submodules


class ReferenceUsedError(RuntimeError):
    """Raised when a reference function is called while a student's function is being checked."""


def refusal(qualname: str) -> ReferenceUsedError:
    """The error a switched-off reference function raises (called by the swapped-in code)."""
    return ReferenceUsedError(
        f"{qualname} was called while your function was being checked. This exercise asks you "
        "to write the computation yourself: the reference implementation is switched off during "
        "the check."
    )


def _refusing_code(func: types.FunctionType) -> types.CodeType:
    """A code object that raises :func:`refusal` for ``func``, with the same free variables.

    A function's ``__code__`` can only be replaced by code with as many free variables as the
    function has closure cells (a method that uses ``super()`` has one, ``__class__``), so the
    code is compiled inside an outer function that defines those names. It runs with the
    function's own globals, so it reaches this module through ``__import__``."""
    code = func.__code__
    free = code.co_freevars
    qualname = f"{func.__module__}.{func.__qualname__}"
    lines = ["def _outer():"]
    lines += [f"    {name} = None" for name in free]
    lines.append(f"    def {code.co_name}(*args, **kwargs):")
    if free:  # mention the names so that they become free variables of the inner function
        lines.append("        if False:")
        lines.append(f"            {', '.join(free)}")
    lines.append(
        f"        raise __import__('nlpcourse.guard', fromlist=['_']).refusal({qualname!r})"
    )
    lines.append(f"    return {code.co_name}")
    namespace: dict = {}
    exec(compile("\n".join(lines), code.co_filename, "exec"), namespace)
    refusing = namespace["_outer"]().__code__
    assert refusing.co_freevars == free, (refusing.co_freevars, free)
    return refusing


def reference(func: F) -> F:
    """Mark ``func`` as a reference implementation that refuses to run during a check.

    Returns ``func`` itself, unchanged (see the module docstring)."""
    if not isinstance(func, types.FunctionType):
        raise TypeError(f"@reference marks plain functions, got {type(func).__name__}")
    _registry[id(func)] = (func, func.__code__, _refusing_code(func))
    if _switched_off:  # registered during a check (e.g. importlib.reload): off at once
        func.__code__ = _registry[id(func)][2]
    return func


def is_reference(func: Callable) -> bool:
    """Whether ``func`` is registered with :func:`reference`."""
    entry = _registry.get(id(func))
    return entry is not None and entry[0] is func


def _functions_in(value: object, module: str, depth: int = 0) -> Iterator[types.FunctionType]:
    """The functions defined in ``module`` that ``value`` is or holds (a class's methods, its
    static and class methods, its properties' functions, its nested classes)."""
    if isinstance(value, types.FunctionType):
        if value.__module__ == module:
            yield value
    elif isinstance(value, staticmethod | classmethod):
        yield from _functions_in(value.__func__, module, depth)
    elif isinstance(value, property):
        for part in (value.fget, value.fset, value.fdel):
            yield from _functions_in(part, module, depth)
    elif isinstance(getattr(value, "__wrapped__", None), types.FunctionType):  # functools.cache
        yield from _functions_in(getattr(value, "__wrapped__"), module, depth)  # noqa: B009
    elif isinstance(value, type) and value.__module__ == module and depth < 8:
        for item in list(vars(value).values()):
            yield from _functions_in(item, module, depth + 1)


def _package_modules() -> list[tuple[str, types.ModuleType]]:
    """The package's loaded modules but those of :data:`LEFT_WORKING` (looked for again only
    when the number of loaded modules changes)."""
    global _modules_key, _modules
    if _modules_key != len(sys.modules):
        _modules = [
            (name, module)
            for name, module in list(sys.modules.items())
            if (name == "nlpcourse" or name.startswith("nlpcourse."))
            and isinstance(module, types.ModuleType)
            and not any(name == kept or name.startswith(kept + ".") for kept in LEFT_WORKING)
        ]
        _modules_key = len(sys.modules)
    return _modules


def package_functions() -> list[types.FunctionType]:
    """Every function of the package's loaded modules but those of :data:`LEFT_WORKING` (a
    module's list is found again only when the module or its names change)."""
    functions = []
    for name, module in _package_modules():
        names = vars(module)
        known = _found.get(name)
        if known is None or known[0] != id(module) or known[1] != len(names):
            found = [f for value in list(names.values()) for f in _functions_in(value, name)]
            known = _found[name] = (id(module), len(names), found)
        functions += known[2]
    return functions


def _plan() -> list[tuple[types.FunctionType, types.CodeType]]:
    """Each function to switch off besides the marked ones, with the code that refuses (made once
    per function; the list is made again only when the modules or their names change)."""
    global _plan_key, _plan_list
    key = [(id(module), len(vars(module))) for _, module in _package_modules()]
    if key != _plan_key:
        plan = []
        for func in package_functions():
            if is_reference(func):
                continue  # marked: switched off with the registry
            entry = _package.get(id(func))
            if entry is None or entry[0] is not func:
                entry = _package[id(func)] = (func, func.__code__, _refusing_code(func))
            plan.append((func, entry[2]))
        _plan_key, _plan_list = key, plan
    return _plan_list


def _switch_off() -> None:
    for func, _, refusing in list(_registry.values()):
        func.__code__ = refusing
    for func, refusing in _plan():
        code = func.__code__
        if code is not refusing:
            _off.append((func, code))
            func.__code__ = refusing


def _switch_on() -> None:
    for func, code, _ in list(_registry.values()):
        func.__code__ = code
    while _off:
        func, code = _off.pop()
        func.__code__ = code


@contextmanager
def reference_switched_off() -> Iterator[None]:
    """Inside this block, every function marked with :func:`reference`, and every other function
    of the package's loaded modules but those of :data:`LEFT_WORKING`, raises."""
    global _switched_off
    if _switched_off == 0:
        _switch_off()
    _switched_off += 1
    try:
        yield
    finally:
        _switched_off -= 1
        if _switched_off == 0:
            _switch_on()
