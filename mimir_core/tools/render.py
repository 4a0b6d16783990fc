"""Plain-text renderings of Mimir's results, shared by the CLI, MCP and tool adapters.

Every stored value is put on one line (:func:`_flat`): a recorded action can never add a line.
The CLI then shows control characters escaped (``\\x1b``); tool replies neutralise every line
(:mod:`mimir_core.tools.fence`: no markup, no control or invisible character).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..types import Experience, Hit, Recommendation, Stats

_MARK = {"success": "✓", "failure": "✗", "partial": "~"}


def _flat(text: object) -> str:
    """``text`` on one line: every kind of line break (and run of whitespace) is one space."""
    return " ".join(str(text).split())


def _clip(text: str, limit: int) -> str:
    text = _flat(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_experience(exp: Experience, *, width: int = 160) -> str:
    """One experience on two or three lines."""
    head = (
        f"{_MARK.get(exp.outcome, '?')} {exp.outcome} ({exp.score:.2f}) · {_clip(exp.task, width)}"
    )
    lines = [head, f"    tried: {_clip(exp.action, width)}"]
    if exp.reason:
        lines.append(f"    why:   {_clip(exp.reason, width)}")
    lines.append(
        f"    id {_flat(exp.id)} · {exp.created_at:%Y-%m-%d %H:%M} · {_flat(exp.source)}"
        + (f" · {_flat(exp.scope)}" if exp.scope else "")
    )
    return "\n".join(lines)


def render_hits(hits: Sequence[Hit], query: str) -> str:
    """Recall results, best first, each with why it matched."""
    if not hits:
        return f"No relevant experience for {query!r}."
    parts = [f"{len(hits)} relevant experience(s) for {query!r}:"]
    for i, hit in enumerate(hits, 1):
        parts.append(
            f"{i}. [{hit.score:.2f}; {_flat(hit.why)}]\n" + render_experience(hit.experience)
        )
    return "\n".join(parts)


def attempt_tally(hits: Sequence[Hit]) -> tuple[float, float]:
    """(worked, failed) over attempts: a partial outcome counts by its score on both sides."""
    worked = round(sum(h.experience.score for h in hits), 4)
    return worked, round(len(hits) - worked, 4)


def render_attempts(hits: Sequence[Hit], action: str, k: int | None = None) -> str:
    """An action's past attempts, newest first, with the tally up front (``k``: the most that
    were asked for; a full page says that older ones may exist)."""
    if not hits:
        return f"No earlier attempt of {action!r} is recorded here."
    worked, failed = attempt_tally(hits)
    n = len(hits)
    tried = f"at least {n} time(s) before (the newest {n})" if n == k else f"{n} time(s) before"
    parts = [f"{action!r} was tried {tried}: worked {worked:g}, failed {failed:g} (newest first):"]
    for i, hit in enumerate(hits, 1):
        parts.append(f"{i}. " + render_experience(hit.experience))
    return "\n".join(parts)


def render_recommendation(rec: Recommendation | None, task: str) -> str:
    """A recommendation with its confidence, evidence and the alternatives considered."""
    if rec is None:
        return f"No recommendation for {task!r}: no on-topic evidence of an action that worked."
    lines = [
        f"Recommended: {_flat(rec.action)}",
        f"  confidence {rec.confidence:.2f} (90% lower bound)"
        + (
            f", expected success {rec.expected_success:.2f}"
            if rec.expected_success is not None
            else ""
        )
        + f" from {rec.successes:g} success(es), "
        f"{rec.failures:g} failure(s){' · explored' if rec.explored else ''}",
        f"  evidence: {_flat(', '.join(rec.evidence_ids[:8]))}"
        + (" …" if len(rec.evidence_ids) > 8 else ""),
    ]
    if len(rec.variants) > 1:
        others = "; ".join(_flat(v) for v in rec.variants if v != rec.action)
        lines.append(f"  also phrased as: {others}")
    for alt in rec.alternatives[:5]:
        verdict = "never worked" if alt.successes <= 0 else f"confidence {alt.confidence:.2f}"
        tally = f"{alt.successes:g}✓ {alt.failures:g}✗"
        lines.append(f"  considered: {_clip(alt.action, 100)} ({tally}, {verdict})")
    return "\n".join(lines)


def render_stats(stats: Stats) -> str:
    """A store summary."""
    outcomes = ", ".join(f"{k} {v}" for k, v in stats.by_outcome.items())
    sources = ", ".join(f"{_flat(k)} {v}" for k, v in list(stats.by_source.items())[:6]) or "-"
    lessons = ", ".join(f"{k} {v}" for k, v in stats.lessons.items()) or "none"
    disk = f"{stats.disk_bytes / 1e6:.1f} MB" if stats.disk_bytes is not None else "remote"
    return "\n".join(
        [
            f"store:       {stats.store_uri} (schema v{stats.schema_version}, {disk})",
            f"embedder:    {stats.embedder}",
            f"experiences: {stats.experiences} ({outcomes}; {stats.superseded} superseded)",
            f"sources:     {sources}",
            f"projects:    {len(stats.by_scope)}",
            f"lessons:     {lessons}",
            f"table:       version {stats.table_version}, {stats.fragments} fragment(s)",
        ]
    )
