"""The report's plots as inline SVG text (matplotlib's object API: no pyplot, no global
backend state, nothing fetched when the page is viewed)."""

from __future__ import annotations

import io
import math
from typing import Any

from matplotlib.figure import Figure

MS = 1000.0
LABELS = {"ttft": "TTFT (ms)", "itl": "inter-token latency (ms)", "e2e": "end-to-end latency (ms)",
          "tpot": "TPOT (ms)"}


def to_svg(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog: the SVG goes inline into HTML


def cdf_plot(metric: str, figures: dict[str, Any]) -> str:
    """One line per (target, load point) from the per-level CDFs."""
    fig = Figure(figsize=(6.4, 3.6))
    ax = fig.add_subplot()
    for target, tf in figures.items():
        for level, points in tf["level_cdf"][metric].items():
            if points:  # from (first value, 0): the curve starts on the axis
                ax.step([points[0][0] * MS] + [p[0] * MS for p in points], [0.0] + [p[1] for p in points],
                        where="post", label=f"{target} {level}")
    ax.set_xlabel(LABELS[metric])
    ax.set_ylabel("share of requests" if metric != "itl" else "share of gaps")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"{metric.upper()} CDF")
    ax.grid(alpha=0.3)
    _legend(ax)
    return to_svg(fig)


def load_plot(figures: dict[str, Any], levels: list[tuple[str, float]], axis: str) -> str:
    """Throughput and goodput, output tokens/s, and TTFT p50/p99 against the load points."""
    fig = Figure(figsize=(12, 3.6))
    ax_req, ax_tok, ax_lat = fig.subplots(1, 3)
    finite = [x for _, x in levels if math.isfinite(x)]
    # an infinite rate (everything at once) sits one step right of the largest finite one
    xs = [x if math.isfinite(x) else (max(finite) * 2 if finite else 1.0) for _, x in levels]
    ticks = [f"{x:g}" for _, x in levels]
    for target, tf in figures.items():
        rows = [tf["levels"][label] for label, _ in levels]
        line = ax_req.plot(xs, [r["request_throughput"] for r in rows], marker="o", label=f"{target} throughput")
        ax_req.plot(xs, [r["goodput"] for r in rows], marker="x", linestyle="--", color=line[0].get_color(),
                    label=f"{target} goodput")
        ax_tok.plot(xs, [r["output_throughput"] for r in rows], marker="o", label=target)
        for p, style in (("p50", "-"), ("p99", ":")):
            ax_lat.plot(xs, [_ms(r["ttft"][p]) for r in rows], marker="o", linestyle=style, label=f"{target} {p}")
    for ax, title, ylabel in ((ax_req, "requests/s (goodput: SLO met)", "requests/s"),
                              (ax_tok, "output tokens/s", "tokens/s"), (ax_lat, "TTFT under load", "ms")):
        ax.set_title(title)
        ax.set_xlabel(axis)
        if len(xs) > 1 and max(xs) / min(xs) >= 8:
            ax.set_xscale("log", base=2)  # a 1, 4, 16, 64 sweep spreads evenly
        ax.set_xticks(xs, ticks)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        _legend(ax)
    return to_svg(fig)


def percentile_bars(title: str, groups: dict[str, dict[str, Any]], metrics: tuple[str, ...] = ("ttft", "e2e")) -> str:
    """p50/p95/p99 bars per group (e.g. "gateway · local-a"), one panel per metric."""
    fig = Figure(figsize=(6 * len(metrics), 3.8))
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    names = list(groups)
    width = 0.25
    for ax, metric in zip(axes, metrics, strict=True):
        for k, p in enumerate(("p50", "p95", "p99")):
            ax.bar([i + (k - 1) * width for i in range(len(names))],
                   [_ms(groups[n][metric][p]) or 0.0 for n in names], width, label=p)
        ax.set_xticks(range(len(names)), names, rotation=20, ha="right", fontsize="small")
        ax.set_ylabel(LABELS[metric])
        ax.set_title(f"{title}: {metric.upper()}")
        ax.grid(alpha=0.3, axis="y")
        _legend(ax)
    return to_svg(fig)


def _ms(v: float | None) -> float | None:
    return None if v is None else v * MS


def _legend(ax: Any) -> None:
    if ax.get_legend_handles_labels()[0]:  # an empty legend is a warning, not a legend
        ax.legend(fontsize="small")
