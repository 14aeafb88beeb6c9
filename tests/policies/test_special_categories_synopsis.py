"""Issue 33: a film's, series' or novel's plot, told from its paragraph's first words ("Film,",
"Dizi önerisi:", "Roman,"), is about characters: its prison terms and orientations are nobody's
data. A paragraph that only begins with such a word ("Film setindeki kuzenim") is no plot. So is
an encyclopaedia's entry, opened by a name and its life dates, about a public or historical
figure; a family's story with dates is not. Sentences written for these tests."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


def test_the_same_words_about_a_real_person_still_count() -> None:
    assert "criminal" in kinds("Komşum dolandırıcılıktan 8 yıl hapis yatmış, geçen ay cezaevinden çıktı.")
    assert "health" in kinds("Film setindeki kuzenim epilepsi hastası, dün nöbet geçirdi.")
    assert "sexual_life" in kinds("Kitap fuarında tanıştığım Selin Aksoy eşcinsel olduğunu söyledi.")
