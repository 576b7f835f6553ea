"""Tests of the exercise checks of 05-seq2seq (nlpcourse.checks.seq2seq).

Student-style implementations written here (none calls nlpcourse.seq2seq): right ones, also in
other reasonable forms (numpy, lists, a list for a pair, a recursive edit distance), must pass the
hidden checks; each usual mistake must fail with a message naming it; a wrong answer nobody
anticipated must fail with the input, the expected answer and the answer it got. The exhaustive
beam cases are checked against brute force.
"""

import functools
import math

import numpy as np
import pytest
import torch
from checks_corpus import wrong_with_right_name_or_none

import nlpcourse.checks.seq2seq as checks
from nlpcourse.checks import CheckFailed

# ------------------------------------------------------------------ student implementations


def edit_distance(a, b):
    d = np.zeros((len(a) + 1, len(b) + 1), dtype=int)
    d[:, 0] = np.arange(len(a) + 1)
    d[0, :] = np.arange(len(b) + 1)
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i, j] = min(
                d[i - 1, j] + 1, d[i, j - 1] + 1, d[i - 1, j - 1] + (a[i - 1] != b[j - 1])
            )
    return d[-1, -1]  # a numpy integer


def edit_distance_recursive(a, b):
    @functools.cache
    def d(i, j):
        if i == 0 or j == 0:
            return i + j
        return min(d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] != b[j - 1]))

    return d(len(a), len(b))


def edit_distance_indel(a, b):  # a substitution costs 2
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            sub = 0 if a[i - 1] == b[j - 1] else 2
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + sub)
    return d[-1][-1]


def masked_softmax(scores, mask, fill=-math.inf):
    return torch.softmax(scores.masked_fill(~mask, fill), dim=-1)


def masked_softmax_numpy(scores, mask):
    s = np.where(mask.numpy(), scores.numpy(), -np.inf)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).tolist()  # a list of lists


def dot_attention(query, keys, mask, scale=1.0):
    scores = torch.bmm(keys, query.unsqueeze(2)).squeeze(2) * scale  # (B, S)
    weights = masked_softmax(scores, mask)
    return [weights, torch.bmm(weights.unsqueeze(1), keys).squeeze(1)]  # a list, not a tuple


def additive_scores(query, keys, W_1, W_2, v, act=torch.tanh):
    return act(query.unsqueeze(1) @ W_1.T + keys @ W_2.T) @ v


def greedy_decode(step, state, max_len, keep_eos=False):
    out, y = [], 1
    for _ in range(max_len):
        log_probs, state = step(y, state)
        y = int(log_probs.argmax())
        if y == 2 and not keep_eos:
            break
        out.append(y)
        if y == 2:
            break
    return tuple(out)  # a tuple is fine too


def beam_search(
    step, state, beam_size, max_len, length_penalty=0.0, normalise=True, high_first=False,
    prune_by_norm=False, eos_in_length=True, ended_apart=False, return_sum=False,
    keep_eos=False, extend_ended=False,
):  # fmt: skip
    """A student's beam search; each keyword but high_first (which only changes the order in
    which ties would be met) makes one mistake."""

    def norm(c):
        n = len(c[1]) - (1 if c[3] and not eos_in_length else 0)
        return c[0] / max(n, 1) ** (length_penalty if normalise else 0.0)  # max: </s> alone

    beam, finished = [(0.0, [], state, False)], []
    for _ in range(max_len):
        cand = []
        for score, ys, s, done in beam:
            if done and not extend_ended:
                cand.append((score, ys, s, True))
                continue
            logp, s2 = step(ys[-1] if ys else 1, s)
            order = range(len(logp) - 1, -1, -1) if high_first else range(len(logp))
            for v in order:
                if logp[v] > -math.inf:
                    cand.append((score + float(logp[v]), ys + [v], s2, v == 2))
        beam = sorted(cand, key=lambda c: -(norm(c) if prune_by_norm else c[0]))[:beam_size]
        if ended_apart:
            finished += [c for c in beam if c[3]]
            beam = [c for c in beam if not c[3]]
            if not beam:
                break
        elif all(c[3] for c in beam):
            break
    best = max(finished + beam, key=norm)
    ys = [y for y in best[1] if y != 2 or keep_eos]
    return ys, best[0] if return_sum else norm(best)


def greedy_decode_ties_high(step, state, max_len):
    out, y = [], 1
    for _ in range(max_len):
        lp, state = step(y, state)
        _, y = max((p, v) for v, p in enumerate(lp.tolist()))  # a tie goes to the larger id
        if y == 2:
            break
        out.append(y)
    return out


# ------------------------------------------------------------------------------ right answers


@pytest.mark.parametrize(
    "check,function",
    [
        (checks.check_edit_distance, edit_distance),
        (checks.check_edit_distance, edit_distance_recursive),
        (checks.check_masked_softmax, masked_softmax),
        (checks.check_masked_softmax, masked_softmax_numpy),
        (checks.check_dot_attention, dot_attention),
        (checks.check_additive_scores, additive_scores),
        (checks.check_greedy_decode, greedy_decode),
        (checks.check_beam_search, beam_search),
        (checks.check_greedy_decode, greedy_decode_ties_high),
        (checks.check_masked_softmax, lambda s, m: masked_softmax(s.float(), m)),  # float32
        (checks.check_dot_attention, lambda q, k, m: dot_attention(q.float(), k.float(), m)),
        (
            checks.check_additive_scores,
            lambda q, k, W_1, W_2, v: additive_scores(*(a.float() for a in (q, k, W_1, W_2, v))),
        ),
        (checks.check_greedy_decode, lambda st, s, L: np.array(greedy_decode(st, s, L), dtype=int)),
        (
            checks.check_beam_search,
            lambda st, s, K, L, a: (
                tuple(beam_search(st, s, K, L, a)[0]),
                np.float32(beam_search(st, s, K, L, a)[1]),
            ),
        ),
        (checks.check_beam_search, functools.partial(beam_search, high_first=True)),
    ],
)
def test_right_answers_in_any_reasonable_form_pass(check, function, capsys):
    check(function)
    check(function, hidden=True)
    assert "cases pass" in capsys.readouterr().out


# ------------------------------------------------------------------------------- named mistakes

NAMES = {  # every name each check gives (the fragments the tests look for)
    checks.check_masked_softmax: ["exp(0) = 1", "padded positions", "batch axis"],
    checks.check_dot_attention: ["sqrt(D)", "padded positions"],
    checks.check_additive_scores: ["tanh is missing", "wrap the sum"],
    checks.check_edit_distance: ["a substitution costs 1", "positions that differ"],
}


@pytest.mark.parametrize(
    "check,function,named",
    [
        (checks.check_edit_distance, edit_distance_indel, "a substitution costs 1"),
        (checks.check_masked_softmax, functools.partial(masked_softmax, fill=0.0), "exp(0) = 1"),
        (checks.check_masked_softmax, lambda s, m: torch.softmax(s, -1), "padded positions"),
        (checks.check_dot_attention,
         lambda q, k, m: dot_attention(q, k, m, scale=q.shape[-1] ** -0.5), "sqrt(D)"),
        (checks.check_additive_scores, functools.partial(additive_scores, act=lambda x: x),
         "tanh is missing"),
        (checks.check_greedy_decode, functools.partial(greedy_decode, keep_eos=True),
         "should not include </s>"),
        (checks.check_beam_search, functools.partial(beam_search, normalise=False),
         "plain sum of log-probabilities"),
        (checks.check_beam_search, lambda step, st, K, L, a: beam_search(step, st, 1, L, a),
         "that is the greedy output"),
    ],
)  # fmt: skip
def test_usual_mistakes_are_named(check, function, named):
    """Visible and hidden alike (issue 27): the message names this mistake, and no other."""
    for hidden in (False, True):
        with pytest.raises(CheckFailed, match="likely mistake") as err:
            check(function, hidden=hidden)
        assert named in str(err.value)
        for other in NAMES.get(check, ()):
            if other != named:
                assert other not in str(err.value), str(err.value)


def test_an_unanticipated_wrong_answer_shows_input_expected_and_got():
    with pytest.raises(CheckFailed) as err:
        checks.check_edit_distance(lambda a, b: abs(len(a) - len(b)) + 7)
    message = str(err.value)
    assert "a = ''" in message and "expected: 0" in message and "got:      7" in message
    with pytest.raises(CheckFailed, match=r"not written yet"):
        checks.check_beam_search(lambda *args: (_ for _ in ()).throw(NotImplementedError()))


def test_calling_the_reference_earns_nothing():
    from nlpcourse import seq2seq

    with pytest.raises(CheckFailed, match="switched off"):
        checks.check_edit_distance(seq2seq.edit_distance)
    with pytest.raises(CheckFailed, match="switched off"):
        checks.check_beam_search(seq2seq.beam_search)


def test_the_exhaustive_beam_cases_agree_with_brute_force():
    rng = np.random.default_rng(5)
    for V, L in [(4, 3), (5, 2)]:
        table = checks.random_table(rng, V, 4)
        K = (V - 2) ** L * 2
        for alpha in (0.0, 1.0):
            assert (
                beam_search(table, 0, K, L, alpha)[0]
                == checks.brute_force_best(table, 0, L, alpha)[0]
            )


# ------------------------------------------------- issue 27: the self-check agrees with the grade

BEAM_MISTAKES = [  # (the mistake, the name the message must give it; None: expected / got)
    (dict(eos_in_length=False), "|y| must count the symbols including </s>"),
    (dict(ended_apart=True), "an ended hypothesis stays in the beam"),
    (dict(prune_by_norm=True), "pruned by the normalised score"),
    (dict(return_sum=True), "return the normalised score"),
    (dict(normalise=False), "plain sum of log-probabilities"),
    (dict(keep_eos=True), None),
    (dict(extend_ended=True), None),
]
BEAM_NAMES = [named for _, named in BEAM_MISTAKES if named] + ["that is the greedy output"]


@pytest.mark.parametrize("mistake,named", BEAM_MISTAKES)
def test_each_beam_mistake_is_caught_by_the_visible_cases_and_named_right(mistake, named):
    """The visible cases catch every kind of mistake (the hidden ones only add inputs); the
    message names the mistake made, and no other."""
    with pytest.raises(CheckFailed) as err:
        checks.check_beam_search(functools.partial(beam_search, **mistake))
    message = str(err.value)
    if named is not None:
        assert "likely mistake:" in message and named in message, message
    for other in BEAM_NAMES:
        if other != named:
            assert other not in message, message


def test_ties_the_statement_leaves_open_are_not_in_the_cases(monkeypatch):
    """Every table of the decoding cases (visible and hidden) has no two next symbols of exactly
    the same probability in any row, so a decoder may break ties any way it likes."""
    tables = []
    monkeypatch.setattr(checks, "run_check", lambda *a, **k: tables.extend(c.args[0] for c in a[3]))
    for hidden in (False, True):
        checks.check_greedy_decode(greedy_decode, hidden=hidden)
        checks.check_beam_search(beam_search, hidden=hidden)
    assert len(tables) > 60
    for table in tables:
        probs = np.exp(table.log_probs)  # (T, V, V)
        for row in probs.reshape(-1, probs.shape[-1]):
            finite = np.sort(row[row > 0])
            assert len(finite) < 2 or np.all(np.diff(finite) > 1e-9), (table, row)


def test_a_decoder_table_is_shown_as_its_probabilities():
    text = repr(checks._fixed_table())
    assert "0.5999" in text and "0.9000" in text and "TableModel" not in text
    assert "t = 0, after <s>" in text and "</s>" in text


# --------------------------------------------- issue 27: plausible mistakes that no check names


def greedy_from(step, state, max_len, first=1, steps_off=0, feed_back=True):
    out, y = [], first
    for _ in range(max_len + steps_off):
        log_probs, state = step(y if feed_back else first, state)
        nxt = int(log_probs.argmax())
        if nxt == 2:
            break
        out.append(nxt)
        y = nxt
    return out


UNNAMED = [  # three or more per part; each must fail the visible cases with expected / got
    (checks.check_edit_distance, lambda a, b: abs(len(a) - len(b))),
    (checks.check_edit_distance, lambda a, b: edit_distance(a, b) + (a != b and a[:1] != b[:1])),
    (checks.check_edit_distance, lambda a, b: edit_distance(a[:-1], b[:-1]) if a and b else 0),
    (checks.check_masked_softmax, lambda s, m: masked_softmax(s, m).log()),
    (checks.check_masked_softmax, lambda s, m: torch.softmax(s, -1) * m),  # not renormalised
    (checks.check_masked_softmax, lambda s, m: masked_softmax(s, ~m).nan_to_num(0.0)),
    (checks.check_dot_attention, lambda q, k, m: dot_attention(q, k, m)[::-1]),
    (checks.check_dot_attention, lambda q, k, m: [dot_attention(q, k, m)[0], q]),
    (checks.check_dot_attention, lambda q, k, m: dot_attention(q, k, m, scale=1 / q.shape[-1])),
    (checks.check_additive_scores, functools.partial(additive_scores, act=torch.sigmoid)),
    (checks.check_additive_scores, functools.partial(additive_scores, act=torch.relu)),
    (checks.check_additive_scores,
     lambda q, k, W_1, W_2, v: torch.tanh((q.unsqueeze(1) @ W_1.T + k @ W_2.T) @ v)),
    (checks.check_greedy_decode, functools.partial(greedy_from, first=0)),  # not from <s>
    (checks.check_greedy_decode, functools.partial(greedy_from, steps_off=1)),
    (checks.check_greedy_decode, functools.partial(greedy_from, feed_back=False)),
    (checks.check_beam_search, lambda st, s, K, L, a: beam_search(st, s, K + 1, L, a)),
    (checks.check_beam_search, lambda st, s, K, L, a: beam_search(st, s, K, max(L - 1, 1), a)),
    (checks.check_beam_search, lambda st, s, K, L, a: ([], 0.0)),
]  # fmt: skip


@pytest.mark.parametrize("check, function", UNNAMED)
def test_plausible_mistakes_nobody_named_fail_on_the_visible_cases(check, function):
    wrong_with_right_name_or_none(check, function, None)


# --------------------------------------- issue 42: no tie decides a grade (test_checks_ties.py)


def beam_search_two_lists(step, state, beam_size, max_len, length_penalty, ended_first=True):
    """A right beam search written another way (issue 42): heapq.nlargest over the candidates,
    the ended hypotheses kept in a list apart from the live ones (both count towards beam_size),
    the final pick from ``ended + live`` or ``live + ended``: where the cases held a tie, one of
    the two orders got 0 points."""
    import heapq

    live, ended = [(0.0, (), state)], []
    for _ in range(max_len):
        candidates = [(score, ys, None, True) for score, ys in ended]
        for score, ys, s in live:
            logp, s2 = step(ys[-1] if ys else 1, s)
            for v, lp in enumerate(logp.tolist()):
                if lp > -math.inf:
                    candidates.append((score + lp, (*ys, v), s2, v == 2))
        kept = heapq.nlargest(beam_size, candidates, key=lambda c: c[0])
        ended = [(c[0], c[1]) for c in kept if c[3]]
        live = [(c[0], c[1], c[2]) for c in kept if not c[3]]
        if not live:
            break
    pool = [(s, ys) for s, ys in ended] + [(s, ys) for s, ys, _ in live]
    if not ended_first:
        pool = pool[len(ended) :] + pool[: len(ended)]
    score, ys = max(pool, key=lambda h: h[0] / len(h[1]) ** length_penalty)
    return [y for y in ys if y != 2], score / len(ys) ** length_penalty


@pytest.mark.parametrize("ended_first", [True, False])
def test_a_right_beam_search_passes_whichever_order_it_meets_the_hypotheses_in(ended_first, capsys):
    student = functools.partial(beam_search_two_lists, ended_first=ended_first)
    checks.check_beam_search(student)
    checks.check_beam_search(student, hidden=True)
    assert "cases pass" in capsys.readouterr().out
