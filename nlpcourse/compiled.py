"""numba's compiler as the package's compiled twins use it (:mod:`nlpcourse.arpa_fast`).

:func:`njit_cached` compiles a function on its first call and keeps the machine code on disk, so
later processes on the machine skip the compiling (a second or two). numba keeps it in the
``__pycache__`` folder beside the module, or else in the user's cache folder; where neither can be
written (a read-only install, a container with a read-only home), ``numba.njit(cache=True)``
raises at import time. Then the function is compiled in each process instead: slower to start,
the same results.
"""

from __future__ import annotations

from collections.abc import Callable

import numba


def njit_cached(function: Callable) -> Callable:
    """``numba.njit(cache=True)(function)``, or ``numba.njit(function)`` where numba has no
    writable folder to cache it in."""
    try:
        return numba.njit(cache=True)(function)
    except RuntimeError as err:  # "cannot cache function ...: no locator available ..."
        if "cannot cache" not in str(err):
            raise
        return numba.njit(function)
