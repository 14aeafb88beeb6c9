"""The run's report: `bench.json` (every figure), `requests.jsonl` (one row per request, no
text) and `report.html` (one self-contained page: tables and inline SVG plots)."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from fairgate.gateway.loadgen import plots
from fairgate.gateway.loadgen.client import RequestResult

SCHEMA = 1
CLIENT_BUSY = 0.8  # the generator's CPU share above which its own speed may be what was measured
PLOTS = ("ttft-cdf", "itl-cdf", "e2e-cdf", "load", "by-route", "by-prompt-length")


def write_report(out: Path, doc: dict[str, Any], results: list[RequestResult]) -> dict[str, Path]:
    """Write the three files into `out` (created); return their paths by kind."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "bench.json", "requests": out / "requests.jsonl", "html": out / "report.html"}
    paths["json"].write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    with paths["requests"].open("w", encoding="utf-8") as f:
        for r in results:
            f.write(json.dumps(r.row()) + "\n")
    paths["html"].write_text(render_html(doc), encoding="utf-8")
    return paths


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v * 1000:.1f}"


def _num(v: float | int | None, fmt: str = ".2f") -> str:
    return "–" if v is None else format(v, fmt)


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _latency_cells(g: dict[str, Any]) -> list[str]:
    return [_ms(g[m][p]) for m in ("ttft", "itl", "e2e") for p in ("p50", "p95", "p99")]


LAT_HEAD = [f"{m} {p} ms" for m in ("TTFT", "ITL", "E2E") for p in ("p50", "p95", "p99")]


def summary_table(doc: dict[str, Any]) -> str:
    rows = []
    for label in doc["config"]["levels"]:
        for target, tf in doc["targets"].items():
            g = tf["levels"][label["label"]]
            rows.append([target, label["label"], str(g["sent"]), str(g["completed"]), str(g["errors"]),
                         _num(g["request_throughput"]), _num(g["output_throughput"], ".1f"),
                         _num(g["goodput"]), _num(g["slo_attainment"], ".0%"), *_latency_cells(g)])
    return _table(["target", "load", "sent", "completed", "errors", "req/s", "out tok/s", "goodput req/s",
                   "SLO met", *LAT_HEAD], rows)


def group_table(doc: dict[str, Any], key: str, name: str) -> str:
    rows = [[target, group, str(g["sent"]), str(g["errors"]), *_latency_cells(g)]
            for target, tf in doc["targets"].items() for group, g in tf[key].items()]
    return _table(["target", name, "sent", "errors", *LAT_HEAD], rows)


def quality_table(doc: dict[str, Any]) -> str:
    rows = []
    for target, tf in doc["targets"].items():
        acc, cost = tf.get("accuracy"), tf.get("cost")
        rows.append([target, tf["model"],
                     "–" if not acc else f"{acc['passed']}/{acc['items']} ({acc['pass_rate']:.0%})",
                     "–" if not cost else _num(cost["cost_per_million_output_tokens"], ".4f"),
                     "–" if not cost else _num(cost["cost_per_million_tokens"], ".4f"),
                     ", ".join(f"{k}: {v}" for k, v in tf["errors"].items()) or "none"])
    return _table(["target", "model", "golden set passed", "cost / 1M output tokens", "cost / 1M tokens",
                   "errors"], rows)


def error_table(doc: dict[str, Any]) -> str:
    rows = [[target, kind, str(n), tf["error_examples"].get(kind, "")]
            for target, tf in doc["targets"].items() for kind, n in tf["errors"].items()]
    return _table(["target", "error", "count", "example message"], rows) if rows else "<p>No errors.</p>"


def _plot_svgs(doc: dict[str, Any]) -> dict[str, str]:
    targets = doc["targets"]
    levels = [(lv["label"], lv["value"]) for lv in doc["config"]["levels"]]
    axis = "concurrency" if doc["config"]["levels"][0]["kind"] == "concurrency" else "arrival rate (req/s)"
    routes = _bar_groups(targets, "by_route")
    buckets = _bar_groups(targets, "by_prompt_bucket")
    return {"ttft-cdf": plots.cdf_plot("ttft", targets), "itl-cdf": plots.cdf_plot("itl", targets),
            "e2e-cdf": plots.cdf_plot("e2e", targets), "load": plots.load_plot(targets, levels, axis),
            "by-route": plots.percentile_bars("by route", routes),
            "by-prompt-length": plots.percentile_bars("by prompt tokens", buckets)}


def _bar_groups(targets: dict[str, Any], key: str) -> dict[str, dict[str, Any]]:
    """The groups with completed requests, named "target · group" when there are several targets."""
    many = len(targets) > 1
    return {(f"{t} · {name}" if many else name): g for t, tf in targets.items()
            for name, g in tf[key].items() if g["completed"]}


CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;
margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}figure{margin:1em 0}svg{max-width:100%;height:auto}
.meta{color:#555;font-size:13px}.warn{color:#a40}.plots{display:flex;flex-wrap:wrap;gap:1em}"""


def render_html(doc: dict[str, Any]) -> str:
    cfg = doc["config"]
    svgs = _plot_svgs(doc)
    figs = "".join(f'<figure data-plot="{name}">{svgs[name]}</figure>' for name in PLOTS)
    share = doc["client"].get("cpu_share")
    warn = ("" if share is None or share < CLIENT_BUSY else
            f"<p class='warn'>The load generator itself used {share:.0%} of a CPU during the run: its own"
            " speed may cap these numbers (run it on another machine, or lower the load).</p>")
    if doc["interrupted"]:
        warn += "<p class='warn'>Interrupted: the figures cover the part that ran.</p>"
    slo = ", ".join(f"{k} ≤ {v * 1000:g} ms" for k, v in cfg["slo"].items() if v is not None) or "none set"
    targets = ", ".join(f"{t['label']} = {t['base_url']} ({t['model']})" for t in cfg["targets"])
    budget = f"{cfg['requests']} requests" if cfg["requests"] else f"{cfg['duration']:g} s"
    meta = (f"workload <b>{html.escape(cfg['workload'])}</b> (scale {cfg['scale']:g}), {budget} per target and"
            f" load point in {cfg['rounds']} round(s), {cfg['tenants']} tenant(s); SLO: {html.escape(slo)};"
            f" targets: {html.escape(targets)}; started {html.escape(doc['created'])}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>fairgate bench</title>"
            f"<style>{CSS}</style></head><body><h1>fairgate bench</h1><p class='meta'>{meta}</p>"
            f"{warn}<h2>Throughput, goodput and latency per load point</h2>{summary_table(doc)}"
            f"<h2>Quality and cost</h2>{quality_table(doc)}"
            f"<h2>Errors</h2>{error_table(doc)}<h2>Plots</h2><div class='plots'>{figs}</div>"
            f"<h2>By route</h2>{group_table(doc, 'by_route', 'route')}"
            f"<h2>By prompt length (tokens)</h2>{group_table(doc, 'by_prompt_bucket', 'prompt tokens')}"
            f"<h2>By tenant</h2>{group_table(doc, 'by_tenant', 'tenant')}"
            f"<h2>By workload</h2>{group_table(doc, 'by_workload', 'workload')}"
            "</body></html>\n")
