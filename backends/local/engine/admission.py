"""Admission checks: whether a request can ever run on this engine, decided before it is queued.

A refusal is a `RequestRejected` carrying the user-facing message, an OpenAI error code and the
offending parameter; the servers turn it into a 400.
"""

from __future__ import annotations

from dataclasses import dataclass

from fairgate.backends.local.engine.output import RequestRejected
from fairgate.backends.local.engine.types import SamplingParams
from fairgate.backends.openai_wire.context import completion_room, prompt_too_long
from fairgate.scheduler.request import priority_rank


@dataclass(slots=True, frozen=True)
class AdmissionLimits:
    max_model_len: int  # prompt + completion, already capped at what the KV pool holds
    vocab_size: int
    kv_limited: bool  # max_model_len is the KV pool's limit, not the model's (said in the message)


def check_request(ids: list[int], sampling: SamplingParams, priority: str | int, limits: AdmissionLimits) -> int:
    """Raise `RequestRejected` for a request that can never run; return its priority rank."""
    try:
        sampling.validate()
        rank = priority_rank(priority)
    except ValueError as exc:
        raise RequestRejected(str(exc), "invalid_value") from None
    if not ids:
        raise RequestRejected("the prompt is empty", "invalid_value", param="prompt")
    if completion_room(limits.max_model_len, len(ids)) < 1:
        why = " (all the KV cache can hold)" if limits.kv_limited else ""
        raise RequestRejected(prompt_too_long(len(ids), limits.max_model_len, why),
                              "context_length_exceeded", param="prompt")
    check_prompt_ids(ids, limits.vocab_size)
    for t in sampling.stop_token_ids:
        if type(t) is not int or t < 0:
            raise RequestRejected(f"invalid stop token id {t!r}", "invalid_value", param="stop_token_ids")
    for t in sampling.logit_bias:
        if not 0 <= t < limits.vocab_size:
            raise RequestRejected(f"logit_bias token id {t} is outside the vocabulary (0..{limits.vocab_size - 1})",
                                  "invalid_value", param="logit_bias")
    return rank


def check_prompt_ids(ids: list[int], vocab_size: int) -> None:
    """Raise `RequestRejected` for a prompt token id outside the vocabulary. The engine server
    asks before it decodes a prompt (echo); the engine asks again for its direct callers."""
    for t in ids:
        if type(t) is not int or not 0 <= t < vocab_size:
            raise RequestRejected(f"prompt token id {t!r} is outside the vocabulary (0..{vocab_size - 1})",
                                  "invalid_value", param="prompt")
