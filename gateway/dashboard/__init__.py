"""The admin dashboard and the tenants' own usage pages, server-rendered with inline SVG plots.

`routes(advice=...)` gives the Starlette routes; `advice` (optional) fills the advice panel.
"""

from __future__ import annotations

from fairgate.gateway.dashboard.pages import AdviceProvider, routes

__all__ = ["AdviceProvider", "routes"]
