"""Tests of nlpcourse.compiled: numba's compiler as the package's compiled twins use it."""

import numpy as np
import pytest


def test_the_compiled_loops_run_where_numba_can_cache_nowhere(monkeypatch):
    # a read-only install with a read-only home: numba finds no folder to cache in, and
    # numba.njit(cache=True) raised at import, so no corpus scoring could run
    import numba
    from numba.core import caching

    from nlpcourse.compiled import njit_cached

    monkeypatch.setattr(caching.CacheImpl, "_locator_classes", [])

    def twice(x):
        return 2 * x

    with pytest.raises(RuntimeError, match="cannot cache"):
        numba.njit(cache=True)(twice)  # what the situation does to numba itself
    assert njit_cached(twice)(21) == 42
    assert njit_cached(twice)(np.arange(3)).tolist() == [0, 2, 4]
