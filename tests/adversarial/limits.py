"""Submissions that break a limit: loops, bombs, exits, huge output.

A part whose function breaks a limit scores 0; the other parts of the same notebook are still
graded (the worker is restarted without what broke). Bombs are bounded: if a limit were missing,
the machine would carry 3 GiB or 400 sleeping processes for a few seconds, and the part would
score its points, so the missing limit shows as a wrong grade instead of a dead machine.
"""

from __future__ import annotations

from . import FLAGGED, GRADED, Kind
from .notebooks import canary_line, honest_code, maker, replaced, wrapped

NG, HMM = "01-ngrams", "02-hmm"

LOOP = """
while True:
    pass
"""

IGNORE_SIGNALS_AND_LOOP = """
import signal
for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGALRM", "SIGXCPU", "SIGUSR1", "SIGUSR2"):
    try:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    except (ValueError, OSError):
        pass  # not the main thread
while True:
    try:
        while True:
            pass
    except BaseException:
        pass
"""

SLEEP = """
import time
time.sleep(3600)
"""

MEMORY_BOMB = """
chunks = []
for _ in range(24):  # 24 x 128 MiB = 3 GiB at most: above the memory limit, and bounded
    chunks.append(b"x" * (128 * 2**20))
"""

# Once per process (a global flag), so that without a process limit there would be 400 sleeping
# processes in all, for 5 seconds.
PROCESS_BOMB = """
import os
import time
if not _FORKED:
    _FORKED.append(True)
    for _ in range(400):  # above the 256-process limit, and bounded
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
"""

HUGE_OUTPUT_TOP = """
import sys
print("x" * 20_000_000)
sys.stderr.write("e" * 5_000_000)
"""

# Messages written to the grader's pipe by a cell (issue 40 §3): a forged "ready" (every part
# read "SystemError", unflagged) and a forged "the setup cell is running" (the cell then had the
# notebook's time, not a cell's). Either stops that cell only, with a reason and the flag.
FORGED_READY = """
import __main__
__main__.PIPE.send(("ready", {"count_ngrams": "callable"}, 0.0))
"""

FORGED_SETUP = """
import __main__
__main__.PIPE.send(("cell", 0, "start", None, 0.0))
"""

KINDS = [
    Kind(
        "forged-ready",
        NG,
        "the count_ngrams cell writes a forged 'ready' message to the grader's pipe",
        maker(
            NG,
            {
                "count_ngrams": honest_code(NG)["count_ngrams"]
                + "\n\n"
                + canary_line(NG, "count_ngrams")
                + FORGED_READY
            },
        ),
        broken=("count_ngrams",),
        statuses=FLAGGED,
    ),
    Kind(
        "forged-setup-cell",
        NG,
        "the mle_prob cell claims the setup cell is running, then ignores signals and loops",
        maker(
            NG,
            {
                "mle_prob": honest_code(NG)["mle_prob"]
                + "\n\n"
                + canary_line(NG, "mle_prob")
                + FORGED_SETUP
                + IGNORE_SIGNALS_AND_LOOP
            },
        ),
        broken=("mle_prob",),
        statuses=FLAGGED,
    ),
    Kind(
        "loop-in-function",
        NG,
        "count_ngrams never returns",
        maker(NG, {"count_ngrams": replaced(NG, "count_ngrams", LOOP)}),
        broken=("count_ngrams",),
        statuses=FLAGGED,
    ),
    Kind(
        "loop-at-top-level",
        NG,
        "the mle_prob cell defines mle_prob, then loops forever at top level: interrupted at the "
        "cell's limit, mle_prob is kept, as nbgrader's kernel keeps it (issue 28)",
        maker(
            NG,
            {"mle_prob": honest_code(NG)["mle_prob"] + "\n\n" + canary_line(NG, "mle_prob") + LOOP},
        ),
        statuses=FLAGGED,
    ),
    Kind(
        "loop-ignoring-signals",
        NG,
        "addk_prob ignores SIGINT, SIGTERM, SIGXCPU..., catches KeyboardInterrupt, loops",
        maker(NG, {"addk_prob": replaced(NG, "addk_prob", IGNORE_SIGNALS_AND_LOOP)}),
        broken=("addk_prob",),
        statuses=FLAGGED,
    ),
    Kind(
        "sleeps-forever",
        HMM,
        "forward_backward sleeps an hour (no CPU used: only a wall-clock limit stops it)",
        maker(HMM, {"forward_backward": replaced(HMM, "forward_backward", SLEEP)}),
        broken=("forward_backward",),
        statuses=FLAGGED,
    ),
    Kind(
        "memory-bomb",
        NG,
        "perplexity allocates up to 3 GiB before answering",
        maker(NG, {"perplexity": wrapped(NG, "perplexity", MEMORY_BOMB)}),
        broken=("perplexity",),
        statuses=GRADED | FLAGGED,
    ),
    Kind(
        "process-bomb",
        NG,
        "continuation_prob forks 400 sleeping processes before answering",
        maker(
            NG,
            {
                "continuation_prob": "_FORKED = []\n\n"
                + wrapped(NG, "continuation_prob", PROCESS_BOMB)
            },
        ),
        broken=("continuation_prob",),
        statuses=GRADED | FLAGGED,
    ),
    Kind(
        "sys-exit-in-function",
        NG,
        "count_ngrams calls sys.exit(0)",
        maker(NG, {"count_ngrams": replaced(NG, "count_ngrams", "import sys\nsys.exit(0)")}),
        broken=("count_ngrams",),
        statuses=GRADED | FLAGGED,
    ),
    Kind(
        "os-exit-in-function",
        NG,
        "mle_prob calls os._exit(0): the worker dies mid-call",
        maker(NG, {"mle_prob": replaced(NG, "mle_prob", "import os\nos._exit(0)")}),
        broken=("mle_prob",),
        statuses=FLAGGED,
    ),
    Kind(
        "raise-system-exit",
        HMM,
        "viterbi raises SystemExit",
        maker(HMM, {"viterbi": replaced(HMM, "viterbi", 'raise SystemExit("bye")')}),
        broken=("viterbi",),
        statuses=GRADED | FLAGGED,
    ),
    Kind(
        "huge-output",
        NG,
        "a right notebook that prints 20 MB at top level and 1 MB in every call",
        maker(
            NG,
            {"addk_prob": wrapped(NG, "addk_prob", 'print("y" * 1_000_000)', top=HUGE_OUTPUT_TOP)},
        ),
        statuses=GRADED | FLAGGED,
    ),
]
