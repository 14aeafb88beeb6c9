"""Read a replica's health and load: one GET per probe.

- a fairgate engine server (`local`): `GET /stats` → KV blocks used / total, waiting requests;
- vLLM (`vllm`): `GET /metrics` (Prometheus text) → `vllm:kv_cache_usage_perc` (older releases:
  `vllm:gpu_cache_usage_perc`), `vllm:num_requests_waiting`.

A reply other than 200, or one that cannot be read, is a failed probe (None).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

VLLM_KV = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
VLLM_WAITING = "vllm:num_requests_waiting"


@dataclass(slots=True, frozen=True)
class LoadReading:
    kv_usage: float | None  # 0..1
    waiting: int | None


def server_root(base_url: str) -> str:
    """`http://h:p/v1` (an OpenAI base) → `http://h:p`."""
    root = base_url.rstrip("/")
    return root[:-3] if root.endswith("/v1") else root


def parse_vllm_metrics(text: str) -> LoadReading:
    """Sum each metric over its label sets (one per model / engine)."""
    sums: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if "{" in line:  # name{labels} value [timestamp]
            name, tail = line[:line.index("{")], line[line.rindex("}") + 1:].split()
        else:
            name, *tail = line.split()
        if name not in (*VLLM_KV, VLLM_WAITING) or not tail:
            continue
        try:
            sums[name] = sums.get(name, 0.0) + float(tail[0])
        except ValueError:
            continue
    kv = next((sums[k] for k in VLLM_KV if k in sums), None)
    waiting = sums.get(VLLM_WAITING)
    return LoadReading(kv, int(waiting) if waiting is not None else None)


def parse_engine_stats(stats: dict[str, object]) -> LoadReading:
    used, total, waiting = stats.get("kv_blocks_used"), stats.get("kv_blocks_total"), stats.get("waiting")
    kv = used / total if isinstance(used, int) and isinstance(total, int) and total > 0 else None
    return LoadReading(kv, waiting if isinstance(waiting, int) else None)


async def read_load(http: httpx.AsyncClient, kind: str, base_url: str, timeout_s: float) -> LoadReading | None:
    import httpx

    root = server_root(base_url)
    try:
        if kind == "vllm":
            r = await http.get(root + "/metrics", timeout=timeout_s)
            return parse_vllm_metrics(r.text) if r.status_code == 200 else None
        r = await http.get(root + "/stats", timeout=timeout_s)
        return parse_engine_stats(r.json()) if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
