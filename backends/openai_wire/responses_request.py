"""The Responses API (`POST /v1/responses`) request, read as a chat-completions body.

fairgate serves Responses on the chat path (as LiteLLM bridges it): `input` (a string or a list
of message / function_call / function_call_output items) and `instructions` become chat
messages, `max_output_tokens` becomes `max_tokens`, flat function tools become chat tools,
`text.format` becomes `response_format`. Nothing is stored, so what needs stored state
(`previous_response_id`, `conversation`, `store: true`, `background`) is refused by name, as are
built-in tools, non-text inputs and any field this reading does not know: never ignored.
"""

from __future__ import annotations

from typing import Any

from fairgate.backends.openai_wire.errors import WireError, bad_value

# Read here, or passed to the chat body as they are (fairgate's and vLLM's sampling extensions).
_KNOWN = frozenset({
    "model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "stream", "tools",
    "tool_choice", "parallel_tool_calls", "text", "metadata", "user", "store", "truncation", "include",
    "reasoning", "stream_options", "service_tier", "safety_identifier", "prompt_cache_key",
})
_PASSED = ("temperature", "top_p", "user", "seed", "top_k", "min_p", "repetition_penalty", "presence_penalty",
           "frequency_penalty", "stop", "speculative", "ignore_eos")
_ROLES = ("user", "assistant", "system", "developer")
_TEXT_PARTS = ("input_text", "output_text", "text")


def responses_to_chat(body: Any) -> dict[str, Any]:
    """The chat-completions body for a Responses body; raises `WireError` (400) naming a field
    it cannot honour."""
    if not isinstance(body, dict):
        raise bad_value("The request body must be a JSON object.")
    _refuse(body)
    messages = _instructions(body.get("instructions")) + _input_messages(body.get("input"))
    chat: dict[str, Any] = {"messages": messages}
    if "model" in body:
        chat["model"] = body["model"]
    for name in _PASSED:
        if body.get(name) is not None:
            chat[name] = body[name]
    max_out = body.get("max_output_tokens")
    if max_out is not None:
        chat["max_tokens"] = max_out  # the wire parser checks it (positive integer)
    if body.get("stream") is not None:
        chat["stream"] = body["stream"]
        if body["stream"] is True:
            chat["stream_options"] = {"include_usage": True}  # response.completed carries usage
    if body.get("tools") is not None:
        chat["tools"] = _tools(body["tools"])
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
    fmt = _text_format(body.get("text"))
    if fmt is not None:
        chat["response_format"] = fmt
    return chat


_STATEFUL = ("previous_response_id", "conversation", "prompt", "background", "context_management",
             "prompt_cache_retention")
_UNSUPPORTED = ("max_tool_calls", "top_logprobs")


def _refuse(body: dict[str, Any]) -> None:
    for name in _STATEFUL:
        if body.get(name) not in (None, False):
            raise bad_value(f"`{name}` is not supported: this server keeps no responses", name)
    for name in _UNSUPPORTED:
        if body.get(name) is not None:
            raise bad_value(f"`{name}` is not supported", name)
    unknown = sorted(set(body) - _KNOWN - set(_PASSED) - set(_STATEFUL) - set(_UNSUPPORTED))
    if unknown:
        raise bad_value(f"Unknown parameter: `{unknown[0]}`", unknown[0])
    if body.get("store") is True:
        raise bad_value("`store: true` is not supported: this server keeps no responses; send false", "store")
    if body.get("truncation") not in (None, "disabled"):
        raise bad_value('`truncation` may only be "disabled"', "truncation")
    if body.get("include"):
        raise bad_value("`include` is not supported", "include")
    if body.get("reasoning") is not None:
        raise bad_value("`reasoning` is not supported by this model", "reasoning")
    if body.get("parallel_tool_calls") is not None and not isinstance(body["parallel_tool_calls"], bool):
        raise bad_value("`parallel_tool_calls` must be a boolean", "parallel_tool_calls")
    if body.get("metadata") is not None and not isinstance(body["metadata"], dict):
        raise bad_value("`metadata` must be an object", "metadata")


def _instructions(instructions: Any) -> list[dict[str, Any]]:
    if instructions is None:
        return []
    if not isinstance(instructions, str):
        raise bad_value("`instructions` must be a string", "instructions")
    return [{"role": "system", "content": instructions}]


def _input_messages(items: Any) -> list[dict[str, Any]]:
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise bad_value("`input` must be a string or a non-empty list of input items", "input")
    messages: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise bad_value(f"input[{i}] must be an object", "input")
        kind = item.get("type", "message")
        if kind == "message":
            messages.append(_message(item, i))
        elif kind == "function_call":
            _function_call(item, i, messages)
        elif kind == "function_call_output":
            output = item.get("output")
            if not isinstance(item.get("call_id"), str) or not isinstance(output, str):
                raise bad_value(f"input[{i}]: function_call_output needs a string call_id and output", "input")
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": output})
        else:
            raise bad_value(f"input[{i}]: items of type `{kind}` are not supported", "input")
    return messages


def _message(item: dict[str, Any], i: int) -> dict[str, Any]:
    role, content = item.get("role"), item.get("content")
    if role not in _ROLES:
        raise bad_value(f"input[{i}].role must be one of {', '.join(_ROLES)}", "input")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise bad_value(f"input[{i}].content must be a string or a list of content parts", "input")
    texts = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") not in _TEXT_PARTS or not isinstance(part.get("text"), str):
            kind = part.get("type") if isinstance(part, dict) else None
            raise bad_value(f"input[{i}]: content parts of type `{kind}` are not supported (text only)", "input")
        texts.append(part["text"])
    return {"role": role, "content": "".join(texts)}


def _function_call(item: dict[str, Any], i: int, messages: list[dict[str, Any]]) -> None:
    """A past call: joins the assistant message before it (one message, several calls)."""
    if not all(isinstance(item.get(k), str) for k in ("call_id", "name", "arguments")):
        raise bad_value(f"input[{i}]: function_call needs string call_id, name and arguments", "input")
    call = {"id": item["call_id"], "type": "function",
            "function": {"name": item["name"], "arguments": item["arguments"]}}
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant" and "tool_calls" in last:
        last["tool_calls"].append(call)
    else:
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise bad_value("`tools` must be a list", "tools")
    out = []
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind != "function":
            raise bad_value(f"tools[{i}]: tools of type `{kind}` are not supported (function tools only)", "tools")
        fn = {k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None}
        out.append({"type": "function", "function": fn})
    return out


def _tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise bad_value('`tool_choice` must be "auto", "none", "required" or {"type": "function", "name": ...}',
                    "tool_choice")


def _text_format(text: Any) -> dict[str, Any] | None:
    if text is None:
        return None
    fmt = text.get("format") if isinstance(text, dict) else None
    if isinstance(text, dict) and set(text) - {"format", "verbosity"}:
        raise bad_value(f"text.{sorted(set(text) - {'format', 'verbosity'})[0]} is not supported", "text")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind in ("text", "json_object"):
        return {"type": kind}
    if kind == "json_schema":
        spec = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return {"type": "json_schema", "json_schema": spec}
    raise bad_value('text.format.type must be "text", "json_object" or "json_schema"', "text")


_PARAM_NAMES = {"max_tokens": "max_output_tokens", "messages": "input", "response_format": "text"}


def as_responses_error(err: WireError) -> WireError:
    """A refusal of the chat body the Responses body became, naming the Responses field."""
    if err.param in _PARAM_NAMES:
        name = _PARAM_NAMES[err.param]
        err.message = err.message.replace(f"`{err.param}`", f"`{name}`")
        err.param = name
    return err
