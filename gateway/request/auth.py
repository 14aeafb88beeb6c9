"""Who is calling: API-key hash → `Principal` (tenant, priority bounds, limits), cached.

Every cached principal carries the config version it was loaded under. The quota store
compares that version inside the same atomic call that reserves quota, so a key revoked (or a
limit changed) through any replica is refused at once on every replica: the stale principal is
reloaded from the database before anything is reserved.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, sessionmaker

from fairgate.gateway.config.bus import ConfigBus
from fairgate.gateway.quota import ScopeLimits
from fairgate.gateway.request.keys import hash_key
from fairgate.gateway.store.tables import ApiKey, QuotaPolicy, Tenant
from fairgate.scheduler.request import PRIORITY_CLASSES, PRIORITY_RANKS

# The token windows of ScopeLimits.as_ints(), by name: where each sits in the tuple.
TOKEN_WINDOWS = {"tokens_per_minute": 1, "daily_tokens": 3, "monthly_tokens": 4}
NEGATIVE_TTL_S = 2.0  # unknown keys: spare the database from a flood of bad tokens
MAX_NEGATIVE = 10_000


@dataclass(slots=True)
class Principal:
    key_id: str
    prefix: str
    tenant_id: str
    tenant_name: str
    weight: float
    data_residency: str
    default_priority: str
    priority_ceiling: str
    scopes: list[ScopeLimits]
    max_tokens_per_request: int | None
    allowed_models: frozenset[str] | None  # None: every model
    version: int
    cache_salt: str = ""  # the engine's prefix-cache salt: the tenant id, or "group:<name>"
    max_tokens_set_by: str = "key"  # whose max_tokens_per_request applies: "key" or "tenant" (the message)
    _token_ceiling: int | None = field(default=None, init=False, repr=False, compare=False)

    def resolve_priority(self, requested: str | None) -> str:
        """The key's default, or the requested class capped at the key's ceiling.

        Raises ValueError for an unknown class name.
        """
        ceiling = PRIORITY_RANKS[self.priority_ceiling]
        if requested is None:
            return PRIORITY_CLASSES[max(PRIORITY_RANKS[self.default_priority], ceiling)]
        rank = PRIORITY_RANKS.get(requested.strip().lower())
        if rank is None:
            raise ValueError(f"unknown priority {requested!r}; one of {', '.join(PRIORITY_CLASSES)}")
        return PRIORITY_CLASSES[max(rank, ceiling)]

    def token_ceiling(self) -> int:
        """The smallest token limit of any scope's window (per minute, day, month); -1 when none
        is limited. Computed once: an admin change builds a new principal."""
        if self._token_ceiling is None:
            limits = [ints[at] for ints in (scope.as_ints() for scope in self.scopes) for at in TOKEN_WINDOWS.values()]
            self._token_ceiling = min((v for v in limits if v >= 0), default=-1)
        return self._token_ceiling

    def may_use(self, model: str) -> bool:
        return self.allowed_models is None or model in self.allowed_models


def _limits(scope: str, policy: QuotaPolicy | None) -> ScopeLimits:
    if policy is None:
        return ScopeLimits(scope)
    return ScopeLimits(scope, policy.requests_per_minute, policy.tokens_per_minute,
                       policy.max_concurrent, policy.daily_tokens, policy.monthly_tokens,
                       policy.monthly_cost)


def load_principal(session: Session, key_hash: str, version: int) -> Principal | None:
    """The active principal for a key hash, or None (unknown, revoked, or tenant disabled)."""
    row = session.execute(
        select(ApiKey, Tenant).join(Tenant, Tenant.id == ApiKey.tenant_id).where(ApiKey.key_hash == key_hash)
    ).first()
    if row is None:
        return None
    key, tenant = row
    if key.revoked_at is not None or tenant.disabled:
        return None
    policies = session.scalars(select(QuotaPolicy).where(
        QuotaPolicy.tenant_id == tenant.id,
        or_(QuotaPolicy.key_id.is_(None), QuotaPolicy.key_id == key.id))).all()
    t_pol = next((p for p in policies if p.key_id is None), None)
    k_pol = next((p for p in policies if p.key_id == key.id), None)
    per_req = [(p.max_tokens_per_request, who) for p, who in ((k_pol, "key"), (t_pol, "tenant"))
               if p and p.max_tokens_per_request]
    allowed: frozenset[str] | None = None
    for p in (t_pol, k_pol):
        if p is not None and p.allowed_models is not None:
            allowed = frozenset(p.allowed_models) if allowed is None else allowed & set(p.allowed_models)
    ceiling = key.priority_ceiling or tenant.priority_ceiling
    # a key may narrow its tenant's ceiling, never widen it
    ceiling = PRIORITY_CLASSES[max(PRIORITY_RANKS[ceiling], PRIORITY_RANKS[tenant.priority_ceiling])]
    return Principal(
        key_id=key.id, prefix=key.prefix, tenant_id=tenant.id, tenant_name=tenant.name,
        weight=tenant.weight, data_residency=tenant.data_residency,
        default_priority=key.default_priority or tenant.default_priority, priority_ceiling=ceiling,
        scopes=[_limits(f"t:{tenant.id}", t_pol), _limits(f"k:{key.id}", k_pol)],
        max_tokens_per_request=min(per_req)[0] if per_req else None,
        max_tokens_set_by=min(per_req)[1] if per_req else "key",
        allowed_models=allowed, version=version,
        cache_salt=f"group:{tenant.prefix_cache_group}" if tenant.prefix_cache_group else tenant.id)


class KeyCache:
    def __init__(self, sessions: sessionmaker[Session], bus: ConfigBus) -> None:
        self._sessions = sessions
        self._bus = bus
        self._entries: dict[str, Principal] = {}
        self._unknown: dict[str, float] = {}

    def cached(self, token: str) -> Principal | None:
        """The principal this replica already holds for `token` (no database, no store)."""
        return self._entries.get(hash_key(token))

    async def authenticate(self, token: str) -> Principal | None:
        digest = hash_key(token)
        principal = self._entries.get(digest)
        if principal is not None:
            return principal
        seen = self._unknown.get(digest)
        if seen is not None and time.monotonic() - seen < NEGATIVE_TTL_S:
            return None
        return await self.reload(token)

    async def reload(self, token: str) -> Principal | None:
        """Load from the database; read the version first so a racing change marks us stale."""
        digest = hash_key(token)
        version = await self._bus.version()

        def load() -> Principal | None:
            with self._sessions() as session:
                return load_principal(session, digest, version)

        principal = await asyncio.to_thread(load)
        if principal is None:
            self._entries.pop(digest, None)
            if len(self._unknown) >= MAX_NEGATIVE:
                self._unknown.clear()
            self._unknown[digest] = time.monotonic()
        else:
            self._entries[digest] = principal
            self._unknown.pop(digest, None)
        return principal

    async def fresh(self, token: str) -> Principal | None:
        """Authenticate and make sure the entry matches the current version (one store read);
        for routes that reserve nothing, e.g. /v1/models and /v1/usage."""
        principal = await self.authenticate(token)
        if principal is not None and principal.version != await self._bus.version():
            principal = await self.reload(token)
        return principal

    def clear(self) -> None:
        self._entries.clear()
        self._unknown.clear()
