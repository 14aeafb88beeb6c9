from __future__ import annotations

import pytest

from fairgate.policies.routing import Rule, RuleMatch
from fairgate.policies.routing_schema import RuleSchemaError, parse_rules, rule_to_dict


def test_round_trip() -> None:
    data = [
        {"id": "pii", "match": {"sensitivity": "sensitive"}, "backend": "local-a", "fallbacks": ["local-b"]},
        {"match": {"model": "auto", "max_complexity": 0.3}, "backend": "small"},
    ]
    rules = parse_rules(data)
    assert rules[0] == Rule("pii", RuleMatch(sensitivity="sensitive"), "local-a", ("local-b",))
    assert rules[1].id == "rule-2" and rules[1].match.max_complexity == 0.3
    assert parse_rules([rule_to_dict(r) for r in rules]) == rules
    assert parse_rules({"rules": data}) == rules


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ({"backend": "x"}, "expected a JSON list"),
        ([{"match": {"sensitivty": "public"}, "backend": "x"}], "unknown match keys"),
        ([{"match": {}, "backend": "x", "extra": 1}], "unknown keys"),
        ([{"match": {}, "backend": ""}], "backend must be"),
        ([{"match": {}, "backend": "x", "fallbacks": "y"}], "fallbacks must be"),
        ([{"match": {"max_prompt_tokens": "10"}, "backend": "x"}], "must be an integer"),
        ([{"match": {"max_prompt_tokens": True}, "backend": "x"}], "must be an integer"),
        ([{"match": {"tenant": 5}, "backend": "x"}], "non-empty string"),
        (["x"], "must be an object"),
    ],
)
def test_rejects_malformed(bad: object, fragment: str) -> None:
    with pytest.raises(RuleSchemaError) as exc:
        parse_rules(bad)
    assert any(fragment in e for e in exc.value.errors), exc.value.errors
