"""The recorded long training run of chapter 5's grapheme-to-phoneme model.

A chapter executes in about two minutes, too little for the G2P model to reach its best error
rates, so the long run is made by this seeded command and recorded with :mod:`nlpcourse.records`
as ``book/results/seq2seq_<name>.json`` (DESIGN.md, "Long training runs")::

    python -m nlpcourse.seq2seq train --config g2p --threads 2   # writes seq2seq_g2p.json

(``python -m nlpcourse.seq2seq_runs`` is the same command.)

A configuration (:class:`RunConfig`) has three parts: the model (:class:`ModelConfig`, the
arguments of :class:`nlpcourse.seq2seq.Seq2Seq`), its training (:class:`TrainConfig`, the
arguments of :func:`nlpcourse.seq2seq.train`) and its evaluation (:class:`EvalConfig`). A record
stores it flat, one dictionary (:meth:`RunConfig.flat`, :meth:`RunConfig.from_flat`).
``tests/test_seq2seq.py`` re-runs the first ``log_every`` steps and checks that they reproduce the
recorded loss, so a record cannot be typed by hand.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from nlpcourse.runs_cli import add_run_options, run_and_print
from nlpcourse.seq2seq import Pron, Seq2Seq, Vocab, evaluate, g2p_pairs, g2p_vocabs, train
from nlpcourse.training import Logger

if TYPE_CHECKING:
    from nlpcourse.records import Recorder

COMMAND = "python -m nlpcourse.seq2seq train"  # what a record names (nlpcourse.seq2seq runs main)


@dataclass(frozen=True)
class ModelConfig:
    """The model: the arguments of :class:`nlpcourse.seq2seq.Seq2Seq` but the vocabularies."""

    attention: str
    cell: str
    enc_layers: int
    E: int
    H: int
    dropout: float
    placement: str = "luong"


@dataclass(frozen=True)
class TrainConfig:
    """Its training: :func:`nlpcourse.seq2seq.train`'s arguments (the learning rate decays
    linearly over all ``steps``; ``seed`` also seeds the model's initial parameters)."""

    batch_size: int
    lr: float
    clip: float
    seed: int
    steps: int
    max_minutes: float
    log_every: int


@dataclass(frozen=True)
class EvalConfig:
    """Its evaluation: how many validation words are decoded at each logging point, and the
    beam search on the test split."""

    valid_words: int
    beam_size: int
    length_penalty: float


@dataclass(frozen=True)
class RunConfig:
    model: ModelConfig
    training: TrainConfig
    evaluation: EvalConfig

    def flat(self) -> dict[str, Any]:
        """One dictionary of every setting, as a record stores it."""
        parts = (self.model, self.training, self.evaluation)
        return {k: v for part in parts for k, v in dataclasses.asdict(part).items()}

    @classmethod
    def from_flat(cls, config: dict[str, Any]) -> RunConfig:
        """The configuration a record stores (:meth:`flat`); unknown keys are an error."""
        parts = (ModelConfig, TrainConfig, EvalConfig)
        known = {f.name for part in parts for f in dataclasses.fields(part)}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(f"unknown configuration keys {unknown}; known: {sorted(known)}")

        def part(kind: Any) -> Any:
            names = {f.name for f in dataclasses.fields(kind)}
            return kind(**{k: v for k, v in config.items() if k in names})

        return cls(part(ModelConfig), part(TrainConfig), part(EvalConfig))


CONFIGS: dict[str, RunConfig] = {
    # the recorded run of the chapter (book/results/seq2seq_g2p.json), trained with
    # `--threads 2`: LSTM cells, a two-layer bidirectional encoder and the bilinear score (less
    # work per step than the additive one: no S x T grid, as chapter 5 counts), dropout and a
    # linear decay of the learning rate over all its steps, which are as many as two CPU cores
    # train in about 30 minutes; max_minutes stops it if a machine is slower
    "g2p": RunConfig(
        ModelConfig(attention="bilinear", cell="lstm", enc_layers=2, E=64, H=256, dropout=0.2),
        TrainConfig(batch_size=128, lr=4e-3, clip=1.0, seed=0, steps=24000, max_minutes=30.0,
                    log_every=100),
        EvalConfig(valid_words=300, beam_size=5, length_penalty=0.0),
    ),
}  # fmt: skip


def build(config: RunConfig, train_split: dict[str, list[Pron]]) -> tuple[Seq2Seq, Vocab, Vocab]:
    """The vocabularies of ``train_split`` and a model of ``config.model`` seeded with
    ``config.training.seed``."""
    src, tgt = g2p_vocabs(train_split)
    torch.manual_seed(config.training.seed)
    model = Seq2Seq(len(src), len(tgt), **dataclasses.asdict(config.model))
    return model, src, tgt


def train_config(
    model: Seq2Seq,
    pairs: Sequence[tuple[list[int], list[int]]],
    config: TrainConfig,
    steps: int | None = None,
    logger: Logger | None = None,
    show_progress: bool = False,
) -> list[float]:
    """:func:`nlpcourse.seq2seq.train` with the settings of ``config`` (the first ``steps`` of
    them if given, on the same learning-rate schedule), as the recorded command trains."""
    return train(
        model, pairs, config.steps if steps is None else steps, config.batch_size, config.lr,
        config.clip, config.seed, config.log_every, logger, show_progress=show_progress,
        max_minutes=config.max_minutes, decay_over=config.steps,
    )  # fmt: skip


def validation_sample(valid_split: dict[str, list[Pron]], n: int) -> dict[str, list[Pron]]:
    """The ``n`` words a recorded run validates on: every ``k``-th word of the validation split
    in alphabetical order (``k = len // n``), so that they spread over the alphabet."""
    every = max(len(valid_split) // n, 1)
    return dict(sorted(valid_split.items())[::every][:n])


class _Validation:
    """The recorded run's logger: at each logging point, the validation WER and PER of greedy
    decoding beside the training loss, into the record."""

    def __init__(
        self, model: Seq2Seq, valid: dict[str, list[Pron]], src: Vocab, tgt: Vocab, rec: Recorder
    ):
        self.model, self.valid, self.src, self.tgt, self.rec = model, valid, src, tgt, rec

    def log(self, step: int, **values: Any) -> None:
        result = evaluate(self.model, self.valid, self.src, self.tgt)
        self.rec.log(
            step, train_loss=values["train_loss"], valid_wer=result["wer"], valid_per=result["per"]
        )


def run_recorded(
    name: str, steps: int | None = None, record: bool = True, threads: int | None = 2
) -> dict[str, Any]:
    """Train the configuration ``CONFIGS[name]`` (for ``steps`` steps if given), log the training
    loss and validation WER/PER every ``log_every`` steps, evaluate on the test split and, if
    ``record``, write ``book/results/seq2seq_<name>.json``. Returns the curve and metrics."""
    from nlpcourse.data import cmudict_split
    from nlpcourse.records import Recorder

    if name not in CONFIGS:
        raise ValueError(f"unknown config {name!r}; known: {sorted(CONFIGS)}")
    if threads:
        torch.set_num_threads(threads)
    # as the attention sharpens, some of its weights fall below float32's smallest normal number
    # (about 1e-38); x86 CPUs compute with such denormal numbers slowly, so they are set to 0
    torch.set_flush_denormal(True)
    config = CONFIGS[name]
    if steps is not None:
        config = dataclasses.replace(
            config, training=dataclasses.replace(config.training, steps=steps)
        )
    train_split, valid_split, test_split = cmudict_split()
    model, src, tgt = build(config, train_split)
    pairs = g2p_pairs(train_split, src, tgt)
    valid = validation_sample(valid_split, config.evaluation.valid_words)
    rec = Recorder(
        f"seq2seq_{name}", f"{COMMAND} --config {name} --threads {threads}", config.flat()
    )
    start = time.perf_counter()
    train_config(model, pairs, config.training, logger=_Validation(model, valid, src, tgt, rec),
                 show_progress=True)  # fmt: skip
    minutes = (time.perf_counter() - start) / 60
    greedy = evaluate(model, test_split, src, tgt, method="greedy")
    beam = evaluate(
        model, test_split, src, tgt, method="beam", beam_size=config.evaluation.beam_size,
        length_penalty=config.evaluation.length_penalty,
    )  # fmt: skip
    metrics = {
        "steps": rec.curve[-1]["step"],
        "minutes_with_validation": round(minutes, 2),
        "test_words": len(test_split),
        **{f"greedy_{k}": greedy[k] for k in ("wer", "per", "wer_no_stress", "per_no_stress")},
        **{f"beam_{k}": beam[k] for k in ("wer", "per", "wer_no_stress", "per_no_stress")},
    }
    if record:
        path = rec.finish(**metrics)
        print(f"wrote {path}")
    return {"curve": rec.curve, "metrics": metrics}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m nlpcourse.seq2seq")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train", help="train a recorded configuration and write its record")
    p.add_argument("--config", default="g2p", choices=sorted(CONFIGS))
    add_run_options(p)
    run_and_print(run_recorded, parser.parse_args(argv), width=20)


if __name__ == "__main__":
    main()
