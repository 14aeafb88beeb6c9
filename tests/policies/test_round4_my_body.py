"""A condition in a body part of mine is my health data (issue 33, round 4); the same words about
body parts in general are not."""

from __future__ import annotations

from fairgate.policies.sensitivity import classify


def _kinds(text: str) -> set[str]:
    return {f.kind for f in classify(text).findings}


def test_a_condition_in_my_body_part() -> None:
    assert "health" in _kinds("hocam omzumda tendinit varmış, bench press yapmayayım mı")
    assert "health" in _kinds("dizimde çapraz bağ yırtığı çıktı, ameliyat önerdiler")
    assert "health" in _kinds("belimde fıtık var galiba, sabahları kalkamıyorum")


def test_body_parts_in_general_are_no_ones() -> None:
    assert "health" not in _kinds("Dizde kıkırdak hasarı yaşla birlikte artar, düzenli egzersiz önerilir.")
    assert "health" not in _kinds("Ön çapraz bağ yırtığı futbolcularda sık görülür.")
