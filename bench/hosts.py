"""What an agent in each host is shown of past attempts, and whether it still repeats itself.

    python -m bench.hosts [--quick] [--hosts claude-code,cline,hermes,langgraph,mcp]
                          [--seed N] [--sessions N] [--json] [--check] [--out FILE]

Replays the same scripted multi-session coding work (:mod:`bench.hosts_scenario`) through each
host's *real* entry point (:mod:`bench.hosts_drivers`) and measures what an agent in that host
would see, before any lesson exists (no consolidation runs): the point is the evidence Mimir
shows from the first repeat on.

**Scenario.** A project (a temporary git directory) with task families (deploy to staging, run
the integration tests, build the docker image, migrate the database, lint, release notes), each
asked in one of 3-4 paraphrases (drawn at random per session) and with 3-4 plausible shell
commands: one works (p 0.9), one or two never do (each with its real-looking error), some
families have a flaky one (p 0.7), and the database family drifts at its halfway session
(``alembic upgrade head`` starts failing, a new ``./scripts/migrate.sh`` starts working). A
second, small project runs first on the integration tests with other truths, so that in-process
hosts have evidence from another project, which must be labelled as such and never shown as
"here". Outcomes are drawn from a seeded RNG keyed on (seed, session, command), the agent's
choices from one keyed on (seed, session): every host replays the same sessions with the same
luck.

**The agent** sees only what its host shows it (the injected text and its tool results). Per
session it gets one task and picks commands among the family's plausible ones: never one it saw
fail earlier in the session, never one the shown text warns against (a line ``failed here``,
``failing here lately``, ``failed here before on this task``, ``failing here lately on this
task``, ``failed in other projects``, or ``failed here before on this task too`` unless it says
``though it worked``, whose backticked command is that command), preferring one the text says
worked (``worked here``, ``worked here instead``, ``worked instead on this task``, and the
recommendation ``past attempts suggest: <command> (worked ...`` that ``Mimir.context`` may
add), the most recently said first, else uniformly at random. It stops at the first success or
when every command was tried. When every command left has been warned against, it tries one
anyway (a *last resort*, counted apart): without that a drifted family could never recover.

**The hosts, modelled faithfully.** Claude Code and Cline show a task-start block
(``UserPromptSubmit`` / ``TaskStart``), the repeat guard at ``PreToolUse`` and a note after a
failure; LangGraph shows the lessons block at task start and appends the guard (or the
after-failure note) to the ``ToolMessage``. In all three the guard reaches the agent while the
tool is already going to run (Claude Code runs it anyway, Cline's answer never cancels,
LangGraph's wrapper always calls the tool): that call counts as run, and a repeat warned only
then is counted as *warned with the call*, not as ignoring a warning. Hermes shows only the
``prefetch`` block at the start of the user turn (nothing at the tool boundary) and records the
turn's tool calls at ``sync_turn``. An MCP-only host shows the ``mimir_context`` prompt at task
start, and captures only what its agent records (``record_experience`` / ``record_failure``
after each command, without a session id). A NO-MEMORY arm (the same agent, shown nothing)
is the baseline.

**Figures per host:** sessions, tool calls, success rate; ``repeats`` = runs of a command that
had already failed on the same family in this project, with the rate per 1,000 calls, split
into *after a warning* (the agent had been shown a warning naming it before it chose it),
*warned with the call*, *never warned* and *last resort*; ``sessions_to_first_warning`` = per
(family, never-working command), how many of the family's sessions after the one with its first
failure until a warning naming it was shown (median and max; goal 1); ``evidence_share`` =
share of sessions after each family's first in which any observation or lesson was shown;
``false_warnings`` = warnings (one per session and command, "here" lines) naming a command whose
true success probability on that family at that time is >= 0.5, over all such warnings (goal
<= 5%; ``false_after_drift`` says how many of them name a command whose probability changed at
the drift, i.e. evidence that was true when recorded); lines about other projects and lines
naming a command that is not one of the family's are counted apart, and a "here" line naming a
command whose claimed outcome never happened in this project is counted as *mislabelled*; wall
seconds. Each miss comes with what the agent was shown (``examples``).

``--check`` exits 1 when a memory host misses a goal: a repeat after a warning shown before the
agent chose the command (every host here shows a block at task start), a median
``sessions_to_first_warning`` above 1, a false-warning rate above 5%, a mislabelled line.
``--quick`` is the CI gate's configuration (three families x 4 sessions, hash embedder, well
under a minute); the full one runs every family x 6 sessions with the real MiniLM embedder
(offline; it matters to the in-process hosts, the hooks never load a model) and saves
``bench/results/hosts-<stamp>.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .hosts_scenario import FAMILIES, Result, Session, outcome, schedule

RESULTS = Path(__file__).resolve().parent / "results"
HOSTS = ("claude-code", "cline", "hermes", "langgraph", "mcp")
BASELINE = "no-memory"
FALSE_WARNING_GOAL = 0.05
RATE_MEASURED = 20


# -- what the agent reads ------------------------------------------------------------------------

_LINE = re.compile(r"^-\s+(?P<label>[a-z ]+):\s+`(?P<cmd>[^`]*)`(?P<rest>.*)$")
#: The recommendation ``Mimir.context`` may add (its command quoted like the observations').
_SUGGEST = re.compile(
    r"^-\s+(?P<label>past attempts suggest):\s+`?(?P<cmd>[^`]+?)`?\s+\(worked\s(?P<rest>.*)$"
)
WARN_LABELS = frozenset(
    {
        "failed here",
        "failing here lately",
        "failed here before on this task",
        "failing here lately on this task",
        "failed in other projects",
        "failed here before on this task too",
    }
)
WORKED_LABELS = frozenset(
    {"worked here", "worked here instead", "worked instead on this task", "past attempts suggest"}
)


@dataclass(frozen=True)
class Seen:
    """One line naming a command, as the agent reads it. ``here``: the line claims something
    happened in this project; ``elsewhere``: it is about other projects."""

    label: str
    cmd: str
    warns: bool
    worked: bool
    here: bool
    elsewhere: bool
    text: str


def read_lines(text: str) -> list[Seen]:
    """The lines of a shown text that name a command (observations, a recommendation)."""
    out = []
    for raw in text.splitlines():
        m = _SUGGEST.match(raw.strip()) or _LINE.match(raw.strip())
        if not m:
            continue
        label, rest = m["label"].strip(), m.groupdict().get("rest") or ""
        warns = label in WARN_LABELS and "though it worked" not in rest
        cmd = " ".join(m["cmd"].split())
        elsewhere = "other projects" in label or (m.re is _SUGGEST and "in other projects" in rest)
        here = not elsewhere and m.re is _LINE  # a recommendation says not where it worked
        out.append(Seen(label, cmd, warns, label in WORKED_LABELS, here, elsewhere, raw.strip()))
    return out


class Agent:
    """The simulated agent (see the module doc): it knows only what it read and ran."""

    def __init__(self, cmds: list[str], rng: random.Random) -> None:
        self.cmds, self.rng = cmds, rng
        self.tried: set[str] = set()
        self.warned: set[str] = set()
        self.worked: dict[str, int] = {}  # command -> when it was last said to work
        self._n = 0

    def read(self, text: str) -> None:
        for line in read_lines(text or ""):
            self._n += 1
            if line.warns:
                self.warned.add(line.cmd)
            elif line.worked:
                self.worked[line.cmd] = self._n

    def choose(self) -> tuple[str, bool] | None:
        """The next command and whether it is a last resort; ``None``: nothing left."""
        left = [c for c in self.cmds if c not in self.tried]
        if not left:
            return None
        free = [c for c in left if c not in self.warned]
        if not free:
            return self.rng.choice(left), True
        said = [c for c in free if c in self.worked]
        if said:
            return max(said, key=self.worked.__getitem__), False
        return self.rng.choice(free), False


@dataclass
class Call:
    """One command the agent ran: whether a warning naming it had been shown before it chose
    it, whether it was a last resort, how it went and what came back with it."""

    cmd: str
    warned_before: bool
    last_resort: bool
    ok: bool = False
    texts: list[str] = field(default_factory=list)


class Turn:
    """One session as the agent lives it; drivers call ``begin``, ``choose``, ``run`` and
    ``shown`` in the order their host would."""

    def __init__(self, s: Session, seed: int) -> None:
        self.s, self.seed = s, seed
        self.agent = Agent([c.text for c in s.family.cmds], random.Random(f"{seed}|a|{s.index}"))
        self.start = ""
        self.calls: list[Call] = []

    def begin(self, text: str) -> None:
        self.start = text or ""
        self.agent.read(self.start)

    def choose(self) -> str | None:
        if self.calls and self.calls[-1].ok:
            return None
        pick = self.agent.choose()
        if pick is None:
            return None
        cmd, last = pick
        self.calls.append(Call(cmd, cmd in self.agent.warned, last))
        return cmd

    def run(self, cmd: str) -> Result:
        res = outcome(self.seed, self.s, cmd)
        self.calls[-1].ok = res.ok
        self.agent.tried.add(cmd)
        return res

    def shown(self, *texts: str) -> None:
        """What came back with the current call (the guard, the result's notes)."""
        for text in texts:
            if text:
                self.calls[-1].texts.append(text)
                self.agent.read(text)


# -- scoring -------------------------------------------------------------------------------------


def _per_1000(n: int, calls: int) -> float:
    return round(1000 * n / calls, 1) if calls else 0.0


REPEAT_KINDS = ("after_warning", "warned_with_the_call", "never_warned", "last_resort")


class Score:
    """The figures of one host's replay, fed session by session in order (see the module
    doc). Truth comes from the scenario, never from what Mimir said."""

    def __init__(self) -> None:
        self.failed: dict[tuple[str, str], set[str]] = defaultdict(set)  # (project, family)
        self.happened: dict[tuple[str, str], set[str]] = defaultdict(set)  # (project, ok|fail)
        self.first_fail: dict[tuple[str, str, str], int] = {}
        self.first_warn: dict[tuple[str, str, str], int] = {}
        self.last_k: dict[tuple[str, str], int] = {}
        self.repeats = dict.fromkeys(REPEAT_KINDS, 0)
        self.n: dict[str, int] = defaultdict(int)
        self.examples: list[dict[str, Any]] = []

    def add(self, s: Session, t: Turn) -> None:
        key = (s.project, s.family.key)
        self.last_k[key] = s.k
        self.n["sessions"] += 1
        self.n["wins"] += any(c.ok for c in t.calls)
        texts = [t.start, *(x for c in t.calls for x in c.texts)]
        lines = [ln for x in texts for ln in read_lines(x)]
        if s.k > 0:
            self.n["later"] += 1
            self.n["evidence"] += any("<mimir-memory>" in x for x in texts)
            self.n["at_start"] += "<mimir-memory>" in t.start
        self._lines(s, lines)
        named = {ln.cmd for ln in lines if ln.warns}
        for (project, family, cmd), k0 in self.first_fail.items():
            if (project, family) == key and k0 < s.k and cmd in named:
                self.first_warn.setdefault((project, family, cmd), s.k - k0)
        self._mislabelled(s.project, read_lines(t.start))
        for c in t.calls:
            self._call(s, t, c)
            self._mislabelled(s.project, [ln for x in c.texts for ln in read_lines(x)])

    def _lines(self, s: Session, lines: list[Seen]) -> None:
        """Warnings (one per session and command), their truth, and lines off the task."""
        fam = s.family
        self.n["lines"] += len(lines)
        self.n["off_topic_lines"] += sum(fam.cmd(ln.cmd) is None for ln in lines)
        self.n["other_project_lines"] += sum(ln.elsewhere for ln in lines)
        for cmd in sorted({ln.cmd for ln in lines if ln.warns and not ln.elsewhere}):
            if fam.cmd(cmd) is None:
                continue
            self.n["warnings"] += 1
            if fam.p(cmd, s.k, s.n) >= 0.5:
                drift = fam.p(cmd, 0, s.n) != fam.p(cmd, s.k, s.n)
                self.n["false_after_drift" if drift else "false_stationary"] += 1
                said = [ln.text for ln in lines if ln.cmd == cmd and ln.warns]
                self._example("false warning", s, cmd, said=said)

    def _mislabelled(self, project: str, lines: list[Seen]) -> None:
        """A "here" line whose claimed outcome never happened in this project."""
        ok, fail = self.happened[(project, "ok")], self.happened[(project, "fail")]
        self.n["mislabelled"] += sum(
            1
            for ln in lines
            if ln.here and ((ln.warns and ln.cmd not in fail) or (ln.worked and ln.cmd not in ok))
        )

    def _call(self, s: Session, t: Turn, c: Call) -> None:
        key, fam = (s.project, s.family.key), s.family
        self.n["calls"] += 1
        if c.cmd in self.failed[key]:
            warned_with = {ln.cmd for x in c.texts for ln in read_lines(x) if ln.warns}
            kind = (
                "last_resort"
                if c.last_resort
                else "after_warning"
                if c.warned_before
                else "warned_with_the_call"
                if c.cmd in warned_with
                else "never_warned"
            )
            self.repeats[kind] += 1
            self.n["repeats_of_never_working"] += fam.p(c.cmd, s.k, s.n) < 0.5
            if kind in ("after_warning", "never_warned"):
                self._example(f"repeat, {kind}", s, c.cmd, start=t.start, with_calls=c.texts)
        self.happened[(s.project, "ok" if c.ok else "fail")].add(c.cmd)
        if not c.ok:
            self.failed[key].add(c.cmd)
            if fam.p(c.cmd, s.k, s.n) < 0.5:
                self.first_fail.setdefault((s.project, fam.key, c.cmd), s.k)

    def _example(self, kind: str, s: Session, cmd: str, **shown: Any) -> None:
        """What the agent saw when a goal was missed (a few per kind, for the report)."""
        if sum(e["kind"] == kind for e in self.examples) < 3:
            where = {"session": s.index, "family": s.family.key, "k": s.k, "ask": s.ask}
            self.examples.append({"kind": kind, **where, "cmd": cmd, **shown})

    def result(self) -> dict[str, Any]:
        n, calls = self.n, self.n["calls"]
        total = sum(self.repeats.values())
        # (family, never-working command) pairs whose family had a session after the failure
        pairs = {p: k0 for p, k0 in self.first_fail.items() if k0 < self.last_k[p[:2]]}
        waits = [self.first_warn.get(p, math.inf) for p in pairs]
        median = statistics.median(waits) if waits else None
        by_family: dict[str, list[int | None]] = defaultdict(list)
        for p in sorted(pairs):
            by_family[f"{p[0]}/{p[1]}"].append(self.first_warn.get(p))
        false = n["false_stationary"] + n["false_after_drift"]
        return {
            "sessions": n["sessions"],
            "tool_calls": calls,
            "success_rate": round(n["wins"] / n["sessions"], 3) if n["sessions"] else None,
            "repeats": {
                "n": {"total": total, **self.repeats},
                "per_1000_calls": {
                    "total": _per_1000(total, calls),
                    **{k: _per_1000(v, calls) for k, v in self.repeats.items()},
                },
                "of_never_working_commands": n["repeats_of_never_working"],
            },
            "sessions_to_first_warning": {
                "median": None if median is None or math.isinf(median) else median,
                "max": max((w for w in waits if not math.isinf(w)), default=None),
                "pairs": len(pairs),
                "never": sum(math.isinf(w) for w in waits),
                "by_family": dict(by_family),
            },
            "evidence_share": round(n["evidence"] / n["later"], 3) if n["later"] else None,
            "evidence_share_at_start": round(n["at_start"] / n["later"], 3) if n["later"] else None,
            "warnings": {
                "total": n["warnings"],
                "false": false,
                "false_rate": round(false / n["warnings"], 3) if n["warnings"] else 0.0,
                "false_after_drift": n["false_after_drift"],
            },
            "lines": {
                "total": n["lines"],
                "off_topic": n["off_topic_lines"],
                "about_other_projects": n["other_project_lines"],
            },
            "mislabelled_here": n["mislabelled"],
            "examples": self.examples,
        }


def score(runs: list[tuple[Session, Turn]]) -> dict[str, Any]:
    """The figures of one host's replay."""
    sc = Score()
    for s, t in runs:
        sc.add(s, t)
    return sc.result()


def _few_false_warnings(warnings: dict[str, Any]) -> bool:
    """At most :data:`FALSE_WARNING_GOAL` of the warnings false, judged where a rate of 5% can
    be measured (:data:`RATE_MEASURED` warnings or more). Fewer warnings (the quick
    configuration) cannot measure it: one warning in six is 17%. There no warning may be false
    but those after a drift, which no memory can foresee (a command that failed once starts
    working before anyone tries it again)."""
    if warnings["total"] >= RATE_MEASURED:
        return bool(warnings["false_rate"] <= FALSE_WARNING_GOAL)
    return bool(warnings["false"] - warnings["false_after_drift"] == 0)


def goals(fig: dict[str, Any]) -> dict[str, bool]:
    """The goals a memory host must meet (``--check``)."""
    wait = fig["sessions_to_first_warning"]
    return {
        "no_repeat_after_warning": fig["repeats"]["n"]["after_warning"] == 0,
        "first_warning_next_session": wait["pairs"] == 0
        or (wait["median"] is not None and wait["median"] <= 1),
        "false_warnings_at_most_5pct": _few_false_warnings(fig["warnings"]),
        "nothing_mislabelled": fig["mislabelled_here"] == 0,
    }


# -- running -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    families: tuple[str, ...]
    sessions: int  # per family
    other_sessions: int  # in the second project
    embedder: str
    hosts: tuple[str, ...] = HOSTS
    seed: int = 0


QUICK = Config(("deploy", "migrate", "itest"), 4, 2, "hash")
FULL = Config(tuple(FAMILIES), 6, 4, "fastembed")


def replay(host: str, sessions: list[Session], cfg: Config, root: Path) -> dict[str, Any]:
    """One host through every session, in a home of its own; its figures."""
    from .hosts_drivers import make_driver

    t0 = time.perf_counter()
    driver = make_driver(host, root / host, cfg.embedder)
    runs = []
    try:
        for s in sessions:
            turn = Turn(s, cfg.seed)
            driver.play(s, turn)
            runs.append((s, turn))
    finally:
        driver.close()
    fig = score(runs)
    fig["seconds"] = round(time.perf_counter() - t0, 2)
    fig["goals"] = goals(fig) if host != BASELINE else None
    return fig


def run(cfg: Config, progress: bool = True) -> dict[str, Any]:
    """Every host of ``cfg`` and the no-memory baseline over the same sessions."""
    out: dict[str, Any] = {"hosts": {}}
    with tempfile.TemporaryDirectory(prefix="mimir-bench-hosts-") as tmp:
        root = Path(tmp)
        sessions = schedule(
            list(cfg.families), cfg.sessions, cfg.other_sessions, cfg.seed, root / "projects"
        )
        for host in (*cfg.hosts, BASELINE):
            if progress:
                print(f"hosts: {host} ({len(sessions)} sessions)...", file=sys.stderr, flush=True)
            out["hosts"][host] = replay(host, sessions, cfg, root)
    missed = [
        f"{host}: {goal}"
        for host, fig in out["hosts"].items()
        for goal, ok in (fig["goals"] or {}).items()
        if not ok
    ]
    out["goals_met"] = not missed
    out["missed"] = missed
    return out


# -- report --------------------------------------------------------------------------------------


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def table(res: dict[str, Any]) -> str:
    """The per-host figures as a readable table."""
    head = (
        f"{'host':<12} {'sess':>4} {'calls':>5} {'succ':>5} {'repeats':>8} {'/1k':>6} "
        f"{'afterW':>6} {'withCall':>8} {'never':>5} {'lastR':>5} {'1stWarn':>9} "
        f"{'evid':>5} {'falseW':>8} {'mislab':>6} {'secs':>6}  goals"
    )
    rows = [head]
    for host, f in res["hosts"].items():
        r, w, fw = f["repeats"]["n"], f["sessions_to_first_warning"], f["warnings"]
        wait = (
            "-"
            if not w["pairs"]
            else f"{_g(w['median'])}/{_g(w['max'])}" + (f" ({w['never']}x)" if w["never"] else "")
        )
        g = f["goals"]
        verdict = (
            "-"
            if g is None
            else "met"
            if all(g.values())
            else "MISSED: " + ", ".join(k for k, ok in g.items() if not ok)
        )
        rows.append(
            f"{host:<12} {f['sessions']:>4} {f['tool_calls']:>5} {f['success_rate']:>5} "
            f"{r['total']:>8} {f['repeats']['per_1000_calls']['total']:>6} "
            f"{r['after_warning']:>6} {r['warned_with_the_call']:>8} {r['never_warned']:>5} "
            f"{r['last_resort']:>5} {wait:>9} {f['evidence_share'] or 0:>5} "
            f"{fw['false']:>3}/{fw['total']:<4} {f['mislabelled_here']:>6} {f['seconds']:>6}  "
            f"{verdict}"
        )
    cfg = res.get("config", {})
    rows.append(
        f"({cfg.get('mode', '')}: {len(cfg.get('families', []))} families x "
        f"{cfg.get('sessions')} sessions + {cfg.get('other_sessions')} in a second project, "
        f"embedder {cfg.get('embedder')}, seed {cfg.get('seed')}; 1stWarn = median/max sessions "
        "after a command's first failure until a warning names it, (Nx) never warned; "
        "repeats split: after a warning / warned with the call / never warned / last resort)"
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.hosts", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the CI gate's small configuration")
    ap.add_argument("--hosts", help=f"comma-separated, of: {', '.join(HOSTS)} (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sessions", type=int, help="sessions per family")
    ap.add_argument("--families", help=f"comma-separated, of: {', '.join(FAMILIES)}")
    ap.add_argument("--embedder", choices=["hash", "fastembed"])
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--out", type=Path, help="also save the JSON here (full runs: saved anyway)")
    ap.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    args = ap.parse_args(argv)
    base = QUICK if args.quick else FULL
    hosts = tuple(h.strip() for h in args.hosts.split(",") if h.strip()) if args.hosts else HOSTS
    families = (
        tuple(f.strip() for f in args.families.split(",") if f.strip())
        if args.families
        else base.families
    )
    bad = [h for h in hosts if h not in HOSTS] + [f for f in families if f not in FAMILIES]
    if bad:
        ap.error(f"unknown host(s) or family(ies): {', '.join(bad)}")
    cfg = replace(
        base,
        hosts=hosts,
        families=families,
        seed=args.seed,
        sessions=args.sessions or base.sessions,
        embedder=args.embedder or base.embedder,
    )
    t0 = time.perf_counter()
    res = run(cfg, progress=True)
    from .synthetic import machine_info
    from .versions import versions

    res = {
        "bench": "mimir hosts",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "python -m bench.hosts " + " ".join(sys.argv[1:] if argv is None else argv),
        "config": {"mode": "quick" if args.quick else "full", **cfg.__dict__},
        "seconds": round(time.perf_counter() - t0, 1),
        "machine": machine_info(),
        "versions": versions(),
        **res,
    }
    path = args.out
    if path is None and not args.quick:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        path = RESULTS / f"hosts-{stamp}.json"
    text = json.dumps(res, indent=1, default=str)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    print(text if args.json else table(res))
    if path is not None:
        print(f"saved {path}", file=sys.stderr)
    if res["missed"]:
        print("goals missed: " + "; ".join(res["missed"]), file=sys.stderr)
    return 1 if args.check and res["missed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
