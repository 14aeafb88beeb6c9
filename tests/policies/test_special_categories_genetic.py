"""Issue 33: a disease named as what a gene says (a carrier state, "the X gene", a gene panel)
is genetic data, not a diagnosis; a gene test ordered for a suspected disease leaves the disease
health data. Sentences written for these tests."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings} - {"person_name"}


def test_a_disease_as_a_carrier_state_or_gene_panel_is_genetic() -> None:
    assert kinds("Eşimle ikimiz de Akdeniz anemisi taşıyıcısıymışız, doktor söyledi.") == {"genetic"}
    assert kinds("Hasta: Melike Durmaz\nİstem: Kistik fibrozis CFTR gen analizi") == {"genetic"}
    assert kinds("Kalıtsal Kanser Paneli — Hasta: Melike Durmaz (47)") == {"genetic"}


def test_a_gene_test_for_a_suspected_disease_leaves_the_disease_health() -> None:
    assert "health" in kinds("Kuzenim Melike'ye ailesel Akdeniz ateşi şüphesiyle gen testi yaptırdılar.")


def test_an_ancestry_tests_shares_are_its_genetic_data() -> None:
    text = "Soy testimin sonucu geldi: %44 Anadolu, %19 Kafkas ve %12 Orta Doğu çıktı."
    found = [(f.kind, text[f.start:f.end]) for f in classify(text).findings]
    # the shares are in the finding (its sentence spans them here)
    assert found == [("genetic", "Soy testimin sonucu geldi: %44 Anadolu, %19 Kafkas ve %12 Orta Doğu çıktı")]


def test_one_percentage_after_a_gene_test_is_no_share() -> None:
    text = "DNA testi yaptırdım. Fiyatlar bu ay %20 arttı."
    assert [text[f.start:f.end] for f in classify(text).findings] == ["DNA testi yaptırdım"]  # its sentence only


def test_my_in_a_case_ending_after_a_vowel_is_the_first_person() -> None:
    assert {f.kind for f in classify("Kemoterapimin üçüncü kürü yarın başlıyor.").findings} == {"health"}
