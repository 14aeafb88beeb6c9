"""Issue 33: where a category term's sentence ends, and a missing person's notice as one
passage. A title's abbreviation before a name ("Dt.", "Av.", "DR.", "Prof.") ends no sentence, so
an office or a diagnosis before it is tied to the name after it; a real stop still ends one. A
missing person's notice ties its subjectless description to the name it gave; a lost pet's does
not. Sentences written for these tests."""

from __future__ import annotations

import pytest

from fairgate.policies.detection.person_links import sentence
from fairgate.policies.sensitivity import classify


def kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


@pytest.mark.parametrize("title", ["Dr.", "Av.", "Prof.", "Doç.", "Uzm.", "Ecz.", "DR.", "PROF."])
def test_a_title_ends_no_sentence(title: str) -> None:
    text = f"Kulüp başkanı {title} Kaya geldi. Sonra gitti."
    assert sentence(text, 0, 5) == (0, text.index("geldi.") + len("geldi."))


def test_a_word_ending_in_a_titles_letters_still_ends_a_sentence() -> None:
    text = "Yeni adresimiz Kadr. Sonra gitti."
    assert sentence(text, 0, 5) == (0, text.index("Kadr.") + len("Kadr."))


def test_a_missing_persons_notice_ties_its_description_to_the_name() -> None:
    notice = ("KAYIP! Dedemiz Rıfat Elmacı (81) sabah evden çıktı, dönmedi. Telefonu yanında değil. "
              "Üzerinde gri hırka, başında takke var. Gören olursa 0532 000 00 00'ı arasın.")
    assert "appearance" in kinds(notice)


def test_a_lost_pets_notice_or_a_description_without_a_notice_is_nobodys() -> None:
    assert "appearance" not in kinds("KAYIP! Kedimiz sabah kaçtı. Boynunda takke gibi beyaz bir leke var. Gören olursa arasın.")
    assert "appearance" not in kinds("Rıfat Bey dün geldi. Hava soğuktu. Vitrinde takke ve tespih satılıyor.")


def test_a_notice_that_asks_whoever_sees_them_to_call_a_number() -> None:
    notice = ("Yardım! Babamız Necati Sarıkaya 80 yaşında. Dün öğlen evden çıktı, hâlâ yok. "
              "Gri paltolu, başında takke var. Gören 0532 000 00 00'a ulaşsın.")
    assert "appearance" in kinds(notice)
