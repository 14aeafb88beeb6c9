"""Quality through the served endpoint: a golden set (the `fairgate eval` format, see
backends/local/evaluation/golden.py) sent to each target greedily, scored with each item's
check (exact, contains, regex or JSON schema), so a report reads speed and quality of the
same server side by side. Completion-style prompts go to /v1/completions; `api="chat"`
sends each prompt as one user message instead (servers that only speak chat)."""

from __future__ import annotations

import asyncio
from typing import Any

import openai

from fairgate.backends.local.evaluation.golden import GoldenItem, cut_at_stop
from fairgate.gateway.loadgen.client import Target


async def _answer(client: openai.AsyncOpenAI, target: Target, item: GoldenItem, api: str,
                  max_tokens: int) -> str:
    args: dict[str, Any] = {"model": target.model, "max_tokens": item.max_tokens or max_tokens,
                            "temperature": 0}
    if item.stop:
        args["stop"] = item.stop[:4]  # the OpenAI API takes at most four
    if api == "chat":
        chat = await client.chat.completions.create(messages=[{"role": "user", "content": item.prompt}], **args)
        return chat.choices[0].message.content or ""
    done = await client.completions.create(prompt=item.prompt, **args)
    return str(done.choices[0].text)


async def score_golden(client: openai.AsyncOpenAI, target: Target, items: list[GoldenItem],
                       api: str = "completions", max_tokens: int = 32, concurrency: int = 4) -> dict[str, Any]:
    """{"items", "passed", "errors", "pass_rate", "results": [{"id", "passed", "error"}]};
    a failed request counts as not passed (and is named in its row)."""
    gate = asyncio.Semaphore(concurrency)

    async def one(item: GoldenItem) -> dict[str, Any]:
        async with gate:
            try:
                text = await _answer(client, target, item, api, max_tokens)
            except openai.APIStatusError as exc:
                return {"id": item.id, "passed": False, "error": f"http_{exc.status_code}"}
            except openai.APIError as exc:
                return {"id": item.id, "passed": False, "error": type(exc).__name__}
        return {"id": item.id, "passed": item.check(cut_at_stop(text, item.stop)[0]), "error": None}

    rows = await asyncio.gather(*(one(item) for item in items))
    passed = sum(1 for r in rows if r["passed"])
    return {"items": len(rows), "passed": passed, "errors": sum(1 for r in rows if r["error"]),
            "pass_rate": passed / len(rows) if rows else None, "api": api, "results": rows}
