"""nlpcourse.arpa: ARPA files written from NGramLM, read back, and checked against KenLM.

Oracles: a back-off file written and worked out by hand here (the reader); the model itself for the
round trip (every word after every context, seen or not); the normalisation of every distribution
read back; and KenLM, an independent C++ implementation of ARPA scoring, on the Brown test split.
"""

import itertools
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nlpcourse.arpa import read_arpa, write_arpa
from nlpcourse.ngram import NGramLM

TRAIN = [
    s.split()
    for s in [
        "I am NLP",
        "NLP I am",
        "I do not like Exams and Marks",
        "I am not",
        "do I like NLP",
    ]
]
TEST = [s.split() for s in ["I like Marks", "zzz am I", "NLP", "am am am not like"]]
SMOOTHINGS = ["kneser-ney", "absolute", "add-k"]
# ArpaLM holds log10 numbers in single precision, as KenLM does: each is within 2**-24 of itself
# relative, so a probability made of a few of them (|log10| < 8) is within about 1e-6 relative.
FLOAT32 = 1e-6


def kenlm_module():
    """KenLM's Python module. It is a test dependency (requirements-test.txt): missing, the test
    fails, unless NLPCOURSE_SKIP_KENLM=1 says on purpose that it cannot be built here."""
    try:
        import kenlm
    except ImportError:
        if os.environ.get("NLPCOURSE_SKIP_KENLM") == "1":
            pytest.skip("kenlm is not installed and NLPCOURSE_SKIP_KENLM=1 was set")
        pytest.fail(
            "the KenLM oracle needs `pip install -r requirements-test.txt` (a C++ compiler); "
            "set NLPCOURSE_SKIP_KENLM=1 to skip it where it cannot build"
        )
    return kenlm


def contexts(vocab: list[str], n: int) -> list[list[str]]:
    """Every context a model of order n can meet: sentence starts (short contexts) and every
    sequence of n-1 words."""
    words = [w for w in vocab if w != "</s>"]
    out = [list(c) for k in range(n - 1) for c in itertools.product(words, repeat=k)]
    return out + [list(c) for c in itertools.product(words, repeat=n - 1)]


@pytest.mark.parametrize("smoothing", SMOOTHINGS)
@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
def test_round_trip_every_word_in_every_context(tmp_path, smoothing, order):
    model = NGramLM(order, smoothing, k=0.5, discount=0.6).fit(TRAIN, min_count=1)
    back = read_arpa(model.to_arpa(tmp_path / "model.arpa"))
    for context in contexts(model.vocab, order)[:4000]:
        ours = model.distribution(context)
        read = np.array([back.prob(w, context) for w in model.vocab])
        np.testing.assert_allclose(read, ours, rtol=FLOAT32, err_msg=f"context {context}")
    # unknown words read as <unk> on both sides
    assert back.prob("zzz", ["I"]) == pytest.approx(model.prob("<unk>", ["I"]), rel=FLOAT32)


@pytest.mark.parametrize("smoothing", SMOOTHINGS)
def test_every_distribution_read_back_sums_to_one(tmp_path, smoothing):
    model = NGramLM(3, smoothing, k=0.5).fit(TRAIN)
    back = NGramLM.from_arpa(model.to_arpa(tmp_path / "m.arpa"))
    predicted = [w for w in back.vocab if w != "<s>"]
    for context in contexts(model.vocab, 3)[:300]:
        total = sum(back.prob(w, context) for w in predicted)
        assert total == pytest.approx(1, abs=1e-6), context


def test_the_reader_on_a_file_worked_by_hand(tmp_path):
    path = tmp_path / "hand.arpa"
    path.write_text(
        "\\data\\\nngram 1=4\nngram 2=2\n\n"
        "\\1-grams:\n-99\t<s>\t-0.3\n-0.5\ta\t-0.2\n-0.4\tb\n-0.6\t</s>\n\n"
        "\\2-grams:\n-0.1\t<s> a\n-0.25\ta b\n\n\\end\\\n"
    )
    lm = read_arpa(path)
    # P(a | <s>) is listed; P(b | <s>) backs off: b(<s>) P(b); P(</s> | a) = b(a) P(</s>)
    assert lm.prob("a", []) == pytest.approx(10**-0.1)
    assert lm.prob("b", []) == pytest.approx(10 ** (-0.3 - 0.4))
    assert lm.prob("b", ["a"]) == pytest.approx(10**-0.25)
    assert lm.prob("</s>", ["a"]) == pytest.approx(10 ** (-0.2 - 0.6))
    assert lm.prob("a", ["b"]) == pytest.approx(10**-0.5)  # b has no back-off weight: b = 1
    want = [-0.1, -0.25, -0.6]  # <s> a b </s>: P(</s> | b) = 1 * P(</s>), b lists no weight
    np.testing.assert_allclose(lm.log10_probs([["a", "b"]]), want)
    assert lm.perplexity([["a", "b"]]) == pytest.approx(10 ** (-sum(want) / 3))


def test_models_without_a_back_off_form_are_refused(tmp_path):
    with pytest.raises(ValueError, match="MLE"):
        NGramLM(2, "mle").fit(TRAIN).to_arpa(tmp_path / "x.arpa")
    with pytest.raises(ValueError, match="no exact back-off form"):
        NGramLM(2, "interpolated", lambdas=[0.1, 0.3, 0.6]).fit(TRAIN).to_arpa(tmp_path / "x.arpa")


@pytest.mark.parametrize(
    "text, message",
    [
        ("hello", "not an ARPA file"),
        (
            "\\data\\\nngram 1=3\n\n\\1-grams:\n-1\t<s>\n-1\t</s>\n\\end\\\n",
            "header says ngram 1=3",
        ),
        (
            "\\data\\\nngram 1=2\nngram 2=1\n\n\\1-grams:\n-1\t<s>\n-1\t</s>\n"
            "\\2-grams:\n-1\t<s> x\n\\end\\\n",
            "'x' is not a unigram",
        ),
        (  # a file with <unk>: its n-grams' words are still checked, not read as <unk>
            "\\data\\\nngram 1=3\nngram 2=1\n\n\\1-grams:\n-1\t<s>\n-1\t</s>\n-1\t<unk>\n"
            "\\2-grams:\n-1\t<s> x\n\\end\\\n",
            "'x' is not a unigram",
        ),
        ("\\data\\\nngram 1=1\n\n\\1-grams:\n-1\ta\n\\end\\\n", "must include <s>"),
        (
            "\\data\\\nngram 1=3\nngram 2=1\nngram 3=1\n\n\\1-grams:\n-1\t<s>\n-1\t</s>\n-1\ta\n"
            "\\2-grams:\n-1\t<s> a\n\\3-grams:\n-1\t<s> a a\n\\end\\\n",
            "not its suffix 'a a'",
        ),
        ("\\data\\\nngram 1=2\n\n\\1-grams:\n-1\t<s>\nx\t</s>\n\\end\\\n", "1-grams section"),
    ],
)
def test_bad_files_get_clear_errors(tmp_path, text, message):
    path = tmp_path / "bad.arpa"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_arpa(path)


def test_scoring_bad_sentences_says_what_is_wrong(tmp_path):
    lm = read_arpa(NGramLM(2).fit(TRAIN).to_arpa(tmp_path / "m.arpa"))
    with pytest.raises(ValueError, match="contains '</s>'"):
        lm.log10_probs([["I", "</s>"]])
    with pytest.raises(ValueError, match="contains '<s>'"):
        lm.log10_probs([["<s>", "I"]])
    with pytest.raises(TypeError, match="token 3 that is not a string"):
        lm.log10_probs([["I", 3]])
    with pytest.raises(TypeError, match="got one string"):
        lm.log10_probs("I am")
    # tuples and generators are fine
    assert (
        lm.log10_probs(w for w in [("I", "am")]).tolist() == lm.log10_probs([["I", "am"]]).tolist()
    )


@pytest.mark.parametrize("smoothing", SMOOTHINGS)
def test_kenlm_reads_our_files_tiny(tmp_path, smoothing):
    kenlm = kenlm_module()
    for order in (2, 3, 4, 5):
        model = NGramLM(order, smoothing, k=0.5).fit(TRAIN)
        k = kenlm.Model(str(write_arpa(model, tmp_path / f"{order}.arpa")))
        ken = [p for s in TEST for p, _, _ in k.full_scores(" ".join(s), bos=True, eos=True)]
        ours = np.log10(model.token_probs(TEST))
        np.testing.assert_allclose(ken, ours, atol=2e-6, err_msg=f"order {order}")


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("order, min_count", [(2, 4), (3, 4), (4, 4), (5, 4), (5, 1)])
def test_kenlm_agrees_on_the_brown_test_split(tmp_path, order, min_count):
    """Orders 2-5 with the chapter's vocabulary, and order 5 with Brown's full vocabulary
    (min_count=1, |V| = 46,189: |V|^5 is past 2**63)."""
    kenlm = kenlm_module()
    from nlpcourse.data import brown_split

    train, _, test = brown_split()
    model = NGramLM(order, "kneser-ney").fit(train, min_count=min_count)
    path = model.to_arpa(tmp_path / "brown.arpa")
    k = kenlm.Model(str(path))
    ken = np.array([p for s in test for p, _, _ in k.full_scores(" ".join(s), bos=True, eos=True)])
    ours = np.log10(model.token_probs(test))
    assert len(ken) == len(ours) == sum(len(s) + 1 for s in test)
    # ARPA keeps 9 digits and KenLM adds in float32: about 1e-6 in log10 per token
    np.testing.assert_allclose(ken, ours, atol=1e-5)
    assert 10 ** -ken.mean() == pytest.approx(model.perplexity(test), rel=1e-5)
    # and our own reader gives the same as the model, from tokens and from text alike
    reader = read_arpa(path)
    from_tokens = reader.log10_probs(test)
    np.testing.assert_allclose(from_tokens, ours, atol=FLOAT32)
    text = "\n".join(" ".join(s) for s in test)
    np.testing.assert_array_equal(reader.log10_probs_text(text), from_tokens)
    assert math.isfinite(ken.sum())


@pytest.mark.parametrize("smoothing", SMOOTHINGS)
@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
def test_vectorised_scoring_equals_the_readable_recursion(tmp_path, smoothing, order):
    """log10_probs (all positions at once, one order at a time) against log10_prob (eq.
    (ngram-backoff) one n-gram at a time), with unknown words and sentences of length 0 to 5."""
    lm = read_arpa(NGramLM(order, smoothing, k=0.5).fit(TRAIN).to_arpa(tmp_path / "m.arpa"))
    sentences = TEST + [[], ["zzz"], ["I", "am", "NLP", "I", "am"]]
    loop = [lm.log10_prob(w, s[:i]) for s in sentences for i, w in enumerate(s + ["</s>"])]
    np.testing.assert_allclose(lm.log10_probs(sentences), loop, rtol=1e-12)


def test_token_lists_score_as_the_readable_recursion_and_are_left_as_they_were(tmp_path):
    """log10_probs joins the token lists and reads the text, or, where a token cannot be joined
    soundly, looks every token up in a dict: against the readable recursion, which looks every
    token up in a dict. Tokens of 1 to 1,000 bytes, non-ASCII ones, a str subclass, tokens
    holding a space, a tab, a newline or NUL, empty ones, and one with no UTF-8 form (a lone
    surrogate). The caller's strings are as they were: no UTF-8 copy cached in them (the old
    reader, through CPython's C API, grew every non-ASCII token by its UTF-8 form)."""
    words = ["I", "am", "NLP", "naïve", "ça", "a" * 19, "é" * 600, "x" * 1000]
    lm = read_arpa(NGramLM(3, "kneser-ney").fit(TRAIN + [words]).to_arpa(tmp_path / "m.arpa"))

    class Word(str):
        pass

    for sentences in [
        [["I", "am"], ["NLP", "I", "am"], []],
        [words, words[::-1], [w + "s" for w in words]],
        [[Word("I"), Word("am")], ["I", Word("naïve"), Word("zzz")]],
        [["I am", "NLP"], ["I"]],
        [["", "I"]],
        [["I", "a\tb"], ["am\nI"]],
        [["I\x00", "am"], ["I", "am"]],
        [[""]],
        [["I", "am"], ["\udcff", "I", "am"]],
    ]:
        sizes = [sys.getsizeof(w) for s in sentences for w in s]
        loop = [lm.log10_prob(w, s[:i]) for s in sentences for i, w in enumerate(s + ["</s>"])]
        np.testing.assert_allclose(lm.log10_probs(sentences), loop, rtol=1e-12)
        assert [sys.getsizeof(w) for s in sentences for w in s] == sizes
    assert len(lm.log10_probs([])) == 0


def test_a_word_with_nul_is_a_word_outside_the_vocabulary(tmp_path):
    """ "I\\x00" is not "I" (the old hash padded a word's last piece with zero bytes, so it
    read "I\\x00" as "I" from token lists): from token lists it reads as <unk>, as in the
    readable look-up and as KenLM reads it; in a text it is a control character, refused."""
    lm = read_arpa(NGramLM(2, "kneser-ney").fit(TRAIN).to_arpa(tmp_path / "m.arpa"))
    want = [lm.log10_prob("<unk>"), lm.log10_prob("am", ["<unk>"]), lm.log10_prob("</s>", ["am"])]
    np.testing.assert_allclose(lm.log10_probs([["I\x00", "am"]]), want, rtol=1e-12)
    assert lm.log10_prob("I\x00") == lm.log10_prob("<unk>") != lm.log10_prob("I")
    with pytest.raises(ValueError, match="control character"):
        lm.log10_probs_text("I\x00 am")


# "~AAAAAAABBBBBBBB" and "1CAAABAAABBBBBBB" shared a hash under the old sum of pieces (issue 44),
# and 'xagFU4`LXSIOLFWR' hashed to the empty slot's bit pattern.
COLLIDING = ("~AAAAAAABBBBBBBB", "1CAAABAAABBBBBBB")
SENTINEL_WORD = "xagFU4`LXSIOLFWR"


def test_a_word_outside_the_vocabulary_never_reads_as_one_inside(tmp_path):
    """The pair that the old hash confused: the first in the vocabulary, the second not. Every
    path reads the second as <unk>."""
    inside, outside = COLLIDING
    lm = read_arpa(NGramLM(2, "kneser-ney").fit(TRAIN + [[inside, "I"]]).to_arpa(tmp_path / "m"))
    assert outside not in lm.vocab
    sentences = [[inside, "I"], [outside, "I"]]
    loop = [lm.log10_prob(w, s[:i]) for s in sentences for i, w in enumerate(s + ["</s>"])]
    assert loop[0] != loop[3]  # the two read differently in the readable look-up
    np.testing.assert_allclose(lm.log10_probs(sentences), loop, rtol=1e-12)
    text = "\n".join(" ".join(s) for s in sentences)
    np.testing.assert_allclose(lm.log10_probs_text(text), loop, rtol=1e-12)


def test_the_old_sentinel_word_is_read_as_kenlm_reads_it(tmp_path):
    """A file with the word whose old hash was the empty slot's bit pattern, with and without
    its bigrams: read, and scored as KenLM scores it."""
    kenlm = kenlm_module()
    model = NGramLM(2, "kneser-ney").fit(TRAIN + [[SENTINEL_WORD, "I", "am"]], min_count=1)
    path = model.to_arpa(tmp_path / "m.arpa")
    lines = path.read_text().splitlines()
    bigrams = [x for x in lines if "\t" in x and SENTINEL_WORD in x and " " in x.split("\t")[1]]
    count = sum(1 for x in lines if x.startswith("ngram 2="))
    assert bigrams and count == 1
    n2 = int(next(x for x in lines if x.startswith("ngram 2=")).split("=")[1])
    stripped = [x for x in lines if x not in bigrams]
    stripped = [f"ngram 2={n2 - len(bigrams)}" if x.startswith("ngram 2=") else x for x in stripped]
    (tmp_path / "stripped.arpa").write_text("\n".join(stripped) + "\n")
    sentences = [[SENTINEL_WORD, "I", "am"], ["I", SENTINEL_WORD], ["NLP"]]
    for file in (path, tmp_path / "stripped.arpa"):
        lm, ken = read_arpa(file), kenlm.Model(str(file))
        want = [s for sent in sentences for s, _, _ in ken.full_scores(" ".join(sent))]
        np.testing.assert_allclose(lm.log10_probs(sentences), want, rtol=FLOAT32)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # wraps on purpose
def test_the_empty_slot_pattern_is_never_a_word_hash(monkeypatch):
    """No MurmurHash64A value is known to be the empty slot's 64 bits, so the remap is tried by
    declaring a word's real hash the empty pattern: both twins then give the remapped value."""
    import nlpcourse.arpa as arpa
    import nlpcourse.arpa_fast as arpa_fast

    word = b"remapped"
    real = arpa.word_hash(word)
    as_int64 = int(np.uint64(real).view(np.int64))
    monkeypatch.setattr(arpa, "EMPTY", as_int64)
    monkeypatch.setattr(arpa_fast, "EMPTY", as_int64)
    assert arpa.word_hash(word) == arpa.EMPTY_REMAPPED % 2**64
    pieces = arpa._pieces(np.frombuffer(word + bytes(8), dtype=np.uint8))
    span = np.array([0]), np.array([len(word)])
    as_python = getattr(arpa_fast.span_hashes, "py_func", arpa_fast.span_hashes)  # not compiled
    assert as_python(pieces, *span).tolist() == [arpa.EMPTY_REMAPPED]


WORD_LETTERS = "ab\x00 \t\né中😀~1"


@given(
    vocab=st.lists(
        st.text(
            WORD_LETTERS.replace(" ", "").replace("\t", "").replace("\n", "").replace("\x00", ""),
            min_size=1,
            max_size=20,
        ),
        min_size=1,
        max_size=12,
    ),
    queries=st.lists(st.lists(st.text(WORD_LETTERS, max_size=20), max_size=5), max_size=5),
)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_random_words_score_the_same_on_every_path(tmp_path, vocab, queries):
    """Property: for any vocabulary and any token lists (words of the vocabulary, near misses,
    NUL, spaces, control characters, non-ASCII, empty tokens), log10_probs equals the readable
    recursion, and where the tokens can be written as a text, so does log10_probs_text."""
    lm = read_arpa(NGramLM(2, "kneser-ney").fit([list(vocab)], 1).to_arpa(tmp_path / "p.arpa"))
    tokens = [s + [vocab[0] + "x", vocab[-1][:-1] or "y"] for s in queries] + [list(vocab)]
    loop = [lm.log10_prob(w, s[:i]) for s in tokens for i, w in enumerate(s + ["</s>"])]
    np.testing.assert_allclose(lm.log10_probs(tokens), loop, rtol=1e-12)
    if all(w and not any(c in w for c in " \t\n\x00") for s in tokens for w in s):
        text = "\n".join(" ".join(s) for s in tokens)
        np.testing.assert_allclose(lm.log10_probs_text(text), loop, rtol=1e-12)


def test_a_file_without_unk_gives_unknown_words_probability_zero(tmp_path):
    path = tmp_path / "nounk.arpa"
    path.write_text(
        "\\data\\\nngram 1=3\nngram 2=1\n\n\\1-grams:\n-99\t<s>\t-0.3\n-0.5\ta\t-0.2\n-0.4\t</s>\n"
        "\n\\2-grams:\n-0.1\t<s> a\n\n\\end\\\n"
    )
    lm = read_arpa(path)
    got = lm.log10_probs([["a", "zzz", "a"]])
    # <s> a: listed; zzz: unknown; a after zzz: the unknown context backs off with b = 1
    np.testing.assert_allclose(got, [-0.1, -np.inf, -0.5, -0.2 - 0.4])
    assert lm.log10_prob("zzz", ["a"]) == -np.inf
    assert lm.prob("a", ["zzz"]) == pytest.approx(10**-0.5)


LMPLZ = shutil.which("lmplz")


@pytest.mark.corpus
@pytest.mark.skipif(
    LMPLZ is None,
    reason="KenLM's lmplz is not on PATH (the pip package has no lmplz; README.md, "
    "'KenLM's lmplz', says how to build it in about a minute)",
)
@pytest.mark.parametrize("order", [3, 5])
def test_files_made_by_kenlm_lmplz(tmp_path, order):
    """A file KenLM estimated itself (modified Kneser-Ney, its own <unk>, <s> with log10 p = 0
    and zero back-off weights written out) on 5,000 Brown training sentences: our reader gives
    every log10 probability of the test split that KenLM gives, unknown words included."""
    kenlm = kenlm_module()
    from nlpcourse.data import brown_split

    train, _, test = brown_split()
    text = "".join(" ".join(s) + "\n" for s in train[:5000])
    path = tmp_path / f"lmplz{order}.arpa"
    with path.open("w") as out:
        subprocess.run(
            [LMPLZ, "-o", str(order), "-S", "100M", "-T", str(tmp_path), "--discount_fallback"],
            input=text.encode(),
            stdout=out,
            stderr=subprocess.PIPE,
            check=True,
        )
    ken = kenlm.Model(str(path))
    want = [p for s in test for p, _, _ in ken.full_scores(" ".join(s), bos=True, eos=True)]
    ours = read_arpa(path)
    got = ours.log10_probs(test)
    assert ours.order == order and "<unk>" in ours.index_
    np.testing.assert_allclose(got, want, atol=2e-6)  # KenLM adds float32 numbers
    first = [ours.log10_prob(w, test[0][:i]) for i, w in enumerate(test[0])]  # the readable twin
    np.testing.assert_allclose(first, want[: len(first)], atol=2e-6)


@pytest.mark.parametrize("variant", ["as written", "reversed", "with unknown words"])
def test_the_committed_lmplz_file_reads_as_kenlm_reads_it(tmp_path, variant):
    """tests/data/lmplz/: a file KenLM's lmplz made from 300 lines of this book's prose. Our
    reader gives every log10 probability KenLM's module gives on those lines (listed trigrams),
    on the lines reversed (mostly back-off) and with unknown words put in."""
    import gzip

    kenlm = kenlm_module()
    data = Path(__file__).parent / "data" / "lmplz"
    path = tmp_path / "prose3.arpa"
    path.write_bytes(gzip.decompress((data / "prose3.arpa.gz").read_bytes()))
    lines = [line.split(" ") for line in (data / "prose.txt").read_text().splitlines()]
    if variant == "reversed":
        lines = [line[::-1] for line in lines]
    elif variant == "with unknown words":
        lines = [line[:3] + ["qwzx"] + line[3:] + ["zzyq"] for line in lines]
    ken = kenlm.Model(str(path))
    want = [p for s in lines for p, _, _ in ken.full_scores(" ".join(s), bos=True, eos=True)]
    ours = read_arpa(path)
    assert ours.order == 3 and "<unk>" in ours.index_
    np.testing.assert_allclose(ours.log10_probs(lines), want, atol=2e-6)
    text = "".join(" ".join(s) + "\n" for s in lines)
    np.testing.assert_allclose(ours.log10_probs_text(text), want, atol=2e-6)


def test_a_file_in_srilm_conventions_worked_by_hand(tmp_path):
    """SRILM's ngram-count writes <s> with log10 p = -99, sorts the unigrams (</s> before <s>),
    omits a back-off weight that is 0 and every weight at the highest order, may write numbers
    in exponent form, and ends with \\end\\. Expected values are worked out from the lines."""
    path = tmp_path / "srilm.arpa"
    path.write_text(
        "\n\\data\\\nngram 1=5\nngram 2=4\nngram 3=2\n\n"
        "\\1-grams:\n"
        "-0.7\t</s>\n"
        "-99\t<s>\t-0.3\n"
        "-0.8\t<unk>\n"
        "-0.5\ta\t-0.25\n"
        "-0.6\tb\t-1.5e-01\n"
        "\n\\2-grams:\n"
        "-0.2\t<s> a\t-0.05\n"
        "-0.4\ta b\t-0.1\n"
        "-0.45\tb a\n"
        "-0.35\tb </s>\n"
        "\n\\3-grams:\n"
        "-0.1\t<s> a b\n"
        "-0.15\ta b </s>\n"
        "\n\\end\\\n"
    )
    lm = read_arpa(path)
    assert lm.order == 3 and lm.vocab == ["</s>", "<s>", "<unk>", "a", "b"]
    # the sentence "a b a zzz": <s> a listed (-0.2); <s> a b listed (-0.1); a b a is not, and
    # b(a b) = -0.1 plus P(a | b) listed (-0.45); b a zzz: zzz is <unk>, not listed after
    # "b a" (not listed: b = 1) nor after "a" (b(a) = -0.25): -0.25 - 0.8; a zzz </s>: no
    # weight for "a <unk>" or "<unk>" (absent: 0), so P(</s>) = -0.7.
    want = [-0.2, -0.1, -0.1 - 0.45, -0.25 - 0.8, -0.7]
    np.testing.assert_allclose(lm.log10_probs([["a", "b", "a", "zzz"]]), want, atol=1e-12)
    # "b": P(b | <s>) backs off with b(<s>) = -0.3; P(</s> | <s> b): b(<s> b) not listed, "b </s>"
    # listed. "a b": a b </s> listed at the top order.
    want = [-0.3 - 0.6, -0.35, -0.2, -0.1, -0.15]
    np.testing.assert_allclose(lm.log10_probs([["b"], ["a", "b"]]), want, atol=1e-12)
    # P(b | <s> b): neither "<s> b b" nor "b b" is listed; b(b) is written as -1.5e-01
    assert lm.log10_prob("b", ["b"]) == pytest.approx(-0.15 - 0.6)
    assert lm.log10_prob("a", ["a", "b"]) == pytest.approx(-0.1 - 0.45)


def test_the_numpy_hash_table_finds_what_a_dict_finds():
    """_Table (open addressing, searched for many keys at once) against Python's dict, with keys
    that crowd a few home slots (multiples of a power of two), negative keys and absent keys."""
    from nlpcourse.arpa import _Table

    rng = np.random.default_rng(0)
    keys = np.unique(np.concatenate([rng.integers(-(2**40), 2**40, 3000), np.arange(500) << 20]))
    keys = rng.permutation(keys)
    table = _Table(keys)
    slot_of = dict(zip(keys.tolist(), table.slots.tolist(), strict=True))
    assert len(set(slot_of.values())) == len(keys)  # one key per slot
    queries = np.concatenate([keys, rng.integers(-(2**40), 2**40, 3000), [-1, 0, 2**62]])
    want = [slot_of.get(q, -1) for q in queries.tolist()]
    assert table.find(queries).tolist() == want
    assert [table.find_one(q) for q in queries[::50].tolist()] == want[::50]
    assert (table.keys[table.slots] == keys).all()
    with pytest.raises(ValueError, match="twice"):
        _Table(np.array([5, 7, 5]))


def test_each_ngram_is_one_slot_holding_its_key_and_numbers(tmp_path):
    """KenLM's layout, counted from the file's own header: per order, 1.5 home slots per listed
    n-gram (plus a free tail), each slot its key with log10 p and b in single precision (16 bytes),
    the top order's with log10 p only (12 bytes); a found row's numbers are the file's."""
    from nlpcourse.arpa import PROBE, ROOM
    from nlpcourse.arpa_fast import EMPTY

    path = NGramLM(3, "kneser-ney").fit(TRAIN).to_arpa(tmp_path / "m.arpa")
    counts = [int(c) for c in re.findall(r"ngram \d+=(\d+)", path.read_text())]
    lm = read_arpa(path)
    for m, size in ((2, 16), (3, 12)):
        slots = lm.tables_[m].entries
        assert slots.itemsize == size
        assert (slots["key"] != EMPTY).sum() == counts[m - 1]
        assert len(slots) >= int(ROOM * counts[m - 1]) + 1 + PROBE
        assert slots["key"][-1] == EMPTY  # row -1 reads a slot that lists nothing
    # nbytes, from those sizes: the unigrams' two numbers (8 bytes, one more row for a word
    # outside) and the vocabulary's slots (a hash and an id, 16 bytes)
    slots = {m: len(lm.tables_[m].entries) for m in (2, 3)}
    words = len(lm.words_.table.entries)
    assert lm.nbytes == 16 * slots[2] + 12 * slots[3] + 8 * (counts[0] + 1) + 16 * words
    listed = re.search(r"^(\S+)\tI am\t(\S+)$", path.read_text(), re.MULTILINE)
    slot = lm.tables_[2].entries[lm._row([lm.index_["I"], lm.index_["am"]])]
    assert (slot["log10_p"], slot["log10_b"]) == tuple(np.float32(x) for x in listed.groups())


def test_a_file_with_a_missing_prefix_and_an_unreachable_ngram(tmp_path):
    """An n-gram whose prefix is not listed ("a b c" without "a b", as a pruned file may have)
    is still found; and "<s> <s> a", which a toolkit never looks up (a sentence starts with one
    <s>), is not used. Expected values worked out from the lines."""
    path = tmp_path / "gaps.arpa"
    path.write_text(
        "\\data\\\nngram 1=5\nngram 2=3\nngram 3=2\n\n"
        "\\1-grams:\n-99\t<s>\t-0.3\n-0.5\ta\t-0.2\n-0.4\tb\t-0.1\n-0.6\tc\n-0.7\t</s>\n\n"
        "\\2-grams:\n-0.15\t<s> <s>\t-0.05\n-0.25\tb c\t-0.01\n-0.35\t<s> a\n\n"
        "\\3-grams:\n-0.05\ta b c\n-0.01\t<s> <s> a\n\n\\end\\\n"
    )
    lm = read_arpa(path)
    # <s> a: "<s> a" listed (-0.35); a b: "a b" not listed, b(a) = -0.2, P(b) = -0.4;
    # a b c: listed (-0.05) although "a b" is not; </s> after "b c": b(b c) = -0.01, "c </s>"
    # not listed, b(c) = 0, P(</s>) = -0.7
    want = [-0.35, -0.2 - 0.4, -0.05, -0.01 - 0.7]
    np.testing.assert_allclose(lm.log10_probs([["a", "b", "c"]]), want, atol=1e-12)
    twin = [lm.log10_prob(w, ["a", "b", "c"][:i]) for i, w in enumerate(["a", "b", "c", "</s>"])]
    np.testing.assert_allclose(twin, want, atol=1e-12)


# ------------------------------------------------------------------ scoring text given as bytes


def test_word_hashes_at_once_equal_the_plain_loop():
    """_span_hashes (all the words at once) against word_hash (a loop over one word's
    bytes), on random words of ASCII and multi-byte UTF-8 characters."""
    from nlpcourse.arpa import _span_hashes, _word_spans, word_hash

    rng = np.random.default_rng(0)
    letters = list("abcdefghijklmnopqrstuvwxyz'-.") + ["é", "ß", "中", "😀"]
    words = ["".join(rng.choice(letters, size=rng.integers(1, 12))) for _ in range(300)]
    buf, starts, ends = _word_spans(words)
    want = [word_hash(w.encode()) for w in words]
    assert _span_hashes(buf, starts, ends).view(np.uint64).tolist() == want


@pytest.mark.parametrize("smoothing", SMOOTHINGS)
def test_text_scoring_equals_token_scoring(tmp_path, smoothing):
    """log10_probs_text gives exactly log10_probs's numbers: unknown words, a word that is a
    prefix of another, empty sentences, UTF-8 words, with or without a last newline."""
    lm = read_arpa(write_arpa(NGramLM(3, smoothing).fit(TRAIN + [["Maß", "I"]]), tmp_path / "m"))
    sentences = TEST + [[], ["I", "Ia", "a", "Maß", "Ma"], [], ["中文", "I"]]
    text = "\n".join(" ".join(s) for s in sentences)
    want = lm.log10_probs(sentences)
    np.testing.assert_array_equal(lm.log10_probs_text(text), want)
    np.testing.assert_array_equal(lm.log10_probs_text(text + "\n"), want)
    np.testing.assert_array_equal(lm.log10_probs_text(""), lm.log10_probs([[]]))


def test_text_scoring_bad_text_says_what_is_wrong(tmp_path):
    lm = read_arpa(write_arpa(NGramLM(2, "kneser-ney").fit(TRAIN), tmp_path / "m"))
    with pytest.raises(ValueError, match="line 2 .* two spaces in a row"):
        lm.log10_probs_text("I am\nI  am")
    with pytest.raises(ValueError, match="line 1 .* space at its start or end"):
        lm.log10_probs_text("I am ")
    with pytest.raises(ValueError, match="tab"):
        lm.log10_probs_text("I\tam")
    with pytest.raises(ValueError, match="carriage return"):
        lm.log10_probs_text("I am\r\nam")
    with pytest.raises(ValueError, match="line 3 .* space at its start"):
        lm.log10_probs_text("I am\n\n am")
    with pytest.raises(ValueError, match="line 2 .* space at its start or end"):
        lm.log10_probs_text("I\nam \nI")
    with pytest.raises(ValueError, match="<s> or </s>"):
        lm.log10_probs_text("I </s> am")
    with pytest.raises(TypeError, match="must be a str"):
        lm.log10_probs_text([["I", "am"]])


def test_a_vocabulary_hash_collision_is_refused(tmp_path, monkeypatch):
    """Two vocabulary words with one hash would be read as one word: reading the file refuses it
    (forced here by a hash that ignores all but the first byte)."""
    import nlpcourse.arpa as arpa

    path = write_arpa(NGramLM(2, "kneser-ney").fit(TRAIN), tmp_path / "m")
    monkeypatch.setattr(arpa, "_span_hashes", lambda buf, s, e: buf[s].astype(np.int64))
    with pytest.raises(ValueError, match="share a 64-bit hash"):
        read_arpa(path)


def test_the_compiled_text_reader_finds_what_a_dict_finds(tmp_path):
    """_read_text (one compiled pass that cuts, hashes and looks up the words 8 bytes at a time)
    against Python's split and dict: vocabulary words of 1 to 20 bytes (8 and 16 among them, whole
    pieces), ASCII and multi-byte UTF-8, and unknown words that share a piece or a prefix with
    them; empty lines, and lines of one word."""
    rng = np.random.default_rng(1)
    letters = list("abcdefghijklmnopqrstuvwxyz'-.") + ["é", "ß", "中", "😀"]
    vocab = sorted({"".join(rng.choice(letters, size=k)) for k in range(1, 21) for _ in range(5)})
    vocab += ["abcdefgh", "abcdefghijklmnop"]
    model = NGramLM(2, "kneser-ney").fit([vocab[i : i + 7] for i in range(0, len(vocab), 7)], 1)
    lm = read_arpa(model.to_arpa(tmp_path / "m.arpa"))
    unknown = ["abcdefg", "abcdefghi", "abcdefghijklmnopq", "abcdefghijklmno", "zzzzzzzzzzzzzzzzz"]
    shorter = [w[:-1] for w in vocab if len(w) > 1]
    words = vocab + unknown + [w + "x" for w in vocab[:40]] + shorter[:40]
    words = [str(w) for w in rng.permutation(words)]
    sentences = [words[i : i + 9] for i in range(0, len(words), 9)] + [[], ["I"], [], ["a"]]
    stream, lengths = lm._read_text("\n".join(" ".join(s) for s in sentences))
    want = [lm.index_[t] for s in sentences for t in ["<s>", *s, "</s>"]]
    assert stream.tolist() == want
    assert lengths.tolist() == [len(s) for s in sentences]
    assert (stream == lm.index_["<unk>"]).sum() > len(unknown)
    assert set(stream.tolist()) >= {lm.index_[w] for w in vocab}


@pytest.mark.parametrize("order", [2, 3, 4, 5])
def test_a_file_without_unk_at_every_order_equals_the_readable_recursion(tmp_path, order):
    """Unknown words (id -1 when the file has no <unk>) at every place in a sentence, from token
    lists and from text, against log10_prob, one n-gram at a time."""
    path = NGramLM(order, "kneser-ney").fit(TRAIN, min_count=1).to_arpa(tmp_path / "m.arpa")
    lines = path.read_text().splitlines()
    unk = [line for line in lines if "<unk>" in line]  # only the unigram: min_count=1
    assert len(unk) == 1 and unk[0].split("\t")[1] == "<unk>"
    count = int(next(line for line in lines if line.startswith("ngram 1=")).split("=")[1])
    lines = [f"ngram 1={count - 1}" if line.startswith("ngram 1=") else line for line in lines]
    lines.remove(unk[0])
    nounk = tmp_path / "nounk.arpa"
    nounk.write_text("\n".join(lines) + "\n")
    lm = read_arpa(nounk)
    assert "<unk>" not in lm.vocab
    sentences = [["zzz"], ["I", "zzz", "am", "NLP"], ["zzz", "yyy", "I", "am"], ["I", "am", "zzz"]]
    sentences += TEST
    loop = [lm.log10_prob(w, s[:i]) for s in sentences for i, w in enumerate(s + ["</s>"])]
    assert np.isinf(loop).sum() == 6
    np.testing.assert_allclose(lm.log10_probs(sentences), loop, rtol=1e-12)
    text = "\n".join(" ".join(s) for s in sentences)
    np.testing.assert_allclose(lm.log10_probs_text(text), loop, rtol=1e-12)


# ------------------------------------------------------- compiled code: fresh, readable as Python

REPO = Path(__file__).resolve().parent.parent
HASH_OF_A_WORD = """
import numpy as np
from nlpcourse.arpa import _span_hashes, _word_spans, word_hash
buf, starts, ends = _word_spans(["extraordinary"])
print(int(_span_hashes(buf, starts, ends).view(np.uint64)[0]), word_hash(b"extraordinary"))
"""


def test_a_changed_constant_reaches_the_cached_compiled_code(tmp_path):
    """numba keeps compiled code on disk and knows it is stale only when the file of the compiled
    function changes; it freezes the globals it uses. So the constants of the compiled loops live
    in arpa_fast.py: in a copy of the package whose loops have been compiled and cached, changing
    the hash's multiplier there changes the compiled hash as it changes the readable one (the
    issue's case: a constant in arpa.py changed, and the cached loops kept the old value)."""
    shutil.copytree(
        REPO / "nlpcourse", tmp_path / "nlpcourse", ignore=shutil.ignore_patterns("__pycache__")
    )
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_DISABLE_JIT", "NUMBA_CACHE_DIR")}
    env["PYTHONPATH"] = str(tmp_path)

    def hashes() -> list[int]:
        out = subprocess.run(
            [sys.executable, "-c", HASH_OF_A_WORD],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return [int(x) for x in out.stdout.split()]

    before = hashes()
    assert list((tmp_path / "nlpcourse" / "__pycache__").glob("arpa_fast.span_hashes*.nbi"))
    source = tmp_path / "nlpcourse" / "arpa_fast.py"
    text = source.read_text()
    assert text.count("MURMUR_M = 0xC6A4A7935BD1E995") == 1
    source.write_text(
        text.replace("MURMUR_M = 0xC6A4A7935BD1E995", "MURMUR_M = 0x9E3779B97F4A7C15")
    )
    after = hashes()
    assert before[0] == before[1] and after[0] == after[1]
    assert after != before


@pytest.mark.slow
def test_the_arpa_tests_pass_as_plain_python():
    """With ``NUMBA_DISABLE_JIT=1`` numba compiles nothing and every compiled function runs as the
    Python it is written in, so a reader can step through it: this file's tests (but the corpus
    ones, minutes as Python) pass that way too."""
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
               "-m", "not corpus and not slow", "-W", "ignore::RuntimeWarning"]  # fmt: skip
    out = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert re.search(r"\d+ passed", out.stdout)
