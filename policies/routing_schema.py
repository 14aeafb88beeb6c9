"""Routing rules to and from their JSON form (what `PUT /admin/routes` takes and GET returns).

Strict on purpose: an unknown key (say a misspelt "sensitivty") is an error rather than
ignored, because an ignored match field silently widens a rule.

    {"id": "pii-local", "match": {"sensitivity": "sensitive"}, "backend": "llama-local",
     "fallbacks": ["llama-local-2"]}
"""

from __future__ import annotations

from typing import Any

from fairgate.policies.routing import Rule, RuleMatch

_MATCH_STR = ("tenant", "model", "sensitivity", "priority")
_MATCH_INT = ("max_prompt_tokens", "min_prompt_tokens")
_MATCH_FLOAT = ("max_complexity",)
_RULE_KEYS = {"id", "match", "backend", "fallbacks"}


class RuleSchemaError(ValueError):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def parse_rules(data: Any) -> list[Rule]:
    """Parse a JSON list of rules (or {"rules": [...]}) ; missing ids become "rule-<n>"."""
    if isinstance(data, dict) and set(data) == {"rules"}:
        data = data["rules"]
    if not isinstance(data, list):
        raise RuleSchemaError(["expected a JSON list of rules (or an object {\"rules\": [...]})"])
    errors: list[str] = []
    rules: list[Rule] = []
    for i, raw in enumerate(data):
        rule = _parse_rule(i, raw, errors)
        if rule is not None:
            rules.append(rule)
    if errors:
        raise RuleSchemaError(errors)
    return rules


def _parse_rule(i: int, raw: Any, errors: list[str]) -> Rule | None:
    where = f"rule {i}"
    if not isinstance(raw, dict):
        errors.append(f"{where}: must be an object")
        return None
    extra = set(raw) - _RULE_KEYS
    if extra:
        errors.append(f"{where}: unknown keys {sorted(extra)}")
    rid = raw.get("id", f"rule-{i + 1}")
    backend = raw.get("backend")
    fallbacks = raw.get("fallbacks", [])
    ok = True
    if not isinstance(rid, str) or not rid.strip() or len(rid) > 100:
        errors.append(f"{where}: id must be a non-empty string of at most 100 characters")
        ok = False
    if not isinstance(backend, str) or not backend:
        errors.append(f"{where}: backend must be a non-empty string")
        ok = False
    if not isinstance(fallbacks, list) or not all(isinstance(f, str) and f for f in fallbacks):
        errors.append(f"{where}: fallbacks must be a list of backend names")
        ok = False
    match = _parse_match(where, raw.get("match", {}), errors)
    if not ok or match is None or extra or not isinstance(backend, str):  # (ok covers the type)
        return None
    return Rule(rid.strip(), match, backend, tuple(fallbacks))


def _parse_match(where: str, raw: Any, errors: list[str]) -> RuleMatch | None:
    if not isinstance(raw, dict):
        errors.append(f"{where}: match must be an object")
        return None
    extra = set(raw) - set(_MATCH_STR + _MATCH_INT + _MATCH_FLOAT)
    if extra:
        errors.append(f"{where}: unknown match keys {sorted(extra)}")
        return None
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if value is None:
            continue
        if key in _MATCH_STR and not (isinstance(value, str) and value):
            errors.append(f"{where}: match.{key} must be a non-empty string")
        elif key in _MATCH_INT and (isinstance(value, bool) or not isinstance(value, int)):
            errors.append(f"{where}: match.{key} must be an integer")
        elif key in _MATCH_FLOAT and (isinstance(value, bool) or not isinstance(value, int | float)):
            errors.append(f"{where}: match.{key} must be a number")
        else:
            values[key] = float(value) if key in _MATCH_FLOAT else value
    if len(values) != sum(v is not None for v in raw.values()):
        return None
    return RuleMatch(**values)


def rule_to_dict(rule: Rule) -> dict[str, Any]:
    m = rule.match
    match = {k: getattr(m, k) for k in _MATCH_STR + _MATCH_INT + _MATCH_FLOAT}
    return {
        "id": rule.id,
        "match": {k: v for k, v in match.items() if v is not None},
        "backend": rule.backend,
        "fallbacks": list(rule.fallbacks),
    }
