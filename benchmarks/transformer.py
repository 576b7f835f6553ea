"""Benchmark: the from-scratch attention of nlpcourse.transformer against torch's, and the KV cache.

1. Forward + backward time of :func:`nlpcourse.transformer.scaled_dot_product_attention` against
   ``torch.nn.functional.scaled_dot_product_attention`` (torch's fused kernel), on random float32
   ``(B, H, T, D/H)`` queries, keys and values with a causal mask, at T = 128, 512 and 1024; and
   of :class:`nlpcourse.transformer.MultiHeadAttention` against ``torch.nn.MultiheadAttention``
   (weights copied) on ``(B, T, D)`` inputs. The loss is the sum of the outputs; the backward
   pass reaches the inputs and every parameter. Ours and torch's are timed in alternation, several
   rounds; each time is the median, and the ratio is ours / torch's (lower is better).
   Goal (issue 14): our attention at most 1.5 x the fused kernel's time at T = 512.
2. Generation speed of :meth:`nlpcourse.transformer.TransformerLM.generate` (greedy, 256 new
   tokens) with and without the KV cache, tokens per second. Goal: the cache >= 5 x faster.

Uses as many threads as the machine has cores (2 on the course's CI machine), or
``BENCH_THREADS`` if set (1 on a machine shared with other jobs, where idle threads spin).
Run:  .venv/bin/python benchmarks/transformer.py
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from functools import partial

import torch

from nlpcourse.transformer import (
    MultiHeadAttention,
    TransformerLM,
    causal_mask,
    copy_from_torch_mha,
    scaled_dot_product_attention,
)

B, H, D = 2, 8, 256  # batch, heads, model width (head width D/H = 32)
LENGTHS = (128, 512, 1024)
ROUNDS, REPEATS = 2, 3
NEW_TOKENS = 256
LM = {"V": 10_000, "D": 128, "H": 4, "n_layers": 2, "D_ff": 512, "max_len": 300}


def median_time(function, *args) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        function(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def alternate(ours, theirs, *args) -> tuple[float, float]:
    """Median seconds of ``ours(*args)`` and ``theirs(*args)``, timed in alternating rounds."""
    a, b = [], []
    for _ in range(ROUNDS):
        a.append(median_time(ours, *args))
        b.append(median_time(theirs, *args))
    return statistics.median(a), statistics.median(b)


def attention_step(function, q, k, v, mask) -> None:
    for x in (q, k, v):
        x.grad = None
    out = function(q, k, v, mask)
    out.sum().backward()


def ours_attention(q, k, v, mask):
    return scaled_dot_product_attention(q, k, v, mask)[0]


def torch_attention(q, k, v, mask):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def compare_attention() -> dict[int, float]:
    print(f"scaled dot-product attention, causal mask, B={B}, H={H}, D/H={D // H}, float32,")
    print(f"forward + backward, median ms (of {ROUNDS} rounds x {REPEATS} runs)")
    print(f"{'T':>6} {'ours':>10} {'torch fused':>12} {'ratio':>7}")
    ratios = {}
    for T in LENGTHS:
        g = torch.Generator().manual_seed(T)
        q, k, v = (torch.randn(B, H, T, D // H, generator=g, requires_grad=True) for _ in range(3))
        mask = causal_mask(T)
        ours, theirs = alternate(
            partial(attention_step, ours_attention),
            partial(attention_step, torch_attention),
            q,
            k,
            v,
            mask,
        )
        ratios[T] = ours / theirs
        print(f"{T:>6} {1e3 * ours:>10.1f} {1e3 * theirs:>12.1f} {ours / theirs:>7.2f}")
    return ratios


def ours_mha_step(layer: MultiHeadAttention, x: torch.Tensor) -> None:
    layer.zero_grad()
    x.grad = None
    layer(x, mask=causal_mask(x.shape[1]))[0].sum().backward()


def torch_mha_step(layer: torch.nn.MultiheadAttention, x: torch.Tensor) -> None:
    layer.zero_grad()
    x.grad = None
    forbidden = ~causal_mask(x.shape[1])  # torch: True = may NOT attend
    layer(x, x, x, attn_mask=forbidden, need_weights=False)[0].sum().backward()


def compare_multi_head() -> None:
    print(f"\nmulti-head self-attention, causal, B={B}, D={D}, H={H}, float32, forward + backward")
    print(f"{'T':>6} {'ours':>10} {'torch.nn':>12} {'ratio':>7}")
    torch.manual_seed(0)
    theirs_layer = torch.nn.MultiheadAttention(D, H, batch_first=True)
    ours_layer = MultiHeadAttention(D, H)
    copy_from_torch_mha(ours_layer, theirs_layer)
    for T in LENGTHS:
        x = torch.randn(B, T, D, requires_grad=True)
        ours, theirs = alternate(
            partial(ours_mha_step, ours_layer), partial(torch_mha_step, theirs_layer), x
        )
        print(f"{T:>6} {1e3 * ours:>10.1f} {1e3 * theirs:>12.1f} {ours / theirs:>7.2f}")


def compare_kv_cache() -> float:
    torch.manual_seed(0)
    lm = TransformerLM(**LM, positions="sinusoidal").eval()
    print(f"\ngreedy generation of {NEW_TOKENS} tokens, TransformerLM {LM}")
    seconds = {}
    outputs = {}
    for cached in (False, True):
        start = time.perf_counter()
        outputs[cached] = lm.generate([0], NEW_TOKENS, strategy="greedy", kv_cache=cached)
        seconds[cached] = time.perf_counter() - start
        name = "with the KV cache" if cached else "recomputing"
        print(f"{name:>18}: {seconds[cached]:6.2f} s, {NEW_TOKENS / seconds[cached]:7.0f} tokens/s")
    same = "the same" if outputs[True] == outputs[False] else "DIFFERENT"
    speedup = seconds[False] / seconds[True]
    print(f"speed-up {speedup:.1f}x; the two generated {same} tokens")
    return speedup


def main() -> None:
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", os.cpu_count() or 1)))
    cpu = platform.processor() or platform.machine()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {cpu}\n")
    ratios = compare_attention()
    compare_multi_head()
    speedup = compare_kv_cache()
    print(
        f"\ngoals: attention at T=512 {ratios[512]:.2f}x the fused kernel (goal <= 1.5): "
        f"{'met' if ratios[512] <= 1.5 else 'NOT met'}; KV cache {speedup:.1f}x (goal >= 5): "
        f"{'met' if speedup >= 5 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
