"""The full-text channel of recall: identifier groups and one all-words group."""

from __future__ import annotations

from mimir_core import Mimir
from mimir_core.store.core import EXPERIENCES
from mimir_core.text import fts_groups


def test_each_identifier_is_a_group_and_the_content_words_are_one() -> None:
    assert fts_groups("retry the upload after HTTP 503 from s3_client.py") == [
        "503",
        "s3_client.py",
        "retry upload http 503 s3_client py",
    ]
    assert fts_groups("src/app/main.py") == ["src/app/main.py"]  # the same terms: one group


def test_cjk_runs_are_spaced_like_the_index_and_stop_words_give_nothing() -> None:
    assert fts_groups("部署失败") == ["部 署 失 败"]
    assert fts_groups("the of and") == []


def _search(m: Mimir, query: str) -> set[str]:
    rows = m.store.text_search(EXPERIENCES, query, where=None, limit=20, columns=["task"])
    return {r["task"] for r in rows}


def test_rows_must_hold_a_whole_group(hash_mimir: Mimir) -> None:
    tasks = [
        "deploy the billing service to staging",
        "deploy the search service",  # shares one word of the query
        "billing export is slow",  # shares another
        "signup fails with E11000 duplicate key",
        "部署工作节点失败",
    ]
    for t in tasks:
        hash_mimir.record(t, "do it", "success")
    assert _search(hash_mimir, "deployed billing staging") == {tasks[0]}  # stemmed, all words
    assert _search(hash_mimir, "E11000 on checkout") == {tasks[3]}
    assert _search(hash_mimir, "E11000 or billing staging") == {tasks[3]}  # no row has all
    assert _search(hash_mimir, "staging 部署失败") == {tasks[4]}  # a CJK run: an identifier
    assert _search(hash_mimir, "部署失败") == {tasks[4]}
    assert _search(hash_mimir, "the of and") == set()
