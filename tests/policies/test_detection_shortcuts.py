"""The detectors' shortcuts for text with nothing to read (issue 34's hot path): each must give
exactly what the full scan gives."""

from __future__ import annotations

import random

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from fairgate.policies.detection import detectors, dfa, gazetteer, triggers
from fairgate.policies.detection.digit_chains import MIN_CHAIN_DIGITS
from fairgate.policies.detection.persons.names import _LETTERS
from fairgate.policies.sensitivity import classify

# pieces that wake every trigger family, the number scanner and the name rules
PIECES = ("Say", "hello", "Ayşe", "Kaya'ya", "hanım", "adres:", "Atatürk Cad.", "no", "12", "0532 412 77 90",
          "10000000146", "TR33 0006 1005 1978 6457 8413 26", "a@b.co", "ali at gmail nokta com", "dogum", "1.2.1990",
          "sgk", "diyabet", "şeker hastası", "bir iki üç dört beş", "aGVsbG8gd29ybGQgaGVsbG8=", "%41", "&amp;",
          "DE89 3704 0044 0532 0130 00", "ad;soyad", "Ad Soyad:", "pasaport U12345678", "34 ABC 123",
          "Doğum iznine", "mahallesi", "mahalle temsilcisi",  # two families match at one start
          "\ue000", "\n", ",", ".", "?", "in", "five", "words", "user", "8")


def _grouped_triggers(text: str) -> triggers.Hits:
    """The trigger passes as RE2 answers them with a named group per family."""
    opts = re2.Options()
    opts.case_sensitive = False
    opts.max_mem = 64 << 20
    data = text.encode("utf-8", "surrogatepass")
    hits: triggers.Hits = {k: [] for k in triggers.FAMILIES}
    for _, each in triggers._PASSES:
        rx = re2.compile("|".join(f"(?P<{k}>{triggers._FAMILIES[k]})" for k, _ in each), opts)
        for m in rx.finditer(data):
            s, e = m.span()
            hits[m.lastgroup].append((len(data[:s].decode("utf-8", "surrogatepass")),
                                      len(data[:e].decode("utf-8", "surrogatepass"))))
    for spans in hits.values():
        spans.sort()
    return hits


@given(st.lists(st.sampled_from(PIECES), max_size=12), st.text(max_size=40))
@settings(max_examples=120, deadline=None)
def test_the_trigger_pass_names_each_match_as_a_group_per_family_would(pieces: list[str], noise: str) -> None:
    # the passes find matches without capture groups (RE2's DFA) and name each match's family by
    # the first family matching at its start; a named group per family must give the same hits,
    # and the one-call check for "no trigger at all" must agree
    text = " ".join(pieces) + noise
    hits, overflow = triggers.find_triggers(text)
    assert not overflow and hits == _grouped_triggers(text), text


def test_a_text_with_no_trigger_and_few_digits_is_read_for_names_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # the shortcut in `detect` against the full run of every detector, on random prompts
    rng = random.Random(5)
    texts = [" ".join(rng.choice(PIECES) for _ in range(rng.randint(1, 10))) for _ in range(500)]
    quick = [classify(t) for t in texts]
    taken = sum(1 for t in texts if not any(triggers.find_triggers(t)[0].values())
                and sum(map(t.count, "0123456789")) < MIN_CHAIN_DIGITS)
    monkeypatch.setattr(detectors, "MIN_CHAIN_DIGITS", 0)  # never taken
    assert [classify(t) for t in texts] == quick
    assert taken > 30 and any(c.sensitive for c in quick) and not all(c.sensitive for c in quick)


def _fold_full(word: str) -> str:
    return word.replace("I", "ı").replace("İ", "i").lower().translate(gazetteer._ASCII)


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F)) | st.text())
def test_fold_key_of_ascii_text_is_its_lower_case(text: str) -> None:
    """fold_key's ASCII path (lower case) folds exactly as the Turkish-aware path does."""
    assert gazetteer.fold_key(text) == _fold_full(text)


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="Iİıiçğöşüâîû ÇĞÖŞÜÂÎÛabeyhnmABEYHNM'.,\ue000\n8²Ⅻé") | st.text())
def test_the_letter_runs_folded_one_by_one_are_the_folded_text_s(text: str) -> None:
    """`_opener_only` folds each letter run alone instead of the whole text first: folding maps
    letters to letters one by one, so the runs are the same (Greek's final sigma, which depends
    on the letters around it, folds to no honorific either way)."""
    one_by_one = [gazetteer.fold_key(run) for run in _LETTERS.findall(text)]
    whole = _LETTERS.findall(gazetteer.fold_key(text))
    if "Σ" not in text:
        assert one_by_one == whole
    assert {w for w in one_by_one if w.isascii()} == {w for w in whole if w.isascii()}


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="aZ1 .ş\ue000\u200b\x00é") | st.text())
def test_a_presence_check_answers_as_search_does(text: str) -> None:
    """`dfa.occurs` (the program's Match, one call) says what google-re2's `search` says."""
    data = text.encode("utf-8", "surrogatepass")
    for pattern in (r"\pL\pL", r"[^\x00-\x7f]+", r"ş|\x{e000}", r"^a", r"1$"):
        assert dfa.occurs(dfa.program(pattern), data) == (re2.compile(pattern).search(data) is not None)
