"""Issue 33: person names as people write them -- the learned tagger with its rules: Turkish
case suffixes, titles and relations, lower case, capitals, ASCII-folded text, names from the
whole population; places, companies, streets and test fixtures are not people."""

from __future__ import annotations

import random

from fairgate.policies.detection.persons.features import (
    Doc,
    _counted,
    candidates,
    line_casing,
    token_features,
)
from fairgate.policies.detection.persons.lexicon import plain_words
from fairgate.policies.detection.persons.names import (
    MAX_CANDIDATES,
    _opener_only,
    _plain_opener_alone,
    _scan_candidates,
    find_person_names,
)
from fairgate.policies.detection.persons.tagger import default_tagger
from fairgate.policies.sensitivity import classify


def test_candidates_are_capitalised_non_common_words_and_in_lower_lines_lexicon_names() -> None:
    doc = Doc.of("Bugün Ayşe geldi.\nyarın mehmet gelecek ama çok geç")
    got = [doc.text[slice(*doc.spans[i])] for i in candidates(doc)]
    assert got == ["Ayşe", "yarın", "mehmet", "gelecek"]  # "Bugün": a common word, context only


def test_features_fold_case_suffix_and_line_casing() -> None:
    doc = Doc.of("SAYIN KAYA'YI ARADIM")
    feats = token_features(doc, 1)
    assert feats[:7] == ["bias", "w:kaya", "p3:kay", "s3:aya", "s2:ya", "sh:cU", "len:1"]
    assert "suf:yi" in feats and "c-1:sayin" in feats


def test_tagger_scores_are_probabilities_for_each_candidate() -> None:
    doc = Doc.of("Teşekkürler Zeynep Hanım, kargonuz yola çıktı.")
    probs = default_tagger().scores(doc, [0, 1, 2])
    assert len(probs) == 3 and all(0.0 <= p <= 1.0 for p in probs)
    assert probs[1] > 0.5 > probs[0]


def test_a_name_inside_an_email_address_is_the_address_only() -> None:
    c = classify("yazışmalar için: berfin.aslan@ornekfirma.com.tr")
    assert c.kinds == ("email",)


def test_the_ascii_shortcut_of_a_lines_casing_agrees_with_counting_every_letter() -> None:
    # `line_casing` answers "mixed" from ASCII lower-case letters alone when they are enough; the
    # answer must be the one counting every letter (Turkish ones included) gives
    rng = random.Random(7)
    letters = "aAbBçÇğĞıIiİöÖşŞüÜzZ 0.,\ue000"
    for _ in range(3000):
        line = "".join(rng.choice(letters) for _ in range(rng.randint(1, 40)))
        expected = "lower" if line == line.lower() else "caps" if line == line.upper() else _counted(line)
        assert line_casing(line) == expected, line


def test_a_plain_opener_alone_is_proved_nameless_by_the_full_scan() -> None:
    # `_scan` skips its rules when the only candidate is a prompt's plain first word; on random
    # prompts where it does, the full rules (`_scan_candidates`) must find no name either
    rng = random.Random(11)
    openers = sorted(plain_words())[:200]
    words = ("ayşe", "mehmet", "kaya", "yılmaz", "bey", "hanım", "abla", "teyze", "eşim", "adım", "ile", "ve",
             "hello", "five", "words", "istanbul", "selin'le", "gökhanla", "hacerin", "ahmet:", "@gamze", "merve'nin",
             "Ayşe", "Kaya", "Bey", "S.K.", "0532", "in", "the", "a", "\n", ",", ".", "?")
    fired = 0
    for _ in range(4000):
        text = rng.choice(openers).capitalize() + " " + " ".join(rng.choice(words) for _ in range(rng.randint(0, 9)))
        doc = Doc.of(text)
        cands = candidates(doc)
        if doc.spans and cands == [0] and _plain_opener_alone(doc):
            fired += 1
            assert _scan_candidates(doc, cands, 16, MAX_CANDIDATES)[0] == [], text
    assert fired > 300  # the shortcut was tried often enough to mean something


def test_the_opener_shortcut_read_off_the_text_agrees_with_the_tokens() -> None:
    # `_opener_only` decides from the text alone (no tokens built) that a one-line prompt's only
    # capital is a plain opener; wherever it does, the full scan must find no name, and on
    # prompts it passes over, `find_person_names` still reads every token
    rng = random.Random(12)
    openers = sorted(plain_words())[:200]
    words = ("ayşe", "mehmet", "kaya", "bey", "hanım", "bey'e", "dr.", "sayın", "eşim", "adım", "ile", "hello",
             "five", "words", "istanbul", "selin'le", "gökhanla", "@gamze", "Ayşe", "Kaya", "S.K.", "0532", "in",
             "the", "\ue000", "8", "up", "user", "ÇİĞDEM", "é", "a", ",", ".", "?", "\n")
    fired = 0
    for _ in range(4000):
        text = rng.choice(openers).capitalize() + " " + " ".join(rng.choice(words) for _ in range(rng.randint(0, 9)))
        if _opener_only(text):
            fired += 1
            doc = Doc.of(text)
            assert candidates(doc) == [0] and _plain_opener_alone(doc), text
            assert _scan_candidates(doc, [0], 16, MAX_CANDIDATES)[0] == [], text
    assert fired > 300
    assert not _opener_only("Say hello to ayşe hanım")  # an honorific: the rules read it
    assert find_person_names("Say hello to Ayşe") == [(13, 17)]


def test_a_school_named_after_a_person_in_capitals_is_no_person() -> None:
    text = "GÖREV YERİ: ŞEHİT ÖĞRETMEN ALİ GÜVEN İLKOKULU"
    assert find_person_names(text) == []
