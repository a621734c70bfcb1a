"""Self-contained HTML reports: tables and inline SVG charts, no script, no external resource.

Every number taken from an experiment's JSON is written with the JSON Pointer (RFC 6901) of its
value and the value itself, so a test (or a reader) can check the page against the JSON:

    <td data-path="/cells/0/measured/train_seconds" data-value="12.3456" data-format=".1f">12.3</td>

The text of such an element is format(value, data-format); chart marks (bars, points) carry
data-path and data-value too.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac"]


def esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def pointer(*parts: Union[str, int]) -> str:
    """The JSON Pointer of a value: pointer("cells", 0, "seconds") == "/cells/0/seconds"."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def resolve(doc: Any, path: str) -> Any:
    """The value at a JSON Pointer (KeyError/IndexError when absent)."""
    if path == "":
        return doc
    if not path.startswith("/"):
        raise KeyError(f"not a JSON pointer: {path!r}")
    for raw in path[1:].split("/"):
        key = raw.replace("~1", "/").replace("~0", "~")
        doc = doc[int(key)] if isinstance(doc, list) else doc[key]
    return doc


@dataclass(frozen=True)
class Num:
    """A number from the JSON: its value, its JSON Pointer, how it is shown (a format spec)."""
    value: Optional[float]
    path: str
    fmt: str = ".3g"

    def text(self) -> str:
        if self.value is None or (isinstance(self.value, float) and not math.isfinite(self.value)):
            return "–"
        return format(self.value, self.fmt)

    def attrs(self) -> str:
        return (f' data-path="{esc(self.path)}" data-value="{esc(json.dumps(self.value))}"'
                f' data-format="{esc(self.fmt)}"')


Cell = Union[str, int, float, Num, None]


def _cell(c: Cell, tag: str) -> str:
    if isinstance(c, Num):
        return f'<{tag} class="num"{c.attrs()}>{esc(c.text())}</{tag}>'
    if c is None:
        return f"<{tag}>–</{tag}>"
    cls = ' class="num"' if isinstance(c, (int, float)) else ""
    return f"<{tag}{cls}>{esc(c)}</{tag}>"


def table(headers: Sequence[str], rows: Sequence[Sequence[Cell]], caption: str = "", cls: str = "") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(c, "td") for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f'<table class="{esc(cls)}">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def paragraph(text: str) -> str:
    return f"<p>{esc(text)}</p>"


def section(title: str, *parts: str, id: str = "") -> str:
    ident = f' id="{esc(id)}"' if id else ""
    return f"<section{ident}><h2>{esc(title)}</h2>{''.join(parts)}</section>"


def subsection(title: str, *parts: str) -> str:
    return f"<h3>{esc(title)}</h3>{''.join(parts)}"


# ---------------------------------------------------------------------------
# charts

def nice_ticks(lo: float, hi: float, n: int = 5) -> List[float]:
    """About n round tick values covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    v = start
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 12))
        v += step
    if ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def _tick_label(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.0f}"
    if a >= 1:
        return f"{v:.1f}".rstrip("0").rstrip(".")
    return f"{v:.3g}"


@dataclass
class Series:
    """One series of a chart: a name and its values (None: no mark), each with its JSON Pointer."""
    name: str
    values: Sequence[Optional[float]]
    paths: Sequence[Optional[str]]
    xs: Optional[Sequence[float]] = None  # line charts: the x of each value


def _legend(names: Sequence[str], x: float, y: float, colors: Sequence[str], max_x: float) -> Tuple[str, int]:
    """Legend entries from (x, y), wrapped onto further lines 16 px apart before max_x; (svg, lines)."""
    out = []
    cx, cy, lines = x, y, 1
    for i, name in enumerate(names):
        w = 24 + 6.5 * len(name)
        if cx > x and cx + w > max_x:
            cx, cy, lines = x, cy + 16, lines + 1
        out.append(f'<rect x="{cx:.1f}" y="{cy - 9:.1f}" width="10" height="10" fill="{colors[i % len(colors)]}"/>'
                   f'<text x="{cx + 14:.1f}" y="{cy:.1f}" class="legend">{esc(name)}</text>')
        cx += w
    return f'<g class="legend">{"".join(out)}</g>', lines


def _frame(title: str, width: int, height: int, body: str, chart_id: str) -> str:
    ident = f' id="{esc(chart_id)}"' if chart_id else ""
    return (f'<figure class="chart"><svg{ident} class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">'
            f'<title>{esc(title)}</title>'
            f'<text x="{width / 2:.1f}" y="18" class="chart-title" text-anchor="middle">{esc(title)}</text>'
            f'{body}</svg></figure>')


def _y_axis(ticks: Sequence[float], y_of: Any, left: float, right: float, label: str, top: float, bottom: float) -> str:
    out = [f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" class="axis"/>']
    for t in ticks:
        y = y_of(t)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_tick_label(t)}</text>')
    mid = (top + bottom) / 2
    out.append(f'<text x="14" y="{mid:.1f}" transform="rotate(-90 14 {mid:.1f})" text-anchor="middle" '
               f'class="axis-label">{esc(label)}</text>')
    return "".join(out)


def bar_chart(title: str, categories: Sequence[str], series: Sequence[Series], y_label: str, x_label: str = "",
              stacked: bool = False, width: int = 720, height: int = 340, chart_id: str = "",
              colors: Sequence[str] = PALETTE, category_colors: Optional[Sequence[str]] = None) -> str:
    """Grouped (or stacked) vertical bars: one group per category, one bar per series
    (category_colors: one colour per category instead of per series, and no legend)."""
    left, right, top, bottom = 70, width - 20, 40, height - 70
    if stacked:
        totals = [sum((s.values[i] or 0) for s in series) for i in range(len(categories))]
        vmax = max(totals + [0.0])
    else:
        vmax = max([v for s in series for v in s.values if v is not None] + [0.0])
    ticks = nice_ticks(0, vmax if vmax > 0 else 1)
    top_v = ticks[-1]

    def y_of(v: float) -> float:
        return bottom - (bottom - top) * (v / top_v if top_v else 0)

    body = [_y_axis(ticks, y_of, left, right, y_label, top, bottom),
            f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" class="axis"/>']
    n = max(1, len(categories))
    group_w = (right - left) / n
    bars_per_group = 1 if stacked else max(1, len(series))
    bar_w = max(2.0, group_w * 0.8 / bars_per_group)
    for i, cat in enumerate(categories):
        gx = left + i * group_w + group_w * 0.1
        base = 0.0
        for k, s in enumerate(series):
            v = s.values[i]
            if v is None:
                continue
            x = gx if stacked else gx + k * bar_w
            y0, y1 = (y_of(base), y_of(base + v)) if stacked else (y_of(0), y_of(v))
            path = s.paths[i] if i < len(s.paths) else None
            attrs = f' data-path="{esc(path)}" data-value="{esc(json.dumps(v))}"' if path else ""
            fill = category_colors[i % len(category_colors)] if category_colors else colors[k % len(colors)]
            body.append(f'<rect class="bar" x="{x:.1f}" y="{min(y0, y1):.1f}" width="{bar_w - 1:.1f}" '
                        f'height="{max(abs(y0 - y1), 0.5):.1f}" fill="{fill}"{attrs}>'
                        f'<title>{esc(s.name)}, {esc(cat)}: {esc(_tick_label(v))}</title></rect>')
            if stacked:
                base += v
        body.append(f'<text x="{left + (i + 0.5) * group_w:.1f}" y="{bottom + 16}" text-anchor="middle" '
                    f'class="tick">{esc(cat)}</text>')
    if x_label:
        body.append(f'<text x="{(left + right) / 2:.1f}" y="{bottom + 36}" text-anchor="middle" '
                    f'class="axis-label">{esc(x_label)}</text>')
    lines = 1
    if not category_colors:
        legend, lines = _legend([s.name for s in series], left, height - 10, colors, right)
        body.append(legend)
    return _frame(title, width, height + 16 * (lines - 1), "".join(body), chart_id)


def line_chart(title: str, series: Sequence[Series], x_label: str, y_label: str, width: int = 720,
               height: int = 340, chart_id: str = "", log_x: bool = False, y_min: Optional[float] = None,
               colors: Sequence[str] = PALETTE) -> str:
    """Lines with point marks; each series has its own xs."""
    left, right, top, bottom = 70, width - 20, 40, height - 70
    pts = [(x, v) for s in series for x, v in zip(s.xs or range(len(s.values)), s.values) if v is not None]
    xs = [p[0] for p in pts] or [0.0, 1.0]
    vs = [p[1] for p in pts] or [0.0, 1.0]
    fx = (lambda x: math.log2(x)) if log_x else (lambda x: float(x))
    x_lo, x_hi = fx(min(xs)), fx(max(xs))
    if x_hi <= x_lo:
        x_hi = x_lo + 1
    lo = min(vs) if y_min is None else y_min
    ticks = nice_ticks(min(lo, 0.0) if y_min is None else y_min, max(vs) if max(vs) > lo else lo + 1)

    def y_of(v: float) -> float:
        return bottom - (bottom - top) * ((v - ticks[0]) / (ticks[-1] - ticks[0]))

    def x_of(x: float) -> float:
        return left + 10 + (right - left - 20) * ((fx(x) - x_lo) / (x_hi - x_lo))

    body = [_y_axis(ticks, y_of, left, right, y_label, top, bottom),
            f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" class="axis"/>']
    for x in sorted(set(xs)):
        body.append(f'<text x="{x_of(x):.1f}" y="{bottom + 16}" text-anchor="middle" class="tick">{_tick_label(x)}</text>')
    body.append(f'<text x="{(left + right) / 2:.1f}" y="{bottom + 36}" text-anchor="middle" '
                f'class="axis-label">{esc(x_label)}</text>')
    for k, s in enumerate(series):
        color = colors[k % len(colors)]
        coords = [(x_of(x), y_of(v), v, p) for x, v, p in zip(s.xs or range(len(s.values)), s.values, s.paths)
                  if v is not None]
        # the line breaks where a value is missing
        d, pen_down = [], False
        for x, v in zip(s.xs or range(len(s.values)), s.values):
            if v is None:
                pen_down = False
                continue
            d.append(f"{'L' if pen_down else 'M'}{x_of(x):.1f},{y_of(v):.1f}")
            pen_down = True
        if any(c.startswith("L") for c in d):
            body.append(f'<path d="{" ".join(d)}" fill="none" stroke="{color}" stroke-width="2"/>')
        for cx, cy, v, p in coords:
            attrs = f' data-path="{esc(p)}" data-value="{esc(json.dumps(v))}"' if p else ""
            body.append(f'<circle class="point" cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="{color}"{attrs}>'
                        f'<title>{esc(s.name)}: {esc(_tick_label(v))}</title></circle>')
    legend, lines = _legend([s.name for s in series], left, height - 10, colors, right)
    body.append(legend)
    return _frame(title, width, height + 16 * (lines - 1), "".join(body), chart_id)


def timeline(title: str, lanes: Sequence[Tuple[str, Sequence[Tuple[float, float, str]]]],
             colors: Dict[str, str], x_label: str = "time (s)", width: int = 960, chart_id: str = "") -> str:
    """Horizontal lanes of [start, end) spans coloured by category; times in seconds."""
    lane_h, top, left, right = 16, 40, 150, width - 20
    height = top + lane_h * max(1, len(lanes)) + 70
    bottom = top + lane_h * max(1, len(lanes))
    t_lo = min([s for _, spans in lanes for s, _, _ in spans] or [0.0])
    t_hi = max([e for _, spans in lanes for _, e, _ in spans] or [1.0])
    if t_hi <= t_lo:
        t_hi = t_lo + 1e-3
    ticks = nice_ticks(0, t_hi - t_lo)

    def x_of(t: float) -> float:
        return left + (right - left) * ((t - t_lo) / (ticks[-1] or 1))

    body = []
    for i, (name, spans) in enumerate(lanes):
        y = top + i * lane_h
        body.append(f'<text x="{left - 6}" y="{y + lane_h - 4}" text-anchor="end" class="tick">{esc(name)}</text>')
        for s, e, cat in spans:
            w = max(0.6, x_of(e) - x_of(s))
            body.append(f'<rect class="span" x="{x_of(s):.2f}" y="{y + 2}" width="{w:.2f}" height="{lane_h - 4}" '
                        f'fill="{colors.get(cat, "#999")}" fill-opacity="0.85"/>')
    for t in ticks:
        x = left + (right - left) * (t / (ticks[-1] or 1))
        body.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" class="grid"/>'
                    f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle" class="tick">{_tick_label(t)}</text>')
    body.append(f'<text x="{(left + right) / 2:.1f}" y="{bottom + 36}" text-anchor="middle" class="axis-label">'
                f'{esc(x_label)}</text>')
    cats = list(colors)
    legend, lines = _legend(cats, left, height - 10, [colors[c] for c in cats], right)
    body.append(legend)
    return _frame(title, width, height + 16 * (lines - 1), "".join(body), chart_id)


# ---------------------------------------------------------------------------
# the page

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:2em auto;max-width:1000px;
color:#222;line-height:1.45;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
h3{font-size:1.05em;margin-top:1.4em}
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em}
th{background:#f3f3f3;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
caption{caption-side:top;text-align:left;font-weight:600;padding:.3em 0}
figure.chart{margin:1em 0}svg.chart{background:#fff;border:1px solid #e4e4e4;max-width:100%;height:auto}
svg .axis{stroke:#444;stroke-width:1}svg .grid{stroke:#e6e6e6;stroke-width:1}
svg text{font-family:inherit;fill:#333}svg .tick{font-size:11px}svg .axis-label{font-size:12px}
svg .chart-title{font-size:14px;font-weight:600}svg .legend{font-size:11px}
.note{color:#555;font-size:.92em}.meta{color:#555;font-size:.9em}code{background:#f5f5f5;padding:0 .2em}
"""


def page(title: str, subtitle: str, sections: Sequence[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{esc(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{esc(title)}</h1><p class=\"meta\">{esc(subtitle)}</p>"
            f"{''.join(sections)}</body></html>\n")
