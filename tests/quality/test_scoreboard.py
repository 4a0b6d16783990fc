"""``python -m bench.scoreboard`` in a real headless Chromium (Debian's, driven by Playwright).

The results are real: a tiny learning run of the real harness (hash embedder, 2 seeds x 16
tasks, COLD / NAIVE / WARM), the newest performance result committed under ``bench/results``,
and a run JSON made by ``bench.run``'s own summary of them. The page must render its charts
(SVG with non-zero size), make no network request and log no error, and every number it shows
must be the one in the JSON it names (``data-src`` / ``data-value``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
REPO = Path(__file__).resolve().parents[2]
CHARTS = ("chart-curves", "chart-arms", "chart-regret", "chart-calibration")

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bench import learning, run
    from bench.synthetic import machine_info

    out = tmp_path_factory.mktemp("results")
    cfg = learning.Config(seeds=(0, 1), tasks=16, consolidate_every=8, window=4, embedder="hash")
    res = learning.run(cfg)
    (out / "learning-20990101-000000.json").write_text(json.dumps(res))
    perfs = [json.loads(p.read_text()) for p in (REPO / "bench" / "results").glob("perf-*.json")]
    assert perfs, "no committed perf result under bench/results"
    perf = max(perfs, key=lambda d: (len(d.get("load", {})), d.get("date", "")))  # a full run
    parts = {"perf": {"result": perf, "rss_peak_mb": 123.4, "exit": 0, "seconds": 1.0}}
    run_json = {
        "bench": "mimir run",
        "mode": "quick",
        "created": "2099-01-01T00:00:00+00:00",
        "seconds": 1.0,
        "machine": machine_info(),
        "parts": parts,
        "summary": run.summarise(parts),
    }
    (out / "run-20990101-000000.json").write_text(json.dumps(run_json))
    return out


def _resolve(files: dict[str, Any], src: str) -> Any:
    name, _, path = src.partition(":")
    d: Any = json.loads(Path(files[name]["file"]).read_text())
    for key in path.split("/") if path else []:
        d = d[int(key)] if isinstance(d, list) else d[key]
    return d


def test_scoreboard_renders_and_matches_the_json(results: Path, tmp_path: Path) -> None:
    from playwright import sync_api

    from bench import scoreboard

    page_path = tmp_path / "scoreboard.html"
    assert scoreboard.main(["--results", str(results), "-o", str(page_path)]) == 0
    text = page_path.read_text()
    assert "http://" not in text and "https://" not in text  # no external URL at all

    url = page_path.as_uri()
    errors: list[str] = []
    requests: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("request", lambda r: requests.append(r.url) if r.url != url else None)
        page.goto(url)
        page.screenshot(path=str(tmp_path / "scoreboard.png"), full_page=True)
        sizes = {}
        for chart in CHARTS:
            box = page.locator(f"svg#{chart}").bounding_box()
            assert box is not None, chart
            sizes[chart] = (box["width"], box["height"])
            marks = page.locator(f"svg#{chart} circle, svg#{chart} rect.bar")
            assert marks.count() > 0, chart
            first = marks.first.bounding_box()
            assert first is not None and first["width"] > 0 and first["height"] > 0, chart
        curves = page.locator("svg#chart-curves polyline.curve")
        assert sorted(curves.evaluate_all("els => els.map(e => e.dataset.arm)")) == [
            "cold",
            "naive",
            "warm",
        ]
        for i in range(curves.count()):
            box = curves.nth(i).bounding_box()
            assert box is not None and box["width"] > 100 and box["height"] > 0
        cells = page.locator("[data-src]").evaluate_all(
            "els => els.map(e => [e.dataset.src, e.dataset.value, e.tagName, e.textContent])"
        )
        files = json.loads(page.locator("#sources-json").text_content() or "{}")
        browser.close()

    assert errors == [] and requests == []
    assert all(w > 0 and h > 0 for w, h in sizes.values()), sizes
    assert set(files) == {"learning", "perf", "run"}
    srcs = {c[0] for c in cells}
    for needed in (
        "learning:figures/lift/cold/mean",
        "learning:figures/arms/warm/success/mean",
        "learning:figures/calibration/ece",
        "learning:figures/lessons/precision",
        "learning:figures/repeat_mistake_ratio_warm_cold",
        "run:summary/rss_peak_mb/perf",
    ):
        assert needed in srcs, needed
    assert any(s.startswith("perf:") and s.endswith("recall/mimir@100k/p95") for s in srcs)
    shown = 0
    for src, raw, tag, content in cells:
        value = _resolve(files, src)
        assert json.loads(raw) == value, src  # the attribute is the JSON's value
        if tag != "TD" or not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        digits = len(content.split(".")[1]) if "." in content else 0
        assert math.isclose(float(content), value, abs_tol=0.5 * 10**-digits + 1e-9), (
            src,
            content,
            value,
        )
        shown += 1
    assert shown > 60, shown
