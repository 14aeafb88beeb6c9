"""The learned special-category word scorer, run in numpy (trained by `tools/special_scorer/train.py`).

The category lexicons (`special_categories_terms`) know the words someone listed; people write
others ("apendektomi", "polisomnografi", "Ecevitçiydi", "Hanefi"). This model reads one word
at a time, by its folded form, its prefixes (Turkish stems: "ameliyat" in "ameliyatından"),
suffixes ("-ektomi", "-oskopi", "-cılık") and character 4-grams, and says which KVKK Article 6
category (or none) the word belongs to: a softmax over a sparse linear layer (one row of
per-category weights per known feature, summed). Whether the word is about a person is not its
business: `special_categories` sends its words through the same person-link rules as the
lexicon's.

A word's score depends on the word alone, so it is cached: prose repeats its words, and only a
word not seen lately costs features and a table lookup. Weights: `data/special_scorer/` (model
card: `models/special-scorer/README.md`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import numpy as np

from fairgate.policies.detection.gazetteer import fold_key
from fairgate.policies.detection.persons.lexicon import common_words, lexicon_flags

_FOLDER = Path(__file__).with_name("data") / "special_scorer"
# a word of four letters or more, with an apostrophe's case suffix ("Alzheimer'ı")
WORD = re.compile(r"(?<![\w'’])[^\W\d_]{4,}(?:['’][^\W\d_]{1,8})?(?![\w'’])")
_APOSTROPHES = str.maketrans("", "", "'’")
_CACHE_SIZE = 1 << 16
MAX_NEW_WORDS = 4096  # words not in the cache scored per text: a 1 MB random-letter soup costs no more


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

    def __init__(self, folder: Path = _FOLDER) -> None:
        names = (folder / "features.txt").read_text(encoding="utf-8").split("\n")
        self.vocab = {name: i for i, name in enumerate(names) if name}
        with np.load(folder / "weights.npz") as w:
            self.table = w["table"].astype(np.float32)  # [features, classes]
            self.bias = w["bias"].astype(np.float32)  # [classes]
            self.classes: tuple[str, ...] = tuple(str(c) for c in w["classes"])  # "none" first
        self._cache: dict[str, tuple[int, float]] = {}

    def classify(self, keys: list[str]) -> list[tuple[int, float]]:
        """(class index, probability) of each folded word; class 0 is "none"."""
        cache = self._cache
        new = [k for k in dict.fromkeys(keys) if k not in cache]
        if new:
            if len(cache) + len(new) > _CACHE_SIZE:
                cache.clear()
            cache.update(zip(new, self._score(new), strict=True))
        return [cache[k] for k in keys]

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
    dictionary starts it, leaving at most seven letters ("şubesine", "partisinde", "giriyor")."""
    common = common_words()
    return any(key[:n] in common for n in range(len(key), max(2, len(key) - 7), -1))


def _name_letters(flags: dict[str, str], text: str, start: int, end: int) -> bool:
    """The word (before an apostrophe) is a given name or surname: "Kurt" folds to "Kürt"'s key,
    and names are the name tagger's to judge."""
    letters = flags.get(fold_key(re.split("['’]", text[start:end], maxsplit=1)[0]), "")
    return "g" in letters or "s" in letters


def learned_terms(text: str, threshold: tuple[float, float],
                  scorer: SpecialScorer | None = None) -> list[tuple[str, int, int]]:
    """(category, start, end) of every word of `text` the model puts in a category with
    probability >= `threshold` (the first for a word no dictionary lists, "polisomnografi"; the
    second for an everyday word, whose sense the model cannot see: "kolon", "parti"); at most
    `MAX_NEW_WORDS` words the cache has not seen are scored (the rest of a text that long is
    left to the lexicons)."""
    model = scorer or default_scorer()
    spans: list[tuple[int, int]] = []
    keys: list[str] = []
    new = 0
    cache = model._cache
    for m in WORD.finditer(text):
        key = word_key(m.group())
        if key not in cache:
            new += 1
            if new > MAX_NEW_WORDS:
                break
        spans.append(m.span())
        keys.append(key)
    out: list[tuple[str, int, int]] = []
    rare, common = threshold
    flags = lexicon_flags()
    for (start, end), key, (cls, p) in zip(spans, keys, model.classify(keys), strict=True):
        if cls and p >= rare and (p >= common or not dictionary_word(key)) and not _name_letters(flags, text, start, end):
            out.append((model.classes[cls], start, end))
    return out
