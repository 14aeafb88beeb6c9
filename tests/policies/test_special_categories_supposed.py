"""Issue 33: a sentence that opens with a supposition ("Diyelim ki", "Varsayalım", "Farz edin")
tells of a made-up case, so its category terms are no one's data; the same term about a real
person, even next to a supposition later in the sentence, stays. Sentences written for these
tests."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


def test_a_supposed_case_is_no_ones_data() -> None:
    assert kinds("Diyelim ki bir adayınız epilepsi hastası; mülakatta bunu sormak yasal mı?") == set()
    assert kinds("İK sorusu: Varsayalım bir çalışanınız HIV pozitif olduğunu size söyledi.") == set()


def test_a_real_persons_condition_stays_before_a_supposition() -> None:
    assert "health" in kinds("Eşim epilepsi hastası, diyelim ki nöbet geçirdi, ne yapmalıyım?")
    assert "health" in kinds("Adayımız epilepsi hastası. Diyelim ki işe aldık, vardiya verebilir miyiz?")
