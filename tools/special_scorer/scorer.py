"""The special-category word scorer's run time, in numpy (trained by `train.py`). Not part of the
detector: wired into `policies/detection/special_categories.py` from commit 4129c12 to 148e702, it
found nothing on unseen text once kept from everyday words (see `models/special-scorer/README.md`).

It reads one word at a time, by its folded form, its prefixes, suffixes and character 4-grams,
and says which KVKK Article 6 category (or none) the word belongs to: a softmax over a sparse
linear layer. Text is read as whitespace chunks; a chunk's decision is cached; a new chunk is
scored only if its first five letters are a stem the model leans to a category on.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import numpy as np

from fairgate.policies.detection.gazetteer import fold_key
from fairgate.policies.detection.persons.lexicon import common_words, lexicon_flags

OUT = Path("/tmp/special_scorer")  # where `train.py` writes the weights by default
# a word of four letters or more, with an apostrophe's case suffix ("Alzheimer'ı")
WORD = re.compile(r"(?<![\w'’])[^\W\d_]{4,}(?:['’][^\W\d_]{1,8})?(?![\w'’])")
_APOSTROPHES = str.maketrans("", "", "'’")
_PUNCTUATION = ".,;:!?()[]{}<>\"'«»“”‘’…*#|-–—/=+`~"  # stripped from a whitespace chunk's ends
_CACHE_SIZE = 1 << 16
MAX_NEW_WORDS = 4096  # chunks not in the cache read per text: a 1 MB random-letter soup costs no more
# the probability a word needs ("polisomnografi"), chosen on a part left out of training; an
# everyday word is never taken: the model cannot see its sense ("kolon", "parti", "kemik")
THRESHOLD = 0.5
# a verb's inflection (folded): the spans' verbs ("kullanıyorum", "giyiyordu", "yattı") are no
# category words whatever the model learnt from them ("Ben iPhone kullanıyorum"); a noun's
# "-ydı" is ("Ecevitçiydi")
_VERB = re.compile(r"(?:[iu]yo(?:r\w{0,5})?|(?<!y)[dt][iu](?:m|n|k|niz|nuz|lar|ler)?|m[iu]s(?:im|sin|iz|lar|ler|tir)?|"
                   r"[ae]c[ae][kg]\w{0,4}|m[ae]k|[ae]bil\w{0,6}|m[ae](?:s[iu]\w{0,4})?)$")  # (and "-me": "görme")
_STEM = 5  # letters of the stem prefix that gates scoring
_STEM_LEAN = 0.5  # how far a stem's weights lean from "none" to a category to be worth scoring


def word_key(word: str) -> str:
    """A word as the model reads it: folded (`gazetteer.fold_key`), apostrophes dropped."""
    return fold_key(word).translate(_APOSTROPHES)


def word_features(key: str) -> list[str]:
    """Feature strings of one folded word: itself, its prefixes of 3-8 letters (stems), its
    suffixes of 2-5 letters and its character 4-grams with word boundaries."""
    bounded = f"<{key}>"
    return [f"w={key}", *(f"p={key[:n]}" for n in range(3, min(len(key), 8) + 1)),
            *(f"s={key[-n:]}" for n in range(2, 6) if n < len(key)),
            *(f"g={bounded[i : i + 4]}" for i in range(len(bounded) - 3))]


class SpecialScorer:
    """Category and probability of folded words; one vectorised pass for the uncached ones."""

    def __init__(self, folder: Path = OUT) -> None:
        names = (folder / "features.txt").read_text(encoding="utf-8").split("\n")
        self.vocab = {name: i for i, name in enumerate(names) if name}
        with np.load(folder / "weights.npz") as w:
            self.table = w["table"].astype(np.float32)  # [features, classes]
            self.bias = w["bias"].astype(np.float32)  # [classes]
            self.classes: tuple[str, ...] = tuple(str(c) for c in w["classes"])  # "none" first
        # stems that lean to a category: a word starting with none of them is "none" unscored
        # (a new word costs a set lookup, not features and a table pass)
        lean = (self.table[:, 1:].max(axis=1) - self.table[:, 0]) > _STEM_LEAN
        self._stems = frozenset(n[2:] for n, i in self.vocab.items() if n.startswith("p=") and len(n) == 2 + _STEM
                                and lean[i])
        self._cache: dict[str, tuple[int, float]] = {}  # folded word -> (class, probability)
        self._decided: dict[str, tuple[int, int, int]] = {}  # chunk -> (class or 0, word start, end)
        self._flagged: set[str] = set()  # the chunks decided for a category

    def classify(self, keys: list[str]) -> list[tuple[int, float]]:
        """(class index, probability) of each folded word; class 0 is "none"."""
        cache = self._cache
        new = [k for k in dict.fromkeys(keys) if k not in cache] if keys else []
        if new:
            if len(cache) + len(new) > _CACHE_SIZE:
                cache.clear()
            cache.update(zip(new, self._score(new), strict=True))
        return [cache[k] for k in keys]

    def terms(self, text: str) -> list[tuple[str, int, int]]:
        """(category, start, end) of every word of `text` taken for a category (`THRESHOLD`,
        no given name or surname). Text is read as whitespace chunks, and each distinct chunk is
        decided once and cached: a text costs a split and two set operations, and only chunks
        not seen lately cost more (at most `MAX_NEW_WORDS` of them per text; the rest of a text
        that long is left to the lexicons)."""
        chunks = set(text.split())
        decided = self._decided  # (not `chunks - decided.keys()`: that walks every cached key)
        new = [c for c in chunks if c not in decided][:MAX_NEW_WORDS]
        if new:
            self._decide(new)
        hits = chunks & self._flagged
        out: list[tuple[str, int, int]] = []
        for chunk in hits:
            cls, lead, trail = decided[chunk]
            pos = text.find(chunk)
            while pos != -1:
                end = pos + len(chunk)
                if (pos == 0 or text[pos - 1].isspace()) and (end == len(text) or text[end].isspace()):
                    out.append((self.classes[cls], pos + lead, pos + trail))
                pos = text.find(chunk, end)
        return sorted(out, key=lambda t: t[1])

    def _decide(self, chunks: list[str]) -> None:
        if len(self._decided) + len(chunks) > _CACHE_SIZE:
            self._decided.clear()
            self._flagged.clear()
        words: list[tuple[str, str, int]] = []  # (chunk, word, its start in the chunk)
        for chunk in chunks:
            word = chunk.strip(_PUNCTUATION)
            if len(word) >= 4 and WORD.fullmatch(word) and word_key(word[:_STEM + 1])[:_STEM] in self._stems:
                words.append((chunk, word, chunk.index(word)))
            else:
                self._decided[chunk] = (0, 0, 0)
        keys = [word_key(w) for _, w, _ in words]
        flags = lexicon_flags()
        for (chunk, word, lead), key, (cls, p) in zip(words, keys, self.classify(keys), strict=True):
            take = (cls and p >= THRESHOLD and not dictionary_word(key) and not _VERB.search(key)
                    and not _name_letters(flags, word))
            self._decided[chunk] = (cls if take else 0, lead, lead + len(word))
            if take:
                self._flagged.add(chunk)

    def _score(self, keys: list[str]) -> list[tuple[int, float]]:
        vocab = self.vocab
        rows: list[int] = []
        starts: list[int] = []
        for key in keys:
            starts.append(len(rows))
            rows += [r for r in map(vocab.get, word_features(key)) if r is not None]
        if not rows:
            return [(0, 1.0)] * len(keys)
        empty = np.diff(np.append(starts, len(rows))) == 0  # a word with no known feature
        if empty[-1]:
            rows.append(0)  # reduceat needs every start inside the array; zeroed below
        summed = np.add.reduceat(self.table.take(rows, axis=0), starts, axis=0)  # [words, classes]
        summed[empty] = 0.0
        logits = summed + self.bias
        logits -= logits.max(axis=1, keepdims=True)
        probs = np.exp(logits)
        probs /= probs.sum(axis=1, keepdims=True)
        best = probs.argmax(axis=1)
        return list(zip(best.tolist(), probs[np.arange(len(keys)), best].tolist(), strict=True))


@lru_cache(maxsize=1)
def default_scorer() -> SpecialScorer:
    return SpecialScorer()


def dictionary_word(key: str) -> bool:
    """The folded word is an everyday word with a suffix or none: a lemma of the common-word
    dictionary starts it, leaving at most four letters after a lemma of two ("izimi"), seven
    after one of three ("şubesine",
    "giriyor"), eight after one of four ("babamınkiler") and any number after a longer one
    ("kemoterapinin", "tülbent"): a technical word seldom starts with a long everyday word."""
    common = common_words()
    return any(key[:n] in common and len(key) - n <= (4 if n == 2 else 7 if n == 3 else 8 if n == 4 else len(key))
               for n in range(2, len(key) + 1))


def _name_letters(flags: dict[str, str], word: str) -> bool:
    """The word (before an apostrophe) is a given name, surname or place: "Kurt" folds to
    "Kürt"'s key, and "Silivri" is a prison only to the rows the model learnt from."""
    letters = flags.get(fold_key(re.split("['’]", word, maxsplit=1)[0]), "")
    return any(c in letters for c in "gspv")


def learned_terms(text: str) -> list[tuple[str, int, int]]:
    """`SpecialScorer.terms` of the shipped model."""
    return default_scorer().terms(text)
