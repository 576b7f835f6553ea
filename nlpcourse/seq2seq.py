"""Sequence-to-sequence models with attention, on grapheme-to-phoneme conversion (chapter 5).

An encoder reads a word letter by letter; a decoder writes its pronunciation phone by phone, a
conditional language model ``P(y | x) = prod_t P(y_t | y_<t, x)``. Based on Cho et al. (2014) and
Sutskever, Vinyals & Le (2014) for the encoder-decoder, Bahdanau, Cho & Bengio (2015) for additive
attention and the bidirectional encoder, Luong, Pham & Manning (2015) for dot-product and bilinear
("general") attention and the attentional output layer, Wu et al. (2016) for length normalisation
in beam search, and Yao & Zweig (2015) and Toshniwal & Livescu (2016) for seq2seq
grapheme-to-phoneme conversion. Equation labels are the book's (``book/seq2seq.md``). Shape
letters: ``B`` batch, ``S`` source length (letters), ``T`` target length (phones), ``D`` width of
the encoder states (keys), ``H`` decoder width, ``V`` vocabulary size, ``K`` the beam size
(the book's b).

The model (:class:`Seq2Seq`)::

    e_j = Emb_x(x_j);  h_j^fwd = RNN_fwd(e_j, h_{j-1}^fwd);  h_j^bwd = RNN_bwd(e_j, h_{j+1}^bwd)
    k_j = [h_j^fwd ; h_j^bwd]                  encoder states (keys), (B, S, D)      (s2s-enc)
    s_0 = tanh(W_init [h_S^fwd ; h_1^bwd])     the decoder's first state             (s2s-init)
    s_t = RNN_dec(Emb_y(y_{t-1}), s_{t-1})      decoder state (query), (B, H)         (s2s-dec)
    score(s_t, k_j) = s_t . k_j                 dot product                           (att-score)
                    = s_t^T W k_j               bilinear / multiplicative             (att-score)
                    = v^T tanh(W_1 s_t + W_2 k_j)   additive (Bahdanau)               (att-score)
    a_tj = exp(score_tj) / sum_{j' not masked} exp(score_tj')   masked softmax        (att-context)
    c_t = sum_j a_tj k_j                        context vector, (B, D)                (att-context)
    s~_t = tanh(W_c [c_t ; s_t]);  P(y_t | y_<t, x) = softmax(W_o s~_t)                 (s2s-dec)
    L = -(1/N) sum_{i, t not padding} log P(y_t | y_<t, x)    teacher forcing         (s2s-loss)

``RNN`` is chapter 4's GRU (``cell="gru"``, the default) or LSTM (``cell="lstm"``; the decoder's
memory cell starts at 0). Without attention (``attention="none"``) the context is the same fixed
vector for every step, ``c_t = c = [h_S^fwd ; h_1^bwd]``: the bottleneck the chapter measures.

Where attention sits (``placement``). The default, ``"luong"``, is the placement of Luong et al.
(2015) written above: the query is the *current* state ``s_t`` and the context enters only the
output layer, so under teacher forcing the recurrence runs over all ``T`` steps first and
attention scores all ``T`` states at once. ``placement="bahdanau"`` is that of Bahdanau et al.
(2015): the query is the *previous* state, and the context is also an input of the step::

    c_t = sum_j a_tj k_j with a_t from score(s_{t-1}, k_j);  s_t = RNN_dec([Emb_y(y_{t-1}) ; c_t],
    s_{t-1});  P(y_t | y_<t, x) = softmax(W_o tanh(W_c [c_t ; s_t]))                (s2s-bahdanau)

so each step's recurrence waits for its attention and teacher forcing runs step by step. The
output layer is the same in both placements (Bahdanau et al.'s is a maxout layer over
``s_{t-1}``, ``y_{t-1}`` and ``c_t``), so that only the placement differs.

Decoding: :meth:`Seq2Seq.greedy`, :meth:`Seq2Seq.sample` (temperature) and the batched
:meth:`Seq2Seq.beam_search`, which ranks finished hypotheses by the length-normalised score
``log P(y | x) / |y|^alpha`` (beam-norm) and stops a word's search when all ``K`` hypotheses in its
beam have ended; :func:`beam_search_loop` is the same search written as a plain loop over
hypotheses (the lesson; tested equal). Metrics: :func:`edit_distance` (Levenshtein, unit costs,
(edit-dist)), word error rate and phone error rate (:func:`error_rates`, (wer), (per)) against
*any* of a word's pronunciations.

Deliberate departures, stated plainly:

* The three scores are offered with the same placement so that only the score differs between
  them; the default placement is Luong's, for every score, the additive one included.
* One encoder layer by default (``enc_layers`` stacks more: layer ``l + 1`` reads
  ``[h_j^fwd ; h_j^bwd]`` of layer ``l`` in both directions, as ``torch.nn.GRU(...,
  bidirectional=True, num_layers=L)`` does, and the keys and the summary are those of the top
  layer), each direction ``H/2`` wide so that the keys have the decoder's width ``D = H`` and the
  dot product is defined. One decoder layer. No input feeding (Luong et al.'s feeding of
  ``o_{t-1}`` into the next step). Dropout (off by default) only on the embeddings, between
  encoder layers and on ``s~_t``.
* Padding is ``<pad>`` = 0 at the end of a sequence; the backward encoder reads each word reversed
  within its own length, so padding never reaches a real position, and attention masks it.
* The output layer never predicts ``<pad>`` or ``<s>`` (their scores are ``-inf``), so every
  distribution is over the phones and ``</s>``, and decoding cannot produce them.
* The length normaliser is ``|y|^alpha`` with ``|y|`` counting ``</s>``, simpler than Wu et al.'s
  ``((5 + |y|) / 6)^alpha``; ``alpha = 0`` is the plain sum of log-probabilities.

The recorded run of the chapter (``book/results/seq2seq_g2p.json``) is made by
``python -m nlpcourse.seq2seq_runs train --config g2p`` (:mod:`nlpcourse.seq2seq_runs`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nlpcourse.guard import reference
from nlpcourse.rnn import GRU, LSTM
from nlpcourse.training import Logger, evaluating, train_loop

PAD, BOS, EOS = "<pad>", "<s>", "</s>"
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
ATTENTIONS = ("none", "dot", "bilinear", "additive")
CELLS = ("gru", "lstm")
PLACEMENTS = ("luong", "bahdanau")

Pron = tuple[str, ...]


# ========================================================================== 1. vocabulary, batches


class Vocab:
    """Symbols <-> ids. The target vocabulary starts ``<pad>``, ``<s>``, ``</s>`` (ids 0, 1, 2);
    the source vocabulary starts with ``<pad>`` alone. Unknown symbols raise ``ValueError``."""

    def __init__(self, symbols: Iterable[str], specials: Sequence[str] = (PAD,)):
        self.symbols = list(specials) + sorted(set(symbols) - set(specials))
        self.index = {s: i for i, s in enumerate(self.symbols)}
        self.specials = tuple(specials)

    def __len__(self) -> int:
        return len(self.symbols)

    def __repr__(self) -> str:
        return f"Vocab({len(self)} symbols: {' '.join(self.symbols[:12])} ...)"

    def encode(self, seq: Sequence[str], bos: bool = False, eos: bool = False) -> list[int]:
        """The ids of ``seq`` (with ``<s>`` / ``</s>`` added on request)."""
        if len(seq) == 0:
            raise ValueError("cannot encode an empty sequence")
        unknown = [s for s in seq if s not in self.index or s in self.specials]
        if unknown:
            raise ValueError(
                f"unknown symbol(s) {sorted(set(unknown))} in {seq!r}; this vocabulary has "
                f"{' '.join(self.symbols[len(self.specials) :])}"
            )
        ids = [self.index[s] for s in seq]
        return ([BOS_ID] if bos else []) + ids + ([EOS_ID] if eos else [])

    def decode(self, ids: Iterable[int]) -> tuple[str, ...]:
        """Symbols of ``ids``, stopping at ``</s>`` and skipping ``<pad>`` and ``<s>``."""
        out = []
        for i in ids:
            i = int(i)
            if len(self.specials) > 2 and i == EOS_ID:
                break
            if i >= len(self.specials):
                out.append(self.symbols[i])
        return tuple(out)


def g2p_vocabs(train: dict[str, list[Pron]]) -> tuple[Vocab, Vocab]:
    """The letter vocabulary and the phone vocabulary of a CMUdict training split."""
    letters = {c for w in train for c in w}
    phones = {p for prons in train.values() for pron in prons for p in pron}
    return Vocab(letters), Vocab(phones, specials=(PAD, BOS, EOS))


def pad_batch(seqs: Sequence[Sequence[int]]) -> Tensor:
    """Id lists of different lengths -> one (B, T) tensor padded with ``<pad>`` = 0 at the end."""
    if len(seqs) == 0 or any(len(s) == 0 for s in seqs):
        raise ValueError("pad_batch needs at least one sequence and no empty sequence")
    out = torch.full((len(seqs), max(map(len, seqs))), PAD_ID, dtype=torch.long)  # (B, T)
    for b, s in enumerate(seqs):
        out[b, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return out


def g2p_pairs(
    data: dict[str, list[Pron]], src: Vocab, tgt: Vocab
) -> list[tuple[list[int], list[int]]]:
    """Training pairs (letter ids, ``<s>`` phone ids ``</s>``): one per pronunciation."""
    return [
        (src.encode(word), tgt.encode(pron, bos=True, eos=True))
        for word, prons in data.items()
        for pron in prons
    ]


def make_batches(
    pairs: Sequence[tuple[list[int], list[int]]], batch_size: int, generator: torch.Generator
) -> list[tuple[Tensor, Tensor]]:
    """Shuffle, sort chunks of 50 batches by source length (less padding), cut, shuffle batches."""
    order = torch.randperm(len(pairs), generator=generator).tolist()
    chunk = 50 * batch_size
    batches = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start : start + chunk], key=lambda i: len(pairs[i][0]))
        for b in range(0, len(part), batch_size):
            idx = part[b : b + batch_size]
            src = pad_batch([pairs[i][0] for i in idx])  # (B, S)
            tgt = pad_batch([pairs[i][1] for i in idx])  # (B, T + 1)
            batches.append((src, tgt))
    perm = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in perm]


# ================================================================================== 2. attention


@reference
def masked_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """Softmax over the last axis of ``scores`` (B, S) where ``mask`` (B, S) is True, eq.
    (att-context); masked positions get exactly 0. A row with no unmasked position is an error."""
    if scores.shape != mask.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and mask {tuple(mask.shape)} differ")
    mask = mask.bool()
    if not mask.any(dim=-1).all():
        raise ValueError("every row of the mask needs at least one True (unmasked) position")
    return torch.softmax(scores.masked_fill(~mask, -math.inf), dim=-1)  # (B, S)


@reference
def dot_attention(query: Tensor, keys: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Dot-product attention as one function: scores ``s . k_j`` (att-score), the masked softmax
    (att-context) and the context ``sum_j a_j k_j`` (att-context). ``query`` (B, D), ``keys``
    (B, S, D), ``mask`` (B, S) -> ``(weights (B, S), context (B, D))``."""
    scores = (keys * query.unsqueeze(1)).sum(-1)  # (B, S, D) * (B, 1, D) -> (B, S)
    weights = masked_softmax(scores, mask)  # (B, S)
    context = (weights.unsqueeze(2) * keys).sum(1)  # (B, S, 1) * (B, S, D) -> (B, D)
    return weights, context


@reference
def additive_scores(query: Tensor, keys: Tensor, W_1: Tensor, W_2: Tensor, v: Tensor) -> Tensor:
    """``score_j = v^T tanh(W_1 s + W_2 k_j)``, eq. (att-score), with ``query`` s (B, H),
    ``keys`` (B, S, D), ``W_1`` (A, H), ``W_2`` (A, D), ``v`` (A,) -> scores (B, S)."""
    hidden = torch.tanh((query @ W_1.T).unsqueeze(1) + keys @ W_2.T)  # (B, 1, A) + (B, S, A)
    return hidden @ v  # (B, S, A) @ (A,) -> (B, S)


class Attention(nn.Module):
    """What the three attentions share: ``forward(query (B, H), keys (B, S, D), mask (B, S))``
    returns ``(weights (B, S), context (B, D))``. ``forward`` also takes a block of queries
    (B, T, H) -> ``(weights (B, T, S), context (B, T, D))``, so teacher forcing scores all ``T``
    decoder states at once without copying the keys ``T`` times.

    A subclass defines ``prepare``, the part of the score that depends on the keys alone (the
    keys themselves, ``W k_j`` or ``W_2 k_j``), and ``scores`` of a block of queries against it,
    (B, T, H), (B, S, .) -> (B, T, S). The decoder prepares each word's keys once and reuses them
    at every output step."""

    def prepare(self, keys: Tensor) -> Tensor:
        """The keys' part of the score, (B, S, D) -> (B, S, .)."""
        return keys

    def scores(self, query: Tensor, prepared: Tensor) -> Tensor:
        raise NotImplementedError

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        """The scores of one query per word: (B, H), (B, S, D) -> (B, S)."""
        return self.scores(query.unsqueeze(1), self.prepare(keys)).squeeze(1)  # (B, 1, S) -> (B, S)

    def forward(
        self, query: Tensor, keys: Tensor, mask: Tensor, prepared: Tensor | None = None
    ) -> tuple[Tensor | None, Tensor]:
        if query.ndim not in (2, 3) or keys.ndim != 3 or keys.shape[0] != query.shape[0]:
            raise ValueError(
                f"attention expects query (B, H) and keys (B, S, D), got {tuple(query.shape)} "
                f"and {tuple(keys.shape)}"
            )
        one = query.ndim == 2
        q = query.unsqueeze(1) if one else query  # (B, T, H)
        prepared = self.prepare(keys) if prepared is None else prepared  # (B, S, .)
        scores = self.scores(q, prepared)  # (att-score), (B, T, S)
        weights = masked_softmax(scores, mask.unsqueeze(1).expand_as(scores))  # (att-context)
        context = torch.bmm(weights, keys)  # (att-context), (B, T, S) x (B, S, D) -> (B, T, D)
        return (weights.squeeze(1), context.squeeze(1)) if one else (weights, context)


class DotAttention(Attention):
    """``score(s, k_j) = s . k_j``, eq. (att-score) (needs H = D; no parameters, no scaling)."""

    def scores(self, query: Tensor, prepared: Tensor) -> Tensor:
        if query.shape[-1] != prepared.shape[-1]:
            raise ValueError(
                f"dot attention needs H = D, got {query.shape[-1]} and {prepared.shape[-1]}"
            )
        return torch.bmm(query, prepared.transpose(1, 2))  # (B, T, H) x (B, D, S) -> (B, T, S)


class BilinearAttention(Attention):
    """``score(s, k_j) = s^T W k_j``, eq. (att-score) (Luong et al.'s "general" score)."""

    def __init__(self, H: int, D: int):
        super().__init__()
        self.W = nn.Linear(D, H, bias=False)  # W (H, D)

    def prepare(self, keys: Tensor) -> Tensor:
        return self.W(keys)  # W k_j, (B, S, H)

    def scores(self, query: Tensor, prepared: Tensor) -> Tensor:
        return torch.bmm(query, prepared.transpose(1, 2))  # (B, T, H) x (B, H, S) -> (B, T, S)


class AdditiveAttention(Attention):
    """``score(s, k_j) = v^T tanh(W_1 s + W_2 k_j)``, eq. (att-score) (Bahdanau et al.)."""

    def __init__(self, H: int, D: int, A: int | None = None):
        super().__init__()
        A = A or H
        self.W_1 = nn.Linear(H, A, bias=False)  # W_1 (A, H)
        self.W_2 = nn.Linear(D, A, bias=True)  # W_2 (A, D) and the bias inside the tanh
        self.v = nn.Linear(A, 1, bias=False)  # v (A,)

    def prepare(self, keys: Tensor) -> Tensor:
        return self.W_2(keys)  # W_2 k_j + b, (B, S, A)

    def scores(self, query: Tensor, prepared: Tensor) -> Tensor:
        Ws = self.W_1(query).unsqueeze(2)  # (B, T, 1, A)
        Wk = prepared.unsqueeze(1)  # (B, 1, S, A)
        return self.v(torch.tanh(Ws + Wk)).squeeze(3)  # (B, T, S, A) -> (B, T, S)


def encoder_summary(keys: Tensor, mask: Tensor) -> Tensor:
    """The encoder's summary of each word, ``c = [h_S^fwd ; h_1^bwd]``: the forward half of the
    last letter's key and the backward half of the first letter's. ``keys`` (B, S, D), ``mask``
    (B, S) -> (B, D). It starts the decoder, eq. (s2s-init), and is the fixed context without
    attention."""
    half = keys.shape[2] // 2  # D/2, each direction's width
    last = (mask.sum(1) - 1).view(-1, 1, 1).expand(-1, 1, half)  # the last letter, (B, 1, D/2)
    h_fwd_last = keys[:, :, :half].gather(1, last).squeeze(1)  # h_S^fwd, (B, D/2)
    return torch.cat([h_fwd_last, keys[:, 0, half:]], dim=1)  # [h_S^fwd ; h_1^bwd], (B, D)


class FixedContext(Attention):
    """No attention (``attention="none"``): the context is the same vector at every step, the
    encoder's summary :func:`encoder_summary`, whatever the query; there are no weights (None)."""

    def forward(
        self, query: Tensor, keys: Tensor, mask: Tensor, prepared: Tensor | None = None
    ) -> tuple[Tensor | None, Tensor]:
        c = encoder_summary(keys, mask)  # (B, D)
        return None, c if query.ndim == 2 else c.unsqueeze(1).expand(-1, query.shape[1], -1)


def make_attention(kind: str, H: int, D: int) -> Attention:
    if kind not in ATTENTIONS:
        raise ValueError(f"attention must be one of {ATTENTIONS}, got {kind!r}")
    return {
        "none": lambda: FixedContext(),
        "dot": lambda: DotAttention(),
        "bilinear": lambda: BilinearAttention(H, D),
        "additive": lambda: AdditiveAttention(H, D),
    }[kind]()


# ===================================================================================== 3. model


class Memory(NamedTuple):
    """What the decoder reads about each of ``N`` words: the encoder's output."""

    keys: Tensor  # k_j, (N, S, D), zero at padding
    mask: Tensor  # True at real letters, (N, S)
    prepared: Tensor  # the keys' part of the attention score, (N, S, .)

    def rows(self, index: Tensor) -> Memory:
        """The memory of the words ``index`` (N',), repeated where an index repeats."""
        return Memory(*(field.index_select(0, index) for field in self))


# The decoder's recurrence, chosen when the model is built. Its state is one tensor per word, so
# that beam search reorders it with one gather: ``s`` (N, H) for a GRU, ``[s ; m]`` (N, 2H) for
# an LSTM (``m`` its memory cell, which starts at 0). ``start`` makes the first state from
# ``s_0``, ``run`` reads inputs (T, N, E') and returns ``s_1 .. s_T`` (T, N, H) and the last
# state, and ``query`` is the part of a state that attention reads, ``s`` (N, H).


class GRUDecoder(GRU):
    """Chapter 4's GRU as the decoder's recurrence, eq. (s2s-dec); the state is ``s`` (N, H)."""

    def start(self, s_0: Tensor) -> Tensor:
        return s_0  # (N, H)

    def run(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        s, s_last = self(x, state.unsqueeze(0))  # (T, N, H), (1, N, H)
        return s, s_last[0]

    def query(self, state: Tensor) -> Tensor:
        return state  # s, (N, H)


class LSTMDecoder(LSTM):
    """Chapter 4's LSTM as the decoder's recurrence, eq. (s2s-dec); the state is ``[s ; m]``
    (N, 2H), the memory cell starting at 0."""

    def start(self, s_0: Tensor) -> Tensor:
        return torch.cat([s_0, torch.zeros_like(s_0)], dim=1)  # [s_0 ; m_0 = 0], (N, 2H)

    def run(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        h_0, m_0 = state.chunk(2, dim=1)  # (N, H) each
        s, (s_last, m_last) = self(x, (h_0.unsqueeze(0), m_0.unsqueeze(0)))  # (T, N, H)
        return s, torch.cat([s_last[0], m_last[0]], dim=1)  # (N, 2H)

    def query(self, state: Tensor) -> Tensor:
        return state[:, : self.hidden_size]  # s, (N, H)


RECURRENCES = {"gru": (GRU, GRUDecoder), "lstm": (LSTM, LSTMDecoder)}  # cell: (encoder, decoder)


class Seq2Seq(nn.Module):
    """Bidirectional RNN encoder, RNN decoder, attention (module docstring).

    ``Seq2Seq(V_x, V_y, E, H, attention, cell, placement, dropout, enc_layers)``: ``V_x``
    letters and ``V_y`` phones (ids 0, 1, 2 are ``<pad> <s> </s>``), embeddings of width ``E``,
    decoder width ``H`` (even), ``attention`` one of ``"none" "dot" "bilinear" "additive"``,
    ``cell`` ``"gru"`` or ``"lstm"`` (chapter 4's layers), ``placement`` ``"luong"`` (the query
    is the new state ``s_t``, eq. (s2s-dec)) or ``"bahdanau"`` (the query is ``s_{t-1}`` and the
    context is also an input of the recurrent step, eq. (s2s-bahdanau)), and ``enc_layers``
    stacked bidirectional encoder layers (1 by default). ``dropout`` (0 by default; the recorded
    run uses it) zeroes a share of the letter and phone embeddings, of the inputs of encoder
    layers above the first and of ``s~_t`` while training. ``src`` is (B, S) letter ids padded
    with 0.

    The options are chosen once, here: the cell picks the layers (the decoder's is a
    :class:`GRUDecoder` or :class:`LSTMDecoder`, which keeps the LSTM's ``[s ; m]`` state to
    itself), the attention its module (:func:`make_attention`; :class:`FixedContext` for
    ``"none"``) and the placement the step and the teacher-forcing pass that :meth:`step` and
    :meth:`forward` run (``_luong_step`` / ``_luong_forcing`` or the Bahdanau pair).
    """

    def __init__(
        self,
        V_x: int,
        V_y: int,
        E: int = 64,
        H: int = 128,
        attention: str = "additive",
        cell: str = "gru",
        placement: str = "luong",
        dropout: float = 0.0,
        enc_layers: int = 1,
    ):
        super().__init__()
        if not isinstance(enc_layers, int) or enc_layers < 1:
            raise ValueError(f"enc_layers must be an integer >= 1, got {enc_layers!r}")
        if H % 2 or H < 2:
            raise ValueError(f"H must be even (each encoder direction is H/2 wide), got {H}")
        if cell not in CELLS:
            raise ValueError(f"cell must be one of {CELLS}, got {cell!r}")
        if placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        self.dropout = dropout
        self.V_x, self.V_y, self.E, self.H, self.attention_kind = V_x, V_y, E, H, attention
        self.cell, self.placement, self.enc_layers = cell, placement, enc_layers  # for the record
        RNN, Decoder = RECURRENCES[cell]
        D = H  # the keys [h_fwd ; h_bwd] have the decoder's width
        self.emb_x = nn.Embedding(V_x, E, padding_idx=PAD_ID)
        self.enc_fwd = RNN(E, H // 2)
        self.enc_bwd = RNN(E, H // 2)
        # layers 2 .. enc_layers: each direction reads both directions' states of the layer below
        self.enc_upper = nn.ModuleList(
            nn.ModuleList([RNN(D, H // 2), RNN(D, H // 2)]) for _ in range(enc_layers - 1)
        )
        self.W_init = nn.Linear(D, H)
        self.emb_y = nn.Embedding(V_y, E, padding_idx=PAD_ID)
        self.dec = Decoder(E + D if placement == "bahdanau" else E, H)  # Bahdanau: input [e ; c]
        self.attention = make_attention(attention, H, D)
        self.W_c = nn.Linear(D + H, H)
        self.W_o = nn.Linear(H, V_y)
        never = torch.zeros(V_y, dtype=torch.bool)
        never[[PAD_ID, BOS_ID]] = True
        self.register_buffer("never_output", never, persistent=False)
        # the placement's step and teacher-forcing pass, eq. (s2s-dec) or (s2s-bahdanau)
        self._step, self._forcing = {
            "luong": (self._luong_step, self._luong_forcing),
            "bahdanau": (self._bahdanau_step, self._bahdanau_forcing),
        }[placement]

    def _drop(self, x: Tensor) -> Tensor:
        """Dropout (only while training) on the embeddings, between encoder layers and on ``s~_t``;
        0 by default."""
        return F.dropout(x, self.dropout, self.training)

    # ------------------------------------------------------------------------------ encoder
    def _check_src(self, src: Tensor) -> Tensor:
        if not isinstance(src, Tensor) or src.ndim != 2 or src.dtype != torch.long:
            raise ValueError("src must be a (B, S) tensor of letter ids (torch.long)")
        if src.shape[0] == 0 or src.shape[1] == 0 or (src[:, 0] == PAD_ID).any():
            raise ValueError("src has an empty sequence (a row that starts with <pad>)")
        if src.min() < 0 or src.max() >= self.V_x:
            raise ValueError(f"src ids must lie in [0, {self.V_x}), got {src.min()}..{src.max()}")
        return src

    @staticmethod
    def _bidirectional(
        fwd: nn.Module, bwd: nn.Module, x: Tensor, rev: Tensor
    ) -> tuple[Tensor, Tensor]:
        """One bidirectional layer over ``x`` (B, S, E'): ``fwd`` reads left to right, ``bwd``
        reads each word reversed within its length (``rev`` (B, S), the reversed positions);
        returns both directions' states, (B, S, H/2) each, at the letters' own positions."""
        h_fwd, _ = fwd(x.transpose(0, 1))  # (S, B, H/2)
        x_rev = x.gather(1, rev.unsqueeze(2).expand(-1, -1, x.shape[2]))  # (B, S, E')
        h_bwd_rev, _ = bwd(x_rev.transpose(0, 1))  # (S, B, H/2)
        h_bwd_rev = h_bwd_rev.transpose(0, 1)  # (B, S, H/2)
        h_bwd = h_bwd_rev.gather(1, rev.unsqueeze(2).expand(-1, -1, h_bwd_rev.shape[2]))
        return h_fwd.transpose(0, 1), h_bwd  # (B, S, H/2) each

    def encode(self, src: Tensor) -> tuple[Memory, Tensor]:
        """``src`` (B, S) -> the :class:`Memory` of each word (keys (B, S, D), mask (B, S), the
        prepared keys) and the decoder's first state, (B, H) or (B, 2H)."""
        self._check_src(src)
        S = src.shape[1]
        mask = src != PAD_ID  # (B, S)
        lengths = mask.sum(1)  # (B,)
        e = self._drop(self.emb_x(src))  # (B, S, E)
        # reverse each word within its own length: position j <-> L - 1 - j, padding stays put
        j = torch.arange(S).unsqueeze(0)  # (1, S)
        rev = torch.where(j < lengths.unsqueeze(1), lengths.unsqueeze(1) - 1 - j, j)  # (B, S)
        h_fwd, h_bwd = self._bidirectional(self.enc_fwd, self.enc_bwd, e, rev)  # (B, S, H/2) x 2
        for layer in self.enc_upper:  # layers 2 .. enc_layers
            fwd, bwd = cast(nn.ModuleList, layer)
            x = self._drop(torch.cat([h_fwd, h_bwd], dim=2))  # (B, S, D)
            h_fwd, h_bwd = self._bidirectional(fwd, bwd, x, rev)  # (B, S, H/2) x 2
        keys = torch.cat([h_fwd, h_bwd], dim=2) * mask.unsqueeze(2)  # (s2s-enc), (B, S, D)
        s_0 = torch.tanh(self.W_init(encoder_summary(keys, mask)))  # (s2s-init), (B, H)
        prepared = self.attention.prepare(keys)  # (B, S, .)
        return Memory(keys, mask, prepared), self.dec.start(s_0)

    # ------------------------------------------------------------------------------ decoder
    def predict(self, context: Tensor, s: Tensor) -> Tensor:
        """``log softmax(W_o tanh(W_c [c_t ; s_t]))``, eq. (s2s-dec), over the last axis;
        ``<pad>`` and ``<s>`` get -inf. (N, [T,] D), (N, [T,] H) -> (N, [T,] V)."""
        o = torch.tanh(self.W_c(torch.cat([context, s], dim=-1)))  # (s2s-dec), (N, [T,] H)
        o = self._drop(o)
        logits = self.W_o(o).masked_fill(self.never_output, -math.inf)  # (N, [T,] V)
        return torch.log_softmax(logits, dim=-1)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Teacher forcing: ``tgt`` (B, T + 1) is ``<s> y_1 .. y_T </s>`` padded; returns the
        log-probabilities (B, T, V) of ``tgt[:, 1:]`` given the true previous phones."""
        memory, state = self.encode(src)  # (B, S, D) ..., (B, H) or (B, 2H)
        return self._forcing(tgt[:, :-1], state, memory)  # (B, T, V)

    def _luong_forcing(self, y_in: Tensor, state: Tensor, memory: Memory) -> Tensor:
        """Luong: the recurrence does not depend on attention, so all T states come first and
        attention scores them at once. ``y_in`` (B, T) -> (B, T, V)."""
        e = self._drop(self.emb_y(y_in))  # (B, T, E)
        s, _ = self.dec.run(e.transpose(0, 1), state)  # (s2s-dec), (T, B, H)
        s = s.transpose(0, 1)  # (B, T, H)
        _, context = self.attention(s, memory.keys, memory.mask, memory.prepared)  # (B, T, D)
        return self.predict(context, s)  # (B, T, V)

    def _bahdanau_forcing(self, y_in: Tensor, state: Tensor, memory: Memory) -> Tensor:
        """Bahdanau: each step's recurrence reads that step's context, so one step at a time."""
        logps = []
        for y_prev in y_in.unbind(1):  # (B,)
            logp_t, state, _ = self._bahdanau_step(y_prev, state, memory)  # (B, V)
            logps.append(logp_t)
        return torch.stack(logps, dim=1)  # (B, T, V)

    def loss(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Mean negative log-likelihood over the non-padding target phones, eq. (s2s-loss)."""
        logp = self(src, tgt)  # (B, T, V)
        gold = tgt[:, 1:]  # (B, T)
        return F.nll_loss(logp.reshape(-1, self.V_y), gold.reshape(-1), ignore_index=PAD_ID)

    def step(
        self, y_prev: Tensor, state: Tensor, memory: Memory
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """One decoder step for N words: previous phones (N,) and states (N, H) or (N, 2H) ->
        log-probabilities (N, V), new states, attention weights (N, S) or None."""
        return self._step(y_prev, state, memory)

    def _luong_step(
        self, y_prev: Tensor, state: Tensor, memory: Memory
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Eq. (s2s-dec): the new state ``s_t`` is the query."""
        e = self._drop(self.emb_y(y_prev))  # (N, E)
        _, state = self.dec.run(e.unsqueeze(0), state)  # (N, H) or (N, 2H)
        s = self.dec.query(state)  # s_t, (N, H)
        weights, context = self.attention(s, memory.keys, memory.mask, memory.prepared)
        return self.predict(context, s), state, weights  # (N, V), ..., (N, S) or None

    def _bahdanau_step(
        self, y_prev: Tensor, state: Tensor, memory: Memory
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Eq. (s2s-bahdanau): the previous state ``s_{t-1}`` is the query and the context is
        an input of the step."""
        e = self._drop(self.emb_y(y_prev))  # (N, E)
        query = self.dec.query(state)  # s_{t-1}, (N, H)
        weights, context = self.attention(query, memory.keys, memory.mask, memory.prepared)
        x = torch.cat([e, context], dim=1)  # (s2s-bahdanau), (N, E + D)
        _, state = self.dec.run(x.unsqueeze(0), state)  # (N, H) or (N, 2H)
        return self.predict(context, self.dec.query(state)), state, weights

    # ----------------------------------------------------------------------------- decoding
    @torch.no_grad()
    def greedy(
        self, src: Tensor, max_len: int = 30, return_attention: bool = False
    ) -> list[list[int]] | tuple[list[list[int]], list[Tensor]]:
        """Greedy decoding: the most probable phone at each step until ``</s>`` or ``max_len``.

        Returns the phone ids of each word (without ``</s>``), and with ``return_attention`` the
        attention weights of each word, (T_b, S_b) (rows: output phones incl. ``</s>``)."""
        return self._decode(src, max_len, None, 1.0, return_attention)

    @torch.no_grad()
    def sample(
        self,
        src: Tensor,
        max_len: int = 30,
        temperature: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> list[list[int]]:
        """Ancestral sampling from ``softmax(log P / temperature)`` (temperature -> 0: greedy)."""
        if not temperature > 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        gen = generator if generator is not None else torch.Generator().manual_seed(0)
        return self._decode(src, max_len, gen, temperature, False)  # type: ignore[return-value]

    def _decode(self, src, max_len, generator, temperature, return_attention):
        if max_len < 1:
            raise ValueError(f"max_len must be at least 1, got {max_len}")
        with evaluating(self):  # eval mode inside, the caller's mode restored after
            memory, state = self.encode(src)
            B = src.shape[0]
            y = torch.full((B,), BOS_ID, dtype=torch.long)  # (B,)
            done = torch.zeros(B, dtype=torch.bool)
            out, atts = [], []
            for _ in range(max_len):
                logp, state, weights = self._step(y, state, memory)  # (B, V), (B, S)
                if generator is None:
                    y = logp.argmax(1)  # (B,)
                else:
                    y = torch.multinomial(
                        torch.softmax(logp / temperature, 1), 1, generator=generator
                    )
                    y = y.squeeze(1)  # (B,)
                y = y.masked_fill(done, PAD_ID)
                out.append(y)
                if weights is not None:
                    atts.append(weights)
                done = done | (y == EOS_ID)
                if done.all():
                    break
        ys = torch.stack(out, 1)  # (B, T)
        seqs = [_until_eos(row) for row in ys.tolist()]
        if not return_attention:
            return seqs
        A = torch.stack(atts, 1) if atts else torch.zeros(B, ys.shape[1], src.shape[1])  # (B, T, S)
        lengths = memory.mask.sum(1).tolist()
        return seqs, [A[b, : len(seqs[b]) + 1, : lengths[b]] for b in range(B)]

    @torch.no_grad()
    def beam_search(
        self, src: Tensor, beam_size: int = 5, max_len: int = 30, length_penalty: float = 0.0
    ) -> tuple[list[list[int]], list[float]]:
        """Batched beam search: each word keeps its ``K`` best hypotheses (by the sum of
        log-probabilities); a hypothesis that has produced ``</s>`` stays in the beam, frozen, and
        a word's search stops when all ``K`` of its hypotheses have ended (or at ``max_len``, where
        unfinished ones end). The answer is the hypothesis in the final beam with the best
        ``log P(y | x) / |y|^alpha``, ``alpha = length_penalty``, eq. (beam-norm).

        All ``B * K`` hypotheses are rows of one tensor. Each step runs the decoder once, on the
        rows still live (not ended; at the first step only one per word), and picks each word's
        ``K`` best of its ``K * V`` extensions with one ``topk``; ended rows are masked, not
        removed: they extend only with ``<pad>``, at no cost, and skip the decoder.

        Returns the phone ids of each word (without ``</s>``) and that normalised score."""
        tokens, score, length = self._beam(src, beam_size, max_len)
        normalised = score / length.clamp(min=1) ** length_penalty  # (beam-norm), (B, K)
        best = normalised.argmax(1)  # (B,)
        B = src.shape[0]
        seqs = [_until_eos(tokens[b, best[b]].tolist()) for b in range(B)]
        return seqs, normalised[torch.arange(B), best].tolist()

    @torch.no_grad()
    def beam_nbest(
        self, src: Tensor, beam_size: int = 5, max_len: int = 30
    ) -> list[list[tuple[list[int], float]]]:
        """The whole final beam of :meth:`beam_search` for each word: its hypotheses (phone ids
        without ``</s>``) with their summed log-probabilities ``log P(y | x)``, best first
        (hypotheses of probability 0, which fill the beam of a short word, left out). The N-best
        list that rescoring with another model starts from (chapter 5, "A joint-sequence n-gram
        model")."""
        tokens, score, _ = self._beam(src, beam_size, max_len)
        out = []
        for b in range(src.shape[0]):
            order = torch.argsort(score[b], descending=True, stable=True).tolist()
            out.append([
                (_until_eos(tokens[b, k].tolist()), float(score[b, k]))
                for k in order if score[b, k] > -math.inf
            ])  # fmt: skip
        return out

    def _beam(self, src: Tensor, beam_size: int, max_len: int) -> tuple[Tensor, Tensor, Tensor]:
        """The search of :meth:`beam_search`; returns the final beam: tokens (B, K, T), summed
        log-probabilities (B, K) and lengths counting ``</s>`` (B, K)."""
        if not isinstance(beam_size, int) or beam_size < 1:
            raise ValueError(f"beam_size must be an integer >= 1, got {beam_size!r}")
        if max_len < 1:
            raise ValueError(f"max_len must be at least 1, got {max_len}")
        with evaluating(self):  # eval mode inside, the caller's mode restored after
            K, V = beam_size, self.V_y
            memory, state = self.encode(src)  # (B, S, D) ..., (B, H) or (B, 2H)
            B = src.shape[0]
            word = torch.arange(B).repeat_interleave(K)  # the word of each hypothesis row, (B*K,)
            state = state.repeat_interleave(K, 0)  # (B*K, H) or (B*K, 2H)
            score = torch.full((B, K), -math.inf)
            score[:, 0] = 0.0  # one live hypothesis to start with, so no duplicates
            ended = torch.zeros(B, K, dtype=torch.bool)
            length = torch.zeros(B, K)
            tokens = torch.zeros(B, K, 0, dtype=torch.long)
            frozen = torch.full((V,), -math.inf)
            frozen[PAD_ID] = 0.0  # an ended hypothesis continues only with <pad>, at no cost
            y = torch.full((B * K,), BOS_ID, dtype=torch.long)  # (B*K,)
            for t in range(max_len):
                live = (~ended & (score > -math.inf)).view(B * K)  # (B*K,)
                rows = live.nonzero().squeeze(1)  # the live rows, (N,)
                logp_live, state_live, _ = self._step(y[rows], state[rows], memory.rows(word[rows]))
                logp = frozen.expand(B * K, V).index_copy(0, rows, logp_live)  # (B*K, V)
                state = state.index_copy(0, rows, state_live)  # (B*K, H) or (B*K, 2H)
                total = score.unsqueeze(2) + logp.view(B, K, V)  # (B, K, V)
                score, flat = total.view(B, K * V).topk(K, dim=1)  # best K of K*V, (B, K)
                beam, token = flat // V, flat % V  # which hypothesis it extends, with which phone
                tokens = torch.cat(
                    [tokens.gather(1, beam.unsqueeze(2).expand(-1, -1, t)), token.unsqueeze(2)], 2
                )  # (B, K, t + 1)
                was_ended = ended.gather(1, beam)  # (B, K)
                length = length.gather(1, beam) + (~was_ended).float()
                ended = was_ended | (token == EOS_ID)
                rows_from = (beam + torch.arange(B).unsqueeze(1) * K).view(B * K)  # (B*K,)
                state = state.index_select(0, rows_from)  # each new hypothesis takes its parent's
                y = token.view(B * K)
                if (ended | torch.isinf(score)).all():
                    break  # early stopping: every beam holds K ended hypotheses
        return tokens, score, length

    def sequence_logprob(
        self, src: Tensor, ys: Sequence[Sequence[int]], eos: bool = True
    ) -> list[float]:
        """``log P(y | x)`` of given outputs (phone ids, ``</s>`` appended if ``eos``), by
        teacher forcing: the independent recomputation of a beam's score."""
        tgts = [[BOS_ID, *y] + ([EOS_ID] if eos else []) for y in ys]
        with torch.no_grad():
            logp = self(src, pad_batch(tgts))  # (B, T, V)
        out = []
        for b, tgt in enumerate(tgts):
            out.append(sum(float(logp[b, t, tgt[t + 1]]) for t in range(len(tgt) - 1)))
        return out


def _until_eos(ids: Sequence[int]) -> list[int]:
    out = []
    for i in ids:
        if i in (EOS_ID, PAD_ID):
            break
        out.append(int(i))
    return out


Step = Callable[[int, Any], tuple[Tensor, Any]]


@reference
def greedy_decode(step: Step, state: Any, max_len: int) -> list[int]:
    """Greedy decoding of one output with any conditional model given as a function
    ``step(y_prev, state) -> (log_probs (V,), new_state)``: start from ``<s>``, take the most
    probable symbol each step, stop after ``</s>`` (not returned) or ``max_len`` symbols."""
    ys, y = [], BOS_ID
    for _ in range(max_len):
        log_probs, state = step(y, state)  # (V,)
        y = int(torch.argmax(log_probs))
        if y == EOS_ID:
            break
        ys.append(y)
    return ys


@reference
def beam_search(
    step: Step, state: Any, beam_size: int, max_len: int, length_penalty: float = 0.0
) -> tuple[list[int], float]:
    """Beam search for one output as a plain loop over hypotheses, with the model given as
    ``step(y_prev, state) -> (log_probs (V,), new_state)``; the same search as the batched
    :meth:`Seq2Seq.beam_search` (tested equal). Each step extends every live hypothesis by every
    symbol with a finite log-probability, keeps the ``beam_size`` best by their summed
    log-probability (ended hypotheses stay, frozen) and stops when all kept ones have ended.
    Returns the kept hypothesis with the best ``score / |y|^alpha`` (beam-norm), ``|y|``
    counting ``</s>``, without its ``</s>``, and that normalised score."""
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be an integer >= 1, got {beam_size!r}")
    # a hypothesis: (summed log-probability, symbols so far, state, ended?)
    beam: list[tuple[float, list[int], Any, bool]] = [(0.0, [], state, False)]
    for _ in range(max_len):
        candidates = []
        for score, ys, s, ended in beam:
            if ended:
                candidates.append((score, ys, s, True))  # frozen: kept as it is
                continue
            log_probs, s_new = step(ys[-1] if ys else BOS_ID, s)  # (V,)
            for v, lp in enumerate(log_probs.tolist()):
                if lp > -math.inf:
                    candidates.append((score + lp, ys + [v], s_new, v == EOS_ID))
        candidates.sort(key=lambda c: -c[0])  # stable: ties keep their order
        beam = candidates[:beam_size]
        if all(ended for *_, ended in beam):
            break  # early stopping: every kept hypothesis has ended

    def normalised(h: tuple[float, list[int], Any, bool]) -> float:
        return h[0] / max(len(h[1]), 1) ** length_penalty  # (beam-norm)

    best = max(beam, key=normalised)
    return _until_eos(best[1]), normalised(best)


def model_step(model: Seq2Seq, src: Tensor) -> tuple[Step, Tensor]:
    """One word ``src`` (S,) as a step function for :func:`greedy_decode` and
    :func:`beam_search`, with its first state. The model runs in evaluation mode inside each
    call and is left in the mode it was in."""
    with torch.no_grad(), evaluating(model):
        memory, s_0 = model.encode(src.unsqueeze(0))  # keys (1, S, D) ..., s_0 (1, H) or (1, 2H)

    def step(y_prev: int, s: Tensor) -> tuple[Tensor, Tensor]:
        with torch.no_grad(), evaluating(model):
            logp, s_new, _ = model.step(torch.tensor([y_prev]), s, memory)
        return logp[0], s_new  # (V,), (1, H) or (1, 2H)

    return step, s_0


def beam_search_loop(
    model: Seq2Seq, src: Tensor, beam_size: int = 5, max_len: int = 30, length_penalty: float = 0.0
) -> tuple[list[int], float]:
    """:func:`beam_search` on one word ``src`` (S,) of ``model``: the per-hypothesis loop."""
    step, s_0 = model_step(model, src)
    return beam_search(step, s_0, beam_size, max_len, length_penalty)


# ====================================================================================== 4. metrics


@reference
def edit_distance(a: Sequence, b: Sequence) -> int:
    """Levenshtein distance (insertions, deletions, substitutions, each costing 1), eq. (edit-dist):

    d[i][j] = min(d[i-1][j] + 1, d[i][j-1] + 1, d[i-1][j-1] + [a_i != b_j]),
    d[i][0] = i,  d[0][j] = j.
    """
    previous = list(range(len(b) + 1))  # row i - 1 of d
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            current[j] = min(
                previous[j] + 1,  # delete a_i
                current[j - 1] + 1,  # insert b_j
                previous[j - 1] + (a[i - 1] != b[j - 1]),  # substitute (or match)
            )
        previous = current
    return previous[-1]


def align(pred: Sequence[str], ref: Sequence[str]) -> list[tuple[str | None, str | None]]:
    """A minimum-cost alignment of ``pred`` to ``ref`` (the back trace of (edit-dist)): pairs
    ``(p, r)``, ``(p, None)`` for an insertion, ``(None, r)`` for a deletion. The number of
    pairs with ``p != r`` is the edit distance."""
    n, m = len(pred), len(ref)
    d = [[i + j if i == 0 or j == 0 else 0 for j in range(m + 1)] for i in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i][j] = min(
                d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (pred[i - 1] != ref[j - 1])
            )
    pairs: list[tuple[str | None, str | None]] = []
    i, j = n, m
    while i or j:
        if i and j and d[i][j] == d[i - 1][j - 1] + (pred[i - 1] != ref[j - 1]):
            pairs.append((pred[i - 1], ref[j - 1]))
            i, j = i - 1, j - 1
        elif i and d[i][j] == d[i - 1][j] + 1:
            pairs.append((pred[i - 1], None))
            i -= 1
        else:
            pairs.append((None, ref[j - 1]))
            j -= 1
    return pairs[::-1]


@reference
def error_rates(
    predictions: Sequence[Sequence[str]], references: Sequence[Sequence[Sequence[str]]]
) -> tuple[float, float]:
    """Word error rate and phone error rate, against any of each word's pronunciations.

    WER = (words whose prediction equals none of their pronunciations) / words          (wer)
    PER = sum_w d(pred_w, ref_w*) / sum_w |ref_w*|,  ref_w* the pronunciation closest   (per)
          to the prediction (the shorter one on a tie).
    """
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    if len(predictions) == 0:
        raise ValueError("no words to score")
    wrong, errors, ref_length = 0, 0, 0
    for pred, refs in zip(predictions, references, strict=True):
        if len(refs) == 0:
            raise ValueError(f"a word with no reference pronunciation (prediction {pred!r})")
        pred = tuple(pred)
        wrong += all(pred != tuple(r) for r in refs)
        d, n = min((edit_distance(pred, r), len(r)) for r in refs)
        errors += d
        ref_length += n
    return wrong / len(predictions), errors / ref_length


def transcribe(
    model: Seq2Seq,
    words: Sequence[str],
    src: Vocab,
    tgt: Vocab,
    method: str = "greedy",
    beam_size: int = 5,
    length_penalty: float = 0.0,
    temperature: float = 1.0,
    max_len: int = 30,
    batch_size: int = 256,
    seed: int = 0,
) -> list[Pron]:
    """Pronounce ``words`` with ``method`` = ``"greedy"``, ``"beam"`` or ``"sample"``."""
    if method not in ("greedy", "beam", "sample"):
        raise ValueError(f"method must be 'greedy', 'beam' or 'sample', got {method!r}")
    gen = torch.Generator().manual_seed(seed)
    out: list[Pron] = []
    for start in range(0, len(words), batch_size):
        x = pad_batch([src.encode(w) for w in words[start : start + batch_size]])  # (B, S)
        ids: list[list[int]]
        if method == "greedy":
            ids = model.greedy(x, max_len)  # type: ignore[assignment]
        elif method == "beam":
            ids, _ = model.beam_search(x, beam_size, max_len, length_penalty)
        else:
            ids = model.sample(x, max_len, temperature, gen)
        out.extend(tgt.decode(row) for row in ids)
    return out


def nbest(
    model: Seq2Seq,
    words: Sequence[str],
    src: Vocab,
    tgt: Vocab,
    beam_size: int = 10,
    max_len: int = 30,
    batch_size: int = 256,
) -> list[list[tuple[Pron, float]]]:
    """Each word's final beam (:meth:`Seq2Seq.beam_nbest`) as pronunciations with their
    ``log P(y | x)``, best first; a pronunciation reached twice keeps its best score."""
    out: list[list[tuple[Pron, float]]] = []
    for start in range(0, len(words), batch_size):
        x = pad_batch([src.encode(w) for w in words[start : start + batch_size]])  # (B, S)
        for beam in model.beam_nbest(x, beam_size, max_len):
            best: dict[Pron, float] = {}
            for ids, score in beam:
                pron = tgt.decode(ids)
                best[pron] = max(best.get(pron, -math.inf), score)
            out.append(list(best.items()))
    return out


def pronunciation_logprobs(
    model: Seq2Seq,
    words: Sequence[str],
    prons: Sequence[Sequence[str]],
    src: Vocab,
    tgt: Vocab,
    batch_size: int = 256,
) -> list[float]:
    """``log P(pron | word)`` of given pairs by teacher forcing (:meth:`Seq2Seq.sequence_logprob`,
    ``</s>`` included): the RNN's score of any candidate pronunciation, e.g. another model's.
    An empty pronunciation or one with a phone the model does not know gets ``-inf``."""
    if len(words) != len(prons):
        raise ValueError(f"{len(words)} words for {len(prons)} pronunciations")
    out = [-math.inf] * len(words)
    known = [i for i, p in enumerate(prons) if p and all(ph in tgt.index for ph in p)]
    with evaluating(model):  # no dropout
        for start in range(0, len(known), batch_size):
            rows = known[start : start + batch_size]
            x = pad_batch([src.encode(words[i]) for i in rows])  # (B, S)
            ys = [tgt.encode(prons[i]) for i in rows]
            for i, logp in zip(rows, model.sequence_logprob(x, ys), strict=True):
                out[i] = logp
    return out


def evaluate(
    model: Seq2Seq, data: dict[str, list[Pron]], src: Vocab, tgt: Vocab, **decoding: Any
) -> dict[str, Any]:
    """WER and PER of ``model`` on ``data`` (word -> pronunciations), decoding as
    :func:`transcribe` does; also the rates with stress digits removed from both sides."""
    from nlpcourse.data import strip_stress_digits

    words = list(data)
    predictions = transcribe(model, words, src, tgt, **decoding)
    refs = [data[w] for w in words]
    wer, per = error_rates(predictions, refs)
    wer_ns, per_ns = error_rates(
        [strip_stress_digits(p) for p in predictions],
        [[strip_stress_digits(r) for r in rs] for rs in refs],
    )
    return {
        "wer": wer,
        "per": per,
        "wer_no_stress": wer_ns,
        "per_no_stress": per_ns,
        "words": words,
        "predictions": predictions,
    }


# ===================================================================================== 5. training


def linear_decay(step: int, decay_over: int) -> float:
    """The share of the starting learning rate that :func:`train` uses at ``step`` (from 1) when
    it decays over ``N = decay_over`` steps: ``(N - t + 1) / N``, never below ``1 / N``."""
    return max(decay_over - step + 1, 1) / decay_over


def train(
    model: nn.Module,
    pairs: Sequence[tuple[list[int], list[int]]],
    steps: int,
    batch_size: int = 64,
    lr: float = 2e-3,
    clip: float = 1.0,
    seed: int = 0,
    log_every: int = 100,
    logger: Logger | None = None,
    show_progress: bool = False,
    max_minutes: float | None = None,
    decay_over: int | None = None,
) -> list[float]:
    """Teacher forcing on batches of ``pairs`` for ``steps`` updates of the book's training loop,
    :func:`nlpcourse.training.train_loop` (Adam, gradient-norm clipping to ``clip``, logging to
    ``logger``, the time limit ``max_minutes``). ``model`` is a :class:`Seq2Seq` or any module
    with its ``loss(src, tgt)`` (the mean loss of a batch). Epochs are reshuffled with ``seed``
    (:func:`make_batches`). Returns the mean training loss (eq. (s2s-loss)) of each ``log_every``
    steps, and of the steps after the last multiple. With ``decay_over`` = N the learning rate
    falls linearly from ``lr`` at the first step to ``lr / N`` at step N,
    ``lr_t = lr (N - t + 1) / N`` (:func:`linear_decay`); otherwise it stays ``lr``."""
    if steps < 1 or batch_size < 1:
        raise ValueError(f"steps and batch_size must be >= 1, got {steps} and {batch_size}")
    torch.manual_seed(seed)  # the dropout masks
    gen = torch.Generator().manual_seed(seed)  # the order of the batches
    batches: list[tuple[Tensor, Tensor]] = []
    loss = cast(Callable[[Tensor, Tensor], Tensor], model.loss)  # a Seq2Seq, or any model with it

    def batch_loss(step: int) -> tuple[Tensor, float]:
        if not batches:
            batches.extend(make_batches(pairs, batch_size, gen))
        src, tgt = batches.pop()
        return loss(src, tgt), 1.0  # each batch's mean counts once

    schedule = None if not decay_over else functools.partial(linear_decay, decay_over=decay_over)
    return train_loop(
        model, batch_loss, steps, lr, clip, log_every, logger, schedule,
        max_minutes=max_minutes, show_progress=show_progress,
    )  # fmt: skip


if __name__ == "__main__":  # `python -m nlpcourse.seq2seq train ...`: the recorded run's command
    # is the command of nlpcourse.seq2seq_runs, which imports this module (the model sits below its
    # runs): this module does not import it, it hands the command line over to it.
    import runpy

    runpy.run_module("nlpcourse.seq2seq_runs", run_name="__main__", alter_sys=True)
