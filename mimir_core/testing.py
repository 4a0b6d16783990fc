"""Helpers for testing code that builds on Mimir (no pytest import; plain ``assert``-style checks).

The main one is the adapter contract: every adapter that offers Mimir's tools (MCP, LangChain,
Hermes, your own) must give the same results and the same error messages. Wrap your adapter in
an ``invoke(name, arguments) -> (text, data, is_error)`` function and run::

    from mimir_core.testing import check_tool_contract
    report = check_tool_contract(invoke, listed=schemas_the_adapter_publishes)
    assert not report.failures, report.failures

``invoke`` returns the text the agent would see, the structured data (``None`` if the adapter
has none) and whether the host would flag the result as an error. Run it on a fresh, empty store.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .tools.io import MAX_DATA_CHARS, MAX_TEXT_CHARS
from .tools.specs import TOOLS, get_tool, run_tool

if TYPE_CHECKING:
    from .memory import Mimir
    from .types import Lesson

#: ``invoke(tool_name, arguments) -> (text, data or None, is_error)``
Invoke = Callable[[str, dict[str, Any]], tuple[str, "dict[str, Any] | None", bool]]

#: A fake but well-formed GitHub token: recorded text containing it must come back redacted.
FAKE_SECRET = "ghp_" + "Zq7Rm2Kx9Lp4Wt6Yv8Bn3Cd5Fg1Hj0Ms2Qa"

#: (tool, arguments, text the error must contain): one case per kind of bad argument.
BAD_ARGUMENTS: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("recall_experiences", {"query": "x", "k": 0}, "k: must be an integer from 1 to 100; got 0"),
    ("recall_experiences", {"query": "x", "k": "many"}, "k: must be an integer from 1 to 100"),
    ("recall_experiences", {"query": "x", "k": True}, "k: must be an integer from 1 to 100"),
    ("recall_experiences", {}, "query: is required"),
    ("recall_experiences", {"query": ""}, "query: must be a non-empty string"),
    ("recall_experiences", {"query": "x", "outcome": "win"}, "outcome: must be one of"),
    ("recall_experiences", {"query": "x", "bogus": 1}, "bogus: is not an argument"),
    ("recommend_action", {"task": "x", "explore": "maybe"}, "explore: must be true or false"),
    ("past_attempts", {"action": "make", "match": "fuzzy"}, "match: must be one of"),
    ("past_attempts", {"task": "x"}, "action: is required"),
    ("record_experience", {"task": "t", "action": "a"}, "outcome: is required"),
    (
        "record_experience",
        {"task": "t", "action": "a", "outcome": "success", "score": 2},
        "score: must be a number from 0 to 1",
    ),
    (
        "record_experience",
        {"task": "t", "action": "a", "outcome": "success", "context": "x"},
        "context: must be a JSON object",
    ),
    ("record_failure", {"task": "t", "action": "a", "reason": "  "}, "reason: must be a non-empty"),
    ("recent_experiences", {"n": 101}, "n: must be an integer from 1 to 100; got 101"),
    ("consolidate", {"dry_run": "perhaps"}, "dry_run: must be true or false"),
    ("forget", {"id": "no-such-id"}, "no experience or lesson with id 'no-such-id'"),
    ("pin_lesson", {}, "id: is required"),
    ("quarantine_lesson", {"id": "x"}, "reason: is required"),
    ("lesson_feedback", {"lesson_id": "x"}, "helped: is required"),
    ("memory_stats", {"verbose": True}, "verbose: is not an argument of memory_stats"),
    # Strict JSON types: a string or a number is never read as a boolean, nor a string as a
    # number (the lax reading once let with_experiences="yes" delete a lesson's experiences).
    (
        "recall_experiences",
        {"query": "x", "k": "5"},
        "k: must be an integer from 1 to 100; got '5'",
    ),
    (
        "record_experience",
        {"task": "t", "action": "a", "outcome": "success", "score": "0.5"},
        "score: must be a number from 0 to 1 (or null); got '0.5'",
    ),
    ("recommend_action", {"task": "x", "explore": 1}, "explore: must be true or false; got 1"),
    ("consolidate", {"dry_run": "true"}, "dry_run: must be true or false; got 'true'"),
    (
        "forget",
        {"id": "no-such-id", "with_experiences": "yes"},
        "with_experiences: must be true or false; got 'yes'",
    ),
    ("lesson_feedback", {"lesson_id": "x", "helped": "no"}, "helped: must be true or false"),
)


class ContractViolation(AssertionError):
    """An adapter broke the tool contract; the message says which check and what it got."""


@dataclass
class ContractReport:
    """What :func:`check_tool_contract` checked."""

    passed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def direct_invoke(mimir: Mimir, *, source: str = "tool") -> Invoke:
    """The reference adapter: :func:`run_tool` in process, errors as ``is_error`` results."""

    def invoke(name: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any] | None, bool]:
        out = run_tool(mimir, name, arguments, source=source)
        return out.text, None if out.is_error else out.data, out.is_error

    return invoke


def seed_lesson(
    mimir: Mimir,
    *,
    rule: str,
    trigger: str,
    action: str = "the action the rule prescribes",
    kind: str = "procedure",
    scope: str = "",
    evidence: int = 4,
) -> Lesson:
    """Write an active, signed lesson (and ``evidence`` supporting successes) into the store.

    It skips consolidation and its evidence gate: use it to test code that serves, pins or
    forgets lessons, not to test learning.
    """
    from .lessons.lifecycle import insert
    from .types import Lesson

    exps = mimir.record_many(
        [
            {"task": trigger, "action": action, "outcome": "success", "scope": scope}
            for _ in range(evidence)
        ]
    )
    lesson = Lesson(
        id=uuid.uuid4().hex[:16],
        rule=rule,
        trigger=trigger,
        action=action,
        kind=kind,  # type: ignore[arg-type]
        scope=scope,
        status="active",
        supporting_ids=[e.id for e in exps],
        successes=float(evidence),
        confidence=0.8,
    )
    return insert(mimir.deps, [lesson], actor="test", event="seeded")[0]


class _Run:
    def __init__(self, invoke: Invoke, report: ContractReport, structured: bool) -> None:
        self.invoke = invoke
        self.report = report
        self.structured = structured

    def call(self, name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """A call that must succeed; returns (text, data) with data checked against the spec."""
        text, data, is_error = self.invoke(name, dict(args))
        where = f"{name}({json.dumps(args)[:200]})"
        if is_error:
            raise ContractViolation(f"{where} failed: {text[:500]}")
        if not isinstance(text, str) or not text.strip():
            raise ContractViolation(f"{where} returned no text: {text!r}")
        if len(text) > MAX_TEXT_CHARS + 200:
            raise ContractViolation(f"{where} returned {len(text)} characters of text (cap)")
        if data is None:
            if self.structured:
                raise ContractViolation(f"{where} returned no structured data")
            return text, {}
        output = get_tool(name).output
        if output is not None:
            try:
                output.model_validate(data)
            except Exception as exc:
                raise ContractViolation(f"{where} data does not match its model: {exc}") from exc
        size = len(json.dumps(data, default=str, ensure_ascii=False, separators=(",", ":")))
        if size > MAX_DATA_CHARS:
            raise ContractViolation(f"{where} returned more than {MAX_DATA_CHARS} chars of data")
        return text, data

    def error(self, name: str, args: dict[str, Any], expected: str) -> None:
        """A call that must fail with a message containing ``expected``."""
        text, _data, is_error = self.invoke(name, dict(args))
        where = f"{name}({json.dumps(args)[:200]})"
        if not is_error:
            raise ContractViolation(f"{where} should be an error result; got {text[:300]!r}")
        if expected not in text:
            raise ContractViolation(f"{where}: error should say {expected!r}; got {text[:300]!r}")
        if "Error executing tool" in text:
            raise ContractViolation(f"{where}: generic error wrapper in {text[:300]!r}")

    def check(self, label: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except ContractViolation as exc:
            self.report.failures.append(f"{label}: {exc}")
        except Exception as exc:  # the adapter raised instead of returning an error result
            self.report.failures.append(f"{label}: invoke raised {type(exc).__name__}: {exc}")
        else:
            self.report.passed.append(label)


def _check_listing(listed: Mapping[str, Mapping[str, Any]]) -> None:
    want = [t.name for t in TOOLS]
    if sorted(listed) != sorted(want):
        missing = sorted(set(want) - set(listed))
        extra = sorted(set(listed) - set(want))
        raise ContractViolation(f"tool names differ: missing {missing}, unexpected {extra}")
    for spec in TOOLS:
        schema = spec.args.model_json_schema()
        got = listed[spec.name]
        props, want_props = set(got.get("properties", {})), set(schema.get("properties", {}))
        if props != want_props:
            raise ContractViolation(
                f"{spec.name}: arguments {sorted(props)} != {sorted(want_props)}"
            )
        if set(got.get("required", [])) != set(schema.get("required", [])):
            raise ContractViolation(f"{spec.name}: required {got.get('required')} differs")


def check_tool_contract(
    invoke: Invoke,
    *,
    listed: Mapping[str, Mapping[str, Any]] | None = None,
    structured: bool = True,
    unknown_tool: bool = True,
    lessons: bool = True,
    lesson: tuple[str, str] | None = None,
) -> ContractReport:
    """Run every tool through ``invoke`` and check results, data and error messages.

    ``listed`` maps each published tool name to its input JSON schema (checked against the
    specs). ``structured=False`` accepts adapters that return text only; ``unknown_tool=False``
    skips calling a tool that does not exist; ``lessons=False`` skips the lesson tools.
    ``lesson=(id, query)`` names an active lesson in the store that ``query`` recalls: it is then
    given feedback, pinned, unpinned, quarantined and finally forgotten with its experiences.
    Nothing is raised: the returned report lists what passed, what was skipped and every
    failure.
    """
    report = ContractReport()
    run = _Run(invoke, report, structured)
    tag = uuid.uuid4().hex[:8]
    task = f"deploy the billing service {tag}"
    state: dict[str, Any] = {}

    if listed is not None:
        run.check("listing", lambda: _check_listing(listed))

    def record() -> None:
        _t, fail = run.call(
            "record_failure",
            {
                "task": task,
                "action": f"kubectl apply -f billing-{tag}.yaml",
                "reason": f"ImagePullBackOff: auth failed with token {FAKE_SECRET}",
                "context": {"cluster": "staging"},
            },
        )
        _t, ok = run.call(
            "record_experience",
            {
                "task": task,
                "action": f"helm upgrade --install billing-{tag} ./chart",
                "outcome": "success",
                "reason": "rolled out in 40s",
            },
        )
        _t, partial = run.call(
            "record_experience",
            {"task": task, "action": "kubectl rollout restart", "outcome": "partial", "score": 0.4},
        )
        if structured:
            exp = fail["experience"]
            if exp["outcome"] != "failure" or FAKE_SECRET in json.dumps(exp):
                raise ContractViolation(f"record_failure stored {exp}")
            if partial["experience"]["score"] != 0.4:
                raise ContractViolation(f"score not kept: {partial['experience']}")
            state["ids"] = [d["experience"]["id"] for d in (fail, ok, partial)]

    def recall() -> None:
        text, data = run.call("recall_experiences", {"query": task, "k": 10})
        if f"billing-{tag}" not in text or FAKE_SECRET in text:
            raise ContractViolation(
                f"recall text lacks the records or leaks a secret: {text[:400]}"
            )
        if structured:
            got = {h["id"] for h in data["hits"]}
            if not set(state.get("ids", [])) <= got:
                raise ContractViolation(f"recall missed recorded ids: {got}")
        _t, fails = run.call("recall_experiences", {"query": task, "outcome": "failure"})
        if structured and {h["outcome"] for h in fails["hits"]} != {"failure"}:
            raise ContractViolation(f"outcome filter ignored: {fails['hits']}")

    def recommend() -> None:
        text, data = run.call("recommend_action", {"task": task})
        if f"helm upgrade --install billing-{tag}" not in text:
            raise ContractViolation(f"recommend did not pick the success: {text[:400]}")
        if structured and not data["recommended"]:
            raise ContractViolation(f"recommend data: {data}")

    def attempts() -> None:
        failed = f"kubectl apply -f billing-{tag}.yaml"
        text, data = run.call("past_attempts", {"action": failed, "task": task})
        if "failed 1" not in text or FAKE_SECRET in text:
            raise ContractViolation(f"past_attempts lacks the failure or leaks: {text[:400]}")
        if structured and [h["outcome"] for h in data["attempts"]] != ["failure"]:
            raise ContractViolation(f"past_attempts data: {data}")
        text, data = run.call("past_attempts", {"action": f"terraform destroy {tag}"})
        if "No earlier attempt" not in text or (structured and data["attempts"]):
            raise ContractViolation(f"an untried action has attempts: {text[:300]}")

    def recent_and_stats() -> None:
        _t, data = run.call("recent_experiences", {"n": 3})
        if structured and len(data["experiences"]) != 3:
            raise ContractViolation(f"recent_experiences n=3 gave {len(data['experiences'])}")
        _t, stats = run.call("memory_stats", {})
        if structured and stats["experiences"] < 3:
            raise ContractViolation(f"memory_stats counts {stats['experiences']} experiences")

    def caps() -> None:
        long = f"{tag} " + "a long stack trace line with many frames " * 120
        for i in range(5):
            run.call(
                "record_failure",
                {"task": f"{long} task {i}", "action": f"{long} act {i}", "reason": long},
            )
        _text, data = run.call("recall_experiences", {"query": f"{tag} long stack trace", "k": 100})
        if structured and not data.get("truncated"):
            raise ContractViolation("a recall larger than the cap was not marked truncated")

    def bad_arguments() -> None:
        for name, args, expected in BAD_ARGUMENTS:
            run.error(name, args, expected)
        if unknown_tool:
            run.error("no_such_tool", {}, "no tool named 'no_such_tool'")

    def forget() -> None:
        if not structured:
            raise ContractViolation("needs structured data to know the ids")
        victim = state["ids"][0]
        run.call("forget", {"id": victim})
        _t, data = run.call("recall_experiences", {"query": task, "k": 10})
        if victim in {h["id"] for h in data["hits"]}:
            raise ContractViolation(f"forgotten {victim} is still recalled")
        run.error("forget", {"id": victim}, f"no experience or lesson with id {victim!r}")

    def lesson_tools() -> None:
        # The given lesson first: a consolidation run re-gates it on the store's real evidence.
        if lesson is not None:
            lid, query = lesson
            text, data = run.call("recall_lessons", {"query": query})
            if lid not in text or (structured and lid not in {x["id"] for x in data["lessons"]}):
                raise ContractViolation(f"recall_lessons({query!r}) did not return {lid}: {text}")
            run.call("lesson_feedback", {"lesson_id": lid, "helped": True, "note": "it worked"})
            _t, pinned = run.call("pin_lesson", {"id": lid})
            if structured and not pinned["lesson"]["pinned"]:
                raise ContractViolation(f"pin_lesson did not pin: {pinned}")
            _t, unpinned = run.call("pin_lesson", {"id": lid, "pinned": False})
            if structured and unpinned["lesson"]["pinned"]:
                raise ContractViolation(f"pin_lesson pinned=false did not unpin: {unpinned}")
            _t, q = run.call("quarantine_lesson", {"id": lid, "reason": "contract test"})
            if structured and q["lesson"]["status"] != "quarantined":
                raise ContractViolation(f"quarantine_lesson did not quarantine: {q}")
            text, data = run.call("recall_lessons", {"query": query})
            if lid in text:
                raise ContractViolation(f"a quarantined lesson is still served: {text[:300]}")
            run.call("forget", {"id": lid, "with_experiences": True})
            run.error("pin_lesson", {"id": lid}, lid)
        _t, rep = run.call("consolidate", {"dry_run": True})
        if structured and rep["dry_run"] is not True:
            raise ContractViolation(f"dry run not reported as such: {rep}")
        run.call("consolidate", {})
        run.call("recall_lessons", {"query": task})
        run.error("pin_lesson", {"id": "no-such-lesson"}, "no-such-lesson")
        run.error("quarantine_lesson", {"id": "no-such-lesson", "reason": "x"}, "no-such-lesson")
        run.error("lesson_feedback", {"lesson_id": "no-such-lesson", "helped": True}, "no-such")

    run.check("record", record)
    run.check("recall", recall)
    run.check("recommend", recommend)
    run.check("attempts", attempts)
    run.check("recent_and_stats", recent_and_stats)
    run.check("bad_arguments", bad_arguments)
    run.check("caps", caps)
    run.check("forget", forget)
    if lessons:
        run.check("lesson_tools", lesson_tools)
    else:
        report.skipped["lesson_tools"] = "lessons=False"
    return report


#: The lesson :func:`assert_tool_contract` seeds: (rule, trigger, action); the trigger recalls it.
CONTRACT_LESSON = (
    "Run alembic upgrade head before the payments integration tests.",
    "run the payments integration tests",
    "alembic upgrade head && pytest tests/integration",
)


def assert_tool_contract(
    invoke: Invoke,
    mimir: Mimir,
    *,
    listed: Mapping[str, Mapping[str, Any]] | None,
    **options: Any,
) -> ContractReport:
    """The whole contract, lesson tools included, for an adapter on ``mimir`` (a fresh store).

    Seeds :data:`CONTRACT_LESSON`, then runs :func:`check_tool_contract` (``listed`` and
    ``options`` are passed on). Raises :class:`ContractViolation` naming every failed or skipped
    check.
    """
    rule, trigger, action = CONTRACT_LESSON
    lesson = seed_lesson(mimir, rule=rule, trigger=trigger, action=action)
    report = check_tool_contract(invoke, listed=listed, lesson=(lesson.id, trigger), **options)
    problems = report.failures + [f"{k}: skipped ({why})" for k, why in report.skipped.items()]
    if problems:
        raise ContractViolation("\n".join(problems))
    return report
