"""The one training loop of the book's neural models (chapters 4, 5 and 6).

:func:`train_loop` is what every model's training shares: Adam, a learning-rate schedule, the
gradient norm clipped (Pascanu, Mikolov & Bengio 2013), a progress bar, a time limit and logging.
What differs between models is how a batch is drawn and scored, so the caller passes that in as
a function, ``batch_loss(step) -> (loss, weight)``: :func:`nlpcourse.lm.train_lm` reads a stream
of words (chapters 4 and 6) and :func:`nlpcourse.seq2seq.train` shuffled word pairs (chapter 5).
The loop itself draws no random number, so a seeded caller gets the same run every time.

Logging follows one protocol, :class:`Logger` (a :class:`nlpcourse.records.Recorder` is one):
``logger.log(step, **values)``. Every ``log_every`` steps and after the last, the loop logs
``train_loss`` (the mean loss of the steps since the previous point, each step's loss weighted by
its ``weight``), ``seconds`` (training time so far) and ``seen`` (the sum of the weights so far);
the logger's own time (an evaluation, say) is not counted as training time, and the time limit
``max_minutes`` is checked against training time at these points. After each of the first
``log_first`` steps it also logs that step's ``train_loss`` alone, so that a recorded run's first
losses can be checked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from nlpcourse.progress import progress


class Logger(Protocol):
    def log(self, step: int, **values: Any) -> None: ...


@contextmanager
def evaluating(model: nn.Module) -> Iterator[nn.Module]:
    """``model`` in evaluation mode (no dropout) inside the block, and in the mode it was in
    before afterwards, also when the block raises."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def train_loop(
    model: nn.Module,
    batch_loss: Callable[[int], tuple[Tensor, float]],
    steps: int,
    lr: float,
    clip: float,
    log_every: int,
    logger: Logger | None = None,
    schedule: Callable[[int], float] | None = None,
    log_first: int = 0,
    max_minutes: float | None = None,
    show_progress: bool = False,
) -> list[float]:
    """Train ``model`` for ``steps`` updates (fewer if ``max_minutes`` stops it) and return the
    logged training losses (module docstring).

    Each step ``t`` (from 1): the model in training mode, ``loss, weight = batch_loss(t)`` (a mean
    loss as a scalar tensor), its gradient with the global norm clipped to ``clip``, one Adam step
    with learning rate ``lr * schedule(t)`` (``lr`` without a schedule)."""
    if steps < 1 or log_every < 1:
        raise ValueError(f"steps and log_every must be >= 1, got {steps} and {log_every}")
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    curve: list[float] = []
    interval_loss, seconds = 0.0, 0.0
    interval_weight: float = 0  # sums of the weights: whole numbers stay whole (words)
    seen: float = 0
    updates: Iterable[int] = range(1, steps + 1)
    if show_progress:
        updates = progress(updates, total=steps, desc="training")
    for step in updates:
        tic = time.perf_counter()
        model.train()
        if schedule is not None:
            for group in optimizer.param_groups:
                group["lr"] = lr * schedule(step)
        loss, weight = batch_loss(step)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        value = loss.item()
        interval_loss += value * weight
        interval_weight += weight
        seen += weight
        seconds += time.perf_counter() - tic
        if logger is not None and step <= log_first:
            logger.log(step, train_loss=value)
        if step % log_every == 0 or step == steps:
            curve.append(interval_loss / interval_weight)
            interval_loss, interval_weight = 0.0, 0
            if logger is not None:
                logger.log(step, train_loss=curve[-1], seconds=seconds, seen=seen)
            if max_minutes is not None and seconds >= 60 * max_minutes:
                break
    return curve
