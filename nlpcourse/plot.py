"""Figures for the book, one helper per kind of figure (all chapters).

Each helper draws on a matplotlib ``Axes`` (a new figure if none is given) and returns it, so a
chapter cell stays one line and every chapter's figures look alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes


def _axes(ax: Axes | None, size: tuple[float, float] = (6.4, 4.0)) -> Axes:
    if ax is None:
        _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def perplexity_by_order(
    results: dict[str, Sequence[float]], orders: Sequence[int], ax: Axes | None = None
) -> Axes:
    """Test perplexity (log scale) against n-gram order, one line per smoothing method.

    Infinite perplexities (an unsmoothed model meeting an unseen n-gram) are left off the line
    and marked with the method's name at the top of the plot."""
    ax = _axes(ax)
    for method, values in results.items():
        finite = [(n, v) for n, v in zip(orders, values, strict=True) if math.isfinite(v)]
        line = ax.plot(*zip(*finite, strict=True), marker="o", label=method)[0] if finite else None
        for n, v in zip(orders, values, strict=True):
            if not math.isfinite(v):
                color = line.get_color() if line else "gray"
                ax.annotate(
                    "∞",
                    (n, 1),
                    xycoords=("data", "axes fraction"),
                    ha="center",
                    va="top",
                    color=color,
                    fontsize=14,
                )
    ax.set_yscale("log")
    ax.set_xticks(list(orders))
    ax.set_xlabel("order n")
    ax.set_ylabel("test perplexity (log scale)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return ax


def sweep(
    x: Sequence[float],
    y: Sequence[float],
    xlabel: str,
    ylabel: str,
    logx: bool = False,
    ax: Axes | None = None,
) -> Axes:
    """A hyperparameter sweep: ``y`` against ``x`` with the minimum marked."""
    ax = _axes(ax, (5.0, 3.2))
    ax.plot(x, y, marker="o")
    best = min(range(len(y)), key=lambda i: y[i])
    ax.plot(
        [x[best]],
        [y[best]],
        marker="*",
        markersize=14,
        color="C3",
        label=f"best: {xlabel} = {x[best]:g}",
    )
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return ax
