"""Mimir's tools (:data:`mimir_core.tools.specs.TOOLS`) as LangChain ``BaseTool`` s."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from mimir_core.errors import InvalidInputError, MimirError
from mimir_core.extras import requires_extra
from mimir_core.hosting.agent_run import open_mimir as open_mimir  # the adapters' one opener
from mimir_core.hosting.episodes import tool_key
from mimir_core.tools.specs import TOOLS, call_tool, get_tool

with requires_extra("mimir_integrations.langchain", "langchain"):
    from langchain_core.callbacks import CallbackManagerForToolRun
    from langchain_core.tools import BaseTool, BaseToolkit, ToolException

SOURCE = "langchain"
_CALL: contextvars.ContextVar[tuple[str | None, str | None]] = contextvars.ContextVar(
    "mimir_langchain_call", default=(None, None)
)


class _KeyedRecords:
    """The Mimir facade with writes keyed on the tool call: a re-executed call records once."""

    def __init__(self, mimir: Any, key: str, thread_id: str | None) -> None:
        self._mimir, self._key, self._thread = mimir, key, thread_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mimir, name)

    def record(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("idempotency_key", self._key)
        kwargs.setdefault("thread_id", self._thread)
        return self._mimir.record(*args, **kwargs)

    def record_failure(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("idempotency_key", self._key)
        kwargs.setdefault("thread_id", self._thread)
        return self._mimir.record_failure(*args, **kwargs)


class MimirTool(BaseTool):
    """One Mimir tool: name, description and argument schema from the core's ``ToolSpec``.

    Returns ``(text, data)``: the capped readable text for the model and the structured data as
    the ``ToolMessage.artifact``. A bad call answers with the core's message naming the argument
    (a ``status="error"`` result; ``handle_tool_error=False`` raises the ``MimirError``). Called
    with a tool call id (inside an agent), a recording tool stores its experience once per
    ``(thread_id, tool_call_id)`` and payload (the tool and its arguments).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = "recall_experiences"
    description: str = ""
    args_schema: type[BaseModel] | None = None
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    handle_tool_error: bool | str | Callable[[ToolException], str] | None = True
    mimir: Any = None

    def model_post_init(self, context: Any, /) -> None:
        spec = get_tool(self.name)
        self.description = self.description or spec.description
        self.args_schema = self.args_schema or spec.args
        self.mimir = open_mimir(self.mimir)

    def _to_args_and_kwargs(self, tool_input: Any, tool_call_id: str | None) -> Any:
        # The core validates (call_tool): its errors name the argument in Mimir's words, and an
        # argument a tool does not take is an error, not silently dropped.
        if isinstance(tool_input, dict):
            return (), dict(tool_input)
        if isinstance(tool_input, str):  # invoke("deploy"): the one argument the tool needs
            return (), self._string_args(tool_input)
        return super()._to_args_and_kwargs(tool_input, tool_call_id)

    def _string_args(self, text: str) -> dict[str, Any]:
        fields = get_tool(self.name).args.model_fields
        required = [name for name, field in fields.items() if field.is_required()]
        if len(required) == 1:
            return {required[0]: text}
        if not required and not text.strip():
            return {}
        wanted = ", ".join(required or fields)
        takes = f"takes {wanted} by name, not one string" if wanted else "takes no arguments"
        exc = InvalidInputError("input", f"{self.name} {takes}", text)
        if not self.handle_tool_error:
            raise exc
        raise ToolException(str(exc)) from exc

    def run(self, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        token = _CALL.set(_call_of(kwargs))
        try:
            return super().run(tool_input, *args, **kwargs)
        finally:
            _CALL.reset(token)

    async def arun(self, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        token = _CALL.set(_call_of(kwargs))
        try:
            return await super().arun(tool_input, *args, **kwargs)
        finally:
            _CALL.reset(token)

    def _run(
        self, run_manager: CallbackManagerForToolRun | None = None, **kwargs: Any
    ) -> tuple[str, dict[str, Any]]:
        thread_id, call_id = _CALL.get()
        target = self.mimir
        if call_id:
            # Keyed on the tool and its arguments too: a call id reused for another payload is
            # another record, never the earlier one answered back as "Recorded".
            key = tool_key(thread_id, call_id, self.name, kwargs)
            target = _KeyedRecords(self.mimir, key, thread_id)
        try:
            out = call_tool(target, self.name, kwargs, source=SOURCE)
        except MimirError as exc:  # the model sees what was wrong with which argument
            if not self.handle_tool_error:
                raise
            raise ToolException(str(exc)) from exc
        return out.text, out.data


def _call_of(kwargs: dict[str, Any]) -> tuple[str | None, str | None]:
    config = kwargs.get("config") or {}
    thread = (config.get("configurable") or {}).get("thread_id")
    return (None if thread is None else str(thread)), kwargs.get("tool_call_id")


def get_tools(mimir: Any = None, names: Iterable[str] | None = None) -> list[BaseTool]:
    """Mimir's tools (all, or those ``names``) on one Mimir."""
    mimir = open_mimir(mimir)
    wanted = [spec.name for spec in TOOLS] if names is None else list(names)
    return [MimirTool(name=get_tool(n).name, mimir=mimir) for n in wanted]


class MimirToolkit(BaseToolkit):
    """``MimirToolkit(mimir=...).get_tools()``: the same tools as the MCP server."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    mimir: Any = None
    names: Sequence[str] | None = None

    def get_tools(self) -> list[BaseTool]:
        """The tools."""
        return get_tools(self.mimir, self.names)
