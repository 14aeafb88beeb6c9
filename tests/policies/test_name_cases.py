"""The person-name case tables in cases/*.toml, one test a check (tests/helpers/case_tables.py
says what the checks are and how a table reads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairgate.policies.detection.persons.names import find_person_names
from tests.helpers.case_tables import params

CASES = Path(__file__).parent / "cases"


def names(text: str) -> list[str]:
    return [text[s:e] for s, e in find_person_names(text) or []]


@pytest.mark.parametrize("text", params(CASES, "no_names", "text"))
def test_no_names(text: str) -> None:
    assert names(text) == []


@pytest.mark.parametrize("text, expected", params(CASES, "names_are", "text", "expected"))
def test_names_are(text: str, expected: list[str]) -> None:
    assert names(text) == expected


@pytest.mark.parametrize("text, name", params(CASES, "name_in", "text", "name"))
def test_name_in(text: str, name: str) -> None:
    assert name in names(text)


@pytest.mark.parametrize("text, expected", params(CASES, "names_include", "text", "expected"))
def test_names_include(text: str, expected: list[str]) -> None:
    # the names found that are among the expected ones, in order: other words may be names too
    assert [n for n in names(text) if n in expected] == expected
