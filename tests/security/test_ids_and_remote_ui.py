"""Hostile ids (review finding 15) and a UI served beyond loopback (finding 9).

Ids are checked by one rule on every write path (import, lessons, recalled lesson ids), and the
UI percent-encodes every id it puts in a link, so an id can never become a path. A UI served
with ``--allow-remote`` needs an access token on every request and accepts only the Host names it
was told about.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from mimir_core import Mimir
from mimir_core.errors import ConfigError, InvalidInputError, MimirError
from mimir_core.ingest.validate import build_experience, check_id
from mimir_core.lessons.lifecycle import insert
from mimir_core.ops.backup import KINDS, _line, export_store, import_store
from mimir_core.store.core import EXPERIENCES, experience_row
from mimir_core.types import Lesson

BAD_IDS = ["..", ".", "a/b", "x?y=<script>", "../../lessons/les_a/forget", "a b", "", "%2e%2e"]
GOOD_IDS = ["les_0123abcd", "3f2a9c", "call-9", "S1", "thread:1", "a.b", "user@host"]


def open_m(home: Path) -> Mimir:
    return Mimir(home, embedder="hash", signing_key="k" * 32, auto_consolidate=False)


@pytest.mark.parametrize("ident", BAD_IDS)
def test_the_id_rule_refuses_path_and_markup_ids_naming_them(ident: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        check_id("id", ident)
    assert err.value.field == "id" and (repr(ident) in str(err.value) or not ident)


@pytest.mark.parametrize("ident", GOOD_IDS)
def test_the_id_rule_accepts_the_ids_mimir_and_hosts_make(ident: str) -> None:
    assert check_id("id", ident) == ident


def rewrite(path: Path, edit: Any) -> None:
    """Edit an export's records and fix up its counts and sha256 (a careful forger)."""
    lines = path.read_bytes().splitlines(keepends=True)
    records = edit([json.loads(x) for x in lines[1:-1]])
    out = [_line(r) for r in records]
    counts = {k: sum(r.get("kind") == k for r in records) for k in KINDS}
    head, trailer = json.loads(lines[0]), json.loads(lines[-1])
    head["counts"] = trailer["counts"] = counts
    trailer["sha256"] = hashlib.sha256(b"".join(out)).hexdigest()
    path.write_bytes(_line(head) + b"".join(out) + _line(trailer))


@pytest.mark.parametrize("ident", ["..", ".", "a/b", "x?y=<script>"])
@pytest.mark.parametrize("kind", ["experience", "lesson"])
def test_import_refuses_bad_ids_naming_them_and_writes_nothing(
    tmp_path: Path, ident: str, kind: str
) -> None:
    src = open_m(tmp_path / "src")
    exp = src.record("deploy the api", "make deploy", "success")
    insert(
        src.deps,
        [Lesson(id="les_a", rule="Use make deploy.", trigger="deploy")],
        actor="t",
        event="e",
    )
    path = tmp_path / "e.jsonl"
    export_store(src.deps, path)

    def edit(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for r in records:
            if r["kind"] == kind == "experience" and r["id"] == exp.id:
                r["id"] = ident
            if r["kind"] == kind == "lesson":
                r["row"]["id"] = ident
        return records

    rewrite(path, edit)
    dst = open_m(tmp_path / "dst")
    with pytest.raises(MimirError) as err:
        import_store(dst.deps, path)
    assert repr(ident) in str(err.value) and "not a valid id" in str(err.value)
    assert dst.stats().experiences == 0


def test_lessons_and_recalled_ids_follow_the_rule_on_write(home: Path) -> None:
    m = open_m(home)
    with pytest.raises(InvalidInputError, match="not a valid id"):
        insert(m.deps, [Lesson(id="a/b", rule="r", trigger="t")], actor="t", event="e")
    with pytest.raises(InvalidInputError, match="recalled_lesson_ids"):
        m.record("t", "a", "success", recalled_lesson_ids=["../les_x/forget"])


# -- the UI: ids in links ------------------------------------------------------------------


def test_ui_links_percent_encode_ids_already_in_a_store(home: Path) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from mimir_integrations.ui.app import create_app

    m = open_m(home)
    insert(
        m.deps,
        [Lesson(id="les_a", rule="Use make deploy.", trigger="deploy")],
        actor="t",
        event="e",
    )
    # a row written before the id rule existed (or by an older Mimir): the UI must still cope
    exp = build_experience(task="deploy the api", action="make deploy", outcome="success")
    exp.id = "../../lessons/les_a/forget"
    vec = m.embedder.embed(["deploy the api"])[0]
    m.store.upsert(EXPERIENCES, [experience_row(exp, vec, vec)])
    with TestClient(create_app(m), base_url="http://127.0.0.1") as c:
        for url in ("/", "/experiences"):
            html = c.get(url).text
            assert 'href="/experiences/..%2F..%2Flessons%2Fles_a%2Fforget"' in html, url
            assert 'href="/experiences/../../lessons' not in html, url
        # the link leads to no page (such an id is refused on write), never to another one's
        page = c.get("/experiences/..%2F..%2Flessons%2Fles_a%2Fforget")
        assert page.status_code == 404 and "Forget lesson" not in page.text
    assert m.get_lesson("les_a").status != "retired"


# -- the UI beyond loopback ------------------------------------------------------------------

TOKEN = "remote-token-0123456789"


@pytest.fixture
def remote(home: Path) -> Any:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from mimir_integrations.ui.app import create_app
    from mimir_integrations.ui.cli import remote_hosts

    m = open_m(home)
    insert(
        m.deps,
        [Lesson(id="les_a", rule="Use make deploy.", trigger="deploy", status="active")],
        actor="t",
        event="e",
    )
    hosts = remote_hosts("0.0.0.0", ["mimir.lan"])
    app = create_app(m, token="csrf-token-0123456789", allowed_hosts=hosts, access_token=TOKEN)
    return m, app, TestClient


def test_remote_ui_refuses_every_request_without_the_access_token(remote: Any) -> None:
    m, app, client = remote
    with client(app, base_url="http://mimir.lan") as c:
        for url in ("/", "/lessons/les_a", "/lessons/les_a/forget", "/api/feed"):
            r = c.get(url, follow_redirects=False)
            assert r.status_code == 401 and "les_a" not in r.text, url
        r = c.post("/lessons/les_a/forget", data={"csrf": "csrf-token-0123456789"})
        assert r.status_code == 401
        r = c.get("/", headers={"Authorization": "Bearer " + TOKEN + "x"})
        assert r.status_code == 401
        assert c.get("/?token=wrong-token-0123456789").status_code == 401
    assert m.get_lesson("les_a").status == "active"


def test_remote_ui_takes_the_token_once_then_by_cookie_or_bearer(remote: Any) -> None:
    m, app, client = remote
    with client(app, base_url="http://mimir.lan") as c:
        r = c.get(f"/lessons?status=active&token={TOKEN}", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/lessons?status=active"
        cookie = r.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert "Use make deploy" in c.get("/lessons").text  # the cookie now
        r = c.post("/lessons/les_a/pin", data={"csrf": "csrf-token-0123456789"})
        assert r.status_code == 200 and m.get_lesson("les_a").pinned
    with client(app, base_url="http://mimir.lan") as c:
        assert c.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_remote_ui_still_refuses_foreign_host_names(remote: Any) -> None:
    _m, app, client = remote
    for base in ("http://evil.example", "http://0.0.0.0"):
        with client(app, base_url=base) as c:
            r = c.get("/", headers={"Authorization": f"Bearer {TOKEN}"})
            assert r.status_code == 400, base
    with client(app, base_url="http://127.0.0.1:8000") as c:
        assert c.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


@pytest.mark.parametrize("token", [None, "", "short", " " * 20, "sixteen-chars-but has a space"])
def test_a_remote_ui_needs_a_real_token(token: str | None) -> None:
    from mimir_integrations.ui.cli import check_token

    with pytest.raises(ConfigError):
        check_token(token)
    assert check_token(TOKEN) == TOKEN


def test_cli_remote_ui_serves_only_with_the_token(tmp_path: Path) -> None:
    pytest.importorskip("uvicorn")
    env = {**os.environ, "MIMIR_EMBEDDER": "hash", "MIMIR_UI_TOKEN": ""}
    base = [sys.executable, "-m", "mimir_integrations.cli", "ui", "--home", str(tmp_path / "h")]
    refused = subprocess.run(
        [*base, "--host", "0.0.0.0", "--allow-remote"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert refused.returncode == 1 and "needs an access token" in refused.stderr
    proc = subprocess.Popen(
        [*base, "--host", "127.0.0.1", "--allow-remote", "--token", TOKEN, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        url = json.loads(proc.stdout.readline())["url"]
        code = 0
        for _ in range(300):  # the URL is printed just before the server listens
            try:
                urllib.request.urlopen(url, timeout=30)
            except urllib.error.HTTPError as err:
                code = err.code
                break
            except urllib.error.URLError:
                time.sleep(0.1)
        assert code == 401
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=30) as ok:
            assert ok.status == 200 and b"Mimir" in ok.read()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
