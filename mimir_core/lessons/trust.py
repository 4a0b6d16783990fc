"""The team's trust list: which author keys may have their lessons served from a shared store.

* The list lives in the store (``meta`` key ``team_trust_list``) as a document signed by the
  team **admin** key (:mod:`.authors`): key id → public key, name, ``trusted`` or ``revoked``,
  and a version number that only grows.
* Each installation **pins** the admin key it accepts and the highest version it has seen, in
  its private home (``<home>/keys/team.json``, per store). A list signed by another admin key
  (someone with write access to the bucket made their own) or older than one already seen (a
  rollback that would un-revoke a key) is refused: then only this installation's own lessons
  are served. The first list an installation sees is pinned (trust on first use, logged) unless
  ``mimir trust pin`` pinned the admin key first.
* **No list** (a single-machine store): nothing changes; the HMAC key verifies lessons and
  this installation's own key is trusted implicitly. With a list, every lesson must carry an
  author signature (:func:`~.storage.author_block`) by a trusted key, and the HMAC, which other
  machines cannot check, is only a version tag.
* This installation's own key is trusted implicitly unless the list revokes it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MimirError
from ..ingest.spool import ensure_private_dir, replace_file
from ..store.core import META
from ..store.filters import Eq, Like
from .authors import ADMIN_FILE, AuthorKey, key_id_of, load_or_create, public_of, unb64, verify
from .sign import canonical

if TYPE_CHECKING:
    from ..deps import Deps

TRUST_KEY = "team_trust_list"
#: Public keys installations publish so an admin can add them by id (``author_key:<id>``).
REGISTRY_PREFIX = "author_key:"
STATE_FILE = ("keys", "team.json")
#: A trust view is re-read at least this often (and at the start of every serving read).
CACHE_SECONDS = 1.0


class TrustError(MimirError):
    """A trust-list operation cannot be done (no admin key, unknown key id, bad list...)."""


@dataclass
class TrustList:
    """A verified trust list."""

    version: int
    admin: str
    admin_public: str
    keys: dict[str, dict[str, Any]]
    issued_at: float

    def doc(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "admin": {"k": self.admin, "p": self.admin_public},
            "keys": self.keys,
            "issued_at": self.issued_at,
        }


@dataclass
class TrustView:
    """What this installation trusts now: its own key, and the trusted keys of a valid list."""

    me: str
    me_public: bytes
    listed: TrustList | None
    problem: str | None = None
    """Why the store's list is not used (then only the own key is trusted)."""
    names: dict[str, str] = field(default_factory=dict)

    def entry(self, kid: str) -> dict[str, Any] | None:
        return self.listed.keys.get(kid) if self.listed is not None else None

    def name(self, kid: str) -> str:
        got = self.entry(kid)
        if got is not None and got.get("name"):
            return str(got["name"])
        return self.names.get(kid) or kid[:12]

    def public(self, kid: str) -> bytes | None:
        """The public key to verify ``kid``'s signatures with, if ``kid`` is trusted."""
        got = self.entry(kid)
        if got is not None and got.get("status") == "revoked":
            return None
        if kid == self.me:
            return self.me_public
        if got is None or got.get("status") != "trusted":
            return None
        pub = unb64(got.get("p"))
        return pub if pub is not None and key_id_of(pub) == kid else None

    def revoked(self, kid: str) -> bool:
        got = self.entry(kid)
        return got is not None and got.get("status") == "revoked"

    def why_untrusted(self, kid: str) -> str:
        """The reason ``kid``'s lessons are not served."""
        got = self.entry(kid)
        who = f"key {kid[:12]} ({self.name(kid)})"
        if got is not None and got.get("status") == "revoked":
            when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(float(got.get("revoked_at", 0))))
            why = f": {got['reason']}" if got.get("reason") else ""
            return f"signed by {who}, revoked {when} UTC{why}"
        if self.problem:
            return f"signed by {who}; the team trust list is not used here: {self.problem}"
        return f"signed by {who}, which is not on the team's trust list"


# -- reading -----------------------------------------------------------------------------------


def read_raw(deps: Deps) -> str | None:
    """The stored trust list document (``None``: this store has none)."""
    store = deps.store
    # as Store.meta: a store being created has no meta table yet, so no trust list either
    if META not in store._tables and META not in store._table_names():
        return None
    rows = store.select(META, Eq("key", TRUST_KEY), ["key", "value"])
    return str(rows[0]["value"]) if rows else None


def parse(raw: str) -> TrustList:
    """The trust list in ``raw`` if its admin signature verifies (else :class:`TrustError`)."""
    try:
        data = json.loads(raw)
        doc, sig = data["doc"], data["sig"]
        admin = doc["admin"]
        pub = public_of(admin, admin.get("k"))
        keys = doc["keys"]
        if pub is None or not isinstance(keys, dict):
            raise TrustError("its admin key does not match its id")
        if not verify(pub, _message(doc), sig):
            raise TrustError("its admin signature does not verify")
        return TrustList(
            int(doc["version"]), str(admin["k"]), str(admin["p"]), keys, float(doc["issued_at"])
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise TrustError(f"the trust list is malformed ({exc})") from exc


def _message(doc: dict[str, Any]) -> bytes:
    return canonical({"mimir_trust_list": 1, "doc": doc})


def state_path(home: Path) -> Path:
    return home.joinpath(*STATE_FILE)


def _state(deps: Deps) -> dict[str, Any]:
    try:
        data = json.loads(state_path(deps.home).read_text("utf-8"))
        got = data.get(str(deps.store_uri))
        return got if isinstance(got, dict) else {}
    except (OSError, ValueError, AttributeError):
        return {}


def _save_state(deps: Deps, values: dict[str, Any]) -> None:
    path = state_path(deps.home)
    try:
        data = json.loads(path.read_text("utf-8"))
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data[str(deps.store_uri)] = dict(data.get(str(deps.store_uri)) or {}, **values)
    ensure_private_dir(path.parent)
    replace_file(path, json.dumps(data, indent=1, sort_keys=True).encode("utf-8"))


def present(deps: Deps) -> bool:
    """Whether the store has a trust list (team mode); cached with the view."""
    return view(deps) is not None


def view(deps: Deps, *, fresh: bool = False) -> TrustView | None:
    """This installation's trust view of the store (``None``: no trust list, single-machine).

    Re-read when older than :data:`CACHE_SECONDS`, or at once with ``fresh`` on a team store
    (a store without a list is re-checked at most that often: serving a single-machine store
    costs no extra read). A newer valid list moves the pinned version on (and rewrites the
    hooks' digest: a revocation reaches the prompt at this machine's next read).
    """
    cached = deps.state.trust_cache
    now = time.monotonic()
    if cached is not None and now - cached[0] < CACHE_SECONDS and (not fresh or cached[1] is None):
        return cached[1]  # type: ignore[no-any-return]
    raw = read_raw(deps)
    if raw is None:
        deps.state.trust_cache = (now, None)
        return None
    from .lifecycle import author_key, log_event

    me = author_key(deps)
    out = TrustView(me.key_id, me.public, None)
    state = _state(deps)
    changed = False
    try:
        tl = parse(raw)
        pinned = state.get("admin")
        if pinned and pinned != tl.admin:
            raise TrustError(
                f"it is signed by admin key {tl.admin[:12]}, not the pinned {str(pinned)[:12]}"
            )
        seen = int(state.get("version") or 0)
        if tl.version < seen:
            raise TrustError(f"it is version {tl.version}, older than version {seen} seen here")
        if not pinned:
            log_event(deps.home, "trust_admin_pinned", admin=tl.admin, first_use=True)
        if not pinned or tl.version > seen:
            _save_state(deps, {"admin": tl.admin, "version": tl.version})
            changed = bool(seen)
        out.listed = tl
    except TrustError as exc:
        out.problem = str(exc)
        if state.get("problem") != out.problem:
            log_event(deps.home, "trust_list_refused", error=out.problem)
            _save_state(deps, {"problem": out.problem})
    deps.state.trust_cache = (now, out)
    if changed:
        from .lifecycle import refresh_digest

        refresh_digest(deps)
    return out


def registry(deps: Deps) -> dict[str, dict[str, Any]]:
    """Public keys installations published in the store, by id (self-claimed names)."""
    rows = deps.store.select(META, Like("key", REGISTRY_PREFIX + "%"), ["key", "value"])
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        try:
            data = json.loads(r["value"])
        except ValueError:
            continue
        kid = str(r["key"])[len(REGISTRY_PREFIX) :]
        if isinstance(data, dict) and public_of(data, kid) is not None:
            out[kid] = data
    return out


def publish(deps: Deps) -> AuthorKey:
    """Publish this installation's public key in the store (so an admin can add it by id)."""
    from .lifecycle import author_key

    me = author_key(deps)
    value = json.dumps({"p": me.public_b64, "name": me.name}, sort_keys=True)
    deps.store.set_meta({REGISTRY_PREFIX + me.key_id: value})
    return me


# -- administering -----------------------------------------------------------------------------


def admin_key(deps: Deps, *, create: bool = False) -> AuthorKey:
    from .authors import read_key

    if create:
        return load_or_create(deps.home, ADMIN_FILE)
    got = read_key(deps.home, ADMIN_FILE)
    if got is None:
        raise TrustError(
            f"no team admin key in {deps.home.joinpath(*ADMIN_FILE)}: run this on the admin's "
            "installation (`mimir trust init` made it there)"
        )
    return got


def _write(deps: Deps, admin: AuthorKey, tl: TrustList) -> None:
    doc = tl.doc()
    value = json.dumps({"doc": doc, "sig": admin.sign(_message(doc))}, sort_keys=True)
    deps.store.set_meta({TRUST_KEY: value})
    _save_state(deps, {"admin": admin.key_id, "version": tl.version, "problem": None})
    deps.state.trust_cache = None


def current(deps: Deps, admin: AuthorKey) -> TrustList:
    raw = read_raw(deps)
    if raw is None:
        raise TrustError("this store has no trust list yet: run `mimir trust init` first")
    tl = parse(raw)
    if tl.admin != admin.key_id:
        raise TrustError(
            f"the store's trust list is signed by admin key {tl.admin[:12]}, not this "
            f"installation's admin key {admin.key_id[:12]}"
        )
    return tl


def entries(deps: Deps) -> list[dict[str, Any]]:
    """The trust list's keys (with ``id``), plus published keys not on it (``unlisted``)."""
    tv = view(deps, fresh=True)
    out: list[dict[str, Any]] = []
    listed = tv.listed.keys if tv is not None and tv.listed is not None else {}
    for kid, e in sorted(listed.items()):
        out.append(dict(e, id=kid, p=None))
    for kid, e in sorted(registry(deps).items()):
        if kid not in listed:
            out.append({"id": kid, "name": e.get("name", ""), "status": "unlisted"})
    return out


def new_entry(public: str, name: str) -> dict[str, Any]:
    return {"p": public, "name": name, "status": "trusted", "since": time.time()}


def resolve(deps: Deps, who: str) -> tuple[str, str, str]:
    """(key id, public key, published name) of a key given by id (published in the store, or
    already listed) or as a base64 public key."""
    raw = unb64(who)
    if raw is not None and len(raw) == 32:
        return key_id_of(raw), who, ""
    pub = registry(deps).get(who)
    if pub is None:
        raise TrustError(
            f"key {who!r} is not published in this store: on that installation run "
            "`mimir trust whoami` (publishes it), or give its public key"
        )
    return who, str(pub["p"]), str(pub.get("name") or "")
