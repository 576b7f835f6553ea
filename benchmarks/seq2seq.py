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
