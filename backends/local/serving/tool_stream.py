"""Streamed tool calls, as OpenAI streams them: a call's first delta carries its index, id, type,
function name and empty arguments; then its arguments arrive in fragments as they are generated.

`ToolCallStream` reads one choice's growing reply by the request's `ToolPlan` (json_scan.py finds
the name and the arguments inside a call object before it is complete). Content outside calls
streams too (Hermes: text before the first `<tool_call>`; Llama 3 JSON: a reply that is not a JSON
object); content after a call waits for the end. The arguments' fragments add up to the exact
text the non-streaming response returns (both are the model's own arguments text). A call that
turns out malformed after its first delta went out cannot be taken back; the non-streaming
response would give that reply as content.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from fairgate.backends.local.serving.json_scan import CallScan, scan_call, skip_ws
from fairgate.backends.local.serving.tools import ToolPlan

HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"
PYTHON_TAG = "<|python_tag|>"


@dataclass(slots=True)
class _SentCall:
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:24]}")
    args_sent: int = 0  # characters of the arguments text sent
    args_done: bool = False


class ToolCallStream:
    """One choice's reply under tools, as content and tool-call deltas."""

    def __init__(self, plan: ToolPlan) -> None:
        self.plan = plan
        self.text = ""
        self.content_sent = ""
        self.calls: list[_SentCall] = []

    def feed(self, piece: str, final: bool = False) -> tuple[str, list[dict[str, Any]]]:
        """Add generated text; return (content delta, tool-call deltas) ready to send."""
        self.text += piece
        content, starts = self._regions(final)
        delta = ""
        sent = self.content_sent
        if not content.startswith(sent) and content.startswith(sent.lstrip()):
            sent = sent.lstrip()  # the final content is stripped around calls
        if content.startswith(sent) and len(content) > len(sent):
            delta = content[len(sent):]
            self.content_sent = content
        calls: list[dict[str, Any]] = []
        for i, start in enumerate(starts):
            scan = scan_call(self.text, start)
            if i == len(self.calls):
                if scan.name is None or scan.broken:
                    break  # later calls wait for this one's name
                self.calls.append(_SentCall())
                calls.append({"index": i, "id": self.calls[i].id, "type": "function",
                              "function": {"name": scan.name, "arguments": ""}})
            fragment = self._arguments(self.calls[i], scan)
            if fragment:
                calls.append({"index": i, "function": {"arguments": fragment}})
        return delta, calls

    @property
    def has_calls(self) -> bool:
        return bool(self.calls)

    def _arguments(self, sent: _SentCall, scan: CallScan) -> str:
        """The arguments text not yet sent: an object as it grows, a JSON string once whole,
        `{}` for a closed call without arguments."""
        if sent.args_done:
            return ""
        if scan.args_start is None:
            if scan.end is not None:
                sent.args_done = True
                return "{}"
            return ""
        if self.text[scan.args_start] in "{[":
            end = scan.args_end if scan.args_end is not None else len(self.text)
            fragment = self.text[scan.args_start + sent.args_sent : end]
            sent.args_sent += len(fragment)
            sent.args_done = scan.args_end is not None
            return fragment
        if scan.args_end is None:
            return ""
        sent.args_done = True
        value = json.loads(self.text[scan.args_start : scan.args_end])
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    def _regions(self, final: bool) -> tuple[str, list[int]]:
        """(content that may go out now, start of each call object seen so far)."""
        if self.plan.mode in ("required", "named"):
            start = skip_ws(self.text, 0)
            starts = [start] if start < len(self.text) and self.text[start] == "{" else []
            return self._final_content() if final else "", starts
        if self.plan.parser == "hermes":
            return self._hermes(final)
        return self._llama3_json(final)

    def _final_content(self) -> str:
        return self.plan.parse(self.text)[0] or ""

    def _hermes(self, final: bool) -> tuple[str, list[int]]:
        text, starts, pos = self.text, [], 0
        first = text.find(HERMES_OPEN)
        while (k := text.find(HERMES_OPEN, pos)) >= 0:
            j = skip_ws(text, k + len(HERMES_OPEN))
            if j >= len(text) or text[j] != "{":
                break
            starts.append(j)
            scan = scan_call(text, j)
            close = text.find(HERMES_CLOSE, scan.end) if scan.end is not None else -1
            if close < 0:
                break
            pos = close + len(HERMES_CLOSE)
        if final:
            return self._final_content(), starts
        before = text if first < 0 else text[:first]
        if first < 0:  # hold back what may be the start of a tag
            for cut in range(min(len(HERMES_OPEN) - 1, len(before)), 0, -1):
                if HERMES_OPEN.startswith(before[-cut:]):
                    before = before[:-cut]
                    break
        return before.rstrip(), starts

    def _llama3_json(self, final: bool) -> tuple[str, list[int]]:
        text = self.text
        i = skip_ws(text, 0)
        if text.startswith(PYTHON_TAG, i):
            i = skip_ws(text, i + len(PYTHON_TAG))
        if i >= len(text) or (PYTHON_TAG.startswith(text[i:]) and not final):
            return (self._final_content() if final else ""), []
        if text[i] != "{":  # plain content
            return (self._final_content() if final else text), []
        starts = []
        while i < len(text) and text[i] == "{":
            starts.append(i)
            end = scan_call(text, i).end
            if end is None:
                break
            i = skip_ws(text, end)
            if i < len(text) and text[i] == ";":
                i = skip_ws(text, i + 1)
        return (self._final_content() if final else ""), starts
