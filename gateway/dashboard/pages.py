"""The dashboard's routes: the admin overview, one tenant's page, and the login forms.

    GET  /admin/dashboard                  every tenant (admin token: bearer header or session)
    GET  /admin/dashboard/tenants/{id}     one tenant, as the admin sees it
    GET  /dashboard                        the caller's own tenant (its API key: bearer or session)
    GET|POST /admin/dashboard/login, /dashboard/login;  POST .../logout

Pages are server-rendered (Jinja2, autoescaped) with inline SVG plots and no script at all,
served with a strict Content-Security-Policy. `?hours=N` sets the window (default 24). Sign-in
is throttled with the admin API (sessions.sign_in), sessions end server-side at logout
(sessions.end_session), and the forms refuse other sites' posts (origin.cross_site).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from fairgate.backends.openai_wire import WireError
from fairgate.gateway.admin.token import admin_enabled
from fairgate.gateway.dashboard import data, panels, tenant_panels
from fairgate.gateway.dashboard.advice_text import advice_items
from fairgate.gateway.dashboard.origin import cross_site
from fairgate.gateway.dashboard.sessions import (
    COOKIE,
    SessionSigner,
    Viewer,
    clear_session,
    end_session,
    open_session,
    set_session,
    sign_in,
    viewer_of,
)
from fairgate.gateway.dashboard.state import DashboardState, dashboard_state

# advice(state, window hours) -> items (policies.advice.Advice, else str, mapping or dataclass), sync or
# async: `fairgate advise` (gateway/admin/advice.py)
AdviceProvider = Callable[[DashboardState, int], Any]
log = logging.getLogger("fairgate.dashboard")
MAX_FORM_BYTES = 4096
MAX_HOURS = 24 * 90
HEADERS = {"cache-control": "no-store", "x-frame-options": "DENY", "referrer-policy": "no-referrer",
           "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                                      "frame-ancestors 'none'"}


def _hours(request: Request) -> int:
    try:
        return min(max(int(request.query_params.get("hours", "24")), 1), MAX_HOURS)
    except ValueError:
        return 24


async def _form(request: Request) -> dict[str, str]:
    """An urlencoded login form (a few fields; anything bigger is no login form)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return {}
    fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=8)
    return {k: v[0] for k, v in fields.items() if v}


class DashboardPages:
    def __init__(self, advice: AdviceProvider | None = None) -> None:
        self.advice = advice
        self.signer = SessionSigner(secrets.token_bytes(32))
        self.env = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                               autoescape=select_autoescape(["html"]))

    def _html(self, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        text = self.env.get_template(template).render(**values)
        return HTMLResponse(text, status, headers=HEADERS)

    def _unavailable(self, exc: Exception) -> HTMLResponse:
        log.warning("dashboard figures failed (%s)", type(exc).__name__, exc_info=exc)
        response = self._html("message.html", 503, back="", title="fairgate dashboard",
                              error="The dashboard cannot read its figures right now (database unavailable?); retry.")
        response.headers["retry-after"] = "5"
        return response

    def _no_tenant(self) -> HTMLResponse:
        return self._html("message.html", 404, back="/admin/dashboard", title="fairgate dashboard",
                          error="No such tenant.")

    # ------------------------------------------------------------------ login
    def _login_page(self, scope: str, status: int = 200, error: str = "") -> HTMLResponse:
        action = "/admin/dashboard/login" if scope == "admin" else "/dashboard/login"
        label = "Admin token" if scope == "admin" else "API key"
        return self._html("login.html", status, action=action, label=label, error=error, scope=scope,
                          title=f"Sign in: fairgate {'admin' if scope == 'admin' else 'tenant'} dashboard")

    def _throttled(self, scope: str, err: WireError) -> HTMLResponse:
        response = self._login_page(scope, err.status, "Too many failed sign-ins from this address; retry later.")
        response.headers.update(err.headers or {})
        return response

    def _cross_site(self, scope: str) -> HTMLResponse:
        return self._login_page(scope, 403, "A cross-site form post was refused: sign in on this site's own page.")

    async def admin_login(self, request: Request) -> Response:
        return await self._login(request, "admin")

    async def tenant_login(self, request: Request) -> Response:
        return await self._login(request, "tenant")

    async def _login(self, request: Request, scope: str) -> Response:
        """The login form (GET) or its post: a same-site post of a good token opens a session."""
        state = dashboard_state(request.app)
        if request.method == "GET":
            return self._login_page(scope)
        if cross_site(request.headers):
            return self._cross_site(scope)
        if scope == "admin" and not admin_enabled(state):
            return self._login_page("admin", 403, "The admin API is disabled: set FAIRGATE_ADMIN_TOKEN.")
        token = (await _form(request)).get("token", "").strip()
        try:
            signed = await sign_in(state, request, token, scope) if token else None
        except WireError as err:  # the throttle: this address is over its failed tries
            return self._throttled(scope, err)
        if signed is None:
            return self._login_page(scope, 401, "That is not the admin token." if scope == "admin"
                                    else "That API key is not valid.")
        viewer, key_id = signed
        try:
            cookie = await open_session(state, self.signer, viewer, key_id)
        except Exception as exc:  # the session cannot be kept: no cookie that could not be ended
            return self._unavailable(exc)
        response = RedirectResponse("/admin/dashboard" if scope == "admin" else "/dashboard", 303, headers=HEADERS)
        set_session(request, response, cookie)
        return response

    async def logout(self, request: Request) -> Response:
        admin_view = request.url.path.startswith("/admin/")
        if cross_site(request.headers):
            return self._cross_site("admin" if admin_view else "tenant")
        try:
            await end_session(dashboard_state(request.app), self.signer, request.cookies.get(COOKIE))
        except Exception as exc:  # not ended: say so rather than pretend (the cookie would still work)
            return self._unavailable(exc)
        response = RedirectResponse("/admin/dashboard/login" if admin_view else "/dashboard/login", 303,
                                    headers=HEADERS)
        clear_session(response)
        return response

    # ------------------------------------------------------------------ pages
    async def _viewer_or_login(self, request: Request, scope: str) -> Viewer | Response:
        try:
            viewer = await viewer_of(request, self.signer)
        except WireError as err:  # a bearer token from an address over its failed tries
            return self._throttled(scope, err)
        except Exception as exc:  # the session or key rows cannot be read (database away)
            return self._unavailable(exc)
        if viewer is None:
            if "authorization" in request.headers:
                return self._login_page(scope, 401, "That token is not valid here.")
            return RedirectResponse(f"{'/admin' if scope == 'admin' else ''}/dashboard/login", 303, headers=HEADERS)
        return viewer

    async def admin_page(self, request: Request) -> Response:
        viewer = await self._viewer_or_login(request, "admin")
        if not isinstance(viewer, Viewer):
            return viewer
        if not viewer.admin:
            return self._login_page("admin", 403, "This page needs the admin token; tenants see /dashboard.")
        hours = _hours(request)
        state = dashboard_state(request.app)
        try:
            figures = await asyncio.to_thread(self._admin_figures, state, hours)
        except Exception as exc:  # the database away: say so, as a page, not a bare 500
            return self._unavailable(exc)
        advice = await self._advice(state, hours)
        return self._html("dashboard.html", title="fairgate dashboard", hours=hours, admin=True,
                          panels=figures, advice=advice, logout="/admin/dashboard/logout")

    async def tenant_page(self, request: Request) -> Response:
        admin_view = request.url.path.startswith("/admin/")
        viewer = await self._viewer_or_login(request, "admin" if admin_view else "tenant")
        if not isinstance(viewer, Viewer):
            return viewer
        if admin_view and not viewer.admin:
            return self._login_page("admin", 403, "This page needs the admin token.")
        if not admin_view and viewer.admin:
            return RedirectResponse("/admin/dashboard", 303, headers=HEADERS)
        tenant_id = request.path_params["tenant_id"] if admin_view else viewer.tenant_id
        if not tenant_id or "\x00" in tenant_id or len(tenant_id) > 64:  # no such id: the column is 32 wide
            return self._no_tenant()
        hours = _hours(request)
        try:
            figures, name = await asyncio.to_thread(self._tenant_figures, dashboard_state(request.app), tenant_id, hours,
                                                    not admin_view)
        except Exception as exc:
            return self._unavailable(exc)
        if name is None:
            return self._no_tenant()
        logout = "/admin/dashboard/logout" if admin_view else "/dashboard/logout"
        return self._html("dashboard.html", title=f"fairgate: tenant {name}", hours=hours, admin=admin_view,
                          panels=figures, advice=None, logout=logout, tenant=name)

    # ------------------------------------------------------------------ figures (worker thread)
    def _admin_figures(self, state: DashboardState, hours: int) -> list[panels.Panel]:
        start, end, group_by = data.window(hours)
        reg = state.metrics.registry
        with state.sessions() as s:
            names = data.tenant_names(s)
            usage = data.usage(s, None, start, end, group_by)
            quota = data.quota_use(s, None)
            by_backend = data.requests_by_backend(s, None, start, end)
            decisions = data.routing_decisions(s, start, end)
        usage_panel = panels.usage_panel(usage, names)
        usage_panel.links = [(names.get(t, t), f"/admin/dashboard/tenants/{quote(t, safe='')}") for t in usage.totals]
        return [usage_panel, panels.latency_panel(reg), panels.cache_panel(reg, None, names),
                panels.quota_panel(quota, names), panels.routing_panel(by_backend, state.backends, decisions),
                panels.engine_panel(reg)]

    def _tenant_figures(self, state: DashboardState, tenant_id: str, hours: int, own: bool
                        ) -> tuple[list[panels.Panel], str | None]:
        """One tenant's panels; `own`: the tenant's own page (its wording: "your"), else the admin's."""
        start, end, group_by = data.window(hours)
        with state.sessions() as s:
            names = data.tenant_names(s)
            if tenant_id not in names:
                return [], None
            usage = data.usage(s, tenant_id, start, end, group_by)
            quota = data.quota_use(s, tenant_id)
            by_backend = data.requests_by_backend(s, tenant_id, start, end)
            requests = data.tenant_requests(s, tenant_id, start, end)
        whose = "Your" if own else f"{names[tenant_id]}'s"
        usage_panel = panels.usage_panel(usage, names, one_tenant=True)
        usage_panel.title = f"{whose} usage and cost, by {usage.group_by}"
        quota_panel = panels.quota_panel(quota, names)
        quota_panel.title = f"{whose} limits used (today / this month, UTC)"
        if not quota:
            quota_panel.note = f"{'You have' if own else names[tenant_id] + ' has'} no daily or monthly limit."
        routing = panels.routing_panel(by_backend, state.backends, {})
        routing.title, routing.plots = f"Where {whose.lower() if own else whose} requests ran", routing.plots[:1]
        return ([usage_panel, tenant_panels.latency_panel(requests, whose), tenant_panels.cache_panel(requests, whose),
                 quota_panel, routing], names[tenant_id])

    async def _advice(self, state: DashboardState, hours: int) -> dict[str, Any]:
        """The advice panel: items from the provider, or why there are none."""
        if self.advice is None:
            return {"items": [], "note": "No advisor is configured (`fairgate advise` fills this panel)."}
        try:
            result = self.advice(state, hours)
            if inspect.isawaitable(result):
                result = await result
            return {"items": advice_items(list(result or [])), "note": ""}
        except Exception as exc:  # an advisor bug must not take the dashboard down
            log.exception("dashboard advice provider failed")
            return {"items": [], "note": f"The advisor failed ({type(exc).__name__}); see the gateway log."}


def routes(advice: AdviceProvider | None = None) -> list[Route]:
    """The dashboard's routes; `advice` fills the advice panel (see AdviceProvider)."""
    pages = DashboardPages(advice)
    return [
        Route("/admin/dashboard", pages.admin_page, methods=["GET"]),
        Route("/admin/dashboard/login", pages.admin_login, methods=["GET", "POST"]),
        Route("/admin/dashboard/logout", pages.logout, methods=["POST"]),
        Route("/admin/dashboard/tenants/{tenant_id}", pages.tenant_page, methods=["GET"]),
        Route("/dashboard", pages.tenant_page, methods=["GET"]),
        Route("/dashboard/login", pages.tenant_login, methods=["GET", "POST"]),
        Route("/dashboard/logout", pages.logout, methods=["POST"]),
    ]

