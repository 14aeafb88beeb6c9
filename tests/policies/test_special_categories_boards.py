"""Issue 33: an office on a board is an association's only where an association, foundation or
club stands before it; a company's, party's, union's or apartment block's board is not.
Sentences written for these tests."""

from __future__ import annotations

import pytest

from fairgate.policies.sensitivity import classify


def kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


@pytest.mark.parametrize("text", [
    "Dayım Yeşilay'ın Konya şubesinde yönetim kurulu üyesi, hafta sonları seminer veriyor.",
    "Tiyatro Sevenler Derneği genel kurulu yapıldı. Yeni yönetim kuruluna Selda Akın seçildi.",
    "Teyzem Türk Kadınlar Birliği Bornova şubesinin eski başkanı, ona sorabilirsin.",
    "ANNEM KIZILAY TORBALI ŞUBESİNİN YÖNETİM KURULUNDA.",
])
def test_an_associations_board_office_is_tied_to_the_person(text: str) -> None:
    assert "association" in kinds(text)


@pytest.mark.parametrize("text", [
    "Eniştem Anadolu Holding yönetim kurulu üyesi, çok yoğun çalışıyor.",
    "Komşumuz Tülin Hanım site yönetim kurulunda, aidatları o topluyor.",
    "Babam bankanın Kadıköy şubesinin eski başkanı değil, müdürüydü.",
])
def test_a_company_or_apartment_board_is_no_association(text: str) -> None:
    assert "association" not in kinds(text)
