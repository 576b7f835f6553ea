"""Figures for the book, one helper per kind of figure (all chapters).

Each helper draws on a matplotlib ``Axes`` (a new figure if none is given) and returns it, so a
chapter cell stays one line and every chapter's figures look alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm
from matplotlib.ticker import FuncFormatter


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


def trellis(
    words: Sequence[str],
    tags: Sequence[str],
    scores: np.ndarray,
    backptr: np.ndarray,
    path: Sequence[int],
    ax: Axes | None = None,
) -> Axes:
    """The Viterbi trellis: one column per word, one row per tag, the best path highlighted.

    ``scores[t, j]`` (shape ``(T, N)``) is written in the node of word ``t`` and tag ``j``, usually
    the Viterbi probability delta_t(j); nodes with score 0 are drawn grey. ``backptr[t, j]`` is the
    tag of word ``t - 1`` that node ``(t, j)`` points back to (row 0 unused): an arrow is drawn for
    every node with a non-zero score. ``path`` (one tag index per word) is drawn in red.
    """
    scores = np.asarray(scores, dtype=float)
    T, N = scores.shape
    ax = _axes(ax, (2.3 * T + 1.2, 0.9 * N + 1.0))
    on_path = {(t, j) for t, j in enumerate(path)}
    for t in range(1, T):
        for j in range(N):
            if scores[t, j] > 0:
                i = int(backptr[t, j])
                best = (t, j) in on_path and path[t - 1] == i
                ax.annotate(
                    "",
                    xy=(t - 0.33, -j),
                    xytext=(t - 1 + 0.33, -i),
                    arrowprops=dict(
                        arrowstyle="-|>",
                        color="C3" if best else "0.55",
                        lw=2.5 if best else 1.0,
                        shrinkA=0,
                        shrinkB=0,
                    ),
                    zorder=3 if best else 1,
                )
    for t in range(T):
        for j in range(N):
            best = (t, j) in on_path
            zero = scores[t, j] == 0
            ax.text(
                t,
                -j,
                "0" if zero else f"{scores[t, j]:.3g}",
                ha="center",
                va="center",
                fontsize=10,
                color="0.6" if zero else "black",
                fontweight="bold" if best else "normal",
                bbox=dict(
                    boxstyle="round,pad=0.35",
                    facecolor="#fde0dc" if best else ("0.95" if zero else "white"),
                    edgecolor="C3" if best else "0.6",
                    lw=2.0 if best else 0.8,
                ),
                zorder=4,
            )
    ax.set_xticks(range(T), words, fontsize=11)
    ax.xaxis.tick_top()
    ax.set_yticks([-j for j in range(N)], tags, fontsize=11)
    ax.set_xlim(-0.5, T - 0.5)
    ax.set_ylim(-N + 0.5, 0.5)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    return ax


def confusion_matrix(
    gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str], ax: Axes | None = None
) -> Axes:
    """The tagging errors as a matrix: row = gold tag, column = predicted tag, diagonal left out.

    Each off-diagonal cell shows how many tokens of the row's tag were tagged as the column's tag,
    with a logarithmic colour scale; the row labels give each tag's error rate.
    """
    index = {label: k for k, label in enumerate(labels)}
    counts = np.zeros((len(labels), len(labels)), dtype=int)  # (N, N)
    for g, p in zip(gold, predicted, strict=True):
        counts[index[g], index[p]] += 1
    errors = counts.astype(float)  # (N, N)
    np.fill_diagonal(errors, np.nan)
    errors[errors == 0] = np.nan
    ax = _axes(ax, (0.55 * len(labels) + 2.5, 0.5 * len(labels) + 1.5))
    vmax = np.nanmax(errors) if np.isfinite(errors).any() else 1.0
    image = ax.imshow(errors, cmap="Reds", norm=LogNorm(1, vmax))
    for i in range(len(labels)):
        for j in range(len(labels)):
            if i != j and counts[i, j] > 0:
                dark = counts[i, j] > vmax**0.6
                ax.text(
                    j,
                    i,
                    str(counts[i, j]),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if dark else "black",
                )
    rates = 1 - np.diag(counts) / np.maximum(counts.sum(axis=1), 1)  # (N,)
    ax.set_xticks(range(len(labels)), labels, rotation=90)
    row_labels = [f"{lab} ({r:.1%})" for lab, r in zip(labels, rates, strict=True)]
    ax.set_yticks(range(len(labels)), row_labels)
    ax.set_xlabel("predicted tag")
    ax.set_ylabel("gold tag (its error rate)")
    ax.figure.colorbar(image, ax=ax, label="tokens (log scale)", shrink=0.8)
    return ax


def curve(
    x: Sequence[float], y: Sequence[float], xlabel: str, ylabel: str, ax: Axes | None = None
) -> Axes:
    """A plain line with a marker at each point, e.g. the log likelihood per EM iteration."""
    ax = _axes(ax, (5.0, 3.2))
    ax.plot(x, y, marker="o", markersize=4)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return ax


def gradient_norms(norms: dict[str, Sequence[float]], ax: Axes | None = None) -> Axes:
    """How far a gradient survives back in time: ``||dh_T/dh_k||`` (log scale) against ``T - k``.

    ``norms`` maps a model's name to its array ``norms[k]`` for k = 0..T (as returned by
    ``nlpcourse.rnn.hidden_state_jacobian_norms``); one line per model. A norm that falls like a
    straight line on this plot shrinks geometrically with the distance: a vanishing gradient.
    """
    ax = _axes(ax, (8.0, 4.0))
    for name, values in norms.items():
        values = np.asarray(values, dtype=float)  # (T+1,): index k
        distance = len(values) - 1 - np.arange(len(values))  # T - k
        ax.plot(distance, values, label=name)
    ax.set_yscale("log")
    ax.axhline(1.0, color="0.5", lw=0.8, ls=":")
    ax.set_xlabel("distance back in time  T − k  (steps)")
    ax.set_ylabel("‖∂h_T / ∂h_k‖  (spectral norm, log scale)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return ax


def _log_minor_label(ax: Axes, value: float) -> str:
    """The label of a minor tick on a log-scaled y axis: 2, 3 and 5 times each power of ten, or
    every minor tick when the axis shows no power of ten at all (then matplotlib puts its minor
    ticks at round linear steps, 110, 120, ..., and they are the only ticks a reader can read)."""
    low, high = sorted(ax.get_ylim())
    if value <= 0 or low <= 0:
        return ""
    powers_shown = math.floor(math.log10(high)) - math.ceil(math.log10(low)) + 1
    mantissa = value / 10 ** math.floor(math.log10(value))
    if powers_shown < 1 or any(math.isclose(mantissa, m) for m in (2, 3, 5)):
        return f"{value:g}"
    return ""


def learning_curves(
    histories: dict[str, dict[str, Sequence[float]]],
    references: dict[str, float] | None = None,
    x: str = "step",
    ax: Axes | None = None,
) -> Axes:
    """Validation perplexity (log scale) during training, one line per model.

    ``histories`` maps a model's name to the dictionary returned by ``nlpcourse.lm.train_lm``
    (``x``, ``"step"`` or ``"words"``, on the horizontal axis; ``"valid_ppl"`` on the vertical
    one). ``references`` maps a label to a perplexity drawn as a dashed horizontal line, e.g. an
    n-gram model's perplexity on the same validation text.
    """
    ax = _axes(ax)
    for name, history in histories.items():
        ax.plot(history[x], history["valid_ppl"], marker="o", markersize=4, label=name)
    for k, (label, value) in enumerate((references or {}).items()):
        ax.axhline(value, color=f"C{k + len(histories)}", ls="--", lw=1.2, label=label)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: _log_minor_label(ax, v)))
    ax.set_xlabel(
        {"step": "training step (parameter updates)", "words": "training words"}.get(x, x)
    )
    ax.set_ylabel("validation perplexity (log scale)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return ax


def lstm_cell_diagram(ax: Axes | None = None) -> Axes:
    """The LSTM cell (eqs. lstm-gates, lstm-c, lstm-h of chapter 4) as boxes and arrows.

    The cell-state path ``c_{t-1} -> x f_t -> + i_t g_t -> c_t`` runs along the top, drawn
    thick and red: on it the state is only multiplied by the forget gate and added to, which is
    why a gradient can travel along it. The four gates read ``h_{t-1}`` and ``x_t`` from the
    line along the bottom.
    """
    ax = _axes(ax, (8.0, 4.6))
    red, grey = "C3", "0.25"

    def arrow(points, color=grey, lw=1.4, shrink=12):
        xs, ys = zip(*points, strict=True)
        if len(points) > 2:
            ax.plot(xs[:-1], ys[:-1], color=color, lw=lw, solid_capstyle="butt", zorder=1)
        ax.annotate(
            "",
            xy=points[-1],
            xytext=points[-2],
            arrowprops=dict(arrowstyle="-|>", color=color, lw=lw, shrinkA=0, shrinkB=shrink),
            zorder=1,
        )

    def node(xy, text, color=grey):
        ax.text(
            *xy,
            text,
            ha="center",
            va="center",
            fontsize=13,
            zorder=3,
            bbox=dict(boxstyle="circle,pad=0.15", facecolor="white", edgecolor=color, lw=1.4),
        )

    def gate(xy, name, activation, color):
        ax.text(
            *xy,
            f"{name}\n{activation}",
            ha="center",
            va="center",
            fontsize=12,
            zorder=3,
            bbox=dict(boxstyle="round,pad=0.4", facecolor=color, edgecolor=grey, lw=1.0),
        )

    top, bus, gates = 5.0, 0.8, 2.2
    # the cell state path, highlighted
    arrow([(0.2, top), (2.5, top)], red, 3.0)
    arrow([(2.5, top), (4.6, top)], red, 3.0)
    arrow([(4.6, top), (9.6, top)], red, 3.0)
    node((2.5, top), "×", red)
    node((4.6, top), "+", red)
    ax.text(0.1, top + 0.35, "$c_{t-1}$", fontsize=13, color=red)
    ax.text(9.2, top + 0.35, "$c_t$", fontsize=13, color=red)
    # the input line [h_{t-1}, x_t] feeding the four gates
    ax.plot([0.2, 7.0], [bus, bus], color=grey, lw=1.4, zorder=1)
    ax.text(0.1, bus - 0.45, "$h_{t-1}$", fontsize=13)
    arrow([(1.3, -0.3), (1.3, bus)], shrink=0)
    ax.text(1.45, -0.35, "$x_t$", fontsize=13)
    for x, name, activation, colour in [
        (2.5, "$f_t$", "σ", "#fde0dc"),
        (3.9, "$i_t$", "σ", "#dbe9f6"),
        (5.3, "$g_t$", "tanh", "#e2f0d9"),
        (7.0, "$o_t$", "σ", "#fff2cc"),
    ]:
        arrow([(x, bus), (x, gates)])
        gate((x, gates), name, activation, colour)
    # forget gate scales the old state; input gate times candidate is added
    arrow([(2.5, gates), (2.5, top)])
    node((4.6, 3.6), "×")
    arrow([(3.9, gates), (3.9, 3.6), (4.6, 3.6)])
    arrow([(5.3, gates), (5.3, 3.6), (4.6, 3.6)])
    arrow([(4.6, 3.6), (4.6, top)])
    # output: h_t = o_t * tanh(c_t)
    arrow([(8.2, top), (8.2, 4.1)])
    ax.text(
        8.2,
        4.1,
        "tanh",
        ha="center",
        va="center",
        fontsize=11,
        zorder=3,
        bbox=dict(boxstyle="round,pad=0.3", facecolor="white", edgecolor=grey),
    )
    arrow([(8.2, 4.1), (8.2, 3.0)])
    node((8.2, 3.0), "×")
    arrow([(7.0, gates), (7.0, 3.0), (8.2, 3.0)])
    arrow([(8.2, 3.0), (9.6, 3.0)])
    ax.text(9.2, 3.2, "$h_t$", fontsize=13)
    ax.set_xlim(-0.1, 9.9)
    ax.set_ylim(-0.6, 5.7)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


# ------------------------------------------------------------------- chapter 3: parsing


def parse_tree(tree, ax: Axes | None = None, title: str = "") -> Axes:
    """A constituency tree (``nlpcourse.parsing.Tree``) drawn top-down, the words on one line.

    Each word gets a column; a node sits above the middle of its children, one level per depth,
    and the words all sit on the bottom line, under their preterminals."""
    leaves = tree.leaves()
    depth = tree.depth()
    ax = _axes(ax, (max(3.0, 0.9 * len(leaves) + 0.6), 0.55 * depth + 0.9))
    column = iter(range(len(leaves)))

    def place(node, level: int) -> float:
        xs = []
        for child in node.children:
            if isinstance(child, str):
                x = float(next(column))
                ax.text(x, -depth, child, ha="center", va="center", fontsize=10, style="italic")
                ax.plot([x, x], [-level - 0.25, -depth + 0.25], color="0.6", lw=0.8)
                xs.append(x)
            else:
                xs.append(place(child, level + 1))
        x = float(np.mean(xs))
        for child_x, child in zip(xs, node.children, strict=True):
            if not isinstance(child, str):
                ax.plot([x, child_x], [-level - 0.25, -level - 0.75], color="0.3", lw=1.0)
        ax.text(
            x,
            -level,
            node.label,
            ha="center",
            va="center",
            fontsize=10,
            bbox=dict(boxstyle="round,pad=0.25", facecolor="#e8eef7", edgecolor="0.5", lw=0.6),
        )
        return x

    place(tree, 0)
    ax.set_xlim(-0.6, len(leaves) - 0.4)
    ax.set_ylim(-depth - 0.5, 0.5)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def cky_chart(
    table: dict[tuple[int, int], Sequence[str]], words: Sequence[str], ax: Axes | None = None
) -> Axes:
    """The CKY chart as the book draws it: cell ``(i, j)`` (row ``i``, column ``j``) lists the
    nonterminals that derive words ``i+1 .. j``; the whole sentence is the top-right cell."""
    n = len(words)
    ax = _axes(ax, (1.25 * n + 0.8, 0.8 * n + 0.8))
    for i in range(n):
        for j in range(i + 1, n + 1):
            labels = table.get((i, j), [])
            whole = (i, j) == (0, n)
            ax.add_patch(
                plt.Rectangle(
                    (j - 1, -i - 1),
                    1,
                    1,
                    facecolor="#fde9c9" if whole else ("#e8eef7" if labels else "white"),
                    edgecolor="0.4",
                    lw=0.8,
                )
            )
            text = "\n".join(labels) if labels else "∅"
            ax.text(j - 0.5, -i - 0.5, text, ha="center", va="center", fontsize=9)
            ax.text(j - 0.95, -i - 0.08, f"[{i},{j}]", ha="left", va="top", fontsize=6, color="0.5")
    for j, word in enumerate(words, start=1):
        ax.text(j - 0.5, 0.25, word, ha="center", va="bottom", fontsize=10, style="italic")
    ax.set_xlim(-0.1, n + 0.1)
    ax.set_ylim(-n - 0.1, 0.8)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


def loglog_growth(
    x: Sequence[float],
    series: dict[str, Sequence[float]],
    xlabel: str,
    ylabel: str,
    slopes: dict[str, float] | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Several measured series against ``x`` on log-log axes (a power law is a straight line),
    each labelled with its fitted slope if ``slopes`` gives one; missing values (nan) are left
    out."""
    ax = _axes(ax, (5.6, 3.6))
    for name, ys in series.items():
        xs_ys = [(a, b) for a, b in zip(x, ys, strict=True) if b == b and b > 0]
        label = f"{name} (slope {slopes[name]:.1f})" if slopes and name in slopes else name
        ax.plot(*zip(*xs_ys, strict=True), marker="o", markersize=4, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax


def attention_map(
    weights: Sequence[Sequence[float]],
    letters: Sequence[str],
    phones: Sequence[str],
    title: str = "",
    ax: Axes | None = None,
) -> Axes:
    """Attention weights of one word (chapter 5) as a heat map: one row per output phone (the
    last one ``</s>``), one column per input letter; darker is more weight, each row sums to 1."""
    A = np.asarray(weights, dtype=float)  # (T, S)
    ax = _axes(ax, (0.42 * A.shape[1] + 1.2, 0.34 * A.shape[0] + 1.0))
    ax.imshow(A, cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(A.shape[1]), list(letters)[: A.shape[1]], fontsize=9)
    ax.set_yticks(range(A.shape[0]), list(phones)[: A.shape[0]], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_title(title, fontsize=9, pad=18 if title else 6)
    return ax


def rate_by_length(
    lengths: Sequence[int],
    series: dict[str, Sequence[float]],
    ylabel: str = "word error rate",
    counts: Sequence[int] | None = None,
    ax: Axes | None = None,
) -> Axes:
    """A rate (e.g. word error rate, chapter 5) against input length, one line per model; with
    ``counts`` the number of words behind each point is written on the horizontal axis."""
    ax = _axes(ax, (6.0, 3.6))
    for name, ys in series.items():
        ax.plot(lengths, ys, marker="o", markersize=4, label=name)
    ax.set_xticks(list(lengths))
    if counts is not None:
        ax.set_xticklabels([f"{n}\n({c})" for n, c in zip(lengths, counts, strict=True)])
        ax.set_xlabel("word length in letters (number of test words)")
    else:
        ax.set_xlabel("word length in letters")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return ax


# ----------------------------------------------------------------- chapter 6: the transformer


def attention_head_map(
    weights: np.ndarray,
    queries: Sequence[str],
    keys: Sequence[str],
    title: str = "",
    ax: Axes | None = None,
) -> Axes:
    """One attention map: ``weights[i, j]`` (rows: queries, columns: keys) as a heat map with the
    words on the axes; masked (zero) weights show white."""
    ax = _axes(ax, (0.45 * len(keys) + 1.6, 0.45 * len(queries) + 1.0))
    ax.imshow(np.asarray(weights, dtype=float), cmap="Blues", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(keys)), keys, rotation=90, fontsize=8)
    ax.set_yticks(range(len(queries)), queries, fontsize=8)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title, fontsize=9)
    return ax


def attention_heads(
    weights: np.ndarray, queries: Sequence[str], keys: Sequence[str], suptitle: str = ""
) -> plt.Figure:
    """The maps of several heads side by side, ``weights`` (H, T_q, T_k), two rows of heads;
    returns the figure."""
    weights = np.asarray(weights, dtype=float)
    H = weights.shape[0]
    cols = math.ceil(H / 2) if H > 1 else 1
    rows = 2 if H > 1 else 1
    fig, axes = plt.subplots(
        rows, cols, figsize=(2.3 * cols + 0.8, 2.3 * rows + 0.9), layout="constrained"
    )
    for h, ax in enumerate(np.ravel(axes)):
        if h >= H:
            ax.axis("off")
            continue
        ax.imshow(weights[h], cmap="Blues", vmin=0.0, vmax=1.0)
        ax.set_title(f"head {h + 1}", fontsize=9)
        first_col, last_row = h % cols == 0, h // cols == rows - 1
        ax.set_yticks(range(len(queries)), queries if first_col else [], fontsize=8)
        ax.set_xticks(range(len(keys)), keys if last_row else [], rotation=90, fontsize=8)
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    return fig


def masks(panels: dict[str, np.ndarray], words: Sequence[str]) -> plt.Figure:
    """Boolean masks side by side (dark: may attend, light: masked), rows queries, columns keys."""
    fig, axes = plt.subplots(
        1, len(panels), figsize=(2.9 * len(panels), 3.1), layout="constrained", squeeze=False
    )
    for ax, (title, mask) in zip(axes[0], panels.items(), strict=True):
        mask = np.asarray(mask, dtype=float)
        ax.imshow(mask, cmap="Greys", vmin=-0.3, vmax=1.3)
        for i, j in np.ndindex(mask.shape):
            label, color = ("✓", "white") if mask[i, j] else ("−∞", "0.3")
            ax.text(j, i, label, ha="center", va="center", fontsize=6, color=color)
        ax.set_xticks(range(mask.shape[1]), list(words)[: mask.shape[1]], rotation=90, fontsize=7)
        ax.set_yticks(range(mask.shape[0]), list(words)[: mask.shape[0]], fontsize=7)
        ax.set_title(title, fontsize=9)
    return fig


def positional_encodings(pe: np.ndarray, ax: Axes | None = None) -> Axes:
    """The sinusoidal encodings (T, D) as a heat map: position down, feature across."""
    ax = _axes(ax, (7.0, 3.4))
    image = ax.imshow(np.asarray(pe, dtype=float), cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
    ax.set_xlabel("feature d (even: sin, odd: cos; frequency falls to the right)")
    ax.set_ylabel("position t")
    ax.figure.colorbar(image, ax=ax, shrink=0.8)
    return ax


def heads_beside_single(
    heads: Sequence[np.ndarray],
    single: Sequence[np.ndarray],
    keys: Sequence[Sequence[str]],
    queries: Sequence[Sequence[str]],
    single_queries: Sequence[Sequence[str]],
    titles: Sequence[str],
    single_title: str = "one head",
) -> plt.Figure:
    """Per-head attention maps beside a single-head map of the same inputs (chapter 6: the
    transformer's cross-attention heads and chapter 5's attention, on the same words): one row
    per input, ``heads[r]`` (H, T, S) in the first H panels, ``single[r]`` (T', S) in the last;
    rows are outputs (``queries``), columns the input symbols (``keys``)."""
    H = np.asarray(heads[0]).shape[0]
    rows = len(heads)
    fig, axes = plt.subplots(
        rows, H + 1, figsize=(1.9 * (H + 1) + 0.8, 2.2 * rows + 0.6), layout="constrained",
        squeeze=False,
    )  # fmt: skip
    for r in range(rows):
        maps = [np.asarray(h, dtype=float) for h in heads[r]] + [np.asarray(single[r], float)]
        labels = [queries[r]] * H + [single_queries[r]]
        for c, (ax, A, rows_labels) in enumerate(zip(axes[r], maps, labels, strict=True)):
            ax.imshow(A, cmap="Greys" if c == H else "Blues", vmin=0.0, vmax=1.0, aspect="auto")
            ax.set_xticks(range(A.shape[1]), list(keys[r])[: A.shape[1]], fontsize=7)
            ax.set_yticks(range(A.shape[0]), list(rows_labels)[: A.shape[0]], fontsize=6)
            ax.xaxis.tick_top()
            name = single_title if c == H else f"head {c + 1}"
            ax.set_title(f"{titles[r]}: {name}" if c == 0 else name, fontsize=8)
    return fig
