"""Case tables kept as data: one TOML file a topic, one table a group of cases.

A group is a former parametrized test: its table name is the test's name, `about` its docstring or
comment, `check` the one assertion every case gets, and `cases` (inline tables) or `texts` (bare
sentences) the cases. Any other key in a group is a value every case shares (`kind = "health"`).
A runner reads every group of one check with `params` and asserts it in one plain test function,
so a table of sentences is data, and the assertion is written once.

The checks, and what each asserts of a case:

    names family (tests/policies/test_name_cases.py; names() = find_person_names' spans)
    no_names           names(text) == []
    names_are          names(text) == expected
    name_in            name in names(text)
    names_include      [n for n in names(text) if n in expected] == expected
    category family (tests/policies/test_category_cases.py; on classify(text))
    kind_in            kind in the findings' kinds
    kind_not_in        kind not in the findings' kinds
    kind_present       (kind in the findings' kinds) is present
    kinds_lack         none of `lack` in the findings' kinds
    no_findings        no finding at all
    not_sensitive      not classify(text).sensitive
    finding_in         (kind, value) in the findings' (kind, span text) pairs
    findings_are       the findings' (kind, span text) pairs == expected, in order
    spans_of_kind_are  the span texts of the findings of `kind` == spans
    span_of_kind_holds some span text of a finding of `kind` holds `part`
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHECKS = ("no_names", "names_are", "name_in", "names_include", "kind_in", "kind_not_in",
          "kind_present", "kinds_lack", "no_findings", "not_sensitive", "finding_in", "findings_are",
          "spans_of_kind_are", "span_of_kind_holds")
_GROUP_KEYS = ("about", "check", "cases", "texts")


def groups(folder: Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(file stem, group name, group) for every group of every `*.toml` in `folder`, in order."""
    for path in sorted(folder.glob("*.toml")):
        for name, group in tomllib.loads(path.read_text(encoding="utf-8")).items():
            yield path.stem, name, group


def params(folder: Path, check: str, *fields: str) -> list[Any]:
    """The cases of every group whose check is `check`, as pytest params of `fields`, each with
    the id `<file>.<group>.<n>` (n counts from 0 within the group) so a failure names its sentence."""
    out = []
    for stem, name, group in groups(folder):
        if group["check"] != check:
            continue
        shared = {k: v for k, v in group.items() if k not in _GROUP_KEYS}
        cases = group.get("cases") or [{"text": t} for t in group.get("texts", [])]
        for n, case in enumerate(cases):
            case = {**shared, **case}
            out.append(pytest.param(*(case[f] for f in fields), id=f"{stem}.{name}.{n}"))
    return out
