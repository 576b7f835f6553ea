"""The book builds with no cell error and no Sphinx warning, and its pages show measured results.

The build uses Jupyter Book's execution cache in ``_build/``, so after a first build only changed
chapters are executed again.
"""

import html
import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nlpcourse.data import brown_split

REPO = Path(__file__).resolve().parent.parent
HTML = REPO / "_build" / "html"


def toc_files() -> list[str]:
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    files = [toc["root"]]
    for entry in toc.get("chapters", []) + [c for p in toc.get("parts", []) for c in p["chapters"]]:
        files.append(entry["file"])
    return files


@pytest.fixture(scope="module")
def build():
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    result = subprocess.run(
        [str(jupyter_book), "build", ".", "-W", "-n", "--keep-going"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    output = result.stdout + result.stderr
    warnings = [line for line in output.splitlines() if "WARNING" in line and "TCP" not in line]
    assert result.returncode == 0, "the book build failed:\n" + "\n".join(warnings or [output])
    return output


def page_text(name: str) -> str:
    raw = (HTML / f"{name}.html").read_text()
    return html.unescape(re.sub(r"<[^>]+>", " ", raw))


@pytest.mark.slow
@pytest.mark.corpus
def test_every_chapter_is_rendered_without_errors(build):
    for name in toc_files():
        text = page_text(name)
        assert "Traceback" not in text, f"{name} shows a traceback"
        assert "NotImplementedError" not in text


@pytest.mark.slow
@pytest.mark.corpus
def test_ngram_chapter_shows_measured_results(build):
    text = page_text("book/ngrams")
    # the worked example, computed by the package
    assert re.search(r"P\(NLP \| <s>\)\s+0\.3333\s+1/3", text)
    # the perplexity table: every method, orders 1-4, finite numbers from the run
    for method in ["MLE", "Laplace (add-1)", "interpolated (EM)", "Kneser-Ney"]:
        assert method in text
    row = re.search(r"Kneser-Ney \(d=[\d.]+\)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", text)
    assert row, "the Kneser-Ney row of the perplexity table is missing"
    unigram, bigram, trigram, _ = map(float, row.groups())
    assert trigram < bigram < unigram
    # the prose quotes the number the table shows (glued from the executed cell)
    quoted = re.search(r"Our interpolated Kneser-Ney\s+trigram scores\s+([\d.]+)", text)
    assert quoted and float(quoted.group(1)) == trigram
    images = list((HTML / "_images").glob("*.png"))
    assert len(images) >= 3, "the chapter's figures are missing"


def exam_brute_force() -> tuple[list[str], float, float]:
    """The "I go to school" exam tables of chapter 2, solved by enumerating all 4^4 tag sequences:
    the best sequence, its probability and the sum over all sequences (P of the words)."""
    tags = ["VB", "TO", "NN", "PPSS"]
    start = [0.19, 0.43, 0.41, 0.67]
    trans = [[0.38, 0.35, 0.47, 0.70], [0.83, 0, 0.47, 0], [0.40, 0.16, 0.87, 0.45],
             [0.23, 0.79, 0.12, 0.14]]  # fmt: skip
    emit = [[0, 0, 0, 0.37], [0.1, 0, 0.85, 0], [0, 0.99, 0, 0], [0.8, 0, 0.68, 0]]  # [word][tag]
    scores = {}
    for seq in itertools.product(range(4), repeat=4):
        p = start[seq[0]] * emit[0][seq[0]]
        for t in range(1, 4):
            p *= trans[seq[t - 1]][seq[t]] * emit[t][seq[t]]
        scores[seq] = p
    best = max(scores, key=scores.get)
    return [tags[j] for j in best], scores[best], sum(scores.values())


@pytest.mark.slow
@pytest.mark.corpus
def test_hmm_chapter_shows_measured_results(build):
    text = " ".join(page_text("book/hmm").split())
    # the worked Viterbi example: the best sequence and its probability, against brute force
    best_tags, best_prob, total = exam_brute_force()
    shown = re.search(r"The best sequence is (\w+ \w+ \w+ \w+) , with .{0,40}?= ([\d.]+)", text)
    assert shown, "the best sequence of the exam example is missing"
    assert shown.group(1).split() == best_tags == ["PPSS", "NN", "TO", "VB"]
    assert float(shown.group(2)) == pytest.approx(best_prob, rel=1e-4)
    forward = re.search(r"by the forward algorithm: ([\d.e-]+)", text)
    assert forward and float(forward.group(1)) == pytest.approx(total, rel=1e-9)
    # the reading a human gives is ranked below it, and the page says so
    assert re.search(r"PPSS VB TO NN , is only number [2-9]", text)
    # the girl/sleep emissions under the stated assumption: 8 / (8 + 2) and 6 / (4 + 6)
    assert re.search(r"P\(girl \| tag\) 0\.8 0\.4 P\(sleep \| tag\) 0\.2 0\.6", text)
    # accuracies: universal >= 95% and above the baseline; Brown tags above their baseline
    acc = re.search(
        r"the HMM is right on ([\d.]+)% of the test tokens, against ([\d.]+)% for the "
        r"most-frequent-tag baseline; with the (\d+) Brown tags, on ([\d.]+)% against ([\d.]+)%",
        text,
    )
    assert acc, "the accuracy sentence is missing"
    hmm_u, base_u, n_tags, hmm_b, base_b = map(float, acc.groups())
    assert hmm_u >= 95.0 and hmm_u > base_u and hmm_b > base_b and n_tags > 100
    # the table agrees with the prose, and known words are tagged better than unknown ones
    row = re.search(r"universal bigram HMM ([\d.]+) ([\d.]+) ([\d.]+)", text)
    assert row, "the results table is missing"
    everything, known, unknown = map(float, row.groups())
    assert everything == pytest.approx(hmm_u / 100, abs=1e-4) and known > everything > unknown
    # underflow: the longest test sentence, and a product that reaches 0 before its end
    _, _, test = brown_split(tagged=True, tagset="universal")
    longest = max(map(len, test))
    under = re.search(r"below the smallest float at word (\d+) of (\d+)", text)
    assert under and int(under.group(2)) == longest and int(under.group(1)) < longest
    # Baum-Welch raises the log likelihood
    em = re.search(r"rises from (-[\d.]+) to (-[\d.]+)", text)
    assert em and float(em.group(1)) < float(em.group(2))
    # the published comparison and the figures (trellis, EM curve, confusion matrix)
    assert "Brants, 2000" in text and "96.7%" in text
    page = (HTML / "book" / "hmm.html").read_text()
    images = re.findall(r'<img [^>]*src="([^"]+\.png)"', page)
    assert len(images) >= 3, "the chapter's figures are missing"
    for src in images:
        assert (HTML / "book" / src).resolve().is_file(), f"missing figure {src}"


@pytest.mark.slow
@pytest.mark.corpus
def test_rnn_chapter_shows_measured_results(build):
    text = " ".join(page_text("book/rnn").split())
    number = r"([-+\d.e]+)"
    # the BPTT gradient check against finite differences
    check = re.search(
        r"(\d+) gradient entries checked; largest relative difference " + number, text
    )
    assert check and int(check.group(1)) > 0 and float(check.group(2)) < 1e-5
    # the derivative bounds: max tanh' = 1 and max sigmoid' = 1/4
    assert re.search(r"max tanh'\(a\) = 1\.000000", text)
    assert re.search(r"max sigmoid'\(a\) = 0\.250000", text)
    # gradient norms at T - k = 1, 10, 25, 50, 100: the RNN vanishes, the scaled RNN explodes,
    # and the LSTM keeps more of the gradient at the largest distance than the tanh RNN
    rows = {}
    for name in ["tanh RNN", "tanh RNN, ρ(W_hh) = 3", "LSTM", "LSTM, forget bias 3"]:
        row = re.search(re.escape(name) + r" " + r" ".join([number] * 5), text)
        assert row, f"the gradient-norm row {name!r} is missing"
        rows[name] = [float(v) for v in row.groups()]
    assert rows["tanh RNN"][-1] < 1e-6 < 1e3 < rows["tanh RNN, ρ(W_hh) = 3"][-1]
    assert rows["LSTM"][-1] > rows["tanh RNN"][-1]
    assert rows["LSTM, forget bias 3"][-1] > rows["LSTM"][-1]
    # the forget-gate argument: the direct-path Jacobian is diag(f_{k+1} ... f_T)
    gates = re.search(r"f_5 \* \.\.\. \* f_12 \(one per unit\): \[([^\]]+)\]", text)
    diagonal = re.search(r"diagonal of dc_12/dc_4, direct path: \[([^\]]+)\]", text)
    assert gates and diagonal and gates.group(1).split() == diagonal.group(1).split()
    agree = re.search(r"largest difference " + number + r": the two agree", text)
    assert agree and float(agree.group(1)) < 1e-12
    # torch.nn.GRU is torch's form of the reset gate, not the textbook's
    gru = re.search(r"max \|ours − torch\.nn\.GRU\| torch " + number + " textbook " + number, text)
    assert gru and float(gru.group(1)) < 1e-12 < 1e-3 < float(gru.group(2))
    # test perplexities: three recurrent models and Kneser-Ney, finite, better than uniform
    table = {}
    for name in ["tanh RNN", "GRU", "LSTM", r"Kneser-Ney trigram \(d=[\d.]+\)"]:
        row = re.search(name + r" ([\d.]+) ([\d,]+) ", text)
        assert row, f"the test perplexity of {name} is missing"
        table[name] = float(row.group(1))
    vocab = re.search(r"\|V\| = ([\d,]+);", text)
    assert vocab
    for name, ppl in table.items():
        assert 1 < ppl < int(vocab.group(1).replace(",", "")), (name, ppl)
    # the prose quotes the numbers the table shows (glued from the executed cell)
    quoted = re.search(
        r"On the test sample the tanh RNN scores ([\d.]+) , the GRU ([\d.]+) "
        r"and the LSTM ([\d.]+)",
        text,
    )
    assert quoted and [float(v) for v in quoted.groups()] == [
        table["tanh RNN"],
        table["GRU"],
        table["LSTM"],
    ]
    assert "323" in text and "252" in text  # Bengio et al. (2003), Table 1
    # the figures: gradient norms, the LSTM cell, the learning curves
    page = (HTML / "book" / "rnn.html").read_text()
    images = re.findall(r'<img [^>]*src="([^"]+\.png)"', page)
    assert len(images) >= 3, "the chapter's figures are missing"
    for src in images:
        assert (HTML / "book" / src).resolve().is_file(), f"missing figure {src}"
