"""Hypothesis properties of the detectors: any valid value is found in arbitrary surrounding
text and wherever a chat splits it; arbitrary input never crashes and spans stay in bounds."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from fairgate.policies.detection.textnorm import fold
from fairgate.policies.sensitivity import classify, classify_parts
from tests.helpers.pii_corpus import make_positive

KINDS = ["tckn", "iban", "phone", "card", "email"]
# Surrounding prose: letters (Turkish too), spaces and punctuation; no digits or '@', which
# could legitimately join the value into a longer number or address.
prose = st.text(alphabet="abcçdefgğhıijklmnoöprsştuüvyzABCÇDEFGĞHIİJKLMNOÖPRSŞTUÜVYZ ,;:!?'\"\n", max_size=40)


def _found(c, kind: str, start: int, end: int) -> bool:
    return any(f.kind == kind and f.start < end and start < f.end for f in c.findings)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(KINDS), seed=st.integers(0, 2**32 - 1), before=prose, after=prose)
def test_valid_values_are_found_in_any_prose(kind: str, seed: int, before: str, after: str) -> None:
    value = make_positive(random.Random(seed), kind)
    text = f"{before} {value} {after}"
    start = len(before) + 1
    assert _found(classify(text), kind, start, start + len(value)), (kind, value)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(KINDS), seed=st.integers(0, 2**32 - 1),
       cut=st.floats(0.05, 0.95))
def test_values_split_across_two_messages_are_found(kind: str, seed: int, cut: float) -> None:
    value = make_positive(random.Random(seed), kind)
    i = max(1, min(len(value) - 1, int(len(value) * cut)))
    parts = [f"bilgi: {value[:i]}", f"{value[i:]} tamam"]
    c = classify_parts(parts)
    start = len("bilgi: ")
    assert _found(c, kind, start, start + len(value) + 1), (kind, parts)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300))
def test_arbitrary_text_never_crashes_and_spans_are_in_bounds(text: str) -> None:
    c = classify(text)
    assert c.sensitive == bool(c.findings)
    for f in c.findings:
        assert 0 <= f.start < f.end <= len(text)


@given(text=st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_fold_keeps_length(text: str) -> None:
    assert len(fold(text)) == len(text)
