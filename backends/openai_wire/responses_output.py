"""The Responses API answer built from what the chat path produced: the `response` object from a
chat completion, and the Responses server-sent events from chat chunks.

Streamed events, in OpenAI's order: `response.created`, `response.in_progress`; per output item
`response.output_item.added`, then for a message `response.content_part.added`,
`response.output_text.delta`..., `response.output_text.done`, `response.content_part.done`, and for
a function call `response.function_call_arguments.delta`..., `response.function_call_arguments.done`;
`response.output_item.done`; last `response.completed` (or `response.incomplete` when
`max_output_tokens` cut it) with the usage. A generation that fails after the stream opened
(engine error, upstream reset, engine shutdown) ends with `response.failed` instead: the response
object with status "failed", its `error` {code, message} and the output so far (open items
"incomplete"). Every event carries a `sequence_number`.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson

Chunk = dict[str, Any]


def responses_usage(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """Chat usage -> Responses usage (input/output tokens)."""
    if not usage:
        return None
    details = usage.get("prompt_tokens_details") or {}
    thinking = int((usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
    prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": int(details.get("cached_tokens") or 0)},
            "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": thinking},
            "total_tokens": prompt + completion}


def _item_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def _message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    content = [] if status == "in_progress" or (status == "incomplete" and not text) else [_text_part(text)]
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": content}


def failure_error(message: str, status: int) -> dict[str, str]:
    """The Response object's `error`: OpenAI's codes are `rate_limit_exceeded` and, for every
    failure of ours (engine, upstream, shutdown), `server_error`."""
    return {"code": "rate_limit_exceeded" if status == 429 else "server_error", "message": message}


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _reasoning_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    """A reasoning model's thinking (chat `reasoning_content`) as a Responses `reasoning` item."""
    return {"type": "reasoning", "id": item_id, "status": status, "summary": [],
            "content": [{"type": "reasoning_text", "text": text}] if text or status != "in_progress" else []}


def _call_item(item_id: str, call_id: str, name: str, arguments: str, status: str) -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": arguments,
            "status": status}


class ResponsesOutput:
    """One Responses request's answer; `request` is the client's Responses body."""

    def __init__(self, request: dict[str, Any], request_id: str) -> None:
        self.request = request
        self.id = f"resp_{request_id}"
        self.created = int(time.time())
        self.model = request.get("model") if isinstance(request.get("model"), str) else ""
        self.output: list[dict[str, Any]] = []  # finished items, in order
        self.usage: dict[str, Any] | None = None
        self.finish: str | None = None
        self._seq = 0
        self._started = False
        self._message: dict[str, Any] | None = None  # the open message item (streaming)
        self._thinking: dict[str, Any] | None = None  # the open reasoning item (streaming)
        self._calls: dict[int, dict[str, Any]] = {}  # chat tool-call index -> open function_call item

    # ------------------------------------------------------------------ non-streaming
    def response(self, chat: dict[str, Any]) -> dict[str, Any]:
        """The `response` object for a chat completion."""
        self.model = chat.get("model") or self.model
        choice = (chat.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        calls = message.get("tool_calls") or []
        if message.get("reasoning_content") is not None:
            self.output.append(_reasoning_item(_item_id("rs"), message["reasoning_content"], "completed"))
        if message.get("content") or not calls:
            self.output.append(_message_item(_item_id("msg"), message.get("content") or "", "completed"))
        for call in calls:
            fn = call.get("function") or {}
            self.output.append(_call_item(_item_id("fc"), call.get("id") or _item_id("call"), fn.get("name", ""),
                                          fn.get("arguments", ""), "completed"))
        self.finish, self.usage = choice.get("finish_reason"), chat.get("usage")
        return self._object(self._final_status())

    def _final_status(self) -> str:
        return "incomplete" if self.finish == "length" else "completed"

    def _object(self, status: str = "in_progress", error: dict[str, str] | None = None) -> dict[str, Any]:
        """The `response` object; `status` in_progress | completed | incomplete | failed."""
        r = self.request
        done = status != "in_progress"
        return {
            "id": self.id, "object": "response", "created_at": self.created, "status": status, "error": error,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": r.get("instructions"), "max_output_tokens": r.get("max_output_tokens"),
            "model": self.model, "output": list(self.output) if done else [],
            "parallel_tool_calls": r.get("parallel_tool_calls", True), "previous_response_id": None,
            "reasoning": None, "store": False, "temperature": r.get("temperature", 1.0),
            "text": r.get("text") or {"format": {"type": "text"}}, "tool_choice": r.get("tool_choice", "auto"),
            "tools": r.get("tools") or [], "top_p": r.get("top_p", 1.0), "truncation": "disabled",
            "usage": responses_usage(self.usage) if done else None, "user": r.get("user"),
            "metadata": r.get("metadata") or {},
        }

    # ------------------------------------------------------------------ streaming
    def frame(self, batch: list[Chunk]) -> bytes:
        """The events for one batch of chat chunks (the first batch opens the response)."""
        if not self._started and batch and batch[0].get("model"):
            self.model = batch[0]["model"]
        events = self._open()
        for chunk in batch:
            if chunk.get("usage"):
                self.usage = chunk["usage"]
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                if delta.get("reasoning_content"):
                    events += self._think(delta["reasoning_content"])
                if delta.get("content"):
                    events += self._text(delta["content"])
                for call in delta.get("tool_calls") or ():
                    events += self._call_delta(call)
                self.finish = choice.get("finish_reason") or self.finish
        return b"".join(events)

    def _open(self) -> list[bytes]:
        """`response.created` and `response.in_progress`, once, before anything else."""
        if self._started:
            return []
        self._started = True
        return [self._event("response.created", response=self._object()),
                self._event("response.in_progress", response=self._object())]

    def end(self) -> bytes:
        """Close the open items, then `response.completed` (or `.incomplete`) with the usage."""
        events = self._open() + self._close_thinking() + self._close_message()
        for index in sorted(self._calls):
            events += self._close_call(index)
        if not self.output:  # an empty reply is still one (empty) message
            events += self._text("") + self._close_message()
        status = self._final_status()
        return b"".join(events) + self._event(f"response.{status}", response=self._object(status))

    def failed(self, message: str, status: int = 500) -> bytes:
        """The generation failed after the stream opened (`status`: the HTTP status the failure
        would have had): `response.failed` with the output so far, its open items incomplete.
        Nothing follows it."""
        events = self._open()
        t, self._thinking = self._thinking, None
        if t is not None:
            self.output.append(_reasoning_item(t["id"], t["text"], "incomplete"))
        m, self._message = self._message, None
        if m is not None:
            self.output.append(_message_item(m["id"], m["text"], "incomplete"))
        for index in sorted(self._calls):
            c = self._calls[index]
            self.output.append(_call_item(c["id"], c["call_id"], c["name"], c["arguments"], "incomplete"))
        self._calls = {}
        failed = self._object("failed", failure_error(message, status))
        return b"".join(events) + self._event("response.failed", response=failed)

    def _event(self, kind: str, **fields: Any) -> bytes:
        body = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(body) + b"\n\n"

    def _think(self, text: str) -> list[bytes]:
        """A delta of the thinking: its item opened first (it comes before the answer)."""
        events = []
        if self._thinking is None:
            self._thinking = {"id": _item_id("rs"), "text": "", "index": len(self.output)}
            events.append(self._event("response.output_item.added", output_index=self._thinking["index"],
                                      item=_reasoning_item(self._thinking["id"], "", "in_progress")))
        self._thinking["text"] += text
        events.append(self._event("response.reasoning_text.delta", item_id=self._thinking["id"],
                                  output_index=self._thinking["index"], content_index=0, delta=text))
        return events

    def _close_thinking(self) -> list[bytes]:
        t, self._thinking = self._thinking, None
        if t is None:
            return []
        item = _reasoning_item(t["id"], t["text"], "completed")
        self.output.append(item)
        return [self._event("response.reasoning_text.done", item_id=t["id"], output_index=t["index"], content_index=0,
                            text=t["text"]),
                self._event("response.output_item.done", output_index=t["index"], item=item)]

    def _text(self, text: str) -> list[bytes]:
        events = self._close_thinking()
        if self._message is None:
            self._message = _message_item(_item_id("msg"), "", "in_progress")
            self._message["text"] = ""
            self._message["index"] = len(self.output) + len(self._calls)
            events += [self._event("response.output_item.added", output_index=self._message["index"],
                                   item=_message_item(self._message["id"], "", "in_progress")),
                       self._event("response.content_part.added", item_id=self._message["id"],
                                   output_index=self._message["index"], content_index=0, part=_text_part(""))]
        if text:
            self._message["text"] += text
            events.append(self._event("response.output_text.delta", item_id=self._message["id"],
                                      output_index=self._message["index"], content_index=0, delta=text,
                                      logprobs=[]))
        return events

    def _close_message(self) -> list[bytes]:
        m, self._message = self._message, None
        if m is None:
            return []
        item = _message_item(m["id"], m["text"], "completed")
        self.output.append(item)
        where = {"item_id": m["id"], "output_index": m["index"]}
        return [self._event("response.output_text.done", **where, content_index=0, text=m["text"], logprobs=[]),
                self._event("response.content_part.done", **where, content_index=0, part=_text_part(m["text"])),
                self._event("response.output_item.done", output_index=m["index"], item=item)]

    def _call_delta(self, call: dict[str, Any]) -> list[bytes]:
        index, fn = call.get("index", 0), call.get("function") or {}
        events: list[bytes] = []
        if index not in self._calls:
            events += self._close_thinking() + self._close_message()  # OpenAI: a call item follows the text item
            item = _call_item(_item_id("fc"), call.get("id") or _item_id("call"), fn.get("name") or "", "",
                              "in_progress")
            self._calls[index] = {**item, "output_index": len(self.output) + len(self._calls)}
            events.append(self._event("response.output_item.added", output_index=self._calls[index]["output_index"],
                                      item=item))
        open_call = self._calls[index]
        if fn.get("arguments"):
            open_call["arguments"] += fn["arguments"]
            events.append(self._event("response.function_call_arguments.delta", item_id=open_call["id"],
                                      output_index=open_call["output_index"], delta=fn["arguments"]))
        return events

    def _close_call(self, index: int) -> list[bytes]:
        c = self._calls[index]
        item = _call_item(c["id"], c["call_id"], c["name"], c["arguments"], "completed")
        self.output.append(item)
        return [self._event("response.function_call_arguments.done", item_id=c["id"], output_index=c["output_index"],
                            name=c["name"], arguments=c["arguments"]),
                self._event("response.output_item.done", output_index=c["output_index"], item=item)]
