"""Right answers with noise or in an unusual form: every part scores its points.

Warnings, logging and prints never cost points; neither does a changed working directory or a
global random seed (the checks draw their cases from their own seeded generators); any reasonable
form of a right answer is accepted (``Fraction``, numpy scalars, float32, ``defaultdict`` with float
counts, lists for tuples and arrays).
"""

from __future__ import annotations

from . import GRADED, SAME, Kind
from .notebooks import maker, wrapped

NG, HMM = "01-ngrams", "02-hmm"

WARNINGS = """
import logging
import sys
import warnings

import numpy as np

warnings.warn("a warning from the student's code")
logging.warning("a logging warning")
print("to stderr", file=sys.stderr)
np.log(np.zeros(1))  # RuntimeWarning: divide by zero
np.float64(1.0) / 0.0  # RuntimeWarning
"""
WARNINGS_TOP = """
import warnings

warnings.simplefilter("always")
warnings.warn("a warning at top level", DeprecationWarning)
"""

CHDIR_TOP = """
import os

os.chdir("/")
"""
CHDIR = """
import os
import tempfile

os.chdir(tempfile.gettempdir())
"""

SEEDS_TOP = """
import random

import numpy as np

random.seed(0)
np.random.seed(0)
"""
SEEDS = """
import random

import numpy as np

random.seed(12345)
np.random.seed(12345)
random.random()
np.random.rand(100)
"""

FORMS_NGRAMS = {
    # counts as a defaultdict of floats (whole values)
    "count_ngrams": """
from collections import defaultdict

counts = defaultdict(float)
for ngram, c in _honest(*args, **kwargs).items():
    counts[ngram] += float(c)
return counts
""",
    "mle_prob": """
from fractions import Fraction

counts, context, word = args
context = tuple(context)
c_context = sum(c for ngram, c in counts.items() if ngram[:-1] == context)
if c_context == 0:
    return 0
return Fraction(counts.get(context + (word,), 0)) / Fraction(c_context)
""",
    "addk_prob": """
import numpy as np

return np.float64(_honest(*args, **kwargs))
""",
    "perplexity": """
import numpy as np

return np.float32(_honest(*args, **kwargs))
""",
    "continuation_prob": """
from decimal import Decimal

return Decimal(repr(_honest(*args, **kwargs)))
""",
}
FORMS_HMM = {
    # lists of lists instead of arrays
    "addk_tables": """
return [table.tolist() for table in _honest(*args, **kwargs)]
""",
    "forward": """
import numpy as np

return np.float64(_honest(*args, **kwargs))
""",
    # a list [path as a numpy array, score as a numpy scalar] instead of a tuple
    "viterbi": """
import numpy as np

path, score = _honest(*args, **kwargs)
return [np.array(path, dtype=np.int32), np.float64(score)]
""",
    "forward_backward": """
return _honest(*args, **kwargs).astype("float32")
""",
    "tagging_accuracy": """
from collections import OrderedDict

import numpy as np

return OrderedDict((k, np.float64(v)) for k, v in _honest(*args, **kwargs).items())
""",
}


def forms(assignment: str, bodies: dict[str, str]):
    return maker(assignment, {sid: wrapped(assignment, sid, body) for sid, body in bodies.items()})


KINDS = [
    Kind(
        "warnings-ngrams",
        NG,
        "every part right; count_ngrams warns, logs, prints to stderr, divides by zero",
        maker(NG, {"count_ngrams": wrapped(NG, "count_ngrams", WARNINGS, top=WARNINGS_TOP)}),
        statuses=GRADED,
        plain=SAME,
    ),
    Kind(
        "warnings-hmm",
        HMM,
        "every part right; forward and viterbi warn, log and print to stderr",
        maker(
            HMM,
            {
                "forward": wrapped(HMM, "forward", WARNINGS, top=WARNINGS_TOP),
                "viterbi": wrapped(HMM, "viterbi", WARNINGS),
            },
        ),
        statuses=GRADED,
        plain=SAME,
    ),
    Kind(
        "changes-directory",
        HMM,
        "every part right; the cells and forward_backward change the working directory",
        maker(
            HMM,
            {
                "addk_tables": wrapped(HMM, "addk_tables", "", top=CHDIR_TOP),
                "forward_backward": wrapped(HMM, "forward_backward", CHDIR),
            },
        ),
        statuses=GRADED,
        plain=SAME,
    ),
    Kind(
        "global-seeds",
        HMM,
        "every part right; random and numpy seeded at top level and in every viterbi call",
        maker(HMM, {"viterbi": wrapped(HMM, "viterbi", SEEDS, top=SEEDS_TOP)}),
        statuses=GRADED,
        plain=SAME,
    ),
    Kind(
        "odd-forms-ngrams",
        NG,
        "right answers as defaultdict(float), Fraction, numpy float64 and float32, Decimal",
        forms(NG, FORMS_NGRAMS),
        statuses=GRADED,
        plain=SAME,
    ),
    Kind(
        "odd-forms-hmm",
        HMM,
        "right answers as lists of lists, [array, numpy scalar], float32 arrays, OrderedDict",
        forms(HMM, FORMS_HMM),
        statuses=GRADED,
        plain=SAME,
    ),
]
