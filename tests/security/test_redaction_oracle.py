"""Redaction against an outside oracle, and its false positives on the project's coding text.

detect-secrets 1.5.0 (the dev extra) scans a seeded corpus of prose and commands with secrets
of every format Mimir knows bare; every string it flags must be gone after ``sanitize``. Its
findings on values planted to stay (git SHAs in a git context, digests) are the documented
allowlist, counted apart. Then the project's own texts (the labelled retrieval set, the learning
bench's streams, the synthetic experiences, the conversations benchmark) must come out of
redaction unchanged. ``bench.redaction`` reports the same figures at a larger size.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.redaction import (
    conversation_texts,
    detect_secrets_oracle,
    gitleaks_generic,
    labelled_texts,
    learning_texts,
    make_corpus,
    synthetic_texts,
)
from mimir_core.redact.core import sanitize

ROOT = Path(__file__).resolve().parents[2]


def test_every_oracle_finding_is_redacted() -> None:
    oracle = detect_secrets_oracle()
    flagged, allowlisted, misses = 0, 0, []
    types: set[str] = set()
    for item in make_corpus(seed=30, n=6):
        out = sanitize(item.text)
        for line in item.text.splitlines():
            for kind, value in oracle(line):
                if item.keep:
                    # only the planted keep values may be flagged in a keep text
                    assert any(value in k or k in value for k in item.keep), (value, item.text)
                    allowlisted += 1
                    continue
                flagged += 1
                types.add(kind)
                if value in out:
                    misses.append((kind, value, item.text))
    assert misses == []
    assert flagged >= 150, flagged  # the oracle really looked at secrets
    assert {"Base64 High Entropy String", "Hex High Entropy String", "AWS Access Key"} <= types
    assert allowlisted > 0  # git SHAs and digests the oracle flags, kept on purpose


def test_planted_secrets_and_keep_values() -> None:
    corpus = make_corpus(seed=31, n=6)
    leaked = [(s, i.fmt) for i in corpus for s in i.secrets if s in sanitize(i.text)]
    assert len(leaked) <= 2, leaked  # the rare random draw that is no more random than a name
    broken = [i.text for i in corpus if i.keep and sanitize(i.text) != i.text]
    assert broken == []


def test_gitleaks_generic_rule_port_findings_are_redacted() -> None:
    corpus = [i for i in make_corpus(seed=32, n=10) if i.fmt == "gitleaks_generic"]
    found = [(v, i.text) for i in corpus for v in gitleaks_generic(i.text)]
    assert len(found) >= 10
    assert [(v, t) for v, t in found if v in sanitize(t)] == []


@pytest.mark.parametrize(
    "source",
    ["labelled", "learning", "synthetic", "conversations"],
)
def test_project_coding_text_is_not_changed(source: str) -> None:
    texts = {
        "labelled": labelled_texts,
        "learning": lambda: learning_texts(quick=True),
        "synthetic": lambda: synthetic_texts(quick=True),
        "conversations": conversation_texts,
    }[source]()
    assert len(texts) > 100
    changed = [t for t in texts if sanitize(t) != t]
    assert changed == []


def test_bench_redaction_quick_smoke(tmp_path: Path) -> None:
    out = tmp_path / "redaction.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.redaction", "--quick", "--n", "1", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data == json.loads(proc.stdout)
    assert data["oracle_flagged"] > 0 and data["oracle_recall"] == 1.0
    assert 0.0 <= data["planted_recall"] <= 1.0
    fps = data["false_positives"]
    assert set(fps) == {
        "coding_text",
        "labelled_set",
        "learning_bench",
        "synthetic",
        "conversations",
    }
    assert all(v["texts"] > 0 and v["changed"] == 0 for v in fps.values())
