"""`fairgate bench`: arguments, the run, the report files, a short table on stdout."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from fairgate.gateway.loadgen.workloads import WORKLOADS, WorkloadSource

if TYPE_CHECKING:  # the run's modules load openai, numpy and matplotlib: only when it runs
    from fairgate.gateway.loadgen.client import Target
    from fairgate.gateway.loadgen.runner import LoadLevel, RunPlan


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bench", help="load-test OpenAI-compatible servers; HTML + JSON report")
    p.add_argument("--base-url", action="append", required=True,
                   help="server to load (repeat to compare side by side); '/v1' is added to a bare host")
    p.add_argument("--label", action="append", default=None, help="name of each --base-url in the report")
    p.add_argument("--model", action="append", required=True, help="model name (one, or one per --base-url)")
    p.add_argument("--api-key", action="append", default=None,
                   help="one per tenant (repeat for several; requests take them in turn); default $OPENAI_API_KEY")
    p.add_argument("--tenants", type=int, default=None,
                   help="N tenants named in an x-tenant header (bench-0..N-1; fairgate engine, vLLM-style fronts)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--requests", type=int, default=None, help="requests per target and load point (default 50)")
    budget.add_argument("--duration", type=float, default=None, help="seconds per target and load point")
    load = p.add_mutually_exclusive_group()
    load.add_argument("--concurrency", default=None, help="closed-loop sweep, e.g. 1,4,16 (default 1)")
    load.add_argument("--rate", default=None, help="Poisson arrival rates in requests/s, e.g. 1,2,4 or inf")
    p.add_argument("--max-concurrency", type=int, default=None, help="cap on in-flight requests with --rate")
    p.add_argument("--scenario", default="load", choices=["load", "flood"],
                   help="flood: a light tenant (the first key) at --rate alone, then beside a flooding tenant "
                        "(the second key) at --flood-factor times that rate; reports how much the light "
                        "tenant's TTFT grows (needs two tenants and --duration)")
    p.add_argument("--flood-factor", type=float, default=4.0, help="the flooding tenant's rate over the light one's")
    p.add_argument("--workload", default="chat", choices=sorted(WORKLOADS))
    p.add_argument("--scale", type=float, default=1.0, help="multiply the workload's prompt and output lengths")
    p.add_argument("--max-tokens", type=int, default=None, help="override every request's max_tokens")
    p.add_argument("--no-fit", action="store_true",
                   help="send the workload as sized; by default it is shrunk until prompt + max_tokens fits "
                        "the smallest max_model_len the targets list in /v1/models")
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--ignore-eos", action="store_true", help="send ignore_eos (vLLM, fairgate): fixed output lengths")
    p.add_argument("--extra-body", default=None, help="JSON object merged into every request body")
    p.add_argument("--header", action="append", default=[], metavar="NAME:VALUE", help="extra request header")
    p.add_argument("--slo-ttft", type=float, default=None, metavar="MS", help="goodput: TTFT objective")
    p.add_argument("--slo-itl", type=float, default=None, metavar="MS", help="goodput: mean inter-token objective")
    p.add_argument("--slo-e2e", type=float, default=None, metavar="MS", help="goodput: end-to-end objective")
    p.add_argument("--rounds", type=int, default=None,
                   help="alternating slices per load point (default 2 with several targets, else 1)")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured requests per target before the run")
    p.add_argument("--golden", default=None, help="golden set JSONL (the `fairgate eval` format) scored on each target")
    p.add_argument("--golden-api", default="completions", choices=["completions", "chat"])
    p.add_argument("--golden-max-tokens", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    p.add_argument("--out", default=None, help="report folder (default ./bench-results/<UTC time>)")
    p.add_argument("--progress", default="auto", choices=["auto", "on", "off"])


def v1_url(url: str) -> str:
    """The OpenAI client's base URL: a bare host gets '/v1'; a URL with a path is kept."""
    url = url.rstrip("/")
    return url + "/v1" if urlsplit(url).path in ("", "/") else url


def _levels(args: argparse.Namespace) -> list[LoadLevel]:
    from fairgate.gateway.loadgen.runner import LoadLevel

    if args.scenario == "flood":
        return _flood_levels(args)
    kind, text = ("rate", args.rate) if args.rate else ("concurrency", args.concurrency or "1")
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--{kind}: a comma-separated list of numbers, not {text!r}") from None
    if not values or any(v <= 0 for v in values) or (kind == "concurrency" and any(v != int(v) for v in values)):
        raise ValueError(f"--{kind}: positive {'integers' if kind == 'concurrency' else 'numbers'}")
    return [LoadLevel(kind, v) for v in values]


def _flood_levels(args: argparse.Namespace) -> list[LoadLevel]:
    """The flood scenario's two phases: the light tenant alone, then beside the flood."""
    from fairgate.gateway.loadgen.runner import LoadLevel

    try:
        rate = float(args.rate or "")
    except ValueError:
        raise ValueError("--scenario flood: one --rate, the light tenant's requests/s") from None
    if not 0 < rate < float("inf") or args.flood_factor <= 0:
        raise ValueError("--scenario flood: a finite positive --rate and --flood-factor")
    if args.duration is None:
        raise ValueError("--scenario flood: give --duration (seconds per phase)")
    if len(args.api_key or []) < 2 and (args.tenants or 0) < 2:
        raise ValueError("--scenario flood: two tenants, two --api-key values or --tenants 2")
    return [LoadLevel("alone", rate), LoadLevel("flood", rate, flood=rate * args.flood_factor)]


def _targets(args: argparse.Namespace) -> list[Target]:
    from fairgate.gateway.loadgen.client import Target

    urls, models, labels = args.base_url, args.model, args.label or []
    if len(models) not in (1, len(urls)):
        raise ValueError("--model: give one, or one per --base-url")
    if labels and len(labels) != len(urls):
        raise ValueError("--label: give one per --base-url")
    labels = labels or [urlsplit(u).netloc or u for u in urls]
    if len(set(labels)) != len(labels):
        labels = [f"{i}:{lab}" for i, lab in enumerate(labels)]
    return [Target(labels[i], v1_url(u), models[0] if len(models) == 1 else models[i]) for i, u in enumerate(urls)]


def _extra_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if args.extra_body:
        body = json.loads(args.extra_body)
        if not isinstance(body, dict):
            raise ValueError("--extra-body: a JSON object")
    if args.ignore_eos:
        body["ignore_eos"] = True
    return body


def build_plan(args: argparse.Namespace, n_targets: int) -> RunPlan:
    from fairgate.gateway.loadgen.runner import RunPlan

    if args.requests is not None and args.requests < 1 or args.duration is not None and args.duration <= 0:
        raise ValueError("--requests / --duration: positive")
    requests = args.requests if args.requests is not None or args.duration is not None else 50
    rounds = args.rounds or (2 if n_targets > 1 else 1)
    if rounds < 1 or requests is not None and requests < rounds:
        raise ValueError("--rounds: at least 1, and at most --requests")
    levels = _levels(args)
    if args.duration is not None and any(lv.value == float("inf") for lv in levels):
        raise ValueError("--rate inf sends every request at once: give --requests, not --duration")
    source = WorkloadSource(args.workload, args.seed, args.scale, args.max_tokens)
    if args.warmup < 0:
        raise ValueError("--warmup: zero or more")
    return RunPlan(levels, source, requests=requests, duration=args.duration, rounds=rounds,
                   max_concurrency=args.max_concurrency, warmup=args.warmup, seed=args.seed,
                   temperature=args.temperature, extra_body=_extra_body(args))


def _headers(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"--header: NAME:VALUE, not {pair!r}")
        out[name.strip()] = value.strip()
    return out


def run_bench(args: argparse.Namespace) -> int:
    from fairgate.gateway.loadgen.session import (
        run_session,  # the heavy part (openai, numpy, matplotlib)
    )
    from fairgate.gateway.loadgen.stats import Slo

    try:
        targets = _targets(args)
        plan = build_plan(args, len(targets))
        headers = _headers(args.header)
        golden = None
        if args.golden:
            from fairgate.backends.local.evaluation.golden import load_golden

            golden = load_golden(args.golden)
    except (ValueError, OSError) as exc:  # GoldenSetError is a ValueError
        print(f"fairgate bench: error: {exc}", file=sys.stderr)
        return 2
    keys = args.api_key or [os.environ.get("OPENAI_API_KEY", "EMPTY")]
    if args.tenants is not None and (args.tenants < 1 or len(keys) > 1 and args.tenants != len(keys)):
        print("fairgate bench: error: --tenants: positive, and equal to the number of --api-key values"
              " when there are several", file=sys.stderr)
        return 2
    slo = Slo(*(None if v is None else v / 1000 for v in (args.slo_ttft, args.slo_itl, args.slo_e2e)))
    out = Path(args.out or Path("bench-results") / dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ"))
    return run_session(targets, keys, plan, slo, out, headers=headers, golden=golden, args=args)
