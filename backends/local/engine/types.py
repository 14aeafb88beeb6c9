"""Values passed between the engine, the model runner and sampling."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


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
    presence_penalty: float = 0.0  # subtracted once from every token already generated
    frequency_penalty: float = 0.0  # subtracted per occurrence in the generated tokens
    repetition_penalty: float = 1.0  # divides positive / multiplies negative logits of seen tokens
    logit_bias: dict[int, float] = field(default_factory=dict)  # token id -> added to its logit
    min_p: float = 0.0  # drop tokens below min_p x the top token's probability
    min_tokens: int = 0  # eos and stop_token_ids are forbidden before this many tokens
    logprobs: int | None = None  # None: none; k: the chosen token's logprob and the top k
    prompt_logprobs: int | None = None  # None: none; k: each prompt token's logprob and the top k
    grammar: Any = None  # structured output: an xgrammar CompiledGrammar (shared by the choices)
    grammar_state: Any = None  # this sequence's structured.GrammarState (one per engine request)
    # False opts this request out of speculative decoding (greedy output is identical either
    # way; a seeded sampled request only reproduces the plain engine's tokens without it).
    speculative: bool = True
    # Embeddings: the prompt's hidden states (after the final norm) are summed as prefill
    # chunks run and the request ends with their mean (`RequestOutput.embedding`).
    pool: bool = False
    # False: the output's text keeps special tokens (gpt-oss's harmony markers, which its
    # reasoning parser reads: serving/harmony.py); EOS and stop tokens never reach the text.
    skip_special_tokens: bool = True

    @property
    def greedy(self) -> bool:
        return self.temperature <= 1e-5

    @property
    def needs_processing(self) -> bool:
        """True when a logits processor changes this row (logits_processors.py)."""
        return bool(self.presence_penalty or self.frequency_penalty or self.repetition_penalty != 1.0
                    or self.logit_bias or self.min_tokens or self.grammar_state is not None)

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
        if not self.repetition_penalty > 0:
            raise ValueError("repetition_penalty must be > 0")
        if not 0 <= self.min_p <= 1:
            raise ValueError("min_p must be in [0, 1]")
        if self.min_tokens < 0:
            raise ValueError("min_tokens must be >= 0")


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
    # The sequence's own token lists (references, not copies): penalties read the generated
    # tokens (and the prompt, for repetition_penalty); prompt logprobs read the next prompt token.
    prompt_token_ids: Sequence[int] = ()
    output_token_ids: Sequence[int] = ()
    # The last `num_spec_tokens` of `token_ids` are draft tokens: the runner verifies them
    # against the logits of the 1 + k last positions and returns a list of 1 .. k + 1 tokens
    # (accepted drafts, then one sampled token) instead of one token.
    num_spec_tokens: int = 0


@dataclass(slots=True)
class TokenLogprobs:
    """One position's logprobs: the token's own and the top-k alternatives (ids, best first)."""

    token_id: int
    logprob: float
    top_ids: list[int] = field(default_factory=list)
    top_logprobs: list[float] = field(default_factory=list)


@dataclass(slots=True)
class SampleResult:
    """What the runner hands back for one sampling input: the token, and its logprobs when the
    request asked (`SamplingParams.logprobs`); `prompt_logprobs` covers the prompt positions this
    step computed (start_pos -> entries), when `SamplingParams.prompt_logprobs` is set."""

    token_id: int | None
    logprobs: TokenLogprobs | None = None
    prompt_logprobs: dict[int, TokenLogprobs] | None = None
    pooled: tuple[int, Any, int] | None = None  # (start_pos, sum of hidden rows [hidden], rows): `pool`
