"""The language-model layer that the n-gram, recurrent, sequence-to-sequence and transformer
chapters share (chapters 1, 4, 5 and 6).

One copy of the conventions every language model of the book follows, so that their perplexities
can be set side by side, and one training loop for every neural language model. The conventions
are derived in chapter 1 (``book/ngrams.md``, sections "Sentence boundaries", "Unknown words" and
"Perplexity"); the training devices in chapter 4 (``book/rnn.md``, "Recurrent language models on
Brown") and chapter 6 (``book/transformer.md``, "Training and generation"). Based on Jurafsky &
Martin, *Speech and Language Processing* (3rd ed. draft), chapter 3, Bengio et al. (2003) for the
vocabulary rule, Pascanu, Mikolov & Bengio (2013) for clipping and Vaswani et al. (2017) for the
warm-up.

API (what a new chapter uses)
-----------------------------

Symbols and errors
    ``BOS, EOS, UNK = "<s>", "</s>", "<unk>"``; ``EOS_ID = 0``, ``UNK_ID = 1``;
    ``BENGIO_MIN_COUNT = 4``; ``IGNORE_INDEX = -100`` (a target that is not counted);
    :class:`NotFittedError`, raised by every estimator of the package that is used before ``fit``.

Vocabulary and ids
    :func:`build_vocab` ``(sentences, min_count) -> vocab``, a list of words: ``["</s>", "<unk>"]``
    and then every training word seen at least ``min_count`` times, most frequent first.
    :func:`encode` ``(sentences, vocab) -> ids`` (lists of ints; unknown words become ``UNK_ID``;
    no ``</s>`` added), :func:`decode` ``(ids, vocab) -> words``.
    :func:`check_sentences` turns anything that is not a list of token lists into a clear error.

Perplexity
    :func:`perplexity_from_nll` ``(total_nll, N)``: ``exp(total_nll / N)``, eq. (ngram-ppl) and
    (lm-ppl), from the summed negative log-likelihood (natural log) of ``N`` predictions.

Neural language models
    A *language model* here is any ``torch.nn.Module`` with an integer attribute ``vocab_size``
    (V) whose forward maps word ids ``(B, T)`` (``torch.long``) to next-word scores (logits)
    ``(B, T, V)``: ``logits[b, t]`` scores the word that follows ``ids[b, t]``. A recurrent model
    also takes and returns a state, ``model(ids, state) -> (logits, state)`` (``state=None`` at
    the start); a model without state (a transformer) returns the logits alone. A model may
    compute its own summed loss, ``loss(ids, targets) -> (nll, n)``, or, if it has the attribute
    ``recurrent = True``, ``loss(ids, targets, state) -> (nll, n, state)``. If the model has a
    ``reset_parameters()`` method, seeded training calls it (otherwise every submodule's).

    :func:`stream` ``(sentences_ids) -> ids``: the corpus as one stream ``</s> s_1 </s> ...``.
    :func:`batchify` ``(sentences_ids, B) -> (inputs, targets)``, each ``(B, L)``: the stream
    cut into ``B`` rows read in parallel; :func:`windows` ``(sentences_ids, T)``: cut into
    windows of ``T`` positions.
    :func:`evaluate_perplexity` ``(model, sentences_ids, batch_size, bptt, stride=None) ->
    float``: segments read in order (state carried), or overlapping windows (``stride``).
    :func:`train_lm` ``(model, train_ids, valid_ids, steps, ...) -> history``, the training of
    chapters 4 and 6 on :func:`nlpcourse.training.train_loop` (the loop chapter 5 shares):
    teacher forcing, segments of ``bptt`` positions (truncated BPTT for a recurrent model) or
    shuffled windows (``shuffle=True``, a transformer), the model's own
    ``loss()`` if it has one (an adaptive softmax), gradient clipping, Adam at a fixed learning
    rate or with warm-up (:func:`warmup_lr`); returns the learning curve, and logs it to a
    :class:`nlpcourse.records.Recorder` if one is given.

Conventions, fixed for the whole book
-------------------------------------

* A sentence ``w_1 ... w_m`` is predicted as ``w_1, ..., w_m, </s>``: ``m + 1`` predictions.
  ``</s>`` is predicted and counted in perplexity, ``<s>`` never (it is context only).
* The vocabulary ``V`` is every training word seen at least ``min_count`` times, plus ``</s>``
  and ``<unk>``; every other word, in training or test text, is read as ``<unk>``.
  ``min_count=4`` is the rule of Bengio et al. (2003): words seen 3 times or fewer become one
  symbol. ``<s>`` is not in ``V``: an n-gram model gives it the id ``|V|``.
* Perplexity ``PPL = exp(-(1/N) sum_i log P(w_i | w_<i))`` with natural logs; a zero
  probability makes it infinite.
* A neural model reads a corpus as one **continuous stream** ``</s> w w w </s> w w </s> ...``:
  the first ``</s>`` is context only and stands for ``<s>``; each later ``</s>`` is both predicted
  and the start context of the next sentence. (The n-gram models pad every sentence with
  ``<s>`` instead, so they never see across a sentence boundary; chapter 4 discusses this.)

Departures: ``vocab`` lists ``</s>`` and ``<unk>`` first (ids 0 and 1, whatever ``|V|``), for the
n-gram models as well; before this module the n-gram chapter listed them last. The order of the
ids changes no probability, only the order of :meth:`NGramLM.distribution
<nlpcourse.ngram.NGramLM.distribution>` and so which words a seeded sample draws.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nlpcourse.training import Logger

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
EOS_ID, UNK_ID = 0, 1  # the special words come first in every vocabulary
LOG10_ZERO = -99.0  # the log10 probability ARPA files give <s>, which is never predicted
BENGIO_MIN_COUNT = 4  # Bengio et al. (2003): words seen 3 times or fewer become <unk>
IGNORE_INDEX = -100  # a target that is not counted (padding); torch's cross_entropy default
SPECIALS = (BOS, EOS, UNK)


class NotFittedError(ValueError, AttributeError):
    """An estimator was used before ``fit``. (A ``ValueError`` and an ``AttributeError``, as in
    scikit-learn, so code that catches either keeps working.)"""


# ------------------------------------------------------------------------ sentences and ids


def check_sentences(sentences: Iterable[Sequence[str]], where: str) -> list[list[str]]:
    """The sentences as a list of token lists, or a clear error saying what was wrong.

    Every token must be a string, and the sentences must be bare: the models add ``<s>`` and
    ``</s>`` themselves. ``where`` names the caller in the message.
    """
    if isinstance(sentences, str):
        raise TypeError(f"{where}: expected a list of sentences (token lists), got one string")
    out = []
    for i, s in enumerate(sentences):
        if isinstance(s, str) or not isinstance(s, Sequence):
            raise TypeError(
                f"{where}: sentence {i} is a {type(s).__name__}, not a list of tokens "
                f"(split text into words first, e.g. text.split())"
            )
        s = list(s)
        if not set(map(type, s)) <= {str}:  # the fast test; the loop only to name the token
            for w in s:
                if not isinstance(w, str):
                    raise TypeError(f"{where}: sentence {i} has a token {w!r} that is not a string")
        for w in (BOS, EOS):
            if w in s:
                raise ValueError(
                    f"{where}: sentence {i} contains {w!r}; pass bare sentences, the model adds "
                    "<s> and </s> itself"
                )
        out.append(s)
    return out


def build_vocab(sentences: Iterable[Sequence[str]], min_count: int = BENGIO_MIN_COUNT) -> list[str]:
    """The vocabulary rule: ``["</s>", "<unk>"]`` followed by every word seen at least
    ``min_count`` times in ``sentences``, most frequent first (ties in alphabetical order).

    ``min_count=1`` keeps every training word; ``BENGIO_MIN_COUNT = 4`` is the rule of Bengio et
    al. (2003). The symbols ``<s>``, ``</s>`` and ``<unk>`` are never counted as words.
    """
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise ValueError(f"min_count must be an integer >= 1, got {min_count!r}")
    if isinstance(sentences, str):
        raise TypeError("build_vocab: expected a list of sentences (token lists), got one string")
    counts = Counter(w for s in sentences for w in s)
    kept = sorted(
        (w for w, c in counts.items() if c >= min_count and w not in SPECIALS),
        key=lambda w: (-counts[w], w),
    )
    return [EOS, UNK] + kept


def _check_vocab(vocab: Sequence[str]) -> None:
    if list(vocab[:2]) != [EOS, UNK]:
        raise ValueError("vocab must start with '</s>', '<unk>': build it with build_vocab()")


def encode(sentences: Iterable[Sequence[str]], vocab: Sequence[str]) -> list[list[int]]:
    """Sentences of words to sentences of ids in ``vocab``; words outside it become ``UNK_ID``.

    No ``</s>`` is added here: :func:`batchify` (and the n-gram model) add it.
    """
    _check_vocab(vocab)
    index = {w: i for i, w in enumerate(vocab)}
    encoded = []
    for i, s in enumerate(sentences):
        if isinstance(s, str):
            raise TypeError(f"sentence {i} is a string; split it into words first")
        encoded.append([index.get(w, UNK_ID) for w in s])
    return encoded


def decode(ids: Iterable[int], vocab: Sequence[str]) -> list[str]:
    """Ids back to words (the inverse of :func:`encode` for one sentence, ``<unk>`` staying)."""
    words = []
    for i in ids:
        i = int(i)
        if not 0 <= i < len(vocab):
            raise ValueError(f"id {i} is outside the vocabulary [0, {len(vocab)})")
        words.append(vocab[i])
    return words


def perplexity_from_nll(total_nll: float, N: int) -> float:
    """Perplexity from the summed negative log-likelihood of ``N`` predictions, eq. (ngram-ppl):
    ``PPL = exp(total_nll / N)`` with ``total_nll = -sum_i log P(w_i | w_<i)`` (natural log).

    An infinite ``total_nll`` (a prediction of probability 0) gives an infinite perplexity."""
    if N < 1:
        raise ValueError(f"perplexity needs at least one prediction, got N = {N!r}")
    return math.exp(total_nll / N) if math.isfinite(total_nll) else math.inf


# ------------------------------------------------------------------- neural language models
# torch is imported inside the functions below, so that the n-gram chapter does not need it.


def stream(sentences_ids: Sequence[Sequence[int]]) -> Any:
    """The corpus as one stream ``</s> s_1 </s> s_2 </s> ...`` (N+1,) (torch.long): the first
    ``</s>`` stands for ``<s>`` and is context only; every word and every sentence's ``</s>`` is
    predicted once (N predictions)."""
    import torch

    ids = [EOS_ID]
    for s in sentences_ids:
        ids.extend(s)
        ids.append(EOS_ID)
    if len(ids) == 1:
        raise ValueError("got no sentences: the stream would hold nothing to predict")
    return torch.tensor(ids, dtype=torch.long)  # (N+1,)


def batchify(sentences_ids: Sequence[Sequence[int]], batch_size: int) -> tuple[Any, Any]:
    """The stream ``</s> s_1 </s> s_2 </s> ...`` (:func:`stream`) cut into ``batch_size`` rows.

    Returns ``inputs`` and ``targets``, both ``(B, L)`` with ``L = ceil(N / B)`` (torch.long): row
    b holds the b-th piece of the stream, read left to right, and ``targets[b, t]`` is the word
    that follows ``inputs[b, t]``. Every word and every sentence's ``</s>`` is a target exactly
    once (N in all); the first ``</s>`` is only an input. The end of the last row is padded with
    targets ``IGNORE_INDEX``, which are not counted.
    """
    import torch.nn.functional as F

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
    ids = stream(sentences_ids)  # (N+1,)
    inputs, targets = ids[:-1], ids[1:]  # (N,) each: targets[i] follows inputs[i]
    N, B = len(targets), batch_size
    L = -(-N // B)  # ceil(N / B)
    inputs = F.pad(inputs, (0, L * B - N), value=EOS_ID)  # (L*B,)
    targets = F.pad(targets, (0, L * B - N), value=IGNORE_INDEX)  # (L*B,)
    return inputs.view(B, L), targets.view(B, L)  # (B, L) each


def windows(sentences_ids: Sequence[Sequence[int]], T: int) -> tuple[Any, Any]:
    """The stream (:func:`stream`) cut into non-overlapping windows of ``T`` positions: inputs and
    targets ``(n, T)``, ``targets[i, t]`` the word after ``inputs[i, t]``. The last partial
    window is dropped. (What :func:`train_lm` shuffles with ``shuffle=True``.)"""
    if T < 1:
        raise ValueError(f"T must be >= 1, got {T!r}")
    ids = stream(sentences_ids)  # (N+1,)
    n = (len(ids) - 1) // T
    if n < 1:
        raise ValueError(f"the stream ({len(ids)} tokens) is shorter than one window T+1={T + 1}")
    inputs = ids[: n * T].view(n, T)  # (n, T)
    targets = ids[1 : n * T + 1].view(n, T)  # (n, T)
    return inputs, targets


def warmup_lr(step: int, peak: float, warmup: int) -> float:
    """The learning rate at ``step`` (from 1), eq. (tf-warmup): a linear warm-up to ``peak`` over
    ``warmup`` steps, then a decay as ``1/sqrt(step)`` (Vaswani et al. 2017, with the peak given
    directly): ``peak * min(step / warmup, sqrt(warmup / step))``."""
    if step < 1 or warmup < 1:
        raise ValueError(f"need step >= 1 and warmup >= 1, got step = {step}, warmup = {warmup}")
    return peak * min(step / warmup, math.sqrt(warmup / step))


def _vocab_size(model: Any) -> int:
    V = getattr(model, "vocab_size", None)
    if not isinstance(V, int):
        raise TypeError(
            f"{type(model).__name__} has no integer attribute vocab_size: a language model here "
            "maps ids (B, T) to logits (B, T, V) and says its V (see nlpcourse.lm)"
        )
    return V


def _check_ids(model: Any, sentences_ids: Sequence[Sequence[int]], name: str) -> None:
    V = _vocab_size(model)
    largest = max((max(s) for s in sentences_ids if len(s)), default=0)
    smallest = min((min(s) for s in sentences_ids if len(s)), default=0)
    if smallest < 0 or largest >= V:
        raise ValueError(
            f"{name} has word ids outside [0, V) = [0, {V}) "
            f"(min {smallest}, max {largest}): encode it with the model's vocabulary"
        )


def _run(model: Any, ids: Any, state: Any) -> tuple[Any, Any]:
    """``model(ids)`` or ``model(ids, state)`` -> ``(logits (B, T, V), state or None)``."""
    out = model(ids) if state is None else model(ids, state)
    return out if isinstance(out, tuple) else (out, None)


def _detach(state: Any) -> Any:
    """Cut the graph behind a state, keeping its values: truncated BPTT."""
    if state is None:
        return None
    return tuple(s.detach() for s in state) if isinstance(state, tuple) else state.detach()


def reset_parameters(model: Any) -> None:
    """Draw the model's parameters again: ``model.reset_parameters()`` if it has one, otherwise
    ``reset_parameters()`` of every submodule that has one, in the order of ``model.modules()``."""
    if hasattr(model, "reset_parameters"):
        model.reset_parameters()
        return
    for module in model.modules():
        if module is not model and hasattr(module, "reset_parameters"):
            module.reset_parameters()


def _segment_nll(logits: Any, y: Any) -> Any:
    """Summed cross-entropy of logits ``(B, T, V)`` against targets ``(B, T)``, padding not
    counted."""
    import torch.nn.functional as F

    V = logits.shape[-1]
    return F.cross_entropy(
        logits.reshape(-1, V),  # (B*T, V)
        y.reshape(-1),  # (B*T,)
        ignore_index=IGNORE_INDEX,
        reduction="sum",
    )


def states_nll(
    h: Any, targets: Any, output: Any, ignore_index: int = IGNORE_INDEX
) -> tuple[Any, int]:
    """Summed negative log-likelihood of ``targets`` (B, T) from a model's last states ``h``
    (B, T, D) through its ``output`` layer, and the number of counted targets (those not equal to
    ``ignore_index``): what a model's own ``loss()`` returns. ``output`` is a linear map to V
    scores (a full softmax) or a ``torch.nn.AdaptiveLogSoftmaxWithLoss``, which computes only the
    clusters of the targets, not all V scores."""
    import torch.nn.functional as F
    from torch import nn

    y = targets.reshape(-1)  # (B*T,)
    keep = y != ignore_index
    h, y = h.reshape(len(y), -1)[keep], y[keep]  # (N, D), (N,)
    if isinstance(output, nn.AdaptiveLogSoftmaxWithLoss):
        nll = -output(h, y).output.sum()  # output: log P(y) of each row
    else:
        nll = F.cross_entropy(output(h), y, reduction="sum")
    return nll, int(keep.sum())


def _nll(model: Any, x: Any, y: Any, state: Any) -> tuple[Any, int, Any]:
    """Summed negative log-likelihood of the targets ``y`` (B, T) given ``x`` (B, T), the number
    of counted targets, and the model's new state. A model with a ``loss(ids, targets) -> (nll,
    n)`` method of its own (an adaptive softmax, say) computes it, a recurrent one (attribute
    ``recurrent = True``) as ``loss(ids, targets, state) -> (nll, n, state)``; otherwise the
    cross-entropy of its logits."""
    own_loss = getattr(model, "loss", None)
    if callable(own_loss):
        if getattr(model, "recurrent", False):  # loss(ids, targets, state) -> (nll, n, state)
            return own_loss(x, y, state)
        nll, n = own_loss(x, y)
        return nll, n, None
    logits, state = _run(model, x, state)  # (B, T, V)
    return _segment_nll(logits, y), int((y != IGNORE_INDEX).sum()), state


def evaluate_perplexity(
    model: Any,
    sentences_ids: Sequence[Sequence[int]],
    batch_size: int = 32,
    bptt: int = 35,
    stride: int | None = None,
) -> float:
    """Perplexity, eq. (lm-ppl), of ``model`` on sentences of word ids (without ``</s>``).

    ``N`` counts every word and each sentence's ``</s>``; the opening ``</s>`` (standing for
    ``<s>``) is context only. Two ways to read the stream:

    * ``stride=None``: as ``batch_size`` pieces in parallel (:func:`batchify`), each from a zero
      state, ``bptt`` positions at a time; a recurrent model's state is carried from one segment
      to the next (``batch_size=1`` then reads the stream as one unbroken sequence), a model
      without state sees each segment alone.
    * ``stride`` given (a model without state, such as a transformer): windows of ``bptt``
      positions starting every ``stride`` positions, ``batch_size`` windows per forward pass;
      each prediction is counted once, in the first window where it is not among the first
      ``bptt - stride`` positions (any position of the first window), so every prediction after
      the first window has at least ``bptt - stride`` words of context. ``stride = bptt`` gives
      non-overlapping windows.
    """
    import torch

    _check_ids(model, sentences_ids, "sentences_ids")
    if bptt < 1:
        raise ValueError(f"bptt must be >= 1, got {bptt!r}")
    if stride is not None and not 1 <= stride <= bptt:
        raise ValueError(f"need 1 <= stride <= bptt, got stride = {stride}, bptt = {bptt}")
    was_training = model.training
    model.eval()
    with torch.no_grad():
        if stride is None:
            total_nll, N = _segments_nll(model, sentences_ids, batch_size, bptt)
        else:
            total_nll, N = _windows_nll(model, sentences_ids, batch_size, bptt, stride)
    model.train(was_training)
    return perplexity_from_nll(total_nll, N)


def _segments_nll(
    model: Any, sentences_ids: Sequence[Sequence[int]], batch_size: int, bptt: int
) -> tuple[float, int]:
    inputs, targets = batchify(sentences_ids, batch_size)  # (B, L) each
    total_nll, N, state = 0.0, 0, None
    for start in range(0, inputs.shape[1], bptt):
        x = inputs[:, start : start + bptt]  # (B, T)
        y = targets[:, start : start + bptt]  # (B, T)
        nll, n, state = _nll(model, x, y, state)
        total_nll += nll.item()
        N += n
    return total_nll, N


def _windows_nll(
    model: Any, sentences_ids: Sequence[Sequence[int]], batch_size: int, T: int, stride: int
) -> tuple[float, int]:
    import torch

    ids = stream(sentences_ids)  # (N+1,)
    N = len(ids) - 1
    starts = list(range(0, max(N - T, 0) + 1, stride))
    if starts[-1] + T < N:
        starts.append(N - T if N > T else 0)
    width = min(T, N)
    total, counted, done = 0.0, 0, 0  # done: predictions 0..done-1 have been counted
    for b in range(0, len(starts), batch_size):
        group = starts[b : b + batch_size]
        x = torch.stack([ids[s : s + width] for s in group])  # (b, T)
        y = torch.stack([ids[s + 1 : s + width + 1] for s in group])  # (b, T)
        for i, s in enumerate(group):  # predictions already counted are not counted again
            y[i, : max(done - s, 0)] = IGNORE_INDEX
            done = s + width
        nll, n, _ = _nll(model, x, y, None)
        total += nll.item()
        counted += n
    if counted != N:
        raise RuntimeError(f"counted {counted} predictions instead of {N}")
    return total, N


def train_lm(
    model: Any,
    train_ids: Sequence[Sequence[int]],
    valid_ids: Sequence[Sequence[int]] | None,
    steps: int,
    batch_size: int = 32,
    bptt: int = 35,
    lr: float = 1e-2,
    clip: float = 1.0,
    eval_every: int = 100,
    seed: int | None = 0,
    recorder: Logger | None = None,
    show_progress: bool = False,
    *,
    warmup: int = 0,
    shuffle: bool = False,
    eval_stride: int | None = None,
    eval_at_start: bool = True,
    log_first: int = 0,
    max_minutes: float | None = None,
) -> dict[str, list[float]]:
    """Train ``model`` for ``steps`` updates and return its learning curve. The one training loop
    of the book's neural language models: chapter 4's recurrent ones and chapter 6's transformers.

    * Teacher forcing: the input at every position is the true previous word, never a sample.
    * Segments (``shuffle=False``): the training stream (:func:`batchify`, ``batch_size`` rows)
      is read ``bptt`` positions at a time. A recurrent model's state is carried from one segment
      to the next but detached (truncated BPTT), so gradients flow back at most ``bptt`` steps; a
      model without state sees each segment alone. After the end of the stream it starts again
      from a zero state.
    * Windows (``shuffle=True``, for a model without state): the stream is cut into windows of
      ``bptt`` positions (:func:`windows`), put in a random order (a ``torch.Generator`` seeded
      with ``seed``) at each pass, and each update takes the next ``batch_size`` of them.
    * Each update: the mean negative log-likelihood of the batch's predictions (the model's own
      ``loss(ids, targets) -> (summed nll, n)`` if it has one, as an adaptive softmax does;
      otherwise the cross-entropy of its logits), gradient norm clipped to ``clip`` (Pascanu et al.
      2013; ``torch.nn.utils.clip_grad_norm_``), one Adam step with learning rate ``lr`` (1e-2 suits
      the short runs of chapter 4: a few hundred steps), or, with ``warmup > 0``, the schedule
      :func:`warmup_lr` peaking at ``lr`` after ``warmup`` steps (chapter 6).
    * ``seed``: when not None, ``torch.manual_seed(seed)`` and :func:`reset_parameters` first, so
      the same call gives the same curve (training itself has no other randomness unless the
      model has dropout or ``shuffle``); with ``seed=None`` training continues from the current
      parameters.

    Returns lists, one entry per evaluation (after step 0 unless ``eval_at_start=False``, every
    ``eval_every`` steps, and after the last): ``step``; ``words``, the number of predictions
    trained on so far; ``seconds`` of training so far (evaluation not included); ``train_loss``
    and ``train_ppl``, the mean negative log-likelihood of the predictions trained on since the
    previous entry and its perplexity (nan at step 0); ``valid_ppl``, :func:`evaluate_perplexity`
    on ``valid_ids`` (with ``stride=eval_stride``; nan if ``valid_ids`` is None). Each entry is
    also passed to ``recorder.log(step, ...)`` (a :class:`nlpcourse.records.Recorder`) when one is
    given, as is ``train_loss`` after each of the first ``log_first`` updates (so a recorded run's
    first losses can be checked). ``show_progress`` draws a progress bar on stderr, and
    ``max_minutes`` stops training at the first evaluation after that much training time
    (evaluation not counted; both for long recorded runs). The loop itself is the book's one
    training loop, :func:`nlpcourse.training.train_loop`; this function supplies its batches.
    """
    import torch

    from nlpcourse.training import train_loop

    for name, value in (("steps", steps), ("bptt", bptt), ("eval_every", eval_every)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value!r}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup!r}")
    _check_ids(model, train_ids, "train_ids")
    if valid_ids is not None:
        _check_ids(model, valid_ids, "valid_ids")
    if seed is not None:
        torch.manual_seed(seed)
        reset_parameters(model)
    if shuffle:
        inputs, targets = windows(train_ids, bptt)  # (n, T) each
        generator = torch.Generator().manual_seed(0 if seed is None else seed)
        order = torch.randperm(len(inputs), generator=generator)
    else:
        inputs, targets = batchify(train_ids, batch_size)  # (B, L) each
        order = None
    # where the next batch starts, the state carried to it, the order of the windows
    read: dict[str, Any] = {"position": 0, "state": None, "order": order}

    def batch_loss(step: int) -> tuple[Any, float]:
        """The mean negative log-likelihood of the next batch, and its number of predictions."""
        start = read["position"]
        if shuffle:
            if start + batch_size > len(inputs):  # a new pass over the windows
                read["order"], start = torch.randperm(len(inputs), generator=generator), 0
            batch = read["order"][start : start + batch_size]
            read["position"] = start + batch_size
            x, y = inputs[batch], targets[batch]  # (B, T) each
        else:
            if start >= inputs.shape[1]:  # the end of the stream: start again from a zero state
                start, read["state"] = 0, None
            x = inputs[:, start : start + bptt]  # (B, T)
            y = targets[:, start : start + bptt]  # (B, T)
            read["position"] = start + bptt
        nll, n, read["state"] = _nll(model, x, y, _detach(read["state"]))  # summed over n targets
        return nll / n, n

    history = _History(model, valid_ids, batch_size, bptt, eval_stride, recorder)
    if eval_at_start:
        history.log(0, train_loss=math.nan, seconds=0.0, seen=0)
    train_loop(
        model, batch_loss, steps, lr, clip, eval_every, history,
        schedule=(lambda step: warmup_lr(step, 1.0, warmup)) if warmup else None,
        log_first=log_first, max_minutes=max_minutes, show_progress=show_progress,
    )  # fmt: skip
    return history.history


class _History:
    """:func:`train_lm`'s logger: each point of the training loop with the training perplexity
    and the validation perplexity, kept as lists and passed on to ``recorder``."""

    def __init__(
        self,
        model: Any,
        valid_ids: Sequence[Sequence[int]] | None,
        batch_size: int,
        bptt: int,
        stride: int | None,
        recorder: Logger | None,
    ):
        self.model, self.valid_ids, self.recorder = model, valid_ids, recorder
        self.batch_size, self.bptt, self.stride = batch_size, bptt, stride
        keys = ("step", "words", "seconds", "train_loss", "train_ppl", "valid_ppl")
        self.history: dict[str, list[float]] = {key: [] for key in keys}

    def log(self, step: int, **values: Any) -> None:
        if "seen" not in values:  # the loss of one of the first steps: passed on as it is
            if self.recorder is not None:
                self.recorder.log(step, **values)
            return
        mean_nll = values["train_loss"]
        entry = {
            "step": step,
            "words": values["seen"],
            "seconds": values["seconds"],
            "train_loss": mean_nll,
            "train_ppl": math.exp(mean_nll),
            "valid_ppl": (
                math.nan
                if self.valid_ids is None
                else evaluate_perplexity(
                    self.model, self.valid_ids, self.batch_size, self.bptt, self.stride
                )
            ),
        }
        for key, value in entry.items():
            self.history[key].append(value)
        if self.recorder is not None:
            self.recorder.log(step, **{k: v for k, v in entry.items() if k != "step"})
