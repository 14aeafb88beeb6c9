"""The thinking of a reasoning model kept apart from its answer (`--reasoning-parser`).

Qwen3 and DeepSeek-R1 write their thinking between `<think>` and `</think>` before the answer.
With a parser chosen, the engine returns the thinking in `message.reasoning_content` (streamed as
`delta.reasoning_content`), the answer alone in `content`, and the thinking's length in
`usage.completion_tokens_details.reasoning_tokens`, as vLLM does; tool calls and structured
output apply to the answer only.

- `qwen3`: the model opens its thinking itself; output that does not start with `<think>` is all
  answer (`enable_thinking: false`, whose template closes an empty thinking in the prompt).
- `deepseek_r1`: the template opens the thinking in the prompt, so output is thinking until
  `</think>` (a leading `<think>` is dropped); Qwen3's "Thinking" models work the same way.
- `gpt_oss`: gpt-oss's harmony messages, the `analysis` channel being the thinking (harmony.py).

Thinking cut off by `max_tokens` before `</think>` is all reasoning, no content. The whitespace
between `</think>` and the answer is dropped. One state machine serves both a whole answer and a
stream, so both give the same split whatever the token boundaries; a tag split across deltas is
held back until it is whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from fairgate.backends.local.serving.harmony import CHANNEL, FINAL_CHANNEL, MESSAGE, HarmonyStream

PARSERS = ("qwen3", "deepseek_r1", "gpt_oss")


class ThinkingSplit(Protocol):
    """One output's split as it grows: ReasoningStream (tags) or harmony.HarmonyStream (channels)."""

    reasoned: bool  # the output had a thinking part

    @property
    def ended(self) -> bool: ...  # the thinking was closed (or never opened)

    def feed(self, text: str, final: bool = False) -> tuple[str, str]: ...


@dataclass(slots=True, frozen=True)
class ReasoningFormat:
    """How one model family marks its thinking; `end_id` is the end tag's token id when the
    tokenizer has it as one token (the reasoning token count is exact then)."""

    name: str
    opens_in_prompt: bool  # the template opened the thinking: output starts inside it
    start: str = "<think>"
    end: str = "</think>"
    end_id: int | None = None
    start_id: int | None = None
    # gpt_oss: the tokens that open the answer (<|channel|> final <|message|>), when each is one
    answer_ids: tuple[int, ...] = ()

    @classmethod
    def of(cls, name: str, vocab: Mapping[str, int] | None = None) -> ReasoningFormat:
        """The parser `name`; `vocab` (the tokenizer's, added tokens included) finds the tags' ids."""
        if name not in PARSERS:
            raise ValueError(f"reasoning parser must be one of {', '.join(PARSERS)}, not {name!r}")
        vocab = vocab or {}
        if name == "gpt_oss":
            opener = [vocab.get(t) for t in (CHANNEL, FINAL_CHANNEL, MESSAGE)]
            return cls(name, opens_in_prompt=False, start=CHANNEL, end=MESSAGE,
                       answer_ids=tuple(i for i in opener if i is not None) if None not in opener else ())
        return cls(name, opens_in_prompt=name == "deepseek_r1", end_id=vocab.get("</think>"),
                   start_id=vocab.get("<think>"))

    def stream(self) -> ThinkingSplit:
        """A new split for one output in this format."""
        return HarmonyStream() if self.name == "gpt_oss" else ReasoningStream(self)

    @property
    def keeps_special_tokens(self) -> bool:
        """The format's markers are special tokens: its outputs decode with them kept."""
        return self.name == "gpt_oss"

    def grammar_after(self, prompt_ids: list[int]) -> tuple[int | None, int] | None:
        """Where a grammar starts on this prompt (structured.GrammarState's `after_thinking`):
        None when the prompt closed the thinking itself (Qwen3's `enable_thinking: false`);
        (None, end) when the prompt opened it; (start, end) when the model may open one.
        Raises ValueError when the tags are no single tokens (the grammar could not find them)."""
        if self.name == "gpt_oss":
            raise ValueError("gpt-oss's answer opens with several tokens (<|channel|>final<|message|>),"
                             " which the grammar cannot wait for")
        if self.start_id is None or self.end_id is None:
            raise ValueError(f"this model's {self.start} and {self.end} are not single tokens")
        opened = max((i for i, t in enumerate(prompt_ids) if t == self.start_id), default=-1)
        closed = max((i for i, t in enumerate(prompt_ids) if t == self.end_id), default=-1)
        if opened > closed or (self.opens_in_prompt and opened == -1):
            return None, self.end_id
        if closed >= len(prompt_ids) - 3:  # "</think>\n\n" right before the answer
            return None
        return self.start_id, self.end_id

    def split(self, text: str) -> tuple[str | None, str]:
        """(reasoning or None when the output has none, answer) of a whole output."""
        stream = self.stream()
        reasoning, content = stream.feed(text, final=True)
        return (reasoning if stream.reasoned else None), content

    def reasoning_tokens(self, token_ids: list[int], reasoning: str | None, ended: bool,
                         count: int | None = None) -> int:
        """How many of the output's tokens were thinking (the tags included). `count`: the
        token count of the thinking when the end tag is no single token (an estimate)."""
        if reasoning is None:
            return 0
        if not ended:
            return len(token_ids)
        if self.end_id is not None and self.end_id in token_ids:
            return token_ids.index(self.end_id) + 1
        opener = self.answer_ids
        for i in range(len(token_ids) - len(opener) + 1) if opener else ():
            if tuple(token_ids[i:i + len(opener)]) == opener:
                return i + len(opener)  # everything up to the answer's <|message|>
        if opener and opener[-1] in token_ids:  # no final answer (a tool call, a preamble): up to the last body
            return len(token_ids) - token_ids[::-1].index(opener[-1])
        return min(len(token_ids), count if count is not None else len(token_ids))


class ReasoningStream:
    """Splits an output fed in pieces into thinking and answer (`feed` returns the new part of each)."""

    __slots__ = ("_buf", "_mode", "fmt", "reasoned")

    def __init__(self, fmt: ReasoningFormat) -> None:
        self.fmt = fmt
        self._buf = ""
        self._mode = "start"  # start -> reasoning -> after (whitespace) -> content; or start -> content
        self.reasoned = False  # the output had a thinking part

    @property
    def ended(self) -> bool:
        """The thinking was closed (or never opened)."""
        return self._mode in ("after", "content")

    @property
    def thinking(self) -> bool:
        """The output is inside its thinking now (or may still open it)."""
        return self._mode in ("start", "reasoning")

    def feed(self, text: str, final: bool = False) -> tuple[str, str]:
        """(thinking, answer) that `text` adds; with `final`, whatever was held back too."""
        self._buf += text
        reasoning: list[str] = []
        content: list[str] = []
        while self._step(reasoning, content, final):
            pass
        if final and self._buf:
            (reasoning if self._mode in ("start", "reasoning") and self.reasoned else content).append(self._buf)
            self._buf = ""
        return "".join(reasoning), "".join(content)

    def _step(self, reasoning: list[str], content: list[str], final: bool) -> bool:
        """One move of the state machine; False when it needs more text."""
        fmt, buf = self.fmt, self._buf
        if self._mode == "start":
            head = buf.lstrip()
            if head.startswith(fmt.start):
                self._buf, self._mode, self.reasoned = head[len(fmt.start):], "reasoning", True
                return True
            if not final and fmt.start.startswith(head):
                return False  # "", "<th": not yet known whether the thinking opens here
            self._mode = "reasoning" if fmt.opens_in_prompt else "content"
            self.reasoned = fmt.opens_in_prompt
            return True
        if self._mode == "reasoning":
            at = buf.find(fmt.end)
            if at >= 0:
                reasoning.append(buf[:at])
                self._buf, self._mode = buf[at + len(fmt.end):], "after"
                return True
            keep = 0 if final else _partial_tag(buf, fmt.end)
            reasoning.append(buf[: len(buf) - keep])
            self._buf = buf[len(buf) - keep:]
            return False
        if self._mode == "after":
            head = buf.lstrip()
            if not head:
                self._buf = ""
                return False
            self._buf, self._mode = head, "content"
            return True
        content.append(buf)
        self._buf = ""
        return False


def _partial_tag(text: str, tag: str) -> int:
    """The length of the longest end of `text` that starts `tag` (held back: the tag may follow)."""
    for n in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-n:]):
            return n
    return 0
