"""The detector's exact shortcuts for cost on realistic text (issue 33): each is held to the full
path it replaces, on random texts."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from fairgate.policies.detection.persons.features import _GAP_KEEP, Doc, context_features
from fairgate.policies.detection.persons.tagger import NameTagger

# words, names, suffixes, casing and the punctuation the features read
WORDS = ("Ayşe", "KAYA'YI", "hanım", "Sayın", "Dr.", "Ö.", "mehmet", "Yıldız", "Holding", "ve", "ile", "eşim", "adım",
         "Berfin", "AKTAŞ", "Zeynep'in", "merhaba", "ÇALIŞAN", "Kürt", "öğrenci", "Garbis", "de", "Ali")
GAPS = (" ", ", ", ". ", "\n", " - ", ": ", " (", ") ", "; ", " 12 ", "  ", "\n\n", "!", "?", " \" ", " / ", " " * 45)
TEXTS = st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(GAPS)), max_size=14).map(
    lambda pairs: "".join(w + g for w, g in pairs)) | st.text(max_size=80)


def _gap_full(doc: Doc, i: int) -> str:
    """`Doc.gap` as it read before its marks were cached."""
    s = doc.spans[i][0]
    lo = doc.spans[i - 1][1] if i else max(0, s - 12)
    if s - lo > 40:
        return "~"
    kept = _GAP_KEEP.sub("", doc.text[lo:s]).replace("\n", "N")
    kept = re.sub("[0-9]+", "#", kept)
    return (kept[:3] or "_") if i else "^" + kept[:2]


_TAGGER = NameTagger()


@settings(max_examples=400, deadline=None)
@given(TEXTS)
def test_the_tagger_s_cached_context_rows_are_the_context_features_rows(text: str) -> None:
    doc = Doc.of(text)
    for i in range(len(doc.spans)):
        assert doc.gap(i) == _gap_full(doc, i)
        full = [r for r in map(_TAGGER.vocab.get, context_features(doc, i)) if r is not None]
        assert _TAGGER.context_rows(doc, i) == full, (text, i)
