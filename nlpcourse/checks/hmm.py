"""Checks for exercise 02-hmm (chapter 2): cases, answers and usual mistakes.

The machinery is :func:`nlpcourse.checks.core.run_check`'s. Where the answers come from: for
:func:`check_forward`, :func:`check_viterbi` and :func:`check_forward_backward` on HMMs small
enough to list every tag sequence (at most ``MAX_PATHS``), from brute-force enumeration
(:func:`nlpcourse.testing.brute_force`), which shares no code with the dynamic programs; on long
sentences, from the reference in :mod:`nlpcourse.hmm`. :func:`check_addk_tables` uses the answer
key :func:`addk_answer` written here (the tables are an exercise, not a function the book needs);
:func:`check_tagging_accuracy` uses :func:`nlpcourse.hmm.tagging_accuracy`. Every case of
:func:`check_viterbi` has a single best path (random cases whose two best paths are within 1e-6 in
log probability are drawn again), so paths are compared exactly.

When an answer is wrong, a check also computes the answers that the usual mistakes give (log_trans
transposed, a max where a sum belongs, probabilities where logs belong, ...) and, if the student's
answer matches one of them, names that mistake (:class:`nlpcourse.checks.core.Mistake`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from nlpcourse import hmm
from nlpcourse.checks.core import (
    ATOL,
    RTOL,
    Case,
    Expected,
    Mistake,
    as_array,
    close,
    compare_arrays,
    compare_numbers,
    compare_scores,
    impossible_log_probability,
    n_random,
    np_rng,
    py_rng,
    run_check,
    same_on_keys,
    show,
    with_args,
)
from nlpcourse.examples import girl_sleep, i_go_to_school_log
from nlpcourse.guard import reference
from nlpcourse.testing import brute_force, random_hmm

NAMES = ("log_start", "log_trans", "log_emit")
MAX_PATHS = 1024  # brute force lists N**T tag sequences: only for small HMMs

ROW_HINT = (
    "row i of log_trans is log P(next tag | previous tag i): the step from tag i to tag j "
    "uses log_trans[i, j]"
)
LOG_HINT = (
    "the tables hold log probabilities: multiply probabilities by adding logs, and sum them "
    "with a log-sum-exp, eq. (hmm-logsumexp), never by adding the logs themselves"
)
INF_HINT = (
    "-inf means probability 0; a log-sum-exp over entries that are all -inf must give -inf, not "
    "nan: with the max-shift of eq. (hmm-logsumexp), a max of -inf gives -inf - (-inf) = nan"
)
UNDERFLOW_HINT = (
    "P(words) of a sentence this long is far below the smallest positive float (about 1e-308), so "
    "multiplying probabilities gives 0 and log(0) = -inf: stay in log space the whole way (add "
    "log probabilities, and use a logsumexp instead of summing probabilities)"
)


def _log(p: Any) -> np.ndarray:
    """Natural log with log(0) = -inf and no warning."""
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(p, dtype=float))


def _small(log_emit: np.ndarray) -> bool:
    T, N = np.shape(log_emit)
    return N**T <= MAX_PATHS


# ------------------------------------------------------------------------------ cases


def _random_cases(
    hidden: bool, names: tuple[str, ...], unique_best: bool, hint: str = ""
) -> list[Case]:
    """Small random HMMs with a possible sentence (and a single best path if ``unique_best``),
    smallest first; some with impossible transitions and emissions (-inf)."""
    rng = np_rng(hidden)
    n_cases = n_random(hidden)
    cases = []
    for i in range(n_cases):
        N = 1 + i % 4 if hidden else 2 + i % 2
        T = 1 + (i * 5) // n_cases if hidden else 2 + i
        p_zero = 0.3 if i % 2 else 0.0
        while True:
            tables = random_hmm(rng, N, T, p_zero)
            truth = brute_force(*tables)
            possible = truth["loglik"] > -math.inf
            if possible and not (unique_best and truth["best"] - truth["second"] < 1e-6):
                break
        label = f"random, {N} tags, {T} words" + (", with -inf entries" if p_zero else "")
        cases.append(Case(tables, names, hint, label))  # INF_HINT: where the answer has nan
    return cases


def _long_case(hidden: bool, names: tuple[str, ...], hint: str) -> Case:
    """A sentence long enough that probabilities underflow to 0 outside log space."""
    N, T = (5, 1000) if hidden else (4, 300)
    rng = np.random.default_rng(30 if hidden else 3)
    # a word of its own at each position (log P(words) is below -900: exp gives 0). With repeated
    # words, two tag paths that visit the same tags at two positions of one word in the other
    # order add the same terms: a real tie, which the visible 300-word case had
    tables = random_hmm(rng, N, T, n_words=T)
    shown = {
        "log_start": show(tables[0]),
        "log_trans": show(tables[1]),
        "log_emit": f"a ({T}, {N}) array: a random {T}-word sentence (too long to print)",
    }
    return Case(tables, names, hint, f"a {T}-word sentence", shown)


def one_word() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three tags, one word: P(tag j, word) = pi_j b_j = 0.05, 0.15, 0.08."""
    return _log([0.5, 0.3, 0.2]), _log(np.full((3, 3), 1 / 3)), _log([[0.1, 0.5, 0.4]])


def greedy_trap() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two tags, two words, where picking the best tag word by word fails.

    The tag sequences score 0-0: .015, 0-1: .135, 1-0: .001, 1-1: .171. The first word alone
    prefers tag 0 (.3 against .2), but the best sequence is 1-1."""
    return (
        _log([0.6, 0.4]),
        _log([[0.5, 0.5], [0.05, 0.95]]),
        _log([[0.5, 0.5], [0.1, 0.9]]),
    )


def impossible_sentence() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two tags; no tag can emit the second word, so P(words) = 0."""
    return (
        _log([0.7, 0.3]),
        _log([[0.6, 0.4], [0.5, 0.5]]),
        _log([[0.2, 0.1], [0.0, 0.0], [0.3, 0.3]]),
    )


def _try(function: Callable, *args: Any) -> Any:
    """``function(*args)``, or None if it raises ValueError (a mistake that has no answer)."""
    try:
        return function(*args)
    except ValueError:
        return None


# ------------------------------------------------------------------------------ part 1


@reference
def addk_answer(
    tagged_sentences: Sequence, tags: Sequence[str], words: Sequence[str], k: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The answer key of part 1: the three HMM tables, add-k smoothed, in log space, eq.
    (hmm-trans-mle) and (hmm-emit-mle) with chapter 1's add-k smoothing, eq. (ngram-addk):

        pi_j   = (c(<s>, j) + k) / (S + k N)
        a_ij   = (c(i, j) + k) / (c(i, .) + k N)
        b_j(w) = (c(j, w) + k) / (c(j) + k V)

    ``S`` is the number of non-empty sentences, ``c(<s>, j)`` how many of them start with tag
    ``j``, ``c(i, j)`` how often tag ``j`` follows tag ``i`` inside a sentence, ``c(i, .)`` the
    sum of ``c(i, j)`` over ``j`` (a tag that ends a sentence is followed by none, so every row of
    A sums to 1), ``c(j, w)`` how often word ``w`` has tag ``j`` and ``c(j)`` how often tag ``j``
    occurs; ``N = len(tags)``, ``V = len(words)``. Returns ``log_start`` (N,), ``log_trans``
    (N, N) and ``log_emit_table`` (V, N), ``[v, j] = log b_j(words[v])``. Empty sentences are
    skipped. Marked as a reference: it refuses to run while a student's function is checked."""
    tag_id = {tag: j for j, tag in enumerate(tags)}
    word_id = {word: v for v, word in enumerate(words)}
    N, V = len(tags), len(words)
    start_counts = np.zeros(N)  # (N,) c(<s>, j)
    trans_counts = np.zeros((N, N))  # (N, N) c(i, j)
    emit_counts = np.zeros((V, N))  # (V, N) c(j, w)
    for sentence in tagged_sentences:
        if not sentence:
            continue
        ids = [tag_id[tag] for _, tag in sentence]
        start_counts[ids[0]] += 1
        for i, j in itertools.pairwise(ids):
            trans_counts[i, j] += 1
        for word, tag in sentence:
            emit_counts[word_id[word], tag_id[tag]] += 1
    log_start = _log((start_counts + k) / (start_counts.sum() + k * N))  # (N,)
    log_trans = _log((trans_counts + k) / (trans_counts.sum(axis=1, keepdims=True) + k * N))
    log_emit_table = _log((emit_counts + k) / (emit_counts.sum(axis=0) + k * V))  # (V, N)
    return log_start, log_trans, log_emit_table


def _addk_mistakes(sentences: list, tags: list, words: list, k: float) -> list[Mistake]:
    value = addk_answer(sentences, tags, words, k)
    N = len(tags)
    with_ends = [sentence + [(None, None)] for sentence in sentences if sentence]
    trans = np.zeros((N, N))
    ends = np.zeros(N)
    for sentence in with_ends:
        ids = [tags.index(tag) for _, tag in sentence[:-1]]
        for i, j in itertools.pairwise(ids):
            trans[i, j] += 1
        ends[ids[-1]] += 1
    all_occurrences = _log((trans + k) / (trans.sum(axis=1, keepdims=True) + ends[:, None] + k * N))
    starts = np.zeros(N)  # c(<s>, j)
    emit = np.zeros((len(words), N))  # c(j, w), (V, N)
    for sentence in sentences:
        if sentence:
            starts[tags.index(sentence[0][1])] += 1
        for word, tag in sentence:
            emit[words.index(word), tags.index(tag)] += 1
    every_sentence = _log((starts + k) / (len(sentences) + k * N))
    per_word = _log((emit + k) / (emit.sum(axis=1, keepdims=True) + k * N))
    return [
        Mistake(
            "you returned probabilities: the tables hold log probabilities, so return their logs",
            tuple(np.exp(table) for table in value),
        ),
        Mistake(
            "the denominator of a_ij counts every occurrence of tag i, also those that end a "
            "sentence: c(i, .) counts only the times another tag follows tag i, so that each row "
            "of A sums to 1",
            (value[0], all_occurrences, value[2]),
        ),
        Mistake(
            "log_emit_table is transposed: one row per word and one column per tag, "
            "[v, j] = log P(word v | tag j)",
            (value[0], value[1], value[2].T),
        ),
        Mistake(
            "S counts every sentence, the empty ones too: an empty sentence has no first tag, "
            "so S is the number of non-empty sentences and pi sums to 1",
            (every_sentence, value[1], value[2]),
        ),
        Mistake(
            "the emissions are normalised per word, P(tag | word): b_j(w) = P(word w | tag j) "
            "divides by c(j) + kV, so that each column (tag) of log_emit_table sums to 1",
            (value[0], value[1], per_word),
        ),
    ]


ADDK_HINTS = {  # the hint of a wrong answer: about the table that differs, whatever the case
    "log_start": "pi_j = (c(<s>, j) + k) / (S + kN), where S counts the non-empty sentences and "
    "c(<s>, j) how many of them start with tag j",
    "log_trans": "a_ij = (c(i, j) + k) / (c(i, .) + kN), where c(i, .) counts the times another "
    "tag follows tag i: a tag that ends a sentence is followed by no tag",
    "log_emit_table": "b_j(w) = (c(j, w) + k) / (c(j) + kV), V = len(words): each column (tag) "
    "is a distribution over the words; row v is the word words[v]",
}


ADDK_NAN_HINT = (
    "nan comes from 0/0 or log of a negative number: with k > 0 no count is 0 after smoothing, "
    "so look for a denominator that is 0 (a tag that never occurs, an empty row)"
)


def _compare_addk(want: Expected, got: Any) -> str:
    _, tags, words, _ = want.args
    N, V = len(tags), len(words)
    shapes_hint = (
        f"\nhint: the three tables are log_start (N,), log_trans (N, N) and log_emit_table (V, N), "
        f"with N = len(tags) = {N} and V = len(words) = {V}"
    )
    if not isinstance(got, tuple | list) or len(got) != 3:
        return "expected a tuple of three arrays: (log_start, log_trans, log_emit_table)"
    parts = ("log_start", "log_trans", "log_emit_table")
    shapes = ((N,), (N, N), (V, N))
    arrays = []
    for name, shape, table in zip(parts, shapes, got, strict=True):
        array, problem = as_array(table, name)
        if array is None:
            return problem + shapes_hint
        if array.shape != shape:
            problem = f"{name} should have shape {shape}, got shape {array.shape}"
            if name == "log_emit_table" and array.shape == (N, V):
                problem += ": one row per word and one column per tag"
            return problem + shapes_hint
        if np.isnan(array).any():
            where = [int(i) for i in np.argwhere(np.isnan(array))[0]]
            return f"{name}{where} is nan\nhint: " + ADDK_NAN_HINT
        arrays.append(array)

    def label(name: str, index: tuple[int, ...]) -> str:
        if name == "log_start":
            return f"log_start[{index[0]}] (start -> {tags[index[0]]!r})"
        if name == "log_trans":
            i, j = index
            return f"log_trans[{i}, {j}] ({tags[i]!r} -> {tags[j]!r})"
        v, j = index
        return f"log_emit_table[{v}, {j}] (word {words[v]!r}, tag {tags[j]!r})"

    for name, expected, array in zip(parts, want.value, arrays, strict=True):
        if not close(expected, array):
            bad = ~np.isclose(array, expected, rtol=RTOL, atol=ATOL)
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            line = f"{label(name, index)}: expected {float(expected[index])!r}, "
            line += f"got {float(array[index])!r}"
            with np.errstate(over="ignore"):
                sums = np.exp(array).sum(axis=-1 if name != "log_emit_table" else 0)
            if not np.allclose(sums, 1.0):
                line += (
                    f"\nin {name}, each "
                    + ("column" if name == "log_emit_table" else "row")
                    + f" should be a distribution (sum to 1 in probability); yours sum to "
                    f"{show(np.round(sums, 4).tolist())}"
                )
            return line + "\nhint: " + ADDK_HINTS[name]  # about the table that differs
    return ""


def check_addk_tables(addk_tables: Callable, hidden: bool = False) -> None:
    """``addk_tables(tagged_sentences, tags, words, k)``: add-k smoothed log tables."""
    names = ("tagged_sentences", "tags", "words", "k")
    tiny = [
        [("the", "DET"), ("dog", "NOUN"), ("barks", "VERB")],
        [("the", "DET"), ("dog", "NOUN"), ("sleeps", "VERB")],
        [("a", "DET"), ("cat", "NOUN"), ("barks", "VERB")],
    ]
    tiny_tags, tiny_words = ["DET", "NOUN", "VERB"], ["a", "barks", "cat", "dog", "sleeps", "the"]
    denominator_hint = (
        "the denominator of a_ij is c(i, .) + kN, where c(i, .) counts the times another tag "
        "follows tag i: a tag that ends a sentence is followed by no tag"
    )
    cases = [
        Case(
            ([[("dog", "NOUN")]], ["NOUN", "VERB"], ["dog", "runs", "sleeps"], 0.5),
            names,
            "pi = (1+.5)/(1+2*.5), (0+.5)/(1+2*.5); no tag follows another, so every row of A "
            "is uniform; b_NOUN(dog) = (1+.5)/(1+3*.5); VERB was never seen: b_VERB(w) = 1/3",
            "one sentence of one word",
        ),
        Case(
            ([[], [("dog", "NOUN")], []], ["NOUN", "VERB"], ["dog", "runs", "sleeps"], 0.5),
            names,
            "an empty sentence has no first tag: S counts the non-empty sentences only",
            "empty sentences",
        ),
        Case(
            (tiny, tiny_tags, tiny_words, 1.0),
            names,
            "b_j(w) = (c(j, w) + k) / (c(j) + kV): V is the number of words in `words`",
            "three sentences",
        ),
        Case((tiny, tiny_tags, tiny_words, 0.5), names, "use k, not 1, in both places"),
        Case(
            (tiny + [[("dog", "NOUN")]], tiny_tags, tiny_words, 1.0),
            names,
            denominator_hint,
            "NOUN ends a sentence",
        ),
        Case(
            (girl_sleep("NN", "VB"), ["NN", "VB"], ["girl", "sleep"], 1.0),
            names,
            "the chapter's girl/sleep counts; each one-word sentence starts with its tag",
            "girl and sleep",
        ),
    ]
    rng = py_rng(hidden)
    for _ in range(n_random(hidden)):
        tags = ["DET", "NOUN", "VERB", "ADJ"][: rng.randint(2, 4)]
        words = sorted(rng.sample(["a", "the", "dog", "cat", "runs", "big", "old", "sees"], 5))
        sentences = [
            [(rng.choice(words), rng.choice(tags)) for _ in range(rng.randint(0, 5))]
            for _ in range(rng.randint(1, 6))
        ]
        if not any(sentences):
            sentences.append([(words[0], tags[0])])
        k = rng.choice([1.0, 0.5, 0.1, 2.0])
        cases.append(Case((sentences, tags, words, k), names, denominator_hint, "random"))
    run_check(
        "addk_tables",
        addk_tables,
        with_args(addk_answer),
        cases,
        _compare_addk,
        mistakes=_addk_mistakes,
    )


# ------------------------------------------------------------------------------ part 2


def _max_then_sum(log_start: np.ndarray, log_trans: np.ndarray, log_emit: np.ndarray) -> float:
    """The forward recursion with a max over previous tags in place of the sum (a mistake)."""
    delta = log_start + log_emit[0]  # (N,)
    for t in range(1, len(log_emit)):
        delta = np.max(delta[:, None] + log_trans, axis=0) + log_emit[t]  # (N,)
    return float(np.logaddexp.reduce(delta))


def _forward_answer(log_start: np.ndarray, log_trans: np.ndarray, log_emit: np.ndarray) -> float:
    if _small(log_emit):
        return brute_force(log_start, log_trans, log_emit)["loglik"]
    return hmm.forward(log_start, log_trans, log_emit)


def _forward_mistakes(log_start, log_trans, log_emit) -> list[Mistake]:
    tables = (log_start, log_trans, log_emit)
    value = _forward_answer(*tables)
    alpha = hmm.forward_table(*tables)  # (T, N)
    first_emit_left_out = log_emit.copy()
    first_emit_left_out[0] = 0.0
    max_hint = (
        "you took the max over previous tags, as Viterbi does: the forward algorithm sums "
        "over them, alpha_t(j) = logsumexp_i [alpha_{t-1}(i) + log a_ij] + log b_j(o_t)"
    )
    return [
        Mistake(max_hint, hmm.viterbi(*tables)[1]),
        Mistake(max_hint, _max_then_sum(*tables)),
        Mistake(
            "log_trans is read transposed: " + ROW_HINT,
            hmm.forward(log_start, log_trans.T, log_emit),
        ),
        Mistake("you returned P(words): return its log", math.exp(value)),
        Mistake(
            "the last step takes the max: log P(words) = logsumexp_j alpha_T(j)",
            float(alpha[-1].max()),
        ),
        Mistake(
            "alpha_1 leaves out log pi_j: alpha_1(j) = log pi_j + log b_j(o_1)",
            hmm.forward(np.zeros_like(log_start), log_trans, log_emit),
        ),
        Mistake(
            "alpha_1 leaves out the first word: alpha_1(j) = log pi_j + log b_j(o_1)",
            hmm.forward(log_start, log_trans, first_emit_left_out),
        ),
        Mistake(UNDERFLOW_HINT, -math.inf if value < -700 else None),
    ]


def _compare_forward(want: Expected, got: Any) -> str:
    """:func:`compare_numbers`, then what the answer shows: -inf where a sequence is possible
    (underflow, on a long sentence), nan (-inf - -inf), a value above 0, or else the right
    alpha_1 and alpha_T, to compare with the student's own (a single number does not say which
    step went wrong)."""
    problem = compare_numbers(want.value, got)
    if not problem:
        return ""
    log_start, log_trans, log_emit = want.args
    if np.isfinite(want.value) and got == -math.inf:
        problem += "\nyou returned -inf (probability 0), but some tag sequence is possible"
        if want.value < -700:
            problem += "\nhint: " + UNDERFLOW_HINT
        return problem
    if _number_is_nan(got):
        return problem + "\nhint: " + INF_HINT
    sanity = impossible_log_probability(got, "log P(words)")
    if sanity:
        return problem + sanity
    alpha = hmm.forward_table(log_start, log_trans, log_emit)  # (T, N)
    return (
        f"{problem}\nhint: print your alpha and compare it row by row: the right alpha_1 = "
        f"log pi + log b(o_1) = {show(alpha[0])}, and alpha_T = {show(alpha[-1])} (T = "
        f"{len(alpha)}), whose logsumexp is log P(words)"
    )


def _number_is_nan(got: Any) -> bool:
    return isinstance(got, float) and math.isnan(got)


def _number_is_finite(got: Any) -> bool:
    return isinstance(got, int | float) and not isinstance(got, bool) and math.isfinite(got)


def check_forward(forward: Callable, hidden: bool = False) -> None:
    """``forward(log_start, log_trans, log_emit)``: log P(words), eq. (hmm-likelihood)."""
    cases = [
        Case(
            one_word(),
            NAMES,
            "one word: log P = log(sum_j pi_j b_j(o_1)) = log(0.05 + 0.15 + 0.08)",
            "a one-word sentence",
        ),
        Case(greedy_trap(), NAMES, "sum over all 4 tag sequences: .015 + .135 + .001 + .171"),
        Case(
            i_go_to_school_log(),
            NAMES,
            "some transitions are impossible: log_trans has -inf entries (log 0)",
            "the chapter's 'I go to school', with impossible transitions (-inf)",
        ),
        Case(
            impossible_sentence(),
            NAMES,
            "no tag can emit word 2, so P(words) = 0: log P(words) = -inf, with no error",
            "a sentence with probability 0",
        ),
    ]
    cases += _random_cases(hidden, NAMES, unique_best=False)
    cases.append(_long_case(hidden, NAMES, UNDERFLOW_HINT))
    run_check(
        "forward",
        forward,
        with_args(_forward_answer),
        cases,
        _compare_forward,
        mistakes=_forward_mistakes,
    )


# ------------------------------------------------------------------------------ part 3


def _greedy_path(log_start: np.ndarray, log_trans: np.ndarray, log_emit: np.ndarray) -> list[int]:
    """The best tag for each word given the tag chosen before it (not Viterbi)."""
    path = [int(np.argmax(log_start + log_emit[0]))]
    for t in range(1, len(log_emit)):
        path.append(int(np.argmax(log_trans[path[-1]] + log_emit[t])))
    return path


def _path_score(log_start: np.ndarray, log_trans: np.ndarray, log_emit: np.ndarray, path) -> float:
    score = log_start[path[0]] + log_emit[0, path[0]]
    for t in range(1, len(path)):
        score += log_trans[path[t - 1], path[t]] + log_emit[t, path[t]]
    return float(score)


def _viterbi_answer(log_start: np.ndarray, log_trans: np.ndarray, log_emit: np.ndarray) -> tuple:
    tables = (log_start, log_trans, log_emit)
    if _small(log_emit):
        truth = brute_force(*tables)
        return truth["path"].tolist(), truth["best"]
    best_path, logprob = hmm.viterbi(*tables)
    return best_path.tolist(), logprob


def _viterbi_mistakes(log_start, log_trans, log_emit) -> list[Mistake]:
    tables = (log_start, log_trans, log_emit)
    greedy = _greedy_path(*tables)
    transposed, transposed_logprob = hmm.viterbi(log_start, log_trans.T, log_emit)
    return [
        Mistake(
            "you choose the best tag for each word given the tag before it (greedy): Viterbi "
            "keeps, for every tag j, the best path that ends in j (delta_t(j)), and chooses the "
            "path only at the end, by following the backpointers",
            (greedy, _path_score(*tables, greedy)),
        ),
        Mistake(
            "log_trans is read transposed: " + ROW_HINT, (transposed.tolist(), transposed_logprob)
        ),
    ]


def _show_paths(want_path: list[int], path: list[int]) -> str:
    """Both paths if short, else where they first differ."""
    if len(want_path) <= 12:
        return f"expected {want_path}, got {path}"
    t = next(t for t, (a, b) in enumerate(zip(want_path, path, strict=True)) if a != b)
    n_bad = sum(a != b for a, b in zip(want_path, path, strict=True))
    return (
        f"the paths first differ at position t = {t} (of {len(path)}): expected tag "
        f"{want_path[t]}, got {path[t]} ({n_bad} positions differ)"
    )


def _compare_viterbi(want: Expected, got: Any) -> str:
    if not isinstance(got, tuple | list) or len(got) != 2:
        return "expected a pair (path, log probability), e.g. `return path, logprob`"
    got_path, got_logprob = got
    want_path, want_logprob = want.value
    T, N = np.shape(want.args[2])
    path = np.asarray(got_path) if isinstance(got_path, list | tuple | np.ndarray) else None
    if path is None or path.shape != (T,) or path.dtype.kind not in "iu":
        return (
            f"the path should be {T} integer tag indices (a list or an int array); got {got_path!r}"
        )
    path = path.tolist()
    if any(not 0 <= j < N for j in path):
        return f"path: tag indices must be in 0 .. {N - 1}, got {path}"
    logprob_problem = compare_numbers(want_logprob, got_logprob)
    if path == want_path and not logprob_problem:
        return ""
    logprob_problem += impossible_log_probability(got_logprob) if logprob_problem else ""
    if logprob_problem and _number_is_nan(got_logprob):
        logprob_problem += "\nhint: " + INF_HINT
    lines = []
    if logprob_problem:
        lines.append("log probability: " + logprob_problem)
    own = None
    if path != want_path:
        log_start, log_trans, log_emit = want.args
        own = _path_score(log_start, log_trans, log_emit, path)
        lines.append(
            f"path: {_show_paths(want_path, path)}; the path you returned has log probability "
            f"{own!r}"
        )
    if path != want_path and not logprob_problem:
        if path == want_path[::-1]:
            lines.append(
                "the path is in reverse order: reverse it after following the backpointers"
            )
        else:
            lines.append(
                "the log probability is right but the path is not: follow the backpointers from "
                "the best last tag, path[T-1] = argmax_j delta_T(j), then "
                "path[t-1] = backptr[t, path[t]] down to t = 1"
            )
    elif math.isfinite(want_logprob) and got_logprob == -math.inf:
        lines.append("you returned -inf, but some tag sequence has probability > 0")
    elif math.isfinite(want_logprob) and close(math.exp(want_logprob), got_logprob):
        lines.append("you returned a probability: return its log")
    elif path != want_path and _number_is_finite(got_logprob):
        if close(own, got_logprob):  # `own`: the returned path's score, computed above
            lines.append(
                "hint: your score is your path's own score, and a better path exists: keep, "
                "for every tag j, the best score of a path ending in j (delta_t(j) = max_i "
                "[delta_{t-1}(i) + log a_ij] + log b_j(o_t)), and choose the path only at the end"
            )
        else:
            lines.append(
                "hint: your score is not the score of the path you returned, so the two come "
                "from different computations: the path must be the one whose score is "
                "max_j delta_T(j), found by following the back pointers from that j"
            )
    elif path == want_path:
        lines.append(
            "the path is right but its log probability is not: it is the score of the best "
            "path, log pi_{path[0]} + log b(o_1) + the sum of log a + log b over the later "
            "words; check that delta_1 starts with log_start and every term is added once"
        )
    return "\n".join(lines)


def check_viterbi(viterbi: Callable, hidden: bool = False) -> None:
    """``viterbi(log_start, log_trans, log_emit)``: (best path, its log probability)."""
    cases = [
        Case(
            one_word(),
            NAMES,
            "one word: the best tag is argmax_j (log pi_j + log b_j(o_1)); the path has length 1",
            "a one-word sentence",
        ),
        Case(
            greedy_trap(),
            NAMES,
            "the first word alone prefers tag 0, but the best path is [1, 1] (.171 against .135)",
            "where choosing tags word by word fails",
        ),
        Case(
            i_go_to_school_log(),
            NAMES,
            "the chapter's trellis, with -inf entries (log 0) in log_trans: the best path is "
            "PPSS NN TO VB = [3, 2, 1, 0]",
            "the chapter's 'I go to school', with impossible transitions (-inf)",
        ),
    ]
    cases += _random_cases(hidden, NAMES, unique_best=True)
    cases.append(_long_case(hidden, NAMES, UNDERFLOW_HINT))
    run_check(
        "viterbi",
        viterbi,
        with_args(_viterbi_answer),
        cases,
        _compare_viterbi,
        mistakes=_viterbi_mistakes,
    )


# ------------------------------------------------------------------------------ part 4


def _posterior_answer(log_start, log_trans, log_emit) -> np.ndarray:
    tables = (log_start, log_trans, log_emit)
    return brute_force(*tables)["posterior"] if _small(log_emit) else hmm.forward_backward(*tables)


def _posterior_mistakes(log_start, log_trans, log_emit) -> list[Mistake]:
    tables = (log_start, log_trans, log_emit)
    value = _posterior_answer(*tables)
    alpha = hmm.forward_table(*tables)  # (T, N)
    beta = hmm.backward_table(*tables)  # (T, N)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        alpha_only = np.exp(alpha - np.logaddexp.reduce(alpha, axis=1, keepdims=True))
        return [
            Mistake("you returned log probabilities: return probabilities (np.exp)", _log(value)),
            Mistake(
                "you did not divide by P(words): gamma_t(j) = alpha_t(j) beta_t(j) / P(words), "
                "in log space alpha + beta - log P(words)",
                np.exp(alpha + beta),
            ),
            Mistake(
                "beta is left out: alpha_t(j) covers only the words up to t; gamma needs "
                "beta_t(j) for the words after t",
                alpha_only,
            ),
            Mistake(
                "log_trans is read transposed: " + ROW_HINT,
                _try(hmm.forward_backward, log_start, log_trans.T, log_emit),
            ),
        ]


def _compare_posterior(want: Expected, got: Any) -> str:
    """:func:`compare_arrays` (the entry that differs most), then what the answer shows: rows
    that are no distribution, nan (from -inf - -inf, or from probabilities that underflowed on a
    long sentence), or the row of the first word that differs."""
    T, N = want.value.shape
    problem = compare_arrays(
        want.value, got, "the posterior", "one row per word t, one column per tag"
    )
    if not problem:
        return ""
    array, _ = as_array(got)
    if array is None or array.shape != (T, N):
        return problem
    if np.isnan(array).any():
        return problem + "\nhint: " + (UNDERFLOW_HINT if T > 100 else INF_HINT)
    if not np.allclose(array.sum(axis=1), 1.0):
        sums = np.round(array.sum(axis=1), 4).tolist()
        return (
            problem + f"\neach row should sum to 1 (a distribution over tags); yours sum to "
            f"{show(sums[:8])}\nhint: gamma_t(j) = alpha_t(j) beta_t(j) / P(words)"
        )
    bad = ~np.isclose(array, want.value, rtol=RTOL, atol=ATOL)
    t = int(np.argwhere(bad)[0][0])
    return (
        f"{problem}\nhint: the first row that differs is t = {t} (word {t + 1} of {T}): the "
        f"right row is {show(want.value[t])}, yours {show(array[t])}"
    )


def check_forward_backward(forward_backward: Callable, hidden: bool = False) -> None:
    """``forward_backward(log_start, log_trans, log_emit)``: P(tag_t = j | words), (T, N)."""
    cases = [
        Case(
            one_word(),
            NAMES,
            "one word: beta_1 = 0 (log 1), so gamma_1(j) = pi_j b_j(o_1) / P(words) = "
            "[.05, .15, .08] / .28",
            "a one-word sentence",
        ),
        Case(
            greedy_trap(),
            NAMES,
            "e.g. P(tag 1 at the first word) = (.001 + .171) / (.015 + .135 + .001 + .171)",
        ),
        Case(
            i_go_to_school_log(),
            NAMES,
            "tags that cannot occur get posterior 0; log_trans has -inf entries (log 0)",
            "the chapter's 'I go to school', with impossible transitions (-inf)",
        ),
    ]
    cases += _random_cases(hidden, NAMES, unique_best=False)
    cases.append(_long_case(hidden, NAMES, UNDERFLOW_HINT))
    run_check(
        "forward_backward",
        forward_backward,
        with_args(_posterior_answer),
        cases,
        _compare_posterior,
        mistakes=_posterior_mistakes,
    )


# ------------------------------------------------------------------------------ part 5


class LookupTagger:
    """A tagger that looks each word up in a table; words not in it get ``default``.

    A plain class, not the reference: the check passes it to the student's ``tagging_accuracy``.
    Like the book's taggers it has ``vocab_`` (the words it knows) and ``tag_sents``."""

    def __init__(self, table: dict[str, str], default: str):
        self.vocab_ = dict(table)
        self.default = default

    def tag_sents(self, sentences: list[list[str]]) -> list[list[str]]:
        return [[self.vocab_.get(w, self.default) for w in s] for s in sentences]

    def tag(self, words: list[str]) -> list[str]:
        return self.tag_sents([words])[0]

    def __repr__(self) -> str:
        return f"LookupTagger(vocab_={self.vocab_!r}, unknown words get {self.default!r})"


KEYS = ("all", "known", "unknown", "unknown_rate")


def _accuracy_mistakes(tagger: LookupTagger, tagged_sentences: list) -> list[Mistake]:
    value = hmm.tagging_accuracy(cast(Any, tagger), tagged_sentences)
    per_sentence = [
        sum(gold == tag for (_, gold), tag in zip(s, tagger.tag([w for w, _ in s]), strict=True))
        / len(s)
        for s in tagged_sentences
        if s
    ]
    n = sum(len(s) for s in tagged_sentences)
    return [
        Mistake(
            "you averaged the accuracies of the sentences: count correct tokens over all "
            "sentences, then divide by the number of tokens",
            {**value, "all": sum(per_sentence) / len(per_sentence)},
        ),
        Mistake(
            "unknown_rate counts tokens: it is a share, the number of unknown tokens over all",
            {**value, "unknown_rate": value["unknown_rate"] * n},
        ),
        Mistake(
            "known and unknown are swapped: a word is known if it is in tagger.vocab_",
            {
                **value,
                "known": value["unknown"],
                "unknown": value["known"],
                "unknown_rate": 1 - value["unknown_rate"],
            },
        ),
    ]


def _accuracy_answer(tagger: LookupTagger, tagged_sentences: list) -> dict[str, float]:
    value = hmm.tagging_accuracy(cast(Any, tagger), tagged_sentences)  # any tagger will do
    return {k: value[k] for k in KEYS}


ACCURACY_HINTS = {  # the hint of a wrong answer: about the first key that differs
    "all": "all = the tokens tagged right / all tokens, counted over every sentence together",
    "known": "known = the right tags among the tokens whose word is in tagger.vocab_ / those "
    "tokens",
    "unknown": "unknown = the right tags among the tokens whose word is not in tagger.vocab_ / "
    "those tokens",
    "unknown_rate": "unknown_rate = the tokens whose word is not in tagger.vocab_ / all tokens "
    "(a share between 0 and 1)",
}


def _compare_accuracy(want: dict, got: Any) -> str:
    return compare_scores(want, got, KEYS, ACCURACY_HINTS)


def check_tagging_accuracy(tagging_accuracy: Callable, hidden: bool = False) -> None:
    """``tagging_accuracy(tagger, tagged_sentences)``: accuracy on all, known, unknown words."""
    names = ("tagger", "tagged_sentences")
    tagger = LookupTagger({"the": "DET", "dog": "NOUN", "barks": "VERB", "runs": "NOUN"}, "NOUN")
    cases = [
        Case(
            (tagger, [[("the", "DET"), ("zebra", "NOUN"), ("runs", "VERB")]]),
            names,
            "the and runs are known (in tagger.vocab_), zebra is not; runs is tagged wrongly",
            "one sentence",
        ),
        Case(
            (
                tagger,
                [
                    [("dog", "NOUN")],
                    [("the", "DET"), ("cat", "NOUN"), ("runs", "VERB"), ("fast", "ADV")],
                ],
            ),
            names,
            "two sentences, of 1 and 4 tokens",
            "two sentences",
        ),
    ]
    rng = py_rng(hidden)
    words, tags = ["a", "the", "dog", "cat", "runs", "big", "old", "sees"], ["DET", "NOUN", "VERB"]
    for _ in range(n_random(hidden)):
        known = rng.sample(words, rng.randint(2, 6))
        tagger = LookupTagger({w: rng.choice(tags) for w in known}, rng.choice(tags))
        while True:
            sentences = [
                [(rng.choice(words), rng.choice(tags)) for _ in range(rng.randint(1, 6))]
                for _ in range(rng.randint(1, 5))
            ]
            tokens = [w for s in sentences for w in s]
            if any(w in known for w, _ in tokens) and any(w not in known for w, _ in tokens):
                break
        cases.append(Case((tagger, sentences), names, label="random"))
    run_check(
        "tagging_accuracy",
        tagging_accuracy,
        _accuracy_answer,
        cases,
        _compare_accuracy,
        mistakes=_accuracy_mistakes,
        same=same_on_keys,
    )


__all__ = [
    "addk_answer",
    "check_addk_tables",
    "check_forward",
    "check_viterbi",
    "check_forward_backward",
    "check_tagging_accuracy",
]
