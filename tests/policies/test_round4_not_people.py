"""Words of a category in a street's name and a counting placeholder number are no one's data
(issue 33, round 4)."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def _kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


def test_a_category_word_in_a_streets_name() -> None:
    kinds = _kinds("ADI SOYADI: NURAY TEMEL | ADRES: ÇAYBAŞI MAH. ERMENİLER SK. NO:7 ALTINDAĞ/ANKARA")
    assert "ethnicity" not in kinds and "person_address" in kinds
    assert "ethnicity" in _kinds("Annem Ermeni, babam Süryani; Kurtuluş'ta büyüdüm.")


def test_a_counting_placeholder_is_no_tax_number() -> None:
    assert "vkn" not in _kinds('def test_vkn(): assert vkn_ok("1234567890") is False')
    assert "vkn" in _kinds("şahıs şirketime kes, vergi no 0963035980")
