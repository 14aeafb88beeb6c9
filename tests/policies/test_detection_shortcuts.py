"""The detectors' shortcuts for text with nothing to read (issue 34's hot path): each must give
exactly what the full scan gives."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairgate.policies.detection import detectors, triggers
from fairgate.policies.detection.digit_chains import MIN_CHAIN_DIGITS
from fairgate.policies.sensitivity import classify

# pieces that wake every trigger family, the number scanner and the name rules
PIECES = ("Say", "hello", "Ayşe", "Kaya'ya", "hanım", "adres:", "Atatürk Cad.", "no", "12", "0532 412 77 90",
          "10000000146", "TR33 0006 1005 1978 6457 8413 26", "a@b.co", "ali at gmail nokta com", "dogum", "1.2.1990",
          "sgk", "diyabet", "şeker hastası", "bir iki üç dört beş", "aGVsbG8gd29ybGQgaGVsbG8=", "%41", "&amp;",
          "DE89 3704 0044 0532 0130 00", "ad;soyad", "Ad Soyad:", "pasaport U12345678", "34 ABC 123",
          "\ue000", "\n", ",", ".", "?", "in", "five", "words", "user", "8")


class _Full:
    """Stands for the union pattern so that every pass runs."""

    class _regexp:  # noqa: N801 - the attribute name the module reads
        @staticmethod
        def Match(*_: object) -> list[tuple[int, int]]:  # noqa: N802
            return [(0, 0)]


@given(st.lists(st.sampled_from(PIECES), max_size=12), st.text(max_size=40))
@settings(max_examples=120, deadline=None)
def test_the_trigger_pass_gives_what_every_family_pass_gives(pieces: list[str], noise: str) -> None:
    text = " ".join(pieces) + noise
    quick = triggers.find_triggers(text)
    full_union, triggers._ANY = triggers._ANY, _Full  # type: ignore[assignment]
    try:
        assert triggers.find_triggers(text) == quick, text
    finally:
        triggers._ANY = full_union


def test_a_text_with_no_trigger_and_few_digits_is_read_for_names_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # the shortcut in `detect` against the full run of every detector, on random prompts
    rng = random.Random(5)
    texts = [" ".join(rng.choice(PIECES) for _ in range(rng.randint(1, 10))) for _ in range(500)]
    quick = [classify(t) for t in texts]
    taken = sum(1 for t in texts if not any(triggers.find_triggers(t)[0].values())
                and sum(map(t.count, "0123456789")) < MIN_CHAIN_DIGITS)
    monkeypatch.setattr(detectors, "MIN_CHAIN_DIGITS", 0)  # never taken
    assert [classify(t) for t in texts] == quick
    assert taken > 30 and any(c.sensitive for c in quick) and not all(c.sensitive for c in quick)
