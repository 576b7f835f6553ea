"""The command line that the recorded-run modules share (:mod:`nlpcourse.seq2seq_runs`,
:mod:`nlpcourse.transformer_runs`): the options every recorded run takes, and the run with its
metrics printed one to a line."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection
from typing import Any


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """``--steps``, ``--no-record`` and ``--threads``, as every recorded run takes them."""
    parser.add_argument("--steps", type=int, default=None, help="override the number of steps")
    parser.add_argument("--no-record", action="store_true", help="do not write the record")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")


def run_and_print(
    run_recorded: Callable[..., dict[str, Any]],
    args: argparse.Namespace,
    width: int,
    leave_out: Collection[str] = (),
) -> None:
    """``run_recorded(args.config, ...)`` with the options of :func:`add_run_options`, then each
    metric but those in ``leave_out`` on its own line, its name padded to ``width``."""
    result = run_recorded(args.config, args.steps, record=not args.no_record, threads=args.threads)
    for key, value in result["metrics"].items():
        if key not in leave_out:
            print(f"{key:{width}s} {value}")
