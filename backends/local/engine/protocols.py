"""The contracts the engine holds its parts by: model executor, tokenizer, metrics observer.

The wait queue's contract is `scheduler.queue.WaitQueue`, the KV manager's
`scheduler.kv.KVCacheManager`. Structural (`Protocol`): the real classes (`ModelRunner`,
`Tokenizer`, `EngineRequestMetrics`) satisfy them without inheriting, and a test can pass its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from fairgate.backends.local.engine.output import IncrementalDecoder, RequestOutput
from fairgate.backends.local.engine.types import RunnerInput, SampleResult

if TYPE_CHECKING:
    from fairgate.backends.local.model.config import ModelConfig
    from fairgate.kernels import KernelPlan
    from fairgate.scheduler.plan import StepPlan


class ModelExecutor(Protocol):
    """Runs one step's inputs on the paged KV cache (`backends.local.model.runner.ModelRunner`)."""

    # Read-only (properties), so a runner may store narrower types (a tuple of eos ids).
    @property
    def config(self) -> ModelConfig:
        """The checkpoint's config (the engine reads `vocab_size`)."""
        ...

    @property
    def block_size(self) -> int:
        """Tokens per KV block."""
        ...

    @property
    def num_kv_blocks(self) -> int:
        """Blocks in the KV pool."""
        ...

    @property
    def max_model_len(self) -> int:
        """The model's own context limit."""
        ...

    @property
    def eos_token_ids(self) -> Sequence[int]: ...

    @property
    def kernels(self) -> KernelPlan:
        """Which implementation runs each operation, and why: chosen once when the runner
        started (`fairgate.kernels.plan`), logged then, and shown in the engine server's /stats."""
        ...

    def execute(self, inputs: list[RunnerInput]) -> list[int | list[int] | SampleResult | None]:
        """The sampled token per input with `sample=True`, None for the others, in order; for
        an input with `num_spec_tokens` k, the list of accepted drafts plus one token (1..k+1);
        a `SampleResult` (token plus logprobs) for an input whose request asked for logprobs."""
        ...


class EngineTokenizer(Protocol):
    """Text <-> token ids (`backends.local.model.tokenizer.Tokenizer`); also the local backend's
    `token_decoder` (a `backends.base.TokenDecoder`)."""

    @property
    def vocab_size(self) -> int:
        """Ids the tokenizer knows, added tokens included (token-id prompts are checked against it)."""
        ...

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]: ...

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str: ...

    def encode_chat(
        self, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **kwargs: Any
    ) -> list[int]: ...

    def detokenizer(self, prompt_ids: list[int] | None = None, skip_special_tokens: bool = True) -> IncrementalDecoder:
        """A per-request incremental decoder, primed with the prompt's ids."""
        ...


class EngineObserver(Protocol):
    """Metrics hook (`backends.local.engine.metrics.EngineRequestMetrics`), called on the engine thread."""

    def on_scheduled(self, plan: StepPlan) -> None:
        """Each step's plan, before it runs."""
        ...

    def on_outputs(self, outputs: Iterable[RequestOutput]) -> None:
        """Each batch of deltas, before it is handed to the consumers."""
        ...
