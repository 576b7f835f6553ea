"""Tests of the exercise checks of 06-transformer (nlpcourse.checks.transformer).

Student-style implementations written here (none calls nlpcourse.transformer): right ones, also
written differently (numpy instead of torch, float32, lists, einsum, loops), must pass the hidden
checks; each usual mistake must fail with a message naming it; a wrong answer nobody anticipated
must fail with the input, the expected answer and the answer it got.
"""

import math

import numpy as np
import pytest
import torch
from checks_corpus import wrong_with_right_name_or_none

import nlpcourse.checks.transformer as checks
from nlpcourse.checks import CheckFailed

# ------------------------------------------------------------------ student implementations


def attention(q, k, v, mask=None, axis=-1, scale="sqrt", after=False, fill=-math.inf, swap=False):
    scores = q @ k.transpose(-2, -1)
    d_k = q.shape[-1]
    scores = scores / {"sqrt": math.sqrt(d_k), "none": 1.0, "d": d_k}[scale]
    if mask is not None and not after:
        scores = scores.masked_fill(~mask, fill)
    weights = torch.softmax(scores, dim=axis)
    if mask is not None and after:
        weights = weights * mask
    out = weights @ v
    return (weights, out) if swap else (out, weights)


def attention_numpy(q, k, v, mask=None):
    """Right, in numpy, float32, returned as lists."""
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    scores = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(np.asarray(mask), scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return [(w @ v).tolist(), w.tolist()]


def causal_mask(T, kind="tril"):
    ones = torch.ones(T, T, dtype=torch.bool)
    return {"tril": ones.tril(), "triu": ones.triu(), "strict": ones.tril(-1)}[kind]


def causal_mask_ints(T):
    return [[1 if j <= i else 0 for j in range(T)] for i in range(T)]


def split_heads(x, H, transpose=True):
    B, T, D = x.shape
    if not transpose:
        return x.reshape(B, H, T, D // H)
    return x.view(B, T, H, D // H).transpose(1, 2)


def split_heads_loop(x, H):
    B, T, D = x.shape
    out = np.zeros((B, H, T, D // H))
    for b in range(B):
        for h in range(H):
            for t in range(T):
                out[b, h, t] = x[b, t, h * (D // H) : (h + 1) * (D // H)].numpy()
    return out


def merge_heads(x, transpose=True):
    B, H, T, Dh = x.shape
    if not transpose:
        return x.reshape(B, T, H * Dh)
    return x.transpose(1, 2).reshape(B, T, H * Dh)


def layer_norm(x, gamma, beta, eps=1e-5, unbiased=False, axis=-1, spread="sqrt(var + eps)"):
    mu = x.mean(dim=axis, keepdim=True)
    var = x.var(dim=axis, keepdim=True, unbiased=unbiased)
    scale = {
        "sqrt(var + eps)": lambda: torch.sqrt(var + eps),
        "var + eps": lambda: var + eps,  # a mistake: the variance, not its square root
        "sqrt(std + eps)": lambda: torch.sqrt(var.sqrt() + eps),  # a mistake: std for var
        "std": lambda: x.std(dim=axis, keepdim=True),  # a mistake: unbiased std, no eps
    }[spread]()
    return gamma * (x - mu) / scale + beta


def layer_norm_numpy(x, gamma, beta, eps=1e-5):
    x = np.asarray(x, dtype=np.float32)
    mu = x.mean(axis=-1, keepdims=True)
    return np.asarray(gamma) * (x - mu) / np.sqrt(x.var(axis=-1, keepdims=True) + eps) + np.asarray(
        beta
    )


def sinusoidal_encoding(T, D, swap=False):
    pe = np.zeros((T, D))
    for t in range(T):
        for i in range(D // 2):
            angle = t / 10000 ** (2 * i / D)
            first, second = (math.cos, math.sin) if swap else (math.sin, math.cos)
            pe[t, 2 * i], pe[t, 2 * i + 1] = first(angle), second(angle)
    return pe


def sinusoidal_encoding_torch32(T, D):
    position = torch.arange(T, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, D, 2, dtype=torch.float32) * (-math.log(10000.0) / D))
    pe = torch.zeros(T, D)
    pe[:, 0::2] = torch.sin(position * div)
    pe[:, 1::2] = torch.cos(position * div)
    return pe


# ---------------------------------------------------------------------------------- helpers


def fails_with(check, function, *fragments):
    """The visible cases already fail ``function`` with the message (issue 27: hidden cases add
    inputs, never kinds of error), and the hidden ones do too."""
    for hidden in (False, True):
        with pytest.raises(CheckFailed) as info:
            check(function, hidden=hidden)
        message = str(info.value)
        for fragment in fragments:
            assert fragment in message, message
    return message


# ------------------------------------------------------------------------------------ tests


@pytest.mark.parametrize(
    "check, function",
    [
        (checks.check_scaled_dot_product_attention, attention),
        (checks.check_scaled_dot_product_attention, attention_numpy),
        (checks.check_causal_mask, causal_mask),
        (checks.check_causal_mask, causal_mask_ints),
        (checks.check_split_heads, split_heads),
        (checks.check_split_heads, split_heads_loop),
        (checks.check_merge_heads, merge_heads),
        (checks.check_layer_norm, layer_norm),
        (checks.check_layer_norm, layer_norm_numpy),
        (checks.check_sinusoidal_encoding, sinusoidal_encoding),
        (checks.check_sinusoidal_encoding, sinusoidal_encoding_torch32),
    ],
)
def test_right_answers_in_any_form_pass(check, function, capsys):
    check(function)
    check(function, hidden=True)
    assert "pass" in capsys.readouterr().out


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"axis": -2}, "wrong axis"),
        ({"scale": "none"}, "not divided by sqrt(d_k)"),
        ({"scale": "d"}, "divided by d_k"),
        ({"after": True}, "after the softmax"),
        ({"fill": 0.0}, "set to 0"),
        ({"swap": True}, "other order"),
    ],
)
def test_attention_mistakes_are_named(kwargs, named):
    fails_with(
        checks.check_scaled_dot_product_attention,
        lambda q, k, v, mask=None: attention(q, k, v, mask, **kwargs),
        "likely mistake",
        named,
    )


def test_inverted_mask_gets_the_rule():
    def inverted(q, k, v, mask=None):
        return attention(q, k, v, None if mask is None else ~mask)

    # the inverted causal mask leaves the last query no key: nan, and the hint states the rule
    fails_with(checks.check_scaled_dot_product_attention, inverted, "nan", "True = may attend")


@pytest.mark.parametrize("kind, named", [("triu", "transposed"), ("strict", "diagonal")])
def test_causal_mask_mistakes_are_named(kind, named):
    fails_with(checks.check_causal_mask, lambda T: causal_mask(T, kind), "likely mistake", named)


def test_additive_mask_gets_a_clear_message():
    def additive(T):
        return torch.zeros(T, T).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)

    fails_with(checks.check_causal_mask, additive, "booleans")


def test_split_and_merge_without_transposing_are_named():
    fails_with(
        checks.check_split_heads,
        lambda x, H: split_heads(x, H, transpose=False),
        "likely mistake",
        "by a reshape alone",
    )
    fails_with(
        checks.check_merge_heads,
        lambda x: merge_heads(x, transpose=False),
        "likely mistake",
        "by a reshape alone",
    )


@pytest.mark.parametrize(
    "kwargs, named", [({"unbiased": True}, "unbiased"), ({"axis": 0}, "over the batch")]
)
def test_layer_norm_mistakes_are_named(kwargs, named):
    fails_with(
        checks.check_layer_norm,
        lambda x, g, b, eps=1e-5: layer_norm(x, g, b, eps, **kwargs),
        "likely mistake",
        named,
    )


LN_NAMES = {"var + eps": "divided by the variance", "sqrt(std + eps)": "standard deviation is"}


@pytest.mark.parametrize("spread", LN_NAMES)
def test_variance_and_standard_deviation_mistakes_get_their_own_names(spread):
    """Issue 27: dividing by var + eps was named 'the standard deviation is used where the
    variance belongs', the reverse mistake; each now gets its own name and not the other's."""
    message = fails_with(
        checks.check_layer_norm,
        lambda x, g, b, eps=1e-5: layer_norm(x, g, b, eps, spread=spread),
        "likely mistake",
        LN_NAMES[spread],
    )
    for other, name in LN_NAMES.items():
        if other != spread:
            assert name not in message


def test_no_case_claims_to_come_from_the_book_when_it_does_not(monkeypatch):
    labels = []
    monkeypatch.setattr(checks, "run_check", lambda *a, **k: labels.extend(c.label for c in a[3]))
    checks.check_scaled_dot_product_attention(attention)
    assert labels and not any("book" in label for label in labels)


def test_layer_norm_without_gamma_and_beta_is_named():
    fails_with(
        checks.check_layer_norm,
        lambda x, g, b, eps=1e-5: layer_norm(x, torch.ones_like(g), torch.zeros_like(b), eps),
        "gamma and beta are left out",
    )


def test_sinusoid_swap_is_named():
    fails_with(
        checks.check_sinusoidal_encoding,
        lambda T, D: sinusoidal_encoding(T, D, swap=True),
        "likely mistake",
        "swapped",
    )


def test_an_unanticipated_wrong_answer_shows_input_expected_and_got():
    message = fails_with(
        checks.check_layer_norm,
        lambda x, g, b, eps=1e-5: layer_norm(x, g, b, eps) + 0.5,
        "case 1",
        "x = ",
        "expected:",
        "got:",
        "differs most",
    )
    assert "likely mistake" not in message


def test_a_function_that_raises_and_a_missing_return():
    def raises(T):
        raise NotImplementedError()

    fails_with(checks.check_causal_mask, raises, "not written yet")
    fails_with(checks.check_split_heads, lambda x, H: None, "None")


def test_calling_the_reference_fails():
    from nlpcourse.transformer import causal_mask as reference_mask

    fails_with(checks.check_causal_mask, reference_mask, "switched off")


# --------------------------------------------- issue 27: plausible mistakes that no check names


def _split(x, H):
    B, T, D = x.shape
    return B, T, H, D // H


UNNAMED = [  # three or more per part; each must fail the visible cases with expected / got
    (checks.check_scaled_dot_product_attention,
     lambda q, k, v, mask=None: (attention(q, k, v, mask)[1] @ k, attention(q, k, v, mask)[1])),
    (checks.check_scaled_dot_product_attention,
     lambda q, k, v, mask=None: (attention(q, k, v, mask)[0], attention(q, k, v, mask)[1].mT)),
    (checks.check_scaled_dot_product_attention,
     lambda q, k, v, mask=None: attention(q, k, v, mask, fill=-1.0)),  # not small enough
    (checks.check_causal_mask, lambda T: torch.ones(T, T, dtype=torch.bool)),
    (checks.check_causal_mask, lambda T: torch.ones(T, T, dtype=torch.bool).tril(1)),
    (checks.check_causal_mask, lambda T: torch.eye(T, dtype=torch.bool)),
    (checks.check_split_heads, lambda x, H: x.reshape(*_split(x, H))),  # no transpose at all
    (checks.check_split_heads, lambda x, H: x.transpose(1, 2).reshape(_split(x, H)[0], H, -1,
                                                                       _split(x, H)[3])),
    (checks.check_split_heads, lambda x, H: x.reshape(*_split(x, H)).permute(0, 2, 1, 3).flip(1)),
    (checks.check_merge_heads, lambda x: x.sum(dim=1)),
    (checks.check_merge_heads, lambda x: x.transpose(2, 3).reshape(x.shape[0], x.shape[2], -1)),
    (checks.check_merge_heads, lambda x: x.flip(1).transpose(1, 2).reshape(x.shape[0],
                                                                            x.shape[2], -1)),
    (checks.check_layer_norm, lambda x, g, b, eps=1e-5: layer_norm(x, g, b, 0.0)),  # eps ignored
    (checks.check_layer_norm, lambda x, g, b, eps=1e-5: layer_norm(x, g, torch.zeros_like(b), eps)),
    (checks.check_layer_norm, lambda x, g, b, eps=1e-5: g * (x - x.mean()) / torch.sqrt(
        x.var(unbiased=False) + eps) + b),  # statistics over the whole tensor
    (checks.check_sinusoidal_encoding, lambda T, D: sinusoidal_encoding(T + 1, D)[1:]),
    (checks.check_sinusoidal_encoding, lambda T, D: np.sin(sinusoidal_encoding(T, D))),
    (checks.check_sinusoidal_encoding,
     lambda T, D: np.repeat(sinusoidal_encoding(T, D)[:, 0::2], 2, axis=1)),  # sin twice
]  # fmt: skip


@pytest.mark.parametrize("check, function", UNNAMED)
def test_plausible_mistakes_nobody_named_fail_on_the_visible_cases(check, function):
    wrong_with_right_name_or_none(check, function, None)
