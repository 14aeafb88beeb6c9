"""Admin REST for usage and cost (Bearer admin token):

    GET   /admin/usage?from=&to=&tenant=&group_by=hour|day|model|backend|priority&format=json|csv
          rows per tenant and group, totals per group, and (json) the cost of every backend;
          each row and group carries `cost` (real cost: see gateway/billing/cost.py) and
          `cost_per_million_tokens`; (json) `refusals`: requests with no answer per tenant and
          reason; `view=rows|groups|backends` picks what the CSV holds
    GET   /admin/usage/costs?from=&to=&format=json|csv   the cost of every backend over the window:
          hours paid, idle share, cost per 1M generated / total tokens, each tenant's share
    PATCH /admin/prices/{name}   a backend's or pool's prices: any of input_cost_per_mtok,
          output_cost_per_mtok, hourly_cost_usd (null: no hourly price)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fairgate.backends.openai_wire import WireError
from fairgate.gateway.admin.http import admin_route
from fairgate.gateway.admin.routes import audit, body_of, change
from fairgate.gateway.admin.state import admin_state
from fairgate.gateway.billing.cost_sources import costed_report
from fairgate.gateway.billing.reports import BACKEND_COLUMNS, COLUMNS, GROUPS, parse_time, to_csv
from fairgate.gateway.config.declarative import PriceDecl
from fairgate.gateway.store.pool_tables import PoolRow
from fairgate.gateway.store.tables import BackendRow


def window_of(request: Request) -> tuple[datetime | None, datetime | None]:
    q = request.query_params
    start, end = parse_time(q.get("from"), "from"), parse_time(q.get("to"), "to")
    if start is not None and end is not None and end <= start:
        raise WireError(400, "`to` must be later than `from`", "invalid_value", "to")
    return start, end


def format_of(request: Request) -> str:
    fmt = request.query_params.get("format", "json")
    if fmt not in ("json", "csv"):
        raise WireError(400, "`format` must be json or csv", "invalid_value", "format")
    return fmt


@admin_route
async def admin_usage(request: Request) -> Any:
    q = request.query_params
    start, end = window_of(request)
    group_by, fmt = q.get("group_by", "day"), format_of(request)
    if group_by not in GROUPS:
        raise WireError(400, f"`group_by` must be one of {', '.join(GROUPS)}", "invalid_value", "group_by")
    view = q.get("view", "rows")
    if view not in ("rows", "groups", "backends"):
        raise WireError(400, "`view` must be rows, groups or backends", "invalid_value", "view")
    report = await costed_report(admin_state(request.app), q.get("tenant") or None, start, end, group_by)
    if fmt == "csv":
        if view == "backends":
            return Response(to_csv(report.backend_rows(), BACKEND_COLUMNS), media_type="text/csv")
        return Response(to_csv(report.rows if view == "rows" else report.groups, COLUMNS if view == "rows"
                               else COLUMNS[1:]), media_type="text/csv")
    return {"object": "list", "group_by": group_by, "window": report.window(), "data": report.rows,
            "groups": report.groups, "backends": report.backend_rows(), "refusals": report.refusals}


@admin_route
async def admin_costs(request: Request) -> Any:
    start, end = window_of(request)
    fmt = format_of(request)
    report = await costed_report(admin_state(request.app), None, start, end, "backend")
    rows = report.backend_rows()
    if fmt == "csv":
        return Response(to_csv(rows, BACKEND_COLUMNS), media_type="text/csv")
    return {"object": "list", "window": report.window(), "data": rows}


@admin_route
async def set_prices(request: Request) -> Any:
    body = await body_of(request, PriceDecl)
    fields = body.model_dump(exclude_unset=True)
    name = request.path_params["name"]

    def run(s: Session) -> dict[str, Any]:
        row: Any = (s.scalars(select(BackendRow).where(BackendRow.name == name)).first()
                    or s.scalars(select(PoolRow).where(PoolRow.name == name)).first())
        if row is None:
            raise WireError(404, f"No backend or pool {name!r}.", "not_found")
        for f, v in fields.items():
            setattr(row, f, v)
        audit(s, "prices.set", "backend" if isinstance(row, BackendRow) else "pool", name, fields)
        return {"object": "prices", "name": name, **{f: getattr(row, f) for f in PriceDecl.model_fields}}

    return await change(request, run)


def routes() -> list[Route]:
    return [
        Route("/admin/usage", admin_usage, methods=["GET"]),
        Route("/admin/usage/costs", admin_costs, methods=["GET"]),
        Route("/admin/prices/{name}", set_prices, methods=["PATCH", "PUT"]),
    ]
