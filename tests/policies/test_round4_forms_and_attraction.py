"""A form's later field is its named person's (issue 33, round 4), a member's class in an
association's form, and attraction or sex with someone said plainly in chat."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def _kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


def test_a_cv_field_far_below_the_name_is_that_persons() -> None:
    cv = ("ÖZGEÇMİŞ\nAd Soyad: Melis Karadağ\nDoğum Yeri: Bolu\nEğitim: Hacettepe, İşletme\n"
          "Diller: İngilizce, Almanca\nBilgisayar: Excel, SAP\nHobiler: dağcılık\n"
          "Gönüllülük: AKUT Bolu ekibi gönüllüsü (2021–)")
    assert "association" in _kinds(cv)
    form = "KAYIT FORMU\nAd Soyad: Cengiz Talu\nMeslek: tekniker\nŞehir: Düzce\nNot: hasta; ilaç: yok\nKan grubu: A"
    assert "health" in _kinds(form)


def test_a_members_class_in_an_associations_form() -> None:
    form = "Üye Kayıt — Kuşadası Doğa Sporları Derneği\nAd Soyad: Tuba Ekşioğlu\nÜyelik türü: asil üye"
    assert "association" in _kinds(form)


def test_attraction_and_sex_with_someone_in_chat() -> None:
    assert "sexual_life" in _kinds("28 yaşındayım, kadınlara ilgi duyuyorum ama ailem bilmiyor")
    assert "sexual_life" in _kinds("geçen cuma partide biriyle yattım, adını bile bilmiyorum")
    assert "sexual_life" not in _kinds("dedem geçen ay iki hafta hastanede yattı")
