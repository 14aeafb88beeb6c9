"""Greedy completions through the engine (`EngineCore`), for evals of speculative decoding.

Speculation lives in the engine's step loop, not in the harness's own one, so a speculative
eval runs both sides here: the plain engine ("off") and the speculating one, on the harness's
runner and tokenizer. Same prompt cut and stop handling as `Harness.greedy`; eos ends a
completion and is not part of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fairgate.backends.local.engine.config import EngineConfig
from fairgate.backends.local.engine.core import EngineCore
from fairgate.backends.local.engine.factory import build_engine_parts
from fairgate.backends.local.engine.output import OutputTracker
from fairgate.backends.local.engine.types import SamplingParams
from fairgate.backends.local.evaluation.golden import cut_at_stop
from fairgate.scheduler.queue import FCFSQueue
from fairgate.scheduler.request import SchedRequest

if TYPE_CHECKING:
    from fairgate.backends.local.evaluation.harness import GreedyOutput, Harness


def engine_greedy(
    harness: Harness, prompts: list[str], max_tokens: list[int], stops: list[list[str]],
    progress: Callable[[int], None] | None = None,
) -> list[GreedyOutput]:
    from fairgate.backends.local.evaluation.harness import GreedyOutput

    o = harness.options
    config = EngineConfig(
        str(o.model_dir), device=o.device, dtype=o.dtype, block_size=harness.runner.block_size,
        max_num_seqs=harness.slots, enable_prefix_caching=False,
        speculative=o.speculative or "off", num_speculative_tokens=o.num_speculative_tokens,
    )
    parts = build_engine_parts(config, runner=harness.runner, tokenizer=harness.tokenizer, wait_queue=FCFSQueue())
    core = EngineCore(parts)
    tok = harness.tokenizer
    for i, (prompt, n, stop) in enumerate(zip(prompts, max_tokens, stops, strict=True)):
        ids = tok.encode(prompt)[-max(1, harness.seq_len - n) :]  # keep the prompt's end
        limit = min(n, harness.seq_len - len(ids))
        sampling = SamplingParams(max_tokens=limit, temperature=0.0, stop=list(stop))
        tracker = OutputTracker(f"g-{i}", sampling, len(ids), limit, parts.eos_token_ids, tok.detokenizer(ids))
        core.add(SchedRequest(f"g-{i}", ids, limit), tracker)
    outs: dict[str, list[int]] = {f"g-{i}": [] for i in range(len(prompts))}
    while core.has_unfinished:
        for out in core.step().outputs:
            outs[out.request_id] += out.token_ids
            if out.finished and progress:
                progress(1)
    harness.last_engine_stats = core.stats
    results = []
    for i, stop in enumerate(stops):
        ids = [t for t in outs[f"g-{i}"] if t not in parts.eos_token_ids]
        results.append(GreedyOutput(ids, cut_at_stop(tok.decode(ids), stop)[0]))
    return results
