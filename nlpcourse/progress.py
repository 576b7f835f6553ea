"""A plain progress bar on stderr, for the package's long training commands."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def progress(iterable: Iterable[T], total: int | None = None, desc: str = "") -> Iterator[T]:
    """``iterable`` with a progress bar on stderr (tqdm's, which the book's requirements already
    install), redrawn at most every 2 seconds."""
    from tqdm import tqdm

    return iter(tqdm(iterable, total=total, desc=desc, file=sys.stderr, mininterval=2.0))
