"""The body walk's per-key table and inlined leaves (issue 34's hot path) read exactly what the
plain rule reads: every body, at every depth, gives the same texts, order and opacity."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fairgate.policies import request_texts as rt


def _plain(node: Any, out: list[str], extra: list[str], depth: int, tokens: list[list[int]] | None) -> bool:
    """The rule as the module's docstring states it, one test per key, no table."""
    if depth > rt._MAX_DEPTH:
        return True
    opaque = False
    if isinstance(node, dict):
        kind = node.get("type")
        if isinstance(kind, str) and (kind in rt._OPAQUE_PART_TYPES
                                      or (kind not in rt._TEXT_PART_TYPES and rt._is_content_part(node))):
            opaque = True
        for key, value in node.items():
            if not key.isalpha() and any(c.isdigit() or c == "@" for c in key):
                out.append(key)
            elif key not in rt._PROTOCOL_KEYS:
                extra.append(key)
            if key in rt._VOCABULARY and isinstance(value, str):
                extra.append(value)
            elif key in rt._TOKEN_FIELDS and tokens is not None and rt._has_ids(value):
                opaque = rt._prompt_parts(value, out, tokens) or opaque
            elif key == "prompt" and isinstance(value, list) and value and not isinstance(value[0], str):
                opaque = True
            else:
                opaque = _plain(value, out, extra, depth + 1, None) or opaque
    elif isinstance(node, list):
        for item in node:
            opaque = _plain(item, out, extra, depth + 1, None) or opaque
    elif isinstance(node, str):
        if node:
            out.append(node)
    elif isinstance(node, int | float) and not isinstance(node, bool):
        out.append(str(node))
    return opaque


def _plain_parts(body: dict[str, Any]) -> tuple[list[str], bool, list[list[int]]]:
    texts: list[str] = []
    extra: list[str] = []
    tokens: list[list[int]] = []
    opaque = _plain(body, texts, extra, 0, tokens)
    return texts + extra, opaque, tokens


KEYS = st.sampled_from(["model", "messages", "role", "content", "type", "text", "image_url", "prompt", "input",
                        "finish_reason", "function", "json_schema", "metadata", "ref", "tc1", "a@b", "$ref",
                        "user", "x-y", "Ad", "tools"])
TYPES = st.sampled_from(["text", "image_url", "input_audio", "function", "json_schema", "custom", "refusal"])
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**12), st.floats(allow_nan=False),
                   st.text(max_size=6), TYPES)
JSON = st.recursive(LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(KEYS, st.text(max_size=4)), inner, max_size=4),
    st.fixed_dictionaries({"type": TYPES}, optional={"image_url": inner, "text": inner, "custom": inner})),
    max_leaves=25)
IDS = st.lists(st.integers(0, 50_000), min_size=1, max_size=4)
TOP = st.fixed_dictionaries({}, optional={"model": JSON, "messages": JSON, "prompt": st.one_of(JSON, IDS, st.lists(
    st.one_of(st.text(max_size=4), IDS), max_size=3)), "input": st.one_of(JSON, IDS), "metadata": JSON})


def _nest(value: Any, levels: int, key: str) -> Any:
    for _ in range(levels):
        value = {key: value} if key else [value]
    return value


@settings(max_examples=300, deadline=None)
@given(TOP)
def test_the_table_reads_what_the_plain_rule_reads(body: dict[str, Any]) -> None:
    parts = rt.readable_parts(body)
    assert (parts.texts, parts.opaque, parts.token_prompts) == _plain_parts(body)


@settings(max_examples=100, deadline=None)
@given(JSON, st.integers(rt._MAX_DEPTH - 3, rt._MAX_DEPTH + 2), st.sampled_from(["", "content", "ref", "model"]))
def test_the_depth_limit_is_where_it_was(leaf: Any, levels: int, key: str) -> None:
    """Leaves and objects read without a call still stop at the same depth."""
    body = {"messages": _nest(leaf, levels, key)}
    parts = rt.readable_parts(body)
    assert (parts.texts, parts.opaque, parts.token_prompts) == _plain_parts(body)


def test_a_string_one_level_past_the_limit_is_opaque() -> None:
    """Fails if an inlined leaf skipped the depth check: a string at depth 33 is unreadable."""
    at_limit = {"m": _nest("TC 10000000146", rt._MAX_DEPTH - 1, "content")}  # the string at depth 32
    past_it = {"m": _nest("TC 10000000146", rt._MAX_DEPTH, "content")}  # at depth 33
    assert rt.readable_parts(at_limit).texts[0] == "TC 10000000146"
    assert not rt.readable_parts(at_limit).opaque
    assert rt.readable_parts(past_it).opaque and "TC 10000000146" not in rt.readable_parts(past_it).texts
