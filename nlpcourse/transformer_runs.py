"""The recorded run of chapter 6's encoder-decoder transformer on chapter 5's task (issue 30).

Chapter 5 trains an attention RNN to pronounce English words (CMUdict grapheme-to-phoneme) and
records a long run of it; this command trains :class:`nlpcourse.transformer.Seq2SeqTransformer`
on the same split (:func:`nlpcourse.data.cmudict_split`), with chapter 5's vocabularies, batches,
training loop (:func:`nlpcourse.seq2seq.train`), decoding (``greedy_decode`` and ``beam_search``
through the model's step function) and scoring (:func:`nlpcourse.seq2seq.evaluate`: WER and PER,
with and without stress digits, a word right if it equals any of its pronunciations), and writes
the record ``book/results/transformer_g2p.json`` with :mod:`nlpcourse.records`::

    python -m nlpcourse.transformer_runs g2p --threads 1
    python -m nlpcourse.transformer_runs g2p --steps 200 --no-record     # a short try

The record keeps the training loss every ``log_every`` steps (the first points are what
``tests/test_records.py`` re-computes), the validation WER/PER on a fixed sample of the
validation split, the test metrics, and the greedy predictions for the test words the model gets
wrong with stress digits kept (every other word is right, so the chapter can compare the two
models' errors word by word without the weights, which are never committed).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from nlpcourse import seq2seq as s2s
from nlpcourse.records import Recorder, load_record
from nlpcourse.runs_cli import add_run_options, run_and_print
from nlpcourse.seq2seq_runs import validation_sample
from nlpcourse.training import Logger
from nlpcourse.transformer import Seq2SeqTransformer, count_parameters

CONFIGS: dict[str, dict[str, Any]] = {
    # the recorded run of chapter 6 (book/results/transformer_g2p.json): pre-LN (stable
    # without a warm-up, which chapter 5's training loop does not have), label smoothing, a
    # linear decay of the learning rate over all its steps, and as many steps as an idle 2-core
    # machine trains in about 46 minutes (0.091 s a step with 2 threads; max_minutes stops the
    # training at 52 minutes if the machine is slower). d = 192 with 2 blocks a side came out
    # best per step of the equal trials below, at 0.6 of the time of a step of d = 256. No
    # dropout: with dropout 0.1 a step took 0.137 s on the idle machine (1.5 times as long),
    # and without it the trials' d = 128 model was 2.4 points of WER ahead at 7,200 steps.
    # Beam search, one word and one hypothesis at a time through chapter 5's beam_search,
    # decodes every `beam_every`-th test word (greedy decodes all)
    "g2p": dict(
        D=192, H=4, n_layers=2, D_ff=768, dropout=0.0, label_smoothing=0.1,
        batch_size=128, lr=2e-3, clip=1.0, seed=0, steps=30000, max_minutes=52.0, log_every=25,
        valid_every=2500, valid_words=200, beam_size=5, length_penalty=0.0, max_len=30,
        beam_every=4,
    ),
}  # fmt: skip
# the best recipe of the GPU sweep of benchmarks/g2p_sweep.py
# (book/results/transformer_g2p_sweep.json: 28.7% greedy WER without stress on the
# validation split in 16,000 steps), trained on the 2 CPU cores for the steps the hour holds
# (about 0.2 s a step with dropout at d = 256, 2 threads: 0.195 s in the run), to see whether
# it beats "g2p" on the test split (book/results/transformer_g2p_d256.json; it did not)
CONFIGS["g2p_d256"] = dict(
    CONFIGS["g2p"], D=256, D_ff=1024, dropout=0.1, steps=15000, max_minutes=55.0
)
RECORD_NAMES = {"g2p": "transformer_g2p", "g2p_d256": "transformer_g2p_d256"}

# The trial runs that chose the recorded configuration, kept here and copied into the record so
# that the chapter shows what was tried. The first three: 300 steps each, decayed over 300,
# batch 128, one thread on the shared 2-core machine at a load average of about 12; the loss is
# the mean training loss of steps 201-250 with label smoothing 0.1; WER on 300 validation words,
# greedy. The others: the first ~7,200 steps (5,700 with 3 blocks) of longer runs at a constant
# learning rate of 2e-3 (3e-3 for d = 128), batch 128, eight at once on one GPU for 7 minutes
# (torch 2.11), WER on the whole validation split, greedy; seconds_per_step is the CPU time of a
# step with 2 threads on the idle 2-core machine (torch 2.13).
TRIALS: list[dict[str, Any]] = [
    {"trial": "D 128, 3+3 blocks, lr 2e-3, torch's N(0, 1) embeddings", "steps": 300,
     "loss_at_250": 1.992, "valid_wer": None, "valid_wer_no_stress": None,
     "seconds_per_step": 0.70},
    {"trial": "the same, embeddings N(0, 1/D)", "steps": 300, "loss_at_250": 1.255,
     "valid_wer": 0.637, "valid_wer_no_stress": 0.617, "seconds_per_step": 0.86},
    {"trial": "the same, 2+2 blocks, lr 3e-3", "steps": 300, "loss_at_250": 1.256,
     "valid_wer": 0.623, "valid_wer_no_stress": 0.607, "seconds_per_step": 0.61},
    {"trial": "D 128, 2+2 blocks, no dropout", "steps": 7407, "loss_at_250": None,
     "valid_wer": 0.412, "valid_wer_no_stress": 0.364, "seconds_per_step": 0.061},
    {"trial": "D 128, 2+2 blocks, dropout 0.1", "steps": 7235, "loss_at_250": None,
     "valid_wer": 0.437, "valid_wer_no_stress": 0.387, "seconds_per_step": 0.061},
    {"trial": "D 192, 2+2 blocks, dropout 0.1 (recorded without)", "steps": 7226,
     "loss_at_250": None, "valid_wer": 0.402, "valid_wer_no_stress": 0.354,
     "seconds_per_step": 0.091},
    {"trial": "D 256, 2+2 blocks, dropout 0.1", "steps": 7247, "loss_at_250": None,
     "valid_wer": 0.426, "valid_wer_no_stress": 0.376, "seconds_per_step": 0.149},
    {"trial": "D 192, 3+3 blocks, dropout 0.1", "steps": 5675, "loss_at_250": None,
     "valid_wer": 0.426, "valid_wer_no_stress": 0.375, "seconds_per_step": 0.148},
    {"trial": "D 256, 3+3 blocks, dropout 0.1", "steps": 5690, "loss_at_250": None,
     "valid_wer": 0.412, "valid_wer_no_stress": 0.364, "seconds_per_step": 0.223},
]  # fmt: skip


def build(
    config: dict[str, Any], train_split: dict[str, list[s2s.Pron]]
) -> tuple[Seq2SeqTransformer, s2s.Vocab, s2s.Vocab]:
    """Chapter 5's vocabularies of ``train_split`` and a freshly seeded model of ``config``."""
    src, tgt = s2s.g2p_vocabs(train_split)
    torch.manual_seed(config["seed"])
    model = Seq2SeqTransformer(
        len(src), len(tgt), config["label_smoothing"], D=config["D"], H=config["H"],
        n_layers=config["n_layers"], D_ff=config["D_ff"], dropout=config["dropout"],
        max_len=2 * config["max_len"],
    )  # fmt: skip
    return model, src, tgt


class _EachLoss:
    """A :class:`nlpcourse.training.Logger` that hands each logged training loss to
    ``on_loss(step, loss)``."""

    def __init__(self, on_loss: Callable[[int, float], None]):
        self.on_loss = on_loss

    def log(self, step: int, **values: Any) -> None:
        self.on_loss(step, values["train_loss"])


def train(
    model: Seq2SeqTransformer,
    pairs: Sequence[tuple[list[int], list[int]]],
    config: dict[str, Any],
    steps: int | None = None,
    logger: Logger | None = None,
    show_progress: bool = False,
) -> list[float]:
    """Chapter 5's :func:`nlpcourse.seq2seq.train` with ``config``'s settings (the first
    ``steps`` of them if given, on the same learning-rate schedule)."""
    return s2s.train(
        model,
        pairs,
        config["steps"] if steps is None else steps,
        batch_size=config["batch_size"],
        lr=config["lr"],
        clip=config["clip"],
        seed=config["seed"],
        log_every=config["log_every"],
        logger=logger,
        show_progress=show_progress,
        max_minutes=config["max_minutes"],
        decay_over=config["steps"],
    )


def evaluate(
    model: Seq2SeqTransformer,
    data: dict[str, list[s2s.Pron]],
    src: s2s.Vocab,
    tgt: s2s.Vocab,
    **decoding: Any,
) -> dict[str, Any]:
    """Chapter 5's :func:`nlpcourse.seq2seq.evaluate`, which types its model as chapter 5's; this
    one has the same decoding methods (``greedy``, ``beam_search``, ``eval``)."""
    return s2s.evaluate(cast(s2s.Seq2Seq, model), data, src, tgt, **decoding)


def rates_of(result: dict[str, Any], data: dict[str, list[s2s.Pron]]) -> dict[str, float]:
    """WER and PER, with and without stress, of an :func:`nlpcourse.seq2seq.evaluate` result
    on the words of ``data`` only (a subset of its words), as ``evaluate`` computes them."""
    from nlpcourse.data import strip_stress_digits

    chosen = [(w, p) for w, p in zip(result["words"], result["predictions"], strict=True)
              if w in data]  # fmt: skip
    preds, refs = [p for _, p in chosen], [data[w] for w, _ in chosen]
    wer, per = s2s.error_rates(preds, refs)
    wer_ns, per_ns = s2s.error_rates(
        [strip_stress_digits(p) for p in preds],
        [[strip_stress_digits(r) for r in rs] for rs in refs],
    )
    return {"wer": wer, "per": per, "wer_no_stress": wer_ns, "per_no_stress": per_ns}


def errors_of(result: dict[str, Any], data: dict[str, list[s2s.Pron]]) -> dict[str, str]:
    """The words of an :func:`nlpcourse.seq2seq.evaluate` result whose prediction is none of
    their pronunciations, with the prediction as one string of phones."""
    return {
        word: " ".join(pred)
        for word, pred in zip(result["words"], result["predictions"], strict=True)
        if tuple(pred) not in {tuple(p) for p in data[word]}
    }


def run_recorded(
    name: str, steps: int | None = None, record: bool = True, threads: int = 2
) -> dict[str, Any]:
    """Train ``CONFIGS[name]`` (for ``steps`` steps if given), log the training loss every
    ``log_every`` steps and the validation WER/PER every ``valid_every``, evaluate on the test
    split with greedy decoding and beam search and, if ``record``, write the record."""
    from nlpcourse.data import cmudict_split

    if name not in CONFIGS:
        raise ValueError(f"unknown config {name!r}; known: {sorted(CONFIGS)}")
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)  # tiny attention weights computed slowly otherwise (ch. 5)
    config = {**CONFIGS[name], **({} if steps is None else {"steps": steps})}
    train_split, valid_split, test_split = cmudict_split()
    model, src, tgt = build(config, train_split)
    pairs = s2s.g2p_pairs(train_split, src, tgt)
    valid = validation_sample(valid_split, config["valid_words"])
    rec = Recorder(
        RECORD_NAMES[name], f"python -m nlpcourse.transformer_runs {name} --threads {threads}",
        config,
    )  # fmt: skip

    def log_step(step: int, loss: float) -> None:
        values: dict[str, float] = {"train_loss": loss}
        if step % config["valid_every"] == 0:
            result = evaluate(model, valid, src, tgt, max_len=config["max_len"])
            values.update(valid_wer=result["wer"], valid_per=result["per"])
            print(f"step {step}: loss {loss:.4f}, valid WER {result['wer']:.1%}", flush=True)
        rec.log(step, **values)

    start = time.perf_counter()
    curve = train(model, pairs, config, logger=_EachLoss(log_step), show_progress=True)
    train_minutes = (time.perf_counter() - start) / 60
    trained = len(curve) * config["log_every"]
    decoding = {"max_len": config["max_len"]}
    beam_options = {"beam_size": config["beam_size"], "length_penalty": config["length_penalty"]}
    start = time.perf_counter()
    greedy = evaluate(model, test_split, src, tgt, method="greedy", **decoding)
    greedy_minutes = (time.perf_counter() - start) / 60
    beam_words = dict(list(test_split.items())[:: config["beam_every"]])
    beam = evaluate(model, beam_words, src, tgt, method="beam", **decoding, **beam_options)
    greedy_there = rates_of(greedy, beam_words)  # greedy on the same words, to compare
    rates = ("wer", "per", "wer_no_stress", "per_no_stress")
    metrics = {
        "steps": trained,
        "train_minutes_with_validation": round(train_minutes, 2),
        "train_words_per_second": trained * config["batch_size"] / (60 * train_minutes),
        "greedy_test_minutes": round(greedy_minutes, 2),
        "parameters": count_parameters(model),
        "test_words": len(test_split),
        "beam_words": len(beam_words),
        **{f"greedy_{k}": greedy[k] for k in rates},
        **{f"beam_{k}": beam[k] for k in rates},
        **{f"greedy_beam_words_{k}": greedy_there[k] for k in rates},
        "greedy_errors": errors_of(greedy, test_split),
        "trials": TRIALS,
    }
    if record:
        print(f"wrote {rec.finish(**metrics)}")
    return {"curve": rec.curve, "metrics": metrics}


def first_losses(name: str, n_points: int = 1) -> tuple[list[float], list[float]]:
    """Re-run the first ``n_points * log_every`` steps of the recorded run ``name``; return the
    recorded and the re-computed mean training losses of those ``n_points`` logs."""
    from nlpcourse.data import cmudict_split

    record = load_record(name)
    config = record["config"]
    recorded = [p["train_loss"] for p in record["curve"]][:n_points]
    train_split, _, _ = cmudict_split()
    model, src, tgt = build(config, train_split)
    again = train(
        model, s2s.g2p_pairs(train_split, src, tgt), config, n_points * config["log_every"]
    )
    return recorded, again


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m nlpcourse.transformer_runs")
    parser.add_argument("config", choices=sorted(CONFIGS))
    add_run_options(parser)
    run_and_print(run_recorded, parser.parse_args(argv), width=32, leave_out={"greedy_errors"})


if __name__ == "__main__":
    main()
