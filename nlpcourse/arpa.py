"""ARPA back-off files: writing the course's n-gram models, and reading and scoring any ARPA file.

Chapter 1, section "ARPA files: the format every toolkit reads" (``book/ngrams.md``). The ARPA
format (from the CMU-Cambridge toolkit; read by KenLM, SRILM, Kaldi and most speech decoders)
stores a *back-off* model: for every listed n-gram ``g = h w`` a log10 probability ``log10 p(g)``
and, for n-grams that are contexts of longer ones, a log10 back-off weight ``log10 b(g)``. The
probability of ``w`` after the history ``h`` is, eq. (ngram-backoff),

    P(w | h) = p(h w)                  if ``h w`` is listed,
               b(h) * P(w | h')        otherwise (``h'`` drops the first word of ``h``),

with ``b(h) = 1`` when ``h`` is not listed, ending at the unigrams, which list every word.

**Interpolated models in back-off form.** Interpolated Kneser-Ney and interpolated absolute
discounting (:class:`nlpcourse.ngram.NGramLM`) give a word ``w`` unseen after a seen context ``h``
the probability ``gamma(h) * P(w | h')`` with ``gamma(h) = d N1+(h .) / sum_v c_KN(h v)``, the
same weight for every unseen ``w``; an unseen context backs off fully. That is exactly the
back-off form: list each seen n-gram with its *interpolated* probability, and give each seen
context the back-off weight ``b(h) = gamma(h)``. No probability changes, only its storage.
Add-k has a back-off form too (the lower orders are uniform, ``b(h) = kV / (c(h) + kV)``). MLE and
Jelinek-Mercer interpolation with fixed weights have none (an unseen context in them does not
back off to a distribution that is itself a listed lower-order model), so :func:`write_arpa`
refuses them with the reason.

**Sentence starts.** The course pads a sentence with ``n-1`` symbols ``<s>``; toolkits start from
a single ``<s>`` and look up ``<s> w1``, ``<s> w1 w2``, ... So an n-gram that starts with ``<s>``
is written once, with one ``<s>``, and holds the course model's probability for that position (the
padded ``<s> <s> w1`` and the toolkit's ``<s> w1`` are the same event: the first word). Its
back-off weight is the product of the ``gamma`` of the padded contexts it stands for. ``<s>``
itself is listed with log10 probability -99 (it is never predicted), as toolkits do.

Reading (:func:`read_arpa`) builds, per order, a hash table of integer keys in which an m-gram
``u1 ... um`` is ``row of its suffix (u2 ... um) among the (m-1)-grams * |V| + u1`` (a reversed
trie in arrays). Scoring a whole corpus is then one vectorised hash look-up per order for the
longest listed n-gram ending at each word, and one per order for the back-off weights of its
context.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from nlpcourse.lm import BOS, EOS, UNK, check_sentences
from nlpcourse.ngram import NGramLM

LOG10_ZERO = -99.0  # the conventional log10 probability of <s>, which is never predicted
_DIGITS = 9  # significant digits written: ARPA readers hold float32, so nothing is lost


# ------------------------------------------------------------------------------------ writing


def _digits(keys: np.ndarray, base: int, m: int) -> np.ndarray:
    """Integer m-gram keys back to their word ids, shape (K, m), first word first."""
    ids = np.zeros((len(keys), m), dtype=np.int64)
    rest = keys.copy()
    for j in range(m - 1, -1, -1):
        ids[:, j] = rest % base
        rest //= base
    return ids


def _padded(model: NGramLM, ids: np.ndarray) -> np.ndarray:
    """Contexts of width n-1 whose last columns are ``ids[:, :-1]``, padded on the left with <s>."""
    n, bos = model.order, model.base_ - 1
    ctx = np.full((len(ids), n - 1), bos, dtype=np.int64)  # (K, n-1)
    width = ids.shape[1] - 1
    if width:
        ctx[:, n - 1 - width :] = ids[:, :-1]
    return ctx


def _gamma(model: NGramLM, ctx: np.ndarray, m: int) -> np.ndarray:
    """The weight of the back-off term of order m for contexts ``ctx`` (M, n-1): ``gamma(h)``
    for a seen context, 1 for an unseen one (it backs off fully)."""
    key = model._key(ctx, None, m)
    if model.smoothing == "add-k":
        if m < model.order:
            return np.ones(len(ctx))  # uniform backs off to uniform
        total = model.contexts_[m].lookup(key, "total")
        V = len(model.vocab)
        return model.k * V / (total + model.k * V)
    if m < model.order and model.smoothing == "kneser-ney":
        contexts = model.continuation_contexts_[m]
    else:
        contexts = model.contexts_[m]
    total = contexts.lookup(key, "total")
    types = contexts.lookup(key, "types")
    return np.where(total > 0, model.discount * types / np.maximum(total, 1), 1.0)


def _level_prob(model: NGramLM, ctx: np.ndarray, w: np.ndarray, top: int) -> np.ndarray:
    """P(w | last top-1 words of ctx) of the model's order-``top`` distribution."""
    if model.smoothing == "add-k":
        if top < model.order:
            return np.full(len(w), 1 / len(model.vocab))  # add-k's lower orders are uniform
        return model._prob_ids(ctx, w)
    return model._discounted(ctx, w, top=top)


Level = tuple[np.ndarray, np.ndarray, np.ndarray]  # ids (K, m), log10 p (K,), log10 b (K,)


def _unique_rows(ids: np.ndarray) -> np.ndarray:
    return np.unique(ids, axis=0) if len(ids) else ids


def _entries(model: NGramLM) -> list[Level]:
    """Per order m, the listed m-grams as ids (in the model's numbering, ``base_ - 1`` standing
    for <s>) with their log10 probabilities and log10 back-off weights."""
    n, B, bos = model.order, model.base_, model.base_ - 1
    V = len(model.vocab)

    # 1. n-grams without <s>: the ones each order lists
    plain: list[np.ndarray] = [np.arange(V, dtype=np.int64)[:, None]]  # every word is a unigram
    for m in range(2, n + 1):
        if model.smoothing == "kneser-ney" and m < n:
            keys = model.continuation_[m].keys
        else:
            keys = model.counts_[m].keys
        ids = _digits(keys, B, m)
        plain.append(ids[(ids != bos).all(axis=1)])
    if model.smoothing == "add-k" and n > 1:  # every part of a top n-gram, for the look-ups
        top = plain[n - 1]
        for j in range(2, n):
            parts = [top[:, o : o + j] for o in range(n - j + 1)]
            plain[j - 1] = _unique_rows(np.concatenate([plain[j - 1], *parts]))

    # 2. sentence starts: the padded n-grams <s>^a v (a >= 1) become "<s> v", one per length
    padded = _digits(model.counts_[n].keys, B, n) if n > 1 else np.zeros((0, 1), np.int64)
    n_bos = (padded == bos).sum(axis=1)  # (K,)

    levels: list[Level] = []
    for m in range(1, n + 1):
        ids = plain[m - 1]
        ctx = _padded(model, ids)
        logp = np.log10(_level_prob(model, ctx, ids[:, -1], top=m))
        if m > 1:  # "<s> v" with |v| = m-1: the padded model's probability of v's last word
            rows = padded[n_bos == n - m + 1]  # (K, n): <s>^(n-m+1) v
            ids = np.concatenate([ids, rows[:, n - m :]])
            logp = np.concatenate([logp, np.log10(model._prob_ids(rows[:, :-1], rows[:, -1]))])
        else:
            ids = np.concatenate([ids, [[bos]]])
            logp = np.append(logp, LOG10_ZERO)  # <s> is never predicted
        logb = np.zeros(len(ids))
        if m < n:  # b(g): gamma of the next order up; for "<s> v" the padded orders' product
            ctx = np.full((len(ids), n - 1), bos, dtype=np.int64)
            ctx[:, n - 1 - m :] = ids
            starts = ids[:, 0] == bos  # "<s> v" stands for the contexts <s>...<s> v
            b = _gamma(model, ctx, m + 1)
            for k in range(m + 2, n + 1):
                b = np.where(starts, b * _gamma(model, ctx, k), b)
            logb = np.log10(b)
        levels.append((ids, logp, logb))
    return levels


def write_arpa(model: NGramLM, path: str | Path) -> Path:
    """Write ``model`` as an ARPA back-off file (see the module docstring); returns the path.

    Supported: Kneser-Ney, absolute discounting and add-k. MLE and fixed-weight interpolation
    have no back-off form and raise ``ValueError`` saying why.
    """
    model._check_fitted()
    if model.smoothing == "mle":
        raise ValueError(
            "an MLE model gives probability 0 to every n-gram it never saw, and an unseen context "
            "has no distribution at all: ARPA needs a probability for every word after every "
            "history, so an MLE model cannot be written (use add-k or Kneser-Ney)"
        )
    if model.smoothing == "interpolated":
        raise ValueError(
            "fixed-weight (Jelinek-Mercer) interpolation has no exact back-off form: where a "
            "context is unseen the model re-weights the shorter orders, which a back-off file "
            "cannot express without listing every unseen context; use Kneser-Ney or absolute "
            "discounting, which interpolate and back off at once"
        )
    levels = _entries(model)
    names = model.vocab + [BOS]  # id base_-1 is <s>
    bad = [w for w in names if not w or any(c.isspace() for c in w)]
    if bad:
        raise ValueError(f"ARPA words are separated by white space, so {bad[0]!r} cannot be one")
    path = Path(path)
    with path.open("w", encoding="utf-8", newline="\n") as f:
        f.write("\n\\data\\\n")
        for m, (ids, _, _) in enumerate(levels, start=1):
            f.write(f"ngram {m}={len(ids)}\n")
        for m, (ids, logp, logb) in enumerate(levels, start=1):
            f.write(f"\n\\{m}-grams:\n")
            _write_section(f, names, ids, logp, logb if m < len(levels) else None)
        f.write("\n\\end\\\n")
    return path


def _write_section(f, names: list[str], ids: np.ndarray, logp: np.ndarray, logb) -> None:
    """One section, a line per n-gram: log10 p, a tab, the words separated by spaces, and a tab
    and the log10 back-off weight except at the highest order (KenLM insists on the tabs)."""
    columns = [pd.Series(pd.Categorical.from_codes(ids[:, j], names)) for j in range(ids.shape[1])]
    words = columns[0].astype(str).str.cat([c.astype(str) for c in columns[1:]], sep=" ")
    if logb is None:
        rows = zip(logp.tolist(), words.tolist(), strict=True)
        f.writelines(map(f"%.{_DIGITS}g\t%s\n".__mod__, rows))
    else:
        rows = zip(logp.tolist(), words.tolist(), logb.tolist(), strict=True)
        f.writelines(map(f"%.{_DIGITS}g\t%s\t%.{_DIGITS}g\n".__mod__, rows))


# ------------------------------------------------------------------------------------ reading


class ArpaLM:
    """A back-off language model read from an ARPA file, scored with arrays.

    The same scoring interface as :class:`~nlpcourse.ngram.NGramLM` (``prob``, ``logprob``,
    ``perplexity``) plus :meth:`log10_probs`, the per-token log10 probabilities toolkits print.
    A sentence starts after one ``<s>`` and ends with ``</s>``; a word not in the file's
    vocabulary reads as ``<unk>`` (probability 0 if the file has no ``<unk>``).

    Attributes: ``order``, ``vocab`` (every unigram, ``<s>`` included), ``index_``, and per order
    m a hash table ``keys_[m]`` of the n-gram keys with ``log10_p_[m]`` and ``log10_b_[m]``
    in the same rows.
    """

    def __init__(self, order: int, vocab: list[str], levels: list[Level]):
        self.order = order
        self.vocab = vocab
        self.index_ = {w: i for i, w in enumerate(vocab)}
        V = len(vocab)
        self.keys_: dict[int, pd.Index] = {}  # per order, a hash table of the n-gram keys
        self.log10_p_: dict[int, np.ndarray] = {}
        self.log10_b_: dict[int, np.ndarray] = {}
        for m, (ids, logp, logb) in enumerate(levels, start=1):
            if m == 1:
                if not (ids[:, 0] == np.arange(len(ids))).all():
                    raise ValueError("the unigrams must be numbered 0, 1, ... in file order")
                keys = ids[:, 0]
            else:
                suffix, found = self._find(ids[:, 1:])
                if not found.all():
                    g = ids[int(np.flatnonzero(~found)[0])]
                    raise ValueError(
                        f"the ARPA file lists the {m}-gram {' '.join(vocab[u] for u in g)!r} but "
                        f"not its suffix {' '.join(vocab[u] for u in g[1:])!r}; a back-off file "
                        "needs it (KenLM's lmplz and unpruned SRILM models always have it)"
                    )
                keys = suffix * V + ids[:, 0]
            self.keys_[m] = pd.Index(keys)
            if not self.keys_[m].is_unique:
                raise ValueError(f"the ARPA file lists some {m}-gram twice")
            self.log10_p_[m] = np.asarray(logp, dtype=float)
            self.log10_b_[m] = np.asarray(logb, dtype=float)

    def _find(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows of the m-grams ``ids`` (K, m) in order m's table, and whether each is listed."""
        K, m = ids.shape
        row = ids[:, -1].copy()  # a unigram's row is its word id
        found = np.ones(K, dtype=bool)
        for j in range(2, m + 1):
            row, hit = self._extend(row, ids[:, m - j], j)
            found &= hit
        return row, found

    def _extend(self, row: np.ndarray, left: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
        """From the rows of (m-1)-grams, the rows of the m-grams with ``left`` in front of them
        (a hash look-up of the key ``row * |V| + left``), and whether each is listed."""
        i = self.keys_[m].get_indexer(row * len(self.vocab) + left)
        return np.maximum(i, 0), i >= 0

    def _encode(self, word: str) -> int:
        return self.index_.get(word, self.index_.get(UNK, -1))

    def _stream(self, sentences: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
        """The corpus as one id stream, each sentence preceded by n-1 ``<s>`` and followed by
        ``</s>``, and the positions of the predicted tokens in it (each word and each ``</s>``)."""
        n, bos = self.order, self.index_[BOS]
        lengths = np.array([len(s) + 1 for s in sentences], dtype=np.int64)  # words and </s>
        ends = np.cumsum(lengths) - 1  # (S,) where each sentence's </s> goes among the tokens
        unk = self.index_.get(UNK, -1)  # unknown words read as <unk> (-1: the file has none)
        flat = list(itertools.chain.from_iterable(sentences))
        words = np.fromiter(map(self.index_.get, flat, itertools.repeat(unk)), np.int64, len(flat))
        tokens = np.full(int(lengths.sum()), self.index_[EOS], dtype=np.int64)  # (M,)
        is_word = np.ones(len(tokens), dtype=bool)
        is_word[ends] = False
        tokens[is_word] = words
        sentence = np.repeat(np.arange(len(sentences)), lengths)  # (M,) which sentence
        t = np.arange(len(tokens)) + (n - 1) * (sentence + 1)  # (M,) position in the stream
        stream = np.full(len(tokens) + (n - 1) * len(sentences), bos, dtype=np.int64)
        stream[t] = tokens
        return stream, t

    def _log10_stream(self, stream: np.ndarray, t: np.ndarray) -> np.ndarray:
        """log10 P(stream[t] | the n-1 ids before it) for the positions ``t``, eq. (ngram-backoff).

        For every position p, follow the longest listed n-gram ending at p leftwards, one hash
        look-up per order: ``row[m][p]``, ``alive[m][p]`` (is the m-gram ending at p listed?).
        The probability of the token at t is the listed one of its longest n-gram, times the
        back-off weights of the contexts that are longer; the context of length j of the token at
        t is the j-gram ending at t-1, whose row the same pass found at p = t-1.
        """
        n = self.order
        known = stream >= 0
        row = {1: np.where(known, stream, 0)}  # a unigram's row is its word id
        alive = {1: known}
        for m in range(2, n + 1):
            left = np.full(len(stream), -1, dtype=np.int64)  # the word m-1 places to the left
            left[m - 1 :] = stream[: len(stream) - m + 1]
            row[m], hit = self._extend(row[m - 1], np.maximum(left, 0), m)
            alive[m] = alive[m - 1] & hit & (left >= 0)
        best = self.log10_p_[1][row[1][t]]  # (M,)
        longest = np.ones(len(t), dtype=np.int64)
        for m in range(2, n + 1):
            best = np.where(alive[m][t], self.log10_p_[m][row[m][t]], best)
            longest = np.where(alive[m][t], m, longest)
        for j in range(1, n):  # b(context of length j), for the contexts longer than the n-gram
            used = alive[j][t - 1] & (j >= longest)
            best = best + np.where(used, self.log10_b_[j][row[j][t - 1]], 0.0)
        return np.where(known[t], best, -np.inf)

    def log10_probs(self, sentences: Iterable[Sequence[str]]) -> np.ndarray:
        """log10 P of every predicted token (each word and each sentence's ``</s>``), in order."""
        if isinstance(sentences, str) or not isinstance(sentences, list):
            sentences = check_sentences(sentences, "log10_probs")
        if not all(type(s) is list for s in sentences):
            sentences = check_sentences(sentences, "log10_probs")  # names what is wrong
        stream, t = self._stream(sentences)
        flat_types = set(map(type, itertools.chain.from_iterable(sentences)))
        specials = np.isin(stream[t], [self.index_[BOS]]).any() or not flat_types <= {str}
        if specials or (stream[t] == self.index_[EOS]).sum() != len(sentences):
            check_sentences(sentences, "log10_probs")  # raises, saying which token is wrong
        return self._log10_stream(stream, t)

    def prob(self, word: str, context: Sequence[str] = ()) -> float:
        """P(word | context); a context shorter than order-1 starts the sentence."""
        n = self.order
        ids = [self.index_[BOS]] * (n - 1) + [self._encode(u) for u in context]
        stream = np.array(ids[len(ids) - n + 1 :] + [self._encode(word)], dtype=np.int64)
        return float(10 ** self._log10_stream(stream, np.array([n - 1]))[0])

    def logprob(self, word: str, context: Sequence[str] = ()) -> float:
        """Natural log of :meth:`prob`."""
        with np.errstate(divide="ignore"):
            return float(np.log(self.prob(word, context)))

    def perplexity(self, sentences: Iterable[Sequence[str]]) -> float:
        """Perplexity with every word and each ``</s>`` counted, eq. (ngram-ppl)."""
        logs = self.log10_probs(sentences)
        return float(10 ** (-logs.mean()))

    def __repr__(self) -> str:
        sizes = ", ".join(f"{m}-grams: {len(k)}" for m, k in self.keys_.items())
        return f"ArpaLM(order={self.order}, {sizes})"


_HEADER = re.compile(r"ngram\s+(\d+)\s*=\s*(\d+)")
_SECTION = re.compile(r"^\\(\d+)-grams:\s*$", re.MULTILINE)


def _read_section(text: str, m: int, where: str) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """The lines of one m-grams section: word columns, log10 p and log10 b (0 where absent)."""
    try:
        table = pd.read_csv(
            io.StringIO(text),
            sep=r"\s+",
            header=None,
            names=list(range(m + 2)),
            dtype={j: str for j in range(1, m + 1)},
            keep_default_na=False,
            na_values={0: [], m + 1: [""]},
            engine="c",
        )
        logp = table[0].to_numpy(dtype=float)
        logb = table[m + 1].fillna(0.0).to_numpy(dtype=float)
    except (ValueError, pd.errors.ParserError) as err:
        raise ValueError(
            f"{where}: the {m}-grams section is not lines of a log10 probability, {m} word(s) and "
            f"an optional back-off weight ({err})"
        ) from None
    words = [table[j].to_numpy(dtype=object) for j in range(1, m + 1)]
    if any((w == "").any() for w in words):
        raise ValueError(f"{where}: a line of the {m}-grams section has fewer than {m} words")
    return words, logp, logb


def read_arpa(path: str | Path) -> ArpaLM:
    """Read an ARPA back-off file (KenLM's ``lmplz``, SRILM's ``ngram-count``, :func:`write_arpa`).

    Raises ``ValueError`` saying what is wrong when the file is not ARPA or its counts disagree.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    begin, end = text.find("\\data\\"), text.find("\\end\\")
    if begin < 0 or end < 0:
        raise ValueError(f"{path} is not an ARPA file: it needs a \\data\\ and an \\end\\ line")
    sections = list(_SECTION.finditer(text, begin, end))
    counts = {
        int(a): int(b)
        for a, b in _HEADER.findall(text, begin, sections[0].start() if sections else end)
    }
    if not sections or not counts:
        raise ValueError(f"{path} is not an ARPA file: no ngram counts or no n-gram sections")
    if [int(s.group(1)) for s in sections] != list(range(1, len(sections) + 1)):
        raise ValueError(f"{path}: the n-gram sections are not 1, 2, ... in order")
    levels = []
    vocab: pd.Index | None = None
    for k, section in enumerate(sections):
        m = k + 1
        stop = sections[k + 1].start() if k + 1 < len(sections) else end
        words, logp, logb = _read_section(text[section.end() : stop], m, str(path))
        if counts.get(m) != len(logp):
            raise ValueError(
                f"{path}: the header says ngram {m}={counts.get(m)}, the file lists {len(logp)}"
            )
        if vocab is None:
            vocab = pd.Index(words[0])
            if not vocab.is_unique:
                raise ValueError(f"{path}: a word is listed twice among the unigrams")
        ids = np.stack([vocab.get_indexer(w) for w in words], axis=1)  # (K, m)
        if (ids < 0).any():
            row, col = np.argwhere(ids < 0)[0]
            raise ValueError(f"{path}: the {m}-gram word {words[col][row]!r} is not a unigram")
        levels.append((ids.astype(np.int64), logp, logb))
    assert vocab is not None
    for symbol in (BOS, EOS):
        if symbol not in vocab:
            raise ValueError(f"{path}: the unigrams must include {symbol}")
    return ArpaLM(len(levels), list(vocab), levels)
