"""Fit and scoring throughput of nlpcourse.ngram.NGramLM against nltk.lm and KenLM.

    .venv/bin/python benchmarks/ngram.py [--order 3] [--nltk-ngrams 300] [--kenlm-only]
                                            [--orders 3 5]

Both models are fitted on the Brown training split (vocabulary rule min_count=4, which nltk.lm
calls unk_cutoff=4) and score trigrams of the test split: NGramLM all of them in one call,
nltk.lm the first ``--nltk-ngrams`` (one ``score`` call per n-gram, as its API works), because at
its speed the whole test split would take hours. Throughput is n-grams per second; the ratios
are NGramLM over nltk.lm, measured in this one run.

Then KenLM (its Python module, `pip install -r requirements-test.txt`) and nlpcourse read the same
ARPA file written by NGramLM.to_arpa: load time, scoring throughput over the whole test split
(KenLM one sentence per call, as its API works, given each sentence as a string, and as a token
list that it joins; ours in one call, from the text and from the token lists, which it joins too)
and resident memory, the model's and the scorer's own (numba's runtime and compiled loops, paid
once per process) apart, for orders 3, 4 and 5 (``--orders 3 5`` to choose). Last (not with
``--kenlm-only``), Kneser-Ney estimation of a 5-gram on the training split with its full
vocabulary, NGramLM.fit against KenLM's lmplz (found on PATH or in /tmp/kenlm, or built there as
README.md says; the benchmark says so when it cannot).
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import sys
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


def timed(fn, *args, clock=time.perf_counter):
    start = clock()
    result = fn(*args)
    return result, clock() - start


def cpu_timed(fn, *args, repeat: int = 1):
    """Seconds of this process's CPU time (the least of ``repeat`` calls): steadier than the wall
    clock on a shared machine."""
    best = None
    for _ in range(repeat):
        result, seconds = timed(fn, *args, clock=time.process_time)
        best = seconds if best is None else min(best, seconds)
    return result, best


def parse_orders() -> tuple[int, ...]:
    """The orders of the KenLM race given after ``--orders`` (3, 4 and 5 if none)."""
    if "--orders" not in sys.argv:
        return (3, 4, 5)
    after = sys.argv[sys.argv.index("--orders") + 1 :]
    return tuple(int(a) for a in itertools.takewhile(str.isdigit, after))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--order", type=int, default=3)
    parser.add_argument("--nltk-ngrams", type=int, default=300)
    parser.add_argument("--kenlm-only", action="store_true", help="only the race with KenLM")
    parser.add_argument("--orders", type=int, nargs="+", default=[3, 4, 5], help="of the race")
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


# ---------------------------------------------------------------------- KenLM, on the same file

REPEAT = 7  # calls per contender: the least CPU time counts

RSS_CHILD = """
import sys
def rss():  # resident set size now, in MB (VmRSS of /proc/self/status)
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
import numpy  # both: Python and numpy, the baseline
start = rss()
if sys.argv[1] == "kenlm":
    import kenlm
    before = rss()
    model = kenlm.Model(sys.argv[2])
else:
    import tempfile
    from nlpcourse.arpa import read_arpa  # imports numba
    with tempfile.TemporaryDirectory() as tmp:  # a one-word model first: numba's runtime starts
        open(f"{tmp}/a.arpa", "w").write(TINY)
        read_arpa(f"{tmp}/a.arpa").log10_probs([["a"]])
        read_arpa(f"{tmp}/a.arpa").log10_probs_text("a")
    before = rss()
    model = read_arpa(sys.argv[2])
print(before - start, rss() - before, rss())  # the runtime (the module), the model, the process
"""
TINY = "\\data\\\nngram 1=3\n\n\\1-grams:\n-99\t<s>\n-0.3\ta\n-0.3\t</s>\n\n\\end\\\n"


def loaded_rss(which: str, path: str) -> list[float]:
    """Resident memory (MB) in a fresh process that has imported numpy: what importing the scorer
    adds (for ours: numba, LLVM and the compiled loops, loaded from the cache by scoring a
    one-word model, a fixed cost per process whatever the model), what loading ``path`` adds
    (the model), and the whole process after both."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", f"TINY = {TINY!r}\n" + RSS_CHILD, which, path],
        capture_output=True,
        text=True,
        check=True,
    )
    return [float(x) for x in out.stdout.split()[-3:]]  # the runtime, the model, the process


def kenlm_score(model, sentences: list[str]) -> list[float]:
    """One KenLM ``score`` call per sentence (with <s> and </s>), as its Python API works."""
    return [model.score(s, bos=True, eos=True) for s in sentences]


def kenlm_score_tokens(model, sentences: list[list[str]]) -> list[float]:
    """:func:`kenlm_score` from token lists: KenLM's ``score`` takes a string, so each sentence's
    tokens are joined first (KenLM then splits it again, in its own ``score``)."""
    return [model.score(" ".join(s), bos=True, eos=True) for s in sentences]


def kenlm_full_scores(model, sentences: list[str]) -> list[list]:
    """One KenLM ``full_scores`` call per sentence: a (log10 p, n-gram length, oov) per token."""
    return [list(model.full_scores(s, bos=True, eos=True)) for s in sentences]


def race_kenlm(train: list[list[str]], test: list[list[str]], orders=(3, 4, 5)) -> None:
    """Load time, scoring throughput and memory of KenLM and of nlpcourse on the same ARPA file,
    the Kneser-Ney model of each order with the chapter's vocabulary (min_count=4)."""
    import tempfile

    import kenlm

    from nlpcourse.arpa import read_arpa

    sentences = [" ".join(s) for s in test]
    tokens = sum(len(s) + 1 for s in test)
    print(
        f"\nKenLM {getattr(kenlm, '__version__', '')} on the same files: the whole Brown test "
        f"split, {tokens:,} predicted tokens (words and </s>)"
    )
    print(
        "(load: wall-clock seconds; words/s: per second of CPU time of this process, the best of"
        f" {REPEAT} calls; RSS: resident MB the loaded model adds, in a fresh process; load"
        f" average {os.getloadavg()[0]:.1f} at the start)"
    )
    print(f"{'':30s} {'load (s)':>9s} {'words/s':>12s} {'RSS (MB)':>9s}")
    for n in orders:
        lm = NGramLM(n, "kneser-ney").fit(train, min_count=BENGIO_MIN_COUNT)
        with tempfile.TemporaryDirectory() as tmp:
            path = f"{tmp}/brown{n}.arpa"
            _, write = timed(lm.to_arpa, path)
            ken, load_ken = timed(kenlm.Model, path)
            ours, load_ours = timed(read_arpa, path)
            text = "\n".join(sentences)  # the same strings KenLM reads, one line each
            _, t_score = cpu_timed(kenlm_score, ken, sentences, repeat=REPEAT)
            _, t_tokens = cpu_timed(kenlm_score_tokens, ken, test, repeat=REPEAT)
            _, t_full = cpu_timed(kenlm_full_scores, ken, sentences, repeat=REPEAT)
            logs, t_ours = cpu_timed(ours.log10_probs, test, repeat=REPEAT)
            logs_text, t_text = cpu_timed(ours.log10_probs_text, text, repeat=REPEAT)
            assert (logs_text == logs).all(), "text and token lists must score alike"
            _, t_model = cpu_timed(lm.token_probs, test, repeat=REPEAT)
            stream = ours._stream(test)  # the ids, with <s> and </s>
            _, t_ids = cpu_timed(ours._log10_stream, stream, repeat=REPEAT)
            runtime_ken, rss_ken, process_ken = loaded_rss("kenlm", path)
            runtime, rss_ours, process_ours = loaded_rss("ours", path)
        print(
            f"order {n} (|V| = {len(lm.vocab):,}, {lm.nbytes / 1e6:.0f} MB fitted, written in "
            f"{write:.1f} s, test perplexity {10 ** -logs.mean():.1f}; ArpaLM's arrays "
            f"{ours.nbytes / 2**20:.0f} MB)"
        )
        rows = [
            ("  KenLM score(), per sentence", load_ken, tokens / t_score, rss_ken),
            ("  KenLM score(' '.join(tokens))", None, tokens / t_tokens, None),
            ("  KenLM full_scores(), per sent.", None, tokens / t_full, None),
            ("  ArpaLM.log10_probs_text, one", load_ours, tokens / t_text, rss_ours),
            ("  ArpaLM.log10_probs, one call", None, tokens / t_ours, None),
            ("  NGramLM.token_probs, one call", None, tokens / t_model, None),
            ("  ArpaLM, from ids (no strings)", None, tokens / t_ids, None),
        ]
        for name, load, speed, rss in rows:
            load_s = f"{load:9.2f}" if load is not None else f"{'':9s}"
            rss_s = f"{rss:9.0f}" if rss is not None else ""
            print(f"{name:30s} {load_s} {speed:12,.0f} {rss_s}")
        print(
            f"  ratios, ours over KenLM score(): from text {t_score / t_text:.2f}x, "
            f"from token lists {t_score / t_ours:.2f}x (over KenLM from the same token lists, "
            f"joined: {t_tokens / t_ours:.2f}x), "
            f"NGramLM {t_score / t_model:.2f}x; load {load_ours / load_ken:.1f}x KenLM's time; "
            f"model's memory {rss_ours / rss_ken:.2f}x KenLM's"
        )
        print(
            f"  memory a user pays (MB, resident, over Python with numpy): the module, once per "
            f"process: ours {runtime:.0f} (numba, LLVM, the compiled loops), KenLM "
            f"{runtime_ken:.0f}; the model: ours {rss_ours:.0f}, KenLM {rss_ken:.0f}; the whole "
            f"process: ours {process_ours:.0f}, KenLM {process_ken:.0f}"
        )


# ------------------------------------------------------------------ estimation, against lmplz

LMPLZ_BUILD = "/tmp/kenlm"  # where README.md's commands build lmplz


def find_or_build_lmplz() -> str | None:
    """KenLM's ``lmplz``: on PATH, or built by README.md's commands in /tmp/kenlm, or built now
    by those commands (a few minutes; they need cmake, a C++ compiler and Boost). None, saying
    why, when it cannot be had."""
    import shutil
    import subprocess

    found = shutil.which("lmplz") or shutil.which(f"{LMPLZ_BUILD}/build/bin/lmplz")
    if found:
        print(f"lmplz: {found}")
        return found
    print(f"lmplz is not on PATH nor in {LMPLZ_BUILD}: building it as README.md says ...")
    steps = [
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         "--no-build-isolation", "kenlm==0.3.0", "-d", LMPLZ_BUILD],
        ["tar", "xzf", f"{LMPLZ_BUILD}/kenlm-0.3.0.tar.gz", "-C", LMPLZ_BUILD],
        ["cmake", "-S", f"{LMPLZ_BUILD}/kenlm-0.3.0", "-B", f"{LMPLZ_BUILD}/build",
         "-DCMAKE_BUILD_TYPE=Release"],
        ["make", "-C", f"{LMPLZ_BUILD}/build", "-j2", "lmplz"],
    ]  # fmt: skip
    for step in steps:
        try:
            subprocess.run(step, check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError) as err:
            tail = getattr(err, "stderr", b"") or b""
            print(f"  cannot build lmplz: {' '.join(step[:2])} failed ({err}) {tail[-300:]!r}")
            return None
    return shutil.which(f"{LMPLZ_BUILD}/build/bin/lmplz")


def race_lmplz(train: list[list[str]], order: int = 5, repeat: int = 3) -> None:
    """Kneser-Ney estimation on Brown's training split with its full vocabulary: NGramLM.fit
    against KenLM's lmplz on the same text (lmplz reads the text and writes its ARPA file; fit
    starts from the token lists and writes nothing, so the writing is timed apart). Wall-clock
    and CPU seconds (lmplz's CPU: user + system of the child, all its threads), the least of
    ``repeat`` runs each."""
    import resource
    import subprocess
    import tempfile

    print(f"\nEstimation: Kneser-Ney {order}-gram on the Brown training split, full vocabulary")
    lmplz = find_or_build_lmplz()
    fit_wall, fit_cpu = [], []
    for _ in range(repeat):
        cpu0 = time.process_time()
        lm, wall = timed(NGramLM(order, "kneser-ney").fit, train, 1)
        fit_wall.append(wall)
        fit_cpu.append(time.process_time() - cpu0)
    with tempfile.TemporaryDirectory() as tmp:
        _, write = timed(lm.to_arpa, f"{tmp}/ours.arpa")
        print(f"{'':34s} {'wall (s)':>9s} {'CPU (s)':>8s}")
        print(
            f"{f'NGramLM({order}).fit, min_count=1':34s} {min(fit_wall):9.2f} {min(fit_cpu):8.2f}"
        )
        print(f"{'  then NGramLM.to_arpa':34s} {write:9.2f}   ({lm})")
        if lmplz is None:
            print("lmplz: not available, no ratio (see above)")
            return
        text = f"{tmp}/train.txt"
        with open(text, "w", encoding="utf-8") as f:
            f.writelines(" ".join(s) + "\n" for s in train)
        walls, cpus = [], []
        for _ in range(repeat):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            with open(text, "rb") as src, open(f"{tmp}/lmplz.arpa", "wb") as out:
                command = [lmplz, "-o", str(order), "-S", "1G", "-T", tmp, "--discount_fallback"]
                start = time.perf_counter()
                subprocess.run(
                    command, stdin=src, stdout=out, stderr=subprocess.DEVNULL, check=True
                )
                wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            walls.append(wall)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        print(f"{f'lmplz -o {order} -S 1G (reads, writes)':34s} {min(walls):9.2f} {min(cpus):8.2f}")
        print(
            f"  ratios, NGramLM.fit over lmplz: wall {min(fit_wall) / min(walls):.2f}x, "
            f"CPU {min(fit_cpu) / min(cpus):.2f}x; with to_arpa: wall "
            f"{(min(fit_wall) + write) / min(walls):.2f}x"
        )


if __name__ == "__main__":
    if "--kenlm-only" not in sys.argv:
        main()
    train, _, test = brown_split()
    race_kenlm(train, test, orders=parse_orders())
    if "--kenlm-only" not in sys.argv:
        race_lmplz(train)
