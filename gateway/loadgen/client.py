"""One streamed request against an OpenAI-compatible server, timed the way serving benchmarks
time it (vLLM's `benchmark_serving`, GenAI-Perf):

    TTFT  request sent → first chunk carrying generated text
    ITL   the gaps between successive text chunks (one per chunk, not averaged)
    E2E   request sent → stream closed
    TPOT  (E2E − TTFT) / (output tokens − 1): the decode speed one request saw

Output tokens come from the server's usage chunk (`stream_options.include_usage`), else the
number of text chunks. The route is the backend that served the request: fairgate's
`x-fairgate-backend` header, else the `model` field of the answer. A cost is read when the server
sends one (`x-fairgate-cost-usd`, or LiteLLM's `x-litellm-response-cost`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import openai

from fairgate.gateway.loadgen.workloads import RequestSpec

ROUTE_HEADER = "x-fairgate-backend"
COST_HEADERS = ("x-fairgate-cost-usd", "x-litellm-response-cost")


@dataclass(slots=True)
class Target:
    """A server under test: its label in the report, base URL (ending in /v1) and model name."""

    label: str
    base_url: str
    model: str


@dataclass(slots=True)
class RequestResult:
    """What one request measured (times in seconds; `start` from the beginning of the run)."""

    target: str
    level: str  # the load point, e.g. "c=4" or "rate=2"
    tenant: int  # index of the API key it used
    workload: str
    start: float
    ok: bool = False
    error: str | None = None  # "http_429", "APITimeoutError", ... when not ok
    error_detail: str = ""  # the server's message (first 200 characters), for the report
    error_code: str = ""  # the server's error `code` (e.g. context_length_exceeded), when it sent one
    ttft: float | None = None
    e2e: float | None = None
    itl: list[float] = field(default_factory=list)
    prompt_tokens: int | None = None
    output_tokens: int = 0
    route: str = ""
    cost: float | None = None
    text: str = field(default="", repr=False)  # kept for golden scoring; never written out

    @property
    def tpot(self) -> float | None:
        if self.ttft is None or self.e2e is None or self.output_tokens < 2:
            return None
        return (self.e2e - self.ttft) / (self.output_tokens - 1)

    def row(self) -> dict[str, Any]:
        """The JSON record of this request (no prompt or output text)."""
        return {"target": self.target, "level": self.level, "tenant": self.tenant,
                "workload": self.workload, "start": self.start, "ok": self.ok, "error": self.error,
                "ttft": self.ttft, "e2e": self.e2e, "tpot": self.tpot, "itl": self.itl,
                "prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens,
                "route": self.route, "cost": self.cost}


def _cost(headers: Any) -> float | None:
    for name in COST_HEADERS:
        value = headers.get(name)
        if value is not None:
            try:
                return float(value)
            except ValueError:
                return None
    return None


def _error_name(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"http_{exc.status_code}"
    return type(exc).__name__


def _error_code(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError) and isinstance(exc.body, dict):
        body = exc.body.get("error", exc.body)
        code = body.get("code") if isinstance(body, dict) else None
        return str(code)[:80] if code is not None else ""
    return ""


def _error_detail(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError) and isinstance(exc.body, dict):
        body = exc.body.get("error", exc.body)
        message = body.get("message") if isinstance(body, dict) else None
        if isinstance(message, str):
            return message[:200]
    return str(exc)[:200]


async def send_chat(client: openai.AsyncOpenAI, target: Target, spec: RequestSpec,
                    result: RequestResult, extra_body: dict[str, Any] | None = None,
                    temperature: float | None = None, headers: dict[str, str] | None = None) -> RequestResult:
    """Stream one chat completion and fill `result` in; errors are recorded, never raised."""
    args: dict[str, Any] = {"model": target.model, "messages": list(spec.messages),
                            "max_tokens": spec.max_tokens, "stream": True,
                            "stream_options": {"include_usage": True}}
    if temperature is not None:
        args["temperature"] = temperature
    if extra_body:
        args["extra_body"] = extra_body
    if headers:
        args["extra_headers"] = headers
    t0 = time.perf_counter()
    try:
        raw = await client.chat.completions.with_raw_response.create(**args)
        result.route = raw.headers.get(ROUTE_HEADER, "")
        result.cost = _cost(raw.headers)
        await _read_stream(raw.parse(), t0, result)
    except Exception as exc:  # any failure is a data point of the run, not a crash of it
        result.ok, result.error = False, _error_name(exc)
        result.error_detail, result.error_code = _error_detail(exc), _error_code(exc)
        return result
    result.e2e = time.perf_counter() - t0
    result.ok = True  # an answer that ended at once (EOS first) is an answer: it has no TTFT
    return result


async def _read_stream(stream: Any, t0: float, result: RequestResult) -> None:
    last: float | None = None
    chunks, parts = 0, []
    async for chunk in stream:
        now = time.perf_counter()
        if not result.route and getattr(chunk, "model", None):
            result.route = chunk.model
        if chunk.usage is not None:
            result.prompt_tokens = chunk.usage.prompt_tokens
            result.output_tokens = chunk.usage.completion_tokens or 0
        text = chunk.choices[0].delta.content if chunk.choices else None
        if not text:
            continue
        parts.append(text)
        chunks += 1
        if last is None:
            result.ttft = now - t0
        else:
            result.itl.append(now - last)
        last = now
    result.text = "".join(parts)
    if result.output_tokens == 0:
        result.output_tokens = chunks
