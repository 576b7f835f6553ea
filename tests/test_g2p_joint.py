"""The joint-sequence G2P model (``nlpcourse.g2p_joint``) against independent oracles.

* EM: the compiled forward-backward against the E-step written as its definition (every
  segmentation enumerated), and EM on a toy dictionary generated from known graphones, whose
  alignment it must recover.
* The model's scores against chapter 1's readable Kneser-Ney, ``kn_prob`` on dictionary counts.
* The beam search against exhaustive search over every graphone sequence of short words, and the
  batched search against its plain loop.
"""

import itertools
import math
import random

import numpy as np
import pytest

from nlpcourse import g2p_joint as gj
from nlpcourse.lm import EOS, NotFittedError
from nlpcourse.ngram import count_ngrams, kn_prob, pad

# ------------------------------------------------------------------ a toy language, known units

# each unit is spelled by its letters and pronounced by its phones; words are strings of units
UNITS = [
    ("b", ("B",)), ("d", ("D",)), ("k", ("K",)), ("m", ("M",)), ("n", ("N",)), ("p", ("P",)),
    ("s", ("S",)), ("t", ("T",)), ("a", ("AA",)), ("i", ("IY",)), ("o", ("OW",)), ("u", ("UW",)),
    ("x", ("K", "S")), ("ph", ("F",)), ("sh", ("SH",)),
]  # fmt: skip
SILENT_E = ("e", ())  # only at the end of a word


def toy_dictionary(n_words: int = 300, seed: int = 0, silent_e: float = 0.3):
    """Words made of 2-6 random units, a share ``silent_e`` ending in a silent e, with the true
    segmentation."""
    rng = random.Random(seed)
    truth = {}
    while len(truth) < n_words:
        units = [rng.choice(UNITS) for _ in range(rng.randint(2, 6))]
        if rng.random() < silent_e:
            units.append(SILENT_E)
        word = "".join(u[0] for u in units)
        truth.setdefault(word, units)
    return truth


def pron_of(units):
    return tuple(ph for _, phones in units for ph in phones)


# ------------------------------------------------------------------------------------ alignment


def test_segmentations_of_a_small_pair_by_hand():
    got = list(gj.segmentations("ab", ("A",)))
    expected = [
        [("a", ()), ("b", ("A",))],
        [("a", ("A",)), ("b", ())],
        [("ab", ("A",))],
    ]
    assert sorted(got) == sorted(expected)
    assert list(gj.segmentations("a", ("A", "B", "C"))) == []  # three phones, one letter
    assert list(gj.segmentations("ab", ("A", "B"))) == [
        [("a", ()), ("b", ("A", "B"))],
        [("a", ("A",)), ("b", ("B",))],
        [("a", ("A", "B")), ("b", ())],
    ]  # no 2-to-2 graphone ("ab", ("A", "B"))


def _em_loop(pairs, iterations):
    """EM by the definition: uniform start, then the enumerating E-step and (g2p-mstep)."""
    phones = sorted({ph for _, pr in pairs for ph in pr})
    allowed = [  # every graphone the shapes allow over the letters a-z and these phones
        ("".join(letters), chunk)
        for a, b in gj.SHAPES
        for letters in itertools.product(gj.LETTERS, repeat=a)
        for chunk in itertools.product(phones, repeat=b)
    ]
    p = {q: 1 / len(allowed) for q in allowed}
    logliks = []
    for _ in range(iterations):
        counts, loglik = gj.expected_counts_loop(pairs, p)
        total = sum(counts.values())
        p = {q: c / total for q, c in counts.items()}
        logliks.append(loglik / len(pairs))
    return p, logliks


def test_compiled_em_equals_the_e_step_written_as_its_definition():
    truth = toy_dictionary(40, seed=1)
    pairs = [(w, pron_of(u)) for w, u in truth.items()] + [("ab", ("A", "B", "C", "D", "E"))]
    for iterations in (1, 3):
        expected, logliks = _em_loop(pairs, iterations)
        aligner = gj.Aligner(iterations).fit(pairs)
        got = aligner.probabilities()
        assert got.keys() == {q for q, v in expected.items() if v > 0}
        for q, v in expected.items():
            assert got.get(q, 0.0) == pytest.approx(v, rel=1e-9, abs=1e-15), q
        assert aligner.loglik_ == pytest.approx(logliks, rel=1e-9)
    assert aligner.skipped_ == 1  # five phones for two letters
    assert np.all(np.diff(aligner.loglik_) >= -1e-12)  # EM never lowers the likelihood


def test_viterbi_equals_the_best_enumerated_segmentation():
    truth = toy_dictionary(60, seed=2)
    pairs = [(w, pron_of(u)) for w, u in truth.items()]
    aligner = gj.Aligner(2).fit(pairs)  # two iterations: the probabilities are not yet sharp
    p = aligner.probabilities()
    for (word, pron), got in zip(pairs, aligner.align(pairs), strict=True):
        expected = gj.best_segmentation_loop(word, pron, p)
        prob = math.prod(p[q] for q in got)
        assert prob == pytest.approx(math.prod(p[q] for q in expected), rel=1e-12)
    assert aligner.align([("ab", ("B", "D", "K", "M", "N"))]) == [None]  # 5 phones, 2 letters


def test_em_recovers_the_known_alignment_of_a_toy_dictionary():
    truth = toy_dictionary(300, seed=0, silent_e=0.0)
    pairs = [(w, pron_of(u)) for w, u in truth.items()]
    aligner = gj.Aligner(20).fit(pairs)
    aligned = aligner.align(pairs)
    wrong = [(w, s) for (w, _), s in zip(pairs, aligned, strict=True) if s != truth[w]]
    assert wrong == []
    p = aligner.probabilities()
    assert p[("x", ("K", "S"))] > 0.03 and p[("ph", ("F",))] > 0.03 and p[("sh", ("SH",))] > 0.03


def test_em_with_a_silent_letter_prefers_fewer_graphones():
    # maximum likelihood favours fewer, longer graphones: a silent final e can join the letter
    # before it ("ke:K" for "k:K e:"), one factor fewer. EM still recovers every word without
    # a silent e, and where it departs from the truth its alignment is the more probable one
    truth = toy_dictionary(300, seed=0, silent_e=0.3)
    pairs = [(w, pron_of(u)) for w, u in truth.items()]
    aligner = gj.Aligner(20).fit(pairs)
    p = aligner.probabilities()
    departed = 0
    for (word, _), got in zip(pairs, aligner.align(pairs), strict=True):
        if truth[word][-1] != SILENT_E:
            assert got == truth[word]
        elif got != truth[word]:
            departed += 1
            assert got[-1][0].endswith("e") and len(got) == len(truth[word]) - 1
            likelihood = math.prod(p[q] for q in got)
            assert likelihood > math.prod(p.get(q, 0.0) for q in truth[word])
    assert departed > 0


def test_aligner_rejects_bad_input():
    with pytest.raises(ValueError, match="iterations"):
        gj.Aligner(0)
    with pytest.raises(ValueError, match="no pairs"):
        gj.Aligner().fit([])
    with pytest.raises(ValueError, match="letters a-z"):
        gj.Aligner().fit([("Ab", ("A",))])
    aligner = gj.Aligner(1).fit([("ab", ("A",))])
    with pytest.raises(ValueError, match="not seen"):
        aligner.align([("ab", ("Z",))])
    with pytest.raises(NotFittedError):
        gj.Aligner().align([("ab", ("A",))])


# ---------------------------------------------------------------- the model, scored and searched


@pytest.fixture(scope="module")
def toy_model():
    truth = toy_dictionary(200, seed=3)
    train = {w: [pron_of(u)] for w, u in truth.items()}
    # a second pronunciation for some words, so that the model has choices to make
    for w in list(train)[::7]:
        train[w].append(tuple(reversed(train[w][0])))
    return gj.JointG2P(order=3, discount=0.7, iterations=10).fit(train), train


def _kn_logprob(model, sentences, tokens):
    """log P of a graphone sentence by chapter 1's readable Kneser-Ney on dictionary counts."""
    n = model.order
    counts = count_ngrams(sentences, n)
    V = len(model.lm_.vocab_)  # </s>, <unk> and the graphones, as NGramLM counts |V|
    padded = pad(tokens, n)
    return sum(
        math.log(kn_prob(counts, tuple(padded[i - n + 1 : i]), padded[i], V, d=model.discount))
        for i in range(n - 1, len(padded))
    )


def _exhaustive(model, sentences, word):
    """Every graphone sequence that spells ``word`` (any letter chunks of 1-2, any graphone of
    the vocabulary with those letters), scored by kn_prob: pronunciation -> best log P."""
    graphones = [t for t in model.lm_.vocab_ if gj.SEPARATOR in t]
    by_letters: dict[str, list[str]] = {}
    for t in graphones:
        by_letters.setdefault(t.split(gj.SEPARATOR)[0], []).append(t)

    def spellings(rest):
        if not rest:
            yield []
            return
        for a in (1, 2):
            if a <= len(rest):
                for t in by_letters.get(rest[:a], []):
                    for tail in spellings(rest[a:]):
                        yield [t, *tail]

    best: dict = {}
    for tokens in spellings(word):
        pron = tuple(ph for t in tokens for ph in gj.token_graphone(t)[1])
        best[pron] = max(best.get(pron, -math.inf), _kn_logprob(model, sentences, tokens))
    return best


SHORT_WORDS = ["tax", "phi", "sue", "mope", "bat", "kid", "oxe"]  # "oxe": never seen in training


def test_nbest_equals_exhaustive_search_scored_by_kn_prob(toy_model):
    model, train = toy_model
    sentences = gj.graphone_sentences(
        model.aligner_, [(w, p) for w, ps in train.items() for p in ps]
    )
    got = model.nbest(SHORT_WORDS, n=5, beam_size=100_000)  # a beam that prunes nothing
    for word, nbest in zip(SHORT_WORDS, got, strict=True):
        expected = sorted(_exhaustive(model, sentences, word).items(), key=lambda kv: -kv[1])
        assert [p for p, _ in nbest] == [p for p, _ in expected[:5]], word
        assert [s for _, s in nbest] == pytest.approx([s for _, s in expected[:5]], rel=1e-9)


def test_a_narrow_beam_finds_no_better_than_exhaustive_and_often_the_same(toy_model):
    model, train = toy_model
    sentences = gj.graphone_sentences(
        model.aligner_, [(w, p) for w, ps in train.items() for p in ps]
    )
    found = 0
    for word, nbest in zip(SHORT_WORDS, model.nbest(SHORT_WORDS, n=1, beam_size=3), strict=True):
        best = max(_exhaustive(model, sentences, word).values())
        assert nbest[0][1] <= best + 1e-9
        found += nbest[0][1] == pytest.approx(best, rel=1e-9)
    assert found >= len(SHORT_WORDS) - 1


def test_score_of_a_given_pronunciation_equals_exhaustive_search(toy_model):
    model, train = toy_model
    sentences = gj.graphone_sentences(
        model.aligner_, [(w, p) for w, ps in train.items() for p in ps]
    )
    words, prons, expected = [], [], []
    for word in SHORT_WORDS:
        for pron, score in list(_exhaustive(model, sentences, word).items())[:6]:
            words.append(word), prons.append(pron), expected.append(score)
    got = model.score(words, prons, beam_size=100_000)
    assert got == pytest.approx(expected, rel=1e-9)
    assert model.score(["tax", "tax"], [("T", "AA", "ZZ"), ("T",) * 7]) == [-math.inf] * 2


def test_the_batched_search_equals_its_plain_loop(toy_model):
    model, train = toy_model
    words = SHORT_WORDS + sorted(train)[:25]
    for beam_size in (1, 4):
        batched = model.nbest(words, n=3, beam_size=beam_size, batch_size=7)
        for word, got in zip(words, batched, strict=True):
            loop = gj.beam_search_loop(model, word, n=3, beam_size=beam_size)
            assert [p for p, _ in got] == [p for p, _ in loop], (word, beam_size)
            assert [s for _, s in got] == pytest.approx([s for _, s in loop], rel=1e-9)


def test_the_model_pronounces_its_training_words(toy_model):
    model, train = toy_model
    words = [w for w, ps in train.items() if len(ps) == 1]
    predictions = model.predict(words, beam_size=10)
    right = sum(p == train[w][0] for w, p in zip(words, predictions, strict=True))
    assert right / len(words) > 0.95


def test_tokens_and_errors():
    assert gj.graphone_token("x", ("K", "S")) == "x:K_S"
    assert gj.token_graphone("e:") == ("e", ())
    for letters, phones in itertools.product(["a", "ph"], [(), ("F",), ("K", "S")]):
        assert gj.token_graphone(gj.graphone_token(letters, phones)) == (letters, phones)
    with pytest.raises(ValueError, match="order"):
        gj.JointG2P(order=1)
    with pytest.raises(NotFittedError):
        gj.JointG2P().nbest(["ab"])
    model = gj.JointG2P(order=2, iterations=2).fit({"ab": [("A", "B")], "ba": [("B", "A")]})
    with pytest.raises(ValueError, match="letters a-z"):
        model.nbest(["a b"])
    with pytest.raises(ValueError, match="beam_size"):
        model.nbest(["ab"], beam_size=0)
    assert EOS in model.lm_.vocab_


# ----------------------------------------------------- the RNN's N-best, and rescoring the union


def _tiny_rnn(seed: int):
    import torch

    from nlpcourse.seq2seq import Seq2Seq

    torch.manual_seed(seed)
    model = Seq2Seq(V_x=6, V_y=5, E=4, H=8, attention="additive")  # two phones: ids 3 and 4
    with torch.no_grad():
        model.W_o.weight.mul_(6.0)  # sharper distributions, to test the ranking
    return model.eval()


def test_the_rnn_final_beam_as_wide_as_the_search_space_is_every_output_scored():
    import torch

    src = torch.tensor([[3, 4, 5, 2], [2, 3, 0, 0]])  # (B, S)
    max_len = 4
    ended = [list(y) for n in range(max_len) for y in itertools.product([3, 4], repeat=n)]
    unended = [list(y) for y in itertools.product([3, 4], repeat=max_len)]
    K = len(ended) + len(unended)  # 15 + 16: the beam prunes nothing
    for seed in range(2):
        model = _tiny_rnn(seed)
        got = model.beam_nbest(src, beam_size=K, max_len=max_len)
        for b in range(2):
            x = src[b : b + 1, : int((src[b] > 0).sum())].expand(len(ended), -1)
            scores = model.sequence_logprob(x, ended) + model.sequence_logprob(
                x[:1].expand(len(unended), -1), unended, eos=False
            )
            expected = sorted(zip(ended + unended, scores, strict=True), key=lambda t: -t[1])
            assert [y for y, _ in got[b]] == [y for y, _ in expected]
            assert [s for _, s in got[b]] == pytest.approx([s for _, s in expected], abs=1e-5)
        # its first hypothesis is beam_search's answer without length normalisation
        seqs, scores = model.beam_search(src, beam_size=3, max_len=max_len)
        nbest = model.beam_nbest(src, beam_size=3, max_len=max_len)
        assert [lst[0][0] for lst in nbest] == seqs
        assert [lst[0][1] for lst in nbest] == pytest.approx(scores)


def test_pronunciation_logprobs_by_teacher_forcing():
    import torch

    from nlpcourse import seq2seq as s2s

    train = {"ab": [("P", "Q")], "ba": [("Q", "P")], "bb": [("Q", "Q")]}
    src, tgt = s2s.g2p_vocabs(train)
    torch.manual_seed(0)
    model = s2s.Seq2Seq(len(src), len(tgt), E=4, H=8, attention="dot").train()  # dropout mode
    words, prons = ["ab", "ba", "ab", "ab"], [("P", "Q"), ("Q",), ("Z",), ()]
    got = s2s.pronunciation_logprobs(model, words, prons, src, tgt)
    assert model.training  # left in the mode it was in
    for word, pron, score in list(zip(words, prons, got, strict=True))[:2]:
        # by hand: the sum of the log-probabilities of each phone and </s>, one step at a time
        with torch.no_grad():
            model.eval()
            memory, s = model.encode(torch.tensor([src.encode(word)]))
            y, total = s2s.BOS_ID, 0.0
            for target in [*tgt.encode(pron), s2s.EOS_ID]:
                logp, s, _ = model.step(torch.tensor([y]), s, memory)
                total += float(logp[0, target])
                y = target
            model.train()
        assert score == pytest.approx(total, abs=1e-5)
    assert got[2:] == [-math.inf, -math.inf]  # an unknown phone; an empty pronunciation
    # the RNN's N-best as pronunciations: distinct, best first, scores finite
    lists = s2s.nbest(model, ["ab", "ba"], src, tgt, beam_size=4, max_len=4)
    for lst in lists:
        assert len({p for p, _ in lst}) == len(lst)
        assert [s for _, s in lst] == sorted((s for _, s in lst), reverse=True)


def test_rescoring_picks_the_best_log_linear_score_of_the_union():
    rng = np.random.default_rng(0)
    lists_a = [[("A",), ("B", "C")], [("D",)], [("E",), ("F",)]]
    lists_b = [[("B", "C"), ("G",)], [("D",), ("H", "I", "J")], [("F",)]]
    cands = gj.Candidates([lists_a, lists_b])
    assert cands.prons == [("A",), ("B", "C"), ("G",), ("D",), ("H", "I", "J"), ("E",), ("F",)]
    assert cands.word.tolist() == [0, 0, 0, 1, 1, 2, 2]
    cands.rnn = rng.normal(size=7)
    cands.joint = rng.normal(size=7)
    cands.joint[2] = -np.inf  # a candidate one model cannot produce
    for lam, beta in [(0.0, 0.0), (1.0, 0.0), (0.3, 0.5), (0.7, -1.0)]:
        got = cands.best(lam, beta)
        for b in range(3):  # by hand: a loop over each word's candidates
            rows = [c for c in range(7) if cands.word[c] == b]

            def total(c, lam=lam, beta=beta):
                joint = cands.joint[c] if cands.joint[c] > -np.inf else -1e9
                return lam * cands.rnn[c] + (1 - lam) * joint + beta * len(cands.prons[c])

            assert got[b] == max(rows, key=total)
    right = np.array([0, 1, 0, 1, 0, 0, 1], dtype=bool)
    lam, beta, wer = cands.tune(right, [0.0, 0.5, 1.0], [-1.0, 0.0, 1.0])
    best_wer = min(
        1 - right[cands.best(la, be)].mean() for la in [0.0, 0.5, 1.0] for be in [-1.0, 0.0, 1.0]
    )
    assert wer == best_wer == 1 - right[cands.best(lam, beta)].mean()
    with pytest.raises(ValueError, match="no candidate"):
        gj.Candidates([[[("A",)], []]])


def test_the_recorded_commands_parse():
    """The README and the records name ``python -m nlpcourse.g2p_joint_runs <config>``."""
    import subprocess
    import sys

    from nlpcourse.g2p_joint_runs import COMBINED, CONFIGS

    out = subprocess.run(
        [sys.executable, "-m", "nlpcourse.g2p_joint_runs", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    for name in [*CONFIGS, *COMBINED]:
        assert name in out.stdout
