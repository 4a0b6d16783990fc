"""The MCP server: Mimir's tools, lessons and stats for any MCP client (stdio or streamable HTTP).

A thin rendering of the core's tool specs (:data:`mimir_core.tools.TOOLS`) on the official ``mcp``
SDK 2.x (``MCPServer``). Tool errors come back as ``isError`` results carrying the core's message
("k: must be an integer from 1 to 100; got 0"); an unknown prompt or resource, or a missing or bad
prompt or resource argument, is JSON-RPC -32602 naming it. Every reply that carries stored text
is fenced and neutralised by :mod:`mimir_core.fence` (resources as escaped JSON).
Start-up imports only the SDK and the tool specs;
the store and the embedding model load on a background thread once the first request is answered
(:class:`mimir_core.background.Maintainer`), which also drains the capture spool and runs
consolidation when it is due. Serve it with ``mimir mcp`` (stdio) or ``mimir mcp --http``.

Runnable example (offline, in process; ``pip install 'mimir-lessons[mcp]'``)::

    import tempfile

    import anyio
    from mcp import Client

    from mimir_core import Mimir
    from mimir_integrations.mcp_server import build_server

    server = build_server(Mimir(tempfile.mkdtemp()), background=False)

    async def main():
        async with Client(server) as client:   # any MCP client: Claude Code, Cursor, Codex...
            args = {"task": "deploy the app", "action": "kubectl apply", "reason": "ImagePull"}
            await client.call_tool("record_failure", args)
            found = await client.call_tool("recall_experiences", {"query": "deploy the app"})
            print(found.structured_content["hits"][0]["action"])   # kubectl apply

    anyio.run(main)
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mimir_core import __version__, tools
from mimir_core.background import Maintainer
from mimir_core.extras import requires_extra
from mimir_core.fence import json_text
from mimir_core.tool_io import MAX_DATA_CHARS, cap_data
from mimir_core.tools import AGENT_INSTRUCTIONS, TOOLS, ToolSpec

if TYPE_CHECKING:
    from mimir_core.memory import Mimir

with requires_extra("mimir_integrations.mcp_server", "mcp"):
    import anyio.to_thread
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
    from mcp.shared.exceptions import MCPError
    from mcp.types import CallToolResult, TextContent, ToolAnnotations
    from mcp.types import Tool as MCPTool

log = logging.getLogger("mimir.mcp")
SOURCE = "mcp"
#: JSON-RPC "invalid params": an unknown prompt or resource, a missing or bad argument.
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
#: The `mimir_context` prompt when nothing is known about the task.
NOTHING_KNOWN = "Mimir has no lessons or past attempts relevant to this task yet."


def render_tool(spec: ToolSpec) -> MCPTool:
    """One core tool spec as an MCP tool (schema, output schema, annotations)."""
    return MCPTool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.args.model_json_schema(),
        output_schema=spec.output.model_json_schema() if spec.output else None,
        annotations=ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=False,
        ),
    )


def run_tool(
    mimir: Mimir, name: str, arguments: dict[str, Any] | None, session: str | None = None
) -> CallToolResult:
    """Run a tool; every failure becomes an ``isError`` result with a message naming the cause."""
    out = tools.run_tool(mimir, name, arguments, source=SOURCE, session=session)
    if out.is_error:
        return _error(out.text)
    return CallToolResult(
        content=[TextContent(type="text", text=out.text)], structured_content=out.data
    )


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


class MimirMCPServer(MCPServer[Any]):
    """``MCPServer`` whose tools are the core's specs, run on worker threads."""

    def __init__(self, maintainer: Maintainer, *, background: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.maintainer = maintainer
        self.background = background
        #: The session records made through this server carry (a stdio server lives for one
        #: host session): evidence counts by independent session, not by volume.
        self.session_id = f"mcp-{uuid.uuid4().hex[:16]}"
        self._tools = [render_tool(spec) for spec in TOOLS]
        # Writes one at a time: concurrent HTTP clients writing at once only made the store
        # retry its commits ("commit conflict"), each retry holding its request's memory.
        self._write_lock = threading.Lock()

    def _begin(self) -> None:
        # Upkeep (store, model, spool, consolidation) starts with the first request, not at
        # start-up: the handshake and the first tools/list never wait for heavy imports.
        if self.background and not self.maintainer.started:
            self.maintainer.start()

    async def list_tools(self) -> list[MCPTool]:
        """The rendered specs."""
        self._begin()
        return list(self._tools)

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Any = None
    ) -> Any:
        """A prompt by name. An unknown name or a missing argument is the client's mistake:
        JSON-RPC -32602 naming it (the SDK answers code 0 and logs a traceback at ERROR)."""
        prompts = {p.name: p for p in await self.list_prompts()}
        prompt = prompts.get(name)
        if prompt is None:
            known = ", ".join(sorted(prompts))
            raise MCPError(INVALID_PARAMS, f"unknown prompt {name!r}; the prompts are: {known}")
        given = arguments or {}
        missing = [a.name for a in prompt.arguments or [] if a.required and a.name not in given]
        if missing:
            raise MCPError(
                INVALID_PARAMS,
                f"prompt {name!r} needs the argument(s): {', '.join(missing)}",
            )
        return await super().get_prompt(name, arguments, context)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Any = None
    ) -> CallToolResult:
        """Run the tool off the event loop so that other sessions stay responsive."""
        self._begin()
        session = _client_session(context) or self.session_id
        return await anyio.to_thread.run_sync(self._run, name, arguments, session)

    def _run(
        self, name: str, arguments: dict[str, Any] | None, session: str | None = None
    ) -> CallToolResult:
        try:
            mimir = self.maintainer.mimir
        except Exception as exc:  # bad configuration: every call says why
            return _error(f"cannot open Mimir: {type(exc).__name__}: {exc}")
        if name in _READ_ONLY:
            return run_tool(mimir, name, arguments, session or self.session_id)
        with self._write_lock:
            return run_tool(mimir, name, arguments, session or self.session_id)


_READ_ONLY = frozenset(spec.name for spec in TOOLS if spec.read_only)


def _client_session(context: Any) -> str | None:
    """The streamable-HTTP session of a call (its ``Mcp-Session-Id`` header): one server
    serves many clients there, each its own session. ``None`` over stdio."""
    try:
        headers = getattr(context, "headers", None)
        value = headers.get("mcp-session-id") if headers is not None else None
    except Exception:  # no HTTP request behind this call
        return None
    return f"mcp-{str(value)[:64]}" if value else None


def build_server(
    mimir: Mimir | Callable[[], Mimir],
    *,
    background: bool = True,
    interval: float = 30.0,
    log_level: str = "WARNING",
) -> MimirMCPServer:
    """The MCP server for ``mimir`` (an instance, or a factory called on first use).

    With ``background`` the upkeep thread starts with the server's first request (spool drain
    and auto-consolidation every ``interval`` seconds); stop it with ``server.maintainer.stop()``.
    """
    factory = mimir if callable(mimir) else (lambda: mimir)  # a Mimir is not callable
    maintainer = Maintainer(factory, interval=interval)
    level = log_level.upper() if log_level.upper() in logging._nameToLevel else "WARNING"
    server = MimirMCPServer(
        maintainer,
        background=background,
        name="mimir",
        title="Mimir",
        description="Experience-driven memory for agents: recall, recommend, record, lessons.",
        instructions=AGENT_INSTRUCTIONS,
        version=__version__,
        log_level=level,
    )
    _add_resources(server)
    return server


def _resource_call(fn: Callable[[Mimir], Any], what: str) -> Callable[[MimirMCPServer], str]:
    from mimir_core.errors import InvalidInputError, MimirError, NotFoundError

    def read(server: MimirMCPServer) -> str:
        try:
            data = fn(server.maintainer.mimir)
        except NotFoundError as exc:  # -32602, as for a URI no resource matches
            raise ResourceNotFoundError(f"{what}: {exc}") from None
        except InvalidInputError as exc:  # a bad template argument: the client's mistake
            raise MCPError(INVALID_PARAMS, f"{what}: {exc}", {"uri": what}) from None
        except (MimirError, OSError) as exc:  # a bad setting, an unusable home: say which
            raise ResourceError(f"{what}: {type(exc).__name__}: {exc}") from None
        except Exception as exc:  # a bug: named like a tool's, never a bare "Error reading"
            log.exception("resource %s failed", what)
            raise ResourceError(f"{what}: internal error: {type(exc).__name__}: {exc}") from None
        # A resource may be attached to a prompt whole: cap it like a tool result (x2), and
        # write it so that its text spells no tag and hides nothing (escapes: the data is exact).
        return json_text(cap_data(data, 2 * MAX_DATA_CHARS), indent=1)

    return read


def _add_resources(server: MimirMCPServer) -> None:
    from mimir_core.tools import lesson_data

    lessons = _resource_call(
        lambda m: {
            "lessons": [
                lesson_data(le).model_dump(mode="json")
                for le in m.list_lessons(status="active", limit=100)
            ]
        },
        "mimir://lessons",
    )
    stats = _resource_call(lambda m: m.stats().model_dump(mode="json"), "mimir://stats")
    json_type = "application/json"

    @server.resource("mimir://lessons", name="lessons", mime_type=json_type)
    def active_lessons() -> str:
        """The active lessons (rules served to agents), newest first."""
        return lessons(server)

    @server.resource("mimir://lessons/{lesson_id}", name="lesson", mime_type=json_type)
    def lesson(lesson_id: str) -> str:
        """One lesson with its supporting and contradicting experiences and its audit trail."""
        detail = _resource_call(
            lambda m: m.lesson_detail(lesson_id).model_dump(mode="json"),
            f"mimir://lessons/{lesson_id}",
        )
        return detail(server)

    @server.resource("mimir://stats", name="stats", mime_type=json_type)
    def store_stats() -> str:
        """Counts by outcome, source and project, lessons by status, and store facts."""
        return stats(server)

    @server.prompt(name="mimir_instructions", title="How to use Mimir's memory")
    def mimir_instructions() -> str:
        """When to recall and when to record experiences with Mimir."""
        return AGENT_INSTRUCTIONS

    @server.prompt(name="mimir_context", title="What Mimir knows about a task")
    def mimir_context(task: str) -> str:
        """Read at the start of a task: its lessons and what was observed on tasks like it
        (what failed here, what worked instead), fenced as data."""
        from mimir_core.errors import InvalidInputError, MimirError

        try:
            text = server.maintainer.mimir.context(task)
        except InvalidInputError as exc:
            raise MCPError(INVALID_PARAMS, f"mimir_context: {exc}") from None
        except (MimirError, OSError) as exc:  # a bad setting, an unusable home: say which
            raise MCPError(INTERNAL_ERROR, f"mimir_context: {type(exc).__name__}: {exc}") from None
        return text or NOTHING_KNOWN
