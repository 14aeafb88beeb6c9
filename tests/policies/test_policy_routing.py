from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairgate.policies.routing import (
    RouteFacts,
    RoutingError,
    Rule,
    RuleMatch,
    evaluate,
    validate_rules,
)

LOCALITY = {"llama-local": True, "llama-local-2": True, "small-local": True, "gpt-ext": False, "claude-ext": False}


def facts(**kw: object) -> RouteFacts:
    base: dict[str, object] = {"tenant": "acme", "model": "chat", "sensitive": False}
    base.update(kw)
    return RouteFacts(**base)  # type: ignore[arg-type]


def test_validate_rejects_rules_that_could_send_sensitive_data_out() -> None:
    bad = [Rule("r1", RuleMatch(model="chat"), "gpt-ext")]
    errs = validate_rules(bad, LOCALITY)
    assert len(errs) == 1 and "external backend 'gpt-ext'" in errs[0]
    bad_fallback = [Rule("r1", RuleMatch(sensitivity="sensitive"), "llama-local", ("gpt-ext",))]
    assert validate_rules(bad_fallback, LOCALITY)
    ok = [Rule("r1", RuleMatch(model="chat", sensitivity="public"), "gpt-ext", ("llama-local",))]
    assert validate_rules(ok, LOCALITY) == []


def test_validate_other_errors() -> None:
    rules = [
        Rule("a", RuleMatch(sensitivity="secret"), "llama-local"),
        Rule("a", RuleMatch(max_complexity=2.0, max_prompt_tokens=-1), "nope"),
        Rule("c", RuleMatch(), "llama-local", ("llama-local",)),
    ]
    errs = " | ".join(validate_rules(rules, LOCALITY))
    for fragment in ("sensitivity must be", "duplicate id", "max_complexity", "max_prompt_tokens",
                     "unknown backend 'nope'", "appears twice"):
        assert fragment in errs


def test_first_matching_rule_wins_and_fallbacks_follow() -> None:
    rules = [
        Rule("big", RuleMatch(tenant="acme", model="chat", priority="interactive"), "llama-local", ("llama-local-2",)),
        Rule("pub", RuleMatch(model="chat", sensitivity="public"), "gpt-ext", ("llama-local",)),
    ]
    plan = evaluate(rules, facts(priority="interactive"), LOCALITY)
    assert plan.backends == ("llama-local", "llama-local-2") and plan.rule_id == "big"
    plan = evaluate(rules, facts(priority="batch"), LOCALITY)
    assert plan.backends == ("gpt-ext", "llama-local") and plan.reason == "rule:pub"


def test_sensitive_request_skips_public_rule_and_gets_503_without_local() -> None:
    rules = [Rule("pub", RuleMatch(model="chat", sensitivity="public"), "gpt-ext")]
    with pytest.raises(RoutingError) as exc:
        evaluate(rules, facts(sensitive=True), LOCALITY)
    assert exc.value.status == 503 and exc.value.code == "no_local_backend"
    assert "not sent to any external API" in str(exc.value)


def test_engine_filters_external_backends_even_if_rules_are_invalid() -> None:
    # A rule list that validation would reject (e.g. locality changed after saving).
    rules = [Rule("r", RuleMatch(), "gpt-ext", ("llama-local",))]
    assert evaluate(rules, facts(sensitive=True), LOCALITY).backends == ("llama-local",)
    assert evaluate(rules, facts(sensitive=False), LOCALITY).backends == ("gpt-ext", "llama-local")


def test_unavailable_and_unknown_backends() -> None:
    rules = [Rule("r", RuleMatch(model="chat"), "llama-local", ("llama-local-2", "deleted"))]
    plan = evaluate(rules, facts(), LOCALITY, unavailable=frozenset({"llama-local"}))
    assert plan.backends == ("llama-local-2",)
    with pytest.raises(RoutingError) as exc:
        evaluate(rules, facts(), LOCALITY, unavailable=frozenset({"llama-local", "llama-local-2"}))
    assert exc.value.code == "no_backend_available"


def test_direct_model_name_and_alias_without_rules() -> None:
    assert evaluate([], facts(model="gpt-ext"), LOCALITY).backends == ("gpt-ext",)
    assert evaluate([], facts(model="fast"), LOCALITY, aliases={"fast": "small-local"}).backends == ("small-local",)
    with pytest.raises(RoutingError) as exc:
        evaluate([], facts(model="gpt-ext", sensitive=True), LOCALITY)
    assert exc.value.code == "no_local_backend"
    with pytest.raises(RoutingError) as exc:
        evaluate([], facts(model="missing"), LOCALITY)
    assert exc.value.status == 404 and exc.value.code == "model_not_found"


def test_auto_routes_simple_requests_to_small_model() -> None:
    rules = [
        Rule("auto-small", RuleMatch(model="auto", max_complexity=0.3), "small-local"),
        Rule("auto-big", RuleMatch(model="auto"), "llama-local"),
    ]
    assert evaluate(rules, facts(model="auto", complexity=0.1), LOCALITY).backends == ("small-local",)
    assert evaluate(rules, facts(model="auto", complexity=0.7), LOCALITY).backends == ("llama-local",)
    # Unknown complexity is never "simple".
    assert evaluate(rules, facts(model="auto"), LOCALITY).backends == ("llama-local",)


def test_prompt_token_bounds_and_globs() -> None:
    rules = [
        Rule("short", RuleMatch(model="gpt-*", max_prompt_tokens=100, sensitivity="public"), "gpt-ext"),
        Rule("long", RuleMatch(model="gpt-*", min_prompt_tokens=101), "llama-local"),
    ]
    assert evaluate(rules, facts(model="gpt-4o", prompt_tokens=50), LOCALITY).rule_id == "short"
    assert evaluate(rules, facts(model="gpt-4o", prompt_tokens=500), LOCALITY).rule_id == "long"


names = st.sampled_from(sorted(LOCALITY))
matches = st.builds(
    RuleMatch,
    tenant=st.sampled_from([None, "acme", "globex"]),
    model=st.sampled_from([None, "chat", "auto", "gpt-*"]),
    sensitivity=st.sampled_from([None, "sensitive", "public"]),
    priority=st.sampled_from([None, "interactive", "batch"]),
    max_prompt_tokens=st.sampled_from([None, 10, 1000]),
)
rule_lists = st.lists(
    st.builds(Rule, id=st.uuids().map(str), match=matches, backend=names,
              fallbacks=st.lists(names, max_size=3, unique=True).map(tuple)),
    max_size=6,
)
fact_values = st.builds(
    RouteFacts,
    tenant=st.sampled_from(["acme", "globex"]),
    model=st.sampled_from(["chat", "auto", "gpt-4o", "gpt-ext", "llama-local"]),
    sensitive=st.booleans(),
    priority=st.sampled_from(["interactive", "standard", "batch"]),
    prompt_tokens=st.sampled_from([None, 5, 500]),
    complexity=st.sampled_from([None, 0.1, 0.9]),
)


@settings(max_examples=300, deadline=None)
@given(rules=rule_lists, f=fact_values, down=st.frozensets(names))
def test_invariant_sensitive_never_gets_external_backend(rules, f, down) -> None:  # type: ignore[no-untyped-def]
    try:
        plan = evaluate(rules, f, LOCALITY, unavailable=down)
    except RoutingError as exc:
        assert exc.status in (404, 503)
        return
    assert plan.backends, "a plan always names a backend"
    assert not set(plan.backends) & down
    if f.sensitive:
        assert all(LOCALITY[b] for b in plan.backends)
