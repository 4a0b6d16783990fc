"""Plain-text renderings of lessons, lesson details and consolidation reports.

:func:`render_lesson` is the one rendering of a lesson as text: the CLI, reports and the agent
tools (:mod:`mimir_core.tools.specs`, which fence it for a model) all call it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from ..tools.fence import one_line
from ..tools.render import render_experience
from ..types import ConsolidationReport, Lesson, LessonDetail

_MARK = {"active": "✓", "candidate": "…", "quarantined": "⊘", "superseded": "↷", "retired": "✗"}


def _wrap(text: str, indent: str, width: int = 100) -> str:
    return textwrap.fill(
        " ".join(text.split()), width=width, initial_indent=indent, subsequent_indent=indent
    )


def _pinned(lesson: Lesson) -> str:
    return " · pinned" if lesson.pinned else ""


def lesson_head(lesson: Lesson) -> str:
    """``✓ les_… prefer · confidence 0.56 · 3 for, 0 against · active``."""
    return (
        f"{_MARK.get(lesson.status, '?')} {lesson.id} {lesson.kind} · confidence "
        f"{lesson.confidence:.2f} · {lesson.successes:g} for, {lesson.failures:g} against · "
        f"{lesson.status}{_pinned(lesson)}"
    )


def gate_line(lesson: Lesson) -> str:
    """What the evidence gate measured, in one line."""
    g = lesson.gate
    if g.passed:
        return f"gate: lift {g.lift:+.2f} ± {g.noise:.2f} on {g.n_with} vs {g.n_without} held out"
    return f"gate: {g.detail or 'not measured'}"


def render_lesson(lesson: Lesson, *, for_model: bool = False, width: int = 100) -> str:
    """A lesson on three lines.

    For a person (the default: CLI, reports, ``mimir show``): its head (status mark, id, kind,
    confidence, evidence), its rule wrapped at ``width``, and what the gate measured.

    ``for_model=True`` is what a tool reply fences for a model: what to do first (kind and
    rule), then when it applies (the trigger, so the model can judge whether it does), then
    id, status and evidence; no gate internals. Each stored text stays on one line
    (:func:`~mimir_core.tools.fence.one_line`), unwrapped: the fence holds whole lines.
    """
    if for_model:
        return (
            f"[{one_line(lesson.kind)}] {one_line(lesson.rule)}\n"
            f"    when: {one_line(lesson.trigger)}\n"
            f"    id {one_line(lesson.id)} · {lesson.status} · confidence {lesson.confidence:.2f} "
            f"from {lesson.successes:g}✓ {lesson.failures:g}✗{_pinned(lesson)}"
        )
    return "\n".join(
        [lesson_head(lesson), _wrap(lesson.rule, "    ", width), "    " + gate_line(lesson)]
    )


def render_lessons(lessons: Sequence[Lesson], what: str = "lessons") -> str:
    """A list of lessons (or a line saying there are none)."""
    if not lessons:
        return f"No {what}."
    return "\n".join(render_lesson(le) for le in lessons)


def render_detail(detail: LessonDetail) -> str:
    """``mimir show ID``: the lesson, its provenance, evidence and audit trail."""
    le = detail.lesson
    prov = le.provenance
    lines = [render_lesson(le)]
    lines.append(f"    trigger: {le.trigger}")
    if le.action:
        lines.append(f"    action:  {le.action}")
    lines.append(
        f"    signature: {'valid' if detail.signature_valid else 'INVALID (never served)'}"
        + (f" · scope {le.scope}" if le.scope else "")
    )
    team = detail.provenance
    if team:
        lines.append(
            f"    author: {team.get('author_name')} (key {str(team.get('author') or '')[:12]})"
            + (f" · signed by {team['signed_by_name']}" if team.get("signed_by_name") else "")
            + f" · trust: {team.get('trust')}"
            + (f": {team['reason']}" if team.get("reason") else "")
        )
        if team.get("here") not in (None, "own"):
            lines.append(f"    here: {team['here']} ({team.get('tag')})")
        if team.get("confirmed_by"):
            lines.append(f"    confirmed on: {', '.join(team['confirmed_by'])}")
    made = prov.get("consolidator", "by hand")
    model = f" ({prov['model']})" if prov.get("model") else ""
    lines.append(
        f"    learned by {made}{model} from a topic of {prov.get('topic_size', '?')} "
        f"experience(s); valid from {le.valid_from:%Y-%m-%d %H:%M}"
        + (f", invalid since {le.invalid_at:%Y-%m-%d %H:%M}" if le.invalid_at else "")
        + (f", superseded by {le.superseded_by}" if le.superseded_by else "")
    )
    if le.feedback_helped or le.feedback_hurt:
        lines.append(f"    feedback: helped {le.feedback_helped}, hurt {le.feedback_hurt}")
    for title, exps in (("supporting", detail.supporting), ("contradicting", detail.contradicting)):
        if exps:
            lines.append(f"  {title} evidence ({len(exps)}):")
            for exp in exps[:10]:
                lines.append(textwrap.indent(render_experience(exp), "    "))
            if len(exps) > 10:
                lines.append(f"    … and {len(exps) - 10} more")
    if detail.audit:
        lines.append("  audit trail (newest first):")
        for ev in detail.audit[:20]:
            why = ev.detail.get("reason") or ev.detail.get("gate") or ""
            lines.append(
                f"    {ev.ts:%Y-%m-%d %H:%M:%S} {ev.event} by {ev.actor}"
                + (f": {str(why)[:160]}" if why else "")
            )
    return "\n".join(lines)


def render_report(report: ConsolidationReport, *, limit: int = 10) -> str:
    """What a consolidation run did, with the lessons it admitted and those still waiting."""
    if not report.ran:
        return f"Consolidation did not run: {report.reason}."
    head = "Dry run: would consolidate" if report.dry_run else "Consolidated"
    lines = [
        f"{head} {report.examined} new experience(s) in {report.clusters} topic(s) "
        f"in {report.seconds:.2f} s."
    ]
    if report.reason:
        lines.append(f"  note: {report.reason}")
    by_id = {le.id: le for le in report.candidates}
    admitted = [by_id[i] for i in report.admitted if i in by_id]
    pending = [by_id[i] for i in report.pending if i in by_id]
    if admitted:
        lines.append(f"  admitted {len(admitted)} lesson(s) (served from now on):")
        for le in admitted[:limit]:
            lines.append(textwrap.indent(render_lesson(le), "    "))
    else:
        lines.append("  no lesson passed the evidence gate this time")
    if pending:
        lines.append(f"  {len(pending)} candidate(s) waiting for evidence (not served):")
        for le in pending[:limit]:
            what = le.action or le.rule
            what = what if len(what) <= 70 else what[:69] + "…"
            lines.append(f"    … {le.id} {le.kind} “{what}”")
            lines.append(f"        {gate_line(le)}")
        if len(pending) > limit:
            lines.append(
                f"    … and {len(pending) - limit} more (mimir lessons --status candidate)"
            )
    for title, ids in (
        ("merged into existing lessons", report.merged),
        ("superseded", report.superseded),
        ("quarantined", report.quarantined),
        ("faded", report.faded),
    ):
        if ids:
            lines.append(
                f"  {title}: {', '.join(ids[:limit])}" + (" …" if len(ids) > limit else "")
            )
    if report.dropped:
        lines.append(f"  dropped {len(report.dropped)} proposal(s):")
        for why in report.dropped[:limit]:
            lines.append(f"    - {why}")
    if report.llm_calls:
        lines.append(f"  LLM: {report.llm_calls} call(s), {report.llm_tokens:,} token(s)")
    return "\n".join(lines)
