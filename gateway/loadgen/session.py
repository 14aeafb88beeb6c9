"""One `fairgate bench` session: run the load (with a progress bar), score the golden set on
each target, gather the figures, write the report, print a short table."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

import openai
from tqdm import tqdm

from fairgate.backends.local.evaluation.golden import GoldenItem
from fairgate.gateway.loadgen.accuracy import score_golden
from fairgate.gateway.loadgen.client import Target
from fairgate.gateway.loadgen.fit import fit_workload
from fairgate.gateway.loadgen.flood import flood_figures, print_flood
from fairgate.gateway.loadgen.report import SCHEMA, write_report
from fairgate.gateway.loadgen.runner import LoadRunner, RunOutcome, RunPlan
from fairgate.gateway.loadgen.stats import Slo, target_figures


def _progress(plan: RunPlan, n_targets: int, mode: str) -> tqdm:
    total = plan.requests * len(plan.levels) * n_targets if plan.requests else None
    disable = {"on": False, "off": True}.get(mode, not sys.stderr.isatty())
    return tqdm(total=total, unit="req", desc="bench", disable=disable, file=sys.stderr, dynamic_ncols=True)


async def _golden(targets: list[Target], key: str, items: list[GoldenItem], args: argparse.Namespace,
                  headers: dict[str, str]) -> dict[str, dict[str, Any]]:
    scores = {}
    for target in targets:
        async with openai.AsyncOpenAI(base_url=target.base_url, api_key=key, max_retries=0,
                                      timeout=args.timeout, default_headers=headers or None) as client:
            scores[target.label] = await score_golden(client, target, items, args.golden_api,
                                                      args.golden_max_tokens)
    return scores


async def _fit(targets: list[Target], key: str, plan: RunPlan, headers: dict[str, str],
               args: argparse.Namespace) -> None:
    """Fit the plan's workload to the targets' context (fit.py) unless --no-fit; say what it did."""
    if args.no_fit:
        return
    clients = [openai.AsyncOpenAI(base_url=t.base_url, api_key=key, max_retries=0, timeout=args.timeout,
                                  default_headers=headers or None) for t in targets]
    try:
        fit = await fit_workload(plan.source, targets, clients)
    finally:
        for c in clients:
            await c.close()
    plan.fit = fit.as_dict(plan.source.scale)
    plan.source = fit.source
    print(f"fairgate bench: {fit.note}", flush=True)


async def _run(targets: list[Target], keys: list[str], plan: RunPlan, headers: dict[str, str],
               golden: list[GoldenItem] | None, args: argparse.Namespace) -> tuple[RunOutcome, dict[str, Any]]:
    await _fit(targets, keys[0], plan, headers, args)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    with _progress(plan, len(targets), args.progress) as bar:
        runner = LoadRunner(targets, keys, plan, timeout=args.timeout, headers=headers, progress=bar,
                            tenants=args.tenants, named_tenants=args.tenants is not None)
        try:
            outcome = await runner.run()
        finally:
            await runner.aclose()
    outcome.client = {"cpu_seconds": time.process_time() - cpu0, "wall_seconds": time.perf_counter() - wall0}
    scores = await _golden(targets, keys[0], golden, args, headers) if golden and not outcome.interrupted else {}
    return outcome, scores


def build_doc(targets: list[Target], tenants: int, plan: RunPlan, slo: Slo, outcome: RunOutcome,
              scores: dict[str, Any], created: str) -> dict[str, Any]:
    """The JSON document: the run's configuration (never the keys) and every figure."""
    labels = [lv.label for lv in plan.levels]
    figures = {}
    for t in targets:
        mine = [r for r in outcome.results if r.target == t.label]
        seconds = {lv: outcome.seconds.get((t.label, lv), 0.0) for lv in labels}
        figures[t.label] = {"base_url": t.base_url, "model": t.model,
                            **target_figures(mine, labels, seconds, slo),
                            "sent_by_level": {lv: outcome.sent.get((t.label, lv), 0) for lv in labels},
                            "accuracy": scores.get(t.label)}
        if [lv.kind for lv in plan.levels] == ["alone", "flood"]:
            figures[t.label]["flood"] = flood_figures(mine, labels[0], labels[1], seconds[labels[1]])
    config = {"targets": [{"label": t.label, "base_url": t.base_url, "model": t.model} for t in targets],
              "workload": plan.source.name, "scale": plan.source.scale, "max_tokens": plan.source.max_tokens,
              "levels": [{"kind": lv.kind, "value": lv.value, "label": lv.label} for lv in plan.levels],
              "requests": plan.requests, "duration": plan.duration, "rounds": plan.rounds,
              "max_concurrency": plan.max_concurrency, "warmup": plan.warmup, "seed": plan.seed, "tenants": tenants,
              "slo": slo.as_dict(), "extra_body": plan.extra_body, "fit": plan.fit}
    cpu, wall = outcome.client.get("cpu_seconds"), outcome.client.get("wall_seconds")
    client = {"cpu_seconds": cpu, "wall_seconds": wall, "cpu_share": cpu / wall if cpu is not None and wall else None}
    return {"fairgate_bench": SCHEMA, "created": created, "interrupted": outcome.interrupted, "config": config,
            "client": client, "targets": figures}


def _print_table(doc: dict[str, Any]) -> None:
    print(f"{'target':<24} {'load':<10} {'sent':>5} {'ok':>5} {'err':>4} {'req/s':>7} {'tok/s':>8} "
          f"{'good/s':>7} {'ttft50':>8} {'ttft99':>8} {'itl50':>7} {'e2e99':>8}")
    for lv in doc["config"]["levels"]:
        for target, tf in doc["targets"].items():
            g = tf["levels"][lv["label"]]

            def ms(m: str, p: str, g: dict[str, Any] = g) -> str:
                return "-" if g[m][p] is None else f"{g[m][p] * 1000:.1f}"

            print(f"{target:<24} {lv['label']:<10} {g['sent']:>5} {g['completed']:>5} {g['errors']:>4} "
                  f"{g['request_throughput']:>7.2f} {g['output_throughput']:>8.1f} {g['goodput']:>7.2f} "
                  f"{ms('ttft', 'p50'):>8} {ms('ttft', 'p99'):>8} {ms('itl', 'p50'):>7} {ms('e2e', 'p99'):>8}")
    _print_errors(doc)
    for target, tf in doc["targets"].items():
        if tf["accuracy"]:
            acc = tf["accuracy"]
            print(f"{target}: golden set {acc['passed']}/{acc['items']} passed")


def _print_errors(doc: dict[str, Any]) -> None:
    """The first distinct errors of each target, with the server's code and message."""
    for target, tf in doc["targets"].items():
        if tf["error_messages"]:
            print(f"{target}: {tf['overall']['errors']} errors; the first kinds:")
        for e in tf["error_messages"]:
            code = f" {e['code']}" if e["code"] else ""
            print(f"  {e['count']:>5} x {e['error']}{code}: {e['message']}")


def run_session(targets: list[Target], keys: list[str], plan: RunPlan, slo: Slo, out: Path, *,
                headers: dict[str, str], golden: list[GoldenItem] | None, args: argparse.Namespace) -> int:
    """Run, report, print; exit status 0, 1 when no request at all completed, 130 when
    interrupted (the report then covers what ran)."""
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    outcome, scores = asyncio.run(_run(targets, keys, plan, headers, golden, args))
    doc = build_doc(targets, args.tenants or len(keys), plan, slo, outcome, scores, created)
    paths = write_report(out, doc, outcome.results)
    _print_table(doc)
    last: dict[str, Any] = {}
    if any("flood" in tf for tf in doc["targets"].values()):
        print_flood(doc)
        last = {"flood": {t: {k: tf["flood"][k] for k in ("light_p99_vs_alone", "light_p50_vs_alone",
                                                           "flood_output_throughput")}
                          for t, tf in doc["targets"].items()}}
    completed = sum(tf["overall"]["completed"] for tf in doc["targets"].values())
    print(f"report: {paths['html']}\nfigures: {paths['json']}")
    print(json.dumps({"html": str(paths["html"]), "json": str(paths["json"]), "completed": completed,
                      "errors": sum(tf["overall"]["errors"] for tf in doc["targets"].values()), **last}))
    if doc["interrupted"]:
        return 130  # as a shell reports Ctrl-C, after the report is written
    return 0 if completed else 1
