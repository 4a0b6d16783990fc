"""Smoke test of ``python -m bench.ab``: two revisions side by side (here HEAD against this
checkout, on small fresh stores). No timing thresholds: the machine is shared and noisy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.slow
def test_ab_compares_two_revisions_and_reports_ratios_and_agreement(tmp_path: Path) -> None:
    env = dict(os.environ, HOME=str(tmp_path), HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "bench.ab", "HEAD", "--sizes", "2k", "--queries", "6"),
            *("--out-dir", str(tmp_path / "results")),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = (tmp_path / "results").glob("ab-*.json")
    res = json.loads(path.read_text())
    assert res["base"] == "HEAD" and res["queries"] == 6
    for op in ("recall", "recommend"):
        r = res["sizes"]["2k"][op]
        assert r["base"]["n"] == r["head"]["n"] == 6
        assert r["base"]["p50"] > 0 and r["head"]["p95"] >= r["head"]["p50"]
        assert r["head_over_base_p50"] > 0
        # the same code on the same generated store gives the same answers
        assert r["same_answer"] == 6, r
    assert "head/base" in proc.stdout
