"""Switching the reference implementation off while a student's code is checked.

The exercise checks in :mod:`nlpcourse.checks` compare a student's function with the reference
function of the same name. A student could pass by simply calling the reference, so while a check
runs the student's code, every reference function marked with :func:`reference` refuses to run and
raises :class:`ReferenceUsedError`, which the check turns into a message the student can act on.

The check computes its expected values first, with the reference switched on, and only then calls
the student's function inside :func:`reference_switched_off`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

F = TypeVar("F", bound=Callable)

_switched_off = 0  # how many nested `reference_switched_off` blocks are open


class ReferenceUsedError(RuntimeError):
    """Raised when a reference function is called while a student's function is being checked."""


def reference(func: F) -> F:
    """Mark ``func`` as a reference implementation that refuses to run during a check."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if _switched_off:
            raise ReferenceUsedError(
                f"{func.__module__}.{func.__qualname__} was called while your function was being "
                "checked. This exercise asks you to write the computation yourself: the reference "
                "implementation is switched off during the check."
            )
        return func(*args, **kwargs)

    # functools.wraps leaves the original at ``wrapper.__wrapped__``, a way around the switch;
    # keep the signature for help() but drop the way around.
    wrapper.__signature__ = inspect.signature(func)  # type: ignore[attr-defined]
    del wrapper.__wrapped__  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


@contextmanager
def reference_switched_off() -> Iterator[None]:
    """Inside this block, every function marked with :func:`reference` raises."""
    global _switched_off
    _switched_off += 1
    try:
        yield
    finally:
        _switched_off -= 1
