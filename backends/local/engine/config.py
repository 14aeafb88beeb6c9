"""How an engine is built: model folder, device, KV cache size and batching limits."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from fairgate.scheduler.fairness import DEFAULT_ACTIVE_LEAD, FairnessConfig
from fairgate.scheduler.request import PRIORITY_CLASSES, priority_rank

DEFAULT_TTFT_OBJECTIVES = ("interactive=1.0",)
GIL_SWITCH_INTERVAL_MS = 0.5


@dataclass(slots=True)
class EngineConfig:
    """Everything `AsyncEngine` needs to build its runner, block manager and planner.

    `num_kv_blocks` / `kv_cache_memory` size the KV pool (at most one of them; neither lets the
    runner pick). `max_model_len` None means the model's own limit; the engine further caps it
    at what the KV pool can hold, so every admitted request can always finish.
    """

    model: str
    device: str = "cpu"
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"  # "auto" = the weights' dtype; float16/bfloat16 halve the KV memory and traffic
    # Weight-only quantization at load ("int8", "int4", "int4-gN"); None = as the folder holds.
    quantization: str | None = None
    # Float32 CPU linears: "auto" = native panels (cpu_gemm.c, oneDNN's bits) where they build, else
    # oneDNN pre-packed; "native" / "onednn" = that one always (or fail); "torch" = F.linear (MKL),
    # kept for A/B runs (`KernelPlan.pack_linears`).
    gemm: str = "auto"
    block_size: int = 16
    num_kv_blocks: int | None = None
    kv_cache_memory: int | None = None
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 512
    max_model_len: int | None = None
    enable_prefix_caching: bool = True
    # With the fair (VTC) queue, an under-served tenant's waiting request may take a running
    # slot back from the most-served tenant (scheduler/fair_preemption.py). No effect on FCFS.
    fairness_preemption: bool = True
    # ... also as soon as a tenant holds fewer than its weighted share of the slots in use and
    # another more, not only once their counters are `min_gap` apart (fair_preemption.py).
    fairness_slot_share: bool = True
    # How far below the least-served backlogged tenant a tenant served within the last second
    # starts (cost units; scheduler/fairness.py): a light tenant's burst goes ahead of a flood's
    # backlog; 0: level.
    fairness_active_lead: float = DEFAULT_ACTIVE_LEAD
    # Time-to-first-token objectives by class, "CLASS=SECONDS": a request about to miss its
    # class's goes first among tenants the fair counters hold level (scheduler/fairness.py).
    ttft_objectives: tuple[str, ...] = DEFAULT_TTFT_OBJECTIVES
    # The engine's compute threads on these cores ("0-3,6", or "auto": all but the first where
    # there are more than two), the rest of the process on the others (engine/cores.py); None:
    # every core for both, the thread count as torch picks.
    cpu_cores: str | None = None
    # Python's GIL switch interval for the process the engine runs in, at most this (ms); None:
    # Python's own (5 ms). The engine thread takes the GIL back after every native call; a busy
    # Python thread beside it (the embedded gateway's event loop, detectors) holds it for up to
    # the interval each time (engine/cores.py).
    gil_switch_interval_ms: float | None = GIL_SWITCH_INTERVAL_MS
    served_model_name: str | None = None
    tool_call_parser: str = "hermes"  # how the model writes tool calls: hermes | llama3_json
    # a reasoning model's thinking apart from its answer: qwen3 | deepseek_r1 | gpt_oss (serving/reasoning.py)
    reasoning_parser: str | None = None
    # Speculative decoding: "off", "ngram" (prompt lookup) or "draft:DIR" (a draft model folder
    # with the target's vocabulary); at most `num_speculative_tokens` drafts per request per step.
    speculative: str = "off"
    num_speculative_tokens: int = 4
    # Adaptive k and the automatic off switch (speculative.py); False always drafts the cap
    # (tests use it: their assertions must not depend on this machine's timings).
    speculative_adaptive: bool = True
    stats_interval_s: float = 10.0  # an info line of throughput, queue and KV use this often; 0: off
    # What one request may ask for: NAME=VALUE overrides of backends/openai_wire/limits.WireLimits
    request_limits: tuple[str, ...] = ()
    grammar_timeout_s: float = 3.0  # a grammar compiling longer is the client's 400
    grammar_cache_bytes: int = 64 * 1024 * 1024  # compiled grammars kept (LRU by bytes)

    def validate(self) -> None:
        if self.block_size < 1:
            raise ValueError("block_size must be >= 1")
        if self.num_kv_blocks is not None and self.kv_cache_memory is not None:
            raise ValueError("give num_kv_blocks or kv_cache_memory, not both")
        if self.max_num_seqs < 1:
            raise ValueError("max_num_seqs must be >= 1")
        if self.max_num_batched_tokens < 1:
            raise ValueError("max_num_batched_tokens must be >= 1")
        if self.tool_call_parser not in ("hermes", "llama3_json"):
            raise ValueError("tool_call_parser must be hermes or llama3_json")
        if self.reasoning_parser not in (None, "qwen3", "deepseek_r1", "gpt_oss"):
            raise ValueError(f"reasoning_parser must be qwen3, deepseek_r1 or gpt_oss, not {self.reasoning_parser!r}")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ValueError("max_model_len must be >= 2")
        if self.quantization not in (None, "", "none"):
            from fairgate.kernels import QuantMethod

            QuantMethod.parse(self.quantization)  # raises ValueError naming the bad value
        if self.gemm not in ("auto", "native", "onednn", "torch"):
            raise ValueError(f"gemm must be auto, native, onednn or torch, not {self.gemm!r}")
        spec = self.speculative
        if spec not in ("off", "ngram") and not (spec.startswith("draft:") and len(spec) > len("draft:")):
            raise ValueError(f"speculative must be off, ngram or draft:DIR, not {spec!r}")
        if self.num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be >= 1")
        if self.grammar_timeout_s <= 0 or self.grammar_cache_bytes < 0:
            raise ValueError("grammar_timeout_s must be > 0 and grammar_cache_bytes >= 0")
        self.fairness_config()  # raises ValueError naming a bad objective
        if self.gil_switch_interval_ms is not None and not 0 < self.gil_switch_interval_ms <= 100:
            raise ValueError("gil_switch_interval_ms must be in (0, 100]")
        if self.cpu_cores is not None:
            from fairgate.backends.local.engine.cores import plan_cores

            plan_cores(self.cpu_cores)  # raises ValueError naming a bad or unavailable core
        from fairgate.backends.openai_wire.limits import WireLimits, parse_limit_overrides

        parse_limit_overrides(self.request_limits, WireLimits())  # raises ValueError naming a bad one

    def fairness_config(self) -> FairnessConfig:
        """The fair queue's configuration: its defaults and `ttft_objectives` by class rank."""
        objectives: dict[int, float] = {}
        for item in self.ttft_objectives:
            name, _, value = item.partition("=")
            try:
                objectives[priority_rank(name.strip())] = float(value)
            except ValueError:
                raise ValueError(f"ttft objective must be CLASS=SECONDS with CLASS one of "
                                 f"{', '.join(PRIORITY_CLASSES)}, not {item!r}") from None
        return FairnessConfig(ttft_objectives=objectives, active_lead=self.fairness_active_lead)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> EngineConfig:
        """Build from the `fairgate engine` flags (see gateway/cli.py)."""
        return cls(
            model=args.model,
            device=args.device,
            dtype=args.dtype,
            kv_cache_dtype=args.kv_cache_dtype,
            quantization=getattr(args, "quantization", None),
            gemm=getattr(args, "gemm", "auto"),
            block_size=args.block_size,
            num_kv_blocks=args.num_kv_blocks,
            kv_cache_memory=args.kv_cache_memory,
            max_num_seqs=args.max_num_seqs,
            max_num_batched_tokens=args.max_num_batched_tokens,
            max_model_len=args.max_model_len,
            enable_prefix_caching=not args.no_prefix_caching,
            fairness_preemption=not getattr(args, "no_fairness_preemption", False),
            fairness_slot_share=not getattr(args, "no_fairness_slot_share", False),
            fairness_active_lead=getattr(args, "fairness_active_lead", DEFAULT_ACTIVE_LEAD),
            ttft_objectives=_objectives(getattr(args, "ttft_objective", None)),
            cpu_cores=getattr(args, "cpu_cores", None),
            gil_switch_interval_ms=getattr(args, "gil_switch_interval_ms", GIL_SWITCH_INTERVAL_MS),
            served_model_name=args.served_model_name,
            tool_call_parser=getattr(args, "tool_call_parser", "hermes"),
            reasoning_parser=getattr(args, "reasoning_parser", None),
            speculative=getattr(args, "speculative", "off"),
            num_speculative_tokens=getattr(args, "num_speculative_tokens", 4),
            stats_interval_s=getattr(args, "stats_interval", 10.0),
            request_limits=tuple(getattr(args, "limit", None) or ()),
            grammar_timeout_s=getattr(args, "grammar_timeout", 3.0),
            grammar_cache_bytes=int(getattr(args, "grammar_cache_mb", 64) * 1024 * 1024),
        )


def _objectives(given: list[str] | None) -> tuple[str, ...]:
    """`--ttft-objective` values: none given keeps the default, "none" turns every one off."""
    if not given:
        return DEFAULT_TTFT_OBJECTIVES
    return () if given == ["none"] else tuple(given)
