"""The recorded long training runs of the book's neural language models (chapters 4 and 6).

A chapter executes in about two minutes, too little for a neural language model to reach its best
perplexity, so the long runs are made by this seeded command and recorded with
:mod:`nlpcourse.records` under ``book/results/<name>.json`` (DESIGN.md, "Long training runs")::

    python -m nlpcourse.lm_runs transformer       # writes book/results/transformer_lm.json
    python -m nlpcourse.lm_runs transformer --config '{"steps": 200}' --name transformer_lm_try

The data and the perplexity follow chapter 1's conventions exactly, as chapters 4 and 6 do: the
Brown split of :func:`nlpcourse.data.brown_split`, the vocabulary of the training words seen at
least 4 times plus ``</s>`` and ``<unk>`` (:func:`nlpcourse.lm.build_vocab`), every word and every
sentence's ``</s>`` predicted and counted, perplexity over the whole test split.

What makes a CPU run affordable (stated in the record's config): a small model (D = 128, 2
blocks), a short context (T = 64), and an adaptive softmax (Grave et al. 2017) whose head holds the
2,000 most frequent words, so most predictions never touch the other 12,000 output vectors; its
probabilities are exact and normalised, so its perplexity is comparable with a full softmax's.

:func:`first_losses` re-runs the first updates of a recorded command; ``tests/test_records.py``
checks that they reproduce the recorded losses, so a record cannot be typed by hand.

``python -m nlpcourse.lm_runs lstm`` and ``... gru`` train chapter 4's recurrent models
(:class:`nlpcourse.rnn.RNNLM`, one layer of ``H = 512``, dropout 0.3 on the embeddings and the
states, the same adaptive softmax) on the stream in segments of 35 words with the state carried
(truncated BPTT), and evaluate them the same way.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

import torch

from nlpcourse.data import brown_split
from nlpcourse.lm import BENGIO_MIN_COUNT, build_vocab, encode, evaluate_perplexity, train_lm
from nlpcourse.records import Recorder, load_record
from nlpcourse.rnn import RNNLM
from nlpcourse.transformer import TransformerLM

DEFAULTS: dict[str, dict[str, Any]] = {
    "transformer": {
        "D": 128,
        "H": 4,
        "n_layers": 2,
        "D_ff": 512,
        "T": 64,
        "dropout": 0.1,
        "positions": "learned",
        "norm_first": True,
        "cutoffs": [2000, 8000],
        "batch_size": 32,
        "peak_lr": 2e-3,
        "warmup": 200,
        "clip": 1.0,
        "steps": 2000,
        "eval_every": 150,
        "valid_every_nth": 20,
        "max_minutes": 65.0,
        "seed": 0,
        "threads": 2,
    },
}
# chapter 4's recurrent language models (nlpcourse.rnn.RNNLM): one layer, dropout on the
# embeddings and the states (not the recurrence), the same adaptive softmax; read as 32 streams of
# T = 35 words with the state carried between segments (truncated BPTT), evaluated the same way
_RECURRENT = {
    "E": 256,
    "H": 512,
    "T": 35,
    "dropout": 0.3,
    "cutoffs": [2000, 8000],
    "batch_size": 32,
    "peak_lr": 2e-3,
    "warmup": 200,
    "clip": 1.0,
    "steps": 20000,
    "eval_every": 500,
    "valid_every_nth": 20,
    "max_minutes": 58.0,
    "seed": 0,
    "threads": 1,
}
DEFAULTS["lstm"] = {**_RECURRENT, "cell": "lstm"}
DEFAULTS["gru"] = {**_RECURRENT, "cell": "gru"}
NAMES = {"transformer": "transformer_lm", "lstm": "lstm_lm", "gru": "gru_lm"}


def load_data() -> tuple[list[str], list[list[int]], list[list[int]], list[list[int]]]:
    """The vocabulary and the train / valid / test splits as ids (chapter 1's conventions)."""
    train, valid, test = brown_split()
    vocab = build_vocab(train, BENGIO_MIN_COUNT)
    return vocab, encode(train, vocab), encode(valid, vocab), encode(test, vocab)


def build_model(kind: str, config: dict[str, Any], V: int) -> TransformerLM | RNNLM:
    if kind not in DEFAULTS:
        raise ValueError(f"unknown model kind {kind!r}; known: {sorted(DEFAULTS)}")
    if kind != "transformer":
        return RNNLM(
            V, config["E"], config["H"], config["cell"], config["dropout"], config["cutoffs"]
        )
    return TransformerLM(
        V,
        D=config["D"],
        H=config["H"],
        n_layers=config["n_layers"],
        D_ff=config["D_ff"],
        max_len=config["T"],
        dropout=config["dropout"],
        norm_first=config["norm_first"],
        positions=config["positions"],
        cutoffs=config["cutoffs"],
    )


def full_config(kind: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    if kind not in DEFAULTS:
        raise ValueError(f"unknown model kind {kind!r}; known: {sorted(DEFAULTS)}")
    unknown = set(overrides or {}) - set(DEFAULTS[kind])
    if unknown:
        raise ValueError(f"unknown config keys {sorted(unknown)}; known: {sorted(DEFAULTS[kind])}")
    return {**DEFAULTS[kind], **(overrides or {})}


def run(kind: str, overrides: dict[str, Any] | None = None, name: str | None = None) -> dict:
    """Train the ``kind`` model with the default config updated by ``overrides`` and write its
    record ``book/results/<name>.json``. Returns the record's metrics."""
    config = full_config(kind, overrides)
    name = name or NAMES[kind]
    torch.set_num_threads(config["threads"])
    vocab, train_ids, valid_ids, test_ids = load_data()
    model = build_model(kind, config, len(vocab))
    command = f"python -m nlpcourse.lm_runs {kind}"
    if overrides:
        command += f" --config '{json.dumps(overrides)}'"
    rec = _Echo(Recorder(name, command, config))  # each point into the record and on screen
    history = _train(kind, model, config, train_ids, valid_ids[:: config["valid_every_nth"]], rec)
    test_ppl = evaluate_perplexity(model, test_ids, bptt=config["T"], stride=_stride(kind, config))
    metrics: dict[str, Any] = {
        "test_ppl": test_ppl,
        "valid_sample_ppl": history["valid_ppl"][-1],
        "steps": history["step"][-1],
        "train_words": history["words"][-1],
        "train_minutes": history["seconds"][-1] / 60,
        "epochs": history["words"][-1] / (sum(map(len, train_ids)) + len(train_ids)),
        "V": len(vocab),
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    path = rec.recorder.finish(**metrics)
    print(f"wrote {path}: test perplexity {test_ppl:.1f}", file=sys.stderr)
    return metrics


def _stride(kind: str, config: dict[str, Any]) -> int | None:
    """How evaluation reads the text: a transformer in windows of ``T`` overlapping by half, a
    recurrent model as segments with its state carried (no stride)."""
    return config["T"] // 2 if kind == "transformer" else None


def _train(
    kind: str,
    model: TransformerLM | RNNLM,
    config: dict[str, Any],
    train_ids: list[list[int]],
    valid_ids: list[list[int]] | None,
    recorder: Any,
    steps: int | None = None,
) -> dict[str, list[float]]:
    """:func:`nlpcourse.lm.train_lm` with the recorded run's settings: for a transformer,
    windows of ``T`` words in a random order, for a recurrent model the stream in segments of
    ``T`` with the state carried; warm-up, the losses of the first 5 updates logged, no
    evaluation at step 0, validation perplexity read as the test split is (:func:`_stride`)."""
    return train_lm(
        model,
        train_ids,
        valid_ids,
        steps=config["steps"] if steps is None else steps,
        batch_size=config["batch_size"],
        bptt=config["T"],
        lr=config["peak_lr"],
        clip=config["clip"],
        eval_every=config["eval_every"] if steps is None else 10**9,
        seed=config["seed"],
        recorder=recorder,
        warmup=config["warmup"],
        shuffle=kind == "transformer",
        eval_stride=_stride(kind, config),
        eval_at_start=False,
        log_first=5,
        max_minutes=config["max_minutes"],
    )


class _Echo:
    """A recorder that also prints each point it logs."""

    def __init__(self, recorder: Recorder):
        self.recorder = recorder

    def log(self, step: int, **values: float) -> None:
        self.recorder.log(step, **values)
        text = ", ".join(f"{k} {v:.4g}" for k, v in values.items())
        print(f"step {step}: {text}", file=sys.stderr, flush=True)


def first_losses(name: str, n_steps: int = 3) -> tuple[list[float], list[float]]:
    """Re-run the first ``n_steps`` updates of the recorded run ``name``; return the recorded and
    the re-computed training losses of those steps."""
    record = load_record(name)
    kind = record["command"].split()[3]
    config = full_config(kind, record["config"])
    recorded = [p["train_loss"] for p in record["curve"] if p["step"] <= n_steps]
    if len(recorded) < n_steps:
        raise ValueError(f"record {name} holds the losses of {len(recorded)} first steps only")
    vocab, train_ids, _, _ = load_data()
    model = build_model(kind, config, len(vocab))
    again: list[float] = []

    class Collect:
        def log(self, step: int, **values: float) -> None:
            if step <= n_steps:
                again.append(values["train_loss"])

    _train(kind, model, config, train_ids, None, Collect(), steps=n_steps)
    return recorded[:n_steps], again[:n_steps]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=sorted(DEFAULTS))
    parser.add_argument("--config", default="{}", help="JSON object of settings to override")
    parser.add_argument("--name", default=None, help="record name (default: the kind's)")
    args = parser.parse_args(argv)
    overrides = json.loads(args.config)
    if not isinstance(overrides, dict):
        parser.error("--config must be a JSON object, like '{\"steps\": 200}'")
    metrics = run(args.kind, overrides, args.name)
    print(
        json.dumps(
            {k: v for k, v in metrics.items() if not isinstance(v, float) or math.isfinite(v)}
        )
    )


if __name__ == "__main__":
    main()
