"""A named mistake is the student's own (issue 42, section 3).

A message says "likely mistake: ..." only when that mistake's answer is the student's on every
case of the check where the mistake has an answer. The generic test builds, for every mistake of
every check, a near miss: a function that returns the mistake's answer on the first case where
that answer is wrong and the right answer on every other case. Where the mistake is wrong on
another visible case too, the near miss is not that mistake, and must not get its name. The
answers come from the check's own reference and mistake functions, computed before the check
runs (the reference refuses while a student's function runs).

Then the wrong answers of issue 42's table, each written as a student would, which used to be
given the name of another mistake that happened to give the same answer on the failing case.
"""

import pickle

import numpy as np
import pytest
import torch
from checks_corpus import CHECKS, captured

import nlpcourse.checks.hmm
import nlpcourse.checks.ngram
import nlpcourse.checks.seq2seq
import nlpcourse.checks.transformer
from nlpcourse.checks import CheckFailed, core


def _answers(run: dict) -> list[tuple[bytes, object, dict]]:
    """For each case: its pickled arguments, the right answer and {identity: mistake}."""
    out = []
    for case in run["cases"]:
        frozen = pickle.dumps(case.args)
        args = pickle.loads(frozen)
        right = core.to_plain(core.unwrap(run["reference"](*pickle.loads(frozen))))
        mistakes = {}
        for mistake in run["mistakes"](*args) if run["mistakes"] else ():
            if mistake.answer is None or mistake.identity in mistakes:
                continue
            try:
                answer = core.to_plain(mistake.answer)
            except core.NotPlainAnswer:
                continue
            if not run["same"](right, answer):
                mistakes[mistake.identity] = (mistake, answer)
        out.append((frozen, right, mistakes))
    return out


def _near_misses():
    for module, name in CHECKS:
        if name == "check_architecture_for":
            continue  # no mistakes: an answer table
        for run in captured(module, name, False):
            if run["mistakes"] is None:
                continue
            yield pytest.param(module, name, run, id=name)


def _content(value):
    """A value as nested tuples of plain data (tensors and arrays by their bytes), to tell one
    case's arguments from another's (pickled tensors carry their storage's address)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().numpy()
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, list | tuple):
        return tuple(_content(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((repr(k), _content(v)) for k, v in value.items()))
    if hasattr(value, "__dict__"):
        return (type(value).__name__, _content(vars(value)))
    return repr(value)


def _key(frozen: bytes) -> tuple:
    return _content(pickle.loads(frozen))


def _likely(message: str) -> str:
    """The part of a message that names mistakes as the student's."""
    return message.split("likely mistake", 1)[1] if "likely mistake" in message else ""


@pytest.mark.parametrize("module, name, run", list(_near_misses()))
def test_a_near_miss_does_not_get_the_name_of_a_mistake_it_only_meets_once(module, name, run):
    answers = _answers(run)
    index: dict = {}  # the cases of each content (a random case may repeat another)
    for i, (frozen, _, _) in enumerate(answers):
        index.setdefault(_key(frozen), []).append(i)
    tried = 0
    for identity in {k for _, _, mistakes in answers for k in mistakes}:
        wrong_on = [i for i, (_, _, mistakes) in enumerate(answers) if identity in mistakes]
        first_args = index[_key(answers[wrong_on[0]][0])]
        if not set(wrong_on) - set(first_args):
            continue  # wrong on one visible case only: a near miss would be the mistake itself
        first = wrong_on[0]
        mistake, answer = answers[first][2][identity]

        def near_miss(*args, first=first, answer=answer):
            same_args = index[_key(pickle.dumps(args))]
            return answer if first in same_args else answers[same_args[0]][1]

        with np.errstate(all="ignore"), pytest.raises(CheckFailed) as failed:
            core.run_check(
                name, near_miss, run["reference"], run["cases"], run["compare"],
                mistakes=run["mistakes"], same=run["same"],
            )  # fmt: skip
        assert "raised" not in str(failed.value), str(failed.value)  # found its case
        assert mistake.what not in _likely(str(failed.value)), str(failed.value)
        tried += 1
    print(f"{name}: {tried} near misses")


def test_the_near_misses_find_their_cases():
    """The near miss finds its case by the content of its arguments, which a round trip through
    pickle keeps."""
    for module, name in CHECKS:
        for run in captured(module, name, False):
            keys = [_key(pickle.dumps(c.args)) for c in run["cases"]]
            again = [_key(pickle.dumps(pickle.loads(pickle.dumps(c.args)))) for c in run["cases"]]
            assert again == keys, name


# ------------------------------------------------ issue 42's table: each gets its own name now


def _kn(bigram_counts, context, word, vocab_size, d, types_as_v=False, lambda_before=False):
    """Interpolated Kneser-Ney as a student writes it, with one of two mistakes."""
    (v,) = context
    types = {key for key, c in bigram_counts.items() if c > 0}
    before = len([1 for _, w in types if w == word])
    n_words = vocab_size if types_as_v else len({w for _, w in types})
    lower = max(before - d, 0) / len(types) + d * n_words / len(types) / vocab_size
    c_v = sum(c for (u, _), c in bigram_counts.items() if u == v)
    if c_v == 0:
        return lower
    n_v = len([1 for u, w in types if (w if lambda_before else u) == v])
    return max(bigram_counts.get((v, word), 0) - d, 0) / c_v + d * n_v / c_v * lower


def _tables_per_word(sentences, tags, words, k):
    """addk_tables with the emissions normalised per word, P(tag | word)."""
    N, V = len(tags), len(words)
    start, trans, emit = np.zeros(N), np.zeros((N, N)), np.zeros((V, N))
    for s in sentences:
        if not s:
            continue
        ids = [tags.index(t) for _, t in s]
        start[ids[0]] += 1
        for a, b in zip(ids, ids[1:], strict=False):
            trans[a, b] += 1
        for w, t in s:
            emit[words.index(w), tags.index(t)] += 1
    return (
        np.log((start + k) / (start.sum() + k * N)),
        np.log((trans + k) / (trans.sum(axis=1, keepdims=True) + k * N)),
        np.log((emit + k) / (emit.sum(axis=1, keepdims=True) + k * N)),
    )


def _attention_dv(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / v.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, -float("inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def _beam_ended_only(step, state, K, L, alpha):
    """A beam search that picks the answer among the ended hypotheses alone."""
    live, ended = [(0.0, (), state)], []
    for _ in range(L):
        candidates = [(s, ys, None, True) for s, ys in ended]
        for s, ys, st in live:
            logp, st2 = step(ys[-1] if ys else 1, st)
            candidates += [(s + lp, (*ys, v), st2, v == 2)
                           for v, lp in enumerate(logp.tolist()) if lp > -float("inf")]  # fmt: skip
        kept = sorted(candidates, key=lambda c: -c[0])[:K]
        ended = [(c[0], c[1]) for c in kept if c[3]]
        live = [(c[0], c[1], c[2]) for c in kept if not c[3]]
        if not live:
            break
    pool = ended or [(s, ys) for s, ys, _ in live]  # the mistake: the unfinished ones left out
    score, ys = max(pool, key=lambda h: h[0] / len(h[1]) ** alpha)
    return [y for y in ys if y != 2], score / len(ys) ** alpha


TABLE = [  # (check, wrong answer, its own name, the name it used to get)
    (nlpcourse.checks.ngram.check_kn_bigram_prob,
     lambda *a: _kn(*a, types_as_v=True), "not by |V| (vocab_size)",
     "the lower order is the plain continuation probability"),
    (nlpcourse.checks.ngram.check_kn_bigram_prob,
     lambda *a: _kn(*a, lambda_before=True), "you counted the words that come before it",
     "the lower order is the plain continuation probability"),
    (nlpcourse.checks.hmm.check_addk_tables, _tables_per_word, "normalised per word",
     "log_emit_table is transposed"),
    (nlpcourse.checks.seq2seq.check_beam_search, _beam_ended_only,
     "among the ended hypotheses only", "was moved out"),
    (nlpcourse.checks.seq2seq.check_beam_search, _beam_ended_only,
     "among the ended hypotheses only", "compared by their plain sum"),
    (nlpcourse.checks.transformer.check_scaled_dot_product_attention, _attention_dv,
     "divided by sqrt(d_v)", "not divided by sqrt(d_k)"),
]  # fmt: skip


@pytest.mark.parametrize("check, student, own, other", TABLE)
def test_the_misnamed_mistakes_of_issue_42_get_their_own_name(check, student, own, other):
    for hidden in (False, True):
        with np.errstate(all="ignore"), pytest.raises(CheckFailed) as failed:
            check(student, hidden=hidden)
        likely = _likely(str(failed.value))
        assert own in likely and other not in likely, str(failed.value)
