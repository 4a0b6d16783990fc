"""The Starlette app of ``mimir ui``: routes translate HTTP to facade and insights calls.

Actions (pin, unpin, quarantine, retire, forget) are a GET confirmation page and a POST that
must carry the per-run CSRF token (403 otherwise). Unknown ids are 404 pages; an error never
shows a traceback. Requests for a Host other than the allowed ones are refused (DNS rebinding).

Served beyond loopback (``--allow-remote``), every request must also carry the access token the
user chose (:class:`TokenGate`): the CSRF token is in every page, so without it anyone who could
reach the port could read a page, take the token and forget memory.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from mimir_core.errors import InvalidInputError, MimirError, NotFoundError
from mimir_core.extras import requires_extra
from mimir_core.ops import insights

from . import charts

with requires_extra("mimir_integrations.ui", "ui"):
    from jinja2 import Environment, FileSystemLoader, select_autoescape
    from markupsafe import Markup, escape
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

log = logging.getLogger("mimir.ui")
HERE = Path(__file__).parent
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]", "::1"]
LESSON_ACTIONS = ("pin", "unpin", "quarantine", "retire", "forget")
STATUSES = ("active", "candidate", "quarantined", "superseded", "retired")


def ticks(text: str) -> Markup:
    """Escaped text with `backticked` spans as ``<code>`` (lesson rules quote commands so)."""
    parts = str(escape(text)).split("`")
    if len(parts) % 2 == 0:  # an unmatched backtick: leave the text as it is
        return Markup(escape(text))
    return Markup("".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts)))


#: The cookie that carries the access token after the browser presented it once.
TOKEN_COOKIE = "mimir_ui_token"


class TokenGate:
    """ASGI middleware: every request needs the access token, as ``Authorization: Bearer``, as
    the cookie :data:`TOKEN_COOKIE`, or once as ``?token=`` (answered with a redirect to the
    same URL without it that sets the cookie: HttpOnly, SameSite=Strict). Else 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._token = token.encode("utf-8")

    def _is(self, given: str) -> bool:
        return secrets.compare_digest(given.encode("utf-8"), self._token)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        auth = request.headers.get("authorization", "")
        if self._is(request.cookies.get(TOKEN_COOKIE, "")) or (
            auth.startswith("Bearer ") and self._is(auth[len("Bearer ") :])
        ):
            await self.app(scope, receive, send)
            return
        given = request.query_params.get("token")
        if given is not None and self._is(given) and request.method == "GET":
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            url = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            response: Response = RedirectResponse(url, status_code=303)
            response.set_cookie(
                TOKEN_COOKIE, given, httponly=True, samesite="strict", path="/", max_age=None
            )
        else:
            response = HTMLResponse(
                "<!doctype html><title>Mimir: access token needed</title><p>This Mimir UI is "
                "served beyond loopback and needs its access token: open it once as "
                "<code>/?token=&lt;the token given to mimir ui&gt;</code>.</p>",
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        await response(scope, receive, send)


def seg(ident: object) -> str:
    """An id as one URL path segment: every character but letters, digits and ``_.-~``
    percent-encoded (an imported id such as ``..`` or ``a/b`` must not become a path)."""
    return quote(str(ident), safe="")


def _lesson_problems(m: Any) -> list[str]:
    """Deleted lessons and key problems, for the lessons page (never fails the page)."""
    from mimir_core.lessons.reconcile import lesson_problems

    try:
        from mimir_core.lessons.team import untrusted

        held = [f"lesson {u.lesson.id} is not served: {u.reason}" for u in untrusted(m.deps)]
        return lesson_problems(m.deps) + held
    except MimirError as exc:
        return [str(exc)]


def create_app(
    m: Any,
    *,
    token: str | None = None,
    bench_dir: str | Path | None = None,
    allowed_hosts: Sequence[str] | None = None,
    poll_seconds: float = 3.0,
    access_token: str | None = None,
) -> Starlette:
    """The app over the facade ``m``; ``token`` is the CSRF token (random per run if None);
    ``access_token``, when set, is required of every request (:class:`TokenGate`)."""
    csrf = token or secrets.token_urlsafe(32)
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape())
    env.filters["ticks"] = ticks
    env.filters["seg"] = seg
    env.globals.update(charts=charts, Markup=Markup, csrf=csrf, poll_ms=int(poll_seconds * 1000))

    def page(request: Request, name: str, code: int = 200, **ctx: Any) -> HTMLResponse:
        html = env.get_template(name).render(request=request, path=request.url.path, **ctx)
        return HTMLResponse(html, status_code=code)

    async def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await run_in_threadpool(fn, *args, **kwargs)

    async def overview(request: Request) -> Response:
        def gather() -> dict[str, Any]:
            return {
                "stats": m.stats(),
                "activity": insights.activity(m.deps, days=30),
                "families": insights.family_success(m.deps, limit=8),
                "injections": insights.recent_injections(m.deps, limit=8),
                "lessons": m.list_lessons(limit=8),
                "recent": m.recent(8, scope="*"),
            }

        return page(request, "overview.html", **await call(gather))

    async def lessons(request: Request) -> Response:
        status = request.query_params.get("status") or None
        q = request.query_params.get("q", "")
        if status is not None and status not in STATUSES:
            raise InvalidInputError("status", f"must be one of {', '.join(STATUSES)}")
        found = await call(insights.search_lessons, m.deps, q, status=status)
        problems = await call(_lesson_problems, m)
        return page(
            request,
            "lessons.html",
            lessons=found,
            status=status,
            q=q,
            statuses=STATUSES,
            problems=problems,
        )

    async def lesson(request: Request) -> Response:
        ident = request.path_params["id"]

        def gather() -> dict[str, Any]:
            detail = m.lesson_detail(ident)
            timeline = sorted(
                [(e, "for") for e in detail.supporting]
                + [(e, "against") for e in detail.contradicting],
                key=lambda pair: pair[0].created_at,
                reverse=True,
            )
            return {"d": detail, "timeline": timeline, "attr": insights.attribution(m.deps, ident)}

        return page(request, "lesson.html", **await call(gather))

    async def confirm(request: Request) -> Response:
        kind, ident, action = _target(request)
        subject = await call(m.get_lesson if kind == "lessons" else m.get, ident)
        return page(request, "confirm.html", kind=kind, subject=subject, action=action)

    async def act(request: Request) -> Response:
        kind, ident, action = _target(request)
        form = await request.form()
        if not secrets.compare_digest(str(form.get("csrf", "")), csrf):
            raise HTTPException(403, "missing or wrong CSRF token")
        reason = str(form.get("reason") or "").strip() or f"{action} from mimir ui"
        actor = "ui"
        if kind == "experiences":
            await call(m.forget, ident)
            return RedirectResponse("/experiences?done=forgotten", status_code=303)
        if action == "forget":
            await call(m.get_lesson, ident)
            await call(m.forget, ident, with_experiences=form.get("with_experiences") == "1")
            return RedirectResponse("/lessons?done=forgotten", status_code=303)
        if action in ("pin", "unpin"):
            await call(m.pin_lesson, ident, pinned=action == "pin", actor=actor)
        elif action == "quarantine":
            await call(m.quarantine_lesson, ident, reason, actor=actor)
        else:
            await call(m.retire_lesson, ident, reason, actor=actor)
        return RedirectResponse(f"/lessons/{seg(ident)}?done={action}", status_code=303)

    def _target(request: Request) -> tuple[str, str, str]:
        kind = request.url.path.split("/")[1]
        action = request.path_params.get("action", "forget")
        if action not in (LESSON_ACTIONS if kind == "lessons" else ("forget",)):
            raise HTTPException(404, f"no action {action!r}")
        return kind, request.path_params["id"], action

    async def experiences(request: Request) -> Response:
        q = request.query_params.get("q", "").strip()
        mode = request.query_params.get("mode", "text")
        if mode not in ("text", "semantic"):
            raise InvalidInputError("mode", f"must be text or semantic; got {mode!r}")

        def gather() -> dict[str, Any]:
            if not q:
                return {"rows": [(e, None) for e in m.recent(50, scope="*")]}
            if mode == "semantic":
                return {"rows": [(h.experience, h) for h in m.recall(q, 20, scope="*")]}
            return {"rows": [(e, None) for e in insights.search_text(m.deps, q, limit=100)]}

        return page(request, "experiences.html", q=q, mode=mode, **await call(gather))

    async def experience(request: Request) -> Response:
        exp = await call(m.get, request.path_params["id"])
        return page(request, "experience.html", e=exp)

    async def bench(request: Request) -> Response:
        curve = await call(insights.learning_curve, bench_dir) if bench_dir else None
        return page(request, "bench.html", curve=curve)

    async def feed(request: Request) -> Response:
        def gather() -> dict[str, Any]:
            return {
                "pulse": insights.pulse(m.deps).model_dump(),
                "experiences": [
                    {
                        "id": e.id,
                        "task": e.task,
                        "action": e.action,
                        "outcome": e.outcome,
                        "source": e.source,
                        "created_at": e.created_at.isoformat(timespec="seconds"),
                    }
                    for e in m.recent(8, scope="*")
                ],
                "lessons": [
                    {
                        "id": le.id,
                        "rule": le.rule,
                        "status": le.status,
                        "kind": le.kind,
                        "confidence": round(le.confidence, 2),
                    }
                    for le in m.list_lessons(limit=8)
                ],
            }

        return JSONResponse(await call(gather))

    async def not_found(request: Request, exc: Exception) -> Response:
        return page(request, "error.html", 404, title="Not found", message=str(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        code = getattr(exc, "status_code", 500)
        detail = getattr(exc, "detail", "") or "error"
        return page(request, "error.html", code, title=f"Error {code}", message=str(detail))

    async def bad_input(request: Request, exc: Exception) -> Response:
        code = 404 if getattr(exc, "field", "") == "id" else 400
        return page(request, "error.html", code, title="Bad request", message=str(exc))

    async def crash(request: Request, exc: Exception) -> Response:
        log.exception("error serving %s", request.url.path)
        msg = str(exc) if isinstance(exc, MimirError) else "see the log for details"
        return page(request, "error.html", 500, title="Something went wrong", message=msg)

    one = "/lessons/{id:str}"
    routes = [
        Route("/", overview),
        Route("/lessons", lessons),
        Route(one, lesson),
        Route(one + "/{action:str}", confirm, methods=["GET"]),
        Route(one + "/{action:str}", act, methods=["POST"]),
        Route("/experiences", experiences),
        Route("/experiences/{id:str}", experience),
        Route("/experiences/{id:str}/forget", confirm, methods=["GET"]),
        Route("/experiences/{id:str}/forget", act, methods=["POST"]),
        Route("/bench", bench),
        Route("/api/feed", feed),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    hosts = list(allowed_hosts) if allowed_hosts is not None else LOOPBACK_HOSTS
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=hosts)]
    if access_token is not None:
        middleware.append(Middleware(TokenGate, token=access_token))
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={
            NotFoundError: not_found,
            InvalidInputError: bad_input,
            HTTPException: http_error,
            Exception: crash,
        },
    )
