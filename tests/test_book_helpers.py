"""nlpcourse.book (glue) and nlpcourse.records (records of long training runs)."""

import json

import numpy as np
import pytest

from nlpcourse.book import plain
from nlpcourse.records import KEYS, Recorder, load_record


def test_plain_turns_scalars_into_python_numbers():
    assert type(plain(np.float32(1.5))) is float and plain(np.float32(1.5)) == 1.5
    assert type(plain(np.int64(3))) is int
    assert plain([1, 2]) == [1, 2]  # not a scalar: unchanged


def test_a_record_round_trips_with_every_field(tmp_path):
    rec = Recorder("tiny", command="python -m x train", config={"steps": np.int64(2)})
    rec.log(1, train_loss=np.float64(2.5))
    rec.log(2, train_loss=2.0, valid_ppl=float("nan"))
    path = rec.finish(path=tmp_path / "tiny.json", test_ppl=np.float32(7.25))
    record = load_record("tiny", directory=tmp_path)
    assert set(KEYS) <= set(record)
    assert record["config"] == {"steps": 2}
    assert [p["train_loss"] for p in record["curve"]] == [2.5, 2.0]
    assert record["curve"][1]["valid_ppl"] == "nan"  # JSON has no nan: kept as text
    assert record["metrics"] == {"test_ppl": 7.25}
    assert json.loads(path.read_text())["command"] == "python -m x train"


def test_load_record_says_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="no recorded run 'absent'"):
        load_record("absent", directory=tmp_path)
    (tmp_path / "half.json").write_text(json.dumps({"name": "half"}))
    with pytest.raises(ValueError, match="lacks"):
        load_record("half", directory=tmp_path)


def test_record_names_are_plain_file_names():
    with pytest.raises(ValueError, match="plain file name"):
        Recorder("../escape", command="", config={})


def test_a_record_names_the_commit_its_run_started_at(tmp_path, monkeypatch):
    # a long run's code is the code at its start: a commit made while it trains (the next
    # change, say) must not be written into its record
    import nlpcourse.records as records

    monkeypatch.setattr(records, "git_commit", lambda: "a" * 40)
    rec = Recorder("started", command="python -m x train", config={})
    monkeypatch.setattr(records, "git_commit", lambda: "b" * 40)
    rec.finish(path=tmp_path / "started.json")
    assert load_record("started", directory=tmp_path)["commit"] == "a" * 40
