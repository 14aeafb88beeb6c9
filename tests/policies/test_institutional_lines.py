"""Issue 33: a fixed line that a notice gives for questions ("Bilgi: 0262 ...", "... 'ı
arayabilirsiniz", "... numaralı santrale") is the institution's, even in a reminder to a named
person; a person's own fixed line stays personal. Sentences written for these tests."""

from __future__ import annotations

import pytest

from fairgate.policies.detection_options import DEFAULT_OPTIONS
from fairgate.policies.sensitivity import DetectionOptions, classify


def phones(text: str) -> list[str]:
    return [text[f.start:f.end] for f in classify(text).findings if f.kind == "phone"]


@pytest.mark.parametrize("text", [
    "Kavşak çalışması nedeniyle Çarşı Caddesi 3 gün kapalı olacaktır. Bilgi: 0262 318 40 00.",
    "KÜTÜPHANEMİZ BAYRAM SÜRESİNCE KAPALIDIR. BİLGİ İÇİN: 0258 265 11 20",
    "Sayın Gönül Arıkan, 14 Mayıs 10:30 göz muayeneniz onaylandı. İptal için 0342 215 40 40'ı arayabilirsiniz.",
    "Şikâyetler 0324 238 00 00 numaralı santrale iletilebilir.",
    # after a public service's short number: the cue stands before both
    "Pazartesi 09.00-16.00 arası su kesintisi olacaktır. Bilgi için Beyaz Masa 153 veya 0352 207 50 00.",
    "PARK YARIN KAPALIDIR. BİLGİ: ALO 181 YA DA 0312 507 60 00",
])
def test_a_notices_line_for_questions_is_the_institutions(text: str) -> None:
    assert phones(text) == []


@pytest.mark.parametrize("text, phone", [
    ("Ev telefonum 0232 441 18 70, akşamları beni arayabilirsiniz.", "0232 441 18 70"),
    ("Bilgi için: 0216 345 12 90 (Fatma Yücel, dernek sekreteri)", "0216 345 12 90"),
])
def test_a_persons_own_fixed_line_stays_personal(text: str, phone: str) -> None:
    assert phones(text) == [phone]


def test_a_line_after_bilgi_with_no_notice_before_it_stays_personal() -> None:
    assert phones("Bilgi: 0262 318 40 07") == ["0262 318 40 07"]


def plates(text: str, options: DetectionOptions = DEFAULT_OPTIONS) -> list[str]:
    return [text[f.start:f.end] for f in classify(text, options=options).findings if f.kind == "plate"]


@pytest.mark.parametrize("text", [
    "Belediyemize ait 06 BLD 118 plakalı araç arızalı olduğundan sefer yapılamayacak.",
    "B aracı 34 KTR 4412 (Yıldız Lojistik A.Ş. servis aracı) kırmızı ışıkta geçti.",
    "İstanbul'da taksi plakaları T ile başlar, ör. 34 T 0000.",
])
def test_a_companys_vehicle_and_a_plates_shape_are_no_persons(text: str) -> None:
    assert plates(text) == []


def test_a_companys_vehicle_counts_when_the_tenant_asks() -> None:
    text = "B aracı 34 KTR 4412 (Yıldız Lojistik A.Ş. servis aracı) kırmızı ışıkta geçti."
    assert plates(text, DetectionOptions(legal_person_data=True)) == ["34 KTR 4412"]


@pytest.mark.parametrize("text", [
    "A aracı 34 KTR 4412 (sürücü Ayşe Kaya, kendi aracı) arkadan çarptı.",
    "Aracım 34 KTR 4412 dün otoparktan çekildi.",
])
def test_a_persons_vehicle_stays_personal(text: str) -> None:
    assert plates(text) == ["34 KTR 4412"]
