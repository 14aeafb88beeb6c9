"""One request's choices as OpenAI objects: text (with `echo`, the prompt first), logprobs,
finish reasons, for the full response and for streamed chunks.

A prompt's echoed logprobs come from its first choice: the siblings map the prompt's cached
blocks and so never compute those positions themselves (choices.py). With tools, a streamed
reply goes out as content and incremental OpenAI tool-call deltas (tool_stream.py). On a
reasoning model the thinking goes to `reasoning_content` first (reasoning.py); what follows it
is the answer that content, tools and logprobs formatting see.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fairgate.backends.base import Chunk
from fairgate.backends.local.engine.output import RequestOutput
from fairgate.backends.local.engine.types import TokenLogprobs
from fairgate.backends.local.serving.choices import Choice
from fairgate.backends.local.serving.logprobs_wire import (
    Decode,
    TokenText,
    chat_logprobs,
    completion_logprobs,
    merge_completion_logprobs,
)
from fairgate.backends.local.serving.prepare import EngineRequest
from fairgate.backends.local.serving.reasoning import ThinkingSplit
from fairgate.backends.local.serving.tool_stream import ToolCallStream
from fairgate.backends.openai_wire import chunk


class ChoiceFormatter:
    """Formats one request's choices; holds what streaming needs between deltas."""

    def __init__(self, prepared: EngineRequest, decode: Decode) -> None:
        self.prepared = prepared
        self.text = TokenText(decode)
        self._echoed: set[int] = set()  # streamed choices whose echo went out
        self._prompt_lps: dict[int, list[TokenLogprobs | None]] = {}  # prompt index -> its first choice's
        self._tool_streams: dict[int, ToolCallStream] = {}  # choice -> its reply under tools
        self._thinking: dict[int, ThinkingSplit] = {}  # choice -> its split, streamed
        self._thinking_ids: dict[int, list[int]] = {}  # choice -> its tokens so far, streamed
        self.reasoning_tokens: dict[int, int] = {}  # choice -> tokens of thinking, once finished

    def full_choice(self, choice: Choice, out: RequestOutput, finals: dict[int, RequestOutput]) -> dict[str, Any]:
        """The choice object of the non-streaming response."""
        leader = finals.get(choice.prompt_index * self.prepared.n)
        if leader is not None and leader.prompt_logprobs is not None:
            self._prompt_lps[choice.prompt_index] = leader.prompt_logprobs
        result: dict[str, Any] = {"index": choice.index}
        finish: str | None = out.finish_reason  # chat may answer "tool_calls"
        if self.prepared.kind == "chat" and self.prepared.reasoning is not None:
            fmt = self.prepared.reasoning
            stream = fmt.stream()
            reasoning, content = stream.feed(out.text, final=True)
            result["message"], finish = self._message(content, finish)
            if stream.reasoned:
                result["message"]["reasoning_content"] = reasoning
                result["message"]["content"] = result["message"]["content"] or None
            self._count_thinking(choice, out.token_ids, stream)
        elif self.prepared.kind == "chat":
            result["message"], finish = self._message(out.text, finish)
        else:
            result["text"] = self._echo(choice) + out.text
        result.update(logprobs=self._logprobs(choice, out, echo=True), finish_reason=finish,
                      stop_reason=out.stop_reason)
        return result

    def _message(self, text: str, finish: str | None) -> tuple[dict[str, Any], str | None]:
        """The assistant message (tool calls parsed out when the request has tools)."""
        plan = self.prepared.tools
        if plan is None or not plan.parses:
            return {"role": "assistant", "content": text}, finish
        content, calls = plan.parse(text)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if not calls:
            return message, finish
        message["tool_calls"] = [c.to_openai() for c in calls]
        return message, "tool_calls" if finish == "stop" else finish

    @property
    def total_reasoning_tokens(self) -> int:
        return sum(self.reasoning_tokens.values())

    def _count_thinking(self, choice: Choice, token_ids: list[int], stream: ThinkingSplit) -> None:
        fmt = self.prepared.reasoning
        assert fmt is not None
        self.reasoning_tokens[choice.index] = fmt.reasoning_tokens(
            token_ids, "" if stream.reasoned else None, stream.ended)

    def stream_pieces(self, choice: Choice, delta: RequestOutput, rid: str, model: str, created: int) -> list[Chunk]:
        """The chunks for one delta of one choice (maybe none), its finish chunk included."""
        if self.prepared.reasoning is not None and self.prepared.kind == "chat":
            thought, delta = self._think(choice, delta, rid, model, created)
            return thought + self._stream_answer(choice, delta, rid, model, created)
        return self._stream_answer(choice, delta, rid, model, created)

    def _think(self, choice: Choice, delta: RequestOutput, rid: str, model: str,
               created: int) -> tuple[list[Chunk], RequestOutput]:
        """The delta's thinking as a `reasoning_content` chunk, and the delta left with its answer only."""
        assert self.prepared.reasoning is not None
        stream = self._thinking.get(choice.index)
        if stream is None:
            stream = self._thinking[choice.index] = self.prepared.reasoning.stream()
        ids = self._thinking_ids.setdefault(choice.index, [])
        ids += delta.token_ids
        reasoning, content = stream.feed(delta.text, final=delta.finished)
        pieces: list[Chunk] = []
        if reasoning:
            piece = chunk("chat", rid, model, created, None)
            piece["choices"][0]["delta"] = {"reasoning_content": reasoning}
            piece["choices"][0]["index"] = choice.index
            pieces.append(piece)
        if delta.finished:
            self._count_thinking(choice, ids, stream)
            del self._thinking[choice.index], self._thinking_ids[choice.index]
        return pieces, dataclasses.replace(delta, text=content)

    def _stream_answer(self, choice: Choice, delta: RequestOutput, rid: str, model: str, created: int) -> list[Chunk]:
        kind = self.prepared.kind
        if self.prepared.tools is not None and self.prepared.tools.parses:
            return self._tool_pieces(choice, delta, rid, model, created)
        if choice.leads and delta.prompt_logprobs is not None:
            self._prompt_lps[choice.prompt_index] = delta.prompt_logprobs
        echo = kind == "completion" and choice.index not in self._echoed and bool(self.prepared.echo_batch)
        pieces: list[Chunk] = []
        wants_lp = self.prepared.sampling.logprobs is not None and bool(delta.token_ids)
        if delta.text or echo or wants_lp:
            self._echoed.add(choice.index)
            piece = chunk(kind, rid, model, created, (self._echo(choice) if echo else "") + delta.text)
            piece["choices"][0].update(index=choice.index, logprobs=self._logprobs(choice, delta, echo))
            pieces.append(piece)
        if delta.finished:
            last = chunk(kind, rid, model, created, None if kind == "chat" else "", delta.finish_reason)
            last["choices"][0]["index"] = choice.index
            pieces.append(last)
        return pieces

    def _tool_pieces(self, choice: Choice, delta: RequestOutput, rid: str, model: str, created: int) -> list[Chunk]:
        """Tools: content and tool-call deltas as the reply grows (tool_stream.py), then the finish."""
        assert self.prepared.tools is not None
        stream = self._tool_streams.get(choice.index)
        if stream is None:
            stream = self._tool_streams[choice.index] = ToolCallStream(self.prepared.tools)
        content, calls = stream.feed(delta.text, final=delta.finished)
        pieces = []
        if content:
            pieces.append(chunk("chat", rid, model, created, content))
        if calls:
            piece = chunk("chat", rid, model, created, None)
            piece["choices"][0]["delta"]["tool_calls"] = calls
            pieces.append(piece)
        if delta.finished:
            finish = delta.finish_reason
            pieces.append(chunk("chat", rid, model, created, None,
                                "tool_calls" if finish == "stop" and stream.has_calls else finish))
            del self._tool_streams[choice.index]
        for c in pieces:
            c["choices"][0]["index"] = choice.index
        return pieces

    def _echo(self, choice: Choice) -> str:
        batch = self.prepared.echo_batch
        return batch[choice.prompt_index] if batch else ""

    def _logprobs(self, choice: Choice, out: RequestOutput, echo: bool) -> dict[str, Any] | None:
        """The `logprobs` object for the tokens of `out` (with `echo`, the prompt's first)."""
        if self.prepared.sampling.logprobs is None:
            return None
        entries = out.logprobs or []
        if self.prepared.kind == "chat":
            return chat_logprobs(self.text, entries)
        prompt_lps = self._prompt_lps.get(choice.prompt_index)
        if not echo or prompt_lps is None:
            return completion_logprobs(self.text, out.token_ids, entries)
        prompt = completion_logprobs(self.text, choice.prompt_token_ids, prompt_lps)
        offset = prompt["text_offset"][-1] + len(prompt["tokens"][-1])
        return merge_completion_logprobs(prompt, completion_logprobs(self.text, out.token_ids, entries, offset))
