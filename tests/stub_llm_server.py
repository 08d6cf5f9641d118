"""A scripted stand-in for a hosted LLM API, on 127.0.0.1, for tests (no network, no model).

It speaks just enough of the OpenAI chat-completions protocol (``POST /v1/chat/completions``) and of
Anthropic's messages protocol (``POST /v1/messages``) for the real SDK clients. Each request takes the
next `Reply` from the queue (or the default reply once the queue is empty) and is recorded in `requests` (GETs are not), so a test
can assert what was sent (grammar, extra body fields, headers) and how many attempts were made.

Example::

    from tests.stub_llm_server import Reply, StubLLMServer

    with StubLLMServer([Reply(status=429), Reply(text="ok")]) as stub:
        settings = load_settings(overrides={"llm": {"backend": "openai", "base_url": stub.base_url,
                                                    "model": "stub", "cache": False}})
        result = make_client(settings).chat(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
        assert result.text == "ok" and len(stub.requests) == 2
        assert stub.requests[-1].body["messages"][0]["content"] == "hi"

`Reply` fields: ``text`` (the assistant's reply), ``status`` (HTTP status; non-200 sends an error body),
``delay`` (seconds to sleep before answering: simulates a slow or hung server), ``body`` (raw bytes
sent as-is instead of a well-formed reply: garbage), ``headers`` (e.g. ``{"Retry-After": "0"}``),
``prompt_tokens`` / ``completion_tokens`` (the usage reported), ``cached_tokens`` (of the prompt tokens,
those reported reused from a prefix cache: OpenAI's and llama.cpp's ``prompt_tokens_details.cached_tokens``,
Anthropic's ``cache_read_input_tokens``; None reports nothing, as a server without a cache does).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class Reply:
    """One scripted answer."""

    text: str = "ok"
    status: int = 200
    delay: float = 0.0
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    prompt_tokens: int = 11
    completion_tokens: int = 3
    cached_tokens: int | None = None


@dataclass
class RecordedRequest:
    """What the stub received: method, path, headers (lower-case keys) and the JSON body (None if not JSON)."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    time: float


def _openai_body(reply: Reply, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": reply.text}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            **({} if reply.cached_tokens is None else {"prompt_tokens_details": {"cached_tokens": reply.cached_tokens}}),
        },
    }


def _anthropic_body(reply: Reply, model: str) -> dict[str, Any]:
    return {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": reply.text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": reply.prompt_tokens - (reply.cached_tokens or 0),  # Anthropic counts cache reads apart
            "output_tokens": reply.completion_tokens,
            **({} if reply.cached_tokens is None else {"cache_read_input_tokens": reply.cached_tokens}),
        },
    }


def _error_body(status: int, anthropic: bool) -> dict[str, Any]:
    if anthropic:
        return {"type": "error", "error": {"type": "api_error", "message": f"stub error {status}"}}
    return {"error": {"message": f"stub error {status}", "type": "stub_error", "code": status}}


class StubLLMServer:
    """Context manager running the stub on a free port in a background thread."""

    def __init__(self, replies: list[Reply] | None = None, default: Reply | None = None) -> None:
        self._queue: deque[Reply] = deque(replies or [])
        self.default = default or Reply()
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- scripting -------------------------------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        """Append replies to the queue (e.g. between two phases of a test)."""
        with self._lock:
            self._queue.extend(replies)

    def _next(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            return self._queue.popleft() if self._queue else self.default

    # --- lifecycle -------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._server is not None, "the stub is not running"
        return int(self._server.server_address[1])

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``.../v1``)."""
        return f"{self.root_url}/v1"

    def __enter__(self) -> StubLLMServer:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output quiet
                return

            def _record(self, body: dict[str, Any] | None) -> Reply:
                headers = {k.lower(): v for k, v in self.headers.items()}
                return stub._next(RecordedRequest(self.command, self.path, headers, body, time.time()))

            def _send(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
                    self.send_header("Content-Length", str(len(payload)))
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout) before the slow reply came

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/health":
                    self._send(200, b'{"status": "ok"}', {})
                elif self.path.rstrip("/").endswith("/models"):
                    self._send(
                        200,
                        json.dumps({"object": "list", "data": [{"id": "stub", "object": "model"}]}).encode(),
                        {},
                    )
                else:
                    self._send(404, b'{"error": {"message": "not found"}}', {})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                path = self.path.split("?")[0].rstrip("/")
                anthropic = path.endswith("/messages")
                if not (anthropic or path.endswith("/chat/completions")):
                    self._send(404, b'{"error": {"message": "not found"}}', {})
                    return
                reply = self._record(body if isinstance(body, dict) else None)
                if reply.delay:
                    time.sleep(reply.delay)
                headers = dict(reply.headers)
                if reply.body is not None:
                    self._send(reply.status, reply.body, headers)
                    return
                if reply.status != 200:
                    self._send(
                        reply.status, json.dumps(_error_body(reply.status, anthropic)).encode(), headers
                    )
                    return
                model = str((body or {}).get("model", "stub"))
                payload = _anthropic_body(reply, model) if anthropic else _openai_body(reply, model)
                self._send(200, json.dumps(payload).encode(), headers)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="stub-llm", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def stub_settings_file(folder: Path, base_url: str, *, rails: str = "") -> Path:
    """A settings file (`awm run --config`, `awm serve --config`) that points the model at this stub;
    `rails` adds lines under `[browser.rails]` (e.g. ``max_steps = 4``)."""
    config = Path(folder) / "stub.toml"
    config.write_text(
        f'[llm]\nbackend = "openai"\nbase_url = "{base_url}"\nmodel = "stub"\ncache = false\n'
        f"[browser]\npre_observation_delay = 0.2\n[browser.rails]\nconfirm_timeout_s = 20\n{rails}"
    )
    return config
