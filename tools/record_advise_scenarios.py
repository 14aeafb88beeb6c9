"""Record the `fairgate advise` scenarios as fixtures: real runs, played back by the tests.

Each scenario starts a real engine server (`fairgate engine`, a tiny random Llama), a real
gateway in front of it (SQLite), drives a load with httpx, and writes
`tests/fixtures/advise/<scenario>/`: `usage.json` (the usage rows the gateway wrote),
`metrics_before.txt` / `metrics_after.txt` (the engine's /metrics scrapes around the load) and
`meta.json` (the window's end). The scenarios:

- prefill_layout: long shared system prompt preceded by a per-request timestamp, 2 tokens out;
- decode_batch1: short prompts, 48 tokens out, one request at a time;
- memory_bound: 8 concurrent requests on a KV pool of 14 blocks (preemptions);
- embeddings: /v1/embeddings only (input-only: prompt tokens, nothing generated);
- too_little_data: a handful of chat requests, under the advisor's minimum.

Each judged scenario sends `REQUESTS` requests, above policies.advice's `min_requests`, so the
advisor judges it rather than calling it too little data.

Run: python tools/record_advise_scenarios.py [OUT_DIR [SCENARIO ...]]
"""

from __future__ import annotations

import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

# The repository root goes last, as in tests/conftest.py: first, its `kernels/` would shadow the
# `kernels` distribution that transformers imports (the tiny model's config).
sys.path.append(str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from sqlalchemy import select  # noqa: E402

from fairgate.gateway.settings import Settings  # noqa: E402
from fairgate.gateway.store.db import make_engine  # noqa: E402
from fairgate.gateway.store.tables import UsageRecord  # noqa: E402
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread  # noqa: E402
from tests.helpers.engine_proc import EngineProcess  # noqa: E402
from tests.helpers.tiny_models import make_tiny_model  # noqa: E402

SHARED = ("You are the support assistant of Example Bank. Answer briefly and politely. Never ask for "
          "passwords. Explain fees, card limits, transfer times and branch hours when asked. ") * 3
FIELDS = ("request_id", "tenant_id", "model", "backend", "priority", "status", "stream", "prompt_tokens",
          "completion_tokens", "cached_tokens", "http_status", "ttft_ms", "latency_ms", "route",
          "prompt_version", "prefix_hash", "prefix_shape", "complexity", "created_at")
REQUESTS = 24


def _chat(url: str, key: str, messages: list[dict[str, str]], max_tokens: int, **extra: Any) -> None:
    r = httpx.post(url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"}, timeout=300, json={
        "model": "tiny", "messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
        "stream_options": {"include_usage": True}, **extra})
    assert r.status_code == 200, r.text


def prefill_layout(url: str, key: str) -> None:
    for i in range(REQUESTS):
        system = f"Request time: 2026-12-01T10:{i:02d}:{7 * i % 60:02d}Z. " + SHARED
        _chat(url, key, [{"role": "system", "content": system}, {"role": "user", "content": f"fee {i}?"}], 2)


def decode_batch1(url: str, key: str) -> None:
    for i in range(REQUESTS):
        _chat(url, key, [{"role": "user", "content": f"say hi {i}"}], 48, min_tokens=48)


def memory_bound(url: str, key: str) -> None:
    def one(i: int) -> None:
        _chat(url, key, [{"role": "user", "content": f"tell a long story number {i} about the sea"}], 40,
              min_tokens=40)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(REQUESTS)))


def embeddings(url: str, key: str) -> None:
    for i in range(REQUESTS):
        r = httpx.post(url + "/v1/embeddings", headers={"authorization": f"Bearer {key}"}, timeout=300,
                       json={"model": "tiny", "input": [f"branch hours of office {i}", f"card limit question {i}"]})
        assert r.status_code == 200, r.text


def too_little_data(url: str, key: str) -> None:
    for i in range(5):
        _chat(url, key, [{"role": "user", "content": f"quick question {i}"}], 16)


SCENARIOS = {
    "prefill_layout": (prefill_layout, ("--max-model-len", "1024", "--num-kv-blocks", "512")),
    "decode_batch1": (decode_batch1, ()),
    "memory_bound": (memory_bound, ("--num-kv-blocks", "14", "--max-num-batched-tokens", "64")),
    "embeddings": (embeddings, ()),
    "too_little_data": (too_little_data, ()),
}


def _rows(url: str) -> list[dict[str, Any]]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(*(getattr(UsageRecord, f) for f in FIELDS))
                                .order_by(UsageRecord.created_at)).mappings().all()
    finally:
        engine.dispose()
    return [{k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in r.items()} for r in rows]


def record(name: str, out: Path, model_dir: Path, work: Path) -> None:
    drive, engine_args = SCENARIOS[name]
    db = f"sqlite:///{work}/{name}.db"
    with EngineProcess(model_dir, *engine_args) as engine, GatewayThread(Settings(
            admin_token=ADMIN_TOKEN, database_url=db, embedded_engine=False)) as gw:
        admin = Admin(gw.url)
        admin.backend("tiny", engine.url + "/v1", kind="local", model="tiny")
        key = admin.key(admin.tenant()["id"])["key"]
        before = httpx.get(engine.url + "/metrics").text
        drive(gw.url, key)
        after = httpx.get(engine.url + "/metrics").text
        admin.close()
    target = out / name
    target.mkdir(parents=True, exist_ok=True)
    rows = _rows(db)
    (target / "usage.json").write_text(json.dumps(rows, indent=1) + "\n")
    (target / "metrics_before.txt").write_text(before)
    (target / "metrics_after.txt").write_text(after)
    until = max(r["created_at"] for r in rows)
    (target / "meta.json").write_text(json.dumps({"until": until, "rows": len(rows)}) + "\n")
    print(f"{name}: {len(rows)} rows")


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/advise")
    names = sys.argv[2:] or list(SCENARIOS)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = make_tiny_model(Path(tmp) / "tiny", "llama")
        for name in names:
            record(name, out, model_dir, Path(tmp))


if __name__ == "__main__":
    main()
