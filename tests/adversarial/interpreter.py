"""Submissions that tamper with their own interpreter, fake their answers or call the reference,
call a helper of the package that is not marked as the reference (issue 40 §2), or write floods
of pickle opcodes to the worker's pipe themselves (issue 40 §3).

In a student's kernel (and under ``nbgrader autograde``) the test cells run in the interpreter the
submission has tampered with, so several of these pass there (``plain=()``: the attack works in a
plain process). Graded with the checks in the grader's process, they change nothing: the tampered
interpreter is the worker's, and the reference there refuses whatever way it is reached.
"""

from __future__ import annotations

from . import ALL, FLAGGED, GRADED, SAME, Kind
from .notebooks import maker, replaced, wrapped

NG, HMM = "01-ngrams", "02-hmm"
WRONG = "return None"

PATCH_CHECKS = '''

def _patch_checks():
    """Make every check of nlpcourse.checks pass, wherever it is imported from."""
    import sys

    for name, module in list(sys.modules.items()):
        if name.startswith("nlpcourse.checks"):
            for attr in list(vars(module)):
                if attr.startswith(("check_", "compare_", "run_check", "call_student")):
                    setattr(module, attr, lambda *args, **kwargs: "")


try:
    import nlpcourse.checks.ngram  # noqa: F401
except ImportError:
    pass
_patch_checks()
'''

PATCH_BUILTINS = """

import builtins
import math

import numpy

builtins.abs = lambda x: 0
math.isclose = lambda *args, **kwargs: True
math.isnan = lambda x: False
math.isfinite = lambda x: True
numpy.allclose = lambda *args, **kwargs: True
numpy.isclose = lambda *args, **kwargs: numpy.True_
numpy.array_equal = lambda *args, **kwargs: True
numpy.testing.assert_allclose = lambda *args, **kwargs: None
"""

INPUT_TRANSFORMER = """

try:
    _shell = get_ipython()
except NameError:
    _shell = None
if _shell is not None:  # every later cell, the test cells included, becomes `pass`
    _shell.input_transformers_cleanup.append(lambda lines: ["pass\\n"])
    _shell.input_transformers_post.append(lambda lines: ["pass\\n"])
"""

# Every later `from nlpcourse.checks... import check_x` gets a check that passes anything.
IMPORT_HOOK = '''

import importlib.machinery
import sys
import types


class _FakeChecks:
    """A meta path finder that serves nlpcourse.checks.* as modules of passing checks."""

    def find_spec(self, name, path=None, target=None):
        if name == "nlpcourse.checks" or name.startswith("nlpcourse.checks."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = lambda attr: (lambda *args, **kwargs: None)
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _FakeChecks())
for _name in [n for n in sys.modules if n.startswith("nlpcourse.checks")]:
    del sys.modules[_name]
'''

FAKE_FLOAT = """
class Anything(float):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __sub__(self, other):
        return 0.0

    __rsub__ = __sub__
    __hash__ = float.__hash__

    def __abs__(self):
        return 0.0

return Anything(0.0)
"""

FAKE_DICT = """
class AllCounts(dict):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def get(self, key, default=None):
        return 1

    def __getitem__(self, key):
        return 1

    __hash__ = None

return AllCounts()
"""

FAKE_ARRAY = """
import numpy as np


class Agrees(np.ndarray):
    def __eq__(self, other):
        return np.ones(np.shape(other), dtype=bool)

    def __sub__(self, other):
        return np.zeros(np.shape(other))

    __rsub__ = __sub__


log_emit = args[2]
return np.zeros(np.shape(log_emit)).view(Agrees)
"""

NAN = 'return float("nan")'
NAN_SCORE = """
path, score = _honest(*args, **kwargs)
return path, float("nan")
"""

CALL_REFERENCE = """
from nlpcourse.ngram import count_ngrams as reference

return reference(*args, **kwargs)
"""

# The code of every function of nlpcourse.hmm, saved at top level before any check switched the
# reference off, put back inside the check. (The guard once wrapped each reference and was
# bypassed through the wrapper's closure, ``f.__closure__[0].cell_contents``; it now swaps the code
# itself, so the saved code is what the closure was.)
SAVED_CODE_TOP = """

import types

import nlpcourse.hmm

_saved = [
    (f, f.__code__) for f in vars(nlpcourse.hmm).values() if isinstance(f, types.FunctionType)
]
"""
SAVED_CODE = """
for function, code in _saved:
    function.__code__ = code
return nlpcourse.hmm.forward(*args, **kwargs)
"""

RELOAD = """
import importlib

import nlpcourse.hmm

module = importlib.reload(nlpcourse.hmm)
return module.viterbi(*args, **kwargs)
"""

# The package's source, read from the package (or from the repository, if it can be seen), run
# again with the decorator that registers the reference with the guard removed.
SOURCE_TEMPLATE = """
import inspect
import sys
import types

import nlpcourse.hmm

try:
    with open({path!r}) as f:
        text = f.read()
except OSError:
    text = inspect.getsource(nlpcourse.hmm)
text = "\\n".join(line for line in text.splitlines() if line.strip() != "@reference")
module = types.ModuleType("stolen_hmm")
sys.modules["stolen_hmm"] = module
exec(compile(text, "stolen_hmm.py", "exec"), module.__dict__)
return module.forward_backward(*args, **kwargs)
"""

# The guard's saved originals put back: the registry maps each reference to its own code.
RESTORE_ORIGINALS = """
import nlpcourse.guard
import nlpcourse.hmm

for entry in list(vars(nlpcourse.guard).get("_registry", {}).values()):
    function, own_code = entry[0], entry[1]
    function.__code__ = own_code
return nlpcourse.hmm.tagging_accuracy(*args, **kwargs)
"""


# Issue 40 §2: a part whose body only calls a function of the package that is not marked
# @reference (kn_prob computes Kneser-Ney of any order) earned 3/3 by both routes.
CALL_UNMARKED = """
from nlpcourse.ngram import kn_prob

return kn_prob(*args, **kwargs)
"""

# Issue 40 §3: a message written to the pipe by the student's code, of pickle opcodes that the old
# grader's unpickler charged nothing for (MEMOIZE: 11.4 MiB grew the grader by 1,335 MiB; DUP and
# POP: 1.36 s per 7.6 MiB). The grader reads no pickle from a worker now: the part ends, flagged.
PIPE_FLOOD = """
import os
import struct
import sys
import time

data = b"\\x80\\x04]" + {ops!r} * {n} + b"."
os.write(sys.modules["__main__"].PIPE.fd_out, struct.pack(">Q", len(data)) + data)
time.sleep(30)
"""


def source_bypass(target) -> dict[str, str]:
    path = str(target.repo / "nlpcourse" / "hmm.py")
    return {
        "forward_backward": replaced(HMM, "forward_backward", SOURCE_TEMPLATE.format(path=path))
    }


KINDS = [
    Kind(
        "monkeypatched-checks",
        NG,
        "count_ngrams wrong; the cell replaces every function of nlpcourse.checks",
        maker(NG, {"count_ngrams": replaced(NG, "count_ngrams", WRONG, top=PATCH_CHECKS)}),
        broken=("count_ngrams",),
        plain=(),
    ),
    Kind(
        "monkeypatched-builtins",
        NG,
        "mle_prob answers 0.5; abs, math.isclose, numpy.allclose... patched to agree",
        maker(NG, {"mle_prob": replaced(NG, "mle_prob", "return 0.5", top=PATCH_BUILTINS)}),
        broken=("mle_prob",),
        plain=(),
    ),
    Kind(
        "input-transformer",
        NG,
        "kn_bigram_prob wrong; the last cell turns every later cell into `pass`",
        maker(NG, {"kn_bigram_prob": replaced(NG, "kn_bigram_prob", WRONG, top=INPUT_TRANSFORMER)}),
        broken=("kn_bigram_prob",),
        plain=SAME,
    ),
    Kind(
        "import-hook",
        HMM,
        "every answer wrong; a meta path finder serves fake nlpcourse.checks modules",
        maker(
            HMM,
            {
                "addk_tables": replaced(HMM, "addk_tables", WRONG, top=IMPORT_HOOK),
                "forward": replaced(HMM, "forward", WRONG),
                "viterbi": replaced(HMM, "viterbi", WRONG),
                "forward_backward": replaced(HMM, "forward_backward", WRONG),
                "tagging_accuracy": replaced(HMM, "tagging_accuracy", WRONG),
            },
        ),
        broken=ALL,
        statuses=GRADED,
        plain=(),
    ),
    Kind(
        "equality-faking",
        NG,
        "count_ngrams, mle_prob return a dict and a float subclass equal to anything",
        maker(
            NG,
            {
                "count_ngrams": replaced(NG, "count_ngrams", FAKE_DICT),
                "mle_prob": replaced(NG, "mle_prob", FAKE_FLOAT),
            },
        ),
        broken=("count_ngrams", "mle_prob"),
        plain=SAME,
    ),
    Kind(
        "equality-faking-array",
        HMM,
        "forward_backward returns an ndarray subclass equal to anything",
        maker(HMM, {"forward_backward": replaced(HMM, "forward_backward", FAKE_ARRAY)}),
        broken=("forward_backward",),
        plain=SAME,
    ),
    Kind(
        "nan",
        HMM,
        "forward answers NaN; viterbi the right path with a NaN score",
        maker(
            HMM,
            {
                "forward": replaced(HMM, "forward", NAN),
                "viterbi": wrapped(HMM, "viterbi", NAN_SCORE),
            },
        ),
        broken=("forward", "viterbi"),
        plain=SAME,
    ),
    Kind(
        "calls-reference",
        NG,
        "count_ngrams calls nlpcourse.ngram.count_ngrams",
        maker(NG, {"count_ngrams": replaced(NG, "count_ngrams", CALL_REFERENCE)}),
        broken=("count_ngrams",),
        plain=SAME,
    ),
    Kind(
        "guard-saved-code",
        HMM,
        "forward puts back the code of the reference saved before the check, and calls it",
        maker(HMM, {"forward": replaced(HMM, "forward", SAVED_CODE, top=SAVED_CODE_TOP)}),
        broken=("forward",),
        plain=(),
    ),
    Kind(
        "guard-reload",
        HMM,
        "viterbi reloads nlpcourse.hmm inside the check and calls its viterbi",
        maker(HMM, {"viterbi": replaced(HMM, "viterbi", RELOAD)}),
        broken=("viterbi",),
        plain=SAME,
    ),
    Kind(
        "guard-package-source",
        HMM,
        "forward_backward runs the package's source again without @reference",
        maker(HMM, source_bypass),
        broken=("forward_backward",),
        plain=(),
    ),
    Kind(
        "guard-restore-originals",
        HMM,
        "tagging_accuracy puts the guard's saved original code back, then calls the reference",
        maker(HMM, {"tagging_accuracy": replaced(HMM, "tagging_accuracy", RESTORE_ORIGINALS)}),
        broken=("tagging_accuracy",),
        plain=(),
    ),
    Kind(
        "calls-unmarked-helper",
        NG,
        "kn_bigram_prob calls nlpcourse.ngram.kn_prob, a helper not marked @reference",
        maker(NG, {"kn_bigram_prob": replaced(NG, "kn_bigram_prob", CALL_UNMARKED)}),
        broken=("kn_bigram_prob",),
        plain=SAME,
    ),
    Kind(
        "pipe-memoize-flood",
        NG,
        "mle_prob writes 8 MiB of pickle MEMOIZE opcodes to the worker's pipe as its answer",
        maker(NG, {"mle_prob": replaced(NG, "mle_prob", PIPE_FLOOD.format(ops=b"\x94", n=2**23))}),
        broken=("mle_prob",),
        statuses=FLAGGED,
        plain=SAME,
    ),
    Kind(
        "pipe-dup-pop-flood",
        HMM,
        "forward writes 8 MiB of pickle DUP and POP opcodes to the worker's pipe as its answer",
        maker(HMM, {"forward": replaced(HMM, "forward", PIPE_FLOOD.format(ops=b"20", n=2**22))}),
        broken=("forward",),
        statuses=FLAGGED,
        plain=SAME,
    ),
]
