"""No tie decides a grade (issue 42, section 1).

For every visible and hidden case of every part whose answer is an argmax (greedy decoding, beam
search, the Viterbi path of an HMM, the best tree of Viterbi CKY), this file recomputes the
decisions that make the answer with its own plain loops (written here, sharing no code with the
reference or the checks) and fails when two options of one decision score within ``TIE`` of each
other: the argmax of every greedy step, every pruning boundary of the beam (the beam_size-th and
the next candidate), the final pick among the kept hypotheses, each back pointer along the best
tag path and its last tag, and each choice of rule and split point inside the best tree. A
statement that leaves the tie-break open cannot then grade one correct search right and another
wrong.
"""

import math

import numpy as np
import pytest
from checks_corpus import captured

import nlpcourse.checks.hmm as hmm_checks
import nlpcourse.checks.parsing as parsing_checks
import nlpcourse.checks.seq2seq as s2s_checks

TIE = 1e-12  # two scores closer than this are a tie
BOS, EOS = 1, 2


def _gap(scores) -> float:
    """The gap between the best and the second best of ``scores`` (inf with fewer than two
    finite ones)."""
    finite = sorted((s for s in scores if s > -math.inf), reverse=True)
    return finite[0] - finite[1] if len(finite) > 1 else math.inf


def _cases(module, name: str) -> list:
    return [
        (hidden, i, case)
        for hidden in (False, True)
        for run in captured(module, name, hidden)
        for i, case in enumerate(run["cases"])
    ]


def _row(step, y, state):
    logp, state = step(y, state)
    return [float(x) for x in np.asarray(logp, dtype=float)], state


def greedy_gaps(step, state, max_len) -> list[float]:
    gaps, y = [], BOS
    for _ in range(max_len):
        logp, state = _row(step, y, state)
        gaps.append(_gap(logp))
        y = max(range(len(logp)), key=logp.__getitem__)
        if y == EOS:
            break
    return gaps


def beam_gaps(step, state, K, L, alpha) -> list[tuple[str, float]]:
    """Each decision of the beam search the statement describes, with the gap at its boundary."""
    beam = [(0.0, [], state, False)]
    gaps = []
    for t in range(L):
        candidates = [h for h in beam if h[3]]
        for score, ys, s, ended in beam:
            if not ended:
                logp, s2 = _row(step, ys[-1] if ys else BOS, s)
                candidates += [
                    (score + lp, [*ys, v], s2, v == EOS)
                    for v, lp in enumerate(logp)
                    if lp > -math.inf
                ]
        candidates.sort(key=lambda h: -h[0])
        if len(candidates) > K:
            gaps.append((f"pruning at step {t}", candidates[K - 1][0] - candidates[K][0]))
        beam = candidates[:K]
        if all(h[3] for h in beam):
            break
    final = [h[0] / len(h[1]) ** alpha for h in beam]
    gaps.append(("the final pick", _gap(final)))
    return gaps


def viterbi_gaps(log_start, log_trans, log_emit) -> list[float]:
    """The last tag's and each back pointer's gap along the best path (a tie elsewhere in the
    trellis changes no answer)."""
    T, N = log_emit.shape
    delta = np.empty((T, N))
    delta[0] = log_start + log_emit[0]
    for t in range(1, T):
        for j in range(N):
            delta[t, j] = max(delta[t - 1, i] + log_trans[i, j] for i in range(N)) + log_emit[t, j]
    gaps = [_gap(delta[-1])]
    j = int(np.argmax(delta[-1]))
    for t in range(T - 1, 0, -1):
        options = [delta[t - 1, i] + log_trans[i, j] for i in range(N)]
        gaps.append(_gap(options))
        j = int(np.argmax(options))
    return gaps


def cky_gaps(rules, words) -> list[float]:
    """Each choice of rule and split point inside the best tree (binary rules and words only,
    as in the cases)."""
    n = len(words)
    best: dict = {}
    for i, w in enumerate(words):
        for lhs, rhs, lp in rules:
            if rhs == (w,):
                best[(i, i + 1, lhs)] = max(best.get((i, i + 1, lhs), -math.inf), lp)
    options: dict = {}
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length
            for lhs, rhs, lp in rules:
                if len(rhs) != 2:
                    continue
                for k in range(i + 1, j):
                    b, c = best.get((i, k, rhs[0])), best.get((k, j, rhs[1]))
                    if b is not None and c is not None:
                        options.setdefault((i, j, lhs), []).append((lp + b + c, k, rhs))
            for (a, b_, lhs), opts in list(options.items()):
                if (a, b_) == (i, j):
                    best[(i, j, lhs)] = max(o[0] for o in opts)
    gaps = []
    todo = [(0, n, "S")] if (0, n, "S") in best else []
    while todo:
        i, j, lhs = todo.pop()
        if j - i == 1:
            continue
        opts = options[(i, j, lhs)]
        gaps.append(_gap([o[0] for o in opts]))
        _, k, rhs = max(opts)
        todo += [(i, k, rhs[0]), (k, j, rhs[1])]
    return gaps


TIED_BEAM_CASE = [  # LENGTH_CASES[1] of nlpcourse.checks.seq2seq before issue 42
    [[0.07, 0.24, 0.29, 0.4], [0.01, 0.3, 0.08, 0.61], [0.06, 0.05, 0.88, 0.01],
     [0.72, 0.06, 0.01, 0.21]],
    [[0.53, 0.04, 0.21, 0.22], [0.71, 0.22, 0.05, 0.02], [0.27, 0.3, 0.22, 0.21],
     [0.31, 0.36, 0.01, 0.32]],
    [[0.01, 0.37, 0.43, 0.19], [0.04, 0.07, 0.33, 0.56], [0.11, 0.01, 0.15, 0.73],
     [0.63, 0.07, 0.25, 0.05]],
]  # fmt: skip


def test_a_tie_is_found_where_there_is_one():
    """The searches above see the tie of issue 42 (case 4 of check_beam_search before the fix)."""
    tied = s2s_checks._small_table(TIED_BEAM_CASE)
    assert min(g for _, g in beam_gaps(tied, 0, 3, 3, 1.0)) < TIE
    assert min(greedy_gaps(s2s_checks._small_table([[[0.5, 0.5], [0.5, 0.5]]]), 0, 1)) < TIE
    flat = np.log(np.full(2, 0.5))
    assert min(viterbi_gaps(flat, np.log(np.full((2, 2), 0.5)), np.log(np.full((2, 2), 0.5)))) < TIE
    rules = [("S", ("S", "S"), math.log(0.5)), ("S", ("a",), math.log(0.5))]
    assert min(cky_gaps(rules, ["a"] * 3)) < TIE


@pytest.mark.parametrize("hidden,i,case", _cases(s2s_checks, "check_greedy_decode"))
def test_no_greedy_step_is_a_tie(hidden, i, case):
    assert min(greedy_gaps(*case.args)) > TIE, f"case {i + 1} ({'hidden' if hidden else 'visible'})"


@pytest.mark.parametrize("hidden,i,case", _cases(s2s_checks, "check_beam_search"))
def test_no_beam_decision_is_a_tie(hidden, i, case):
    ties = [(what, gap) for what, gap in beam_gaps(*case.args) if gap <= TIE]
    assert not ties, f"case {i + 1} ({'hidden' if hidden else 'visible'}): {ties}"


@pytest.mark.parametrize("hidden,i,case", _cases(hmm_checks, "check_viterbi"))
def test_no_viterbi_back_pointer_is_a_tie(hidden, i, case):
    assert min(viterbi_gaps(*case.args)) > TIE, (
        f"case {i + 1} ({'hidden' if hidden else 'visible'})"
    )


@pytest.mark.parametrize("hidden,i,case", _cases(parsing_checks, "check_viterbi_cky"))
def test_no_choice_inside_the_best_tree_is_a_tie(hidden, i, case):
    gaps = cky_gaps(*case.args)
    assert not gaps or min(gaps) > TIE, f"case {i + 1} ({'hidden' if hidden else 'visible'})"
