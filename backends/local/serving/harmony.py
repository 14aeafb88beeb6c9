"""gpt-oss's harmony output as text, split into thinking and answer (`--reasoning-parser gpt_oss`).

gpt-oss answers in messages, each a header and a body:

    <|channel|>analysis<|message|>thinking...<|end|>
    <|start|>assistant<|channel|>final<|message|>the answer<|return|>

(the first message's `<|start|>assistant` is the chat template's generation prompt). The channel
says who reads the body: `analysis` is the thinking (-> reasoning_content), `final` the answer
(-> content), `commentary` without a recipient a preamble meant for the user (-> content). A
commentary message to a function (`<|channel|>commentary to=functions.NAME <|constrain|>json
<|message|>{...}<|call|>`) is a tool call: it goes to the content as a Hermes `<tool_call>`, so
`--tool-call-parser hermes` turns it into OpenAI `tool_calls` (streamed as they grow); a message
to one of gpt-oss's built-in tools (`to=python`, `to=browser.search`) is thinking. An output
that does not open with a header is all answer. The markers are special tokens in gpt-oss's
tokenizer, so the engine decodes these requests with special tokens kept (prepare.py).

Like reasoning.ReasoningStream, one state machine serves a whole output and a stream, and a
marker split across deltas is held back until it is whole.
"""

from __future__ import annotations

import json
import re

START, CHANNEL, MESSAGE = "<|start|>", "<|channel|>", "<|message|>"
END, RETURN, CALL = "<|end|>", "<|return|>", "<|call|>"
# what ends a body: its own end markers, or the next message's start when the end was not decoded
_BODY_ENDS = (END, RETURN, CALL, START)
_OPENERS = (START, CHANNEL)
_RECIPIENT = re.compile(r"\bto=([^\s<]+)")
_CHANNEL_NAME = re.compile(re.escape(CHANNEL) + r"\s*(\w+)")
FINAL_CHANNEL = "final"


class HarmonyStream:
    """Splits harmony output fed in pieces into thinking and answer (`feed` returns the new part
    of each); the same interface as reasoning.ReasoningStream."""

    __slots__ = ("_buf", "_mode", "_route", "_call", "_wrote", "reasoned", "answered")

    def __init__(self) -> None:
        self._buf = ""
        # first -> header -> body -> between -> header ...; first -> plain (no harmony); body -> done
        self._mode = "first"
        self._route = "content"  # where the current body goes: reasoning | content
        self._call: str | None = None  # the function the current body calls, if any
        self._wrote = {"reasoning": False, "content": False}  # a separator goes between messages
        self.reasoned = False  # an analysis message was seen
        self.answered = False  # a message for the user began (or the output is no harmony)

    @property
    def ended(self) -> bool:
        """The thinking is over: the answer began, or the output never thought."""
        return self.answered or self._mode == "plain"

    def feed(self, text: str, final: bool = False) -> tuple[str, str]:
        """(thinking, answer) that `text` adds; with `final`, whatever was held back too."""
        self._buf += text
        out: dict[str, list[str]] = {"reasoning": [], "content": []}
        while self._step(out, final):
            pass
        return "".join(out["reasoning"]), "".join(out["content"])

    def _step(self, out: dict[str, list[str]], final: bool) -> bool:
        """One move of the state machine; False when it needs more text."""
        buf = self._buf
        if self._mode in ("first", "between"):
            head = buf.lstrip()
            if head.startswith(_OPENERS):
                self._buf, self._mode = head, "header"
                return True
            if not final and any(m.startswith(head) for m in _OPENERS):
                return False  # "", "<|cha": a header may be opening
            if self._mode == "first" or head:
                self._mode, self.answered = "plain", True  # no harmony here: text for the user
            self._buf = head
            return bool(head)
        if self._mode == "header":
            at = buf.find(MESSAGE)
            if at < 0:
                if final:
                    self._buf = ""  # a header cut off by max_tokens: nothing to show
                return False
            self._open(buf[:at], out)
            self._buf, self._mode = buf[at + len(MESSAGE):], "body"
            return True
        if self._mode == "body":
            ends = [(i, m) for m in _BODY_ENDS if (i := buf.find(m)) >= 0]
            if ends:
                at, marker = min(ends)
                self._emit(buf[:at], out)
                self._close(out)
                self._buf = buf[at:] if marker == START else buf[at + len(marker):]
                self._mode = "done" if marker == RETURN else "between"
                return True
            keep = 0 if final else max(_partial(buf, m) for m in _BODY_ENDS)
            self._emit(buf[: len(buf) - keep], out)
            self._buf = buf[len(buf) - keep:]
            if final:
                self._close(out)
            return False
        if self._mode == "plain":
            out["content"].append(buf)
        self._buf = ""  # done: nothing comes after <|return|>
        return False

    def _open(self, header: str, out: dict[str, list[str]]) -> None:
        """Route the body that follows `header` ("<|start|>assistant<|channel|>analysis", ...)."""
        named, to = _CHANNEL_NAME.search(header), _RECIPIENT.search(header)
        channel, recipient = (named.group(1) if named else ""), (to.group(1) if to else None)
        self._call = None
        if recipient is not None and recipient.startswith("functions."):  # a call of the request's tools
            self._route, self.answered, self._call = "content", True, recipient.removeprefix("functions.")
        elif channel == "analysis" or recipient is not None:  # thinking, or a built-in tool's input
            self._route, self.reasoned = "reasoning", True
        else:  # the answer, or a preamble for the user
            self._route, self.answered = "content", True
        if self._wrote[self._route]:
            out[self._route].append("\n")  # two messages of one kind: a line apart
        if self._call is not None:
            out["content"].append(f'<tool_call>{{"name": {json.dumps(self._call)}, "arguments": ')

    def _emit(self, text: str, out: dict[str, list[str]]) -> None:
        if text:
            out[self._route].append(text)
            self._wrote[self._route] = True

    def _close(self, out: dict[str, list[str]]) -> None:
        if self._call is not None:
            out["content"].append("}</tool_call>")
            self._wrote["content"], self._call = True, None


def _partial(text: str, marker: str) -> int:
    """The length of the longest end of `text` that starts `marker` (held back: it may follow)."""
    for n in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0
