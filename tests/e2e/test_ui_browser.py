"""``mimir ui`` in a real headless Chromium (Debian's ``chromium``, driven by Playwright).

The server is ``mimir ui`` as a real subprocess on a free port over a real store; the browser is
the system's Chromium (Playwright never downloads one). Screenshots go to the test's tmp dir and,
when ``MIMIR_TEST_ARTIFACTS`` is set, are copied there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contract.test_ui_routes import RULE, seed

CHROMIUM = Path("/usr/bin/chromium")
POLL = ["--poll", "1"]  # live updates every second
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``mimir ui`` on a seeded store (hash embedder); yields (base url, home)."""
    from mimir_core import Mimir

    home = tmp_path / "home"
    m = Mimir(home, embedder="hash", auto_consolidate=False)
    seed(m)
    m.close()
    log = tmp_path / "ui.stderr"
    env = dict(os.environ, MIMIR_EMBEDDER="hash", MIMIR_AUTO_CONSOLIDATE="0")
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mimir_integrations.cli", "ui", "--home", str(home), *POLL],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert found, f"no URL printed: {line!r} {log.read_text()}"
        yield found.group(0).rstrip("/"), home
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _save(shots: list[Path]) -> None:
    dest = os.environ.get("MIMIR_TEST_ARTIFACTS")
    if dest:
        Path(dest).mkdir(parents=True, exist_ok=True)
        for shot in shots:
            shutil.copy2(shot, Path(dest) / shot.name)


def test_overview_search_lesson_quarantine_and_live_update(
    server: tuple[str, Path], tmp_path: Path
) -> None:
    from playwright import sync_api  # the dev extra; only a missing browser skips

    base, home = server
    shots: list[Path] = []

    def shot(page: object, name: str) -> None:
        path = tmp_path / f"ui-{name}.png"
        page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
        shots.append(path)

    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            for scheme in ("light", "dark"):
                page = browser.new_page(
                    color_scheme=scheme, viewport={"width": 1280, "height": 900}
                )
                page.goto(base + "/")
                sync_api.expect(page.locator("h1")).to_have_text(
                    "What your agents learned, and why"
                )
                sync_api.expect(page.locator("svg.chart")).to_have_count(2)
                shot(page, f"overview-{scheme}")
                page.close()

            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(base + "/")
            sync_api.expect(page.locator("#live")).to_have_text("live")
            page.keyboard.press("Tab")  # the first stop is the skip link
            sync_api.expect(page.get_by_role("link", name="Skip to content")).to_be_focused()

            # Live: an experience recorded by another process appears without a reload.
            from mimir_core import Mimir

            writer = Mimir(home, embedder="hash", auto_consolidate=False)
            writer.record("rotate the TLS certificate", "certbot renew --force", "success")
            writer.close()
            sync_api.expect(page.locator("#live-experiences")).to_contain_text(
                "certbot renew --force", timeout=30_000
            )
            sync_api.expect(page.locator("#n-exp")).to_have_text("8")

            # Search the experiences (keyboard: type and press Enter).
            page.get_by_role("link", name="Experiences").click()
            box = page.get_by_role("searchbox", name="Search")
            box.fill("UndefinedTable")
            box.press("Enter")
            sync_api.expect(page.locator("#experiences tbody tr")).to_have_count(3)
            shot(page, "search")

            # Open the lesson from the lessons list.
            page.get_by_role("link", name="Lessons", exact=True).click()
            page.get_by_role("link", name=RULE.replace("`", "")).click()
            sync_api.expect(page.locator("h1")).to_have_text(RULE.replace("`", ""))
            sync_api.expect(page.locator(".badge.b-active").first).to_be_visible()
            shot(page, "lesson")

            # Quarantine it: a confirmation page, then the change is visible.
            page.get_by_role("link", name="Quarantine").click()
            page.get_by_label("Reason").fill("seen hurting in the browser test")
            shot(page, "confirm")
            page.get_by_role("button", name="Yes, quarantine").press("Enter")  # keyboard
            sync_api.expect(page.locator(".flash")).to_contain_text("quarantine")
            sync_api.expect(page.locator("h1 + p .badge").first).to_have_text("quarantined")
            sync_api.expect(page.locator("#audit")).to_contain_text(
                "seen hurting in the browser test"
            )
            shot(page, "quarantined")
            page.get_by_role("link", name="Lessons", exact=True).click()
            page.get_by_label("Status").select_option("quarantined")
            page.get_by_role("button", name="Filter").click()
            sync_api.expect(page.locator("#lessons tbody tr")).to_have_count(1)
            assert errors == []
            browser.close()
    finally:
        _save(shots)
    for path in shots:
        assert path.stat().st_size > 5_000
