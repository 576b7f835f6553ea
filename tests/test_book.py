"""The book builds with no cell error and no Sphinx warning, and its pages show measured results.

The build uses Jupyter Book's execution cache in ``_build/``, so after a first build only changed
chapters are executed again.
"""

import html
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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
