"""Plots as inline SVG, drawn on the server: a line chart of series over time and a bar chart.

Every plot is read without guessing: it has a title, both axes named with their unit (`Axis`),
and a legend entry for every series and a label for every bar. These are required arguments,
and a blank name is a ValueError, so an unlabelled plot cannot be drawn (issue 37 found a bar
with no label: an empty route key). Every value a plot shows is also in its markup
(`data-value` on each point or bar, and a `<title>` tooltip), so a test or a screen reader can
read the numbers back. Text goes through `html.escape`: tenant names and model names are the
clients' strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563")
WIDTH, HEIGHT = 640, 250
PAD_L, PAD_R, PAD_T, PAD_B = 64, 12, 30, 44
LEGEND_PER_ROW, LEGEND_ROW_H = 5, 16
MUTED = 'font-size="11" fill="#6b7280"'


def _required(what: str, text: str) -> str:
    if not text or not text.strip():
        raise ValueError(f"a plot's {what} must not be blank")
    return text


@dataclass(frozen=True, slots=True)
class Axis:
    """What an axis measures and in which unit, e.g. Axis("latency", "ms") -> "latency (ms)"."""

    name: str
    unit: str

    def __post_init__(self) -> None:
        _required("axis name", self.name)
        _required("axis unit", self.unit)

    @property
    def label(self) -> str:
        return f"{self.name} ({self.unit})"


@dataclass(slots=True)
class Series:
    name: str  # its legend entry
    points: list[tuple[str, float]]  # (x label, e.g. an hour, value), in x order

    def __post_init__(self) -> None:
        _required("series name", self.name)


@dataclass(slots=True)
class Bar:
    label: str  # shown beside the bar: which route, tenant, limit...
    value: float

    def __post_init__(self) -> None:
        _required("bar label", self.label)


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.3g}M"
    if abs(v) >= 1e3:
        return f"{v / 1e3:.3g}k"
    return f"{v:.3g}"


def _suffix(unit: str) -> str:
    """How a value's unit follows it: "25%", "3.1 ms", and a count bare ("3", not "3 count")."""
    return "" if unit == "count" else unit if unit == "%" else f" {unit}"


def _open(kind: str, title: str, height: int) -> list[str]:
    return [f'<svg class="plot" data-kind="{kind}" role="img" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
            f'height="{height}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
            f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>', _caption(title)]


def _empty(title: str, kind: str, message: str) -> str:
    return (f'<svg class="plot plot-empty" data-kind="{kind}" role="img" viewBox="0 0 {WIDTH} 56" '
            f'width="{WIDTH}" height="56"><title>{escape(title)}</title>'
            f'{_caption(title)}<text class="empty" x="10" y="44" {MUTED}>{escape(message)}</text></svg>')


def _caption(title: str) -> str:
    return f'<text class="caption" x="8" y="17" font-size="13" font-weight="600" fill="#111827">{escape(title)}</text>'


def _axis_label(which: str, text: str, x: float, y: float, anchor: str, rotate: bool = False) -> str:
    turn = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
    return (f'<text class="axis-label" data-axis="{which}" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{turn} '
            f'font-size="11" font-style="italic" fill="#374151">{escape(text)}</text>')


def _grid(top: float, plot_h: float) -> list[str]:
    """Horizontal grid lines with value labels at 0, 1/2 and the top."""
    out = []
    for frac in (0.0, 0.5, 1.0):
        y = PAD_T + plot_h * (1 - frac)
        out.append(f'<line x1="{PAD_L}" x2="{WIDTH - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        out.append(f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end" {MUTED}>{_fmt(top * frac)}</text>')
    return out


def _legend(names: Sequence[str], top: float) -> list[str]:
    """One entry per series, LEGEND_PER_ROW to a row: a series without one cannot be told apart."""
    out = []
    step = (WIDTH - PAD_L) / LEGEND_PER_ROW
    for i, name in enumerate(names):
        x, y = PAD_L + step * (i % LEGEND_PER_ROW), top + LEGEND_ROW_H * (i // LEGEND_PER_ROW)
        out.append(f'<text class="legend" data-series="{escape(name)}" x="{x:.1f}" y="{y:.1f}" font-size="12" '
                   f'fill="{PALETTE[i % len(PALETTE)]}">&#9632; {escape(name[:16])}</text>')
    return out


def line_chart(title: str, series: Sequence[Series], *, x: Axis, y: Axis, empty: str = "no data yet") -> str:
    """Lines over a shared x axis (the union of the series' labels, sorted); `empty` is what an
    empty plot says (say why, when "no data yet" would mislead)."""
    xs = sorted({px for s in series for px, _ in s.points})
    values = [v for s in series for _, v in s.points]
    if not xs or not values:
        return _empty(title, "line", empty)
    top = max(values) * 1.05 or 1.0
    legend_rows = (len(series) + LEGEND_PER_ROW - 1) // LEGEND_PER_ROW
    height = HEIGHT + LEGEND_ROW_H * max(legend_rows - 1, 0)
    plot_w, plot_h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B
    step = plot_w / max(len(xs) - 1, 1)
    pos = {px: PAD_L + (i * step if len(xs) > 1 else plot_w / 2) for i, px in enumerate(xs)}
    parts = [*_open("line", title, height), *_grid(top, plot_h),
             _axis_label("y", y.label, 14, PAD_T + plot_h / 2, "middle", rotate=True),
             _axis_label("x", x.label, PAD_L + plot_w / 2, HEIGHT - PAD_B + 16, "middle")]
    ends = ((xs[0], "start"), (xs[-1], "end")) if len(xs) > 1 else ((xs[0], "middle"),)
    for px, anchor in ends:
        parts.append(f'<text x="{pos[px]:.1f}" y="{HEIGHT - PAD_B + 16}" text-anchor="{anchor}" {MUTED}>'
                     f'{escape(px)}</text>')
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = [(pos[px], PAD_T + plot_h * (1 - v / top), px, v) for px, v in s.points]
        path = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy, _, _ in pts)
        parts.append(f'<polyline class="series" data-series="{escape(s.name)}" fill="none" stroke="{color}" '
                     f'stroke-width="2.5" points="{path}"/>')
        for cx, cy, px, v in pts:
            parts.append(f'<circle class="point" cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="{color}" '
                         f'data-value="{v:g}"><title>{escape(s.name)} {escape(px)}: {_fmt(v)}{escape(_suffix(y.unit))}'
                         f'</title></circle>')
    parts += _legend([s.name for s in series], HEIGHT - 8)
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(title: str, bars: Sequence[Bar], *, category: str, value: Axis, maximum: float | None = None,
              empty: str = "no data yet") -> str:
    """Horizontal bars, one per Bar, labelled beside it; `category` names what the labels are
    (e.g. "route"), `value` the bars' axis; `maximum` fixes the full width (e.g. 100 for %)."""
    _required("category", category)
    if not bars:
        return _empty(title, "bar", empty)
    row_h, label_w = 24, 170
    bars_top = PAD_T + 16
    height = bars_top + row_h * len(bars) + 24
    plot_w = WIDTH - label_w - 70
    top = maximum or max(b.value for b in bars) or 1.0
    unit = escape(_suffix(value.unit))
    parts = [*_open("bar", title, height), _axis_label("y", category, label_w - 6, bars_top - 4, "end"),
             _axis_label("x", value.label, label_w, bars_top - 4, "start")]
    for i, b in enumerate(bars):
        y = bars_top + i * row_h
        w = max(plot_w * min(b.value / top, 1.0), 1.0) if b.value > 0 else 0.0
        parts.append(f'<text class="bar-label" x="{label_w - 6}" y="{y + 15}" text-anchor="end" font-size="12" '
                     f'fill="#111827">{escape(b.label[:28])}</text>')
        parts.append(f'<rect class="bar" x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" '
                     f'fill="{PALETTE[i % len(PALETTE)]}" data-label="{escape(b.label)}" data-value="{b.value:g}">'
                     f'<title>{escape(b.label)}: {_fmt(b.value)}{unit}</title></rect>')
        parts.append(f'<text x="{label_w + w + 6:.1f}" y="{y + 15}" font-size="12" fill="#374151">'
                     f'{_fmt(b.value)}{unit}</text>')
    base = bars_top + row_h * len(bars) + 4
    parts.append(f'<line x1="{label_w}" x2="{label_w + plot_w}" y1="{base}" y2="{base}" stroke="#9ca3af"/>')
    for frac, anchor in ((0.0, "start"), (1.0, "end")):
        parts.append(f'<text x="{label_w + plot_w * frac:.1f}" y="{base + 14}" text-anchor="{anchor}" {MUTED}>'
                     f'{_fmt(top * frac)}{unit}</text>')
    parts.append("</svg>")
    return "".join(parts)
