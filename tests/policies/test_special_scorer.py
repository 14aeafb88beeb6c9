"""The learned special-category word scorer (policies/detection/special_scorer.py) and how
`special_categories` uses it: words the lexicons do not list, still only when tied to a person."""

from __future__ import annotations

import subprocess
import sys

from fairgate.policies.detection.special_categories_terms import starts_with_term
from fairgate.policies.detection.special_scorer import (
    SpecialScorer,
    default_scorer,
    learned_terms,
    word_key,
)
from fairgate.policies.sensitivity import classify


def _kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


def test_the_scorer_loads_and_runs_without_torch() -> None:
    code = ("import sys; from fairgate.policies.detection.special_scorer import SpecialScorer, word_key; "
            "s = SpecialScorer(); print(s.classes[s.classify([word_key('kolesistektomi')])[0][0]]); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["health", "False"]


def test_words_no_lexicon_lists_get_their_category() -> None:
    scorer = default_scorer()
    for word, category in (("DEHB'liyim", "health"), ("Ecevitçiydi", "politics")):
        key = word_key(word)
        assert not starts_with_term(key)  # the lexicons do not know it: the model must
        cls, p = scorer.classify([key])[0]
        assert scorer.classes[cls] == category and p >= 0.8


def test_everyday_words_are_no_category() -> None:
    scorer = default_scorer()
    assert [scorer.classes[c] for c, _ in scorer.classify([word_key(w) for w in ("toplantı", "bugün", "kuzenim")])] \
        == ["none", "none", "none"]


def test_nonsense_scores_none_next_to_a_category_word() -> None:
    scorer = SpecialScorer()
    assert [c for c, _ in scorer.classify(["qqqqxxxx", "kolesistektomi", "zzzzjjjj"])] == [0, 1, 0]
    assert [c for c, _ in scorer.classify(["zzzzjjjj"])] == [0]


def test_learned_terms_give_word_spans() -> None:
    text = "Yeğenim geçen hafta kolesistektomi oldu."
    assert learned_terms(text) == [("health", 20, 34)]
    assert learned_terms(f"{text} (KOLESİSTEKTOMİ) kolesistektomi") == [
        ("health", 20, 34), ("health", 42, 56), ("health", 58, 72)]


def test_a_learned_word_tied_to_a_person_is_flagged() -> None:
    assert "health" in _kinds("Yeğenim geçen hafta kolesistektomi oldu, bu hafta işe gelemeyecek.")
    assert "politics" in _kinds("Rahmetli babam koyu Ecevitçiydi, evde hep onun posterleri asılıydı.")


def test_a_learned_word_in_a_general_statement_is_not() -> None:
    assert not classify("Kolesistektomi genellikle laparoskopik yöntemle yapılır.").findings
    assert not classify("Ecevitçiler dün Kızılay'da toplandı.").findings


def test_an_everyday_sense_needs_more_than_the_model_guesses() -> None:
    """'partisinde' leans to politics, but an everyday word needs a near-certain score."""
    assert "politics" not in _kinds("Annem yılbaşı partisinde çok eğlendi.")
