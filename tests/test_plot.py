"""nlpcourse.plot: what a reader can read off a figure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from nlpcourse import plot  # noqa: E402


def y_labels(ax) -> dict[float, str]:
    """``{tick value: its label}`` for every labelled tick, major and minor, inside the y range."""
    ax.figure.canvas.draw()
    low, high = ax.get_ylim()
    labels = {}
    for ticks in (ax.yaxis.get_major_ticks(), ax.yaxis.get_minor_ticks()):
        for tick in ticks:
            value, text = tick.get_loc(), tick.label1.get_text()
            if low <= value <= high and text:
                labels[value] = text
    return labels


@pytest.mark.parametrize(
    "curve",
    [[182.0, 150.0, 131.0, 118.0], [190.0, 160.0, 141.0, 137.5]],  # the long runs' range
)
def test_learning_curves_label_the_values_the_curve_ends_at(curve):
    """Issue 43 §1.11: between 110 and 190 the log axis has no power of ten; its ticks at 110,
    120, ... must all be labelled, not only those that round to 200 (150-180)."""
    ax = plot.learning_curves({"model": {"step": [1, 2, 3, 4], "valid_ppl": curve}})
    labels = y_labels(ax)
    plt.close(ax.figure)
    end = curve[-1]
    assert min(abs(value - end) for value in labels) <= 5, f"no label near {end}: {labels}"
    assert len(labels) >= 5, labels
    for value, text in labels.items():
        assert float(text) == pytest.approx(value), (value, text)


def test_learning_curves_over_decades_label_2_3_5():
    """Over several decades only the powers of ten and 2, 3, 5 times them are labelled."""
    ax = plot.learning_curves({"model": {"step": [1, 2, 3], "valid_ppl": [3000.0, 400.0, 60.0]}})
    labels = y_labels(ax)
    plt.close(ax.figure)
    assert {100.0, 200.0, 300.0, 500.0, 1000.0} <= set(labels), labels
    assert not {400.0, 600.0, 700.0, 800.0, 900.0} & set(labels), labels
