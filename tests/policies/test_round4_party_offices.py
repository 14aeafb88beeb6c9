"""A party office said of the one addressed, of the family's in-law named without a possessive,
or in a party's youth council (issue 33, round 4); a department's expert in general is no one."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def _kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


def test_the_one_addressed_and_the_familys_in_law() -> None:
    assert "politics" in _kinds("abi hayırlı olsun, İYİ Parti il yönetimine girmişsin, kongrede görüşürüz")
    assert "politics" in _kinds("Enişte bu sefer de MHP ilçe yönetimine aday olmuş, bayramda yine tartışma çıkar")


def test_a_partys_youth_council() -> None:
    assert "politics" in _kinds("Sinan Kocabey lisede CHP genclik meclisinde gorev almis, CV'sinde yaziyor.")


def test_a_conditional_or_an_expert_in_general_is_no_one() -> None:
    assert "politics" not in _kinds("Bir partinin il yönetimine girmek istiyorsan önce üye olmalısın.")
    assert "health" not in _kinds("Tahliller aynı gün iç hastalıkları uzmanı tarafından değerlendirilir.")
