"""Issue 33: a category word inside an association's or foundation's name ("Türkiye Omurilik
Felçlileri Derneği", "TÜRKİYE SAKATLAR DERNEĞİ", "Diyabet Vakfı") names the body, not the
member's health; the membership itself stays association data, and the same words about the
person stay health data. Sentences written for these tests."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings} - {"person_name"}


def test_a_health_word_in_a_bodys_name_is_not_the_members_health() -> None:
    assert kinds("Sayın Orkun Telli, Türkiye Omurilik Felçlileri Derneği'ne üyeliğiniz onaylanmıştır.") == {"association"}
    assert kinds("Sayın Orkun Telli, Türkiye Diyabet Vakfı'nın gönüllüsüdür.") == {"association"}
    assert "health" not in kinds("DERNEK ÜYE KAYIT FORMU – TÜRKİYE SAKATLAR DERNEĞİ İZMİR ŞUBESİ ADI SOYADI: ORHAN KUL")


def test_the_same_words_about_the_person_stay_health() -> None:
    assert "health" in kinds("Sayın Orkun Telli, omurilik felci nedeniyle tekerlekli sandalye kullanıyor.")
    assert "health" in kinds("Orkun Telli diyabet derneğine gidip insülin pompasını ayarlattı.")
