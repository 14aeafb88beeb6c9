"""The detector's exact shortcuts for cost on realistic text (issue 33): each is held to the full
path it replaces, on random texts."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairgate.policies.detection import digit_windows, identifiers
from fairgate.policies.detection.persons import non_private
from fairgate.policies.detection.persons.features import (
    _GAP_KEEP,
    Doc,
    context_features,
    token_features,
)
from fairgate.policies.detection.persons.tagger import NameTagger

# words, names, suffixes, casing and the punctuation the features read
WORDS = ("Ayşe", "KAYA'YI", "hanım", "Sayın", "Dr.", "Ö.", "mehmet", "Yıldız", "Holding", "ve", "ile", "eşim", "adım",
         "Berfin", "AKTAŞ", "Zeynep'in", "merhaba", "ÇALIŞAN", "Kürt", "öğrenci", "Garbis", "de", "Ali")
GAPS = (" ", ", ", ". ", "\n", "\t", " \t", " - ", ": ", " (", ") ", "; ", " 12 ", "  ", "\n\n", "!", "?", " \" ", " / ", " " * 45)
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


def _scores_full(doc: Doc, tokens: list[int]) -> list[float]:
    """The tagger's probabilities from every token's feature strings (`token_features`)."""
    rows: list[int] = []
    starts: list[int] = []
    for i in tokens:
        starts.append(len(rows))
        rows += [r for r in map(_TAGGER.vocab.get, token_features(doc, i)) if r is not None]
    hidden = np.maximum(np.add.reduceat(_TAGGER.table.take(rows, axis=0), starts, axis=0) + _TAGGER.bias, 0.0)
    return [1.0 / (1.0 + math.exp(min(700.0, -(x + _TAGGER.out_b)))) for x in (hidden @ _TAGGER.out_w).tolist()]


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_the_tagger_s_cached_rows_give_the_scores_of_the_feature_strings(text: str) -> None:
    doc = Doc.of(text)
    tokens = list(range(len(doc.spans)))
    if tokens:
        full = _scores_full(doc, tokens)
        assert _TAGGER.scores(doc, tokens) == full == _TAGGER.scores(doc, tokens), text  # cold, then cached


# each identifier pattern's context words and values, in the casings people type
ID_PIECES = {
    "_BIRTH": ("doğum tarihi", "DOĞUM TARİHİ", "Dogum tarihi:", "d.t.", "D. T.", "doğumlu", "doğdu", "doğdum", "born",
               "Date of birth", "DOB", "birthday", "BİRTH DATE", "d.", "(d.", "doğum günüm", "dogum_yili:", "yılında",
               "12.03.1985", "5 mayıs 79", "March 12, 1985", "03MAR1991", "1992", "1881'de", "12/03/85", "doğmuşum"),
    "_PASSPORT": ("pasaport", "PASSPORT", "Pasaport No:", "U12345678", "s 12345678", "NP7K2L8R5", "72 4419083",
                  "AB1234567", "numarası"),
    "_PLATE": ("plaka", "Plate", "ARAÇ", "aracım", "license plate", "LICENSE PLATE", "34 ABC 123", "06 FK 4821",
               "34 klm 907", "plakalı", "12 MB 512", "örnek", "35 bvk 207", "24 ghz 600", "EB-417-BB", "FR 318 KD"),
    "_VKN": ("vkn", "VERGİ NO", "vergi kimlik numarası", "v.no", "V NO", "tax id", "TAX NUMBER", "1234567890",
             "1234 567 890"),
    "_VKN_ANSWER": ("vkn", "Vergi numaranızı yazar mısınız?", "VERGİ NO", "vergi kimlik numaranız", "Müşteri:",
                    "7391016522", "- tamam yaz:"),
}
_GAPS = (" ", ": ", "\n", ", ", "", " - ", "\t", "(")


@pytest.mark.parametrize("name", sorted(ID_PIECES))
def test_the_identifier_patterns_tried_only_at_their_first_characters_match_as_before(name: str) -> None:
    # each pattern is its body behind a lookahead for the characters a match can start with
    fast = getattr(identifiers, name)
    full = re.compile(getattr(identifiers, f"{name}_BODY"), fast.flags)
    pieces = st.lists(st.tuples(st.sampled_from(ID_PIECES[name] + WORDS[:6]), st.sampled_from(_GAPS)), max_size=8)

    @settings(max_examples=300, deadline=None)
    @given(pieces.map(lambda pairs: "".join(w + g for w, g in pairs)) | st.text(max_size=60),
           st.integers(0, 20), st.integers(0, 20))
    def check(text: str, cut_lo: int, cut_hi: int) -> None:
        lo, hi = min(cut_lo, len(text)), max(min(cut_lo, len(text)), len(text) - cut_hi)
        assert [(m.span(), m.groups()) for m in fast.finditer(text, lo, hi)] == \
            [(m.span(), m.groups()) for m in full.finditer(text, lo, hi)], text

    check()


@settings(max_examples=400, deadline=None)
@given(TEXTS | st.lists(st.sampled_from(("Problem 3:", "SORU 12)", "Soru", "Alıştırma 4.", "PROBLEM", "kaç", "Ayşe",
                                         "bilye", "\n", "Kaç tane", "problem 2:"))).map(" ".join))
def test_the_join_and_worksheet_shortcuts_answer_as_their_regexes(text: str) -> None:
    doc = Doc.of(text)
    for i in range(len(doc.spans) - 1):
        end, nxt = doc.spans[i][1], doc.spans[i + 1][0]
        assert non_private.joined(doc, i) == (bool(non_private._JOIN.fullmatch(text, end, nxt)) or end == nxt)
    assert non_private.word_problem(text) == (non_private._PROBLEM_HEADER.search(text) is not None
                                              and non_private._HOW_MANY.search(text) is not None)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789 -./,:|\n\t()x\ue000\u00a0", min_size=2, max_size=300))
def test_the_digit_window_checks_answer_as_their_full_forms(text: str) -> None:
    arr = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
    isd = (arr >= 48) & (arr <= 57)
    edge = np.diff(isd.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    gs, ge = np.flatnonzero(edge == 1), np.flatnonzero(edge == -1)
    gap_s, glen = ge[:-1], gs[1:] - ge[:-1]
    full = glen <= 5  # every one of five characters looked up for every gap
    for o in range(5):
        full &= (o >= glen) | digit_windows._IS_GAP[np.minimum(arr[np.minimum(gap_s + o, len(arr) - 1)], 0xFFFF)]
    assert digit_windows._short_gaps(arr, gap_s, glen).tolist() == full.tolist()
    digits = (arr[isd] - 48).astype(np.int32)
    if len(digits) < 20:
        return
    w = digit_windows._Windows(np.array([len(digits)]), digits, np.zeros(1, dtype=bool))
    starts = np.arange(len(digits) - 19)
    window = digits[starts[:, None] + np.arange(11)[None, :]]
    odd, even = window[:, 0:9:2].sum(axis=1), window[:, 1:8:2].sum(axis=1)
    tckn = (window[:, 0] != 0) & ((odd * 7 - even) % 10 == window[:, 9]) & ((odd + even + window[:, 9]) % 10 == window[:, 10])
    assert digit_windows._tckn(digits, starts).tolist() == tckn.tolist()
    for n in range(13, 20):
        luhn = [sum(int(c) for c in str(int(d) * 2)) if (len(digits[s:s + n]) - 1 - k) % 2 else int(d)
                for s in starts.tolist() for k, d in enumerate(digits[s:s + n].tolist())]
        per_window = [sum(luhn[i * n:(i + 1) * n]) % 10 == 0 for i in range(len(starts))]
        assert digit_windows._luhn(w, starts, starts + n).tolist() == per_window
