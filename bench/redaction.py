"""Redaction quality: recall on the detect-secrets oracle's findings, false positives on code.

``python -m bench.redaction [--quick] [--seed N] [--n N] [--out FILE]`` prints one JSON object:

* **oracle recall**: a seeded corpus of prose and commands with secrets of every format Mimir
  knows bare (AWS, Google, GitHub, Slack, Stripe, npm, Hugging Face, Twilio, SendGrid, Azure,
  Datadog, hex private keys, base64 of credentials, docker ``auth``, CLI password flags and
  random high-entropy tokens) is scanned line by line with detect-secrets 1.5.0's plugins
  (``scan_line`` with the default settings; the high-entropy findings kept only above the
  plugins' own limits, 4.5 and 3.0, as detect-secrets reports them). Every string the oracle
  flags must be gone from :func:`mimir_core.redact.core.sanitize`'s output. The corpus also plants
  values that must stay (git SHAs in a git context, UUIDs, digests, paths); the oracle's
  findings among those are counted apart as *allowlisted*, never as misses. A hand port of
  gitleaks' ``generic-api-key`` rule (gitleaks is a Go binary, not on PyPI) is a second oracle.
* **planted recall**: the share of planted secrets that no longer appear at all.
* **false positives**: the share of texts changed by redaction in the labelled retrieval set,
  the learning bench's dev and ops streams (task texts and action commands), the synthetic
  experiences, the conversations benchmark's turns and a generated set of coding text full of
  SHAs, UUIDs, digests and paths.

detect-secrets is a dev dependency (``pip install -e '.[dev]'``); the bench says so if it is
missing.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import random
import re
import string
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimir_core.redact.core import sanitize

ROOT = Path(__file__).resolve().parents[1]
ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
UPPER_NUM = string.ascii_uppercase + "234567"

# --------------------------------------------------------------------------------------------
# The seeded corpus
# --------------------------------------------------------------------------------------------


@dataclass
class Item:
    """One text, the secrets planted in it (must go) and the values that must stay."""

    text: str
    secrets: list[str] = field(default_factory=list)
    keep: list[str] = field(default_factory=list)
    fmt: str = ""


def _draw(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _secret_b64(rng: random.Random, n: int) -> str:
    """A random draw from the base64 alphabet with every character class (as real keys)."""
    while True:
        s = _draw(rng, B64, n)
        if any(c.isdigit() for c in s) and any(c.isupper() for c in s):
            return s


# Each generator returns (secret, the text to embed, kind): the text is what a tool prints.
Gen = Callable[[random.Random], tuple[str, str]]


def _same(fn: Callable[[random.Random], str]) -> Gen:
    def gen(rng: random.Random) -> tuple[str, str]:
        s = fn(rng)
        return s, s

    return gen


def _twilio_curl(rng: random.Random) -> tuple[str, str]:
    token = _draw(rng, HEX, 32)
    return token, f"curl -u AC{_draw(rng, HEX, 32)}:{token} https://api.twilio.com/2010-04-01"


def _docker_auth(rng: random.Random) -> tuple[str, str]:
    user = rng.choice(["bob", "ci-bot", "deploy", "jane.doe"])
    pw = _draw(rng, ALNUM, rng.randint(8, 16))
    blob = base64.b64encode(f"{user}:{pw}".encode()).decode()
    return blob, '{"auths": {"ghcr.io": {"auth": "' + blob + '"}}}'


def _b64_aws_pair(rng: random.Random) -> tuple[str, str]:
    pair = f"AKIA{_draw(rng, UPPER_NUM, 16)}:{_secret_b64(rng, 40)}"
    blob = base64.b64encode(pair.encode()).decode()
    return blob, blob


def _azure_conn(rng: random.Random) -> tuple[str, str]:
    key = _secret_b64(rng, 86) + "=="
    return key, (
        "DefaultEndpointsProtocol=https;AccountName=acmelogs;"
        f"AccountKey={key};EndpointSuffix=core.windows.net"
    )


def _azure_sas(rng: random.Random) -> tuple[str, str]:
    sig = _secret_b64(rng, 43).replace("+", "%2B").replace("/", "%2F") + "%3D"
    return sig, (
        "https://acme.blob.core.windows.net/logs/app.log?sv=2022-11-02&ss=b&srt=o&sp=r"
        f"&se=2026-01-01T00:00:00Z&sig={sig}"
    )


def _slack_webhook(rng: random.Random) -> tuple[str, str]:
    tail = _draw(rng, ALNUM, 24)
    return tail, (
        f"https://hooks.slack.com/services/T{_draw(rng, UPPER_NUM, 8)}/"
        f"B{_draw(rng, UPPER_NUM, 8)}/{tail}"
    )


def _cli(template: str) -> Gen:
    def gen(rng: random.Random) -> tuple[str, str]:
        pw = _draw(rng, ALNUM, rng.randint(10, 18))
        return pw, template.format(pw=pw)

    return gen


FORMATS: dict[str, Gen] = {
    "aws_access_key": _same(lambda r: r.choice(["AKIA", "ASIA"]) + _draw(r, UPPER_NUM, 16)),
    "aws_secret_key": _same(lambda r: _secret_b64(r, 40)),
    "gcp_api_key": _same(lambda r: "AIza" + _draw(r, ALNUM + "_-", 35)),
    "github_token": _same(
        lambda r: r.choice(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]) + _draw(r, ALNUM, 36)
    ),
    "github_pat": _same(lambda r: f"github_pat_{_draw(r, ALNUM, 22)}_{_draw(r, ALNUM, 59)}"),
    "slack_token": _same(
        lambda r: (
            f"{r.choice(['xoxb', 'xoxp', 'xoxa', 'xoxr', 'xoxs'])}-"
            f"{_draw(r, string.digits, 12)}-{_draw(r, string.digits, 12)}-{_draw(r, ALNUM, 24)}"
        )
    ),
    "slack_webhook": _slack_webhook,
    "stripe_key": _same(
        lambda r: (
            r.choice(["sk_live_", "rk_live_", "sk_test_", "pk_live_"])
            + _draw(r, ALNUM, r.randint(24, 99))
        )
    ),
    "npm_token": _same(lambda r: "npm_" + _draw(r, ALNUM, 36)),
    "huggingface_token": _same(lambda r: "hf_" + _draw(r, ALNUM, 34)),
    "twilio_api_key": _same(lambda r: "SK" + _draw(r, HEX, 32)),
    "twilio_auth_token": _same(lambda r: _draw(r, HEX, 32)),
    "twilio_curl": _twilio_curl,
    "sendgrid_key": _same(lambda r: f"SG.{_draw(r, ALNUM + '_-', 22)}.{_draw(r, ALNUM, 43)}"),
    "azure_account_key": _azure_conn,
    "azure_sas": _azure_sas,
    "datadog_key": _same(lambda r: _draw(r, HEX, 32)),
    "datadog_app_key": _same(lambda r: _draw(r, HEX, 40)),
    "hex_private_key": _same(lambda r: _draw(r, HEX, 64)),
    "b64_aws_pair": _b64_aws_pair,
    "docker_auth": _docker_auth,
    "random_b64": _same(lambda r: _secret_b64(r, r.randint(28, 64))),
    "random_urlsafe": _same(lambda r: _draw(r, ALNUM + "_-", r.randint(32, 64))),
    "random_hex": _same(lambda r: _draw(r, HEX, r.randint(32, 96))),
    "docker_stdin": _cli("echo {pw} | docker login -u deploy --password-stdin ghcr.io"),
    "sudo_stdin": _cli("echo '{pw}' | sudo -S systemctl restart nginx"),
    "httpie": _cli("http -a admin:{pw} POST https://api.example.com/v1/jobs"),
    "sqlcmd": _cli('sqlcmd -S db.internal -U sa -P {pw} -Q "SELECT 1"'),
    "ldapsearch": _cli('ldapsearch -x -H ldap://dc1 -D "cn=admin" -w {pw} "(uid=bob)"'),
    "htpasswd": _cli("htpasswd -b /etc/nginx/.htpasswd bob {pw}"),
    "smbclient": _cli("smbclient //fs01/share -U bob%{pw} -c ls"),
    "openssl": _cli("openssl enc -aes-256-cbc -salt -k {pw} -in db.sql -out db.sql.enc"),
    "aws_configure": _same(lambda r: "/" + _secret_b64(r, 39)),
}
# "aws configure set" needs its command around the value.
_WRAP: dict[str, str] = {"aws_configure": "aws configure set aws_secret_access_key {s}"}

PROSE = [
    "call the API with {s}",
    "used {s} for the geocoder",
    "the deploy used {s} and it worked",
    "{s}",
    "here it is: {s}",
    "Error: request rejected (credential {s}) after 3 retries",
    "curl -H 'X-Api-Key: {s}' https://api.example.com/v1/items",
    "I pasted {s} into the settings page and the build went green.",
    "set it to `{s}` then rerun the job",
    "$ run-job --with {s}\njob 42 started",
    "logs:\n  12:01:33 INFO connecting\n  12:01:34 DEBUG using {s}\n  12:01:35 INFO ok",
    '{{"status": "ok", "value": "{s}"}}',
    "the old one ({s}) was revoked this morning",
    "- {s}\n- second item",
    "ENV dump: HOME=/root SHELL=/bin/bash X={s}",
]

# Values that must stay, each in its usual context.
KEEP = [
    "git show {sha}",
    "commit {sha}\nAuthor: Jane Doe <jane@example.com>",
    "git cherry-pick {sha} && git push",
    "reverted {sha} because the tests failed",
    "pip install git+https://github.com/acme/tool@{sha}",
    "uses: actions/checkout@{sha} # v4",
    "see https://github.com/acme/app/blob/{sha}/src/app.py#L10",
    "image: nginx@sha256:{h64}",
    "{h64}  dist/app-1.4.2.tar.gz",
    '"integrity": "sha512-{b88}"',
    "github.com/pkg/errors v0.9.1 h1:{b44}",
    "request {uuid} failed with 502",
    "trace_id={uuid} span ok",
    "/var/lib/docker/overlay2/{h64}/merged",
    "open /home/runner/work/{ident}/src/{ident}/handlers/userProfile.ts",
    "renamed test_{ident}_returns_404_when_the_user_is_missing_and_the_token_expired",
    "bumped {ident} from 1.24.3 to 1.25.0-rc.2+build.20240101",
    "md5 {h32} for the backup",
    "ETag: {h32}",
]


def make_corpus(seed: int, n: int) -> list[Item]:
    """``n`` texts per format (secrets) plus ``n`` per keep template, seeded."""
    rng = random.Random(seed)
    items: list[Item] = []
    for fmt, gen in FORMATS.items():
        for _ in range(n):
            secret, shown = gen(rng)
            shown = _WRAP.get(fmt, "{s}").format(s=shown)
            text = rng.choice(PROSE).format(s=shown) if fmt not in _WRAP else shown
            items.append(Item(text, [secret], [], fmt))
    # a secret split between task and action: two fields, each half a token of its own
    for _ in range(n):
        a, b = _secret_b64(rng, 32), _secret_b64(rng, 32)
        items.append(Item(f"deploy with {a}", [a], [], "split_task"))
        items.append(Item(f"{b} then restart", [b], [], "split_action"))
    items += [Item(t, [s], [], "gitleaks_generic") for t, s in gitleaks_cases(rng, n)]
    for template in KEEP:
        for _ in range(n):
            values = {
                "sha": _draw(rng, HEX, 40),
                "h64": _draw(rng, HEX, 64),
                "h32": _draw(rng, HEX, 32),
                "b88": base64.b64encode(rng.randbytes(64)).decode(),
                "b44": base64.b64encode(rng.randbytes(32)).decode(),
                "uuid": "-".join(_draw(rng, HEX, k) for k in (8, 4, 4, 4, 12)),
                "ident": rng.choice(["payments_api", "web-app", "dataPipeline", "etl_v2"]),
            }
            text = template.format(**values)
            keep = [v for k, v in values.items() if "{" + k + "}" in template]
            items.append(Item(text, [], keep, "keep"))
    return items


def gitleaks_cases(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """gitleaks' ``generic-api-key`` true-positive shapes, ported by hand (its test generator
    writes the sample secret in these assignment forms), with fresh random secrets."""
    forms = [
        '{k} = "{s}"',
        "{K}={s}",
        '"{k}": "{s}"',
        "{k}: {s}",
        '{k} := "{s}"',
        "<{k}>{s}</{k}>",
        "set {k} {s}",
    ]
    names = ["generic_api_token", "client_secret", "access_key", "auth_token", "api_key"]
    out = []
    for _ in range(n):
        s = _draw(rng, ALNUM, rng.randint(20, 40))
        k = rng.choice(names)
        out.append((rng.choice(forms).format(k=k, K=k.upper(), s=s), s))
    # the sample secret of gitleaks' own rule test
    sample = "Zf3D0LXCM3EIMbgJpUNnkRtOfOueHznB"
    out.append((f'generic_api_token = "{sample}"', sample))
    return out


# --------------------------------------------------------------------------------------------
# Oracles
# --------------------------------------------------------------------------------------------

_GITLEAKS_GENERIC = re.compile(
    r"(?i)(?:key|api|token|secret|client|passwd|password|auth|access)"
    r"(?:[0-9a-z\-_\t .]{0,20})(?:[\s|']|[\s|\"]){0,3}(?:=|>|:{1,3}=|\|\|:|<=|=>|:|\?=)"
    r"(?:'|\"|\s|=|`){0,5}([0-9a-z\-_.=]{10,150})(?:['|\"\n\r\s`;<]|$)"
)


def gitleaks_generic(line: str) -> list[str]:
    """gitleaks' ``generic-api-key`` rule, ported: a keyword, an operator, a 10-150 character
    value with Shannon entropy >= 3.5 (gitleaks v8's threshold)."""
    found = []
    for m in _GITLEAKS_GENERIC.finditer(line):
        value = m.group(1)
        counts = Counter(value)
        entropy = -sum(c / len(value) * math.log2(c / len(value)) for c in counts.values())
        if entropy >= 3.5:
            found.append(value)
    return found


def detect_secrets_oracle() -> Callable[[str], list[tuple[str, str]]]:
    """A function ``line -> [(type, flagged string)]`` backed by detect-secrets' plugins."""
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.plugins.high_entropy_strings import (
            Base64HighEntropyString,
            HexHighEntropyString,
        )
        from detect_secrets.settings import default_settings
    except ImportError as exc:  # pragma: no cover - the dev extra installs it
        raise SystemExit(f"bench.redaction needs detect-secrets (the dev extra): {exc}") from exc
    limits = {
        "Base64 High Entropy String": Base64HighEntropyString(),
        "Hex High Entropy String": HexHighEntropyString(),
    }

    def scan(line: str) -> list[tuple[str, str]]:
        out = []
        with default_settings():
            for found in scan_line(line):
                value = found.secret_value
                if not value:
                    continue
                plugin = limits.get(found.type)
                if plugin and plugin.calculate_shannon_entropy(value) <= plugin.entropy_limit:
                    continue  # below the plugin's limit: detect-secrets reports it as False
                out.append((found.type, value))
        return out

    return scan


# --------------------------------------------------------------------------------------------
# Coding text for false positives
# --------------------------------------------------------------------------------------------


def labelled_texts() -> list[str]:
    data = json.loads((ROOT / "bench" / "data" / "retrieval_set.json").read_text())
    out: list[str] = []
    for e in data["experiences"]:
        out += [e["task"], e["action"], e.get("reason") or ""]
    out += [q["query"] for q in data["queries"]]
    for r in data["recommend"]:
        out += [r["task"], r.get("expected_action") or ""]
    return [t for t in out if t]


def conversation_texts() -> list[str]:
    """Every turn of the conversations benchmark (coding chat: snippets, commands, prose)."""
    data = json.loads((ROOT / "bench" / "data" / "conversations.json").read_text())
    return [t["text"] for c in data["conversations"] for s in c["sessions"] for t in s["turns"]]


def learning_texts(quick: bool) -> list[str]:
    from bench import learning_env, learning_env_ops

    out: list[str] = []
    for env in (learning_env, learning_env_ops):
        for fam in env.FAMILIES:
            out += list(fam.templates) + [a.command for a in fam.actions]
            out += [a.reason for a in fam.actions]
        for seed in range(1 if quick else 3):
            out += [t.text for t in env.stream(seed, 100 if quick else 400)]
    return out


def synthetic_texts(quick: bool) -> list[str]:
    from bench.synthetic import make_experiences, make_queries

    n = 200 if quick else 2000
    out: list[str] = []
    for e in make_experiences(n, 1):
        out += [e["task"], e["action"], e["reason"]]
    out += make_queries(n // 4, 1)
    return [t for t in out if t]


def _rate(texts: Iterable[str]) -> dict[str, Any]:
    texts = list(texts)
    changed = [t for t in texts if sanitize(t) != t]
    return {
        "texts": len(texts),
        "changed": len(changed),
        "rate": round(len(changed) / max(1, len(texts)), 5),
        "examples": changed[:5],
    }


# --------------------------------------------------------------------------------------------
# Run
# --------------------------------------------------------------------------------------------


def run(seed: int = 7, n: int = 20, quick: bool = False) -> dict[str, Any]:
    start = time.perf_counter()
    oracle = detect_secrets_oracle()
    corpus = make_corpus(seed, n)
    flagged = redacted = allowlisted = 0
    misses: list[dict[str, str]] = []
    by_type: Counter[str] = Counter()
    gl_flagged = gl_redacted = 0
    planted = planted_gone = 0
    kept_total = kept_ok = 0
    keep_changed: list[str] = []
    per_format: dict[str, list[int]] = {}
    for item in corpus:
        out = sanitize(item.text)
        for secret in item.secrets:
            planted += 1
            gone = secret not in out
            planted_gone += gone
            stats = per_format.setdefault(item.fmt, [0, 0])
            stats[0] += 1
            stats[1] += gone
        for value in item.keep:
            kept_total += 1
            kept_ok += value in out
        if item.keep and out != item.text:
            keep_changed.append(item.text)
        for line in item.text.splitlines():
            for kind, value in oracle(line):
                if any(value in k or k in value for k in item.keep):
                    allowlisted += 1  # a planted SHA/UUID/digest the oracle flags
                    continue
                flagged += 1
                by_type[kind] += 1
                if value in out:
                    misses.append({"type": kind, "value": value, "text": item.text})
                else:
                    redacted += 1
            for value in gitleaks_generic(line):
                gl_flagged += 1
                gl_redacted += value not in out
    coding = [i.text for i in corpus if i.keep]
    result = {
        "seed": seed,
        "n_per_format": n,
        "corpus_texts": len(corpus),
        "oracle": "detect-secrets 1.5.0 (scan_line, default plugins and filters)",
        "oracle_flagged": flagged,
        "oracle_redacted": redacted,
        "oracle_recall": round(redacted / max(1, flagged), 5),
        "oracle_flagged_by_type": dict(sorted(by_type.items())),
        "oracle_allowlisted": allowlisted,
        "oracle_misses": misses[:20],
        "gitleaks_generic_flagged": gl_flagged,
        "gitleaks_generic_recall": round(gl_redacted / max(1, gl_flagged), 5),
        "planted_secrets": planted,
        "planted_recall": round(planted_gone / max(1, planted), 5),
        "planted_recall_by_format": {k: round(v[1] / v[0], 4) for k, v in per_format.items()},
        "kept_values": kept_total,
        "kept_values_intact": kept_ok,
        "false_positives": {
            "coding_text": {**_rate(coding), "examples": keep_changed[:5]},
            "labelled_set": _rate(labelled_texts()),
            "learning_bench": _rate(learning_texts(quick)),
            "synthetic": _rate(synthetic_texts(quick)),
            "conversations": _rate(conversation_texts()),
        },
        "seconds": round(time.perf_counter() - start, 2),
    }
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.redaction", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="3 texts per format, short streams")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--n", type=int, default=None, help="texts per format (default 20)")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = ap.parse_args(argv)
    n = args.n if args.n is not None else (3 if args.quick else 20)
    result = run(args.seed, n, args.quick)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
