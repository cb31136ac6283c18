"""Misbehaving OpenAI-compatible servers on 127.0.0.1, one behaviour each, for safety tests and the fuzzer.

``FakeLLM(behaviour)`` answers every request the same way:

* ``status:N`` — HTTP N with an OpenAI error body (401, 403, 404, 429, 500, 503, ...);
* ``hang`` — accept the request, never answer;
* ``trickle`` — send headers, then one byte a second;
* ``reset`` — close the connection without an answer;
* ``garbage`` — HTTP 200 with a body that is not JSON;
* ``wrong-shape`` — HTTP 200 with JSON that is not a chat completion;
* ``null-content`` — HTTP 200, a completion whose content is a number;
* ``huge`` — HTTP 200, a completion of ``huge_bytes`` bytes;
* ``payload`` — HTTP 200, an IR whose dims are Python that would create ``MARK`` if evaluated.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BEHAVIOURS = ("status:401", "status:403", "status:404", "status:429", "status:500", "status:503", "hang", "trickle",
              "reset", "garbage", "wrong-shape", "null-content", "huge", "payload")
USER_ERRORS = {"status:401", "status:403", "status:404"}  # the user's to fix (still exit 3: nothing decided)

PAYLOAD_DIM = "__import__('os').system('touch MARK') or 4"


def payload_answer() -> str:
    program = {
        "mesh": {"tp": 2},
        "dims": {"N": None},
        "inputs": [{"name": "x", "shape": [PAYLOAD_DIM, "N"], "dtype": "f32", "placements": ["R"]}],
        "ops": [{"result": "y", "op": "relu", "args": ["x"], "attrs": {}, "line": 1}],
        "outputs": [{"name": "y", "placements": ["R"]}],
    }
    return json.dumps(program)


class FakeLLM:
    def __init__(self, behaviour: str, huge_bytes: int = 50_000_000):
        self.behaviour = behaviour
        self.requests = 0
        self.stopping = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                fake.requests += 1
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                try:
                    fake._answer(self, huge_bytes)
                except (BrokenPipeError, ConnectionResetError, OSError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "FakeLLM":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def _send(self, handler: BaseHTTPRequestHandler, status: int, body: bytes,
              content_type: str = "application/json") -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        if status == 429:
            handler.send_header("Retry-After", "0")
        handler.end_headers()
        handler.wfile.write(body)

    def _completion(self, content: Any) -> bytes:
        return json.dumps({"id": "x", "object": "chat.completion", "created": int(time.time()), "model": "fake",
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": content}}],
                           "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()

    def _answer(self, handler: BaseHTTPRequestHandler, huge_bytes: int) -> None:
        behaviour = self.behaviour
        if behaviour.startswith("status:"):
            status = int(behaviour.split(":")[1])
            body = json.dumps({"error": {"message": f"fake error {status}", "type": "fake", "code": None}}).encode()
            self._send(handler, status, body)
        elif behaviour == "hang":
            self.stopping.wait(600)
        elif behaviour == "trickle":
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", "1000000")
            handler.end_headers()
            while not self.stopping.wait(1.0):
                handler.wfile.write(b" ")
                handler.wfile.flush()
        elif behaviour == "reset":
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
        elif behaviour == "garbage":
            self._send(handler, 200, b"<html>not json</html>", "text/html")
        elif behaviour == "wrong-shape":
            self._send(handler, 200, b'{"hello": [1, 2, 3]}')
        elif behaviour == "null-content":
            self._send(handler, 200, self._completion(12345))
        elif behaviour == "huge":
            self._send(handler, 200, self._completion("x" * huge_bytes))
        elif behaviour == "payload":
            self._send(handler, 200, self._completion(payload_answer()))
        else:
            raise ValueError(f"unknown behaviour {behaviour!r}")
