"""Plots as inline SVG, drawn on the server: a line chart of series over time and a bar chart.

Every value a plot shows is also in its markup (`data-value` on each point or bar, and a
`<title>` tooltip), so a test or a screen reader can read the numbers back. Text goes
through `html.escape`: tenant names and model names are the clients' strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563")
WIDTH, HEIGHT = 640, 240
PAD_L, PAD_R, PAD_T, PAD_B = 56, 12, 30, 40


@dataclass(slots=True)
class Series:
    name: str
    points: list[tuple[str, float]]  # (x label, e.g. an hour, value), in x order


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.3g}M"
    if abs(v) >= 1e3:
        return f"{v / 1e3:.3g}k"
    return f"{v:.3g}"


def _empty(title: str, kind: str) -> str:
    return (f'<svg class="plot plot-empty" data-kind="{kind}" role="img" viewBox="0 0 {WIDTH} 56" '
            f'width="{WIDTH}" height="56"><title>{escape(title)}</title>'
            f'{_caption(title)}<text x="10" y="44" font-size="12" fill="#6b7280">no data yet</text></svg>')


def _caption(title: str) -> str:
    return f'<text class="caption" x="8" y="17" font-size="13" font-weight="600" fill="#111827">{escape(title)}</text>'


def _axis(top: float, plot_h: float) -> list[str]:
    """Horizontal grid lines with value labels at 0, 1/2 and the top."""
    out = []
    for frac in (0.0, 0.5, 1.0):
        y = PAD_T + plot_h * (1 - frac)
        out.append(f'<line x1="{PAD_L}" x2="{WIDTH - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        out.append(f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11" '
                   f'fill="#6b7280">{_fmt(top * frac)}</text>')
    return out


def line_chart(title: str, series: Sequence[Series], unit: str = "") -> str:
    """Lines over a shared x axis (the union of the series' labels, sorted)."""
    xs = sorted({x for s in series for x, _ in s.points})
    values = [v for s in series for _, v in s.points]
    if not xs or not values:
        return _empty(title, "line")
    top = max(values) * 1.05 or 1.0
    plot_w, plot_h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B
    step = plot_w / max(len(xs) - 1, 1)
    pos = {x: PAD_L + (i * step if len(xs) > 1 else plot_w / 2) for i, x in enumerate(xs)}
    parts = [f'<svg class="plot" data-kind="line" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
             f'height="{HEIGHT}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
             f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>', _caption(title),
             *_axis(top, plot_h)]
    ends = ((xs[0], "start"), (xs[-1], "end")) if len(xs) > 1 else ((xs[0], "middle"),)
    for x, anchor in ends:
        parts.append(f'<text x="{pos[x]:.1f}" y="{HEIGHT - PAD_B + 16}" text-anchor="{anchor}" font-size="11" '
                     f'fill="#6b7280">{escape(x)}</text>')
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = [(pos[x], PAD_T + plot_h * (1 - v / top), x, v) for x, v in s.points]
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in pts)
        parts.append(f'<polyline class="series" data-series="{escape(s.name)}" fill="none" stroke="{color}" '
                     f'stroke-width="2.5" points="{path}"/>')
        for px, py, x, v in pts:
            parts.append(f'<circle class="point" cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="{color}" '
                         f'data-value="{v:g}"><title>{escape(s.name)} {escape(x)}: {_fmt(v)}{escape(unit)}'
                         f'</title></circle>')
        parts.append(f'<text x="{PAD_L + 8 + 120 * i}" y="{HEIGHT - 6}" font-size="12" fill="{color}">'
                     f'&#9632; {escape(s.name[:16])}</text>')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(title: str, bars: Sequence[tuple[str, float]], unit: str = "",
              maximum: float | None = None) -> str:
    """Horizontal bars, one per (label, value); `maximum` fixes the full width (e.g. 1 for rates)."""
    if not bars:
        return _empty(title, "bar")
    row_h = 24
    height = PAD_T + row_h * len(bars) + 8
    label_w = 170
    plot_w = WIDTH - label_w - 70
    top = maximum or max(v for _, v in bars) or 1.0
    parts = [f'<svg class="plot" data-kind="bar" role="img" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
             f'height="{height}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
             f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>', _caption(title)]
    for i, (label, v) in enumerate(bars):
        y = PAD_T + i * row_h
        w = max(plot_w * min(v / top, 1.0), 1.0) if v > 0 else 0.0
        color = PALETTE[i % len(PALETTE)]
        parts.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end" font-size="12" fill="#111827">'
                     f'{escape(label[:28])}</text>')
        parts.append(f'<rect class="bar" x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" '
                     f'fill="{color}" data-value="{v:g}"><title>{escape(label)}: {_fmt(v)}{escape(unit)}'
                     f'</title></rect>')
        parts.append(f'<text x="{label_w + w + 6:.1f}" y="{y + 15}" font-size="12" fill="#374151">'
                     f'{_fmt(v)}{escape(unit)}</text>')
    parts.append("</svg>")
    return "".join(parts)
