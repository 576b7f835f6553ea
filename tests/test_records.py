"""The recorded long runs of the language models (``book/results/*lm*.json``) are reproducible.

Each record written by ``python -m nlpcourse.lm_runs`` holds the training loss of its first updates.
This test re-runs those updates with the recorded command's configuration (same seed, data and
code) and checks that it gets the same losses, so a record cannot be typed by hand or silently
drift away from the code that the book says produced it (DESIGN.md, "Long training runs").
"""

import json

import pytest

from nlpcourse.records import RESULTS_DIR

LM_RECORDS = sorted(
    p.stem
    for p in RESULTS_DIR.glob("*lm*.json")
    if json.loads(p.read_text()).get("command", "").startswith("python -m nlpcourse.lm_runs")
)


def test_lm_records_are_complete():
    from nlpcourse.records import load_record

    for name in LM_RECORDS:
        record = load_record(name)
        assert record["metrics"]["test_ppl"] > 1
        assert [p["step"] for p in record["curve"][:3]] == [1, 2, 3]


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("name", LM_RECORDS)
def test_first_steps_reproduce_the_recorded_losses(name):
    from nlpcourse.lm_runs import first_losses

    recorded, again = first_losses(name, n_steps=3)
    assert again == pytest.approx(recorded, rel=1e-4)
