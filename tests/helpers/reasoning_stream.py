"""A streamed chat completion from the openai SDK read the way a reasoning-aware client reads it:
the thinking (`delta.reasoning_content`, an extra field the SDK keeps in `model_extra`), the
answer, the order they came in, and the final usage chunk."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class ReadStream:
    reasoning: str = ""
    content: str = ""
    order: list[str] = field(default_factory=list)  # "reasoning" / "content", one per delta
    usage: Any = None

    @property
    def thoughts_first(self) -> bool:
        """Every thought arrived before the first piece of the answer."""
        return self.order == sorted(self.order, key=lambda kind: kind != "reasoning")


def read_stream(chunks: Iterable[Any]) -> ReadStream:
    out = ReadStream()
    for c in chunks:
        if c.usage is not None:
            out.usage = c.usage
        for choice in c.choices:
            delta = choice.delta
            thought = getattr(delta, "reasoning_content", None) or (delta.model_extra or {}).get("reasoning_content")
            if thought:
                out.reasoning += thought
                out.order.append("reasoning")
            if delta.content:
                out.content += delta.content
                out.order.append("content")
    return out
