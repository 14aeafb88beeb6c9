"""Everything in an OpenAI request body that will reach a backend, as text the detectors can read.

Checking only message contents would let personal data out through the rest of the body: tool
call arguments, tool results, `name`, `user`, tool descriptions, stop strings. So the whole body
is walked and every string and number (and any key holding digits or '@') is collected, in order (so a value split across two messages is
still adjacent). What is sent is classified, not what is known: values of protocol words (`role`,
`type`, `format`, `model`, ... at any depth, where a client can put anything) and every key that
is not one of the API's own (a metadata key, a schema's property name) are collected too, after
the body's texts so they do not split adjacent contents. Parts the text detectors cannot read
(images, audio, files) make the request "opaque": the caller must treat it as sensitive (fail
closed). Token-id prompts (completions
`prompt`, embeddings `input`: a list of ids or of id lists) are set apart: they are readable once
the model's tokenizer turns them back into text, and opaque to a caller that cannot do that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Keys whose string values are protocol vocabulary: still read, but after the body's texts.
_VOCABULARY = frozenset({"model", "role", "type", "object", "finish_reason", "tool_choice", "detail",
                         "format", "reasoning_effort", "service_tier"})
# The API's own keys (OpenAI chat, completions, Responses, embeddings, JSON Schema, vLLM's
# extras); any other key is read as text.
_PROTOCOL_KEYS = frozenset("""
model messages role content name tool_calls tool_call_id function function_call functions arguments
type text image_url url detail input_audio data format file file_id filename file_data audio
temperature top_p n stream stream_options include_usage continuous_usage_stats stop max_tokens
max_completion_tokens presence_penalty frequency_penalty logit_bias logprobs top_logprobs user seed
tools tool_choice parallel_tool_calls response_format json_schema schema strict description
parameters properties required items enum additionalProperties $ref $defs definitions anyOf oneOf
allOf not minimum maximum exclusiveMinimum exclusiveMaximum minLength maxLength minItems maxItems
pattern default title const nullable examples prompt suffix echo best_of input instructions
metadata store reasoning reasoning_effort effort summary service_tier modalities voice prediction
id object call_id output previous_response_id truncation verbosity refusal annotations
guided_choice guided_regex guided_json guided_grammar guided_decoding_backend min_p top_k
repetition_penalty min_tokens ignore_eos stop_token_ids skip_special_tokens speculative
encoding_format dimensions input_text output_text input_image input_file image_url
""".split())
_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text", "refusal"})
# Content parts that carry what no text detector reads, whatever keys they use.
_OPAQUE_PART_TYPES = frozenset({"image_url", "input_image", "image", "input_audio", "audio", "file",
                                "input_file", "video", "video_url"})
_MAX_DEPTH = 32
_TOKEN_FIELDS = ("prompt", "input")  # top-level fields that may hold token ids
# What `_walk` does with the value under each of the API's own keys, looked up once per key:
# walk it, read a string as a protocol word, or look for token ids first.
_WALK, _WORD, _IDS = 0, 1, 2
_KEY_ACTIONS = {key: _WORD if key in _VOCABULARY else _IDS if key in _TOKEN_FIELDS else _WALK
                for key in _PROTOCOL_KEYS}


@dataclass(slots=True)
class RequestTexts:
    """What of a request body the detectors can read."""

    texts: list[str] = field(repr=False)  # every string and number, in body order
    opaque: bool = False  # a part no detector can read: non-text content, nesting too deep
    token_prompts: list[list[int]] = field(default_factory=list, repr=False)  # text once detokenised


def readable_parts(body: dict[str, Any]) -> RequestTexts:
    """The body's texts, whether something in it is unreadable, and its token-id prompts."""
    parts = RequestTexts([])
    extra: list[str] = []
    parts.opaque = _walk(body, parts.texts, extra, 0, parts.token_prompts)
    parts.texts += extra
    return parts


def inspectable_texts(body: dict[str, Any]) -> tuple[list[str], bool]:
    """Return (strings in body order, opaque). `opaque` is True when some part cannot be read
    as text: a non-text content part, a token-id prompt, or nesting too deep to walk."""
    parts = readable_parts(body)
    return parts.texts, parts.opaque or bool(parts.token_prompts)


def _has_ids(value: Any) -> bool:
    return isinstance(value, list) and any(not isinstance(p, str) for p in value)


def _prompt_parts(value: list[Any], out: list[str], tokens: list[list[int]]) -> bool:
    """A top-level prompt list holding ids: one id list, or a batch of texts and id lists
    (texts to `out`, id lists to `tokens`). True (opaque) for anything else in it."""
    if all(_is_id(t) for t in value):
        tokens.append(value)
        return False
    opaque = False
    for p in value:
        if isinstance(p, str):
            out.append(p)
        elif isinstance(p, list) and p and all(_is_id(t) for t in p):
            tokens.append(p)
        else:
            opaque = True
    return opaque


def _is_id(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _walk(node: Any, out: list[str], extra: list[str], depth: int, tokens: list[list[int]] | None = None) -> bool:
    """Collect `node`'s texts into `out` (protocol-word values and keys not the API's into
    `extra`); True when part of it is unreadable. `tokens` (the top level only) receives the
    token-id prompts."""
    if depth > _MAX_DEPTH:
        return True
    if isinstance(node, dict):
        return _walk_object(node, out, extra, depth, tokens)
    opaque = False
    if isinstance(node, list):
        for item in node:
            if type(item) is dict and depth < _MAX_DEPTH:
                opaque = _walk_object(item, out, extra, depth + 1, None) or opaque
            else:
                opaque = _walk(item, out, extra, depth + 1) or opaque
    elif isinstance(node, str):
        if node:
            out.append(node)
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        out.append(str(node))  # a national ID sent as a JSON number is still one
    return opaque


def _walk_object(node: dict[str, Any], out: list[str], extra: list[str], depth: int,
                 tokens: list[list[int]] | None) -> bool:
    opaque = False
    kind = node.get("type")
    if isinstance(kind, str) and (kind in _OPAQUE_PART_TYPES or (kind not in _TEXT_PART_TYPES
                                                                 and _is_content_part(node))):
        opaque = True  # image_url, input_audio, file, ...: nothing a text detector can read
    for key, value in node.items():
        action = _KEY_ACTIONS.get(key)
        if action is None:
            if not key.isalpha() and any(c.isdigit() or c == "@" for c in key):
                # A key holding digits or '@' may be data (metadata maps): read in place, so a
                # value split between a key and its value is still adjacent.
                out.append(key)
            else:
                extra.append(key)  # a metadata key, a schema's property name: anything
            action = _WORD if key in _VOCABULARY else _WALK
        if action == _WORD and isinstance(value, str):
            extra.append(value)  # a client can put anything in a `role` or a `type`
            continue
        if action == _IDS:
            if tokens is not None and _has_ids(value):
                opaque = _prompt_parts(value, out, tokens) or opaque
                continue
            if key == "prompt" and isinstance(value, list) and value and not isinstance(value[0], str):
                opaque = True  # nested token ids: nothing a detector can read
                continue
        if type(value) is str and depth < _MAX_DEPTH:
            if value:
                out.append(value)  # the common leaf, without a call
        else:
            opaque = _walk(value, out, extra, depth + 1) or opaque
    return opaque


def _is_content_part(node: dict[str, Any]) -> bool:
    # A content part carries its payload under a key named like its type ("image_url": {...});
    # tool definitions ({"type": "function", "function": {...}}) are text and walked normally.
    kind = node["type"]
    return kind in node and kind not in ("function", "json_schema")
