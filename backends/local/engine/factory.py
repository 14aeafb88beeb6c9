"""The engine's composition root: from an `EngineConfig` to the parts `EngineCore` steps.

One place picks the model executor, the tokenizer, the wait queue, the block manager and the
admission limits; `AsyncEngine` and tests get the same wiring. Any of the first three may be
injected (a test's runner, the fair queue with its own config).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from fairgate.backends.local.engine.admission import AdmissionLimits
from fairgate.backends.local.engine.config import EngineConfig
from fairgate.backends.local.engine.protocols import EngineTokenizer, ModelExecutor
from fairgate.backends.local.kv_cache.block_manager import BlockManager
from fairgate.backends.local.speculative.policy import SpeculativeDecoder, cost_clock
from fairgate.backends.local.speculative.proposers import NgramProposer, Proposer
from fairgate.scheduler.fair_preemption import FairPreemption, FairPreemptionConfig
from fairgate.scheduler.fair_queue import FairQueue
from fairgate.scheduler.queue import WaitQueue
from fairgate.scheduler.scheduler import Scheduler, SchedulerConfig

log = logging.getLogger(__name__)


@dataclass(slots=True)
class EngineParts:
    """Everything one engine owns, wired together."""

    runner: ModelExecutor
    tokenizer: EngineTokenizer
    block_manager: BlockManager
    scheduler: Scheduler
    limits: AdmissionLimits  # what admission refuses; `limits.max_model_len` is the engine's
    eos_token_ids: frozenset[int]
    speculator: SpeculativeDecoder | None = None  # None: speculative decoding off


def build_runner(config: EngineConfig) -> ModelExecutor:
    """The model runner the config describes (loads the weights; imports torch)."""
    from fairgate.backends.local.model.runner import ModelRunner

    return ModelRunner(
        config.model,
        device=config.device,
        dtype=config.dtype,
        kv_cache_dtype=None if config.kv_cache_dtype == "auto" else config.kv_cache_dtype,
        quantization=config.quantization,
        gemm=config.gemm,
        block_size=config.block_size,
        num_kv_blocks=config.num_kv_blocks,
        kv_cache_memory=config.kv_cache_memory,
    )


def build_speculator(config: EngineConfig, runner: ModelExecutor) -> SpeculativeDecoder | None:
    """The proposer `config.speculative` names, behind the adaptive decoder; None for "off"."""
    spec = config.speculative
    if spec == "off":
        return None
    if spec == "ngram":
        proposer: Proposer = NgramProposer()
    else:
        from fairgate.backends.local.speculative.draft_proposer import DraftModelProposer

        proposer = DraftModelProposer.load(
            spec.removeprefix("draft:"), device=config.device, dtype=config.dtype,
            block_size=runner.block_size, num_kv_blocks=runner.num_kv_blocks + config.max_num_seqs,
            vocab_size=int(runner.config.vocab_size),
        )
    import torch

    return SpeculativeDecoder(proposer, config.num_speculative_tokens, adaptive=config.speculative_adaptive,
                              clock=cost_clock(config.device, torch.get_num_threads()))


def admission_limits(
    num_kv_blocks: int, block_size: int, model_len: int, vocab_size: int, configured_len: int | None
) -> AdmissionLimits:
    """Cap the context at what the KV pool can hold, so an admitted request can always finish."""
    kv_tokens = num_kv_blocks * block_size
    limits = [model_len, kv_tokens]
    if configured_len is not None:
        limits.append(configured_len)
    max_model_len = min(limits)
    if max_model_len < (configured_len or model_len):
        log.warning("max_model_len capped at %d tokens: the KV pool holds no more", max_model_len)
    kv_limited = max_model_len == kv_tokens and kv_tokens < model_len
    return AdmissionLimits(max_model_len, vocab_size, kv_limited)


def build_engine_parts(
    config: EngineConfig,
    runner: ModelExecutor | None = None,
    tokenizer: EngineTokenizer | None = None,
    wait_queue: WaitQueue | None = None,
) -> EngineParts:
    """Validate `config` and build (or take) every part; the queue defaults to `FairQueue`
    (pass `FCFSQueue()` to opt out of fairness), with fairness preemption unless
    `config.fairness_preemption` is off."""
    config.validate()
    if runner is None:
        runner = build_runner(config)
    if tokenizer is None:
        from fairgate.backends.local.model.tokenizer import Tokenizer

        tokenizer = Tokenizer(config.model)
    block_manager = BlockManager(
        runner.num_kv_blocks, runner.block_size, enable_prefix_caching=config.enable_prefix_caching,
        long_prompt_from=runner.config.rope.long_from,
    )
    limits = admission_limits(
        runner.num_kv_blocks, runner.block_size, runner.max_model_len, int(runner.config.vocab_size),
        config.max_model_len,
    )
    queue = wait_queue if wait_queue is not None else FairQueue(config.fairness_config())
    scheduler = Scheduler(
        SchedulerConfig(
            max_num_seqs=config.max_num_seqs,
            max_num_batched_tokens=config.max_num_batched_tokens,
            max_model_len=limits.max_model_len,
        ),
        block_manager,
        queue=queue,
        fair_preemption=(
            FairPreemption(queue, FairPreemptionConfig(slot_share=config.fairness_slot_share))
            if config.fairness_preemption and isinstance(queue, FairQueue) else None
        ),
    )
    return EngineParts(
        runner, tokenizer, block_manager, scheduler, limits, frozenset(runner.eos_token_ids),
        build_speculator(config, runner),
    )
