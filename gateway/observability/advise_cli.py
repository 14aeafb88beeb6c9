"""`fairgate advise`: the bottleneck of each route and model and the lever to pull, as text or
JSON.

Either a database (`--database URL`, default the settings' database) read directly, with
metrics scrapes from `--metrics FILE` / `--metrics-url URL` (engine servers, a gateway) and
optionally `--metrics-before FILE` (the same scrapes at the window's start, for deltas); or a
running gateway (`--gateway-url URL` with the admin token), whose `GET /admin/advice` does the
same over its own database and metrics.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any


def add_command(sub: Any) -> None:
    p = sub.add_parser("advise", help="name each route's bottleneck and the lever to pull next")
    p.add_argument("--window", default="24h", help="how far back to read usage rows: 30m, 24h, 7d")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--database", default=None, help="database URL (default: FAIRGATE_DATABASE_URL / settings)")
    src.add_argument("--gateway-url", default=None, help="a running gateway: ask its GET /admin/advice")
    p.add_argument("--admin-token", default=None, help="with --gateway-url (env FAIRGATE_ADMIN_TOKEN)")
    p.add_argument("--metrics", action="append", default=[], metavar="FILE", help="a /metrics scrape (repeat)")
    p.add_argument("--metrics-url", action="append", default=[], metavar="URL",
                   help="scrape URL/metrics now (engine servers; repeat)")
    p.add_argument("--metrics-token", default=None, help="bearer token for --metrics-url (env FAIRGATE_METRICS_TOKEN)")
    p.add_argument("--metrics-before", action="append", default=[], metavar="FILE",
                   help="the same scrapes at the window's start: counters become deltas")
    p.add_argument("--startup-s", type=float, default=None, help="engine start-up time (default: its gauge, or 60)")
    p.add_argument("--replica-tokens-per-s", type=float, default=None,
                   help="one replica's capacity (default: measured, tokens over engine busy time)")
    p.add_argument("--replicas", type=int, default=1, help="replicas running now, per backend")
    p.add_argument("--config", default=None, help="settings file (for the default database)")
    p.add_argument("--json", action="store_true", help="print the advice as JSON")


def _scrape(url: str, token: str | None) -> str:
    import httpx

    headers = {"authorization": f"Bearer {token}"} if token else {}
    r = httpx.get(url.rstrip("/") + "/metrics", headers=headers, timeout=10)
    r.raise_for_status()
    return r.text


def _from_gateway(args: argparse.Namespace) -> list[dict[str, Any]]:
    import httpx

    token = args.admin_token or os.environ.get("FAIRGATE_ADMIN_TOKEN", "")
    r = httpx.get(args.gateway_url.rstrip("/") + "/admin/advice", params={"window": args.window},
                  headers={"authorization": f"Bearer {token}"}, timeout=60)
    if r.status_code != 200:
        raise RuntimeError(f"{r.status_code} from the gateway: {r.text[:300]}")
    data: list[dict[str, Any]] = r.json()["data"]
    return data


def _from_database(args: argparse.Namespace) -> list[dict[str, Any]]:
    from fairgate.gateway.observability.advise import (
        AdviseOptions,
        advice_json,
        advise_from,
        parse_window,
    )
    from fairgate.gateway.settings import load_settings
    from fairgate.gateway.store.db import make_engine

    url = args.database or load_settings(args.config).database_url
    token = args.metrics_token or os.environ.get("FAIRGATE_METRICS_TOKEN")
    after = [Path(f).read_text() for f in args.metrics] + [_scrape(u, token) for u in args.metrics_url]
    before = [Path(f).read_text() for f in args.metrics_before]
    opts = AdviseOptions(parse_window(args.window), args.startup_s, args.replica_tokens_per_s, args.replicas)
    engine = make_engine(url)
    try:
        return advice_json(advise_from(engine, after, before, opts))
    finally:
        engine.dispose()


def format_advice(items: list[dict[str, Any]]) -> str:
    """One block per (route, model), then one per engine (route "*": what holds for all its
    routes, said once)."""
    lines: list[str] = []
    last = None
    for a in items:
        head = (a["route"], a["model"])
        if head != last:
            where = f"engine {a['model']} (all its routes)" if a["route"] == "*" else f"{a['route']}  model={a['model']}"
            lines.append("\n" + where)
            last = head
        lever = f"  -> {a['lever']}" if a["lever"] else ""
        lines.append(f"  [{a['finding']}] {a['message']}{lever}")
    levers = sorted({a["lever"] for a in items if a["lever"]})
    lines.append("\nlevers to pull: " + (", ".join(levers) if levers else "none"))
    return "\n".join(lines).lstrip("\n")


def run_advise(args: argparse.Namespace) -> int:
    import httpx  # imported here: `fairgate --help` stays fast

    try:
        items = _from_gateway(args) if args.gateway_url else _from_database(args)
    except (ValueError, RuntimeError, OSError, httpx.HTTPError) as exc:
        print(f"fairgate advise: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(items, indent=2) if args.json else format_advice(items))
    return 0
