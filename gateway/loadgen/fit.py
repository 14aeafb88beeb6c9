"""Fit a workload to the served model's context, so a bench measures answers, not refusals.

The workloads are sized in words for a large model (the `rag` prompt is ~2,300 tokens); sent
as is to a 512-token model, every request is a 400 and the run measures nothing. Before a run
the bench reads each target's context length from `GET /v1/models` (`max_model_len`, as vLLM,
`fairgate engine` and the gateway list it) and, if the workload's largest request would not fit
the smallest of them, lowers the scale until prompt + max_tokens fits. It only ever shrinks, and
one scale serves every target, so side-by-side numbers still compare the same requests.

A request's token count is the server's own: a prompt is first bounded by its UTF-8 bytes (a
byte-level BPE token is at least one byte), and only when that bound does not fit are a few
`max_tokens=1` probes sent to learn tokens per word, then the largest prompt of each mix at the
fitted scale is measured and the scale lowered again if the estimate was short.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import openai

from fairgate.gateway.loadgen.client import Target
from fairgate.gateway.loadgen.workloads import RequestSpec, WorkloadSource, sample_words

SAMPLES = 256  # specs drawn to find each mix's largest request (lengths are i.i.d. per index)
MESSAGE_OVERHEAD = 32  # template tokens per message assumed by the byte bound
MARGIN = 0.9  # of the context, for the estimate's error
MIN_SCALE = 1e-3

Measure = Callable[[RequestSpec], Awaitable[int | None]]  # a spec's prompt tokens (None: refused)


@dataclass(slots=True, frozen=True)
class Fit:
    """What fitting decided: the source to run and a line saying why."""

    source: WorkloadSource
    context: int | None  # the smallest max_model_len the targets listed (None: none said)
    note: str

    def as_dict(self, asked: float) -> dict[str, Any]:
        return {"context": self.context, "scale_asked": asked, "scale": self.source.scale}


def words(spec: RequestSpec) -> int:
    return sum(len(m["content"].split()) for m in spec.messages)


def byte_bound(spec: RequestSpec) -> int:
    """An upper bound of the prompt's tokens with any byte-level tokenizer."""
    return sum(len(m["content"].encode()) + MESSAGE_OVERHEAD for m in spec.messages)


def largest(source: WorkloadSource, size: Callable[[RequestSpec], float]) -> dict[str, tuple[RequestSpec, int]]:
    """Per mix: its largest prompt by `size`, and its largest max_tokens (maybe another spec's)."""
    out: dict[str, tuple[RequestSpec, int]] = {}
    for i in range(SAMPLES):
        spec = source.spec(i)
        best, cap = out.get(spec.workload, (spec, 0))
        out[spec.workload] = (spec if size(spec) > size(best) else best, max(cap, spec.max_tokens))
    return out


def need(source: WorkloadSource, size: Callable[[RequestSpec], float]) -> float:
    """The most tokens any request of the workload takes: prompt + max_tokens, worst mix."""
    return max(size(spec) + cap for spec, cap in largest(source, size).values())


def fit_scale(source: WorkloadSource, budget: float, size: Callable[[RequestSpec], float]) -> WorkloadSource:
    """The source at the largest scale ≤ its own whose `need` is within `budget` (lengths are
    rounded, so the proportional step is repeated until it holds)."""
    for _ in range(30):
        total = need(source, size)
        if total <= budget or source.scale <= MIN_SCALE:
            return source
        source = replace(source, scale=max(MIN_SCALE, source.scale * min(0.97, budget / total)))
    return source


async def served_context(client: openai.AsyncOpenAI, model: str) -> int | None:
    """`max_model_len` of `model` in the server's /v1/models (None: not listed, or no answer)."""
    try:
        page = await client.models.list()
    except Exception:  # an old or minimal server: keep the workload, and say so
        return None
    for m in page.data:
        if m.id == model:
            value = (m.model_extra or {}).get("max_model_len")
            return value if isinstance(value, int) and value > 0 else None
    return None


def prompt_meter(client: openai.AsyncOpenAI, target: Target) -> Measure:
    """A probe: the server's prompt_tokens for a spec, with max_tokens 1 (None: refused)."""
    async def measure(spec: RequestSpec) -> int | None:
        args: dict[str, Any] = {"model": target.model, "messages": list(spec.messages), "max_tokens": 1}
        try:
            r = await client.chat.completions.create(**args)
        except openai.APIError:
            return None
        return r.usage.prompt_tokens if r.usage is not None else None
    return measure


async def token_estimate(measure: Measure, budget: float) -> Callable[[RequestSpec], float] | None:
    """Tokens of a spec from two probes: per message and per word (None: the server said not)."""
    n = max(1, min(100, int(budget / 8)))
    one = await measure(RequestSpec(({"role": "user", "content": sample_words(1)},), 1, "probe"))
    many = await measure(RequestSpec(({"role": "user", "content": sample_words(n + 1)},), 1, "probe"))
    if one is None or many is None:
        return None
    per_word = max((many - one) / n, 1.0)
    per_message = max(one - per_word, 1.0)
    return lambda spec: len(spec.messages) * per_message + per_word * words(spec)


async def measured_fit(source: WorkloadSource, context: int, measure: Measure) -> WorkloadSource | None:
    """Fit by the server's counts: estimate, then check each mix's largest prompt and lower the
    scale by what was short (None: the server would not count)."""
    estimate = await token_estimate(measure, context * MARGIN)
    if estimate is None:
        return None
    budget = context * MARGIN  # the margin covers prompts of as many words but longer tokens
    fitted = fit_scale(source, budget, estimate)
    for _ in range(4):
        worst = 0
        for spec, cap in largest(fitted, byte_bound).values():  # bytes follow tokens closer than words
            tokens = await measure(spec)
            worst = max(worst, (context + 1 if tokens is None else tokens) + cap)
        if worst <= budget:
            return fitted
        fitted = replace(fitted, scale=max(MIN_SCALE, fitted.scale * 0.97 * budget / worst))
    return fitted


async def fit_workload(source: WorkloadSource, targets: list[Target], clients: list[openai.AsyncOpenAI]) -> Fit:
    """The workload to run against `targets` (one client each), fitted to their smallest context."""
    contexts = {t.label: await served_context(c, t.model) for t, c in zip(targets, clients, strict=True)}
    known = {label: n for label, n in contexts.items() if n is not None}
    unknown = sorted(set(contexts) - set(known))
    if not known:
        return Fit(source, None, f"could not tell the served context length of {', '.join(unknown)} "
                                 "(no max_model_len in /v1/models): the workload is sent as sized")
    label = min(known, key=lambda k: known[k])
    context = known[label]
    said = f"max_model_len {context} ({label})" + (f"; {', '.join(unknown)} did not say" if unknown else "")
    if need(source, byte_bound) <= context:
        return Fit(source, context, f"the workload fits {said}")
    t = next(i for i, tg in enumerate(targets) if tg.label == label)
    fitted = await measured_fit(source, context, prompt_meter(clients[t], targets[t]))
    if fitted is None:
        return Fit(source, context, f"{label} did not answer a token-count probe: the workload is sent as sized")
    return Fit(fitted, context, f"scale {source.scale:g} -> {fitted.scale:.3g} so that prompt + max_tokens "
                                f"fits {said} (--no-fit sends it as sized)")
