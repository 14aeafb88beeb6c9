"""Values passed between the engine, the model runner and sampling."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class SamplingParams:
    """How to pick tokens and when to stop. Validated by `validate()` before admission."""

    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    # False opts this request out of speculative decoding (greedy output is identical either
    # way; a seeded sampled request only reproduces the plain engine's tokens without it).
    speculative: bool = True

    @property
    def greedy(self) -> bool:
        return self.temperature <= 1e-5

    def validate(self) -> None:
        """Raise ValueError with a user-facing message on a bad value."""
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.top_k < 0:
            raise ValueError("top_k must be >= 0")


@dataclass(slots=True)
class RunnerInput:
    """One sequence's share of a step: compute KV (and maybe sample) for `token_ids`.

    `token_ids` sit at positions start_pos .. start_pos+len-1 of the sequence; KV for
    positions < start_pos is already in the blocks of `block_table`, which covers every
    position up to start_pos+len-1. When `sample` is true the runner samples one token from
    the logits at the last position.
    """

    request_id: str
    token_ids: list[int]
    start_pos: int
    block_table: list[int]
    sample: bool
    sampling: SamplingParams
    # generated so far; the per-request RNG stream is derived from (seed, len(output))
    num_output_tokens: int = 0
    # The last `num_spec_tokens` of `token_ids` are draft tokens: the runner verifies them
    # against the logits of the 1 + k last positions and returns a list of 1 .. k + 1 tokens
    # (accepted drafts, then one sampled token) instead of one token.
    num_spec_tokens: int = 0
