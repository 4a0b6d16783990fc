"""Administering team memory: create the trust list, trust and revoke keys, pin the admin.

Every change is a new, higher version of the list signed with the admin key of the installation
that runs it (``<home>/keys/admin.key``), written in one meta upsert and audited. Revocation
needs no rewrite of any lesson: every machine's next read checks the list and stops serving the
revoked key's lessons (:mod:`.team_verify`); the one audit entry lists the lessons it retired.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..store.core import LESSONS
from ..store.filters import And, Eq
from ..types import Lesson
from . import trust
from .lifecycle import author_key, load_many, log_event, refresh_digest, signing_key, verified
from .storage import bind, select_rows
from .team_verify import signer
from .trust import TrustError, TrustList

if TYPE_CHECKING:
    from ..deps import Deps


@dataclass
class Untrusted:
    """A lesson this installation does not serve, and why."""

    lesson: Lesson
    reason: str


def whoami(deps: Deps) -> dict[str, str]:
    """This installation's author key (published in the store, so an admin can add it)."""
    me = trust.publish(deps) if trust.present(deps) else author_key(deps)
    return {"id": me.key_id, "name": me.name, "public_key": me.public_b64}


def init(deps: Deps, *, name: str | None = None) -> TrustList:
    """Make this installation the team's admin: create the admin key and a trust list trusting
    this installation's author key. Lessons that verify under this installation's HMAC key
    and carry no author signature yet are signed by its author key first (the migration of a
    single-machine store): nothing else changes, and they keep verifying."""
    raw = trust.read_raw(deps)
    if raw is not None:
        tl = trust.parse(raw)
        admin = trust.admin_key(deps)  # raises: another installation administers this store
        if tl.admin != admin.key_id:
            raise TrustError(f"this store already has a trust list (admin {tl.admin[:12]})")
        return tl
    endorsed = endorse_legacy(deps)
    admin = trust.admin_key(deps, create=True)
    me = author_key(deps)
    tl = TrustList(
        version=1,
        admin=admin.key_id,
        admin_public=admin.public_b64,
        keys={me.key_id: trust.new_entry(me.public_b64, name or me.name)},
        issued_at=time.time(),
    )
    trust._write(deps, admin, tl)
    trust.publish(deps)
    deps.audit(
        "trust", admin.key_id, "trust_list_created", {"trusted": [me.key_id], "endorsed": endorsed}
    )
    log_event(deps.home, "trust_list_created", admin=admin.key_id, endorsed=endorsed)
    refresh_digest(deps)
    return tl


def endorse_legacy(deps: Deps) -> int:
    """Sign, with this installation's author key, the lessons that verify under its HMAC key
    but carry no author signature (their content, signature and time unchanged)."""
    me = author_key(deps)
    key = signing_key(deps)
    count = 0
    for row in select_rows(deps.store, None):
        if signer(row) is not None:
            continue
        lesson, ok = verified(deps, row, refresh=False)
        if not ok:
            continue
        new = bind(dict(row), key, me)
        where = And(Eq("id", lesson.id), Eq("signature", str(row["signature"])))
        deps.store.update(LESSONS, where, {"payload": new["payload"]})
        count += 1
    return count


def add(deps: Deps, who: str, *, name: str | None = None) -> dict[str, Any]:
    """Trust a key (by id, published in the store, or by its base64 public key)."""
    admin = trust.admin_key(deps)
    tl = trust.current(deps, admin)
    kid, pub, published = trust.resolve(deps, who)
    entry = trust.new_entry(pub, name or published or kid[:12])
    tl.keys[kid] = entry
    tl.version += 1
    tl.issued_at = time.time()
    trust._write(deps, admin, tl)
    deps.audit("trust", kid, "key_trusted", {"name": entry["name"], "version": tl.version})
    log_event(deps.home, "key_trusted", key=kid, version=tl.version)
    refresh_digest(deps)
    return dict(entry, id=kid)


def signed_by(deps: Deps, kid: str) -> list[str]:
    """Ids of the lessons whose current version ``kid`` signed, or that it first wrote."""
    out = []
    for row in select_rows(deps.store, None):
        if signer(row) == kid:
            out.append(str(row["id"]))
            continue
        try:
            origin = json.loads(row.get("payload") or "{}").get("provenance", {}).get("author")
        except (ValueError, AttributeError):
            continue
        if origin == kid:
            out.append(str(row["id"]))
    return sorted(out)


def revoke(deps: Deps, kid: str, *, reason: str) -> dict[str, Any]:
    """Revoke a key: its lessons stop being served on every machine at its next read. One
    audited step: the new list version and one audit entry naming every lesson it retired."""
    admin = trust.admin_key(deps)
    tl = trust.current(deps, admin)
    entry = tl.keys.get(kid)
    if entry is None:
        published = trust.registry(deps).get(kid)
        if published is None:
            raise TrustError(f"key {kid!r} is neither on the trust list nor published here")
        entry = trust.new_entry(str(published["p"]), str(published.get("name") or kid[:12]))
    now = time.time()
    entry = dict(entry, status="revoked", revoked_at=now, reason=reason)
    tl.keys[kid] = entry
    tl.version += 1
    tl.issued_at = now
    retired = signed_by(deps, kid)
    trust._write(deps, admin, tl)
    detail = {"name": entry["name"], "reason": reason, "version": tl.version, "lessons": retired}
    deps.audit("trust", kid, "key_revoked", detail)
    log_event(deps.home, "key_revoked", key=kid, lessons=len(retired))
    refresh_digest(deps)
    return dict(entry, id=kid, p=None, lessons=retired)


def pin(deps: Deps, admin_id: str) -> None:
    """Accept only trust lists signed by this admin key (before the first one is seen)."""
    if not isinstance(admin_id, str) or len(admin_id) != 32:
        from ..errors import InvalidInputError

        raise InvalidInputError("admin", f"must be a 32-character key id; got {admin_id!r}")
    trust._save_state(deps, {"admin": admin_id, "version": 0, "problem": None})
    deps.state.trust_cache = None


def untrusted(deps: Deps) -> list[Untrusted]:
    """Lessons not served here because of who signed them, or because local evidence
    contradicted them (:mod:`.revalidate`), with the reason."""
    from . import lifecycle
    from .revalidate import CONTRADICTED, verdicts

    local = verdicts(deps)
    if trust.view(deps, fresh=True) is None and all(
        v.get("verdict") != CONTRADICTED for v in local.values()
    ):
        return []  # a single-machine store with nothing quarantined here: no scan
    found = load_many(deps, None, refresh=False)
    why = lifecycle.untrusted(deps)
    out = []
    for lesson, _ok in found:
        if lesson.id in why:
            out.append(Untrusted(lesson, why[lesson.id]))
        elif local.get(lesson.id, {}).get("verdict") == "contradicted":
            detail = local[lesson.id].get("detail", "")
            out.append(
                Untrusted(lesson, f"quarantined here: local evidence contradicts it ({detail})")
            )
    return out


def provenance(deps: Deps, lesson: Lesson) -> dict[str, Any]:
    """Who wrote and last signed ``lesson``, whether that is trusted here, and where local
    evidence confirmed it (``mimir show``, the UI)."""
    from . import lifecycle
    from .revalidate import author_name, confirmed_by, here
    from .storage import rows_by_id

    rows = rows_by_id(deps.store, [lesson.id])
    kid = signer(rows[0]) if rows else None
    tv = trust.view(deps)
    me = author_key(deps).key_id
    why = lifecycle.untrusted(deps).get(lesson.id)
    if why is not None:
        status = "untrusted"
    elif tv is None:
        status = "single-machine (HMAC)"
    else:
        status = "own key" if kid == me else "trusted"
    verdict, tag = here(deps, lesson)
    origin = lesson.provenance.get("author")
    return {
        "author": origin or kid or me,
        "author_name": author_name(deps, lesson) if origin else "this installation",
        "signed_by": kid,
        "signed_by_name": tv.name(kid) if tv is not None and kid else None,
        "trust": status,
        "reason": why,
        "here": verdict,
        "tag": tag,
        "confirmed_by": confirmed_by(deps, lesson.id),
    }


def listing(deps: Deps) -> list[dict[str, Any]]:
    """The trust list's keys and the published keys not on it (``unlisted``), for display."""
    return [{k: v for k, v in e.items() if k != "p"} for e in trust.entries(deps)]
