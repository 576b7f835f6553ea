"""Fit and scoring throughput of nlpcourse.ngram.NGramLM against nltk.lm, on the same data.

    .venv/bin/python benchmarks/ngram.py [--order 3] [--nltk-ngrams 300]

Both models are fitted on the Brown training split (vocabulary rule min_count=4, which nltk.lm
calls unk_cutoff=4) and score trigrams of the test split: NGramLM all of them in one call,
nltk.lm the first ``--nltk-ngrams`` (one ``score`` call per n-gram, as its API works), because at
its speed the whole test split would take hours. Throughput is n-grams per second; the ratios
are NGramLM over nltk.lm, measured in this one run.
"""

from __future__ import annotations

import argparse
import platform
import time

from nltk.lm import KneserNeyInterpolated, Laplace, Vocabulary
from nltk.lm.preprocessing import padded_everygram_pipeline

from nlpcourse.data import brown_split
from nlpcourse.ngram import BENGIO_MIN_COUNT, BOS, EOS, NGramLM


def test_ngrams(sentences: list[list[str]], n: int) -> list[tuple[tuple[str, ...], str]]:
    """(context, word) for every predicted word of the padded test sentences."""
    out = []
    for s in sentences:
        padded = [BOS] * (n - 1) + s + [EOS]
        out += [(tuple(padded[i - n + 1 : i]), padded[i]) for i in range(n - 1, len(padded))]
    return out


def score_one_by_one(score, sample: list) -> list[float]:
    """One call per n-gram, as nltk.lm's API works."""
    return [score(w, ctx) for ctx, w in sample]


def timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--order", type=int, default=3)
    parser.add_argument("--nltk-ngrams", type=int, default=300)
    args = parser.parse_args()
    n = args.order
    train, _, test = brown_split()
    queries = test_ngrams(test, n)
    print(f"Brown train: {sum(map(len, train)):,} tokens; test: {len(queries):,} {n}-grams")
    print(
        f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}"
    )
    print()
    header = f"{'model':34s} {'fit (s)':>8s} {'score (n-grams/s)':>18s}"
    print(header + f" {'fit ratio':>10s} {'score ratio':>12s}")
    print("(ratios: NGramLM scoring the whole test split in one call, over nltk.lm)")

    for ours_smoothing, nltk_class in (("kneser-ney", KneserNeyInterpolated), ("add-k", Laplace)):
        lm, fit_ours = timed(NGramLM(n, ours_smoothing).fit, train, BENGIO_MIN_COUNT)
        ppl, score_ours = timed(lm.perplexity, test)
        speed_ours = len(queries) / score_ours

        ref = nltk_class(n, vocabulary=Vocabulary(unk_cutoff=BENGIO_MIN_COUNT))
        ngrams, vocab = padded_everygram_pipeline(n, train)
        _, fit_nltk = timed(ref.fit, ngrams, vocab)
        sample = queries[: args.nltk_ngrams]
        _, score_nltk = timed(score_one_by_one, ref.score, sample)
        speed_nltk = len(sample) / score_nltk
        _, score_calls = timed(score_one_by_one, lm.prob, sample)
        speed_calls = len(sample) / score_calls

        name = f"NGramLM({n}, {ours_smoothing!r})"
        print(f"{name:34s} {fit_ours:8.2f} {speed_ours:18,.0f}")
        name = "  the same, one prob() call per n-gram"
        print(f"{name:34s} {'':8s} {speed_calls:18,.0f}")
        name = f"nltk.lm.{nltk_class.__name__}({n})"
        print(
            f"{name:34s} {fit_nltk:8.2f} {speed_nltk:18,.1f} "
            f"{fit_nltk / fit_ours:9.1f}x {speed_ours / speed_nltk:11,.0f}x"
        )
        print(f"  (NGramLM test perplexity {ppl:.1f})")


if __name__ == "__main__":
    main()
