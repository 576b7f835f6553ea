"""Benchmark: batched beam search against a per-hypothesis loop, and seq2seq training speed.

1. Words per second of :meth:`nlpcourse.seq2seq.Seq2Seq.beam_search` (all words and all ``K``
   hypotheses of a batch advanced together, as ``(B, K, V)`` tensors) against
   :func:`nlpcourse.seq2seq.beam_search_loop` (the readable loop that runs the decoder once per
   hypothesis and word), at beam size 5 on CMUdict test words, with a model trained briefly so
   that the beams are not degenerate. The two must give the same outputs; the script checks it.
2. Words per second of training (forward, backward, clipping, Adam) of ``Seq2Seq`` with
   dot-product attention (chapter 4's GRU layers, Python time loop) against the same architecture
   written with ``torch.nn.GRU`` (bidirectional encoder) and ``torch.nn.MultiheadAttention`` (one
   head), on the same batches. The torch model is the peer a user would pick, not the identical
   function: MultiheadAttention adds query/key/value/output projections and scales by
   ``1/sqrt(D)``, and its backward encoder direction reads padding first.

Ratios are ours / peer's speed (higher is better for ours), in wall-clock time; the beam-search
ratio is also given in CPU time, which a busy machine distorts less. Uses 2 threads, or
``BENCH_THREADS`` threads if that is set.
Run:  .venv/bin/python benchmarks/seq2seq.py
"""

from __future__ import annotations

import os
import platform
import time

import torch
from torch import nn

from nlpcourse import seq2seq as s2s
from nlpcourse import seq2seq_runs
from nlpcourse.data import cmudict_split

E, H, BATCH = 64, 128, 64
WARM_STEPS = 100  # brief training before the beam benchmark
BEAM_WORDS, BEAM = 100, 5
TRAIN_STEPS = 20


class TorchSeq2Seq(nn.Module):
    """The peer: torch.nn.GRU encoder (bidirectional) and decoder, MultiheadAttention."""

    def __init__(self, V_x: int, V_y: int):
        super().__init__()
        self.emb_x = nn.Embedding(V_x, E, padding_idx=0)
        self.enc = nn.GRU(E, H // 2, bidirectional=True, batch_first=True)
        self.W_init = nn.Linear(H, H)
        self.emb_y = nn.Embedding(V_y, E, padding_idx=0)
        self.dec = nn.GRU(E, H, batch_first=True)
        self.att = nn.MultiheadAttention(H, 1, batch_first=True)
        self.W_c = nn.Linear(2 * H, H)
        self.W_o = nn.Linear(H, V_y)

    def loss(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        mask = src != 0  # (B, S)
        keys, h_n = self.enc(self.emb_x(src))  # (B, S, H), (2, B, H/2)
        s_0 = torch.tanh(self.W_init(torch.cat([h_n[0], h_n[1]], 1))).unsqueeze(0)  # (1, B, H)
        s, _ = self.dec(self.emb_y(tgt[:, :-1]), s_0)  # (B, T, H)
        context, _ = self.att(s, keys, keys, key_padding_mask=~mask)  # (B, T, H)
        logits = self.W_o(torch.tanh(self.W_c(torch.cat([context, s], 2))))  # (B, T, V)
        return nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1), ignore_index=0
        )


def words_per_second(model: nn.Module, batches: list, steps: int) -> float:
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    words, start = 0, time.perf_counter()
    for src, tgt in batches[:steps]:
        loss = model.loss(src, tgt)  # type: ignore[operator]
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        words += src.shape[0]
    return words / (time.perf_counter() - start)


def main() -> None:
    threads = int(os.environ.get("BENCH_THREADS", "2"))
    torch.set_num_threads(threads)
    cpu = platform.processor() or platform.machine()
    load = os.getloadavg()[0]
    print(
        f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, {threads} threads, "
        f"load {load:.1f}"
    )
    train, _, test = cmudict_split()
    src, tgt = s2s.g2p_vocabs(train)
    pairs = s2s.g2p_pairs(train, src, tgt)
    torch.manual_seed(0)
    model = s2s.Seq2Seq(len(src), len(tgt), E, H, "dot")
    s2s.train(model, pairs, WARM_STEPS, BATCH, lr=5e-3, log_every=WARM_STEPS)

    words = list(test)[:BEAM_WORDS]
    x = s2s.pad_batch([src.encode(w) for w in words])  # (B, S)
    start, cpu = time.perf_counter(), time.process_time()
    batched, _ = model.beam_search(x, BEAM, 30, 0.0)
    t_batched, c_batched = time.perf_counter() - start, time.process_time() - cpu
    start, cpu = time.perf_counter(), time.process_time()
    looped = [
        s2s.beam_search_loop(model, x[b][x[b] > 0], BEAM, 30, 0.0)[0] for b in range(len(words))
    ]
    t_loop, c_loop = time.perf_counter() - start, time.process_time() - cpu
    same = sum(a == b for a, b in zip(batched, looped, strict=True))
    print(f"\nbeam search, K = {BEAM}, {len(words)} test words, H = {H}")
    print(f"  batched            {len(words) / t_batched:9.1f} words/s")
    print(f"  per-hypothesis loop{len(words) / t_loop:9.1f} words/s")
    print(f"  ratio batched / loop {t_loop / t_batched:6.1f}x   same output: {same}/{len(words)}")
    print(f"  ratio in CPU time    {c_loop / c_batched:6.1f}x   (all threads' CPU seconds)")

    batches = s2s.make_batches(pairs, BATCH, torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    ours = words_per_second(s2s.Seq2Seq(len(src), len(tgt), E, H, "dot"), batches, TRAIN_STEPS)
    torch.manual_seed(0)
    peer = words_per_second(TorchSeq2Seq(len(src), len(tgt)), batches, TRAIN_STEPS)
    print(f"\ntraining, {TRAIN_STEPS} batches of {BATCH} words, E = {E}, H = {H}")
    print(f"  nlpcourse Seq2Seq (dot)             {ours:8.1f} words/s")
    print(f"  torch.nn.GRU + MultiheadAttention   {peer:8.1f} words/s")
    print(f"  ratio ours / torch                  {ours / peer:8.2f}")


if __name__ == "__main__":
    main()


# ================================================= bilinear against additive score (chapter 5)

import functools  # noqa: E402  (appended section: its own imports)
from collections.abc import Callable  # noqa: E402

SCORE_BATCHES, SCORE_PASSES = 6, 5


def best_cpu_seconds(runs: dict[str, Callable[[], None]], passes: int) -> dict[str, float]:
    """The best of ``passes`` CPU times of each zero-argument function in ``runs``, the functions
    taking turns, so that a busy moment of the machine slows them alike."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(passes):
        for name, run in runs.items():
            start = time.process_time()
            run()
            best[name] = min(best[name], time.process_time() - start)
    return best


def bilinear_vs_additive() -> None:
    """CPU seconds of the bilinear and the additive score at the size of chapter 5's recorded run
    (``seq2seq_runs.CONFIGS["g2p"]``: H = 256, batches of 128 words), on the same 6 training
    batches:

    1. the attention alone, forward and backward: the scores of all T decoder states against the
       S keys of each word (``prepare`` and ``scores``), the masked softmax and the context;
    2. a whole training step of the recorded model with either score (forward, backward, Adam).

    Also counts the numbers each score computes per batch: bilinear ``W k_j`` (B*S*H) and the
    B*T*S scores; additive ``W_2 k_j`` (B*S*A), ``W_1 s_t`` (B*T*A), the B*T*S*A grid of tanh
    hidden vectors and the B*T*S scores. Ratios are additive / bilinear (above 1: bilinear is
    cheaper)."""
    threads = int(os.environ.get("BENCH_THREADS", "2"))
    torch.set_num_threads(threads)
    cpu = platform.processor() or platform.machine()
    print(
        f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, {threads} threads, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    cfg = seq2seq_runs.CONFIGS["g2p"].flat()
    train, _, _ = cmudict_split()
    src_vocab, tgt_vocab = s2s.g2p_vocabs(train)
    pairs = s2s.g2p_pairs(train, src_vocab, tgt_vocab)
    size = cfg["batch_size"]
    batches = s2s.make_batches(
        pairs[: SCORE_BATCHES * size], size, torch.Generator().manual_seed(0)
    )
    H = cfg["H"]
    counts = {"bilinear": 0, "additive": 0}
    for src, tgt in batches:
        B, S = src.shape
        T = tgt.shape[1] - 1  # the decoder's steps
        counts["bilinear"] += B * S * H + B * T * S  # W k_j, then the scores
        counts["additive"] += B * S * H + B * T * H + B * T * S * H + B * T * S  # A = H
    print(f"\nper batch of {size} words, averaged over {len(batches)} batches, H = A = {H}:")
    for kind, n in counts.items():
        print(f"  {kind:9s} computes {n // len(batches):12,d} numbers")
    print(f"  ratio additive / bilinear {counts['additive'] / counts['bilinear']:10.1f}")

    torch.manual_seed(0)
    attentions = {kind: s2s.make_attention(kind, H, H) for kind in ("bilinear", "additive")}
    inputs = []
    for src, tgt in batches:  # random keys and queries of the batch's shape
        B, S = src.shape
        keys = torch.randn(B, S, H, requires_grad=True)  # (B, S, D), D = H
        query = torch.randn(B, tgt.shape[1] - 1, H, requires_grad=True)  # (B, T, H)
        inputs.append((query, keys, src != 0))

    def attention_only(kind: str) -> None:
        for query, keys, mask in inputs:
            _, context = attentions[kind](query, keys, mask)  # type: ignore[misc]
            context.sum().backward()

    models = {}
    for kind in ("bilinear", "additive"):
        config = seq2seq_runs.RunConfig.from_flat({**cfg, "attention": kind})
        model, _, _ = seq2seq_runs.build(config, train)
        models[kind] = (model, torch.optim.Adam(model.parameters(), lr=cfg["lr"]))

    def training_step(kind: str) -> None:
        model, optimizer = models[kind]
        for src, tgt in batches:
            optimizer.zero_grad()
            model.loss(src, tgt).backward()
            optimizer.step()

    for label, run in (("attention alone", attention_only), ("training step", training_step)):
        best = best_cpu_seconds(
            {kind: functools.partial(run, kind) for kind in ("bilinear", "additive")}, SCORE_PASSES
        )
        print(f"\n{label}, forward and backward, best of {SCORE_PASSES} passes (CPU ms/batch)")
        for kind, seconds in best.items():
            print(f"  {kind:9s} {1000 * seconds / len(batches):9.1f}")
        print(f"  ratio additive / bilinear {best['additive'] / best['bilinear']:6.2f}")


if __name__ == "__main__":
    bilinear_vs_additive()
