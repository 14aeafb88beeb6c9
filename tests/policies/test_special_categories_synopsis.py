"""Issue 33: a film's, series' or novel's plot, told from its paragraph's first words ("Film,",
"Dizi önerisi:", "Roman,"), is about characters: its prison terms and orientations are nobody's
data. A paragraph that only begins with such a word ("Film setindeki kuzenim") is no plot. So is
an encyclopaedia's entry, opened by a name and its life dates, about a public or historical
figure; a family's story with dates is not. Sentences written for these tests."""

from __future__ import annotations

import pytest

from fairgate.policies.sensitivity import classify


def kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


@pytest.mark.parametrize("text", [
    "Film, dolandırıcılıktan 8 yıl hapis yatan bir adamın cezaevinden çıktıktan sonraki ilk gününü anlatıyor.",
    "Kitap özeti: Genç kadın, eşcinsel olduğunu ailesine açıklayınca evden ayrılır.",
    "Dizi önerisi: Kahramanımız, cinayetten hüküm giymiş eski bir polistir ve cezaevinden yeni çıkmıştır.",
])
def test_a_plot_holds_no_ones_category(text: str) -> None:
    assert kinds(text) == set()


def test_the_same_words_about_a_real_person_still_count() -> None:
    assert "criminal" in kinds("Komşum dolandırıcılıktan 8 yıl hapis yatmış, geçen ay cezaevinden çıktı.")
    assert "health" in kinds("Film setindeki kuzenim epilepsi hastası, dün nöbet geçirdi.")
    assert "sexual_life" in kinds("Kitap fuarında tanıştığım Selin Aksoy eşcinsel olduğunu söyledi.")


@pytest.mark.parametrize("text", [
    "Nazım Hikmet (1902–1963), şairdir. 1938'de askeri okullarda isyana teşvikten hüküm giymiş, cezaevinde yıllarca kalmıştır.",
    "Cahit Arf (d. 11 Ekim 1910, Selanik), matematikçidir. Annesi Selanik göçmeni bir ailedendir.",
])
def test_an_encyclopaedia_entry_holds_no_private_persons_category(text: str) -> None:
    assert not kinds(text) & {"criminal", "ethnicity", "politics"}


@pytest.mark.parametrize("text, kind", [
    ("Dedem Hasan Kaya (1931-2019) 1950'de siyasi nedenlerle tutuklanmış, cezaevinde 3 yıl yatmış.", "criminal"),
    ("Sayın Hasan Kaya (1931) hakkında verilen hapis cezası kesinleşmiştir.", "criminal"),
])
def test_a_family_story_or_a_notice_with_dates_still_counts(text: str, kind: str) -> None:
    assert kind in kinds(text)
