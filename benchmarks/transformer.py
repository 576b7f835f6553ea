"""Benchmark: the from-scratch attention of nlpcourse.transformer against torch's, and the KV cache.

1. Time of the lesson function :func:`nlpcourse.transformer.scaled_dot_product_attention` (what
   ``MultiHeadAttention`` uses when attention weights are asked for) and of
   :func:`nlpcourse.transformer.fused_attention` (what it uses otherwise: torch's fused kernel,
   plus the zero output of queries with no allowed key), given a boolean mask or
   ``causal=True``, against ``torch.nn.functional.scaled_dot_product_attention`` (torch's fused
   kernel) alone, on random float32 ``(B, H, T, D/H)`` queries, keys and values with a causal
   mask, at T = 128, 512 and 1024, forward and backward timed separately (the loss is the sum of
   the outputs). Then :class:`nlpcourse.transformer.MultiHeadAttention` against
   ``torch.nn.MultiheadAttention`` (weights copied) on ``(B, T, D)`` inputs, forward + backward,
   ours given the causal mask as a boolean tensor (as torch's is) and as ``causal=True`` (as the
   language model gives it). Ours and torch's are timed in alternation, several rounds; each time
   is the median, and the ratio is ours / torch's (lower is better). Goal (issue 31): the module
   at most 1.1 x ``torch.nn.MultiheadAttention``'s time at T = 512.
2. Generation speed of :meth:`nlpcourse.transformer.TransformerLM.generate` (greedy, 256 new
   tokens, the same model, both under ``torch.no_grad``) with and without the KV cache, from a
   one-token prompt and continuing a 256-token prompt (where the context is long enough for
   recomputation to cost what it costs in use). Goal: the cache >= 5 x faster.
3. Training speed on chapter 5's G2P task (issue 30): words per second of chapter 5's recorded
   attention RNN and chapter 6's recorded transformer, each built from its recorded
   configuration, on the same training batches, timed in turns (:func:`compare_training_speed`;
   alone: ``.venv/bin/python -c "import runpy;
   runpy.run_path('benchmarks/transformer.py')['compare_training_speed']()"``).

Times are CPU seconds of this process (``time.process_time``), which a machine shared with other
jobs distorts less than wall-clock time. Uses as many threads as the machine has cores (2 on the
course's CI machine), or ``BENCH_THREADS`` if set (1 on a machine shared with other jobs, where
idle threads spin).
Run:  BENCH_THREADS=1 .venv/bin/python benchmarks/transformer.py
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from functools import partial

import torch

from nlpcourse.testing import copy_from_torch_mha
from nlpcourse.transformer import (
    MultiHeadAttention,
    TransformerLM,
    causal_mask,
    fused_attention,
    scaled_dot_product_attention,
)

B, H, D = 2, 8, 256  # batch, heads, model width (head width D/H = 32)
LENGTHS = (128, 512, 1024)
ROUNDS, REPEATS = 2, 3
NEW_TOKENS = 256
PROMPTS = (1, 256)  # prompt lengths: the context grows from 1 to 257, or from 256 to 512
G2P_BATCHES = 8  # training batches timed per model
LM = {"V": 10_000, "D": 128, "H": 4, "n_layers": 2, "D_ff": 512, "max_len": 512}


def median_time(function, *args) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.process_time()
        function(*args)
        times.append(time.process_time() - start)
    return statistics.median(times)


def alternate(ours, theirs, *args) -> tuple[float, float]:
    """Median seconds of ``ours(*args)`` and ``theirs(*args)``, timed in alternating rounds."""
    a, b = [], []
    for _ in range(ROUNDS):
        a.append(median_time(ours, *args))
        b.append(median_time(theirs, *args))
    return statistics.median(a), statistics.median(b)


def forward_backward(function, q, k, v, mask) -> tuple[float, float]:
    """CPU seconds of one forward pass and of its backward pass."""
    for x in (q, k, v):
        x.grad = None
    start = time.process_time()
    out = function(q, k, v, mask)
    middle = time.process_time()
    out.sum().backward()
    return middle - start, time.process_time() - middle


def median_phases(function, *args) -> tuple[float, float]:
    runs = [forward_backward(function, *args) for _ in range(REPEATS)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def lesson(q, k, v, mask):
    return scaled_dot_product_attention(q, k, v, mask)[0]


def ours_fused(q, k, v, mask):
    return fused_attention(q, k, v, mask)


def ours_causal(q, k, v, mask):
    return fused_attention(q, k, v, causal=True)


def fused(q, k, v, mask):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


ATTENTION = {
    "lesson version": lesson,
    "fused_attention": ours_fused,
    "fused, causal=True": ours_causal,
    "torch fused": fused,
}


def compare_attention() -> dict[int, float]:
    print(f"scaled dot-product attention, causal mask, B={B}, H={H}, D/H={D // H}, float32,")
    print(f"median CPU ms (of {ROUNDS} rounds x {REPEATS} runs); ratio = (forward + backward) /")
    print("torch fused's (forward + backward)")
    print(f"{'T':>6} {'function':>18} {'forward':>9} {'backward':>9} {'total':>9} {'ratio':>7}")
    ratios = {}
    for T in LENGTHS:
        g = torch.Generator().manual_seed(T)
        q, k, v = (torch.randn(B, H, T, D // H, generator=g, requires_grad=True) for _ in range(3))
        mask = causal_mask(T)
        phases: dict[str, list[tuple[float, float]]] = {name: [] for name in ATTENTION}
        for _ in range(ROUNDS):  # in alternation, so a change of load hits all alike
            for name, function in ATTENTION.items():
                phases[name].append(median_phases(function, q, k, v, mask))
        times = {
            name: (statistics.median(p[0] for p in ps), statistics.median(p[1] for p in ps))
            for name, ps in phases.items()
        }
        torch_total = sum(times["torch fused"])
        for name, (fwd, bwd) in times.items():
            ratio = (fwd + bwd) / torch_total
            print(
                f"{T:>6} {name:>18} {1e3 * fwd:>9.1f} {1e3 * bwd:>9.1f} {1e3 * (fwd + bwd):>9.1f}"
                f" {ratio:>7.2f}"
            )
        ratios[T] = sum(times["fused_attention"]) / torch_total
    return ratios


def ours_mha_step(layer: MultiHeadAttention, x: torch.Tensor) -> None:
    layer.zero_grad()
    x.grad = None
    layer(x, mask=causal_mask(x.shape[1]))[0].sum().backward()


def ours_mha_causal_step(layer: MultiHeadAttention, x: torch.Tensor) -> None:
    layer.zero_grad()
    x.grad = None
    layer(x, causal=True)[0].sum().backward()


def torch_mha_step(layer: torch.nn.MultiheadAttention, x: torch.Tensor) -> None:
    layer.zero_grad()
    x.grad = None
    forbidden = ~causal_mask(x.shape[1])  # torch: True = may NOT attend
    layer(x, x, x, attn_mask=forbidden, need_weights=False)[0].sum().backward()


def compare_multi_head() -> dict[int, float]:
    print(f"\nmulti-head self-attention, causal, B={B}, D={D}, H={H}, float32, forward + backward")
    print(f"{'T':>6} {'ours, mask':>11} {'ratio':>7} {'ours, causal':>13} {'ratio':>7}", end="")
    print(f" {'torch.nn':>10}")
    torch.manual_seed(0)
    theirs_layer = torch.nn.MultiheadAttention(D, H, batch_first=True)
    ours_layer = MultiHeadAttention(D, H)
    copy_from_torch_mha(ours_layer, theirs_layer)
    ratios = {}
    for T in LENGTHS:
        x = torch.randn(B, T, D, requires_grad=True)
        ours, theirs = alternate(
            partial(ours_mha_step, ours_layer), partial(torch_mha_step, theirs_layer), x
        )
        causal, theirs_again = alternate(
            partial(ours_mha_causal_step, ours_layer), partial(torch_mha_step, theirs_layer), x
        )
        theirs = statistics.median([theirs, theirs_again])
        ratios[T] = ours / theirs
        print(
            f"{T:>6} {1e3 * ours:>11.1f} {ours / theirs:>7.2f} {1e3 * causal:>13.1f}"
            f" {causal / theirs:>7.2f} {1e3 * theirs:>10.1f}"
        )
    return ratios


def compare_kv_cache() -> dict[int, float]:
    torch.manual_seed(0)
    lm = TransformerLM(**LM, positions="sinusoidal").eval()
    print(f"\ngreedy generation of {NEW_TOKENS} tokens, TransformerLM {LM}, CPU seconds")
    speedups = {}
    for prompt_length in PROMPTS:
        prompt = torch.randint(0, LM["V"], (prompt_length,)).tolist()
        seconds: dict[bool, list[float]] = {False: [], True: []}
        outputs = {}
        for _ in range(ROUNDS):
            for cached in (False, True):
                start = time.process_time()
                outputs[cached] = lm.generate(prompt, NEW_TOKENS, "greedy", kv_cache=cached)
                seconds[cached].append(time.process_time() - start)
        same = "the same" if outputs[True] == outputs[False] else "DIFFERENT"
        slow, quick = statistics.median(seconds[False]), statistics.median(seconds[True])
        speedups[prompt_length] = slow / quick
        print(
            f"prompt of {prompt_length:>3} tokens: recomputing {slow:6.2f} s "
            f"({NEW_TOKENS / slow:5.0f} tokens/s), with the KV cache {quick:6.2f} s "
            f"({NEW_TOKENS / quick:5.0f} tokens/s): {slow / quick:4.1f}x, {same} tokens"
        )
    return speedups


def compare_training_speed() -> dict[str, float]:
    """Training words (pronunciation pairs) per second of chapter 5's recorded G2P model and
    chapter 6's, each built from its recorded configuration, on the same batches of the
    training split: forward, backward, clipping and an Adam step, the two timed in turns."""
    from nlpcourse import seq2seq as s2s
    from nlpcourse import seq2seq_runs, transformer_runs
    from nlpcourse.data import cmudict_split

    train, _, _ = cmudict_split()
    models = {
        "attention RNN (chapter 5)": seq2seq_runs.build(seq2seq_runs.CONFIGS["g2p"], train),
        "transformer (chapter 6)": transformer_runs.build(transformer_runs.CONFIGS["g2p"], train),
    }
    batch_size = seq2seq_runs.CONFIGS["g2p"].training.batch_size
    assert batch_size == transformer_runs.CONFIGS["g2p"]["batch_size"]
    _, src, tgt = models["transformer (chapter 6)"]
    pairs = s2s.g2p_pairs(train, src, tgt)
    batches = s2s.make_batches(pairs, batch_size, torch.Generator().manual_seed(0))[:G2P_BATCHES]
    optimizers = {name: torch.optim.Adam(m.parameters()) for name, (m, _, _) in models.items()}

    def steps(name: str) -> None:
        model = models[name][0]
        model.train()
        for src_batch, tgt_batch in batches:
            optimizers[name].zero_grad()
            model.loss(src_batch, tgt_batch).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizers[name].step()

    names = list(models)
    seconds = alternate(lambda: steps(names[0]), lambda: steps(names[1]))
    words = len(batches) * batch_size
    print(f"\nG2P training, the recorded configurations, {len(batches)} batches of {batch_size}")
    speeds = {}
    for name, s in zip(names, seconds, strict=True):
        speeds[name] = words / s
        print(f"{name:>28}: {1e3 * s / len(batches):7.1f} ms per step, {words / s:6.0f} words/s")
    return speeds


def main() -> None:
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", os.cpu_count() or 1)))
    cpu = platform.processor() or platform.machine()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {cpu}\n")
    compare_attention()
    ratios = compare_multi_head()
    speedups = compare_kv_cache()
    compare_training_speed()
    long = PROMPTS[-1]
    print(
        f"\ngoals: MultiHeadAttention at T=512 {ratios[512]:.2f}x torch.nn.MultiheadAttention "
        f"(goal <= 1.1): {'met' if ratios[512] <= 1.1 else 'NOT met'}; "
        f"KV cache {speedups[long]:.1f}x after a "
        f"{long}-token prompt, {speedups[PROMPTS[0]]:.1f}x from one token (goal >= 5): "
        f"{'met' if speedups[long] >= 5 else 'NOT met'} at {long}"
    )


if __name__ == "__main__":
    main()
