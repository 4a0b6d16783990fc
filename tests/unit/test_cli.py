"""The ``mimir`` command as a user runs it: a real subprocess per call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

MIMIR = [sys.executable, "-m", "mimir_integrations.cli"]


def mimir(home: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [*MIMIR, *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=180,
        env={**__import__("os").environ, "MIMIR_EMBEDDER": "hash"},
    )
    if ok:
        assert out.returncode == 0, out.stderr
    return out


def test_record_recall_recommend_stats_round_trip(home: Path) -> None:
    rec = mimir(
        home,
        "record",
        "--task",
        "deploy the worker",
        "--action",
        "kubectl apply",
        "--outcome",
        "failure",
        "--reason",
        "OOMKilled exit code 137",
        "--context",
        '{"pod": "worker-1"}',
        "--json",
    )
    exp = json.loads(rec.stdout)
    assert exp["outcome"] == "failure" and exp["context"] == {"pod": "worker-1"}
    mimir(
        home,
        "record",
        "--task",
        "deploy the worker",
        "--action",
        "raise memory limit to 1Gi",
        "--outcome",
        "success",
    )
    hits = json.loads(mimir(home, "recall", "exit code 137", "--json").stdout)
    assert hits[0]["experience"]["id"] == exp["id"]
    human = mimir(home, "recall", "exit code 137").stdout
    assert "OOMKilled" in human and "matched" in human
    recd = json.loads(mimir(home, "recommend", "deploy the worker", "--json").stdout)
    assert recd["action"] == "raise memory limit to 1Gi"
    tries = json.loads(mimir(home, "attempts", "KUBECTL  apply", "--json").stdout)
    assert [h["experience"]["id"] for h in tries] == [exp["id"]]
    human = mimir(home, "attempts", "kubectl apply", "--task", "deploy the worker").stdout
    assert human.startswith("'kubectl apply' was tried 1 time(s) before: worked 0, failed 1")
    bad = mimir(home, "attempts", "kubectl apply", "--match", "fuzzy", ok=False)
    assert bad.returncode != 0 and "match" in bad.stderr and "fuzzy" in bad.stderr
    stats = json.loads(mimir(home, "stats", "--json").stdout)
    assert stats["experiences"] == 2 and stats["by_source"] == {"cli": 2}
    assert json.loads(mimir(home, "reindex", "--json").stdout)["reindexed"] == 2


def test_no_recommendation_is_json_null(home: Path) -> None:
    assert mimir(home, "recommend", "anything", "--json").stdout.strip() == "null"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["record", "--task", "t", "--action", "a", "--outcome", "maybe"], "outcome"),
        (["record", "--task", "", "--action", "a", "--outcome", "success"], "task"),
        (
            ["record", "--task", "t", "--action", "a", "--outcome", "success", "--score", "7"],
            "score",
        ),
        (
            ["record", "--task", "t", "--action", "a", "--outcome", "success", "--context", "{x"],
            "context",
        ),
        (["recall", "q", "-k", "0"], "k"),
    ],
)
def test_errors_are_one_clear_line_and_non_zero(home: Path, args: list[str], message: str) -> None:
    out = mimir(home, *args, ok=False)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mimir: error:") and message in lines[0]
    assert "Traceback" not in out.stderr


def test_doctor_reports_every_check(home: Path) -> None:
    out = json.loads(mimir(home, "doctor", "--json").stdout)
    assert out["ok"] is True
    names = [c["check"] for c in out["checks"]]
    assert names == [
        "python",
        "home",
        "files",
        "disk",
        "embedder",
        "tables",
        "store",
        "contents",
        "lessons",
        "spool",
        "extras",
    ]
    assert (home.stat().st_mode & 0o777) == 0o700


def test_demo_runs_the_whole_loop(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "MIMIR_EMBEDDER": "fastembed", "TMPDIR": str(tmp_path)}
    out = subprocess.run([*MIMIR, "demo"], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for part in ("1. Recording", "2. Recall", "3. Recommend", "alembic upgrade head", "confidence"):
        assert part in text
    # ... and lessons being learned: consolidated, gated, injected, traceable.
    for part in ("5. Consolidate", "lesson(s) (served from now on)", "gate: lift", "<mimir-memory",
                 "7. Every lesson is traceable", "signature: valid", "audit trail"):  # fmt: skip
        assert part in text, part
    assert "Traceback" not in out.stderr
    # The demo store is kept for `mimir ui`, and only it is emptied by the next run.
    kept = tmp_path / f"mimir-demo-{os.getuid()}"
    assert f"mimir ui --home {kept}" in text
    stats = subprocess.run(
        [*MIMIR, "stats", "--json", "--home", str(kept)], capture_output=True, text=True, env=env
    )
    assert json.loads(stats.stdout)["experiences"] > 20, stats.stderr


def test_demo_never_empties_a_directory_it_did_not_make(tmp_path: Path) -> None:
    import os

    foreign = tmp_path / f"mimir-demo-{os.getuid()}"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me")
    env = {**os.environ, "MIMIR_EMBEDDER": "hash", "TMPDIR": str(tmp_path)}
    out = subprocess.run([*MIMIR, "demo"], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    assert (foreign / "precious.txt").read_text() == "keep me"
    assert f"mimir ui --home {foreign}`" not in out.stdout  # a fresh mkdtemp dir instead


def run_cli(
    args: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    env: dict[str, str] | None = None,
) -> tuple[int, str, str]:
    """``mimir ARGS`` in this process (faster than a subprocess): exit code, stdout, stderr."""
    import os

    from mimir_integrations.cli import main

    for name, value in {"MIMIR_EMBEDDER": "hash", **(env or {})}.items():
        monkeypatch.setenv(name, value)
    umask = os.umask(0o077)
    os.umask(umask)
    try:
        code = main(args)
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    finally:
        os.umask(umask)
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str, *needles: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("mimir"), err
    assert "Traceback" not in err and "unexpected error" not in err, err
    for needle in needles:
        assert needle in lines[0], err
    return lines[0]


RECORD = ["record", "--task", "t", "--action", "a", "--outcome", "success"]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        ([*RECORD, "--score", "abc"], ["--score", "'abc'"]),
        (["recommend", "task", "--seed", "abc"], ["--seed", "'abc'"]),
        (["record", "--task", "t"], ["required"]),
        ([*RECORD, "--context", "[" * 3000 + "]" * 3000], ["context", "nested too deeply"]),
        (["stats", "--home", ""], ["--home", "empty"]),
    ],
)
def test_usage_errors_are_one_line_exit_1(
    args: list[str],
    needles: list[str],
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MIMIR_HOME", str(home))
    code, _, err = run_cli(args, monkeypatch, capsys)
    assert code == 1
    one_error_line(err, *needles)
    assert not home.exists()  # never fell back to another store


def test_home_that_is_a_file_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("x")
    for home in (tmp_path / "file", tmp_path / "file" / "sub"):
        code, _, err = run_cli(["stats", "--home", str(home)], monkeypatch, capsys)
        assert code == 1
        one_error_line(err, str(home), "not a directory")


@pytest.mark.parametrize(
    ("var", "value", "needles"),
    [
        ("MIMIR_EMBEDDER", "bogus", ["MIMIR_EMBEDDER", "'bogus'"]),
        ("MIMIR_HALF_LIFE_DAYS", "nan", ["MIMIR_HALF_LIFE_DAYS", "nan"]),
        ("MIMIR_HALF_LIFE_DAYS", "-5", ["MIMIR_HALF_LIFE_DAYS", "-5"]),
        ("MIMIR_AUTO_CONSOLIDATE_FAILURES", "0", ["MIMIR_AUTO_CONSOLIDATE_FAILURES", "0"]),
        ("MIMIR_REDACT_PATTERNS", "not json", ["MIMIR_REDACT_PATTERNS", "'not json'"]),
        ("MIMIR_HOME", "", ["MIMIR_HOME", "empty"]),
    ],
)
def test_bad_settings_are_one_line_naming_the_variable(
    var: str,
    value: str,
    needles: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["stats", "--json"], monkeypatch, capsys, {var: value})
    assert code == 1
    one_error_line(err, *needles)
    assert list(tmp_path.iterdir()) == []  # no store in the current directory


def test_json_output_is_strict_and_human_output_escapes_control_characters(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    reason = "x\x1b[31mRED\x1b[0m\x07bell\rcr"
    args = [*RECORD, "--outcome", "failure", "--reason", reason, "--home", str(home)]
    assert run_cli(args, monkeypatch, capsys)[0] == 0
    code, out, _ = run_cli(["recall", "t a", "--home", str(home)], monkeypatch, capsys)
    assert code == 0 and "RED" in out
    assert not any(c in out for c in "\x1b\x07\r"), repr(out)
    assert "\\x1b[31mRED" in out
    code, out, _ = run_cli(["recall", "t a", "--json", "--home", str(home)], monkeypatch, capsys)
    assert code == 0 and json.loads(out)[0]["experience"]["reason"] == reason


def test_json_output_never_holds_nan(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from mimir_integrations.cli import emit, run_handler

    def handler(args: argparse.Namespace) -> int:
        emit(args, {"score": float("nan")}, lambda: "")
        return 0

    code = run_handler("mimir", handler, argparse.Namespace(json=True))
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    one_error_line(err, "JSON")
