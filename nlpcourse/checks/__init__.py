"""Exercise checks: a student's function against the course's answer, with messages for students.

Every graded test cell of an exercise is one call such as ``check_count_ngrams(count_ngrams)``
(visible) and ``check_count_ngrams(count_ngrams, hidden=True)`` (hidden: more, larger, randomised
cases). The machinery (cases, expected answers, known mistakes, the one tolerance policy, the
conversion of answers to plain values, the one place a student's function is called) is in
:mod:`nlpcourse.checks.core`, whose docstring documents it; the topic modules
(:mod:`nlpcourse.checks.ngram`, :mod:`nlpcourse.checks.hmm`, :mod:`nlpcourse.checks.rnn`) hold
only their cases, answers and mistakes. The names below are importable from here as before.
"""

from nlpcourse.checks.core import (
    ATOL,
    RTOL,
    Case,
    CheckFailed,
    Expected,
    Mistake,
    NotPlainAnswer,
    answer_table,
    call_student,
    close,
    compare_arrays,
    compare_counts,
    compare_exact,
    compare_numbers,
    compare_scores,
    n_random,
    name_mistake,
    name_mistakes,
    np_rng,
    py_rng,
    run_check,
    same_answer,
    same_on_keys,
    show,
    to_plain,
    use_caller,
    with_args,
)

__all__ = [
    "ATOL",
    "RTOL",
    "Case",
    "CheckFailed",
    "Expected",
    "Mistake",
    "NotPlainAnswer",
    "answer_table",
    "call_student",
    "close",
    "compare_arrays",
    "compare_counts",
    "compare_exact",
    "compare_numbers",
    "compare_scores",
    "n_random",
    "name_mistake",
    "name_mistakes",
    "np_rng",
    "py_rng",
    "run_check",
    "same_answer",
    "same_on_keys",
    "show",
    "to_plain",
    "use_caller",
    "with_args",
]
