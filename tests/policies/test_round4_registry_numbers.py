"""SGK / Bağ-Kur registry numbers as people and letters write them (issue 33, round 4): the
number's word further along the line, a "kaydım" instead of "no", the number before "sicil
numaralı" in a pension letter; such a number is no phone or card."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def _kinds(text: str) -> list[tuple[str, str]]:
    return [(f.kind, text[f.start:f.end]) for f in classify(text).findings if f.kind != "person_name"]


def test_the_registry_then_its_number_further_along_the_line() -> None:
    text = "Osman'ın SGK'ya işe giriş kaydı bugün yapıldı, sicil numarası 5128830467 olarak çıktı."
    assert _kinds(text) == [("sgk", "5128830467")]
    assert _kinds("esnaf oldum artık, bağkur kaydım 2207719340055 ile açıldı") == [("sgk", "2207719340055")]
    assert _kinds("Kartal SGM'ye bağlı sicil 41-3308-0172265 aktif") == [("sgk", "41-3308-0172265")]


def test_a_number_before_sicil_numarali_in_a_pension_letter() -> None:
    text = ("SAYIN İLHAN DEMİRCAN, EMEKLİLİK TALEBİNİZE İLİŞKİN: 06-1184-0390217 SİCİL NUMARALI "
            "HİZMETLERİNİZDE 6.120 GÜN PRİM ÖDEMESİ GÖRÜLMÜŞTÜR.")
    assert _kinds(text) == [("sgk", "06-1184-0390217")]
    # a staff register's number in a note with no pension or registry word
    assert _kinds("3308017226 sicil numaralı personelin yıllık izni onaylandı.") == []


def test_a_registry_number_is_no_card_or_phone() -> None:
    assert _kinds("Eski SSK Sicil No: 3406 1992 0748 33\nKan grubu: A Rh(+)") == [("sgk", "3406 1992 0748 33")]
    assert _kinds("SGK sicil no: 16-0833-1102954 (4/a)") == [("sgk", "16-0833-1102954")]
