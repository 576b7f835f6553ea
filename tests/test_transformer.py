"""nlpcourse.transformer against independent oracles: torch.nn's attention, LayerNorm and
transformer layers with copied weights (float64), torch's fused attention, brute-force search and
hand values."""

import itertools
import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from nlpcourse import transformer
from nlpcourse.lm import evaluate_perplexity, stream, train_lm
from nlpcourse.testing import copy_from_torch_layer, copy_from_torch_mha
from nlpcourse.transformer import (
    Block,
    BlockConfig,
    DecoderLayer,
    EncoderLayer,
    KVCache,
    LayerNorm,
    LearnedPositions,
    MultiHeadAttention,
    NoPositions,
    Seq2SeqTransformer,
    SinusoidalPositions,
    Transformer,
    TransformerLM,
    causal_mask,
    fused_attention,
    merge_heads,
    multi_head_attention_bmm,
    padding_mask,
    saving_attention,
    scaled_dot_product_attention,
    scaled_dot_product_attention_loop,
    sinusoidal_encoding,
    split_heads,
)

TIGHT = {"atol": 1e-12, "rtol": 1e-10}


@pytest.fixture(autouse=True)
def _float64():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def random_mask(B, T_q, T_k, seed):
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(B, 1, T_q, T_k, generator=g) < 0.6
    mask[..., 0] = True  # every query may attend to something (torch gives NaN otherwise)
    return mask


# ================================================================== scaled dot-product attention


@pytest.mark.parametrize("masked", [False, True])
def test_attention_equals_torch_fused_kernel(masked):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)
    mask = random_mask(2, 5, 7, 1) if masked else None
    z, alpha = scaled_dot_product_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(z, expected, **TIGHT)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(2, 3, 5), **TIGHT)
    if masked:
        assert (alpha[~mask.expand_as(alpha)] == 0).all()


def test_attention_by_hand():
    # two keys, scores 0 and d_k/sqrt(d_k) * 1 = 2 for d_k = 4: weights softmax([0, 2])
    q = torch.tensor([[1.0, 1.0, 1.0, 1.0]])
    k = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    v = torch.tensor([[10.0], [20.0]])
    z, alpha = scaled_dot_product_attention(q, k, v)
    a1 = math.exp(2) / (1 + math.exp(2))
    torch.testing.assert_close(alpha, torch.tensor([[1 - a1, a1]]), **TIGHT)
    torch.testing.assert_close(z, torch.tensor([[10 * (1 - a1) + 20 * a1]]), **TIGHT)


def test_loop_equals_vectorised_with_masks_and_an_empty_row():
    torch.manual_seed(2)
    q, k, v = torch.randn(4, 6), torch.randn(5, 6), torch.randn(5, 3)
    mask = torch.rand(4, 5) < 0.5
    mask[2] = False  # a query that may attend to nothing
    for m in (None, mask, causal_mask(5)[:4]):
        z_loop, a_loop = scaled_dot_product_attention_loop(q, k, v, m)
        z_vec, a_vec = scaled_dot_product_attention(q, k, v, m)
        torch.testing.assert_close(z_loop, z_vec, **TIGHT)
        torch.testing.assert_close(a_loop, a_vec, **TIGHT)
    z, alpha = scaled_dot_product_attention(q, k, v, mask)
    assert not torch.isnan(z).any() and (z[2] == 0).all() and (alpha[2] == 0).all()


def _fused(q, k, v, mask):  # torch's kernel; its rows with no allowed key are NaN, ours 0
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).nan_to_num(0.0)


@pytest.mark.parametrize("mask_kind", ["none", "2d", "padding", "per-head", "causal", "cached"])
def test_fused_path_equals_torch_loop_and_lesson_version(mask_kind):
    torch.manual_seed(3)
    B, H, T_q, T_k = 2, 3, 5, 7
    q1, k1, v1 = (torch.randn(B, H, T, 4, requires_grad=True) for T in (T_q, T_k, T_k))
    q2, k2, v2 = (x.detach().clone().requires_grad_(True) for x in (q1, k1, v1))
    causal = mask_kind in ("causal", "cached")
    mask = {
        "none": None,
        "2d": torch.rand(T_q, T_k) < 0.5,  # with some rows that may attend to nothing
        "padding": padding_mask(torch.tensor([7, 0]), T_k),  # (B, 1, 1, T_k); row b=1 empty
        "per-head": torch.rand(B, H, T_q, T_k) < 0.5,
        # the 5 queries are the last 5 of 7 positions (2 positions in a KV cache before them)
        "causal": torch.arange(T_k)[None, :] <= torch.arange(T_k - T_q, T_k)[:, None],
        "cached": None,
    }[mask_kind]
    oracle_mask = (
        mask
        if mask_kind != "cached"
        else (torch.arange(T_k)[None, :] <= torch.arange(T_k - T_q, T_k)[:, None])
    )
    z = fused_attention(q1, k1, v1, mask, causal=mask_kind == "cached")
    expected = _fused(q2, k2, v2, oracle_mask)
    torch.testing.assert_close(z, expected, **TIGHT)
    z_lesson, alpha = scaled_dot_product_attention(q1, k1, v1, oracle_mask)
    torch.testing.assert_close(z_lesson, expected, **TIGHT)
    z_loop, alpha_loop = scaled_dot_product_attention_loop(
        q1[1, 2],
        k1[1, 2],
        v1[1, 2],
        None if oracle_mask is None else oracle_mask.expand(B, H, T_q, T_k)[1, 2],
    )
    torch.testing.assert_close(z[1, 2], z_loop, **TIGHT)
    torch.testing.assert_close(alpha[1, 2], alpha_loop, **TIGHT)
    g = torch.randn_like(z)
    (z * g).sum().backward()
    (expected * g).sum().backward()
    for ours, theirs in ((q1, q2), (k1, k2), (v1, v2)):
        torch.testing.assert_close(ours.grad, theirs.grad, **TIGHT)
    if causal:
        assert z.shape == (B, H, T_q, 4)


def test_fused_path_gradients_numerically():
    torch.manual_seed(4)
    q, k, v = (torch.randn(1, 2, T, 3, requires_grad=True) for T in (4, 4, 4))
    mask = torch.rand(4, 4) < 0.7
    mask[:, 0] = True
    for kwargs in ({"mask": mask}, {"causal": True}):
        assert torch.autograd.gradcheck(
            lambda q, k, v, kw=kwargs: fused_attention(q, k, v, **kw),
            (q, k, v),
        )


def test_fused_path_rejects_bad_input():
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="same width"):
        fused_attention(q, torch.randn(2, 3, 5), torch.randn(2, 3, 5))
    with pytest.raises(ValueError, match="not both"):
        fused_attention(q, q, q, causal_mask(3), causal=True)
    with pytest.raises(ValueError, match="T_q <= T_k"):
        fused_attention(q, q[:, :2], q[:, :2], causal=True)
    with pytest.raises(ValueError, match="boolean"):
        fused_attention(q, q, q, torch.ones(3, 3))


def test_seed_walkthrough_double_loop_equals_matrix_form():
    # the chapter's running example: 8 words, Embedding(10, 16), seed 123
    torch.manual_seed(123)
    X = nn.Embedding(10, 16)(torch.tensor([0, 7, 1, 2, 5, 6, 4, 3])).detach()  # (8, 16)
    omega = torch.empty(8, 8)
    for i, j in itertools.product(range(8), range(8)):
        omega[i, j] = torch.dot(X[i], X[j])
    torch.testing.assert_close(omega, X @ X.T, **TIGHT)
    alpha = torch.softmax(omega, dim=1)
    torch.testing.assert_close(alpha.sum(1), torch.ones(8), **TIGHT)
    assert (alpha @ X).shape == (8, 16)


def test_attention_rejects_bad_input():
    q = torch.randn(3, 4)
    with pytest.raises(ValueError, match="same width"):
        scaled_dot_product_attention(q, torch.randn(3, 5), torch.randn(3, 5))
    with pytest.raises(ValueError, match="as many"):
        scaled_dot_product_attention(q, torch.randn(3, 4), torch.randn(2, 4))
    with pytest.raises(ValueError, match="boolean"):
        scaled_dot_product_attention(q, q, q, torch.ones(3, 3))
    with pytest.raises(ValueError, match="broadcast"):
        scaled_dot_product_attention(q, q, q, torch.ones(3, 2, dtype=torch.bool))


# ========================================================================================= masks


def test_masks():
    assert causal_mask(3).tolist() == [
        [True, False, False],
        [True, True, False],
        [True, True, True],
    ]
    pm = padding_mask([2, 3])
    assert pm.shape == (2, 1, 1, 3)
    assert pm[:, 0, 0].tolist() == [[True, True, False], [True, True, True]]
    with pytest.raises(ValueError):
        causal_mask(0)
    with pytest.raises(ValueError):
        padding_mask([4], T=3)


# ========================================================================== multi-head attention


def pair(D=16, H=4, seed=0):
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(D, H, batch_first=True)
    ours = MultiHeadAttention(D, H)
    copy_from_torch_mha(ours, theirs)
    return ours, theirs


@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding", "both"])
def test_multi_head_attention_equals_torch(mask_kind):
    ours, theirs = pair()
    x1 = torch.randn(3, 6, 16, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_(True)
    lengths = torch.tensor([6, 4, 2])
    allowed = {
        "none": None,
        "causal": causal_mask(6),
        "padding": padding_mask(lengths, 6),
        "both": causal_mask(6) & padding_mask(lengths, 6),
    }[mask_kind]
    out, alpha = ours(x1, mask=allowed, need_weights=True)  # the lesson function
    fused, none = ours(x1, mask=allowed)  # torch's fused kernel
    assert none is None
    torch.testing.assert_close(fused, out, **TIGHT)
    kwargs = {}
    if mask_kind in ("causal", "both"):
        kwargs["attn_mask"] = ~causal_mask(6)  # torch: True = may NOT attend
    if mask_kind in ("padding", "both"):
        kwargs["key_padding_mask"] = ~padding_mask(lengths, 6)[:, 0, 0]
    ref, ref_alpha = theirs(x2, x2, x2, average_attn_weights=False, **kwargs)
    torch.testing.assert_close(out, ref, **TIGHT)
    torch.testing.assert_close(alpha, ref_alpha, **TIGHT)
    g = torch.randn_like(out)
    (out * g).sum().backward()
    (ref * g).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, **TIGHT)


def test_cross_attention_shapes_and_values():
    ours, theirs = pair(D=32, H=8, seed=3)
    tgt, src = torch.randn(1, 9, 32), torch.randn(1, 12, 32)
    out, alpha = ours(tgt, src, need_weights=True)
    ref, ref_alpha = theirs(tgt, src, src, average_attn_weights=False)
    assert out.shape == (1, 9, 32) and alpha.shape == (1, 8, 9, 12)
    torch.testing.assert_close(out, ref, **TIGHT)
    torch.testing.assert_close(alpha, ref_alpha, **TIGHT)


def test_split_merge_heads_and_the_bmm_form():
    x = torch.arange(2 * 3 * 8.0).view(2, 3, 8)
    heads = split_heads(x, 4)  # (2, 4, 3, 2)
    assert heads.shape == (2, 4, 3, 2)
    assert heads[1, 2, 0].tolist() == x[1, 0, 4:6].tolist()  # head 2 holds features 4..5
    torch.testing.assert_close(merge_heads(heads), x)
    # the stacked (h, d, d/h) projections with bmm equal the layer
    ours, _ = pair(D=16, H=4, seed=5)
    for lin in (ours.W_q, ours.W_k, ours.W_v, ours.W_o):
        nn.init.zeros_(lin.bias)
    x = torch.randn(7, 16)

    def per_head(lin):  # (D, D) weight -> (H, D, D/H): head h's columns of W^T
        return lin.weight.T.reshape(16, 4, 4).permute(1, 0, 2)

    bmm = multi_head_attention_bmm(
        x, per_head(ours.W_q), per_head(ours.W_k), per_head(ours.W_v), ours.W_o.weight.T
    )
    torch.testing.assert_close(bmm, ours(x[None])[0][0], **TIGHT)
    with pytest.raises(ValueError, match="divisible"):
        split_heads(x[None], 3)


def test_kv_cache_in_attention_equals_full_computation():
    ours, _ = pair()
    x = torch.randn(2, 5, 16)
    full, _ = ours(x, mask=causal_mask(5))
    cache = KVCache(5)
    steps = [ours(x[:, t : t + 1], cache=cache)[0] for t in range(5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, **TIGHT)
    assert cache.length == 5
    with pytest.raises(ValueError, match="holds 5 positions"):
        ours(x[:, :1], cache=cache)
    # two new positions at once, after three cached ones, with the causal flag
    cache = KVCache(8)
    first = ours(x[:, :3], cache=cache, causal=True)[0]
    then = ours(x[:, 3:], cache=cache, causal=True)[0]
    torch.testing.assert_close(torch.cat([first, then], dim=1), full, **TIGHT)


# =============================================================== LayerNorm, positions, the layers


def test_layer_norm_equals_torch():
    torch.manual_seed(0)
    theirs = nn.LayerNorm(12)
    nn.init.normal_(theirs.weight)
    nn.init.normal_(theirs.bias)
    ours = LayerNorm(12)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(3, 4, 12) * 5 + 2
    torch.testing.assert_close(ours(x), theirs(x), **TIGHT)
    with pytest.raises(ValueError, match="last dimension"):
        ours(torch.randn(3, 5))


def test_sinusoidal_encoding_by_hand_and_relative_positions():
    pe = sinusoidal_encoding(50, 8).double()
    assert pe[0].tolist() == [0, 1, 0, 1, 0, 1, 0, 1]
    assert pe[3, 0] == pytest.approx(math.sin(3), abs=1e-7)
    assert pe[3, 3] == pytest.approx(math.cos(3 / 10000 ** (2 / 8)), abs=1e-7)
    # PE(t + k) is a fixed rotation of PE(t) in each (sin, cos) pair, for every t
    k = 5
    for i in range(4):
        w = 1 / 10000 ** (2 * i / 8)
        R = torch.tensor([[math.cos(k * w), -math.sin(k * w)], [math.sin(k * w), math.cos(k * w)]])
        pairs = pe[:, 2 * i : 2 * i + 2]  # (T, 2) rows (sin, cos)
        torch.testing.assert_close(pairs[:-k] @ R, pairs[k:], atol=1e-6, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_torch(norm_first):
    torch.manual_seed(1)
    theirs = nn.TransformerEncoderLayer(
        16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    ours = EncoderLayer(BlockConfig(16, 4, 32, norm_first=norm_first))
    copy_from_torch_layer(ours, theirs)
    x = torch.randn(2, 6, 16)
    lengths = torch.tensor([6, 3])
    mask = causal_mask(6) & padding_mask(lengths, 6)
    ref = theirs(x, src_mask=~causal_mask(6), src_key_padding_mask=~padding_mask(lengths)[:, 0, 0])
    torch.testing.assert_close(ours(x, mask)[0], ref[0], **TIGHT)
    torch.testing.assert_close(ours(x, mask)[1, :3], ref[1, :3], **TIGHT)  # real positions
    torch.testing.assert_close(ours(x), theirs(x), **TIGHT)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_torch(norm_first):
    torch.manual_seed(2)
    theirs = nn.TransformerDecoderLayer(
        16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    ours = DecoderLayer(BlockConfig(16, 4, 32, norm_first=norm_first))
    copy_from_torch_layer(ours, theirs)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    src_lengths = torch.tensor([7, 4])
    with saving_attention(ours):
        out = ours(x, memory, causal_mask(5), padding_mask(src_lengths, 7))
    ref = theirs(
        x,
        memory,
        tgt_mask=~causal_mask(5),
        memory_key_padding_mask=~padding_mask(src_lengths)[:, 0, 0],
    )
    torch.testing.assert_close(out, ref, **TIGHT)
    assert ours.multihead_attn.weights.shape == (2, 4, 5, 7)
    assert (ours.multihead_attn.weights[1, :, :, 4:] == 0).all()  # padded source: no weight


def test_encoder_decoder_ignores_padding():
    torch.manual_seed(3)
    model = Transformer(11, 13, D=16, H=4, n_layers=2, D_ff=32, norm_first=True).eval()
    src, tgt = torch.tensor([[1, 2, 3, 4]]), torch.tensor([[5, 6, 7]])
    alone = model(src, tgt)  # (1, 3, 13)
    src_pad = torch.tensor([[1, 2, 3, 4, 0, 0], [3, 3, 3, 3, 3, 3]])
    tgt_pad = torch.tensor([[5, 6, 7, 0], [1, 1, 1, 1]])
    batch = model(src_pad, tgt_pad, torch.tensor([4, 6]), torch.tensor([3, 4]))
    assert batch.shape == (2, 4, 13)
    torch.testing.assert_close(batch[0, :3], alone[0], **TIGHT)


# ====================================================================== the language model


def small_lm(**kwargs):
    torch.manual_seed(0)
    defaults = dict(V=7, D=16, H=4, n_layers=2, D_ff=32, max_len=24)
    return TransformerLM(**{**defaults, **kwargs}).eval()


@pytest.mark.parametrize("kwargs", [{}, {"norm_first": False}, {"cutoffs": [3, 5]}])
def test_causal_lm_never_looks_ahead(kwargs):
    lm = small_lm(**kwargs)
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    out = lm(ids)  # (1, 6, V)
    torch.testing.assert_close(out.exp().sum(-1), torch.ones(1, 6), **TIGHT)
    for t in range(5):
        changed = ids.clone()
        changed[0, t + 1 :] = (changed[0, t + 1 :] + 3) % 7
        torch.testing.assert_close(lm(changed)[0, : t + 1], out[0, : t + 1], **TIGHT)


def test_positions_none_makes_a_bag_of_words():
    # one block: the last position attends to the same set of words in any order (with more
    # blocks the earlier positions' states, which see different prefixes, differ)
    lm = small_lm(positions="none", n_layers=1)
    a, b = torch.tensor([[1, 2, 3, 4]]), torch.tensor([[3, 1, 2, 4]])
    torch.testing.assert_close(lm(a)[0, -1], lm(b)[0, -1], **TIGHT)  # last word sees the same set
    learned = small_lm(positions="learned", n_layers=1)
    assert not torch.allclose(learned(a)[0, -1], learned(b)[0, -1])


@pytest.mark.parametrize("strategy", ["greedy", "sample", "top_k", "top_p", "beam"])
def test_kv_cache_generation_equals_recomputation(strategy):
    lm = small_lm()
    sampling = strategy in ("sample", "top_k", "top_p")
    outs = [
        lm.generate(
            [1, 2],
            12,
            strategy,
            kv_cache=cache,
            generator=torch.Generator().manual_seed(4) if sampling else None,
        )
        for cache in (True, False)
    ]
    assert outs[0] == outs[1]
    assert outs[0][:2] == [1, 2] and len(outs[0]) == 14


def test_greedy_and_beam_against_brute_force():
    lm = small_lm(V=5)
    prompt = [1, 3]

    def logp_of(seq):
        with torch.no_grad():
            lp = lm(torch.tensor([seq]))[0]  # (T, V)
        return sum(float(lp[t - 1, seq[t]]) for t in range(len(prompt), len(seq)))

    greedy = list(prompt)
    for _ in range(3):
        greedy.append(int(lm(torch.tensor([greedy]))[0, -1].argmax()))
    assert lm.generate(prompt, 3, "greedy") == greedy
    best = max((prompt + list(c) for c in itertools.product(range(5), repeat=3)), key=logp_of)
    assert lm.generate(prompt, 3, "beam", beam_size=25) == best  # 25 = all 2-word prefixes
    assert lm.generate(prompt, 3, "top_k", k=1) == greedy
    assert lm.generate(prompt, 3, "top_p", p=1e-9) == greedy


def test_sampling_follows_the_distribution():
    lm = small_lm(V=4)
    probs = lm(torch.tensor([[2]]))[0, -1].exp()
    g = torch.Generator().manual_seed(0)
    draws = [lm.generate([2], 1, "sample", generator=g)[1] for _ in range(600)]
    freq = torch.bincount(torch.tensor(draws), minlength=4) / 600
    assert (freq - probs).abs().max() < 0.06  # at most 3.3 standard errors
    draws_k = {lm.generate([2], 1, "top_k", k=2, generator=g)[1] for _ in range(100)}
    assert draws_k == set(probs.topk(2).indices.tolist())


def test_generate_rejects_bad_input():
    lm = small_lm()
    with pytest.raises(ValueError, match="strategy"):
        lm.generate([1], 2, "random")
    with pytest.raises(ValueError, match="max_len"):
        lm.generate([1], 100)
    with pytest.raises(ValueError, match=r"\[0, V\)"):
        lm(torch.tensor([[9]]))


def test_windowed_perplexity_by_brute_force():
    sentences = [[2, 3], [4], [5, 6, 2, 3], [4, 4, 5]]
    ids = stream(sentences)
    lm = small_lm(max_len=6)
    N = len(ids) - 1  # 14 predictions: every word and every </s>
    for T, stride in [(6, 3), (6, 6), (6, 1), (4, 2)]:
        # brute force: prediction i is scored in the first window (starts 0, stride, 2 stride, ...,
        # and N - T) where it is not among the first T - stride positions (any in window 0)
        starts = sorted(set(range(0, N - T + 1, stride)) | {N - T})
        total = 0.0
        for i in range(N):
            s = next(s for s in starts if s <= i < s + T and (s == 0 or i - s >= T - stride))
            with torch.no_grad():
                lp = lm(ids[s : s + T][None])[0]  # (T, V)
            total -= float(lp[i - s, ids[i + 1]])
        got = evaluate_perplexity(lm, sentences, batch_size=2, bptt=T, stride=stride)
        assert got == pytest.approx(math.exp(total / N))


def test_training_learns_a_deterministic_text():
    # a text where each word determines the next: a model that learns it has perplexity near 1
    sentences = [[2, 3, 4, 5, 6]] * 40
    lm = TransformerLM(7, D=16, H=2, n_layers=1, D_ff=32, max_len=12)
    assert evaluate_perplexity(lm, sentences[:4], bptt=12, stride=6) > 2  # untrained
    history = train_lm(
        lm,
        sentences,
        sentences[:4],
        steps=60,
        batch_size=8,
        bptt=12,
        lr=1e-2,
        warmup=10,
        shuffle=True,
        eval_stride=6,
        eval_every=60,
    )
    assert history["valid_ppl"][-1] < 1.1
    assert history["words"][-1] == 60 * 8 * 12


def test_layer_norm_is_reset_by_training():
    lm = small_lm()
    with torch.no_grad():
        lm.final_norm.weight.fill_(3.0)
    train_lm(lm, [[1, 2, 3]] * 4, None, steps=1, batch_size=2, bptt=4, shuffle=True)
    assert lm.final_norm.weight.tolist() != [3.0] * lm.D  # reset to 1, then one Adam step
    assert lm.final_norm.weight.sub(1).abs().max() < 0.02


# ================================================= issue 31: one attention path, bugs 3 and 4


def test_queries_with_no_key_give_zeros_in_the_module_and_finite_gradients():
    ours, theirs = pair()
    x = torch.randn(2, 4, 16, requires_grad=True)
    lengths = torch.tensor([4, 0])  # the second sentence has no key at all
    mask = padding_mask(lengths, 4)
    out, _ = ours(x, mask=mask)  # the fused path
    lesson, alpha = ours(x, mask=mask, need_weights=True)
    W_o_bias = ours.W_o.bias.expand(4, 16)  # a zero context maps to W_o's bias alone
    torch.testing.assert_close(out[1], W_o_bias, **TIGHT)
    torch.testing.assert_close(lesson, out, **TIGHT)
    assert (alpha[1] == 0).all()
    ref, _ = theirs(x[:1], x[:1], x[:1])  # the sentence with keys: torch's value
    torch.testing.assert_close(out[:1], ref, **TIGHT)
    out.sum().backward()
    assert torch.isfinite(x.grad).all()


def test_attention_weights_only_when_asked_and_detached():
    torch.manual_seed(0)
    model = Transformer(11, 13, D=16, H=4, n_layers=2, D_ff=32).train()
    src, tgt = torch.tensor([[1, 2, 3, 4]]), torch.tensor([[5, 6, 7]])
    model(src, tgt)
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert len(layers) == 6 and all(m.weights is None for m in layers)  # not asked for: none
    with saving_attention(model):
        logits = model(src, tgt)
    assert logits.requires_grad
    for m in layers:  # one name, detached from the graph although the model trains
        assert m.weights is not None and not m.weights.requires_grad and m.weights.grad_fn is None
    cross = model.decoder[0].multihead_attn.weights  # (B, H, T_tgt, T_src)
    assert cross.shape == (1, 4, 3, 4)
    torch.testing.assert_close(cross.sum(-1), torch.ones(1, 4, 3), **TIGHT)
    assert not any(m.keep_weights for m in layers)  # only inside the `with`
    for name in ("attn_weights", "self_weights", "cross_weights"):
        assert not any(hasattr(m, name) for m in model.modules())


def test_dropout_is_applied_once_per_sublayer(monkeypatch):
    # a block's dropouts in training: the attention sublayer's output, inside the FFN, the FFN's
    # output; the attention module itself drops nothing (it used to drop its output again)
    calls = []
    real = F.dropout

    def counting(x, p=0.5, training=True, inplace=False):
        calls.append(p)
        return real(x, p, training, inplace)

    monkeypatch.setattr(F, "dropout", counting)
    block = Block(BlockConfig(16, 4, 32, dropout=0.1)).train()
    block(torch.randn(2, 3, 16))
    assert calls == [0.1, 0.1, 0.1]
    calls.clear()
    mha = MultiHeadAttention(16, 4).train()
    mha(torch.randn(2, 3, 16))
    assert calls == []


def test_behaviour_is_chosen_when_the_model_is_built():
    kinds = {"sinusoidal": SinusoidalPositions, "learned": LearnedPositions, "none": NoPositions}
    for kind, cls in kinds.items():
        lm = small_lm(positions=kind)
        assert type(lm.positions) is cls
        assert not hasattr(lm.positions, "kind")
    assert type(small_lm(norm_first=True).blocks[0].residual) is transformer.PreLN
    assert type(small_lm(norm_first=False).blocks[0].residual) is transformer.PostLN
    assert type(small_lm().blocks[0]) is Block  # the decoder-only model's block is a Block
    with pytest.raises(ValueError, match="kind must be one of"):
        small_lm(positions="rotary")
    assert not hasattr(transformer, "scaled_dot_product_attention_fast")


@pytest.mark.parametrize(
    ("strategy", "options", "message"),
    [
        ("top_k", {"k": 0}, "k >= 1"),
        ("top_k", {"k": 2.5}, "k >= 1"),
        ("top_p", {"p": 0.0}, "0 < p <= 1"),
        ("top_p", {"p": 1.5}, "0 < p <= 1"),
        ("beam", {"beam_size": 0}, "beam_size >= 1"),
        ("sample", {"temperature": 0.0}, "temperature"),
        ("greedy", {"k": 3}, "does not use k"),
        ("greedy", {"temperature": 0.5}, "does not use temperature"),
        ("beam", {"p": 0.5, "generator": torch.Generator()}, "does not use generator, p"),
        ("top_k", {"beam_size": 2}, "does not use beam_size"),
        ("sample", {"p": 0.9}, "does not use p"),
    ],
)
def test_generate_rejects_bad_options_clearly(strategy, options, message):
    lm = small_lm()
    with pytest.raises(ValueError, match=re.escape(message)):
        lm.generate([1, 2], 3, strategy, **options)


@pytest.mark.parametrize("strategy", ["greedy", "top_p", "beam"])
def test_generate_makes_its_tensors_on_the_models_device(strategy):
    # with the default device set to "meta", a tensor made without the model's device is on
    # "meta" and meeting the model's (CPU) tensors fails; the words must not change
    lm = small_lm()
    sampling = strategy != "greedy" and strategy != "beam"
    kwargs = {"generator": torch.Generator().manual_seed(1)} if sampling else {}
    expected = lm.generate([1, 2], 5, strategy, **kwargs)
    kwargs = {"generator": torch.Generator().manual_seed(1)} if sampling else {}
    with torch.device("meta"):
        got = lm.generate(torch.tensor([1, 2], device="cpu"), 5, strategy, **kwargs)
    assert got == expected


# ============================================ the encoder-decoder on chapter 5's task (issue 30)


def g2p_model(label_smoothing=0.0):
    torch.manual_seed(5)
    return Seq2SeqTransformer(9, 8, D=16, H=4, n_layers=2, D_ff=32, label_smoothing=label_smoothing)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_seq2seq_loss_equals_torch_cross_entropy_over_the_allowed_symbols(eps):
    model = g2p_model(eps)
    src = torch.tensor([[3, 4, 5, 0], [6, 7, 8, 2]])  # padded with <pad> = 0 at the end
    tgt = torch.tensor([[1, 4, 5, 2, 0], [1, 3, 6, 7, 2]])  # <s> phones </s>, padded
    allowed = torch.tensor([2, 3, 4, 5, 6, 7])  # </s> and the phones: not <pad> = 0, <s> = 1
    logits = model(src, tgt[:, :-1], torch.tensor([3, 4]))[..., allowed]  # (B, T, 6)
    gold = tgt[:, 1:]  # (B, T)
    real = gold != 0
    expected = F.cross_entropy(logits[real], gold[real] - 2, label_smoothing=eps)
    torch.testing.assert_close(model.loss(src, tgt), expected, **TIGHT)


def test_seq2seq_padding_changes_nothing():
    model = g2p_model().eval()
    alone = model.log_probs(torch.tensor([[3, 4, 5]]), torch.tensor([[1, 4, 5]]))
    batch = model.log_probs(
        torch.tensor([[3, 4, 5, 0, 0], [6, 7, 8, 3, 2]]), torch.tensor([[1, 4, 5], [1, 3, 3]])
    )
    torch.testing.assert_close(batch[0], alone[0], **TIGHT)
    assert (batch[..., :2] == -math.inf).all()  # never <pad> or <s>


def test_seq2seq_step_function_decodes_as_the_full_model():
    # oracle: greedy decoding by re-running the whole teacher-forced model on each prefix
    model = g2p_model().train()
    src = torch.tensor([[3, 4, 5, 6, 0]])
    with torch.no_grad():
        model.eval()
        prefix = [1]
        for _ in range(6):
            nxt = int(model.log_probs(src[:, :4], torch.tensor([prefix]))[0, -1].argmax())
            if nxt == 2:
                break
            prefix.append(nxt)
        model.train()
    assert model.greedy(src, max_len=6) == [prefix[1:]]
    assert model.training  # the training mode is restored after decoding
    ids, scores = model.beam_search(src, beam_size=1, max_len=6)
    assert ids == [prefix[1:]]
    # the beam's score is the model's log-probability of its output (with </s> unless cut)
    found, _ = model.beam_search(src, beam_size=4, max_len=6)
    y = [1, *found[0], 2]
    with torch.no_grad():
        lp = model.eval().log_probs(src[:, :4], torch.tensor([y[:-1]]))[0]
    total = sum(float(lp[t, y[t + 1]]) for t in range(len(y) - 1))
    _, best = model.beam_search(src, beam_size=4, max_len=6)
    if len(found[0]) < 6:
        assert best[0] == pytest.approx(total, abs=1e-9)
        assert best[0] >= scores[0] - 1e-9  # a wider beam finds nothing worse than greedy
