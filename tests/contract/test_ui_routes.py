"""``mimir ui`` routes on a real store: every page and action, bad ids, forged requests."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("jinja2")

from starlette.testclient import TestClient

from mimir_core import Mimir
from mimir_core.lessons.lifecycle import insert
from mimir_core.types import Lesson
from mimir_integrations.ui.app import create_app
from mimir_integrations.ui.cli import check_host

TOKEN = "test-token-0123456789"
RULE = "Run `alembic upgrade head` before `pytest tests/integration` in payments-api"
SHOWN = "<code>pytest tests/integration</code> in payments-api"  # backticks become code


def seed(m: Mimir) -> dict[str, Any]:
    """A small store: failures, successes with the lesson in context, and one lesson."""
    fails = [
        m.record_failure(
            "run the payments integration tests",
            "pytest tests/integration",
            'UndefinedTable: relation "orders" does not exist',
            source="claude-code",
        )
        for _ in range(3)
    ]
    wins = [
        m.record(
            "run the payments integration tests",
            "alembic upgrade head && pytest tests/integration",
            "success",
            recalled_lesson_ids=["les_alembic"],
        )
        for _ in range(3)
    ]
    other = m.record("build the docker image", "docker build -t app .", "success")
    lesson = insert(
        m.deps,
        [
            Lesson(
                id="les_alembic",
                status="active",
                rule=RULE,
                trigger="run the payments integration tests",
                kind="prefer",
                action="alembic upgrade head && pytest tests/integration",
                supporting_ids=[w.id for w in wins],
                contradicting_ids=[],
                confidence=0.61,
            )
        ],
        actor="test",
        event="admitted",
    )[0]
    return {"fails": fails, "wins": wins, "other": other, "lesson": lesson}


@pytest.fixture
def seeded(hash_mimir: Mimir) -> dict[str, Any]:
    return seed(hash_mimir)


@pytest.fixture
def client(hash_mimir: Mimir, seeded: dict[str, Any], tmp_path: Path) -> Iterator[TestClient]:
    bench = tmp_path / "results"
    bench.mkdir()
    app = create_app(hash_mimir, token=TOKEN, bench_dir=bench)
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as c:
        yield c


def test_overview_shows_counts_charts_families_and_injections(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200
    html = r.text
    assert '<div class="num" id="n-exp">7</div>' in html
    assert html.count('<svg class="chart"') == 2
    assert "run the payments integration tests" in html  # a task family
    assert 'href="/lessons/les_alembic"' in html  # injected and latest lessons
    assert '<script src="/static/app.js"' in html
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing fetched from elsewhere


def test_static_assets_are_served_locally(client: TestClient) -> None:
    assert "prefers-color-scheme: dark" in client.get("/static/app.css").text
    assert "/api/feed" in client.get("/static/app.js").text


def test_lessons_list_filters_by_status_and_text(client: TestClient) -> None:
    assert SHOWN in client.get("/lessons").text
    assert SHOWN in client.get("/lessons?status=active&q=ALEMBIC").text
    assert SHOWN not in client.get("/lessons?status=quarantined").text
    assert SHOWN not in client.get("/lessons?q=sourdough").text
    assert client.get("/lessons?status=bogus").status_code == 400


def test_lesson_page_has_rule_signature_timeline_audit_and_attribution(
    client: TestClient, seeded: dict[str, Any]
) -> None:
    r = client.get("/lessons/les_alembic")
    assert r.status_code == 200
    html = r.text
    assert "alembic upgrade head" in html and "verified" in html
    assert html.count('class="side-for"') == 3
    assert "admitted" in html  # audit trail
    assert "3 outcome(s), mean 1.00" in html  # with it in context
    assert "3 outcome(s), mean 0.00" in html  # its topic without it


def test_experiences_text_and_semantic_search_and_detail(
    client: TestClient, seeded: dict[str, Any]
) -> None:
    text = client.get("/experiences", params={"q": "UndefinedTable", "mode": "text"}).text
    assert "3 result(s)" in text and "docker build" not in text
    sem = client.get("/experiences", params={"q": "docker image build", "mode": "semantic"})
    assert sem.status_code == 200 and "docker build -t app ." in sem.text
    assert client.get("/experiences", params={"q": "x", "mode": "magic"}).status_code == 400
    exp = seeded["wins"][0]
    page = client.get(f"/experiences/{exp.id}").text
    assert "alembic upgrade head" in page and 'href="/lessons/les_alembic"' in page


def test_feed_reports_new_experiences(client: TestClient, hash_mimir: Mimir) -> None:
    before = client.get("/api/feed").json()
    assert before["pulse"]["experiences"] == 7 and before["lessons"][0]["id"] == "les_alembic"
    hash_mimir.record("rotate the TLS certificate", "certbot renew", "success")
    after = client.get("/api/feed").json()
    assert after["pulse"]["experiences"] == 8
    assert after["experiences"][0]["action"] == "certbot renew"


@pytest.mark.parametrize(
    "url",
    [
        "/lessons/les_nope",
        "/lessons/les_nope/quarantine",
        "/lessons/%20",
        "/experiences/nope",
        "/experiences/nope/forget",
        "/lessons/les_alembic/explode",
        "/no/such/page",
    ],
)
def test_bad_ids_and_paths_are_404_pages(client: TestClient, url: str) -> None:
    r = client.get(url)
    assert r.status_code == 404
    assert "<html" in r.text and "Traceback" not in r.text


def test_actions_confirm_then_apply(client: TestClient, hash_mimir: Mimir) -> None:
    page = client.get("/lessons/les_alembic/quarantine").text
    assert f'name="csrf" value="{TOKEN}"' in page and "Yes, quarantine" in page
    assert hash_mimir.get_lesson("les_alembic").status == "active"  # GET changes nothing
    for action, check in (
        ("pin", lambda le: le.pinned),
        ("unpin", lambda le: not le.pinned),
        ("quarantine", lambda le: le.status == "quarantined"),
        ("retire", lambda le: le.status == "retired"),
    ):
        r = client.post(
            f"/lessons/les_alembic/{action}",
            data={"csrf": TOKEN, "reason": f"{action} by test"},
            follow_redirects=False,
        )
        assert r.status_code == 303 and r.headers["location"].endswith(f"?done={action}")
        assert check(hash_mimir.get_lesson("les_alembic")), action
    events = [a.event for a in hash_mimir.audit_log("les_alembic")]
    assert {"pinned", "unpinned", "quarantined", "retired"} <= set(events)
    assert "quarantine by test" in client.get("/lessons/les_alembic").text


def test_forget_really_deletes_lessons_and_experiences(
    client: TestClient, hash_mimir: Mimir, seeded: dict[str, Any]
) -> None:
    r = client.post("/lessons/les_alembic/forget", data={"csrf": TOKEN}, follow_redirects=False)
    assert r.status_code == 303
    assert client.get("/lessons/les_alembic").status_code == 404
    other = seeded["other"].id
    r = client.post(f"/experiences/{other}/forget", data={"csrf": TOKEN}, follow_redirects=False)
    assert r.status_code == 303
    assert client.get(f"/experiences/{other}").status_code == 404
    r = client.post("/lessons/les_alembic/forget", data={"csrf": TOKEN})
    assert r.status_code == 404


@pytest.mark.parametrize("data", [{}, {"csrf": ""}, {"csrf": "forged"}, {"csrf": TOKEN + "x"}])
def test_forged_or_missing_csrf_token_is_403_and_changes_nothing(
    client: TestClient, hash_mimir: Mimir, data: dict[str, str]
) -> None:
    for action in ("quarantine", "pin", "forget"):
        r = client.post(f"/lessons/les_alembic/{action}", data=data, follow_redirects=False)
        assert r.status_code == 403, action
    lesson = hash_mimir.get_lesson("les_alembic")
    assert lesson.status == "active" and not lesson.pinned


def test_foreign_host_header_is_refused(hash_mimir: Mimir, seeded: dict[str, Any]) -> None:
    app = create_app(hash_mimir, token=TOKEN)
    with TestClient(app, base_url="http://evil.example") as c:
        assert c.get("/").status_code == 400
    with TestClient(app, base_url="http://localhost:8000") as c:
        assert c.get("/").status_code == 200


def test_bench_page_with_and_without_results(hash_mimir: Mimir, tmp_path: Path) -> None:
    empty = TestClient(create_app(hash_mimir, bench_dir=tmp_path), base_url="http://127.0.0.1")
    assert "No learning benchmark results" in empty.get("/bench").text
    curve = {"mean": 0.5}
    data = {
        "created": "2026-11-30T00:00:00+00:00",
        "config": {"window": 20},
        "figures": {"arms": {"cold": {"curve": [curve] * 3}, "warm": {"curve": [curve] * 3}}},
    }
    (tmp_path / "learning-20261130.json").write_text(json.dumps(data))
    (tmp_path / "learning-20261131-broken.json").write_text("{not json")
    page = TestClient(create_app(hash_mimir, bench_dir=tmp_path), base_url="http://127.0.0.1")
    html = page.get("/bench").text
    assert "learning-20261130.json" in html and html.count("<polyline") == 2


def test_check_host_refuses_non_loopback_unless_allowed() -> None:
    from mimir_core.errors import InvalidInputError

    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        check_host(host, False)
    for host in ("0.0.0.0", "192.168.1.5", "example.com", "::"):
        with pytest.raises(InvalidInputError, match="allow-remote"):
            check_host(host, False)
    check_host("0.0.0.0", True)


def test_cli_refuses_a_non_loopback_bind(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mimir_integrations.cli",
            "ui",
            "--home",
            str(tmp_path / "h"),
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert re.search(r"not a loopback address.*--allow-remote", proc.stderr)
    assert proc.stdout == ""


def test_text_from_the_store_is_escaped(hash_mimir: Mimir, client: TestClient) -> None:
    evil = "<script>alert(1)</script>"
    exp = hash_mimir.record(f"task {evil}", f"echo `{evil}`", "failure", reason=evil)
    insert(
        hash_mimir.deps,
        [Lesson(id="les_evil", status="active", rule=f"Never `{evil}` here", trigger="t " * 5)],
        actor="test",
        event="admitted",
    )
    for url in (f"/experiences/{exp.id}", "/lessons/les_evil", "/lessons", "/", "/experiences"):
        html = client.get(url).text
        assert evil not in html and "&lt;script&gt;" in html, url
    assert "<code>&lt;script&gt;alert(1)&lt;/script&gt;</code>" in client.get("/lessons").text


def test_a_broken_store_gives_an_error_page_not_a_traceback(
    hash_mimir: Mimir, seeded: dict[str, Any], home: Path
) -> None:
    import shutil

    app = create_app(hash_mimir, token=TOKEN)
    hash_mimir.close()
    shutil.rmtree(home / "store")
    (home / "store").write_text("not a directory")
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as c:
        r = c.get("/lessons/les_alembic")
    assert r.status_code == 500
    assert "Something went wrong" in r.text and "Traceback" not in r.text
