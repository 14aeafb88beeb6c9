"""`GET /admin/usage/requests`: the per-request usage log (Bearer admin token), one entry per
stored usage row, newest first, paginated the way OpenAI's list endpoints are.

    ?limit=1..1000 (100)   &after=<id of the last entry seen>   &order=desc|asc
    filters: tenant, key (key prefix), backend, model, priority, status, http_status, from, to

The answer: `{"object": "list", "data": [...], "first_id", "last_id", "has_more", "next"}`,
`next` being the URL of the following page (null on the last). Paging is by the (created_at,
id) position of `after`, so rows written meanwhile never shift a page. An entry's `cost` is
what the row recorded at list prices; hardware cost is shared out per window in /admin/usage.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.routing import Route

from fairgate.backends.openai_wire import WireError
from fairgate.gateway.admin.costs import window_of
from fairgate.gateway.admin.http import admin_route
from fairgate.gateway.admin.routes import in_tx
from fairgate.gateway.store.tables import UsageRecord

FILTERS = {"tenant": UsageRecord.tenant_id, "key": UsageRecord.key_prefix, "backend": UsageRecord.backend,
           "model": UsageRecord.model, "priority": UsageRecord.priority, "status": UsageRecord.status}
STATUSES = ("finished", "cancelled", "disconnected", "failed")
PARAMS = frozenset({*FILTERS, "http_status", "from", "to", "limit", "after", "order"})
MAX_LIMIT = 1000


def entry(r: UsageRecord) -> dict[str, Any]:
    return {"id": r.request_id, "object": "usage.request", "created_at": r.created_at.isoformat() + "Z",
            "tenant_id": r.tenant_id, "key_prefix": r.key_prefix, "model": r.model, "backend": r.backend,
            "priority": r.priority, "status": r.status, "http_status": r.http_status, "error_code": r.error_code,
            "stream": r.stream,
            "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
            "total_tokens": r.total_tokens, "cached_tokens": r.cached_tokens, "usage_estimated": r.usage_estimated, "cost": r.cost,
            "ttft_ms": r.ttft_ms, "latency_ms": r.latency_ms}


def _int(request: Request, name: str, default: int | None, lo: int, hi: int) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise WireError(400, f"`{name}` must be an integer.", "invalid_value", name) from None
    if not lo <= value <= hi:
        raise WireError(400, f"`{name}` must be between {lo} and {hi}.", "invalid_value", name)
    return value


def _query(request: Request) -> tuple[Any, int, str, str | None]:
    """The filtered select (no paging yet), limit, order and `after`; 400 on a bad parameter."""
    q = request.query_params
    for name in q:
        if name not in PARAMS:
            raise WireError(400, f"Unknown parameter `{name}`.", "unknown_parameter", name)
    order = q.get("order", "desc")
    if order not in ("asc", "desc"):
        raise WireError(400, "`order` must be asc or desc.", "invalid_value", "order")
    if q.get("status") and q["status"] not in STATUSES:
        raise WireError(400, f"`status` must be one of {', '.join(STATUSES)}.", "invalid_value", "status")
    limit = _int(request, "limit", 100, 1, MAX_LIMIT)
    assert limit is not None
    start, end = window_of(request)
    sel = select(UsageRecord)
    for name, col in FILTERS.items():
        if q.get(name):
            sel = sel.where(col == q[name])
    code = _int(request, "http_status", None, 100, 599)
    if code is not None:
        sel = sel.where(UsageRecord.http_status == code)
    if start is not None:
        sel = sel.where(UsageRecord.created_at >= start)
    if end is not None:
        sel = sel.where(UsageRecord.created_at < end)
    return sel, limit, order, q.get("after") or None


def _page(s: Session, sel: Any, limit: int, order: str, after: str | None) -> tuple[list[UsageRecord], bool]:
    at, rid = UsageRecord.created_at, UsageRecord.request_id
    if after is not None:
        mark = s.get(UsageRecord, after)
        if mark is None:
            raise WireError(400, f"No usage entry with id {after!r} (`after`).", "invalid_value", "after")
        if order == "desc":
            sel = sel.where(or_(at < mark.created_at, and_(at == mark.created_at, rid < mark.request_id)))
        else:
            sel = sel.where(or_(at > mark.created_at, and_(at == mark.created_at, rid > mark.request_id)))
    sel = sel.order_by(at.desc(), rid.desc()) if order == "desc" else sel.order_by(at, rid)
    rows = list(s.scalars(sel.limit(limit + 1)))
    return rows[:limit], len(rows) > limit


@admin_route
async def usage_requests(request: Request) -> Any:
    sel, limit, order, after = _query(request)

    def run(s: Session) -> tuple[list[dict[str, Any]], bool]:
        page, more = _page(s, sel, limit, order, after)
        return [entry(r) for r in page], more

    rows, more = await in_tx(request, run)
    last = rows[-1]["id"] if rows else None
    nxt = str(request.url.include_query_params(after=last)) if more and last else None
    return {"object": "list", "data": rows, "first_id": rows[0]["id"] if rows else None, "last_id": last,
            "has_more": more, "next": nxt}


def routes() -> list[Route]:
    return [Route("/admin/usage/requests", usage_requests, methods=["GET"])]
