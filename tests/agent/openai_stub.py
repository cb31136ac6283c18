"""A real OpenAI-compatible HTTP server on 127.0.0.1 that answers from a script.

The agent talks to it through the real ``openai`` client over real sockets, so retries,
status codes and request bodies are exercised end to end.  Every request body is kept in
``requests`` for the test to read.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted HTTP answer: a chat completion (``content``) or an error (``status``)."""

    content: str | None = None
    status: int = 200  # 0: drop the connection without an answer (a reset)
    error: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    tokens_in: int = 100
    tokens_out: int = 50
    finish_reason: str = "stop"
    delay: float = 0.0  # seconds before answering (to provoke client timeouts)


def completion(content: str, **kwargs: Any) -> Reply:
    return Reply(content=content, **kwargs)


def failure(status: int, message: str, **kwargs: Any) -> Reply:
    return Reply(status=status, error=message, **kwargs)


def reset() -> Reply:
    return Reply(status=0)


def slow(content: str, seconds: float) -> Reply:
    return Reply(content=content, delay=seconds)


class OpenAIStub:
    def __init__(self, script: list[Reply] | None = None):
        self.script = list(script or [])
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with stub.lock:
                    stub.requests.append(body)
                    stub.paths.append(self.path)
                    reply = stub.script.pop(0) if stub.script else failure(500, "the test script has no more replies")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    reply = failure(404, f"no route {self.path}")
                self._send(reply, body)

            def _send(self, reply: Reply, body: dict[str, Any]) -> None:
                time.sleep(reply.delay)
                if reply.status == 0:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if reply.status == 200:
                    payload = {
                        "id": f"chatcmpl-{len(stub.requests)}", "object": "chat.completion",
                        "created": int(time.time()), "model": body.get("model", "stub"),
                        "choices": [{"index": 0, "finish_reason": reply.finish_reason,
                                     "message": {"role": "assistant", "content": reply.content}}],
                        "usage": {"prompt_tokens": reply.tokens_in, "completion_tokens": reply.tokens_out,
                                  "total_tokens": reply.tokens_in + reply.tokens_out},
                    }
                else:
                    payload = {"error": {"message": reply.error, "type": "invalid_request_error", "code": None}}
                data = json.dumps(payload).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> "OpenAIStub":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def user_messages(self, index: int) -> list[str]:
        """The user-role texts of request ``index`` (0-based)."""
        return [m["content"] for m in self.requests[index]["messages"] if m["role"] == "user"]

    def feedback_texts(self) -> list[str]:
        """Every feedback message the agent sent (user messages after the first task message)."""
        texts = []
        for request in self.requests:
            users = [m["content"] for m in request["messages"] if m["role"] == "user"]
            texts.extend(users[1:])
        return list(dict.fromkeys(texts))
