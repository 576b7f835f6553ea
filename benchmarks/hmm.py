"""Benchmark: nlpcourse.hmm.HMM against nltk's HiddenMarkovModelTagger on Brown.

For each tagset (the 12 universal tags, then the original Brown tags, about 420 of them in
training) both taggers are trained on the same data, the training split of
:func:`nlpcourse.data.brown_split`, and tag the same test sentences. nltk gets add-0.1 (Lidstone)
smoothing for its start, transition and emission distributions, which keeps it from giving unknown
words probability 0. nltk is timed on the first 200 test sentences only (it is slow), after one
untimed call that builds its emission cache; ours on the same sentences and on the whole test
split. Each timing is the fastest of 3 runs with universal tags, of 2 with Brown tags. Prints
tokens per second, the ratios, the accuracy of both on the same sentences, and the accuracy of
ours and of the most-frequent-tag baseline on the whole test split, for known and unknown words.

Takes about 3 minutes on 2 CPU cores. Run:  .venv/bin/python benchmarks/hmm.py
"""

from __future__ import annotations

import os
import platform
import time

import nltk
import numpy as np
from nltk.probability import LidstoneProbDist
from nltk.tag.hmm import HiddenMarkovModelTrainer

from nlpcourse.data import brown_split
from nlpcourse.hmm import HMM, MostFrequentTagger, tagging_accuracy


def timed(function, *args, repeat: int = 1):
    """The result of ``function(*args)`` and its fastest wall-clock time over ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = function(*args)
        times.append(time.perf_counter() - start)
    return result, min(times)


def token_accuracy(predicted: list[list[str]], gold: list[list[tuple[str, str]]]) -> float:
    pairs = [
        (tag, gold_tag)
        for tags, sentence in zip(predicted, gold, strict=True)
        for tag, (_, gold_tag) in zip(tags, sentence, strict=True)
    ]
    return sum(tag == gold_tag for tag, gold_tag in pairs) / len(pairs)


def print_accuracies(taggers: dict, test: list) -> None:
    for name, tagger in taggers.items():
        r = tagging_accuracy(tagger, test)
        print(
            f"  {name:<18s} all {r['all']:.4f}  known {r['known']:.4f}  unknown {r['unknown']:.4f}"
            f"  (unknown words: {r['unknown_rate']:.2%} of tokens)"
        )


def compare(tagset: str, nltk_sentences: int, repeat: int) -> None:
    """Train both taggers on the training split with ``tagset``; time and score them on test."""
    train, _, test = brown_split(tagged=True, tagset=tagset)
    subset = test[:nltk_sentences]
    words_subset = [[w for w, _ in s] for s in subset]
    words_test = [[w for w, _ in s] for s in test]
    n_subset, n_test = sum(map(len, subset)), sum(map(len, test))

    ours, fit_ours = timed(HMM().fit, train)
    estimator = lambda fd, bins: LidstoneProbDist(fd, 0.1, bins)  # noqa: E731
    theirs, fit_theirs = timed(HiddenMarkovModelTrainer().train_supervised, train, estimator)
    _, t_cache = timed(theirs.tag, words_subset[0])  # untimed below: builds nltk's cache
    print(f"== {tagset} tagset: {len(ours.tags_)} tags in training ==")
    print(f"train {len(train):,} sentences, {sum(map(len, train)):,} tokens")
    print(f"test  {len(test):,} sentences, {n_test:,} tokens")
    print(f"training: nlpcourse {fit_ours:.2f} s, nltk {fit_theirs:.2f} s", end="")
    print(f" (+ {t_cache:.1f} s for nltk's emission cache, built on its first call)")

    tagged_theirs, t_theirs = timed(lambda: [theirs.tag(s) for s in words_subset], repeat=repeat)
    tagged_ours, t_ours = timed(ours.tag_sents, words_subset, repeat=repeat)
    tagged_one, t_one = timed(lambda: [ours.tag(s) for s in words_subset], repeat=repeat)
    tagged_all, t_all = timed(ours.tag_sents, words_test, repeat=repeat)
    assert tagged_one == tagged_ours == tagged_all[:nltk_sentences]

    speed_theirs = n_subset / t_theirs
    print(f"tagging speed, tokens/s (first {len(subset)} test sentences = {n_subset:,} tokens)")
    print(f"  {'nltk HiddenMarkovModelTagger.tag':<44s} {speed_theirs:10,.0f}")
    rows = [
        ("nlpcourse HMM.tag, one sentence at a time", n_subset / t_one),
        ("nlpcourse HMM.tag_sents, same sentences", n_subset / t_ours),
        ("nlpcourse HMM.tag_sents, whole test split", n_test / t_all),
    ]
    for name, speed in rows:
        print(f"  {name:<44s} {speed:10,.0f}   {speed / speed_theirs:6.1f} x nltk")

    acc_theirs = token_accuracy([[t for _, t in s] for s in tagged_theirs], subset)
    acc_ours = token_accuracy(tagged_ours, subset)
    print(f"accuracy on those {len(subset)} sentences: nlpcourse {acc_ours:.4f}, ", end="")
    print(f"nltk {acc_theirs:.4f}")
    print("accuracy on the whole test split (known = seen in training):")
    baseline = MostFrequentTagger().fit(train)
    print_accuracies({"nlpcourse HMM": ours, "most frequent tag": baseline}, test)
    print()


def main() -> None:
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"nltk {nltk.__version__}, {platform.machine()}, {os.cpu_count()} CPUs\n"
    )
    compare("universal", nltk_sentences=200, repeat=3)
    compare("brown", nltk_sentences=200, repeat=2)  # 420 tags: nltk's Viterbi is O(T N^2)


if __name__ == "__main__":
    main()
