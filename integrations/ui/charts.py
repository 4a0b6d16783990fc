"""Small SVG charts drawn on the server (no chart library, nothing fetched by the browser).

Colours are CSS classes (``s0``..``s5``) so the stylesheet themes them for light and dark mode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape


def stacked_bars(
    labels: Sequence[str], series: Mapping[str, Sequence[int]], *, title: str, height: int = 160
) -> str:
    """Stacked columns, one per label (a day), one colour per series, with a legend."""
    n = max(len(labels), 1)
    width, pad, bottom = 640, 30, 22
    totals = [sum(vals[i] for vals in series.values()) for i in range(len(labels))]
    top = max([*totals, 1])
    bw = (width - pad) / n
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height + bottom}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>',
        f'<text class="axis" x="0" y="12">{top}</text>',
        f'<line class="grid" x1="{pad}" y1="{height}" x2="{width}" y2="{height}"/>',
    ]
    for i, label in enumerate(labels):
        y = float(height)
        for k, (name, vals) in enumerate(series.items()):
            v = vals[i]
            if not v:
                continue
            h = (height - 16) * v / top
            y -= h
            parts.append(
                f'<rect class="s{k % 6}" x="{pad + i * bw + 1:.1f}" y="{y:.1f}" '
                f'width="{max(bw - 2, 1):.1f}" height="{h:.1f}"><title>{escape(label)}: '
                f"{v} {escape(name)}</title></rect>"
            )
        if i in (0, n // 2, n - 1):
            anchor = "start" if i == 0 else "end" if i == n - 1 else "middle"
            x = pad + i * bw + (0 if i == 0 else bw if i == n - 1 else bw / 2)
            parts.append(
                f'<text class="axis" x="{x:.1f}" y="{height + 16}" text-anchor="{anchor}">'
                f"{escape(label)}</text>"
            )
    parts.append("</svg>")
    return "".join(parts) + legend(list(series))


def legend(names: Sequence[str]) -> str:
    """A legend of coloured swatches (the same classes as the chart)."""
    items = "".join(
        f'<li><svg width="12" height="12" aria-hidden="true"><rect class="s{k % 6}" width="12" '
        f'height="12"/></svg> {escape(name or "(none)")}</li>'
        for k, name in enumerate(names)
    )
    return f'<ul class="legend">{items}</ul>'


def rate_bar(rate: float, *, label: str) -> str:
    """A horizontal bar of a rate in [0, 1]."""
    w = max(0.0, min(1.0, rate)) * 100
    return (
        f'<svg class="rate" viewBox="0 0 100 10" preserveAspectRatio="none" role="img" '
        f'aria-label="{escape(label)}"><rect class="track" width="100" height="10"/>'
        f'<rect class="s0" width="{w:.1f}" height="10"/></svg>'
    )


def lines(series: Mapping[str, Sequence[float]], *, title: str, height: int = 200) -> str:
    """Line chart of values in [0, 1] (the bench learning curves), one line per series."""
    width, pad = 640, 30
    n = max((len(v) for v in series.values()), default=0)
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height + 20}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>',
    ]
    for frac in (0.0, 0.5, 1.0):
        y = height - frac * (height - 10)
        parts.append(
            f'<line class="grid" x1="{pad}" y1="{y:.1f}" x2="{width}" y2="{y:.1f}"/>'
            f'<text class="axis" x="0" y="{y + 4:.1f}">{frac:.1f}</text>'
        )
    step = (width - pad - 10) / max(n - 1, 1)
    for k, (name, vals) in enumerate(series.items()):
        pts = " ".join(
            f"{pad + i * step:.1f},{height - max(0.0, min(1.0, v)) * (height - 10):.1f}"
            for i, v in enumerate(vals)
        )
        parts.append(
            f'<polyline class="line l{k % 6}" points="{pts}"><title>{escape(name)}</title>'
            "</polyline>"
        )
    parts.append("</svg>")
    return "".join(parts) + legend(list(series))
