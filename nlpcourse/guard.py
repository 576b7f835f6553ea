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

What stays open inside one process: a submission that builds a new function from a code object it
saved before the check (``types.FunctionType(code, globals())``), that executes a copy of the
package's source with the decorator removed, that reads the saved originals out of this module,
or that puts the code back itself. Inside one Python process these cannot be prevented, only made
deliberate: none of them is an honest slip. The sandboxed class grader (``autograder/sandbox.py``,
the design's "Grading") closes them: student code runs in a separate worker that imports a copy
of the package in which every function marked here has no body but a ``raise`` of
:class:`ReferenceUsedError` (``autograder/student_view.py``), so no code object, source file or
saved original of the reference exists where the student's code runs.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

F = TypeVar("F", bound=Callable)

_switched_off = 0  # how many nested `reference_switched_off` blocks are open
# id(function) -> (the function, its own code, the code that refuses)
_registry: dict[int, tuple[types.FunctionType, types.CodeType, types.CodeType]] = {}


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


def _switch_off() -> None:
    for func, _, refusing in list(_registry.values()):
        func.__code__ = refusing


def _switch_on() -> None:
    for func, code, _ in list(_registry.values()):
        func.__code__ = code


@contextmanager
def reference_switched_off() -> Iterator[None]:
    """Inside this block, every function marked with :func:`reference` raises."""
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
