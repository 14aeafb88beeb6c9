"""A country's demonym describing a person is their origin (issue 33, round 4); a country's
refugee count or a citizenship field is no one's."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def _kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


def test_a_demonym_said_of_a_neighbour_a_partner_or_a_family() -> None:
    assert "ethnicity" in _kinds("Üst kattaki Somalili aile bu hafta taşınıyormuş, kızları Hodan çok tatlı.")
    assert "ethnicity" in _kinds("kuzenimin nişanlısı nijeryalı, adı Chidi, ankara'da mühendis")
    assert "ethnicity" in _kinds("Depoya yeni başlayan Yusuf Afgan, Türkçesi idare eder.")
    assert "ethnicity" in _kinds("Bizim yeni muhasebeci Filistinli, Gazze'den gelmiş, ailesi hâlâ orada.")


def test_a_countrys_numbers_and_a_citizenship_field_are_no_ones_origin() -> None:
    assert "ethnicity" not in _kinds("Dünyadaki Sudanlı göçmen sayısı son beş yılda ikiye katlandı.")
    assert "ethnicity" not in _kinds("Ülkedeki Filistinli öğrenci sayısı 2024 itibarıyla 12 bini geçti.")
    assert "ethnicity" not in _kinds("Uyruk: Afganistan\nGeliş: 2019")


def test_a_relation_or_another_people_before_an_origin_is_no_name() -> None:
    def names(text: str) -> list[str]:
        return [text[f.start:f.end] for f in classify(text).findings if f.kind == "person_name"]

    assert names("Babam Gürcüdür, annem de Lazdır; evde iki dil duyarak büyüdüm.") == []
    assert names("Yeni gelen Bujar Hoxha, Kosovalı Arnavut, depoda çalışacak.") == ["Bujar Hoxha"]
