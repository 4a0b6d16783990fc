"""The scoreboard: one self-contained HTML page of the newest benchmark results.

    python -m bench.scoreboard              # newest results -> bench/results/scoreboard.html
    python -m bench.scoreboard --results DIR -o page.html
    python -m bench.scoreboard --learning L.json --perf P.json --run R.json

No server, no script, no external URL: the charts are inline SVG drawn here. The newest learning
result (``learning-*.json``, or the learning part of a ``run-*.json``, whichever was created
last), the newest ``run-*.json`` and the newest performance result (``perf-*.json`` or the perf
part of the run) are shown; a full run is preferred to a newer quick one. Every number on the
page carries ``data-src="<source>:<path>"`` (a ``/``-separated path into that source's JSON)
and ``data-value`` (the exact value), and the sources' files are listed in the page
(``#sources``), so each figure can be traced to its JSON.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
COLOURS = {
    "cold": "#8c8c8c",
    "naive": "#e69f00",
    "warm": "#0072b2",
    "mimir_learn": "#cc3311",
    "oracle": "#009e73",
}
W, H, PAD = 560, 300, 44


# -- loading ---------------------------------------------------------------------------------


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def find_sources(results: Path) -> dict[str, tuple[str, dict[str, Any], list[str]]]:
    """name -> (file, JSON, path prefix inside it) of the learning, perf and run results: for
    each, the newest full result, else the newest quick one."""
    found: dict[str, list[tuple[bool, str, str, dict[str, Any], list[str]]]] = {
        "learning": [],
        "perf": [],
        "run": [],
    }
    for path in sorted(results.glob("*.json")):
        data = _load(path)
        if data is None:
            continue
        quick = path.stem.endswith("-quick") or data.get("mode") == "quick"
        if path.name.startswith("learning-") and "lift" in data.get("figures", {}):
            # WARM's page: a run of the generic arms alone (no WARM, no lift) is not its subject
            found["learning"].append((not quick, data.get("created", ""), str(path), data, []))
        elif path.name.startswith("perf-") and "recall" in data:
            quick = quick or bool(data.get("config", {}).get("quick"))
            found["perf"].append((not quick, data.get("date", ""), str(path), data, []))
        elif path.name.startswith("run-") and "parts" in data:
            found["run"].append((not quick, data.get("created", ""), str(path), data, []))
            learn = (data["parts"].get("learning") or {}).get("result")
            if learn and "figures" in learn:
                at = ["parts", "learning", "result"]
                found["learning"].append(
                    (not quick, learn.get("created", ""), str(path), learn, at)
                )
            perf = (data["parts"].get("perf") or {}).get("result")
            if perf and "recall" in perf:
                at = ["parts", "perf", "result"]
                found["perf"].append((not quick, perf.get("date", ""), str(path), perf, at))
    out = {}
    for name, items in found.items():
        if items:
            *_key, file, data, prefix = max(items, key=lambda it: (it[0], it[1], it[2]))
            out[name] = (file, data, prefix)
    return out


# -- HTML helpers ----------------------------------------------------------------------------


class Page:
    """Builds the page; ``num`` renders a traceable number."""

    def __init__(self, sources: dict[str, tuple[str, dict[str, Any], list[str]]]) -> None:
        self.sources = sources
        self.parts: list[str] = []

    def get(self, src: str, path: list[Any]) -> Any:
        d: Any = self.sources[src][1]
        for k in path:
            d = d[k]
        return d

    def attrs(self, src: str, path: list[Any]) -> str:
        full = [*self.sources[src][2], *path]
        value = self.get(src, path)
        return (
            f' data-src="{html.escape(src)}:{html.escape("/".join(str(p) for p in full))}"'
            f' data-value="{html.escape(json.dumps(value))}"'
        )

    def num(self, src: str, path: list[Any], digits: int = 3, sign: bool = False) -> str:
        """A ``<td>`` with the value at ``path`` of source ``src`` (or ``-`` if absent)."""
        try:
            value = self.get(src, path)
        except (KeyError, IndexError, TypeError):
            return "<td>-</td>"
        if value is None:
            return f"<td{self.attrs(src, path)}>-</td>"
        if isinstance(value, bool):
            text = "yes" if value else "no"
        elif isinstance(value, (int, float)):
            text = f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"
        else:
            text = html.escape(str(value))
        return f'<td class="n"{self.attrs(src, path)}>{text}</td>'


def _x(i: float, n: float) -> float:
    return PAD + (W - 2 * PAD) * (i / n if n else 0)


def _y(v: float, top: float) -> float:
    return H - PAD - (H - 2 * PAD) * (v / top if top else 0)


def _axes(
    top: float, xmax: float, xlabel: str, ylabel: str, ticks: int = 4, xticks: bool = True
) -> str:
    out = [
        f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" class="axis"/>',
        f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" class="axis"/>',
        f'<text x="{W / 2}" y="{H - 8}" class="lbl" text-anchor="middle">{xlabel}</text>',
        f'<text x="12" y="{H / 2}" class="lbl" text-anchor="middle" '
        f'transform="rotate(-90 12 {H / 2})">{ylabel}</text>',
    ]
    for t in range(ticks + 1):
        v = top * t / ticks
        y = _y(v, top)
        out.append(f'<line x1="{PAD}" y1="{y:.1f}" x2="{W - PAD}" y2="{y:.1f}" class="grid"/>')
        out.append(
            f'<text x="{PAD - 4}" y="{y + 4:.1f}" class="tick" text-anchor="end">{v:g}</text>'
        )
    for t in range(ticks + 1 if xticks else 0):
        v = xmax * t / ticks
        out.append(
            f'<text x="{_x(v, xmax):.1f}" y="{H - PAD + 14}" class="tick" '
            f'text-anchor="middle">{v:g}</text>'
        )
    return "".join(out)


def _legend(names: list[str]) -> str:
    out = []
    for i, name in enumerate(names):
        x = PAD + 8 + i * 110
        out.append(
            f'<rect x="{x}" y="8" width="12" height="12" fill="{COLOURS.get(name, "#333")}"/>'
            f'<text x="{x + 16}" y="18" class="tick">{html.escape(name.upper())}</text>'
        )
    return "".join(out)


def _svg(chart_id: str, title: str, body: str) -> str:
    return (
        f'<svg id="{chart_id}" class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
        f'role="img" aria-label="{html.escape(title)}"><title>{html.escape(title)}</title>'
        f"{body}</svg>"
    )


# -- sections --------------------------------------------------------------------------------


def learning_section(p: Page) -> str:
    if "learning" not in p.sources:
        return "<section><h2>Learning</h2><p>No learning results found.</p></section>"
    res = p.sources["learning"][1]
    f, c = res["figures"], res["config"]
    arms = [a for a in c["arms"] if a in f["arms"]]
    ends = f["window_ends"]
    n = ends[-1]
    out = [
        "<section id='learning'><h2>Learning: does memory make the agent better?</h2>",
        f"<p>{len(c['seeds'])} seeds × {c['tasks']} tasks, embedder "
        f"{html.escape(str(c['embedder']))}, consolidation every {c['consolidate_every']} tasks; "
        f"{res['seconds']} s on {html.escape(str(res['machine'].get('platform', '')))} "
        f"({res['machine'].get('cpus')} CPUs, load {res['machine'].get('load_avg')}).</p>",
    ]
    # learning curves with the seed band (min..max)
    body = [_axes(1.0, n, "tasks", "success rate per window"), _legend([*arms, "oracle"])]
    for arm in arms:
        curve = f["arms"][arm]["curve"]
        col = COLOURS.get(arm, "#333")
        upper = " ".join(
            f"{_x(e, n):.1f},{_y(pt['max'], 1):.1f}" for e, pt in zip(ends, curve, strict=True)
        )
        lower = " ".join(
            f"{_x(e, n):.1f},{_y(pt['min'], 1):.1f}"
            for e, pt in reversed(list(zip(ends, curve, strict=True)))
        )
        body.append(f'<polygon points="{upper} {lower}" fill="{col}" fill-opacity="0.12"/>')
        pts = " ".join(
            f"{_x(e, n):.1f},{_y(pt['mean'], 1):.1f}" for e, pt in zip(ends, curve, strict=True)
        )
        body.append(
            f'<polyline class="curve" data-arm="{arm}" points="{pts}" fill="none" '
            f'stroke="{col}" stroke-width="2"/>'
        )
        for i, (e, pt) in enumerate(zip(ends, curve, strict=True)):
            body.append(
                f'<circle cx="{_x(e, n):.1f}" cy="{_y(pt["mean"], 1):.1f}" r="3" fill="{col}"'
                f"{p.attrs('learning', ['figures', 'arms', arm, 'curve', i, 'mean'])}>"
                f"<title>{arm} tasks {e}: {pt['mean']:.3f} (seeds {pt['min']:.3f}..{pt['max']:.3f})"
                "</title></circle>"
            )
    oy = _y(f["oracle_success"]["mean"], 1)
    body.append(
        f'<line x1="{PAD}" y1="{oy:.1f}" x2="{W - PAD}" y2="{oy:.1f}" stroke="{COLOURS["oracle"]}" '
        f'stroke-dasharray="5 4"{p.attrs("learning", ["figures", "oracle_success", "mean"])}/>'
    )
    out.append("<h3>Learning curves (mean over seeds; band: min..max over seeds)</h3>")
    out.append(_svg("chart-curves", "success rate per window, by arm", "".join(body)))

    # arm comparison
    rows = []
    for arm in arms:
        a = ["figures", "arms", arm]
        rows.append(
            f"<tr><th>{arm.upper()}</th>{p.num('learning', [*a, 'success', 'mean'])}"
            f"{p.num('learning', [*a, 'success', 'min'])}"
            f"{p.num('learning', [*a, 'success', 'max'])}"
            f"{p.num('learning', [*a, 'success', 'ci_low'])}"
            f"{p.num('learning', [*a, 'success', 'ci_high'])}"
            f"{p.num('learning', [*a, 'second_half_success', 'mean'])}"
            f"{p.num('learning', [*a, 'regret', 'mean'], 1)}"
            f"{p.num('learning', [*a, 'repeat_mistake_rate', 'mean'])}"
            f"{p.num('learning', [*a, 'seconds_per_task'], 4)}</tr>"
        )
    rows.append(
        f"<tr><th>ORACLE</th>{p.num('learning', ['figures', 'oracle_success', 'mean'])}"
        "<td></td><td></td><td></td><td></td><td></td><td></td><td></td><td></td></tr>"
    )
    out.append(
        "<h3>Arms side by side</h3><table id='arms'><thead><tr><th>arm</th><th>success</th>"
        "<th>min</th><th>max</th><th>95% CI low</th><th>95% CI high</th><th>2nd half</th>"
        "<th>regret</th><th>repeat-mistake rate</th><th>s/task</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )
    # success bars with CI whiskers
    body = [_axes(1.0, len(arms), "", "success rate", xticks=False)]
    bw = (W - 2 * PAD) / max(1, len(arms))
    for i, arm in enumerate(arms):
        s = f["arms"][arm]["success"]
        x0 = PAD + i * bw + bw * 0.2
        col = COLOURS.get(arm, "#333")
        body.append(
            f'<rect class="bar" x="{x0:.1f}" y="{_y(s["mean"], 1):.1f}" width="{bw * 0.6:.1f}" '
            f'height="{_y(0, 1) - _y(s["mean"], 1):.1f}" fill="{col}" fill-opacity="0.8"'
            f"{p.attrs('learning', ['figures', 'arms', arm, 'success', 'mean'])}/>"
        )
        cx = x0 + bw * 0.3
        body.append(
            f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{_y(s["ci_low"], 1):.1f}" '
            f'y2="{_y(s["ci_high"], 1):.1f}" stroke="#000" stroke-width="1.5"/>'
            f'<text x="{cx:.1f}" y="{H - PAD + 14}" class="tick" text-anchor="middle">'
            f"{arm.upper()}</text>"
        )
    out.append(_svg("chart-arms", "success rate by arm with 95% CI over seeds", "".join(body)))
    lifts = []
    for other, lift in f["lift"].items():
        path = ["figures", "lift", other]
        verdict = "beyond noise" if lift["beyond_noise"] else "noise"
        lifts.append(
            f"<tr><th>WARM − {other.upper()}</th>{p.num('learning', [*path, 'mean'], 3, True)}"
            f"{p.num('learning', [*path, 'ci_low'], 3, True)}"
            f"{p.num('learning', [*path, 'ci_high'], 3, True)}"
            f'<td class="verdict {"ok" if lift["beyond_noise"] else "noise"}"'
            f"{p.attrs('learning', [*path, 'beyond_noise'])}>{verdict}</td></tr>"
        )
    until = f["tasks_until_warm_beats_cold"]
    out.append(
        "<h3>Lift (a lift whose 95% CI includes 0 is noise, not a result)</h3>"
        "<table id='lift'><thead><tr><th>comparison</th><th>lift</th><th>CI low</th>"
        "<th>CI high</th><th>verdict</th></tr></thead><tbody>" + "".join(lifts) + "</tbody></table>"
        f"<p>Tasks until WARM beats COLD beyond noise: <span class='n'"
        f"{p.attrs('learning', ['figures', 'tasks_until_warm_beats_cold'])}>"
        f"{until if until is not None else 'never'}"
        "</span>.</p>"
    )
    # regret curves
    top = max(max(f["arms"][a]["regret_curve"]) for a in arms) or 1.0
    top = float(f"{top * 1.1:.2g}")
    body = [_axes(top, n, "tasks", "cumulative regret"), _legend(arms)]
    for arm in arms:
        col = COLOURS.get(arm, "#333")
        rc = f["arms"][arm]["regret_curve"]
        pts = " ".join(f"{_x(e, n):.1f},{_y(v, top):.1f}" for e, v in zip(ends, rc, strict=True))
        body.append(
            f'<polyline class="curve" data-arm="{arm}" points="{pts}" fill="none" '
            f'stroke="{col}" stroke-width="2"/>'
        )
        for i, (e, v) in enumerate(zip(ends, rc, strict=True)):
            body.append(
                f'<circle cx="{_x(e, n):.1f}" cy="{_y(v, top):.1f}" r="2.5" fill="{col}"'
                f"{p.attrs('learning', ['figures', 'arms', arm, 'regret_curve', i])}/>"
            )
    out.append("<h3>Cumulative regret against the oracle (mean over seeds)</h3>")
    out.append(_svg("chart-regret", "cumulative regret by arm", "".join(body)))
    # calibration: recommend's expected success (new JSON; "lower_bound" beside it) or, in older
    # results, its 5% lower bound
    point = "lower_bound" in f
    cals = [("warm", ["figures", "calibration"])]
    if "calibration_mimir_learn" in f:
        cals.append(("mimir_learn", ["figures", "calibration_mimir_learn"]))
    stated = "recommend's expected success" if point else "stated confidence (10% lower bound)"
    body = [_axes(1.0, 1.0, stated, "observed success")]
    body.append(
        f'<line x1="{_x(0, 1)}" y1="{_y(0, 1)}" x2="{_x(1, 1)}" y2="{_y(1, 1)}" '
        'stroke="#999" stroke-dasharray="3 3"/>'
    )
    body.append(_legend([a for a, _ in cals]))
    cal_rows = []
    for arm, path in cals:
        cal = p.get("learning", path)
        col = COLOURS.get(arm, "#333")
        if point and arm != "warm" and "lower_bound" not in cal:  # an older arm figure: the
            cal_rows.append(  # lower bound only, not comparable with the point estimate
                f"<tr><th>{arm.upper()}</th>{p.num('learning', [*path, 'n'], 0)}<td>-</td>"
                f"<td>-</td>{p.num('learning', [*path, 'coverage'])}"
                f"{p.num('learning', [*path, 'overconfidence'])}</tr>"
            )
            continue
        for i, b in enumerate(cal["bins"]):
            r = 2 + min(8.0, b["n"] ** 0.5 / 2)
            body.append(
                f'<circle cx="{_x(b["predicted"], 1):.1f}" cy="{_y(b["observed"], 1):.1f}" '
                f'r="{r:.1f}" fill="{col}" fill-opacity="0.7"'
                f"{p.attrs('learning', [*path, 'bins', i, 'observed'])}>"
                f"<title>{arm}: stated {b['predicted']:.3f}, observed {b['observed']:.3f}, "
                f"n={b['n']}</title></circle>"
            )
        if point:
            low = ["figures", "lower_bound"] if arm == "warm" else [*path, "lower_bound"]
        else:
            low = path
        cal_rows.append(
            f"<tr><th>{arm.upper()}</th>{p.num('learning', [*path, 'n'], 0)}"
            f"{p.num('learning', [*path, 'ece'])}{p.num('learning', [*path, 'ece_vs_rate'])}"
            f"{p.num('learning', [*path, 'ece_floor'])}"
            f"{p.num('learning', [*low, 'coverage'])}"
            f"{p.num('learning', [*low, 'overconfidence'])}</tr>"
        )
    out.append(f"<h3>Calibration of recommend ({stated} against observed success)</h3>")
    out.append(_svg("chart-calibration", "calibration: stated vs observed", "".join(body)))
    out.append(
        "<table id='calibration'><thead><tr><th>arm</th><th>n</th><th>ECE</th>"
        "<th>ECE vs hidden rate</th><th>a perfect forecast's ECE here (median)</th>"
        "<th>10% lower bound: coverage (promise &ge; 0.90)</th>"
        "<th>lower bound: overconfidence</th></tr></thead><tbody>"
        + "".join(cal_rows)
        + "</tbody></table>"
    )
    # repeat mistakes and lessons
    les = ["figures", "lessons"]
    out.append(
        "<h3>Repeat mistakes and lessons</h3><table id='lessons'><tbody>"
        f"<tr><th>repeat-mistake ratio WARM / COLD</th>"
        f"{p.num('learning', ['figures', 'repeat_mistake_ratio_warm_cold'])}</tr>"
        f"<tr><th>lessons admitted</th>{p.num('learning', [*les, 'admitted'], 0)}</tr>"
        "<tr><th>of which help (by the hidden rates)</th>"
        f"{p.num('learning', [*les, 'helpful'], 0)}</tr>"
        f"<tr><th>lesson precision</th>{p.num('learning', [*les, 'precision'])}</tr>"
        f"<tr><th>active at the end</th>{p.num('learning', [*les, 'active_at_end'], 0)}</tr>"
        f"<tr><th>active at the end but stale after drift</th>"
        f"{p.num('learning', [*les, 'active_at_end_stale'], 0)}</tr>"
        "</tbody></table>"
    )
    notes = res.get("notes") or []
    if notes:
        out.append(
            "<ul class='notes'>" + "".join(f"<li>{html.escape(x)}</li>" for x in notes) + "</ul>"
        )
    out.append("</section>")
    return "".join(out)


def perf_section(p: Page) -> str:
    out = ["<section id='performance'><h2>Performance</h2>"]
    if "perf" in p.sources:
        perf = p.sources["perf"][1]
        m = perf.get("machine", {})
        out.append(
            f"<p>{html.escape(str(perf.get('command', '')))} at "
            f"{html.escape(str(perf.get('date')))}"
            f" on {m.get('cores')} cores ({html.escape(str(m.get('cpu')))}), load at start "
            f"{m.get('loadavg_at_start')}. Milliseconds; p50 / p95 over interleaved rounds.</p>"
        )
        sizes = list(perf.get("load", {}))
        rows = []
        for what in ("recall", "recommend"):
            for variant in ("mimir", "mimir_no_embed", "numpy", "mimir_learn"):
                cells = []
                for size in sizes:
                    key = f"{variant}@{size}"
                    cells.append(p.num("perf", [what, key, "p50"], 1))
                    cells.append(p.num("perf", [what, key, "p95"], 1))
                if any("data-src" in c for c in cells):
                    rows.append(f"<tr><th>{what} {variant}</th>{''.join(cells)}</tr>")
        head = "".join(f"<th>{s} p50</th><th>{s} p95</th>" for s in sizes)
        out.append(
            f"<table id='perf'><thead><tr><th>ms</th>{head}</tr></thead><tbody>"
            + "".join(rows)
            + "</tbody></table>"
        )
        disk = "".join(
            f"<tr><th>{s}</th>{p.num('perf', ['load', s, 'rows'], 0)}"
            f"{p.num('perf', ['load', s, 'disk_mb'], 1)}</tr>"
            for s in sizes
        )
        out.append(
            "<table id='disk'><thead><tr><th>store</th><th>rows</th><th>disk MB</th></tr>"
            f"</thead><tbody>{disk}</tbody></table>"
        )
    if "run" in p.sources:
        s = ["summary"]
        run = p.sources["run"][1]
        summ = run.get("summary", {})
        rows = []

        def row(label: str, path: list[Any], digits: int = 1) -> None:
            try:
                p.get("run", path)
            except (KeyError, IndexError, TypeError):
                return
            rows.append(f"<tr><th>{html.escape(label)}</th>{p.num('run', path, digits)}</tr>")

        row("capture hook p50 (ms)", [*s, "hook", "capture_p50_ms"])
        row("bare python -c pass p50 (ms)", [*s, "hook", "bare_p50_ms"])
        row("capture / bare (wall)", [*s, "hook", "capture_over_bare"], 2)
        row("capture / bare (CPU)", [*s, "hook", "capture_over_bare_cpu"], 2)
        row("inject hook p50 (ms)", [*s, "hook", "inject_p50_ms"])
        row("spool drain (records/s, real MiniLM)", [*s, "spool_drain_records_per_s"])
        row("MCP start-up to tools/list (median ms)", [*s, "mcp", "tools_list_median_ms"])
        row("python -c pass (median ms)", [*s, "mcp", "python_pass_median_ms"])
        row("MCP first tools/call (median ms)", [*s, "mcp", "first_call_median_ms"])
        for k in summ.get("consolidation_seconds_per_1000", {}):
            row(f"consolidation s per 1,000 (at {k})", [*s, "consolidation_seconds_per_1000", k], 2)
        for k in summ.get("disk_mb_per_100k", {}):
            row(f"disk MB per 100k experiences (at {k})", [*s, "disk_mb_per_100k", k])
        for size, lat in summ.get("latency", {}).items():
            for what in ("lessons", "context"):
                if what in lat:
                    row(f"{what} p50 ms at {size}", [*s, "latency", size, what, "p50_ms"])
                    row(f"{what} p95 ms at {size}", [*s, "latency", size, what, "p95_ms"])
        for part in summ.get("rss_peak_mb", {}):
            row(f"peak RSS of {part} (MB)", [*s, "rss_peak_mb", part])
        m = run.get("machine", {})
        out.append(
            f"<h3>One run ({html.escape(str(run.get('mode')))}, "
            f"{html.escape(str(run.get('created')))}, {run.get('seconds')} s on "
            f"{m.get('cores')} cores, load {m.get('loadavg_at_start')})</h3>"
            "<table id='run'><tbody>" + "".join(rows) + "</tbody></table>"
        )
    if len(out) == 1:
        out.append("<p>No performance results found.</p>")
    out.append("</section>")
    return "".join(out)


CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;color:#222;
padding:0 16px}
h1{font-size:22px}h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
table{border-collapse:collapse;margin:8px 0 16px}td,th{padding:3px 9px;border-bottom:1px solid #eee}
th{text-align:left;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
svg.chart{background:#fafafa;border:1px solid #e5e5e5;margin:4px 12px 12px 0}
.axis{stroke:#444}.grid{stroke:#e4e4e4}.tick,.lbl{font-size:11px;fill:#444}
.verdict.ok{color:#0a6b2f;font-weight:600}.verdict.noise{color:#a15c00;font-weight:600}
code{background:#f3f3f3;padding:1px 4px}
"""


def build(sources: dict[str, tuple[str, dict[str, Any], list[str]]]) -> str:
    p = Page(sources)
    listing = {name: {"file": v[0], "path": "/".join(v[2])} for name, v in sources.items()}
    listing_json = json.dumps(listing).replace("</", "<\\/")  # safe inside <script>
    src_rows = "".join(
        f"<li>{html.escape(name)}: <code>{html.escape(v['file'])}</code>"
        f"{(' at ' + html.escape(v['path'])) if v['path'] else ''}</li>"
        for name, v in listing.items()
    )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<title>Mimir benchmark scoreboard</title>"
        f"<style>{CSS}</style></head><body><h1>Mimir benchmark scoreboard</h1>"
        "<p>Reproduce: <code>python -m bench</code> (or <code>--quick</code>), then "
        "<code>python -m bench.scoreboard</code>. Every number carries <code>data-src</code> "
        "(source:path into its JSON) and <code>data-value</code>.</p>"
        f"<ul id='sources'>{src_rows}</ul>"
        "<script type='application/json' id='sources-json'>"
        f"{listing_json}"
        "</script>"
        f"{learning_section(p)}{perf_section(p)}</body></html>\n"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.scoreboard", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--results", type=Path, default=RESULTS, help="the results directory")
    ap.add_argument(
        "-o", "--out", type=Path, help="the HTML file (default: <results>/scoreboard.html)"
    )
    for name in ("learning", "perf", "run"):
        ap.add_argument(f"--{name}", type=Path, help=f"this {name} JSON instead of the newest")
    args = ap.parse_args(argv)
    sources = find_sources(args.results) if args.results.is_dir() else {}
    for name in ("learning", "perf", "run"):
        path = getattr(args, name)
        if path is not None:
            data = _load(path)
            if data is None:
                print(f"error: cannot read {name} JSON {path}", file=sys.stderr)
                return 1
            at: list[str] = []
            if name != "run" and "parts" in data:  # a run JSON: its learning or perf part
                at = ["parts", name, "result"]
                data = (data["parts"].get(name) or {}).get("result")
            if (
                not isinstance(data, dict)
                or ("figures" if name == "learning" else "recall") not in data
            ):
                print(f"error: {path} holds no {name} result", file=sys.stderr)
                return 1
            sources[name] = (str(path), data, at)
    if not sources:
        print(f"error: no benchmark results in {args.results}", file=sys.stderr)
        return 1
    out = args.out or args.results / "scoreboard.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(build(sources), encoding="utf-8")
    print(f"wrote {out} ({', '.join(f'{k}: {v[0]}' for k, v in sources.items())})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
