"""Issue 33: a fixed line that a notice gives for questions ("Bilgi: 0262 ...", "... 'ı
arayabilirsiniz", "... numaralı santrale") is the institution's, even in a reminder to a named
person; a person's own fixed line stays personal. A company's vehicle and a plate's shape are no
person's; a person's vehicle is. Sentences written for these tests."""

from __future__ import annotations

import pytest

from fairgate.policies.detection_options import DEFAULT_OPTIONS
from fairgate.policies.sensitivity import DetectionOptions, classify

COMPANY_CAR = "B aracı 34 KTR 4412 (Yıldız Lojistik A.Ş. servis aracı) kırmızı ışıkta geçti."
# (text, kind, the spans of that kind it must find: none for the institution's or a shape)
CASES = [
    ("Kavşak çalışması nedeniyle Çarşı Caddesi 3 gün kapalı olacaktır. Bilgi: 0262 318 40 00.", "phone", []),
    ("KÜTÜPHANEMİZ BAYRAM SÜRESİNCE KAPALIDIR. BİLGİ İÇİN: 0258 265 11 20", "phone", []),
    ("Sayın Gönül Arıkan, 14 Mayıs 10:30 göz muayeneniz onaylandı. İptal için 0342 215 40 40'ı arayabilirsiniz.",
     "phone", []),
    ("Şikâyetler 0324 238 00 00 numaralı santrale iletilebilir.", "phone", []),
    # after a public service's short number: the cue stands before both
    ("Pazartesi 09.00-16.00 arası su kesintisi olacaktır. Bilgi için Beyaz Masa 153 veya 0352 207 50 00.",
     "phone", []),
    ("PARK YARIN KAPALIDIR. BİLGİ: ALO 181 YA DA 0312 507 60 00", "phone", []),
    ("Ev telefonum 0232 441 18 70, akşamları beni arayabilirsiniz.", "phone", ["0232 441 18 70"]),
    ("Bilgi için: 0216 345 12 90 (Fatma Yücel, dernek sekreteri)", "phone", ["0216 345 12 90"]),
    ("Bilgi: 0262 318 40 07", "phone", ["0262 318 40 07"]),  # no notice before it: stays personal
    ("Belediyemize ait 06 BLD 118 plakalı araç arızalı olduğundan sefer yapılamayacak.", "plate", []),
    (COMPANY_CAR, "plate", []),
    ("İstanbul'da taksi plakaları T ile başlar, ör. 34 T 0000.", "plate", []),
    ("A aracı 34 KTR 4412 (sürücü Ayşe Kaya, kendi aracı) arkadan çarptı.", "plate", ["34 KTR 4412"]),
    ("Aracım 34 KTR 4412 dün otoparktan çekildi.", "plate", ["34 KTR 4412"]),
]


def spans(text: str, kind: str, options: DetectionOptions = DEFAULT_OPTIONS) -> list[str]:
    return [text[f.start:f.end] for f in classify(text, options=options).findings if f.kind == kind]


@pytest.mark.parametrize(("text", "kind", "expected"), CASES)
def test_whose_line_or_vehicle_it_is(text: str, kind: str, expected: list[str]) -> None:
    assert spans(text, kind) == expected


def test_a_companys_vehicle_counts_when_the_tenant_asks() -> None:
    assert spans(COMPANY_CAR, "plate", DetectionOptions(legal_person_data=True)) == ["34 KTR 4412"]
