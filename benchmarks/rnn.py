"""Benchmark: the from-scratch layers of nlpcourse.rnn against torch.nn, and RNN LM training speed.

1. Forward + backward time of ``nlpcourse.rnn.LSTM`` (and ``GRU``, ``RNN``) against
   ``torch.nn.LSTM`` (``GRU``, ``RNN``) with the same weights, on random ``(T, B, D)`` inputs
   with ``H`` hidden units: the loss is the sum of the outputs, the backward pass reaches the
   input and every parameter. "LSTM" is our LSTM with its hand-written backward pass
   (``rnn._LSTMThroughTime``, the one chapter 4 shows); "LSTM, autograd" is our LSTM with
   ``hand_backward=False``. Ours and torch's are timed in alternation, several rounds (after one
   warm-up call each); each time reported is the median, and the ratio is ours / torch's (lower
   is better; 1 = as fast). The goal (issue 44 §4): the LSTM within 2x at the two larger sizes;
   the small, long one (T = 100, H = 64) is stated.
2. Words per second of :func:`nlpcourse.lm.train_lm` (forward, backward, clipping, Adam) for a
   small language model on the Brown training split, vocabulary ``min_count=4``, for each cell,
   and for the LSTM model with ``torch.nn.LSTM`` swapped in as its recurrent layer, in
   alternation, ``LM_ROUNDS`` rounds; the LSTM's ratio to ``torch.nn.LSTM`` inside is printed per
   round. The goal: at least 0.9 (what a user feels: training, not the layer alone).

Uses as many threads as the machine has cores, or ``--threads N`` (on a busy machine one thread
keeps the small sizes from waiting on each other's threads). Prints the load average before and
after. Takes about two minutes on 2 idle CPU cores.
Run:  .venv/bin/python benchmarks/rnn.py [--threads N] [--layers-only]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from functools import partial

import torch

from nlpcourse import lm, rnn
from nlpcourse.data import brown_split

SIZES = [(35, 32, 128, 128), (35, 32, 256, 256), (100, 16, 64, 64)]  # (T, B, D, H)
LAYERS = {
    "LSTM": (rnn.LSTM, torch.nn.LSTM),
    "LSTM, autograd": (partial(rnn.LSTM, hand_backward=False), torch.nn.LSTM),
    "GRU": (rnn.GRU, torch.nn.GRU),
    "RNN": (rnn.RNN, torch.nn.RNN),
}
ROUNDS, REPEATS = 5, 10  # timed in alternation: ROUNDS x (REPEATS of ours, REPEATS of torch's)

LM = {"emb_size": 64, "hidden_size": 64}
LM_TRAINING = {"batch_size": 32, "bptt": 35}
LM_STEPS = 30
LM_ROUNDS = 3  # the four models trained in turn, this many times
TORCH_INSIDE = "lstm, torch.nn.LSTM inside"


def forward_backward(layer: torch.nn.Module, x: torch.Tensor) -> None:
    layer.zero_grad()
    output, _ = layer(x)
    output.sum().backward()


def median_time(function, *args) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        function(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def compare_layers() -> None:
    print(f"forward + backward, median ms (of {ROUNDS} rounds x {REPEATS} runs), ours / torch")
    print(f"{'layer':14s} {'(T, B, D, H)':>18s} {'ours':>9s} {'torch.nn':>9s} {'ratio':>6s}")
    for name, (ours_cls, torch_cls) in LAYERS.items():
        for T, B, D, H in SIZES:
            torch.manual_seed(0)
            theirs = torch_cls(D, H)
            ours = ours_cls(D, H)
            ours.load_state_dict(theirs.state_dict())
            x = torch.randn(T, B, D, requires_grad=True)
            for layer in (ours, theirs):  # warm up
                forward_backward(layer, x)
            t_ours, t_theirs = [], []
            for _ in range(ROUNDS):
                t_ours.append(median_time(forward_backward, ours, x))
                t_theirs.append(median_time(forward_backward, theirs, x))
            a, b = statistics.median(t_ours), statistics.median(t_theirs)
            size = f"({T}, {B}, {D}, {H})"
            print(f"{name:14s} {size:>18s} {a * 1e3:9.2f} {b * 1e3:9.2f} {a / b:6.2f}", flush=True)


def lm_model(cell: str, vocab_size: int) -> rnn.RNNLM:
    """The benchmark's language model for ``cell``; "lstm, torch.nn.LSTM inside" is the LSTM
    model with ``torch.nn.LSTM`` as its recurrent layer. Seeded: every round starts the same."""
    torch.manual_seed(0)
    if cell == TORCH_INSIDE:
        model = rnn.RNNLM(vocab_size, cell="lstm", **LM)
        model.rnn = torch.nn.LSTM(LM["emb_size"], LM["hidden_size"])
        return model
    return rnn.RNNLM(vocab_size, cell=cell, **LM)


def lm_words_per_second() -> None:
    train, valid, _ = brown_split()
    vocab = lm.build_vocab(train, min_count=lm.BENGIO_MIN_COUNT)
    train_ids = lm.encode(train, vocab)
    valid_ids = lm.encode(valid[:20], vocab)  # evaluation is not timed; keep it short
    print(
        f"\nRNN LM training on Brown: |V| = {len(vocab):,}, emb {LM['emb_size']}, "
        f"hidden {LM['hidden_size']}, batch {LM_TRAINING['batch_size']}, "
        f"bptt {LM_TRAINING['bptt']}, {LM_STEPS} steps, {LM_ROUNDS} rounds in alternation"
    )
    cells = ["rnn", "gru", "lstm", TORCH_INSIDE]
    ratios = []
    for round_ in range(1, LM_ROUNDS + 1):
        speed = {}
        for cell in cells:
            model = lm_model(cell, len(vocab))
            history = lm.train_lm(
                model, train_ids, valid_ids, steps=LM_STEPS, eval_every=LM_STEPS, **LM_TRAINING
            )
            speed[cell] = history["words"][-1] / history["seconds"][-1]
            print(f"  round {round_}  {cell:28s} {speed[cell]:8,.0f} words/s", flush=True)
        ratios.append(speed["lstm"] / speed[TORCH_INSIDE])
    rounds = ", ".join(f"{r:.2f}" for r in ratios)
    median = statistics.median(ratios)
    print(f"  lstm / {TORCH_INSIDE}, words per second: {rounds} (median {median:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description="nlpcourse.rnn against torch.nn")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--layers-only", action="store_true", help="skip the LM training part")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    machine = platform.processor() or platform.machine()
    print(f"{machine}, {args.threads} threads, torch {torch.__version__}")
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    start = time.perf_counter()
    compare_layers()
    if not args.layers_only:
        lm_words_per_second()
    print(
        f"\ntotal {time.perf_counter() - start:.0f} s, load average after: {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
