"""The context-length rule, once: a prompt must leave room for at least one completion token,
prompt + max_tokens must fit the model's context, and a request that names no max_tokens may
generate what the context leaves (`completion_limit`, the one place a limit is derived)."""

from __future__ import annotations

from fairgate.backends.openai_wire.errors import WireError


def completion_room(context_length: int, prompt_tokens: int) -> int:
    """Completion tokens that still fit after the prompt (may be <= 0)."""
    return context_length - prompt_tokens


def prompt_too_long(prompt_tokens: int, context_length: int, why: str = "") -> str:
    """The message for a prompt that leaves no room; `why` qualifies the limit (e.g. KV pool)."""
    return (f"This model's maximum context length is {context_length} tokens{why}, but the prompt has "
            f"{prompt_tokens} tokens, which leaves no room for a completion. Please shorten the prompt.")


def check_prompt_fits(prompt_tokens: int, context_length: int, param: str = "prompt") -> None:
    """Raise the 400 `context_length_exceeded` when the prompt alone fills the context."""
    if completion_room(context_length, prompt_tokens) < 1:
        raise WireError(400, prompt_too_long(prompt_tokens, context_length), "context_length_exceeded", param)


def completion_limit(asked: int | None, context_length: int | None, prompt_tokens: int,
                     default: int | None = None) -> int:
    """The completion tokens a request may generate: what it asked for (`check_completion_fits`
    says whether that fits), else `default` (None: unbounded) kept within what `context_length`
    (None: unknown) leaves after `prompt_tokens`, and at least 1."""
    if asked is not None:
        return asked
    room = None if context_length is None else completion_room(context_length, prompt_tokens)
    limits = [n for n in (default, room) if n is not None]
    return max(1, min(limits)) if limits else 1


def completion_too_long(prompt_tokens: int, max_tokens: int, context_length: int) -> str:
    """The message for prompt + max_tokens over the context."""
    return (f"This model's maximum context length is {context_length} tokens. However, you "
            f"requested {prompt_tokens + max_tokens} tokens ({prompt_tokens} in the prompt, {max_tokens} "
            "for the completion). Please reduce the prompt or max_tokens.")


def check_completion_fits(prompt_tokens: int, max_tokens: int, context_length: int) -> None:
    """Raise the 400 `context_length_exceeded` when prompt + max_tokens is over the context."""
    if max_tokens > completion_room(context_length, prompt_tokens):
        raise WireError(400, completion_too_long(prompt_tokens, max_tokens, context_length),
                        "context_length_exceeded", "max_tokens")
