"""Tests of nlpcourse.seq2seq against independent oracles: brute-force enumeration of every output
for beam search, torch's scaled_dot_product_attention, hand computation of the additive score,
brute-force recursion for the edit distance, per-word computations for batching and masking, and a
copy task the model must learn."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import pytest
import torch

from nlpcourse import seq2seq as s2s
from nlpcourse.seq2seq import EOS_ID, PAD_ID, Seq2Seq


def tiny_model(
    attention: str = "additive",
    seed: int = 0,
    V_y: int = 5,
    H: int = 8,
    cell: str = "gru",
    placement: str = "luong",
    enc_layers: int = 1,
) -> Seq2Seq:
    """V_y = 5: <pad> <s> </s> and two phones, so the search space is small enough to enumerate."""
    torch.manual_seed(seed)
    model = Seq2Seq(
        V_x=6, V_y=V_y, E=4, H=H, attention=attention, cell=cell, placement=placement,
        enc_layers=enc_layers,
    )  # fmt: skip
    with torch.no_grad():  # sharper distributions than the initialisation gives, to test ranking
        model.W_o.weight.mul_(6.0)
    return model.eval()


SRC = torch.tensor([[3, 4, 5, 2], [2, 3, 0, 0], [5, 0, 0, 0]])  # (B, S), three words
TGT = s2s.pad_batch([[1, 3, 4, 2], [1, 4, 2], [1, 3, 3, 4, 4, 2]])  # (B, T + 1)
# every encoder/decoder cell with each attention placement
VARIANTS = [(c, p) for c in s2s.CELLS for p in s2s.PLACEMENTS]


# ------------------------------------------------------------------------------------ attention


def test_masked_softmax_sums_to_one_and_masked_positions_are_exactly_zero():
    torch.manual_seed(0)
    scores = torch.randn(4, 6) * 10
    mask = torch.tensor(
        [[1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0], [0, 1, 0, 1, 0, 1]]
    )
    a = s2s.masked_softmax(scores, mask.bool())
    assert torch.allclose(a.sum(1), torch.ones(4))
    assert (a[mask == 0] == 0).all()
    # the unmasked part is the plain softmax of the unmasked scores (row 1 by hand)
    e = [math.exp(scores[1, j].item()) for j in range(2)]
    assert a[1, :2].tolist() == pytest.approx([x / sum(e) for x in e])


def test_masked_softmax_rejects_an_all_masked_row():
    with pytest.raises(ValueError, match="at least one True"):
        s2s.masked_softmax(torch.zeros(2, 3), torch.tensor([[1, 0, 0], [0, 0, 0]]).bool())


@pytest.mark.parametrize("kind", ["dot", "bilinear", "additive"])
def test_attention_weights_sum_to_one_and_ignore_padding(kind):
    torch.manual_seed(1)
    att = s2s.make_attention(kind, 6, 6)
    q, keys = torch.randn(3, 6), torch.randn(3, 5, 6)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]]).bool()
    w, c = att(q, keys, mask)
    assert w.shape == (3, 5) and c.shape == (3, 6)
    assert torch.allclose(w.sum(1), torch.ones(3)) and (w[~mask] == 0).all()
    # what sits under the mask does not matter
    keys2 = keys.clone()
    keys2[~mask] = 1e3
    w2, c2 = att(q, keys2, mask)
    assert torch.allclose(w, w2) and torch.allclose(c, c2)
    assert torch.allclose(c[2], keys[2, 0])  # one position: all weight on it


def test_dot_attention_equals_torch_scaled_dot_product_attention_with_scale_1():
    torch.manual_seed(2)
    q, keys = torch.randn(3, 4), torch.randn(3, 5, 4)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]]).bool()
    w, c = s2s.DotAttention()(q, keys, mask)
    expected = torch.nn.functional.scaled_dot_product_attention(
        q.unsqueeze(1), keys, keys, attn_mask=mask.unsqueeze(1), scale=1.0
    ).squeeze(1)  # (B, 1, D) -> (B, D)
    assert torch.allclose(c, expected, atol=1e-6)


def test_additive_score_equals_a_hand_computation():
    torch.manual_seed(3)
    att = s2s.AdditiveAttention(H=2, D=3, A=2)
    q, keys = torch.randn(1, 2), torch.randn(1, 4, 3)
    W1, W2, b2, v = att.W_1.weight, att.W_2.weight, att.W_2.bias, att.v.weight[0]
    for j in range(4):  # v^T tanh(W_1 s + W_2 k_j + b), one number at a time
        total = 0.0
        for a in range(2):
            inner = sum(W1[a, i].item() * q[0, i].item() for i in range(2))
            inner += sum(W2[a, i].item() * keys[0, j, i].item() for i in range(3)) + b2[a].item()
            total += v[a].item() * math.tanh(inner)
        assert att.score(q, keys)[0, j].item() == pytest.approx(total, abs=1e-6)


def test_bilinear_score_with_identity_is_the_dot_product():
    torch.manual_seed(4)
    att = s2s.BilinearAttention(4, 4)
    with torch.no_grad():
        att.W.weight.copy_(torch.eye(4))
    q, keys = torch.randn(2, 4), torch.randn(2, 3, 4)
    assert torch.allclose(att.score(q, keys), s2s.DotAttention().score(q, keys), atol=1e-6)


# ------------------------------------------------------------------------------ the model, batches


@pytest.mark.parametrize("cell,placement", VARIANTS)
@pytest.mark.parametrize("attention", s2s.ATTENTIONS)
def test_padding_changes_nothing_a_batch_equals_each_word_alone(attention, cell, placement):
    model = tiny_model(attention, cell=cell, placement=placement)
    tgt = TGT
    logp = model(SRC, tgt)  # (B, T, V)
    for b in range(3):
        n_src, n_tgt = int((SRC[b] > 0).sum()), int((tgt[b] > 0).sum())
        alone = model(SRC[b : b + 1, :n_src], tgt[b : b + 1, :n_tgt])
        assert torch.allclose(logp[b, : n_tgt - 1], alone[0], atol=1e-5)


def test_loss_is_the_mean_over_real_phones_only():
    model = tiny_model()
    tgt = s2s.pad_batch([[1, 3, 4, 2], [1, 4, 2], [1, 3, 3, 4, 4, 2]])
    logp = model(SRC, tgt)
    total, n = 0.0, 0
    for b in range(3):
        for t in range(tgt.shape[1] - 1):
            if tgt[b, t + 1] != PAD_ID:
                total -= logp[b, t, tgt[b, t + 1]].item()
                n += 1
    assert model.loss(SRC, tgt).item() == pytest.approx(total / n, rel=1e-5)
    assert n == 3 + 2 + 5


def test_the_model_never_outputs_pad_or_bos():
    logp = tiny_model()(SRC, s2s.pad_batch([[1, 3, 2]] * 3))
    assert torch.isinf(logp[..., [0, 1]]).all()
    assert torch.allclose(logp.exp().sum(-1), torch.ones(3, 2))


# -------------------------------------- the whole model by hand, with torch.nn cells (an oracle)


def torch_cell(layer, cell: str) -> torch.nn.Module:
    """``torch.nn.GRUCell`` or ``LSTMCell`` with the weights of one of chapter 4's layers."""
    Cell = torch.nn.GRUCell if cell == "gru" else torch.nn.LSTMCell
    out = Cell(layer.input_size, layer.hidden_size).to(layer.weight_ih_l0.dtype)
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(out, name).copy_(getattr(layer, f"{name}_l0"))
    return out


def by_hand(model: Seq2Seq, x: list[int], y_in: list[int]) -> torch.Tensor:
    """log P(y_t | y_<t, x) (T, V) for one word ``x`` and decoder inputs ``y_in``, written from the
    chapter's equations one position and one step at a time, with torch.nn cells."""
    H, cell = model.H, model.cell
    dec = torch_cell(model.dec, cell)
    layers = [(model.enc_fwd, model.enc_bwd), *model.enc_upper]  # bottom to top

    def run(rnn, inputs, h):
        m, out = torch.zeros_like(h), []
        for inp in inputs:  # (1, E')
            h, m = rnn(inp, (h, m)) if cell == "lstm" else (rnn(inp, h), m)
            out.append(h)
        return out, m

    inputs = [model.emb_x(torch.tensor([i])) for i in x]  # S of (1, E)
    zero = torch.zeros(1, H // 2, dtype=inputs[0].dtype)
    for enc_f, enc_b in layers:  # each layer reads both directions of the one below
        fwd, _ = run(torch_cell(enc_f, cell), inputs, zero)
        bwd, _ = run(torch_cell(enc_b, cell), inputs[::-1], zero)
        bwd = bwd[::-1]
        inputs = [torch.cat([f, b], 1) for f, b in zip(fwd, bwd, strict=True)]  # S of (1, D)
    keys = [torch.cat([f, b], 1) for f, b in zip(fwd, bwd, strict=True)]  # (s2s-enc), (1, D)
    summary = torch.cat([fwd[-1], bwd[0]], 1)  # (1, D)

    def score(q, k):  # (att-score)
        att = model.attention
        if model.attention_kind == "dot":
            return (q * k).sum()
        if model.attention_kind == "bilinear":
            return (q @ att.W.weight @ k.T).sum()
        return (att.v.weight @ torch.tanh(att.W_1.weight @ q.T + att.W_2.weight @ k.T
                                          + att.W_2.bias.unsqueeze(1))).sum()  # fmt: skip

    def context(q):  # (att-context); without attention the fixed summary
        if model.attention_kind == "none":
            return summary
        a = torch.softmax(torch.stack([score(q, k) for k in keys]), 0)
        return sum(a_j * k_j for a_j, k_j in zip(a, keys, strict=True))

    s = torch.tanh(model.W_init(summary))  # (s2s-init)
    m = torch.zeros_like(s)
    out = []
    for y in y_in:
        inp = model.emb_y(torch.tensor([y]))  # (1, E)
        if model.placement == "bahdanau":  # query s_{t-1}; the context enters the step
            c = context(s)
            inp = torch.cat([inp, c], 1)
        if cell == "lstm":
            s, m = dec(inp, (s, m))
        else:
            s = dec(inp, s)
        if model.placement == "luong":  # query s_t
            c = context(s)
        logits = model.W_o(torch.tanh(model.W_c(torch.cat([c, s], 1))))[0]  # (s2s-dec), (V,)
        logits[[PAD_ID, s2s.BOS_ID]] = -math.inf
        out.append(torch.log_softmax(logits, 0))
    return torch.stack(out)  # (T, V)


def assert_equals_by_hand(model: Seq2Seq) -> None:
    """The model's log-probabilities on the padded batch (SRC, TGT), word by word, by_hand's."""
    with torch.no_grad():
        logp = model(SRC, TGT)  # (B, T, V), a padded batch
        for b in range(3):
            x = SRC[b][SRC[b] > 0].tolist()
            y_in = TGT[b][TGT[b] > 0].tolist()[:-1]
            expected = by_hand(model, x, y_in)  # (T_b, V)
            torch.testing.assert_close(logp[b, : len(y_in)], expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("cell,placement", VARIANTS)
@pytest.mark.parametrize("attention", s2s.ATTENTIONS)
def test_the_model_equals_its_equations_written_with_torch_nn_cells(attention, cell, placement):
    assert_equals_by_hand(tiny_model(attention, seed=7, cell=cell, placement=placement))


@pytest.mark.parametrize("cell", s2s.CELLS)
@pytest.mark.parametrize("attention", ["bilinear", "none"])
def test_a_deep_encoder_equals_its_equations_written_with_torch_nn_cells(attention, cell):
    assert_equals_by_hand(tiny_model(attention, seed=9, cell=cell, enc_layers=3))


@pytest.mark.parametrize("cell", s2s.CELLS)
def test_the_encoder_equals_torch_nn_bidirectional_layers(cell):
    """The keys of a padded batch, word by word, against ``torch.nn.GRU`` / ``LSTM`` with
    ``num_layers=2, bidirectional=True`` and the same weights, on each word alone."""
    model = tiny_model("dot", seed=5, H=6, cell=cell, enc_layers=2)
    Layer = torch.nn.GRU if cell == "gru" else torch.nn.LSTM
    oracle = Layer(4, 3, num_layers=2, bidirectional=True)
    ours = [(model.enc_fwd, model.enc_bwd), *model.enc_upper]
    with torch.no_grad():
        for k, (fwd, bwd) in enumerate(ours):
            for suffix, layer in (("", fwd), ("_reverse", bwd)):
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    getattr(oracle, f"{name}_l{k}{suffix}").copy_(getattr(layer, f"{name}_l0"))
        memory, _ = model.encode(SRC)  # keys (B, S, D)
        for b in range(3):
            x = SRC[b][SRC[b] > 0]  # (S_b,)
            expected, _ = oracle(model.emb_x(x).unsqueeze(1))  # (S_b, 1, D)
            torch.testing.assert_close(
                memory.keys[b, : len(x)], expected[:, 0], atol=1e-6, rtol=1e-5
            )
            assert (memory.keys[b, len(x) :] == 0).all()


def test_bahdanau_placement_queries_the_previous_state():
    """Its first step's attention weights depend on s_0 alone: not on the first input phone."""
    model = tiny_model("additive", seed=3, placement="bahdanau")
    memory, s_0 = model.encode(SRC)
    w_a = model.step(torch.tensor([3, 3, 3]), s_0, memory)[2]
    w_b = model.step(torch.tensor([4, 1, 2]), s_0, memory)[2]
    assert torch.equal(w_a, w_b)
    luong = tiny_model("additive", seed=3)
    memory, s_0 = luong.encode(SRC)
    w_a = luong.step(torch.tensor([3, 3, 3]), s_0, memory)[2]
    w_b = luong.step(torch.tensor([4, 1, 2]), s_0, memory)[2]
    assert not torch.allclose(w_a, w_b)


@pytest.mark.parametrize("cell", s2s.CELLS)
def test_bahdanau_gradients_equal_finite_differences(cell):
    """Backpropagation through the step-by-step decoder (and the LSTM's hand-written backward
    pass, step by step), against central differences in float64."""
    model = tiny_model("additive", seed=4, H=4, cell=cell, placement="bahdanau").double()
    names = ["dec.weight_hh_l0", "attention.W_1.weight", "W_init.bias", "emb_x.weight"]
    params = dict(model.named_parameters())

    def loss(*values):
        logp = torch.func.functional_call(model, dict(zip(names, values, strict=True)), (SRC, TGT))
        gold = TGT[:, 1:]
        return torch.nn.functional.nll_loss(logp.reshape(-1, model.V_y), gold.reshape(-1),
                                            ignore_index=PAD_ID)  # fmt: skip

    inputs = tuple(params[n].detach().clone().requires_grad_() for n in names)
    assert torch.autograd.gradcheck(loss, inputs, eps=1e-6, atol=1e-6)


# -------------------------------------------------------------------------------------- decoding


def all_outputs(V_y: int, max_len: int) -> list[list[int]]:
    """Every output the decoder can produce: phones then </s>, or max_len phones and no </s>."""
    phones = range(3, V_y)
    outs = []
    for n in range(max_len):
        outs += [[*p, EOS_ID] for p in itertools.product(phones, repeat=n)]
    outs += [list(p) for p in itertools.product(phones, repeat=max_len)]
    return outs


def brute_force_best(model, src, max_len, alpha):
    """argmax over all outputs of log P(y | x) / |y|^alpha, scored by teacher forcing."""
    outs = all_outputs(model.V_y, max_len)
    logps = model.sequence_logprob(src.expand(len(outs), -1), outs, eos=False)
    scores = [lp / len(y) ** alpha for lp, y in zip(logps, outs, strict=True)]
    best = max(range(len(outs)), key=scores.__getitem__)
    return s2s._until_eos(outs[best]), scores[best]


@pytest.mark.parametrize("attention", ["none", "dot", "additive"])
@pytest.mark.parametrize("cell,placement", VARIANTS)
def test_beam_size_1_is_greedy(attention, cell, placement):
    for seed in range(3):
        model = tiny_model(attention, seed, V_y=8, cell=cell, placement=placement)
        greedy = model.greedy(SRC, max_len=8)
        beam, _ = model.beam_search(SRC, beam_size=1, max_len=8)
        assert beam == greedy


@pytest.mark.parametrize(
    "alpha,cell,placement",
    [(0.0, "gru", "luong"), (0.7, "gru", "luong"), (1.0, "gru", "luong"),
     (0.7, "lstm", "luong"), (0.7, "gru", "bahdanau"), (1.0, "lstm", "bahdanau")],
)  # fmt: skip
def test_a_beam_as_wide_as_the_search_space_is_exhaustive_search(alpha, cell, placement):
    max_len = 4
    K = len(all_outputs(5, max_len))  # 2^0 + ... + 2^3 ended outputs and 2^4 unended: 31
    for seed in range(4):
        model = tiny_model("additive", seed, cell=cell, placement=placement)
        seqs, scores = model.beam_search(SRC, beam_size=K, max_len=max_len, length_penalty=alpha)
        for b in range(3):
            src = SRC[b : b + 1, : int((SRC[b] > 0).sum())]
            best, best_score = brute_force_best(model, src, max_len, alpha)
            assert seqs[b] == best
            assert scores[b] == pytest.approx(best_score, abs=1e-5)


def test_beam_scores_are_sums_of_the_model_log_probabilities():
    model = tiny_model("bilinear", 5, V_y=9)
    seqs, scores = model.beam_search(SRC, beam_size=3, max_len=6, length_penalty=0.0)
    ended = [len(y) < 6 for y in seqs]
    recomputed = model.sequence_logprob(SRC, seqs)
    for b in range(3):
        if ended[b]:
            assert scores[b] == pytest.approx(recomputed[b], abs=1e-5)


@pytest.mark.parametrize(
    "K,alpha,cell,placement",
    [(2, 0.0, "gru", "luong"), (4, 1.0, "gru", "luong"), (6, 0.5, "gru", "luong"),
     (4, 0.5, "lstm", "luong"), (4, 0.5, "gru", "bahdanau"), (6, 1.0, "lstm", "bahdanau")],
)  # fmt: skip
def test_batched_beam_search_equals_the_per_hypothesis_loop(K, alpha, cell, placement):
    for seed in range(3):
        model = tiny_model("additive", seed, V_y=9, cell=cell, placement=placement)
        seqs, scores = model.beam_search(SRC, K, 7, alpha)
        for b in range(3):
            y, score = s2s.beam_search_loop(model, SRC[b][SRC[b] > 0], K, 7, alpha)
            assert seqs[b] == y and scores[b] == pytest.approx(score, abs=1e-5)


def test_sampling_at_low_temperature_is_greedy_and_sampling_is_seeded():
    model = tiny_model("dot", 1, V_y=8)
    gen = torch.Generator().manual_seed(0)
    assert model.sample(SRC, 8, temperature=1e-4, generator=gen) == model.greedy(SRC, 8)
    a = model.sample(SRC, 8, 1.0, torch.Generator().manual_seed(3))
    b = model.sample(SRC, 8, 1.0, torch.Generator().manual_seed(3))
    assert a == b


def test_greedy_attention_maps_have_one_row_per_output_and_one_column_per_letter():
    model = tiny_model("additive", 2, V_y=8)
    seqs, maps = model.greedy(SRC, 6, return_attention=True)
    for b, (y, A) in enumerate(zip(seqs, maps, strict=True)):
        n_src = int((SRC[b] > 0).sum())
        assert A.shape[1] == n_src and A.shape[0] in (len(y), len(y) + 1)
        assert torch.allclose(A.sum(1), torch.ones(A.shape[0]))


def test_decoding_leaves_a_training_model_in_training_mode_even_on_bad_input():
    """Decoding switches dropout off while it runs and gives the model back in the mode it came
    in: after a clean run, after an error, and through the step-function interface."""
    model = tiny_model().train()
    bad = torch.tensor([[0, 0], [3, 4]])  # an empty word
    for decode in (model.greedy, model.beam_search, model.sample):
        decode(SRC)
        assert model.training
        with pytest.raises(ValueError, match="empty"):
            decode(bad)
        assert model.training, decode.__name__
    s2s.beam_search_loop(model, SRC[0][SRC[0] > 0], 2, 5)
    assert model.training
    step, s_0 = s2s.model_step(model, SRC[1][SRC[1] > 0])
    assert model.training
    s2s.greedy_decode(step, s_0, 5)
    assert model.training
    model.eval()
    model.greedy(SRC)
    s2s.beam_search_loop(model, SRC[0][SRC[0] > 0], 2, 5)
    assert not model.training


def test_the_step_function_decodes_without_dropout_in_a_training_model():
    """``model_step`` on a model in training mode with dropout gives the eval-mode outputs."""
    torch.manual_seed(0)
    model = Seq2Seq(6, 5, E=4, H=8, dropout=0.5).eval()
    expected = [model.greedy(SRC[b : b + 1])[0] for b in range(3)]
    model.train()
    for b in range(3):
        step, s_0 = s2s.model_step(model, SRC[b][SRC[b] > 0])
        assert s2s.greedy_decode(step, s_0, 30) == expected[b]


def test_bad_input_gets_a_clear_error():
    model = tiny_model()
    with pytest.raises(ValueError, match="beam_size"):
        model.beam_search(SRC, beam_size=0)
    with pytest.raises(ValueError, match="empty"):
        model.greedy(torch.tensor([[0, 0], [3, 4]]))
    with pytest.raises(ValueError, match="ids must lie"):
        model.greedy(torch.tensor([[3, 40]]))
    with pytest.raises(ValueError, match="temperature"):
        model.sample(SRC, temperature=0.0)
    with pytest.raises(ValueError, match="attention must be one of"):
        Seq2Seq(5, 5, attention="cosine")
    with pytest.raises(ValueError, match="cell must be one of"):
        Seq2Seq(5, 5, cell="rnn")
    with pytest.raises(ValueError, match="placement must be one of"):
        Seq2Seq(5, 5, placement="before")
    with pytest.raises(ValueError, match="enc_layers must be an integer >= 1, got 0"):
        Seq2Seq(5, 5, enc_layers=0)
    src, tgt = s2s.Vocab("abc"), s2s.Vocab(["AA1", "B"], specials=(s2s.PAD, s2s.BOS, s2s.EOS))
    with pytest.raises(ValueError, match=r"unknown symbol\(s\) \['é'\]"):
        src.encode("cabé")
    with pytest.raises(ValueError, match="empty"):
        tgt.encode(())
    assert tgt.decode(tgt.encode(("B", "AA1"), bos=True, eos=True) + [0]) == ("B", "AA1")


# --------------------------------------------------------------------------------------- metrics


@functools.cache
def levenshtein(a: str, b: str) -> int:
    """The textbook recursion, with no table."""
    if not a or not b:
        return len(a) + len(b)
    return min(
        levenshtein(a[1:], b) + 1,
        levenshtein(a, b[1:]) + 1,
        levenshtein(a[1:], b[1:]) + (a[0] != b[0]),
    )


def test_edit_distance_equals_brute_force_recursion_on_all_short_strings():
    words = ["".join(p) for n in range(5) for p in itertools.product("abc", repeat=n)]
    for a in words[::3]:
        for b in words[::5]:
            assert s2s.edit_distance(a, b) == levenshtein(a, b), (a, b)
    assert s2s.edit_distance("kitten", "sitting") == 3  # the classic example


def test_wer_and_per_against_any_pronunciation_by_hand():
    preds = [("T", "AH0", "M"), ("AE1", "B"), ("K",)]
    refs = [[("T", "AH0", "M", "EY1")], [("EY1", "B", "IY1"), ("AE1", "B")], [("K", "AE1", "T")]]
    wer, per = s2s.error_rates(preds, refs)
    assert wer == pytest.approx(2 / 3)  # the second word matches its second pronunciation
    assert per == pytest.approx((1 + 0 + 2) / (4 + 2 + 3))
    # brute force: the closest reference by the recursion
    words = [("a", "b"), ("b",), ("a", "a", "b")]
    refs2 = [[("a",), ("b", "b")], [("b",)], [("b", "a"), ("a", "b", "b", "a")]]
    d = [
        min((levenshtein("".join(p), "".join(r)), len(r)) for r in rs)
        for p, rs in zip(words, refs2, strict=True)
    ]
    assert s2s.error_rates(words, refs2) == (
        pytest.approx(2 / 3),
        pytest.approx(sum(x for x, _ in d) / sum(n for _, n in d)),
    )
    with pytest.raises(ValueError, match="predictions for"):
        s2s.error_rates(preds, refs[:2])


# -------------------------------------------------------------------------------------- learning


def test_the_model_learns_to_reverse_words():
    """A smoke test of the training loop: reversing strings of 1 to 5 letters, >= 99% exact."""
    g = torch.Generator().manual_seed(0)
    letters = "abcdef"

    def word() -> str:
        n = int(torch.randint(1, 6, (1,), generator=g))
        return "".join(letters[int(i)] for i in torch.randint(0, 6, (n,), generator=g))

    src, tgt = s2s.Vocab(letters), s2s.Vocab(letters, specials=(s2s.PAD, s2s.BOS, s2s.EOS))
    train_words = [word() for _ in range(3000)]
    pairs = [(src.encode(w), tgt.encode(w[::-1], bos=True, eos=True)) for w in train_words]
    torch.manual_seed(0)
    model = Seq2Seq(len(src), len(tgt), E=16, H=64, attention="dot")
    s2s.train(model, pairs, steps=500, batch_size=64, lr=5e-3, log_every=100)  # ~6 s of CPU
    test_words = sorted({word() for _ in range(300)})
    out = s2s.transcribe(model, test_words, src, tgt, max_len=8)
    exact = sum("".join(o) == w[::-1] for o, w in zip(out, test_words, strict=True))
    assert exact / len(test_words) >= 0.99


# ------------------------------------------------------------------------------------------ data


def test_cmudict_split_is_by_word_disjoint_and_fixed():
    from nlpcourse.data import cmudict_pronunciations, cmudict_split

    prons = cmudict_pronunciations()
    assert prons["phoneme"] == [("F", "OW1", "N", "IY0", "M")]
    train, valid, test = cmudict_split()
    assert (len(train), len(valid), len(test)) == (105_743, 5_875, 5_875)
    assert not (set(train) & set(test)) and not (set(train) & set(valid))
    for part in (train, valid, test):  # every pronunciation of a word stays with it
        for w in list(part)[:2000]:
            assert part[w] == prons[w]
    no_stress = cmudict_split(strip_stress=True)[2]
    assert set(no_stress) == set(test)
    assert all(p[-1] not in "012" for prs in no_stress.values() for pr in prs for p in pr)


# ---------------------------------------------------------------------------------- recorded run


def test_the_recorded_run_reproduces_its_first_losses():
    """Re-run the first ``log_every`` steps of the recorded command: the same training loss."""
    from nlpcourse import seq2seq_runs as runs
    from nlpcourse.data import cmudict_split
    from nlpcourse.records import load_record

    try:
        record = load_record("seq2seq_g2p")
    except FileNotFoundError:
        pytest.skip("no recorded run yet")
    config = runs.RunConfig.from_flat(record["config"])
    code = runs.CONFIGS["g2p"]  # the command's configuration, but the steps the record ran
    code = dataclasses.replace(
        code, training=dataclasses.replace(code.training, steps=config.training.steps)
    )
    assert config == code
    train_split = cmudict_split()[0]
    model, src, tgt = runs.build(config, train_split)
    pairs = s2s.g2p_pairs(train_split, src, tgt)
    n = config.training.log_every
    curve = runs.train_config(model, pairs, config.training, steps=n)
    assert record["curve"][0]["step"] == n
    assert curve[0] == pytest.approx(record["curve"][0]["train_loss"], rel=1e-4)


def test_a_configuration_builds_the_model_it_names_placement_included():
    """``build`` passes every model setting of a configuration on, the placement too (it once
    dropped it), and a record's flat configuration reads back into the same parts."""
    from nlpcourse import seq2seq_runs as runs

    train_split = {"ab": [("B",)], "ba": [("B", "AA1")]}
    config = runs.CONFIGS["g2p"]
    for placement in s2s.PLACEMENTS:
        model_config = dataclasses.replace(config.model, placement=placement, H=8, E=4)
        model, _, _ = runs.build(dataclasses.replace(config, model=model_config), train_split)
        assert model.placement == placement
        expected = 4 + 8 if placement == "bahdanau" else 4  # Bahdanau's step reads [e ; c]
        assert model.dec.input_size == expected
    assert runs.RunConfig.from_flat(config.flat()) == config
    old_record = {k: v for k, v in config.flat().items() if k != "placement"}  # before the key
    assert runs.RunConfig.from_flat(old_record).model.placement == "luong"
    with pytest.raises(ValueError, match="unknown configuration keys"):
        runs.RunConfig.from_flat({**config.flat(), "placment": "bahdanau"})


def test_the_recorded_command_still_runs_from_the_model_module():
    """The records and the README name ``python -m nlpcourse.seq2seq train``: it still parses."""
    import subprocess
    import sys

    for module in ("nlpcourse.seq2seq", "nlpcourse.seq2seq_runs"):
        out = subprocess.run(
            [sys.executable, "-m", module, "train", "--help"], capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        assert "--config" in out.stdout and "g2p" in out.stdout


# ---------------------------------------------------------- the functional pieces (the exercise)


def test_dot_attention_and_additive_scores_equal_the_modules():
    torch.manual_seed(6)
    q, keys = torch.randn(3, 4), torch.randn(3, 5, 4)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]]).bool()
    w, c = s2s.dot_attention(q, keys, mask)
    w_mod, c_mod = s2s.DotAttention()(q, keys, mask)
    assert torch.allclose(w, w_mod, atol=1e-6) and torch.allclose(c, c_mod, atol=1e-6)
    att = s2s.AdditiveAttention(H=4, D=4, A=3)
    with torch.no_grad():
        att.W_2.bias.zero_()  # the functional form has no bias inside the tanh
    scores = s2s.additive_scores(q, keys, att.W_1.weight, att.W_2.weight, att.v.weight[0])
    assert torch.allclose(scores, att.score(q, keys), atol=1e-6)


def test_greedy_decode_and_beam_search_on_a_step_function_equal_the_model():
    for seed in range(3):
        model = tiny_model("additive", seed, V_y=8)
        greedy = model.greedy(SRC, 7)
        beam, scores = model.beam_search(SRC, 3, 7, 0.5)
        for b in range(3):
            step, s_0 = s2s.model_step(model, SRC[b][SRC[b] > 0])
            assert s2s.greedy_decode(step, s_0, 7) == greedy[b]
            y, score = s2s.beam_search(step, s_0, 3, 7, 0.5)
            assert y == beam[b] and score == pytest.approx(scores[b], abs=1e-5)


def test_align_has_as_many_mismatches_as_the_edit_distance():
    words = ["".join(p) for n in range(4) for p in itertools.product("ab", repeat=n)]
    for a in words:
        for b in words:
            pairs = s2s.align(a, b)
            assert [p for p, _ in pairs if p is not None] == list(a)
            assert [r for _, r in pairs if r is not None] == list(b)
            assert sum(p != r for p, r in pairs) == levenshtein(a, b)


def test_the_linear_decay_falls_from_the_full_rate_to_one_nth_and_stays():
    """(N - t + 1) / N by hand for N = 4: steps 1..4 give 1, 3/4, 1/2, 1/4; later steps 1/4."""
    assert [s2s.linear_decay(t, 4) for t in range(1, 7)] == [1.0, 0.75, 0.5, 0.25, 0.25, 0.25]
