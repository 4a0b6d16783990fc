"""The facade declares every public method itself, with an explicit, typed signature.

Hosts and tool generators read ``inspect.signature(Mimir.context)``; a method inherited from a
mixin or overridden with ``*args, **kwargs`` shows them nothing. The lesson reads still ingest
what hooks captured a moment ago, as they did when they were overrides.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from mimir_core.ingest import spool
from mimir_core.memory import Mimir
from mimir_core.settings import MimirSettings

VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def public_methods() -> dict[str, Any]:
    found = {}
    for name, raw in vars(Mimir).items():
        if name.startswith("_") or isinstance(raw, property):
            continue
        func = raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw
        if callable(func):
            found[name] = func
    return found


def test_the_facade_has_no_mixin_and_declares_the_lesson_methods() -> None:
    assert Mimir.__bases__ == (object,)
    lesson_methods = {
        "lessons",
        "context",
        "consolidate",
        "get_lesson",
        "lesson_detail",
        "list_lessons",
        "audit_log",
        "pin_lesson",
        "quarantine_lesson",
        "retire_lesson",
        "lesson_feedback",
    }
    assert lesson_methods <= set(public_methods())


@pytest.mark.parametrize("name", sorted(public_methods()))
def test_every_public_method_has_an_explicit_typed_signature(name: str) -> None:
    func = public_methods()[name]
    params = list(inspect.signature(func).parameters.values())[1:]  # self / cls
    assert not [p.name for p in params if p.kind in VARIADIC], f"Mimir.{name} takes *args/**kw"
    assert not [p.name for p in params if p.annotation is inspect.Parameter.empty], name
    assert inspect.signature(func).return_annotation is not inspect.Signature.empty, name
    assert (func.__doc__ or "").strip(), f"Mimir.{name} has no docstring"


def test_context_names_its_arguments_for_the_hosts() -> None:
    params = inspect.signature(Mimir.context).parameters
    assert list(params) == ["self", "query", "budget_chars", "scope"]
    assert params["budget_chars"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["budget_chars"].default == 2000
    assert params["scope"].default is None
    lessons = inspect.signature(Mimir.lessons).parameters
    assert list(lessons) == ["self", "query", "k", "scope", "min_confidence"]


def test_from_settings_overrides_a_setting_and_fills_the_rest(tmp_path: Path) -> None:
    settings = MimirSettings(home=tmp_path / "home", scope="from-settings", embedder="hash")
    m = Mimir.from_settings(settings, scope="override", auto_consolidate=False)
    assert (m.home, m.scope, m.deps.embedder_spec) == (tmp_path / "home", "override", "hash")
    assert m.store_uri == str(tmp_path / "home" / "store")
    assert Mimir.from_settings(settings).scope == "from-settings"


def test_record_failure_passes_its_keywords_on(hash_mimir: Any) -> None:
    exp = hash_mimir.record_failure(
        "deploy the app", "kubectl apply", "ImagePullBackOff", scope="proj-a", session_id="s1"
    )
    assert (exp.outcome, exp.reason, exp.scope, exp.session_id) == (
        "failure",
        "ImagePullBackOff",
        "proj-a",
        "s1",
    )


def captured(m: Any, i: int) -> None:
    spool.append(
        m.spool_dir,
        {
            "task": f"rotate the staging TLS certificate {i}",
            "action": f"certbot renew --case {i}",
            "outcome": "failure",
            "reason": "rate limited",
            "source": "claude-code",
            "idempotency_key": f"facade:{i}",
        },
    )


@pytest.mark.parametrize("read", ["lessons", "context", "consolidate"])
def test_lesson_reads_ingest_what_was_captured_first(hash_mimir: Any, read: str) -> None:
    m = hash_mimir
    captured(m, 1)
    assert spool.has_pending(m.spool_dir)
    if read == "lessons":
        m.lessons("rotate the staging TLS certificate", scope="*")
    elif read == "context":
        m.context("rotate the staging TLS certificate", budget_chars=500, scope="*")
    else:
        m.consolidate(dry_run=True)
    assert not spool.has_pending(m.spool_dir)
    assert m.stats().experiences == 1
