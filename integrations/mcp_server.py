"""The MCP server: Mimir's tools, lessons and stats for any MCP client (stdio or streamable HTTP).

A thin rendering of the core's tool specs (:data:`mimir_core.tools.specs.TOOLS`) on the official
``mcp`` SDK 2.x (``MCPServer``). Tool errors come back as ``isError`` results carrying the core's
message ("k: must be an integer from 1 to 100; got 0"); an unknown prompt or resource, or a missing
or bad prompt or resource argument, is JSON-RPC -32602 naming it. Every reply that carries stored
text is fenced and neutralised by :mod:`mimir_core.tools.fence` (resources as escaped JSON).
Start-up imports only the SDK and the tool specs;
the store and the embedding model load on a background thread once the first request is answered
(:class:`mimir_core.hosting.background.Maintainer`), which also drains the capture spool and runs
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
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mimir_core import __version__
from mimir_core.extras import requires_extra
from mimir_core.hosting.background import Maintainer
from mimir_core.tools import serving as tool_serving
from mimir_core.tools.serving import ToolServer
from mimir_core.tools.specs import AGENT_INSTRUCTIONS, TOOLS, ToolOutput, ToolSpec

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


def render_result(out: ToolOutput) -> CallToolResult:
    """A tool's output as an MCP result; a failure is an ``isError`` result naming the cause."""
    if out.is_error:
        return CallToolResult(content=[TextContent(type="text", text=out.text)], is_error=True)
    return CallToolResult(
        content=[TextContent(type="text", text=out.text)], structured_content=out.data
    )


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
        self.runner = ToolServer(lambda: self.maintainer.mimir, source=SOURCE)

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
        out = await anyio.to_thread.run_sync(self.runner.call, name, arguments, session)
        return render_result(out)


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
    def read(server: MimirMCPServer) -> str:
        try:
            data = fn(server.maintainer.mimir)
        except Exception as exc:
            kind, named = tool_serving.failure(exc), f"{type(exc).__name__}: {exc}"
            if kind == "not_found":  # -32602, as for a URI no resource matches
                raise ResourceNotFoundError(f"{what}: {exc}") from None
            if kind == "invalid":  # a bad template argument: the client's mistake
                raise MCPError(INVALID_PARAMS, f"{what}: {exc}", {"uri": what}) from None
            if kind == "internal":  # a bug: named like a tool's, never a bare "Error reading"
                log.exception("resource %s failed", what)
                raise ResourceError(f"{what}: internal error: {named}") from None
            raise ResourceError(f"{what}: {named}") from None  # a bad setting, an unusable home
        return tool_serving.resource_text(data)

    return read


def _add_resources(server: MimirMCPServer) -> None:
    lessons = _resource_call(tool_serving.active_lessons, "mimir://lessons")
    stats = _resource_call(tool_serving.store_stats, "mimir://stats")
    json_type = "application/json"

    @server.resource("mimir://lessons", name="lessons", mime_type=json_type)
    def active_lessons() -> str:
        """The active lessons (rules served to agents), newest first."""
        return lessons(server)

    @server.resource("mimir://lessons/{lesson_id}", name="lesson", mime_type=json_type)
    def lesson(lesson_id: str) -> str:
        """One lesson with its supporting and contradicting experiences and its audit trail."""
        uri = f"mimir://lessons/{lesson_id}"
        return _resource_call(lambda m: tool_serving.lesson_detail(m, lesson_id), uri)(server)

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
        try:
            return tool_serving.context_prompt(server.maintainer.mimir, task)
        except Exception as exc:
            kind = tool_serving.failure(exc)
            if kind == "invalid":
                raise MCPError(INVALID_PARAMS, f"mimir_context: {exc}") from None
            if kind == "internal":
                raise
            raise MCPError(INTERNAL_ERROR, f"mimir_context: {type(exc).__name__}: {exc}") from None
