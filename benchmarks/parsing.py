"""Benchmark: nlpcourse.parsing against nltk's parsers on Brown tag sequences.

The grammar is the chapter's PCFG over the 12 universal tags,
:func:`nlpcourse.parsing.brown_tag_pcfg` (with its fallback, so every sequence has a tree), given
to nltk as the same text. For each length
(5 to 40 tags), the first sentences of that length in the test split of
:func:`nlpcourse.data.brown_split` are parsed by

* Viterbi: ``PCFG.viterbi`` (the vectorised Viterbi CKY of ``nlpcourse.parsing_fast``, the
  fast twin of the chapter's loops; one sentence a call) against
  ``nltk.ViterbiParser``; the best log probabilities are checked to agree;
* the inside algorithm, ``PCFG.inside`` (the sum over all trees), beside nltk's Viterbi (nltk has
  no inside algorithm; it does the same amount of work up to the max/sum);
* the same two over the whole group of sentences of that length in one call,
  ``PCFG.viterbi_batch`` and ``PCFG.log_likelihoods`` (how a corpus is parsed; nltk has no such
  call, its ``parse_sents`` parses one sentence after another), checked equal to the per-sentence
  results;
* recognition: ``nlpcourse.parsing.cky`` (the plain-loop CKY of the chapter, which also counts the
  trees) and the vectorised inside pass (recognised when ``log P > -inf``), against
  ``nltk.ChartParser`` (its bottom-up left-corner chart parser, the default) filling its chart for
  the same grammar without probabilities; recognised when a complete edge of the start symbol
  covers the sentence.

Each time is CPU time: the least of ``REPEAT`` runs per sentence (nltk: one run per sentence, it
is slow), averaged over the sentences of a length (batched: the least of ``REPEAT`` runs of the
whole group, divided by its size). Prints milliseconds per sentence, the ratios and the growth
exponent of each (the slope of log time against log length, from 10 to 40 tags).

Takes about 3 minutes on 2 idle CPU cores. Run:  .venv/bin/python benchmarks/parsing.py
"""

from __future__ import annotations

import math
import os
import platform
import time

import nltk
import numpy as np

from nlpcourse.data import brown_split
from nlpcourse.parsing import brown_tag_pcfg, cky

LENGTHS = [5, 10, 15, 20, 30, 40]
PER_LENGTH = 10  # sentences per length
REPEAT = 3


def best_time(function, *args, repeat: int = REPEAT):
    """The result of ``function(*args)`` and its least CPU time (of this process, all threads)
    over ``repeat`` runs: CPU time rather than wall-clock time, so that other work on a shared
    machine does not count."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        result = function(*args)
        times.append(time.process_time() - start)
    return result, min(times)


def nltk_recognises(parser: nltk.ChartParser, words: list[str], start) -> bool:
    chart = parser.chart_parse(words)
    return any(True for _ in chart.select(start=0, end=len(words), is_complete=True, lhs=start))


def main() -> None:
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs")
    print(f"nltk {nltk.__version__}, numpy {np.__version__}")
    print("load average at the start: {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    _, _, test = brown_split(tagged=True, tagset="universal")
    by_length: dict[int, list[list[str]]] = {}
    for sentence in test:
        tags = [t for _, t in sentence]
        if len(tags) in LENGTHS and len(by_length.setdefault(len(tags), [])) < PER_LENGTH:
            by_length[len(tags)].append(tags)
    pcfg = brown_tag_pcfg()
    cnf = pcfg.cnf()
    print(f"grammar: {len(pcfg.rules)} rules, {len(cnf.rules)} in CNF")
    nltk_pcfg = nltk.PCFG.fromstring(str(pcfg))
    nltk_viterbi = nltk.ViterbiParser(nltk_pcfg, max_time=None)
    nltk_cfg = nltk.CFG(nltk_pcfg.start(), nltk_pcfg.productions())
    nltk_chart = nltk.ChartParser(nltk_cfg, max_time=None)
    pcfg.viterbi(by_length[5][0])  # builds the arrays of the grammar once, untimed

    rows = []
    names = ["ours viterbi", "ours inside", "batch viterbi", "batch inside", "nltk viterbi"]
    names += ["ours cky", "nltk chart"]
    for n in LENGTHS:
        sentences = by_length[n]
        times = dict.fromkeys(names, 0.0)
        logps = []
        for words in sentences:
            (_, logp), t = best_time(pcfg.viterbi, words)
            times["ours viterbi"] += t
            logps.append(logp)
            _, t = best_time(pcfg.inside, words)
            times["ours inside"] += t
            tree, t = best_time(lambda w=words: next(nltk_viterbi.parse(w)), repeat=1)
            times["nltk viterbi"] += t
            assert math.isclose(logp, math.log(tree.prob()), rel_tol=1e-9), (logp, tree.prob())
            chart, t = best_time(cky, cnf, words)
            times["ours cky"] += t
            recognised, t = best_time(
                nltk_recognises, nltk_chart, words, nltk_cfg.start(), repeat=1
            )
            times["nltk chart"] += t
            assert recognised == chart.recognises()
        batch, times["batch viterbi"] = best_time(pcfg.viterbi_batch, sentences)
        assert np.allclose([logp for _, logp in batch], logps, rtol=1e-12)
        logz, times["batch inside"] = best_time(pcfg.log_likelihoods, sentences)
        assert np.allclose(logz, [pcfg.inside(words) for words in sentences], rtol=1e-12)
        rows.append({name: value / len(sentences) for name, value in times.items()})
        r = rows[-1]
        ms = {name: f"{value * 1e3:.3g}" for name, value in r.items()}
        nltk_v, nltk_c = r["nltk viterbi"], r["nltk chart"]
        print(
            f"{n:3d} tags, {len(sentences)} sentences, ms each | nltk viterbi {ms['nltk viterbi']}"
            f" | ours: viterbi {ms['ours viterbi']} (x{nltk_v / r['ours viterbi']:.0f}), inside "
            f"{ms['ours inside']} (x{nltk_v / r['ours inside']:.0f}); batched: viterbi "
            f"{ms['batch viterbi']} (x{nltk_v / r['batch viterbi']:.0f}), inside "
            f"{ms['batch inside']} (x{nltk_v / r['batch inside']:.0f}) | recognise: nltk chart "
            f"{ms['nltk chart']}, cky {ms['ours cky']} (x{nltk_c / r['ours cky']:.1f}), inside "
            f"x{nltk_c / r['ours inside']:.0f}",
            flush=True,
        )
    x = np.log(LENGTHS[1:])
    for name in rows[0]:
        slope = np.polyfit(x, np.log([r[name] for r in rows[1:]]), 1)[0]
        print(f"growth exponent, 10 to 40 tags, {name}: {slope:.2f}")
    print("load average at the end: {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
