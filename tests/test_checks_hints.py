"""Hints follow the answer, not the case (issue 42, section 4).

A wrong answer used to be shown the hint written for the case it failed on, which speaks of what
the case was meant to test: a back-pointer error met a paragraph about -inf and nan, a log_start
error a hint about a_ij, code that counts types the advice to count types. Now a wrong answer gets
what its own answer shows: the key, cell, row or entry that differs (the compare function), a
named mistake, or a ``hint:`` drawn from the answer; the case's hint is shown only when the
function raises on the case (it says what the input holds).

Each row below is a wrong answer written as a student would, which no check names as a known
mistake: its message must name the element that differs (``shows``) and must not speak of a topic
the answer does not show (``never``: the old case hint, or another part's advice). The students
are those of the topic tests, changed by one line.
"""

import itertools
import math

import numpy as np
import pytest
import test_checks_hmm as hmm_students
import test_checks_ngram as ngram_students
import test_checks_parsing as parsing_students
import test_checks_rnn as rnn_students
import test_checks_seq2seq as seq2seq_students
import test_checks_transformer as tf_students
import torch

import nlpcourse.checks.hmm as hmm
import nlpcourse.checks.ngram as ngram
import nlpcourse.checks.parsing as parsing
import nlpcourse.checks.rnn as rnn
import nlpcourse.checks.seq2seq as seq2seq
import nlpcourse.checks.transformer as tf
from nlpcourse.checks import CheckFailed, core

INF_PARAGRAPH = "-inf means probability 0"  # hmm.INF_HINT's first words


def _message(check, student, hidden=False) -> str:
    with np.errstate(all="ignore"), pytest.raises(CheckFailed) as failed:
        check(student, hidden=hidden)
    return str(failed.value)


# ------------------------------------------------------------------ the rule, in the machinery


def test_a_wrong_answer_is_not_shown_the_cases_hint_and_a_raising_function_is():
    cases = [core.Case((2,), ("x",), "THE CASE'S HINT: about what this case tests")]
    wrong = _run(lambda x: x + 1, cases)
    assert "expected: 4" in wrong and "THE CASE'S HINT" not in wrong, wrong
    raised = _run(lambda x: 1 / 0, cases)
    assert "ZeroDivisionError" in raised and "hint: THE CASE'S HINT" in raised, raised


def _run(student, cases) -> str:
    with pytest.raises(CheckFailed) as failed:
        core.run_check("square", student, lambda x: x * x, cases)
    return str(failed.value)


# ------------------------------------------------------ the three examples of the text


def viterbi_backptr_axis(log_start, log_trans, log_emit):
    """Viterbi whose back pointers take the argmax over the wrong axis (axis=1)."""
    T, N = log_emit.shape
    delta, backptr = log_start + log_emit[0], np.zeros((T, N), dtype=int)
    for t in range(1, T):
        scores = delta[:, None] + log_trans  # (N previous, N next)
        backptr[t] = np.argmax(scores, axis=1)  # the mistake: axis 0 is the previous tag
        delta = np.max(scores, axis=0) + log_emit[t]
    path = [int(np.argmax(delta))]
    for t in range(T - 1, 0, -1):
        path.append(int(backptr[t, path[-1]]))
    return path[::-1], float(np.max(delta))


def test_a_back_pointer_axis_error_gets_no_paragraph_about_inf_and_nan():
    message = _message(hmm.check_viterbi, viterbi_backptr_axis)
    assert INF_PARAGRAPH not in message and "nan" not in message, message
    assert "path:" in message and "back" in message.split("got:")[1], message


def tables_log_start_without_k(tagged_sentences, tags, words, k):
    """add-k tables whose log_start leaves out the smoothing (k) in its numerator."""
    start, trans, emit = hmm_students.student_tables_in_probabilities(
        tagged_sentences, tags, words, k
    )
    first = np.zeros(len(tags))
    for sentence in tagged_sentences:
        if sentence:
            first[tags.index(sentence[0][1])] += 1
    with np.errstate(divide="ignore"):
        return np.log(first / (first.sum() + k * len(tags))), np.log(trans), np.log(emit)


def test_a_log_start_error_gets_no_hint_about_a_ij():
    message = _message(hmm.check_addk_tables, tables_log_start_without_k)
    advice = message.split("got:")[1]
    assert "log_start[" in advice and "pi_j" in advice, message
    assert "a_ij" not in advice and "c(i, .)" not in advice, message


def continuation_types_without_end(bigram_counts, word):
    """Counts types (right), but leaves the bigrams that end in '</s>' out of N1+(. .)."""
    types = {key for key, c in bigram_counts.items() if c > 0}
    before = len({v for v, w in types if w == word})
    return before / len([1 for _, w in types if w != "</s>"])


def test_code_that_counts_types_is_not_told_to_count_types():
    message = _message(ngram.check_continuation_prob, continuation_types_without_end)
    advice = message.split("got:")[1]
    assert "types" not in advice and "tokens" not in advice and "occurs twice" not in advice
    assert "N1+(. am) / N1+(. .) = 1 / " in advice, message


# ------------------------------------------------------------ every part: one wrong answer each


def count_once_over_the_corpus(sentences, n):
    """The right n-grams, each counted once however often it occurs."""
    counts = ngram_students.count_with_defaultdict(sentences, n)
    return dict.fromkeys(counts, 1)


def mle_plus_one(counts, context, word):
    c = ngram_students.c_context(counts, tuple(context))
    return counts.get(tuple(context) + (word,), 0) / (c + 1) if c else 0.0


def addk_v_plus_one(counts, context, word, vocab_size, k):
    return ngram_students.addk_float32(counts, context, word, vocab_size + 1, k)


def perplexity_log10(prob, sentences, n):
    total, N = 0.0, 0
    for s in sentences:
        padded = ["<s>"] * (n - 1) + list(s) + ["</s>"]
        for i in range(n - 1, len(padded)):
            total += math.log10(prob(tuple(padded[i - n + 1 : i]), padded[i]))
            N += 1
    return math.exp(-total / N)


def kn_discount_twice(bigram_counts, context, word, vocab_size, d):
    return ngram_students.kn(bigram_counts, context, word, vocab_size, 2 * d)


def forward_divided_by_length(s, a, e):
    return hmm_students.student_forward(s, a, e) / len(e)


def posterior_uniform(s, a, e):
    return np.ones(e.shape) / e.shape[1]


def accuracy_rate_complement(tagger, tagged_sentences):
    return hmm_students.accuracy_swapped_rates(tagger, tagged_sentences)


def count_plus_one(rules, words, start="S"):
    return parsing_students.count(rules, words, start) + 1


def parseval_exact_whole_trees(gold, predicted):
    return parsing_students.parseval_with(gold, predicted, whole_trees=True) | {"exact": 0.0}


def token_index_row_from_one(i, j, layout):
    row, column = rnn_students.token_index(i, j, layout)
    return row, column + 1 if layout == "batch-first" else column


def rnn_cell_half_bias(x_t, h_prev, W_xh, W_hh, b_h):
    return np.tanh(W_xh @ x_t + W_hh @ h_prev + b_h / 2)


def lstm_h_without_output_gate(x_t, h_prev, c_prev, weight_ih, weight_hh, bias_ih, bias_hh):
    h, c = rnn_students.lstm_cell(x_t, h_prev, c_prev, weight_ih, weight_hh, bias_ih, bias_hh)
    return torch.tanh(c), c


def softmax_mask_after(scores, mask):
    return torch.softmax(scores, dim=-1) * mask


def dot_attention_context_from_scores(query, keys, mask):
    weights, _ = seq2seq_students.dot_attention(query, keys, mask)
    return weights, torch.zeros(keys.shape[0], keys.shape[2], dtype=keys.dtype)


def greedy_second_best(step, state, max_len):
    out, y = [], 1
    for t in range(max_len):
        log_probs, state = step(y, state)
        order = torch.argsort(log_probs, descending=True).tolist()
        y = order[1] if t == 0 and order[1] != 2 else order[0]
        if y == 2:
            break
        out.append(y)
    return out


def beam_score_halved(step, state, beam_size, max_len, length_penalty):
    ys, score = seq2seq_students.beam_search(step, state, beam_size, max_len, length_penalty)
    return ys, score / 2


def attention_weights_squared(q, k, v, mask=None):
    out, weights = tf_students.attention(q, k, v, mask)
    return out, weights**2


def split_heads_last_head_zero(x, H):
    out = tf_students.split_heads(x, H).clone()
    out[:, -1] = 0.0
    return out


def merge_heads_heads_reversed(x):
    return tf_students.merge_heads(x.flip(1))


def layer_norm_of_x_plus_abs(x, gamma, beta, eps=1e-5):
    return tf_students.layer_norm(x + x.abs(), gamma, beta, eps)


def pe_cos_shifted(T, D):
    pe = tf_students.sinusoidal_encoding(T, D)
    pe[:, 1::2] = np.cos(np.arange(T)[:, None] + 1.0) * (pe[:, 1::2] != 0)
    return pe


def edit_distance_first_column_zero(a, b):
    """Levenshtein, with d[i][0] = 0 (deleting the first i symbols taken as free)."""
    d = [[j if i == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i, j in itertools.product(range(1, len(a) + 1), range(1, len(b) + 1)):
        d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
    return d[-1][-1]


def gru_candidate_without_tanh(x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh):
    wx_r, wx_z, wx_n = (x_t @ weight_ih.T + bias_ih).chunk(3, dim=1)
    W_r, W_z, W_n = weight_hh.chunk(3)
    b_r, b_z, b_n = bias_hh.chunk(3)
    r = torch.sigmoid(wx_r + h_prev @ W_r.T + b_r)
    z = torch.sigmoid(wx_z + h_prev @ W_z.T + b_z)
    n = wx_n + r * (h_prev @ W_n.T + b_n)  # the mistake: no tanh
    return (1 - z) * n + z * h_prev


def additive_sigmoid(query, keys, W_1, W_2, v):
    return seq2seq_students.additive_scores(query, keys, W_1, W_2, v, act=torch.sigmoid)


def attention_twice_the_scale(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / (2 * math.sqrt(q.shape[-1]))
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def architecture_sentiment_per_word(task):
    return "many-to-many" if task == "sentiment classification" else rnn_students.ANSWERS[task]


# (check, wrong answer, what the message must show, what it must not say)
ROWS = [
    (ngram.check_count_ngrams, count_once_over_the_corpus,
     ["expected 2, got 1", "right n-grams with wrong counts"], ["'</s>' is a word", "count it"]),
    (ngram.check_mle_prob, mle_plus_one, ["c(context, word) / c(context) = 2 / 3"],
     ["not 1/2"]),
    (ngram.check_addk_prob, addk_v_plus_one, ["(c(context, word) + k) / (c(context) + k |V|)"],
     ["use k, not 1"]),
    (ngram.check_perplexity, perplexity_log10, ["N = 1 words + 1 '</s>'"], ["never '<s>'"]),
    (ngram.check_kn_bigram_prob, kn_discount_twice,
     ["hint: the parts of the right answer", "lambda(I) = d N1+(I .) / c(I)"],
     ["times P_KN(am)\n"]),
    (hmm.check_forward, forward_divided_by_length, ["the right alpha_1 = log pi + log b(o_1)"],
     [INF_PARAGRAPH, "row i of log_trans"]),
    (hmm.check_forward_backward, posterior_uniform,
     ["the first row that differs is t = 0"], [INF_PARAGRAPH, "row i of log_trans"]),
    (hmm.check_tagging_accuracy, accuracy_rate_complement,
     ["'unknown_rate'", "hint: unknown_rate = the tokens whose word is not in tagger.vocab_"],
     ["mean of the sentences"]),
    (parsing.check_cky_recognize, parsing_students.cky_closure_on_words_only,
     ["cell (0, 3)", "has VP but not S", "unit rule S -> VP"], ["chain of unit rules"]),
    (parsing.check_leftmost_derivation, parsing_students.derivation_children_reversed,
     ["form 2 should be", "hint: form 2 rewrites 'NP', symbol 1 of form 1"], []),
    (parsing.check_viterbi_cky, parsing_students.viterbi_log10,
     ["hint: compare your chart of best log probabilities (Viterbi)", "cell (0, 1): NP "], []),
    (parsing.check_count_parses, count_plus_one, ["you counted more trees than there are"],
     ["int64", "Catalan"]),
    (parsing.check_inside, lambda rules, words: parsing_students.inside_right(rules, words) / 2,
     ["hint: compare your chart of inside log probabilities", "cell (0, 1): NP "], []),
    (parsing.check_parseval, parseval_exact_whole_trees,
     ["'exact'", "hint: exact = the share of sentences"], ["micro-averages"]),
    (rnn.check_token_index, token_index_row_from_one,
     ["the column (index 1) is wrong", "position j = 2"], ["subtract 1"]),
    (rnn.check_rnn_cell_forward, rnn_cell_half_bias, ["h_t[0] = tanh(a) with a ="],
     ["h_prev @ W_hh"]),
    (rnn.check_lstm_cell, lstm_h_without_output_gate,
     ["c_t is right, so the gates i, f, g are: look at h_t = o_t * tanh(c_t)"],
     ["forget gate has nothing to keep"]),
    (rnn.check_gru_cell, gru_candidate_without_tanh,
     ["torch's gates are r = ", "n = tanh(W_in x_t + b_in + r * (W_hn h_prev + b_hn)) = "],
     ["from a zero state"]),
    (rnn.check_architecture_for, architecture_sentiment_per_word,
     ["expected 'many-to-one', got 'many-to-many'", "hint: sentiment classification: the whole"],
     []),
    (seq2seq.check_additive_scores, additive_sigmoid,
     ["hint: score[0, 0] = v . tanh(u) with u = W_1 query[0] + W_2 keys[0, 0] ="], []),
    (seq2seq.check_masked_softmax, softmax_mask_after, ["sum to 1"], ["however large"]),
    (seq2seq.check_dot_attention, dot_attention_context_from_scores,
     ["the weights are right: the context is sum_j a_j k_j"], ["scores 1 and 2"]),
    (seq2seq.check_greedy_decode, greedy_second_best,
     ["at step 0 (after <s>) the most probable next id is 3"], ["greedy takes 'a'"]),
    (seq2seq.check_beam_search, beam_score_halved,
     ["the right score is (sum of log P) / |y|^0 with |y| = 2"], ["beam_size 1 is greedy"]),
    (seq2seq.check_edit_distance, edit_distance_first_column_zero,
     ["hint: the right table", "d[3] = [3]"], ["delete everything"]),
    (tf.check_scaled_dot_product_attention, attention_weights_squared,
     ["the weights of query [0] sum to"], ["by hand"]),
    (tf.check_scaled_dot_product_attention, attention_twice_the_scale,
     ["hint: the weights of query [0] are the softmax over the keys of q k^T / sqrt(d_k), "
      "d_k = 4: the right row is"], []),
    (tf.check_split_heads, split_heads_last_head_zero,
     ["[0, 1, 0, 1] is feature 1 of head 1 at position 0: x[0, 0, 3]"], []),
    (tf.check_merge_heads, merge_heads_heads_reversed, ["of head 0 at position 0: x[0, 0, 0, "],
     []),
    (tf.check_layer_norm, layer_norm_of_x_plus_abs,
     ["hint: the vector x[", "(the mean of the squared deviations, over its 5 features)"], []),
    (tf.check_sinusoidal_encoding, pe_cos_shifted, ["is the cos of pair i = 0: cos(0 / "],
     ["sin(0) = 0"]),
]  # fmt: skip


@pytest.mark.parametrize(
    "check, student, shows, never", ROWS, ids=[row[0].__name__ for row in ROWS]
)
def test_a_wrong_answer_is_told_what_it_shows_not_what_its_case_was_for(
    check, student, shows, never
):
    message = _message(check, student)
    assert "likely mistake" not in message, message  # none of these is a known mistake
    advice = message.split("\ngot:", 1)[1]  # what the message says after the inputs
    for fragment in shows:
        assert fragment in advice, (fragment, message)
    for fragment in never:
        assert fragment not in advice, (fragment, message)


def viterbi_cky_last_wins(rules, words):
    return parsing_students.viterbi_last_wins(rules, words)


def test_a_right_score_with_a_wrong_tree_is_shown_the_nodes_that_differ():
    message = _message(parsing.check_viterbi_cky, viterbi_cky_last_wins)
    assert "nodes (label, first word, end) of the best tree that yours lacks" in message, message
    assert "store (rule, split) only when a candidate beats" in message, message


STRANGE = [  # (check, an answer no one would write, read by a hint's code)
    (seq2seq.check_greedy_decode, lambda step, state, max_len: [99]),
    (seq2seq.check_greedy_decode, lambda step, state, max_len: [-5]),
    (seq2seq.check_beam_search, lambda *args: ([99, -1], 0.0)),
    (parsing.check_parseval, lambda gold, predicted: {"precision": 1.0}),
    (parsing.check_cky_recognize, lambda rules, words, start: {(7, 8): {"S"}, (-1, 0): ["X"]}),
    (parsing.check_viterbi_cky, lambda rules, words: (("S", 3, [None]), -1.0)),
    (parsing.check_leftmost_derivation, lambda tree: [("S",), 5]),
    (ngram.check_count_ngrams, lambda sentences, n: {(): 1, ("a",) * 9: 2}),
    (hmm.check_tagging_accuracy, lambda tagger, sentences: {"all": 1.0}),
    (hmm.check_addk_tables, lambda *args: (np.zeros(1), np.zeros((9, 9)), [[np.nan]])),
    (rnn.check_token_index, lambda i, j, layout: (-3, 10**9)),
    (tf.check_split_heads, lambda x, H: torch.full((1, 1, 1, 1), math.nan)),
]  # fmt: skip


@pytest.mark.parametrize("check, student", STRANGE, ids=[row[0].__name__ for row in STRANGE])
def test_a_hint_never_breaks_on_a_strange_answer(check, student):
    """The code that draws a hint from the answer reads the student's values (ids, cells, keys):
    on answers no one would write it still ends in a CheckFailed with expected and got, never
    in an error of the checker's own."""
    message = _message(check, student)
    assert "expected" in message and "got" in message, message
