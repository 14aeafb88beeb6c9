"""The sensitivity case tables in cases/*.toml (special categories, identifiers, addresses and
what is none of them), one test a check (tests/helpers/case_tables.py says what the checks are
and how a table reads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairgate.policies.sensitivity import classify
from tests.helpers.case_tables import CHECKS, groups, params

CASES = Path(__file__).parent / "cases"


def found(text: str) -> list[tuple[str, str]]:
    return [(f.kind, text[f.start : f.end]) for f in classify(text).findings]


def kinds(text: str) -> set[str]:
    return {kind for kind, _ in found(text)}


def test_every_group_has_a_known_check() -> None:
    assert [(stem, name) for stem, name, group in groups(CASES) if group["check"] not in CHECKS] == []


@pytest.mark.parametrize("text, kind", params(CASES, "kind_in", "text", "kind"))
def test_kind_in(text: str, kind: str) -> None:
    assert kind in kinds(text)


@pytest.mark.parametrize("text, kind", params(CASES, "kind_not_in", "text", "kind"))
def test_kind_not_in(text: str, kind: str) -> None:
    assert kind not in kinds(text)


@pytest.mark.parametrize("text, kind, present", params(CASES, "kind_present", "text", "kind", "present"))
def test_kind_present(text: str, kind: str, present: bool) -> None:
    assert (kind in kinds(text)) is present


@pytest.mark.parametrize("text, lack", params(CASES, "kinds_lack", "text", "lack"))
def test_kinds_lack(text: str, lack: list[str]) -> None:
    assert not kinds(text) & set(lack)


@pytest.mark.parametrize("text", params(CASES, "no_findings", "text"))
def test_no_findings(text: str) -> None:
    assert classify(text).findings == ()


@pytest.mark.parametrize("text", params(CASES, "not_sensitive", "text"))
def test_not_sensitive(text: str) -> None:
    assert not classify(text).sensitive


@pytest.mark.parametrize("text, kind, value", params(CASES, "finding_in", "text", "kind", "value"))
def test_finding_in(text: str, kind: str, value: str) -> None:
    assert (kind, value) in found(text)


@pytest.mark.parametrize("text, expected", params(CASES, "findings_are", "text", "expected"))
def test_findings_are(text: str, expected: list[list[str]]) -> None:
    assert found(text) == [(kind, span) for kind, span in expected]


@pytest.mark.parametrize("text, kind, spans", params(CASES, "spans_of_kind_are", "text", "kind", "spans"))
def test_spans_of_kind_are(text: str, kind: str, spans: list[str]) -> None:
    assert [span for k, span in found(text) if k == kind] == spans


@pytest.mark.parametrize("text, kind, part", params(CASES, "span_of_kind_holds", "text", "kind", "part"))
def test_span_of_kind_holds(text: str, kind: str, part: str) -> None:
    assert any(part in span for k, span in found(text) if k == kind)
