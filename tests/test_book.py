"""The built book shows what its chapters measured, checked value by value, by name.

Every number in a chapter's prose is glued: a cell calls ``keep("name", value)``
(:mod:`nlpcourse.book`, myst-nb's ``glue``) and the text shows ``{glue:text}`name:.1f```. These
tests read the glued values themselves, by name, from the executed notebooks that the build leaves
in its execution cache (``_build/.jupyter_cache``, matched to each chapter's current code the way
``.ci/check_build.py`` does), instead of searching the rendered text, where a pattern such as
"323" matches any 323 anywhere on the page. Because the prose and the tables read the same glued
value, an assertion on the value is an assertion on what the page says.

Each assertion compares a value with something independent of the chapter's code where one exists
(brute force, arithmetic, the corpus counted directly, a published figure) and otherwise with the
claim the prose makes about it (a model beats its baseline, a gradient vanishes).

The book is built once per test session by the ``book_build`` fixture of ``tests/conftest.py``
(``jupyter-book build . -W -n --keep-going`` and ``.ci/check_build.py``, which already fails on a
cell error, a Sphinx warning or a glued value the text uses but no cell stored).
"""

from __future__ import annotations

import ast
import itertools
import math
import os
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from nlpcourse.data import brown_split
from nlpcourse.records import load_record

REPO = Path(__file__).resolve().parent.parent
GLUE_MIME = "application/papermill.record/text/plain"  # myst-nb's glue(..., display=False)

sys.path.insert(0, str(REPO / ".ci"))
import check_build  # noqa: E402


def parse_glued(text: str) -> Any:
    """A glued value from its ``repr``: numbers, strings, lists; ``nan`` and ``inf`` too."""
    special = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
    if text in special:
        return special[text]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a repr that is not a literal: compare it as text


def glued_values(notebook) -> dict[str, Any]:
    """``{name: value}`` for every value a notebook's cells glued."""
    values = {}
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            data = output.get("data", {})
            if name and (GLUE_MIME in data or "text/plain" in data):
                values[name] = parse_glued(data.get(GLUE_MIME, data.get("text/plain")))
    return values


class Page:
    """A chapter's glued values, read from the execution cache; ``page["name"]`` fails with a
    message that names the page and the missing value."""

    def __init__(self, page: str, build: Path):
        from jupyter_cache import get_cache

        path = check_build.source_of(page)
        notebook = check_build.read_notebook(path)
        try:
            get_cache(str(build / ".jupyter_cache")).match_cache_notebook(notebook)
        except KeyError:
            pytest.fail(f"{page}: no successful execution of its current code in the cache")
        _, executed = get_cache(str(build / ".jupyter_cache")).merge_match_into_notebook(notebook)
        self.name, self.values = page, glued_values(executed)
        self.html = build / "html" / f"{page}.html"

    def __getitem__(self, name: str) -> Any:
        if name not in self.values:
            pytest.fail(
                f"{self.name} glues no value named {name!r}; it glues {sorted(self.values)}"
            )
        return self.values[name]

    def figures(self) -> list[Path]:
        """The PNG figures the built page shows, each checked to exist."""
        page = self.html.read_text()
        figures = [
            (self.html.parent / src).resolve()
            for src in re.findall(r'<img [^>]*src="([^"]+\.png)"', page)
        ]
        for figure in figures:
            assert figure.is_file(), f"{self.name}: missing figure {figure}"
        return figures


class Pages:
    """The executed chapters of the build, each read when a test first asks for it."""

    def __init__(self, build: Path):
        self.build, self.read = build, {}
        self.names = [page for page, _ in check_build.executed_pages()]

    def __getitem__(self, name: str) -> Page:
        if name not in self.names:
            pytest.fail(f"{name} is not an executed page of _toc.yml: {self.names}")
        if name not in self.read:
            self.read[name] = Page(name, self.build)
        return self.read[name]


class ExecutedChapter(Pages):
    """One chapter executed alone, without building the book: ``NLPCOURSE_BOOK_CHAPTER`` names its
    executed notebook ``<dir>/<name>.out.ipynb`` (CONTRIBUTING.md, "check one chapter's glued
    values"). Its glued values and figures come from the notebook; a test that asks for another
    chapter is skipped."""

    def __init__(self, notebook: Path):
        import nbformat

        executed = nbformat.read(notebook, as_version=4)
        page = Page.__new__(Page)
        page.name, page.values = f"book/{notebook.name.split('.')[0]}", glued_values(executed)
        pngs = [
            o
            for c in executed.cells
            for o in c.get("outputs", [])
            if "image/png" in o.get("data", {})
        ]
        page.figures = lambda: pngs  # type: ignore[method-assign]
        self.names, self.read = [page.name], {page.name: page}

    def __getitem__(self, name: str) -> Page:
        if name not in self.read:
            pytest.skip(f"only {self.names[0]} was executed (NLPCOURSE_BOOK_CHAPTER)")
        return self.read[name]


@pytest.fixture(scope="module")
def pages(request) -> Pages:
    chapter = os.environ.get("NLPCOURSE_BOOK_CHAPTER")
    if chapter:
        return ExecutedChapter(Path(chapter))
    return Pages(request.getfixturevalue("book_build").build)


def test_parse_glued():
    assert parse_glued("0.25") == 0.25 and parse_glued("3") == 3
    assert parse_glued("'PPSS NN TO VB'") == "PPSS NN TO VB"
    assert math.isnan(parse_glued("nan")) and parse_glued("-inf") == -math.inf
    assert parse_glued("tensor(1.)") == "tensor(1.)"


@pytest.mark.slow
@pytest.mark.corpus
def test_every_chapter_glues_values(pages):
    """Every chapter with an exercise (``solutions/NN-<name>`` -> ``book/<name>``) measures what it
    reports; the front page and the other pages may execute code without gluing numbers."""
    chapters = [
        f"book/{folder.name.split('-', 1)[1]}"
        for folder in sorted((REPO / "solutions").iterdir())
        if folder.is_dir() and f"book/{folder.name.split('-', 1)[1]}" in pages.names
    ]
    assert chapters, "no chapter of solutions/ is an executed page of the book"
    for name in chapters:
        assert pages[name].values, f"{name} glues no value: are its numbers typed by hand?"


def brown_test_counts() -> tuple[int, int]:
    """Tokens and sentences of the test split, counted from the corpus directly."""
    _, _, test = brown_split()
    return sum(map(len, test)), len(test)


@pytest.mark.slow
@pytest.mark.corpus
def test_ngram_chapter_shows_measured_results(pages):
    page = pages["book/ngrams"]
    tokens, sentences = brown_test_counts()
    assert page["n_test_tokens"] == tokens
    # </s> is predicted once per sentence: its share of the test predictions
    assert page["eos_share"] == pytest.approx(sentences / (tokens + sentences))
    # the Bengio vocabulary: words seen >= 4 times in training, counted here from the corpus
    train, _, _ = brown_split()
    counts = Counter(w for s in train for w in s)
    frequent = sum(c >= 4 for c in counts.values())
    assert page["bengio_vocab"] == frequent + 2, "|V|: words seen >= 4 times, </s> and <unk>"
    # higher orders see more unseen n-grams
    assert 0 < page["unseen_bigram_pct"] < page["unseen_trigram_pct"] < 100
    # perplexity is exp of the cross-entropy
    assert page["sent_ppl"] == pytest.approx(math.exp(page["sent_H"]))
    # the results the prose states: Kneser-Ney beats interpolation and Laplace at the trigram,
    # the 4-gram gains little, and the ratio to Bengio et al.'s 323 (their Table 1) is the quotient
    kn3, kn4 = page["kn3_test"], page["kn4_test"]
    assert 1 < kn3 < page["interp3_test"] < page["laplace3_test"]
    assert page["best_test"] <= min(kn3, kn4)
    assert page["kn_gain_3_to_4"] == pytest.approx(kn3 - kn4)
    assert page["kn3_vs_bengio"] == pytest.approx(kn3 / 323)
    assert page["laplace_bigram_valid"] >= page["best_k_bigram_valid"]
    assert len(page.figures()) >= 3, "the chapter's figures are missing"


def exam_brute_force() -> tuple[list[str], float, float, int]:
    """The "I go to school" exam tables of chapter 2, solved by enumerating all 4^4 tag sequences:
    the best sequence, its probability, the sum over all sequences (P of the words), and how many
    sequences have a non-zero probability."""
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
    best = max(scores, key=scores.__getitem__)
    nonzero = sum(p > 0 for p in scores.values())
    return [tags[j] for j in best], scores[best], sum(scores.values()), nonzero


@pytest.mark.slow
@pytest.mark.corpus
def test_hmm_chapter_shows_measured_results(pages):
    page = pages["book/hmm"]
    # the worked Viterbi example, against brute force over all 256 tag sequences
    best_tags, best_prob, total, nonzero = exam_brute_force()
    assert page["exam_best_tags"].split() == best_tags == ["PPSS", "NN", "TO", "VB"]
    assert page["exam_best_prob"] == pytest.approx(best_prob, rel=1e-9)
    assert page["exam_likelihood"] == pytest.approx(total, rel=1e-9)
    assert page["exam_brute_likelihood"] == pytest.approx(total, rel=1e-9)
    assert page["n_nonzero"] == nonzero
    # the reading a human gives is not the best one
    assert page["right_rank"] >= 2 and page["right_prob"] < best_prob
    # the girl/sleep emissions under the stated assumption: 8 / (8 + 2) and 6 / (4 + 6)
    assert page["p_girl_noun"] == pytest.approx(0.8)
    assert page["p_sleep_verb"] == pytest.approx(0.6)
    # accuracies: universal >= 95% and above the baseline; Brown tags above their baseline
    hmm_u, base_u = page["acc_universal_bigram_all"], page["acc_universal_most_all"]
    hmm_b, base_b = page["acc_Brown_bigram_all"], page["acc_Brown_most_all"]
    assert hmm_u >= 0.95 and hmm_u > base_u and hmm_b > base_b
    assert page["n_tags_Brown"] > 100 and page["n_tags_universal"] <= 12
    # known words are tagged better than unknown ones
    assert page["acc_universal_bigram_known"] > hmm_u > page["acc_universal_bigram_unknown"]
    # the gap to TnT's 96.7% (Brants, 2000) is the difference of the two
    assert page["gap_universal"] == pytest.approx(96.7 - 100 * hmm_u)
    # underflow: the longest test sentence, and a product that reaches 0 before its end
    _, _, test = brown_split(tagged=True, tagset="universal")
    assert page["n_test_tokens"] == sum(map(len, test))
    assert page["long_len"] == max(map(len, test))
    assert page["first_zero"] < page["long_len"]
    assert page["long_log10"] == pytest.approx(page["long_logprob"] / math.log(10))
    # Baum-Welch never lowers the likelihood
    assert page["em_first"] < page["em_last"] and page["em_min_step"] > -1e-6
    assert len(page.figures()) >= 3, "the chapter's figures are missing"


@pytest.mark.slow
@pytest.mark.corpus
def test_rnn_chapter_shows_measured_results(pages):
    page = pages["book/rnn"]
    # the BPTT gradient check against finite differences
    assert page["bptt_n_checked"] > 0 and page["bptt_rel_err"] < 1e-5
    # the derivative bounds: max tanh' = 1 and max sigmoid' = 1/4
    assert page["max_dtanh"] == pytest.approx(1.0, abs=1e-6)
    assert page["max_dsigmoid"] == pytest.approx(0.25, abs=1e-6)
    # gradient norms after 100 steps: the RNN vanishes, the scaled RNN explodes, and the LSTM
    # keeps more of the gradient than the tanh RNN, more still with a forget bias of 3
    rnn, exploding = page["rnn_norm_100"], page["exploding_norm_100"]
    assert rnn < 1e-6 < 1e3 < exploding
    assert rnn < page["lstm_norm_100"] < page["lstm3_norm_100"]
    assert page["rnn_rate"] == pytest.approx(rnn ** (1 / 100))
    # the forget-gate argument: the direct-path Jacobian is the product of the forget gates
    assert page["forget_agree"] == "agree" and page["forget_diff"] < 1e-12
    # torch.nn.GRU is torch's form of the reset gate, not the textbook's
    assert page["gru_torch_diff"] < 1e-12 < 1e-3 < page["gru_textbook_diff"]
    # the vocabulary: words seen >= 4 times in training, plus </s> and <unk>, counted here
    train, _, _ = brown_split()
    counts = Counter(w for s in train for w in s)
    assert page["V"] == sum(c >= 4 for c in counts.values()) + 2
    assert page["n_train_pred"] == sum(map(len, train)) + len(train)
    # teacher forcing: every update trains on B x T predictions
    assert page["lm_train_words"] == page["lm_steps"] * page["lm_batch"] * page["lm_bptt"]
    assert page["lm_epoch_share"] == pytest.approx(page["lm_train_words"] / page["n_train_pred"])
    # an untrained model is close to a uniform guess over V
    assert 0.5 * page["V"] < page["lm_step0_ppl"] < 2 * page["V"]
    # test perplexities: finite, better than uniform, and Kneser-Ney ahead in this budget
    kn = page["kn_test_sub"]
    for cell in ("rnn", "gru", "lstm"):
        assert 1 < kn < page[f"lm_test_{cell}"] < page["V"], cell
        assert page[f"lm_valid_{cell}"] < page["lm_step0_ppl"], cell
    assert page["bengio_ratio"] == pytest.approx(252 / 323)  # Bengio et al. (2003), Table 1
    assert page["lstm_vs_kn"] == pytest.approx(page["lm_test_lstm"] / kn)
    # the recorded long run: the page shows its record, against this page's Kneser-Ney
    record = load_record("lstm_lm")
    assert page["lstm_long_ppl"] == pytest.approx(record["metrics"]["test_ppl"])
    assert page["lstm_long_ratio"] == pytest.approx(
        record["metrics"]["test_ppl"] / page["kn_test_full"]
    )
    assert page["long_H"] == record["config"]["H"]
    assert len(page.figures()) >= 4, "the chapter's figures are missing"


@pytest.mark.slow
@pytest.mark.corpus
def test_chapters_agree_on_the_shared_numbers(pages):
    """Chapters 1 and 4 use one split and one vocabulary rule, so their numbers can be compared."""
    ngrams, rnn = pages["book/ngrams"], pages["book/rnn"]
    assert rnn["V"] == ngrams["bengio_vocab"]
    assert rnn["n_test_full"] == ngrams["n_test_tokens"] + brown_test_counts()[1]


@pytest.mark.slow
@pytest.mark.corpus
def test_seq2seq_chapter_states_what_it_measured(pages):
    """Chapter 5: the bottleneck read per phone (the per-word rate saturates), the three scores
    not ranked beyond their noise, and the bilinear score's work counted with its W k_j."""
    page = pages["book/seq2seq"]
    # the word error rate without attention is at its ceiling on long words, so its gap narrows
    assert page["wer_long_none"] > 0.9 and page["gap_long"] < page["gap_short"]
    # the phone error rate is not saturated, and attention's gain widens with the length
    assert page["per_long_none"] < 0.8
    assert page["per_gap_long"] > page["per_gap_short"] > 0
    assert page["per_gap_verdict"] == "wider"
    # the noise of a WER on n words: the binomial standard error at the three scores' mean WER
    n = page["b_n_test_sample"]
    mean = (page["b_wer_dot"] + page["b_wer_bilinear"] + page["b_wer_additive"]) / 3
    assert page["b_wer_se"] == pytest.approx(math.sqrt(mean * (1 - mean) / n))
    spread = max(page[f"b_wer_{k}"] for k in ("dot", "bilinear", "additive")) - min(
        page[f"b_wer_{k}"] for k in ("dot", "bilinear", "additive")
    )
    assert page["b_score_spread"] == pytest.approx(spread)
    ranked = spread >= 2 * math.sqrt(2) * page["b_wer_se"]
    assert (page["b_score_verdict"] == "do not rank the three scores") == (not ranked)
    # the work of the two scores: additive has A numbers per (phone, letter) pair, bilinear one
    assert page["r_work_additive"] > 10 * page["r_work_bilinear"]
    assert page["r_work_ratio"] == pytest.approx(page["r_work_additive"] / page["r_work_bilinear"])
    assert page["r_A"] == load_record("seq2seq_g2p")["config"]["H"]
    # the placement's cost is judged on the CPU time, with three outcomes (issue 43 §3.5)
    cpu = page["v_bahdanau_cpu"]
    verdict = page["v_bahdanau_cost"]
    assert verdict.startswith(
        "about the same" if 0.8 <= cpu <= 1.25 else "more work" if cpu > 1.25 else "less work"
    ), (cpu, verdict)


@pytest.mark.slow
@pytest.mark.corpus
def test_transformer_chapter_reproduces_the_walkthroughs(pages):
    """Chapter 6: the numbers of Raschka, Liu & Mirjalili's chapter 16 (q = U_q x), the 512 -> 64
    head, what the text claims about the scores' signs, the no-position model and the decoding
    rules, and the recorded curve."""
    page = pages["book/transformer"]
    # Raschka, "Understanding and coding the self-attention mechanism ..." (2023)
    assert page["omega_23"] == pytest.approx(14.3667, abs=1e-4)
    assert page["omega_2_min"] == pytest.approx(-32.9392, abs=1e-4)
    assert page["omega_2_max"] == pytest.approx(53.8976, abs=1e-4)
    assert page["omega_2_negative"] == 3  # -25.16, -1.21, -32.94
    assert page["alpha_2_max"] == pytest.approx(8.5596e-01, abs=1e-4)
    assert page["alpha_2_argmax"] == "to"  # the fifth word, omega_25 = 53.90
    assert page["head3_key_2_first"] == pytest.approx(-1.9619, abs=1e-4)
    # the Illustrated Transformer's head: 512 -> 64, divided by sqrt(64) = 8
    assert page["six_d_model"] == 512 and page["six_d_k"] == 64
    assert page["six_scaled_1"] == pytest.approx(page["six_score_1"] / 8)
    # the model without a position encoding, ranked as the text says
    nopos, encoded = page["lm_test_nopos"], (page["lm_test_short"], page["lm_test_sin"])
    rank = sum(e < nopos for e in encoded)
    assert (
        page["nopos_verdict"]
        == [
            "the best of the three",
            "between the two encoded models",
            "the worst of the three",
        ][rank]
    )
    # decoding: tau = 1 strays furthest from what the model finds likely
    t1 = page["gen_logp_t1"]
    assert t1 < min(page[f"gen_logp_{k}"] for k in ("greedy", "topk", "topp", "beam"))
    # the recorded run crosses below Kneser-Ney at its second evaluation and ends below it
    record = load_record("transformer_lm")
    curve = [p for p in record["curve"] if "valid_ppl" in p]
    assert page["long_cross_step"] == curve[1]["step"]
    assert page["long_curve_end_ratio"] < 1


@pytest.mark.slow
@pytest.mark.corpus
def test_ngram_chapter_full_vocabulary_section(pages):
    """Chapter 1's "Longer contexts, every word kept": |V| and the share of unknown test words
    counted here from the corpus; perplexities above the Bengio vocabulary's; the model grows with
    the order; more test 5-grams unseen than 4-grams."""
    page = pages["book/ngrams"]
    train, _, test = brown_split()
    seen = {w for s in train for w in s}
    assert page["full_vocab"] == len(seen) + 2, "every training word, </s> and <unk>"
    unknown = [w not in seen for s in test for w in s]
    assert page["full_unk_pct"] == pytest.approx(100 * sum(unknown) / len(unknown))
    full = [page[f"full_ppl_{n}"] for n in (2, 3, 4, 5)]
    assert min(full) > max(page["kn3_test"], page["kn4_test"])
    sizes = [page[f"full_mb_{n}"] for n in (2, 3, 4, 5)]
    assert sizes == sorted(sizes) and sizes[0] > 0
    assert page["unseen_4gram_pct"] < page["unseen_5gram_pct"] < 100


@pytest.mark.slow
def test_a_failed_execution_is_executed_again(tmp_path):
    """A chapter whose execution failed (here a cell error; on a busy machine, the cell timeout) is
    executed again by the next build, although its source did not change: Sphinx alone finds
    nothing out of date and keeps the failure until the cache is cleared by hand (issue 43, §6).
    The book's own extension and myst-nb's cache mode build a one-page project twice; the page's
    cell fails while a file ``fail`` exists beside it."""
    from sphinx.cmd.build import build_main

    from nlpcourse.book import cached_execution

    (tmp_path / "conf.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(REPO / '_ext')!r})\n"
        "extensions = ['myst_nb', 'bookbuild']\n"
        "nb_execution_mode = 'cache'\n"
        "exclude_patterns = ['_build']\n"
    )
    page = tmp_path / "index.md"
    page.write_text(
        "---\njupytext:\n  text_representation:\n    format_name: myst\n"
        "kernelspec:\n  name: python3\n  display_name: Python 3\n---\n# A page\n\n"
        "```{code-cell} ipython3\n"
        "import pathlib\n"
        "assert not pathlib.Path('fail').exists(), 'a passing failure'\n"
        "```\n"
    )
    build = tmp_path / "_build"

    def sphinx_build() -> None:
        build_main(["-q", "-b", "html", str(tmp_path), str(build / "html")])

    (tmp_path / "fail").write_text("")
    sphinx_build()
    assert cached_execution(build / ".jupyter_cache", page) is None, "the first run must fail"
    failure = check_build.problems_of("index", page, build)
    assert len(failure) == 1 and "a passing failure" in failure[0], failure
    (tmp_path / "fail").unlink()
    sphinx_build()  # nothing changed in the source
    assert cached_execution(build / ".jupyter_cache", page) is not None, (
        "the page whose execution failed was not executed again"
    )
    assert check_build.problems_of("index", page, build) == []


@pytest.mark.slow
@pytest.mark.corpus
def test_transformer_sweep_paragraph_says_what_its_record_holds(pages):
    """Chapter 6's GPU sweep (issue 43 §2.2), recounted from the record itself: how many recipes
    trained all their steps, how far the others got, the one given more steps than its hour buys
    (3,300 s of CPU at 0.137 s a step with dropout, 0.091 s without, benchmarks/README.md), and
    the CPU rerun's steps against the sweep's."""
    page = pages["book/transformer"]
    runs = load_record("transformer_g2p_sweep")["metrics"]["runs"]
    assert page["sweep_n"] == len(runs)
    finished = sum(r["trained"] == r["steps"] for r in runs)
    assert page["sweep_done"].lower() in (str(finished), ["zero", "one", "two", "three"][finished])
    shares = [r["trained"] / r["steps"] for r in runs if r["trained"] < r["steps"]]
    assert page["sweep_least_share"] == pytest.approx(min(shares))
    assert page["sweep_most_share"] == pytest.approx(max(shares))
    step_seconds = {0.0: 0.091, 0.1: 0.137}
    over = [
        r["name"]
        for r in runs
        if r["D"] == 192
        and r["drop"] in step_seconds
        and r["steps"] * step_seconds[r["drop"]] > 3300
    ]
    assert [page["sweep_over_name"]] == over
    rerun = load_record("transformer_g2p_d256")["metrics"]["steps"]
    assert page["d256_steps"] == rerun != page["d256_sweep_steps"]
