"""Push tenant fairness weights into every local engine the gateway can reach.

Called at startup and after every admin change to a tenant or backend. In-process engines get
a direct `set_fairness`; engine servers (backends of kind "local") get
`PUT <root>/control/fairness` with the shared control secret (`FAIRGATE_CONTROL_SECRET`).
A `FairnessSync` task re-reads the weights every few seconds and re-pushes to any engine
whose weights differ, so an engine that restarted (or was unreachable during a push) gets
the current weights as soon as it is back.

Budgets. A tenant near a daily or monthly budget is pushed a lower weight (the rule lives in
policies/budget_weights.py); the sync task notices the crossing within one interval.

Versions. Engines drop a push older than what they hold, so a slow push cannot undo a newer
one. Versions are wall-clock microseconds, so they keep growing across gateway restarts and
replicas; when an engine holds a higher version (another replica's clock runs ahead) and
different weights, the push is retried just above the engine's version.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

import httpx
from sqlalchemy import select

from fairgate.gateway.config.pools_store import local_replica_urls
from fairgate.gateway.quota import COST_UNIT, QuotaStore
from fairgate.gateway.store.tables import BackendRow, QuotaPolicy, Tenant
from fairgate.policies.budget_weights import budget_scaled, used_fraction

if TYPE_CHECKING:
    from fairgate.backends.local.serving.backend import LocalBackend
    from fairgate.gateway.config.state import ConfigState

log = logging.getLogger("fairgate.fairness")
PUSH_TIMEOUT_S = 2.0


def control_url(base_url: str) -> str:
    """`http://h:p/v1` (the backend's OpenAI base) -> `http://h:p/control/fairness`."""
    root = base_url.rstrip("/")
    if root.endswith("/v1"):
        root = root[:-3]
    return root + "/control/fairness"


def _next_version(app_state: ConfigState) -> int:
    version = max(time.time_ns() // 1000, app_state.fairness_version + 1)
    app_state.fairness_version = version
    return version


async def budget_used(quota: QuotaStore, budgets: dict[str, dict[str, float | None]]) -> dict[str, float]:
    """Per tenant, the largest used fraction of its daily/monthly budgets (from the store)."""
    return {tenant: used_fraction(await quota.counters(f"t:{tenant}"), limits, COST_UNIT)
            for tenant, limits in budgets.items()}


async def _load(app_state: ConfigState) -> tuple[dict[str, float], list[str]]:
    """Every enabled tenant's weight (keyed by tenant id, the engine's tenant name), lowered
    near its budget, and the control URLs of the enabled engine servers."""

    def run() -> tuple[dict[str, float], dict[str, dict[str, float | None]], list[str]]:
        with app_state.sessions() as s:
            rows = s.execute(select(Tenant.id, Tenant.weight).where(Tenant.disabled.is_(False)))
            weights = {tid: float(w) for tid, w in rows}
            budgets = {
                p.tenant_id: limits
                for p in s.scalars(select(QuotaPolicy).where(QuotaPolicy.key_id.is_(None)))
                if p.tenant_id in weights and any((limits := _budget_limits(p)).values())
            }
            local = s.scalars(
                select(BackendRow.base_url).where(
                    BackendRow.enabled.is_(True), BackendRow.kind == "local"
                )
            )
            urls = [*local, *local_replica_urls(s)]  # every replica of a local pool gets them too
            return weights, budgets, sorted({control_url(u) for u in urls})

    weights, budgets, urls = await asyncio.to_thread(run)
    if budgets:
        try:
            weights = budget_scaled(weights, await budget_used(app_state.quota, budgets))
        except Exception as exc:  # noqa: BLE001 - Redis blinked: push the plain weights
            log.warning("budget check for fairness weights failed (%s)", type(exc).__name__)
    return weights, urls


def _budget_limits(p: QuotaPolicy) -> dict[str, float | None]:
    return {"daily_tokens": p.daily_tokens, "monthly_tokens": p.monthly_tokens, "monthly_cost": p.monthly_cost}


def _headers(app_state: ConfigState) -> dict[str, str]:
    secret = app_state.settings.control_secret
    return {"x-control-secret": secret} if secret else {}


async def _put(app_state: ConfigState, url: str, weights: dict[str, float], version: int) -> bool:
    """PUT the weights; True when the engine holds them afterwards."""
    client: httpx.AsyncClient = app_state.http
    body = {"weights": weights, "version": version}
    try:
        for _ in range(2):
            r = await client.put(url, json=body, headers=_headers(app_state), timeout=PUSH_TIMEOUT_S)
            if r.status_code in (401, 403):
                log.warning("fairness push to %s answered %s: the engine wants the control secret; set the same "
                            "value as FAIRGATE_CONTROL_SECRET here and --control-secret on the engine", url,
                            r.status_code)
            elif r.status_code != 200:
                log.warning("fairness push to %s answered %s", url, r.status_code)
                return False
            held = r.json()
            if held.get("weights") == weights:
                return True
            # stale by the engine's clock: go just above what it holds
            body["version"] = int(held.get("version") or 0) + 1
        return False
    except (httpx.HTTPError, ValueError) as exc:
        log.warning("fairness push to %s failed: %s", url, type(exc).__name__)
        return False


def _set_in_process(backend: LocalBackend, weights: dict[str, float], version: int) -> None:
    engine = backend.engine
    if not engine.set_fairness(weights, version):
        engine.set_fairness(weights, (engine.fairness_version or 0) + 1)


async def push_weights(app_state: ConfigState) -> dict[str, float]:
    """Hand the current weights to every engine; returns the map. Never raises for an engine
    that is down: the sync task retries it."""
    weights, urls = await _load(app_state)
    version = _next_version(app_state)
    app_state.fairness_weights = weights
    if app_state.embedded is not None:  # the one in-process engine; the others are servers
        _set_in_process(app_state.embedded, weights, version)
    await asyncio.gather(*(_put(app_state, url, weights, version) for url in urls))
    return weights


class FairnessSync:
    """Re-push to engines whose weights differ from the database's, every `interval_s`."""

    def __init__(self, app_state: ConfigState, interval_s: float = 5.0) -> None:
        self.state = app_state
        self.interval_s = interval_s
        self.pushes = 0  # re-pushes made (for tests and logs)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> FairnessSync:
        self._task = asyncio.create_task(self._loop(), name="fairgate-fairness-sync")
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def reconcile_once(self) -> int:
        """Compare every engine's weights with the database; push where they differ."""
        weights, urls = await _load(self.state)
        stale: list[str] = []
        for url in urls:
            try:
                r = await self.state.http.get(url, headers=_headers(self.state), timeout=PUSH_TIMEOUT_S)
                if r.status_code == 200 and r.json().get("weights") != weights:
                    stale.append(url)
            except (httpx.HTTPError, ValueError):
                pass  # still down: try again next round
        embedded = self.state.embedded
        in_process = [embedded] if embedded is not None and embedded.engine.fairness_weights != weights else []
        if not stale and not in_process:
            return 0
        version = _next_version(self.state)
        self.state.fairness_weights = weights
        for backend in in_process:
            _set_in_process(backend, weights, version)
        done = await asyncio.gather(*(_put(self.state, u, weights, version) for u in stale))
        self.pushes += sum(done) + len(in_process)
        return sum(done) + len(in_process)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.reconcile_once()
            except Exception:  # noqa: BLE001 - a database hiccup must not end the sync
                log.exception("fairness sync round failed")
