"""Small fake model servers on 127.0.0.1 for host end-to-end tests (Anthropic, OpenAI chat
completions and Responses, Gemini ``generateContent``).

Both follow one script language in the last user message that contains it:
``CALL:toolA,toolB ARGS={json}`` calls the tools one per round trip (when the host offers
them), then answers ``FINAL: tool said <last tool result>``; without ``CALL:`` they answer a
greeting. Every request body is kept in ``server.requests`` for assertions.

``server.script = [(tool, args), ...]`` (opt-in) replaces the language: after each user prompt
the model calls those tools in order, each with its own arguments, then answers ``FINAL: ...``;
the prompt then holds only the user's words (what a memory keyed on the task text sees).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_CALL = re.compile(r"CALL:([A-Za-z0-9_\-,]+)")
_ARGS = re.compile(r"ARGS=(\{.*?\})(?:\s|$)", re.S)


def _blocks(msg: dict[str, Any]) -> list[dict[str, Any]]:
    content = msg.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def decide_script(body: dict[str, Any], script: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The next step of ``server.script`` for either API: the calls not yet answered since the
    last user prompt (a user message that is no tool result), then the final answer."""
    msgs = body.get("messages", [])
    tools = {t.get("name") or t.get("function", {}).get("name") for t in body.get("tools") or []}

    def results(m: dict[str, Any]) -> list[Any]:
        if m.get("role") == "tool":
            return [m.get("content")]
        return [b.get("content") for b in _blocks(m) if b.get("type") == "tool_result"]

    def is_prompt(m: dict[str, Any]) -> bool:
        # Copilot CLI delivers a preToolUse hook's context as a user message of its own.
        hook_note = _text(m.get("content")).startswith("Additional context from ")
        return m.get("role") == "user" and not results(m) and not hook_note

    prompt = max((i for i, m in enumerate(msgs) if is_prompt(m)), default=-1)
    done = [r for m in msgs[prompt + 1 :] for r in results(m)]
    if len(done) < len(script):
        name, args = script[len(done)]
        return {"tool": name, "args": args} if name in tools else {"text": f"(no tool {name})"}
    return {"text": "FINAL: tool said " + (_text(done[-1])[:300] if done else "nothing")}


def decide_anthropic(body: dict[str, Any]) -> dict[str, Any]:
    msgs = body.get("messages", [])
    tools = {t.get("name") for t in body.get("tools", []) or []}
    start, text = None, None
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i].get("role") == "user":
            for b in _blocks(msgs[i]):
                if b.get("type") == "text" and "CALL:" in b.get("text", ""):
                    start, text = i, b["text"]
                    break
            if text:
                break
    if not text or start is None:
        return {"text": "Hello from the fake Anthropic API."}
    m = _CALL.search(text)
    wanted = m.group(1).split(",") if m else []
    a = _ARGS.search(text)
    args = json.loads(a.group(1)) if a else {}
    results = [b for m_ in msgs[start + 1 :] for b in _blocks(m_) if b.get("type") == "tool_result"]
    if len(results) < len(wanted):
        name = wanted[len(results)]
        return {"tool": name, "args": args} if name in tools else {"text": f"(no tool {name})"}
    return {"text": "FINAL: tool said " + _text(results[-1].get("content"))[:300]}


def decide_openai(body: dict[str, Any]) -> dict[str, Any]:
    msgs = body.get("messages", [])
    tools = {t.get("function", {}).get("name") for t in body.get("tools", []) or []}
    uidx = -1
    for i, m in enumerate(msgs):
        if m.get("role") == "user" and "CALL:" in _text(m.get("content")):
            uidx = i
    if uidx < 0:
        return {"text": "Hello from the fake LLM."}
    utext = _text(msgs[uidx].get("content"))
    done = [m for m in msgs[uidx + 1 :] if m.get("role") == "tool"]
    m = _CALL.search(utext)
    wanted = m.group(1).split(",") if m else []
    a = _ARGS.search(utext)
    args = json.loads(a.group(1)) if a else {}
    if len(done) < len(wanted):
        name = wanted[len(done)]
        return {"tool": name, "args": args} if name in tools else {"text": f"(no tool {name})"}
    return {"text": "FINAL: tool said " + _text(done[-1].get("content"))[:200]}


def responses_as_chat(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses request as chat completions ``messages`` and ``tools``, so one script
    language drives both: input messages keep their role and text, ``function_call_output``
    items become ``tool`` messages."""
    msgs: list[dict[str, Any]] = []
    for item in body.get("input") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call_output":
            msgs.append({"role": "tool", "content": _text(item.get("output"))})
        elif item.get("type", "message") == "message":
            msgs.append({"role": item.get("role"), "content": _text(item.get("content"))})
    tools = [{"function": {"name": t.get("name")}} for t in body.get("tools") or []]
    return {"messages": msgs, "tools": tools}


def gemini_as_chat(body: dict[str, Any]) -> dict[str, Any]:
    """A Gemini request as chat completions ``messages`` and ``tools``: text parts keep their
    role (``model`` → ``assistant``), ``functionResponse`` parts become ``tool`` messages."""
    msgs: list[dict[str, Any]] = []
    for content in body.get("contents") or []:
        parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
        for p in parts:
            answer = p.get("functionResponse") or p.get("function_response")
            if isinstance(answer, dict):
                msgs.append({"role": "tool", "content": json.dumps(answer.get("response"))})
        text = " ".join(str(p["text"]) for p in parts if "text" in p)
        if text:
            role = "assistant" if content.get("role") == "model" else "user"
            msgs.append({"role": role, "content": text})
    tools = [
        {"function": {"name": f.get("name")}}
        for t in body.get("tools") or []
        for f in t.get("functionDeclarations") or t.get("function_declarations") or []
    ]
    return {"messages": msgs, "tools": tools}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, obj: Any, code: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: list[tuple[str | None, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for name, data in events:
            head = f"event: {name}\n" if name else ""
            self.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
        if self.server.kind == "openai":
            self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            model = {"id": "fake-model", "object": "model", "created": 0, "owned_by": "fake"}
            return self._json({"object": "list", "data": [model]})
        self._json({"error": "not found"}, 404)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?")[0].rstrip("/")
        self.server.requests.append({"path": self.path, "body": body})
        if self.server.kind == "anthropic":
            if path.endswith("/count_tokens"):
                return self._json({"input_tokens": 42})
            if not path.endswith("/v1/messages"):
                return self._json({})
            return self._anthropic(body)
        if self.server.kind == "gemini":
            if ":countTokens" in path:
                return self._json({"totalTokens": 42})
            return self._gemini(body, stream="alt=sse" in self.path)
        if self.server.kind == "responses":
            if not path.endswith("/responses"):
                return self._json({"error": "not found"}, 404)
            return self._responses(body)
        if not path.endswith("/chat/completions"):
            return self._json({"error": "not found"}, 404)
        return self._openai(body)

    def _gemini(self, body: dict[str, Any], *, stream: bool) -> None:
        """Gemini ``generateContent`` / ``streamGenerateContent?alt=sse`` (Gemini CLI). A
        request for JSON (the CLI's routing and next-speaker checks) gets a fixed verdict."""
        config = body.get("generationConfig") or {}
        if config.get("responseMimeType") == "application/json":
            verdict = {
                "reasoning": "fake",
                "next_speaker": "user",
                "model_choice": "flash",
                "complexity_reasoning": "fake",
                "complexity_score": 1,
            }
            part: dict[str, Any] = {"text": json.dumps(verdict)}
        else:
            chat = gemini_as_chat(body)
            script = self.server.script
            d = decide_script(chat, script) if script else decide_openai(chat)
            if "tool" in d:
                call = {"name": d["tool"], "args": d["args"], "id": "fc_" + uuid.uuid4().hex[:8]}
                part = {"functionCall": call}
            else:
                part = {"text": d["text"]}
        reply = {
            "candidates": [
                {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": 10,
                "candidatesTokenCount": 5,
                "totalTokenCount": 15,
            },
        }
        if not stream:
            return self._json(reply)
        self._sse([(None, reply)])

    def _responses(self, body: dict[str, Any]) -> None:
        """The OpenAI Responses API, streamed (what Codex CLI speaks): one output item."""
        chat = responses_as_chat(body)
        script = self.server.script
        d = decide_script(chat, script) if script else decide_openai(chat)
        rid = "resp_" + uuid.uuid4().hex[:12]
        if "tool" in d:
            item: dict[str, Any] = {
                "type": "function_call",
                "id": "fc_" + uuid.uuid4().hex[:8],
                "call_id": "call_" + uuid.uuid4().hex[:8],
                "name": d["tool"],
                "arguments": json.dumps(d["args"]),
                "status": "completed",
            }
        else:
            text = {"type": "output_text", "text": d["text"], "annotations": []}
            item = {
                "type": "message",
                "id": "msg_" + uuid.uuid4().hex[:8],
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": {"id": rid}},
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": {"id": rid, "usage": usage}},
        ]
        self._sse([(e["type"], e) for e in events])

    def _anthropic(self, body: dict[str, Any]) -> None:
        script = self.server.script
        d = decide_script(body, script) if script else decide_anthropic(body)
        mid = "msg_" + uuid.uuid4().hex[:12]
        model = body.get("model", "claude-fake")
        usage = {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        if "tool" in d:
            block = {
                "type": "tool_use",
                "id": "toolu_" + uuid.uuid4().hex[:12],
                "name": d["tool"],
                "input": d["args"],
            }
            stop = "tool_use"
        else:
            block, stop = {"type": "text", "text": d["text"]}, "end_turn"
        if not body.get("stream"):
            return self._json(
                {
                    "id": mid,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [block],
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                }
            )
        start = dict(block, input={}) if "tool" in d else {"type": "text", "text": ""}
        delta = (
            {"type": "input_json_delta", "partial_json": json.dumps(d["args"])}
            if "tool" in d
            else {"type": "text_delta", "text": d["text"]}
        )
        message = {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        self._sse(
            [
                ("message_start", {"type": "message_start", "message": message}),
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": start},
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": delta},
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop, "stop_sequence": None},
                        "usage": {"output_tokens": 5},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        )

    def _openai(self, body: dict[str, Any]) -> None:
        script = self.server.script
        d = decide_script(body, script) if script else decide_openai(body)
        cid, now = "chatcmpl-" + uuid.uuid4().hex[:12], int(time.time())
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if "tool" in d:
            call = {
                "id": "call_" + uuid.uuid4().hex[:8],
                "type": "function",
                "function": {"name": d["tool"], "arguments": json.dumps(d["args"])},
            }
            msg: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            msg, finish = {"role": "assistant", "content": d["text"]}, "stop"
        if not body.get("stream"):
            choice = {"index": 0, "message": msg, "finish_reason": finish}
            return self._json(
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": now,
                    "model": "fake-model",
                    "usage": usage,
                    "choices": [choice],
                }
            )

        def chunk(delta: dict[str, Any], fr: str | None = None, u: bool = False) -> Any:
            c: dict[str, Any] = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": now,
                "model": "fake-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": fr}],
            }
            if u:
                c["usage"] = usage
            return (None, c)

        events = [chunk({"role": "assistant", "content": ""})]
        if "tool" in d:
            tc = msg["tool_calls"][0]
            fn = tc["function"]
            events.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": tc["id"],
                                "type": "function",
                                "function": {"name": fn["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            events.append(
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": fn["arguments"]}}]})
            )
        else:
            events.append(chunk({"content": d["text"]}))
        events.append(chunk({}, finish, u=True))
        self._sse(events)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, kind: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.kind = kind
        self.requests: list[dict[str, Any]] = []
        self.script: list[tuple[str, dict[str, Any]]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextmanager
def fake_model_server(kind: str) -> Iterator[_Server]:
    """A fake ``anthropic`` (Messages), ``openai`` (chat completions), ``responses``
    (OpenAI Responses) or ``gemini`` (``generateContent``) server, in a thread."""
    server = _Server(kind)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
