"""`fairgate advise`: name the bottleneck of each route and model, and the lever to pull next.

Pure decisions over plain numbers: the gateway's collector (gateway/observability/advise.py) reads usage
rows and metrics over a window into `RouteWindow`s (one per route and model) and
`EngineWindow`s (one per engine model), and `advise` turns them into `Advice` values, each with
the measured numbers it rests on. Each route is judged on its own rows, and only with at least `min_requests` of them (fewer:
"too little data (N requests)"); what belongs to an engine (KV pressure, batching) is judged
once per engine on its own counters, with "*" as the route. The rules, each from a measured signal:

- profile: input-only when a route generated no tokens at all (embeddings: neither prefill- nor
  decode-heavy, and no lever that changes the text or the model, since either changes the
  vectors); else prefill-heavy when prompts outweigh completions `prefill_token_ratio` to one
  (the engine's work) or the time to first token is at least half of the request's (streamed rows);
- prefix cache: the hit rate, and a cache-missing layout when most requests share a prompt
  head up to numbers (policies.prompt_layout) but few share it byte for byte → prompt layout;
- KV pressure: preemptions per request or a full KV cache with queueing → KV quantization
  while the cache is 16/32-bit, else more replicas;
- batch: an engine serving a decode-heavy route at a mean batch under 2 is bound by reading
  the weights once per token → speculative decoding on; drafts accepted less than
  `min_acceptance`, or speculation at large batches → speculative decoding off;
- smaller model: requests whose complexity score is at most `simple_complexity`;
- fairness (engines with a fair queue): Jain's index of the waiting tenants' weighted service at
  the window's end, under `min_fairness` with two or more tenants waiting → unfair service (the
  fairness preemptions in the window say whether the engine took slots back);
- queueing without KV pressure → more replicas (policies.replica_plan sizes them per hour).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from fairgate.policies.replica_plan import ReplicaPlan

PROMPT_LAYOUT = "prompt layout"
KV_QUANTIZATION = "KV quantization"
SPEC_ON = "speculative decoding on"
SPEC_OFF = "speculative decoding off"
SMALLER_MODEL = "smaller-model route"
MORE_REPLICAS = "more replicas"
INPUT_ONLY = "input-only"
TOO_LITTLE_DATA = "too little data"
ALL_ROUTES = "*"  # the route of a finding about a whole engine or model
QUANTIZED_KV = ("int8", "int4", "fp8")

Numbers = dict[str, float | int | list[int] | list[float]]


@dataclass(slots=True)
class RouteWindow:
    """One (route, model, backend) over the window, from usage rows."""

    route: str
    model: str
    backend: str
    requests: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    streamed: int = 0  # streamed rows with a TTFT
    ttft_ms_sum: float = 0.0  # over the streamed rows
    decode_ms_sum: float = 0.0  # latency - TTFT, over the streamed rows
    latency_ms_sum: float = 0.0  # over all rows
    head_requests: int = 0  # rows with a prompt-head fingerprint
    top_shape_requests: int = 0  # rows on the most common head shape
    top_shape_heads: int = 0  # distinct exact heads on that shape
    top_head_requests: int = 0  # rows on the most common exact head
    scored: int = 0  # rows with a complexity score
    simple: int = 0  # of those, at most AdviceConfig.simple_complexity


@dataclass(slots=True)
class EngineWindow:
    """One engine (by its model name) over the window, from its metrics (counter deltas)."""

    model: str
    steps: int = 0
    sampled_seqs: int = 0
    busy_s: float = 0.0
    preemptions: int = 0
    requests: int = 0  # finished at the engine
    queue_s_sum: float = 0.0
    queue_n: int = 0
    kv_blocks_used: int = 0  # gauges, at the window's end
    kv_blocks_total: int = 0
    waiting: int = 0
    kv_cache_dtype: str = ""
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0
    startup_s: float = 0.0
    fairness_preemptions: int = 0  # slots given back to an under-served tenant (not KV pressure)
    jain: float = -1.0  # fairgate_fairness_jain_index at the window's end; -1: no fair queue
    backlogged_tenants: int = 0  # tenants waiting at the window's end


@dataclass(slots=True)
class AdviceConfig:
    prefill_token_ratio: float = 8.0
    layout_min_share: float = 0.5  # of rows on one head shape
    layout_min_prompt_tokens: int = 128  # shorter prompts have too little to cache
    low_hit_rate: float = 0.3
    min_fairness: float = 0.9  # Jain's index below this, with two tenants waiting: unfair service
    preemptions_per_request: float = 0.01
    full_kv: float = 0.9
    queue_s: float = 0.5  # mean queue time that counts as queueing
    small_batch: float = 2.0
    large_batch: float = 16.0
    min_acceptance: float = 0.3
    simple_complexity: float = 0.3
    smaller_model_share: float = 0.3
    min_requests: int = 20  # fewer rows (or engine requests) in the window: too little data to judge


@dataclass(slots=True)
class Advice:
    route: str  # ALL_ROUTES ("*") for a whole engine or model
    model: str
    finding: str  # e.g. "prefill-heavy", "cache-missing prompt layout", "memory-bound"
    numbers: Numbers = field(default_factory=dict)
    lever: str | None = None  # what to do next; None: nothing to change for this finding
    message: str = ""


def _ratio(a: float, b: float) -> float:
    return round(a / b, 4) if b else 0.0


def too_little_data(route: str, model: str, requests: int, cfg: AdviceConfig) -> Advice:
    """Said instead of a verdict: a handful of requests would make any finding noise."""
    return Advice(route, model, TOO_LITTLE_DATA, {"requests": requests, "min_requests": cfg.min_requests}, None,
                  f"too little data ({requests} requests): at least {cfg.min_requests} are needed to judge "
                  + ("this route" if route != ALL_ROUTES else "this engine"))


def input_only(r: RouteWindow) -> Advice:
    """A route that generated nothing (embeddings): its whole cost is the prompt's forward pass."""
    numbers: Numbers = {"requests": r.requests, "prompt_tokens_per_request": round(r.prompt_tokens / r.requests, 1),
                        "completion_tokens": 0, "latency_ms_mean": round(r.latency_ms_sum / r.requests, 1)}
    return Advice(r.route, r.model, INPUT_ONLY, numbers, None,
                  f"input-only (embeddings): {numbers['prompt_tokens_per_request']} prompt tokens per request, "
                  f"none generated, {numbers['latency_ms_mean']} ms per request; neither prefill- nor "
                  "decode-heavy: its cost is the prompt's forward pass alone")


def profile(r: RouteWindow, cfg: AdviceConfig) -> Advice:
    """Input-only, prefill- or decode-heavy, by tokens or by time (see the module docstring)."""
    if r.completion_tokens == 0:
        return input_only(r)
    ttft = r.ttft_ms_sum / r.streamed if r.streamed else 0.0
    decode = r.decode_ms_sum / r.streamed if r.streamed else 0.0
    time_share = _ratio(ttft, ttft + decode)
    token_ratio = _ratio(r.prompt_tokens, r.completion_tokens)
    heavy = token_ratio >= cfg.prefill_token_ratio or time_share >= 0.5
    finding = "prefill-heavy" if heavy else "decode-heavy"
    numbers: Numbers = {
        "requests": r.requests, "prompt_tokens_per_request": round(r.prompt_tokens / r.requests, 1),
        "completion_tokens_per_request": round(r.completion_tokens / r.requests, 1),
        "prompt_to_completion": token_ratio, "ttft_ms_mean": round(ttft, 1), "decode_ms_mean": round(decode, 1),
        "prefill_time_share": time_share}
    return Advice(r.route, r.model, finding, numbers, None,
                  f"{finding}: {numbers['prompt_tokens_per_request']} prompt vs "
                  f"{numbers['completion_tokens_per_request']} completion tokens per request, "
                  f"{time_share:.0%} of the time before the first token")


def prefix_cache(r: RouteWindow, heavy_prefill: bool, cfg: AdviceConfig) -> Advice:
    hit = _ratio(r.cached_tokens, r.prompt_tokens)
    shape_share = _ratio(r.top_shape_requests, r.head_requests)
    unique_share = _ratio(r.top_shape_heads, r.top_shape_requests)
    numbers: Numbers = {"hit_rate": hit, "cached_tokens": r.cached_tokens, "prompt_tokens": r.prompt_tokens,
                        "shared_shape_share": shape_share, "distinct_heads_on_shape": r.top_shape_heads,
                        "identical_head_share": _ratio(r.top_head_requests, r.head_requests)}
    long_prompts = r.prompt_tokens >= cfg.layout_min_prompt_tokens * r.requests
    layout = (long_prompts and shape_share >= cfg.layout_min_share and unique_share >= 0.5
              and r.top_shape_requests >= 4)
    if layout and hit < cfg.low_hit_rate:
        return Advice(r.route, r.model, "cache-missing prompt layout", numbers, PROMPT_LAYOUT,
                      f"{shape_share:.0%} of prompts share one head apart from numbers, yet "
                      f"{r.top_shape_heads} of {r.top_shape_requests} start differently byte for byte; "
                      f"prefix hit rate {hit:.1%}: move per-request values (timestamps, ids) after the "
                      "shared prompt" + (" (this route is prefill-heavy)" if heavy_prefill else ""))
    return Advice(r.route, r.model, "prefix hit rate", numbers, None, f"prefix hit rate {hit:.1%}")


def kv_pressure(name: str, e: EngineWindow, requests: int, cfg: AdviceConfig) -> Advice:
    """The engine `name`'s KV pressure; `requests`: its routes' rows, when it does not count its own."""
    usage = _ratio(e.kv_blocks_used, e.kv_blocks_total)
    per_request = _ratio(e.preemptions, e.requests or requests)
    queue = round(e.queue_s_sum / e.queue_n, 4) if e.queue_n else 0.0
    numbers: Numbers = {"preemptions": e.preemptions, "preemptions_per_request": per_request,
                        "queue_s_mean": queue, "kv_usage": usage, "waiting": e.waiting}
    pressed = per_request >= cfg.preemptions_per_request or (usage >= cfg.full_kv and queue >= cfg.queue_s)
    if pressed:
        quantized = any(q in e.kv_cache_dtype for q in QUANTIZED_KV)
        lever = MORE_REPLICAS if quantized else KV_QUANTIZATION
        why = (f"the KV cache is already {e.kv_cache_dtype}" if quantized else
               f"a {e.kv_cache_dtype or 'float'} KV cache: int8 holds ~2x the tokens")
        return Advice(ALL_ROUTES, name, "memory-bound", numbers, lever,
                      f"memory-bound: {e.preemptions} preemptions ({per_request:.2f} per request), "
                      f"mean queue {queue:.2f}s, KV {usage:.0%} used at the end; {why}")
    if queue >= cfg.queue_s:
        return Advice(ALL_ROUTES, name, "queueing", numbers, MORE_REPLICAS,
                      f"requests wait {queue:.2f}s on average with no KV pressure: add replicas")
    return Advice(ALL_ROUTES, name, "KV pressure", numbers, None,
                  f"no KV pressure: {e.preemptions} preemptions, mean queue {queue:.3f}s")


def batching(name: str, e: EngineWindow, decode_routes: list[str], cfg: AdviceConfig) -> Advice:
    """The engine `name`'s batch; `decode_routes`: its judged routes that are decode-heavy."""
    batch = _ratio(e.sampled_seqs, e.steps)
    accept = _ratio(e.spec_accepted_tokens, e.spec_draft_tokens)
    numbers: Numbers = {"mean_batch": batch, "steps": e.steps, "spec_acceptance": accept,
                        "spec_draft_tokens": e.spec_draft_tokens}
    spec_on = e.spec_draft_tokens > 0
    if spec_on and (accept < cfg.min_acceptance or batch >= cfg.large_batch):
        why = f"acceptance {accept:.0%}" if accept < cfg.min_acceptance else f"batch {batch:.1f}"
        return Advice(ALL_ROUTES, name, "speculation not paying", numbers, SPEC_OFF,
                      f"speculative decoding costs more than it saves ({why}): turn it off")
    if decode_routes and batch < cfg.small_batch:
        finding = "decode-bound at batch 1"
        if spec_on:
            return Advice(ALL_ROUTES, name, finding, numbers, None,
                          f"decode-bound at mean batch {batch:.2f}; speculation accepts {accept:.0%}: keep it")
        return Advice(ALL_ROUTES, name, finding, numbers, SPEC_ON,
                      f"decode-bound at mean batch {batch:.2f} (decode-heavy: {', '.join(decode_routes)}): each token "
                      "reads all weights for one sequence; speculative decoding (n-gram or a draft model) "
                      "verifies several per read")
    return Advice(ALL_ROUTES, name, "batch size", numbers, None,
                  f"mean batch {batch:.2f}" + (f", speculation accepts {accept:.0%}" if spec_on else ""))


def fairness(name: str, e: EngineWindow, requests: int, cfg: AdviceConfig) -> Advice:
    numbers: Numbers = {"jain": round(e.jain, 3), "backlogged_tenants": e.backlogged_tenants,
                        "fairness_preemptions": e.fairness_preemptions,
                        "fairness_preemptions_per_request": _ratio(e.fairness_preemptions, requests)}
    if e.backlogged_tenants >= 2 and e.jain < cfg.min_fairness:
        return Advice(ALL_ROUTES, name, "unfair service", numbers, None,
                      f"Jain's index {e.jain:.2f} over {e.backlogged_tenants} waiting tenants")
    return Advice(ALL_ROUTES, name, "fair service", numbers, None,
                  f"Jain's index {e.jain:.2f}, {e.fairness_preemptions} fairness preemptions")


def smaller_model(r: RouteWindow, cfg: AdviceConfig) -> Advice:
    share = _ratio(r.simple, r.scored)
    numbers: Numbers = {"simple_requests": r.simple, "scored_requests": r.scored, "simple_share": share,
                        "max_complexity": cfg.simple_complexity}
    if r.model != "auto" and r.scored and share >= cfg.smaller_model_share:
        return Advice(r.route, r.model, "smaller model could serve", numbers, SMALLER_MODEL,
                      f"{r.simple} of {r.scored} requests ({share:.0%}) score at most {cfg.simple_complexity}: "
                      f"a model: auto rule with max_complexity {cfg.simple_complexity} sends them to a smaller model")
    return Advice(r.route, r.model, "smaller model", numbers, None,
                  f"{r.simple} of {r.scored} requests simple enough for a smaller model")


def advise(routes: list[RouteWindow], engines: dict[str, EngineWindow],
           cfg: AdviceConfig | None = None) -> list[Advice]:
    """Per route and model, on its own rows: too little data, or its profile, then (unless
    input-only) prefix cache and smaller-model share. Then once per engine that served a route
    (found by backend, else model name): too little data, or KV pressure and batching. Routes
    with no requests are skipped."""
    cfg = cfg or AdviceConfig()
    out: list[Advice] = []
    served: dict[str, int] = defaultdict(int)  # engine → requests of its routes
    decode_routes: dict[str, list[str]] = defaultdict(list)  # engine → its decode-heavy routes
    generating: set[str] = set()  # engines with a route that generated tokens
    for r in sorted(routes, key=lambda r: (r.route, r.model, r.backend)):
        if r.requests <= 0:
            continue
        name = r.backend if r.backend in engines else r.model if r.model in engines else None
        if name is not None:
            served[name] += r.requests
            generating.update([name] if r.completion_tokens else [])
        if r.requests < cfg.min_requests:
            out.append(too_little_data(r.route, r.model, r.requests, cfg))
            continue
        prof = profile(r, cfg)
        out.append(prof)
        if prof.finding == INPUT_ONLY:
            continue
        if prof.finding == "decode-heavy" and name is not None:
            decode_routes[name].append(r.route)
        out += [prefix_cache(r, prof.finding == "prefill-heavy", cfg), smaller_model(r, cfg)]
    for name in sorted(served):
        e = engines[name]
        if (e.requests or served[name]) < cfg.min_requests:
            out.append(too_little_data(ALL_ROUTES, name, e.requests or served[name], cfg))
            continue
        out.append(kv_pressure(name, e, served[name], cfg))
        if name in generating:  # an engine that only embeds has no decode batch to judge
            out.append(batching(name, e, decode_routes[name], cfg))
        if e.jain >= 0:  # the engine has a fair queue
            out.append(fairness(name, e, served[name], cfg))
    return out


def replicas(model: str, plan: ReplicaPlan, current: int = 1) -> Advice:
    """The hourly replica plan of one model as advice: more replicas when an hour needs more
    than run now."""
    need = max(plan.replicas_by_hour)
    numbers: Numbers = {"replicas_by_hour": plan.replicas_by_hour, "peak_tokens_per_s_by_hour":
                        plan.peak_tokens_per_s_by_hour, "capacity_tokens_per_s": plan.capacity_tokens_per_s,
                        "buffer": plan.buffer, "startup_s": plan.startup_s, "current_replicas": current}
    peaks = plan.peak_tokens_per_s_by_hour
    busiest = peaks.index(max(peaks))
    message = (f"peak {max(peaks):.1f} tokens/s in the {busiest:02d}:00 UTC hour against "
               f"{plan.capacity_tokens_per_s:.1f} per replica, buffer {plan.buffer:.0%}: at most {need} replicas; "
               f"start each hour's replicas {plan.startup_s:.0f}s before it")
    return Advice("*", model, "replicas by hour", numbers, MORE_REPLICAS if need > current else None, message)
