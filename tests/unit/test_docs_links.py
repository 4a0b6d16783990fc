"""Every relative link in README.md and docs/*.md points at a file that exists, and every
``#anchor`` at a heading of its page (GitHub's slugs), so moving or renaming a page or a heading
cannot leave a dead link behind."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "hosts").glob("*.md")),
]
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code, where links are links."""
    text = re.sub(r"^(`{3,}).*?^\1", "", text, flags=re.S | re.M)
    return re.sub(r"(`+).*?\1", "", text, flags=re.S)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown page (repeated headings get ``-1``, ``-2``...)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    text = re.sub(r"^(`{3,}).*?^\1", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, flags=re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    found |= set(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))
    return found


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in LINK.findall(prose(path.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:...: not checked (offline)
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(
                f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}"
            )
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    return broken


def test_every_relative_link_resolves() -> None:
    found = {p.relative_to(ROOT).as_posix(): broken_links(p) for p in PAGES}
    assert sum(len(LINK.findall(prose(p.read_text()))) for p in PAGES) >= 20  # links are found
    assert not {k: v for k, v in found.items() if v}


def test_the_checker_finds_dead_files_and_anchors(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n## Set it `up`, now!\n## Set it up now\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n[ok](other.md) [ok](other.md#set-it-up-now) [ok](other.md#set-it-up-now-1)\n"
        "[ok](#title) [web](https://example.invalid/x) `[code](gone.md)`\n"
        "```text\n[block](gone.md)\n```\n"
        "[dead](gone.md) [dead](other.md#nope) [dead](#missing)\n"
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert broken_links(page) == [
            "gone.md: no file gone.md",
            "other.md#nope: no heading #nope in other.md",
            "#missing: no heading #missing in page.md",
        ]
    finally:
        ROOT = saved
