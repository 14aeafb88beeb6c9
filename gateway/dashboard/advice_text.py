"""The advice panel in words: each `fairgate advise` finding (policies.advice.Advice) as a title
and one plain sentence carrying the two or three numbers that justify it, e.g. "Decode takes 81%
of the time on /v1/chat/completions at a mean batch of 1.2: speculative decoding would help."

An operator reads the panel to decide; a dump of the finding's numbers dict made them do the
reading (issue 37). The advisor keeps its numbers (JSON, the CLI); this module only words them.
Other providers' items (strings, mappings, dataclasses) are shown by their text fields alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fairgate.policies import advice as adv
from fairgate.policies.advice import ALL_ROUTES, Advice

LEVER_WORDS = {adv.SPEC_ON: "speculative decoding would help", adv.SPEC_OFF: "turn speculative decoding off",
               adv.KV_QUANTIZATION: "quantize the KV cache to int8 (about twice the tokens fit)",
               adv.MORE_REPLICAS: "add replicas", adv.PROMPT_LAYOUT: "move per-request values (timestamps, ids) "
                                                                    "after the shared part of the prompt",
               adv.SMALLER_MODEL: "a model: auto rule would send them to a smaller model"}
TEXT_FIELDS = ("sentence", "message", "why", "detail", "summary")


@dataclass(slots=True)
class AdviceItem:
    title: str  # where and what: "/v1/chat/completions · tiny: decode-heavy"
    sentence: str  # the finding and its numbers, in words
    lever: str = ""  # what to change, "" when nothing


def _n(a: Advice, key: str) -> float:
    v = a.numbers.get(key, 0)
    return float(v) if isinstance(v, int | float) else 0.0


def _list(a: Advice, key: str) -> list[float]:
    v = a.numbers.get(key)
    return [float(x) for x in v] if isinstance(v, list) and v else [0.0]


def _where(a: Advice) -> str:
    return f"the {a.model} engine" if a.route == ALL_ROUTES else a.route


def _lever(a: Advice) -> str:
    return LEVER_WORDS.get(a.lever or "", a.lever or "")


def _too_little(a: Advice, _: list[Advice]) -> str:
    return (f"Only {_n(a, 'requests'):.0f} requests reached {_where(a)} in this window; "
            f"at least {_n(a, 'min_requests'):.0f} are needed before it is judged.")


def _input_only(a: Advice, _: list[Advice]) -> str:
    return (f"{a.route} only reads input (embeddings): {_n(a, 'prompt_tokens_per_request'):g} prompt tokens per "
            f"request, none generated, {_n(a, 'latency_ms_mean'):g} ms per request; nothing to tune between "
            "prefill and decode.")


def _profile(a: Advice, _: list[Advice]) -> str:
    tokens = (f"{_n(a, 'prompt_tokens_per_request'):g} prompt vs {_n(a, 'completion_tokens_per_request'):g} "
              "completion tokens per request")
    timed = _n(a, "ttft_ms_mean") + _n(a, "decode_ms_mean") > 0
    share = _n(a, "prefill_time_share")
    if a.finding == "prefill-heavy":
        when = f" and {share:.0%} of the time before the first token" if timed else ""
        return f"Prefill dominates {a.route}: {tokens}{when}."
    if timed:
        return f"Decode takes {1 - share:.0%} of the time on {a.route}: {tokens}."
    return f"{a.route} is decode-heavy by tokens: {tokens} (no streamed requests to time)."


def _decode_routes(a: Advice, items: list[Advice]) -> list[Advice]:
    """The decode-heavy route profiles behind an engine's batch finding (same model, or named
    in its message, since an engine may be known by its backend's name)."""
    return [p for p in items if p.finding == "decode-heavy" and p.route != ALL_ROUTES
            and (p.model == a.model or p.route in a.message)]


def _batching(a: Advice, items: list[Advice]) -> str:
    batch, accept = _n(a, "mean_batch"), _n(a, "spec_acceptance")
    if a.finding == "speculation not paying":
        return (f"Speculative decoding on {a.model} has {accept:.0%} of drafts accepted at a mean batch of "
                f"{batch:.1f}: {_lever(a)}.")
    if a.finding == "decode-bound at batch 1":
        routes = _decode_routes(a, items)
        timed = [p for p in routes if _n(p, "ttft_ms_mean") + _n(p, "decode_ms_mean") > 0]
        head = (f"Decode takes {1 - _n(timed[0], 'prefill_time_share'):.0%} of the time on {timed[0].route}"
                if timed else f"{', '.join(p.route for p in routes) or 'Its routes'} decode most of their tokens")
        tail = (f"speculation accepts {accept:.0%} of drafts: keep it" if a.lever is None
                else "each step reads all the weights for one sequence, so " + _lever(a))
        return f"{head} at a mean batch of {batch:.1f} on {a.model}: {tail}."
    spec = f", with {accept:.0%} of speculative drafts accepted" if _n(a, "spec_draft_tokens") else ""
    return f"The {a.model} engine ran {_n(a, 'steps'):.0f} steps at a mean batch of {batch:.1f}{spec}; nothing to change."


def _kv(a: Advice, _: list[Advice]) -> str:
    queue, usage, pre = _n(a, "queue_s_mean"), _n(a, "kv_usage"), _n(a, "preemptions")
    if a.finding == "memory-bound":
        return (f"The {a.model} engine runs out of KV cache: {pre:.0f} preemptions "
                f"({_n(a, 'preemptions_per_request'):.2f} per request), a mean queue of "
                f"{queue:.2f} s and KV {usage:.0%} used at the end: {_lever(a)}.")
    if a.finding == "queueing":
        return (f"Requests wait {queue:.2f} s on average at the {a.model} engine while its KV cache is only "
                f"{usage:.0%} used: {_lever(a)}.")
    return (f"The {a.model} engine has no KV pressure: {pre:.0f} preemptions, a mean queue of {queue:.3f} s, "
            f"KV {usage:.0%} used.")


def _cache(a: Advice, _: list[Advice]) -> str:
    hit = _n(a, "hit_rate")
    if a.finding == "cache-missing prompt layout":
        return (f"{_n(a, 'shared_shape_share'):.0%} of prompts on {a.route} share one head apart from numbers, yet "
                f"the prefix cache finds only {hit:.1%} of their tokens: {_lever(a)}.")
    return (f"The prefix cache found {hit:.1%} of the prompt tokens on {a.route} ({_n(a, 'cached_tokens'):.0f} of "
            f"{_n(a, 'prompt_tokens'):.0f}).")


def _smaller(a: Advice, _: list[Advice]) -> str:
    simple, scored, share = _n(a, "simple_requests"), _n(a, "scored_requests"), _n(a, "simple_share")
    head = (f"{simple:.0f} of {scored:.0f} requests on {a.route} ({share:.0%}) score at most "
            f"{_n(a, 'max_complexity'):g} in complexity")
    return f"{head}: {_lever(a)}." if a.lever else f"{head}: too few to route to a smaller model."


def _fairness(a: Advice, _: list[Advice]) -> str:
    jain, waiting, taken = _n(a, "jain"), _n(a, "backlogged_tenants"), _n(a, "fairness_preemptions")
    back = f"{taken:.0f} slots were taken back from over-served tenants in the window"
    if a.finding == "unfair service":
        return (f"The {a.model} engine's {waiting:.0f} waiting tenants got service out of proportion to their "
                f"weights (Jain's index {jain:.2f} over the last 15 s; 1 is fair); {back}: check the tenants' "
                f"weights, and that fairness preemption is on.")
    return (f"The {a.model} engine shares its service by the tenants' weights (Jain's index {jain:.2f} over the "
            f"last 15 s, {waiting:.0f} tenants waiting); {back}.")


def _replicas(a: Advice, _: list[Advice]) -> str:
    peaks, need = _list(a, "peak_tokens_per_s_by_hour"), int(max(_list(a, "replicas_by_hour")))
    busiest = peaks.index(max(peaks))
    return (f"The {a.model} engine peaks at {max(peaks):.1f} tokens/s in the {busiest:02d}:00 UTC hour against "
            f"{_n(a, 'capacity_tokens_per_s'):.1f} per replica: {need} replica{'' if need == 1 else 's'} needed at "
            f"the peak, {_n(a, 'current_replicas'):.0f} running.")


SENTENCES: dict[str, Callable[[Advice, list[Advice]], str]] = {
    adv.TOO_LITTLE_DATA: _too_little, adv.INPUT_ONLY: _input_only, "prefill-heavy": _profile,
    "decode-heavy": _profile, "cache-missing prompt layout": _cache, "prefix hit rate": _cache,
    "memory-bound": _kv, "queueing": _kv, "KV pressure": _kv, "speculation not paying": _batching,
    "decode-bound at batch 1": _batching, "batch size": _batching, "smaller model could serve": _smaller,
    "smaller model": _smaller, "replicas by hour": _replicas, "unfair service": _fairness,
    "fair service": _fairness}


def sentence(a: Advice, items: list[Advice]) -> str:
    """One finding in words; an unknown finding falls back to the advisor's own message."""
    words = SENTENCES.get(a.finding)
    if words is not None:
        try:
            return words(a, items)
        except (ValueError, TypeError):  # numbers of an unexpected shape: the advisor's message still reads
            pass
    text = a.message or a.finding
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _title(a: Advice) -> str:
    where = f"engine {a.model}" if a.route == ALL_ROUTES else f"{a.route} · {a.model}"
    return f"{where}: {a.finding}"


def _as_advice(item: Mapping[str, Any]) -> Advice | None:
    """A mapping shaped like an Advice (its JSON, e.g. from GET /admin/advice), else None."""
    fields = {f.name for f in dataclasses.fields(Advice)}
    if not {"route", "model", "finding"} <= item.keys() or not isinstance(item.get("numbers", {}), Mapping):
        return None
    return Advice(**{k: v for k, v in item.items() if k in fields})


def _plain(item: Any) -> AdviceItem:
    """Another provider's item, by its text fields only: never a dump of its other values."""
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        item = dataclasses.asdict(item)
    if not isinstance(item, Mapping):
        return AdviceItem(str(item), "")
    text = {k: item[k] for k in ("title", "lever", *TEXT_FIELDS) if isinstance(item.get(k), str) and item[k]}
    title_key = next((k for k in ("title", "lever", "summary") if k in text), None)
    title = text.pop(title_key) if title_key else ""
    lever = text.pop("lever", "")
    return AdviceItem(title, " ".join(text.values()), lever)


def advice_items(items: list[Any]) -> list[AdviceItem]:
    """What the advice panel shows: Advice values (or their JSON) as title, sentence and lever;
    other items (strings, mappings, dataclasses) by their text fields."""
    found = [a if isinstance(a, Advice) else _as_advice(a) if isinstance(a, Mapping) else None for a in items]
    advices = [a for a in found if a is not None]
    return [AdviceItem(_title(a), sentence(a, advices), a.lever or "") if a is not None else _plain(item)
            for a, item in zip(found, items, strict=True)]
