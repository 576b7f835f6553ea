"""Tests of nlpcourse.lm, the language-model layer, against independent oracles.

Oracles: vocabularies, id streams and perplexities worked by hand; plain-Python loops over the
stream for a model whose predictions are known in closed form (a bigram lookup table); and the
estimators of chapters 1 and 2 for the shared "not fitted" error.
"""

import math
import random
from collections import Counter

import pytest
import torch
from torch import nn

from nlpcourse import hmm, lm
from nlpcourse.ngram import NGramLM
from nlpcourse.records import Recorder, load_record

CORPUS = [s.split() for s in ["a b", "b", "a a c", "d"]]


# --------------------------------------------------------------------------- vocabulary


def test_build_vocab_by_hand():
    # counts a 3, b 2, c 1, d 1: specials first, then by frequency, ties alphabetical
    assert lm.build_vocab(CORPUS, min_count=2) == ["</s>", "<unk>", "a", "b"]
    assert lm.build_vocab(CORPUS, min_count=1) == ["</s>", "<unk>", "a", "b", "c", "d"]
    assert lm.build_vocab(CORPUS, min_count=4) == ["</s>", "<unk>"]
    # a literal <unk> in the text is not a word of its own
    assert lm.build_vocab([["<unk>", "<unk>", "x"]], min_count=1) == ["</s>", "<unk>", "x"]


def test_vocab_rule_against_a_plain_count():
    """Bengio's rule written out with a loop: a word is kept iff seen >= min_count times."""
    rng = random.Random(0)
    corpus = [[f"w{rng.randint(0, 20)}" for _ in range(rng.randint(0, 8))] for _ in range(60)]
    for min_count in (1, 2, lm.BENGIO_MIN_COUNT, 10):
        seen: dict[str, int] = {}
        for sentence in corpus:
            for word in sentence:
                seen[word] = seen.get(word, 0) + 1
        kept = [w for w in seen if seen[w] >= min_count]
        kept.sort(key=lambda w: (-seen[w], w))
        expected = ["</s>", "<unk>"] + kept
        assert lm.build_vocab(corpus, min_count) == expected
        # chapter 1's model uses exactly this vocabulary, ids included
        model = NGramLM(1, "add-k").fit(corpus, min_count=min_count)
        assert model.vocab_ == expected and model.vocab == expected
        assert [model.index_[w] for w in expected] == list(range(len(expected)))


def test_encode_and_decode_by_hand():
    vocab = ["</s>", "<unk>", "a", "b"]
    assert lm.encode([["a", "c", "b"], []], vocab) == [[2, 1, 3], []]
    assert lm.decode([2, 1, 3, 0], vocab) == ["a", "<unk>", "b", "</s>"]
    with pytest.raises(ValueError, match="start with"):
        lm.encode([["a"]], ["a", "</s>", "<unk>"])
    with pytest.raises(TypeError, match="sentence 1 is a string"):
        lm.encode([["a"], "a b"], vocab)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        lm.decode([4], vocab)


def test_bad_sentences_and_min_count():
    with pytest.raises(ValueError, match="min_count"):
        lm.build_vocab(CORPUS, min_count=0)
    with pytest.raises(TypeError, match="one string"):
        lm.build_vocab("a b c")
    with pytest.raises(TypeError, match="sentence 1 is a str"):
        lm.check_sentences([["a"], "b c"], "fit")
    with pytest.raises(TypeError, match="not a string"):
        lm.check_sentences([["a", 3]], "fit")
    with pytest.raises(ValueError, match="contains '<s>'"):
        lm.check_sentences([["<s>", "a"]], "fit")
    assert lm.check_sentences((("a", "b"), []), "fit") == [["a", "b"], []]


# ------------------------------------------------------------------- stream and perplexity


def test_batchify_by_hand():
    inputs, targets = lm.batchify([[5, 6], [7]], batch_size=2)
    # stream </s> 5 6 </s> 7 </s>: inputs 0 5 6 0 7 | targets 5 6 0 7 0, then one pad; rows are
    # the two halves of the stream, read left to right
    assert inputs.tolist() == [[0, 5, 6], [0, 7, 0]]
    assert targets.tolist() == [[5, 6, 0], [7, 0, lm.IGNORE_INDEX]]
    inputs, targets = lm.batchify([[5, 6], [7]], batch_size=1)
    assert inputs.tolist() == [[0, 5, 6, 0, 7]] and targets.tolist() == [[5, 6, 0, 7, 0]]
    with pytest.raises(ValueError, match="no sentences"):
        lm.batchify([], 2)
    with pytest.raises(ValueError, match="batch_size"):
        lm.batchify([[1]], 0)


def test_stream_and_windows_by_hand():
    assert lm.stream([[2, 3], [4]]).tolist() == [0, 2, 3, 0, 4, 0]
    inputs, targets = lm.windows([[2, 3], [4], [5, 6, 2, 3], [4, 4, 5]], 4)
    # stream 0 2 3 0 4 0 5 6 2 3 0 4 4 5 0: three whole windows of 4 inputs, the rest dropped
    assert inputs.tolist() == [[0, 2, 3, 0], [4, 0, 5, 6], [2, 3, 0, 4]]
    assert targets.tolist() == [[2, 3, 0, 4], [0, 5, 6, 2], [3, 0, 4, 4]]
    with pytest.raises(ValueError, match="shorter than one window"):
        lm.windows([[2]], 4)
    with pytest.raises(ValueError, match="no sentences"):
        lm.stream([])


def test_warmup_schedule_by_hand():
    assert lm.warmup_lr(1, 1e-3, 100) == pytest.approx(1e-5)  # 1/100 of the peak
    assert lm.warmup_lr(50, 1e-3, 100) == pytest.approx(5e-4)  # half way up
    assert lm.warmup_lr(100, 1e-3, 100) == pytest.approx(1e-3)  # the peak
    assert lm.warmup_lr(400, 1e-3, 100) == pytest.approx(5e-4)  # sqrt(100/400) = 1/2
    with pytest.raises(ValueError, match="step >= 1"):
        lm.warmup_lr(0, 1e-3, 100)


def test_perplexity_from_nll_by_hand():
    # two predictions of probability 1/2 and 1/8: PPL = (1/2 * 1/8)^(-1/2) = 4
    assert lm.perplexity_from_nll(-math.log(1 / 2) - math.log(1 / 8), 2) == pytest.approx(4)
    assert lm.perplexity_from_nll(math.inf, 3) == math.inf
    with pytest.raises(ValueError, match="at least one prediction"):
        lm.perplexity_from_nll(1.0, 0)


class BigramTable(nn.Module):
    """A language model without state: the scores of the next word depend only on the current
    one, ``logits[b, t] = table[ids[b, t]]``, so its probabilities are known in closed form."""

    def __init__(self, V: int):
        super().__init__()
        self.vocab_size = V
        self.table = nn.Embedding(V, V)  # row u: the scores of the word after u

    def forward(self, ids):
        return self.table(ids)  # (B, T) -> (B, T, V)


def stream_perplexity_by_loop(model: BigramTable, sentences_ids) -> float:
    """The oracle: walk the stream </s> s_1 </s> s_2 </s> ... word by word."""
    log_p = torch.log_softmax(model.table.weight.detach().double(), dim=-1)  # (V, V)
    stream = [0] + [w for s in sentences_ids for w in [*s, 0]]
    nll = -sum(log_p[u, w].item() for u, w in zip(stream, stream[1:], strict=False))
    return math.exp(nll / (len(stream) - 1))


@pytest.mark.parametrize("batch_size, bptt", [(1, 1), (2, 3), (5, 100)])
def test_stateless_model_perplexity_matches_a_loop(batch_size, bptt):
    torch.manual_seed(0)
    model = BigramTable(6)
    rng = random.Random(2)
    sentences = [[rng.randint(1, 5) for _ in range(rng.randint(0, 5))] for _ in range(9)]
    expected = stream_perplexity_by_loop(model, sentences)
    got = lm.evaluate_perplexity(model, sentences, batch_size=batch_size, bptt=bptt)
    assert got == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("T, stride", [(1, 1), (4, 2), (6, 6), (50, 7)])
def test_windowed_perplexity_of_a_bigram_table_matches_the_loop(T, stride):
    # a bigram table's predictions do not depend on the context, so any way of cutting the
    # stream into windows must give the loop's perplexity, if each prediction is counted once
    torch.manual_seed(1)
    model = BigramTable(6)
    rng = random.Random(5)
    sentences = [[rng.randint(1, 5) for _ in range(rng.randint(0, 6))] for _ in range(7)]
    expected = stream_perplexity_by_loop(model, sentences)
    got = lm.evaluate_perplexity(model, sentences, batch_size=3, bptt=T, stride=stride)
    assert got == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="stride"):
        lm.evaluate_perplexity(model, sentences, bptt=T, stride=T + 1)


class TableWithOwnLoss(BigramTable):
    """A bigram table whose ``loss`` counts each target's nll twice: the training loop and the
    perplexity must use it (as they use an adaptive softmax's) instead of the logits."""

    def loss(self, ids, targets):
        logp = torch.log_softmax(self.table(ids), dim=-1)  # (B, T, V)
        keep = targets != lm.IGNORE_INDEX
        picked = logp[keep].gather(1, targets[keep][:, None])  # (n, 1)
        return -2 * picked.sum(), int(keep.sum())


def test_a_models_own_loss_is_used():
    torch.manual_seed(0)
    model = TableWithOwnLoss(5)
    sentences = [[1, 2, 3], [4, 2]]
    plain = BigramTable(5)
    plain.load_state_dict(model.state_dict())
    once = stream_perplexity_by_loop(plain, sentences)
    assert lm.evaluate_perplexity(model, sentences) == pytest.approx(once**2, rel=1e-5)
    assert lm.evaluate_perplexity(model, sentences, bptt=3, stride=2) == pytest.approx(
        once**2, rel=1e-5
    )
    history = lm.train_lm(model, sentences, None, steps=1, batch_size=1, bptt=50, seed=None)
    assert history["train_loss"][-1] == pytest.approx(2 * math.log(once), rel=1e-5)
    assert math.isnan(history["valid_ppl"][-1])


def test_warmup_and_shuffled_windows():
    """The learning rate follows the schedule, and shuffled windows are a seeded permutation of
    the stream's windows that covers each once per pass."""
    sentences = [[1, 2, 3], [3, 2], [1]] * 10  # stream of 1 + 9 * 10 = 91 tokens: 22 windows of 4
    seen = []

    class Spy(BigramTable):
        def forward(self, ids):
            seen.append(ids.clone())
            return super().forward(ids)

    model = Spy(4)
    lrs = []
    original_step = torch.optim.Adam.step

    def spy_step(self, *args, **kwargs):
        lrs.append(self.param_groups[0]["lr"])
        return original_step(self, *args, **kwargs)

    torch.optim.Adam.step = spy_step
    try:
        runs = [
            lm.train_lm(
                model,
                sentences,
                None,
                steps=5,
                batch_size=11,
                bptt=4,
                lr=0.1,
                warmup=4,
                shuffle=True,
                eval_at_start=False,
                eval_every=100,
                seed=7,
            )
            for _ in range(2)
        ]
    finally:
        torch.optim.Adam.step = original_step
    assert lrs[:5] == pytest.approx([lm.warmup_lr(s, 0.1, 4) for s in range(1, 6)])
    assert runs[0]["train_loss"] == runs[1]["train_loss"]
    inputs, _ = lm.windows(sentences, 4)  # (22, 4)
    first_pass = torch.cat(seen[:2])  # two batches of 11 windows: one whole pass
    as_rows = sorted(map(tuple, first_pass.tolist()))
    assert as_rows == sorted(map(tuple, inputs.tolist()))
    assert first_pass.tolist() != inputs.tolist()  # shuffled (seed 7 does not draw the identity)
    assert torch.equal(torch.cat(seen[:5]), torch.cat(seen[5:10]))  # the same seeded order


def test_training_a_stateless_model_learns_the_bigrams():
    """Trained on a stream where each word determines the next, the table learns it: its
    perplexity falls towards that of the true bigram probabilities, counted by hand here."""
    rng = random.Random(3)
    successor = {1: 2, 2: 3, 3: 1}
    sentences = []
    for _ in range(80):
        s = [rng.randint(1, 3)]
        while len(s) < 4:
            s.append(successor[s[-1]])
        sentences.append(s)
    stream = [0] + [w for s in sentences for w in [*s, 0]]
    pairs = Counter(zip(stream, stream[1:], strict=False))
    starts = Counter(stream[:-1])
    best = math.exp(
        -sum(c * math.log(c / starts[u]) for (u, _), c in pairs.items()) / (len(stream) - 1)
    )  # the MLE bigram perplexity: the lowest a bigram table can reach on its own training text
    model = BigramTable(4)
    calls = []

    class FakeRecorder:
        def log(self, step, **values):
            calls.append((step, sorted(values)))

    history = lm.train_lm(
        model,
        sentences,
        sentences,
        steps=60,
        batch_size=4,
        bptt=8,
        lr=0.3,
        eval_every=20,
        recorder=FakeRecorder(),
    )
    assert history["step"] == [0, 20, 40, 60]
    assert history["valid_ppl"][0] > 3  # untrained: near uniform over 4 words
    assert best <= history["valid_ppl"][-1] < best * 1.05
    assert [step for step, _ in calls] == [0, 20, 40, 60]
    assert calls[0][1] == ["seconds", "train_loss", "train_ppl", "valid_ppl", "words"]


def test_seeded_training_is_reproducible_and_logs_a_record(tmp_path):
    sentences = [[1, 2, 3], [3, 2], [1]] * 10
    model = BigramTable(4)  # no reset_parameters of its own: its Embedding's is used
    runs = [
        lm.train_lm(model, sentences, sentences, steps=6, batch_size=2, bptt=3, eval_every=3)
        for _ in range(2)
    ]
    assert runs[0]["valid_ppl"] == runs[1]["valid_ppl"]
    rec = Recorder("toy_lm", command="pytest", config={"steps": 6})
    lm.train_lm(
        model, sentences, sentences, steps=6, batch_size=2, bptt=3, eval_every=3, recorder=rec
    )
    rec.finish(path=tmp_path / "toy_lm.json", test_ppl=1.0)
    record = load_record("toy_lm", directory=tmp_path)
    assert [point["step"] for point in record["curve"]] == [0, 3, 6]
    assert [point["valid_ppl"] for point in record["curve"]] == runs[0]["valid_ppl"]


def test_the_training_loop_is_adam_with_clipping_and_a_schedule_written_out():
    """``training.train_loop`` against the same updates written by hand (Adam's formulas, the
    global gradient norm clipped, the learning rate times the schedule), and its logging: a point
    every ``log_every`` steps and after the last, the mean loss weighted, the first steps alone."""
    from nlpcourse.training import train_loop

    torch.manual_seed(0)
    X, Y = torch.randn(5, 8, 3), torch.randn(5, 8)  # five batches of a linear regression
    weights = [1, 2, 3, 1, 1]  # numbers of predictions, say

    def make():
        torch.manual_seed(1)
        return nn.Linear(3, 1)

    def loss_of(model, t):
        return ((model(X[t - 1]).squeeze(1) - Y[t - 1]) ** 2).mean() * 10  # large: clipped

    model, calls = make(), []

    class Logger:
        def log(self, step, **values):
            calls.append((step, values))

    curve = train_loop(
        model, lambda t: (loss_of(model, t), weights[t - 1]), steps=5, lr=0.1, clip=0.5,
        log_every=2, logger=Logger(), schedule=lambda t: 1 / t, log_first=1,
    )  # fmt: skip
    by_hand, losses = make(), []
    params = list(by_hand.parameters())
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    for t in range(1, 6):
        loss = loss_of(by_hand, t)
        grads = torch.autograd.grad(loss, params)
        norm = math.sqrt(sum(float((g**2).sum()) for g in grads))
        scale = min(1.0, 0.5 / (norm + 1e-6))
        with torch.no_grad():
            for p, g, m_i, v_i in zip(params, grads, m, v, strict=True):
                g = g * scale
                m_i.mul_(0.9).add_(0.1 * g)
                v_i.mul_(0.999).add_(0.001 * g**2)
                m_hat, v_hat = m_i / (1 - 0.9**t), v_i / (1 - 0.999**t)
                p.sub_((0.1 / t) * m_hat / (v_hat.sqrt() + 1e-8))
        losses.append(loss.item())
    for p, q in zip(model.parameters(), params, strict=True):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5)
    means = [
        (losses[0] * 1 + losses[1] * 2) / 3,
        (losses[2] * 3 + losses[3] * 1) / 4,
        losses[4],
    ]
    assert curve == pytest.approx(means, rel=1e-5)
    assert [step for step, _ in calls] == [1, 2, 4, 5]
    assert sorted(calls[0][1]) == ["train_loss"] and calls[0][1]["train_loss"] == pytest.approx(
        losses[0], rel=1e-5
    )
    assert calls[-1][1]["seen"] == sum(weights) and calls[-1][1]["seconds"] > 0
    assert isinstance(calls[-1][1]["seen"], int)  # a count of words stays a whole number
    # a time limit stops at the first logging point after it
    stopped = train_loop(
        make(), lambda t: (loss_of(model, t), 1.0), steps=5, lr=0.1, clip=0.5, log_every=2,
        max_minutes=0.0,
    )  # fmt: skip
    assert len(stopped) == 1


def test_training_leaves_evaluation_to_the_logger_and_the_model_in_training_mode():
    """Evaluating inside the logger (eval mode) does not leave the model in eval mode for the
    next training step: each step trains with dropout on."""
    from nlpcourse.training import evaluating, train_loop

    model, modes = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)), []

    def batch_loss(t):
        modes.append(model.training)
        return model(torch.ones(1, 2)).sum(), 1.0

    class EvalLogger:
        def log(self, step, **values):
            with evaluating(model):
                assert not model.training
            model.eval()  # even a logger that forgets to switch back

    train_loop(model, batch_loss, steps=4, lr=0.1, clip=1.0, log_every=1, logger=EvalLogger())
    assert modes == [True] * 4
    with pytest.raises(RuntimeError):
        with evaluating(model.train()):
            raise RuntimeError("inside")
    assert model.training


def test_bad_models_and_ids():
    class NoSize(nn.Module):
        def forward(self, ids):
            return ids

    with pytest.raises(TypeError, match="vocab_size"):
        lm.evaluate_perplexity(NoSize(), [[1]])
    with pytest.raises(ValueError, match="outside"):
        lm.evaluate_perplexity(BigramTable(3), [[1, 3]])
    with pytest.raises(ValueError, match="bptt"):
        lm.evaluate_perplexity(BigramTable(3), [[1]], bptt=0)
    with pytest.raises(ValueError, match="steps"):
        lm.train_lm(BigramTable(3), [[1]], [[1]], steps=0)


# --------------------------------------------------------------------------- not fitted


def test_one_not_fitted_error_everywhere():
    with pytest.raises(lm.NotFittedError, match="not fitted"):
        NGramLM(2).prob("a", ["b"])
    with pytest.raises(lm.NotFittedError, match="not fitted"):
        NGramLM(2).vocab  # noqa: B018
    with pytest.raises(lm.NotFittedError, match="not fitted"):
        hmm.HMM().tag(["a"])
    with pytest.raises(lm.NotFittedError, match="not fitted"):
        hmm.HMM().sentence_tables(["a"])
    with pytest.raises(lm.NotFittedError, match="not fitted"):
        hmm.MostFrequentTagger().tag(["a"])
    # code that caught ValueError (or AttributeError, as hasattr does) keeps working
    assert issubclass(lm.NotFittedError, ValueError)
    assert not hasattr(NGramLM(2), "vocab")
