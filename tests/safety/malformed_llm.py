"""An OpenAI-compatible endpoint on 127.0.0.1 that answers with exactly the bytes it is given.

``RawLLM(reply)`` sends the same ``Reply`` to every request: a status, a content type and a
body of raw bytes (truncated JSON, HTML, invalid UTF-8 ...), or it hangs, or it announces more
bytes than it sends.  ``CLASSES`` names one reply per kind of malformed answer (the tests take
one each); ``generated(rng)`` makes variants of them for the fuzzer.
"""
from __future__ import annotations

import json
import random
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

HANG, SHORT = "hang", "short"


@dataclass(frozen=True)
class Reply:
    """One HTTP answer, sent as is; ``mode`` ``hang`` never answers, ``short`` closes before the body ends."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    mode: str = "send"


def completion(content: Any = "x", **changes: Any) -> dict[str, Any]:
    document = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    document.update(changes)
    return document


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


def _html(status: int) -> bytes:
    return (f"<html><head><title>{status} Error</title></head><body><h1>{status}</h1>"
            f"<p>The upstream server is not available.</p></body></html>").encode()


def _error(status: int) -> Reply:
    headers = (("Retry-After", "0"),) if status == 429 else ()
    return Reply(status, _json({"error": {"message": f"error {status}", "type": "test", "code": None}}),
                 headers=headers)


FULL = _json(completion('{"mesh": {"tp": 2}}'))

# One reply per class of malformed or failing answer.  A missing server (connection refused)
# is not a reply: the tests point at a closed port for it.
CLASSES: dict[str, Reply] = {
    "truncated-json": Reply(body=FULL[: len(FULL) // 2]),
    "not-json": Reply(body=b"this is not json {"),
    "wrong-schema": Reply(body=_json({"result": "ok", "data": [1, 2, 3]})),
    "empty-choices": Reply(body=_json(completion(choices=[]))),
    "null-message": Reply(body=_json(completion(choices=[{"index": 0, "message": None}]))),
    "content-not-text": Reply(body=_json(completion({"ops": []}))),
    "invalid-utf8": Reply(body=b'{"choices": [{"message": {"content": "\xff\xfe\xfd"}}]'),
    "html-page": Reply(body=_html(200), content_type="text/html"),
    "html-502": Reply(502, _html(502), content_type="text/html"),
    "status-401": _error(401),
    "status-403": _error(403),
    "status-429": _error(429),
    "status-500": _error(500),
    "short-body": Reply(body=FULL, mode=SHORT),
    "hang": Reply(mode=HANG),
}


def _wrong_json(rng: random.Random) -> Any:
    leaf: list[Callable[[], Any]] = [lambda: None, lambda: rng.randint(-9, 9), lambda: "choices",
                                     lambda: [], lambda: {}]
    shapes: list[Callable[[], Any]] = [
        lambda: rng.choice(leaf)(),
        lambda: {"choices": rng.choice(leaf)()},
        lambda: completion(choices=[rng.choice(leaf)()]),
        lambda: completion(choices=[{"index": 0, "message": rng.choice(leaf)()}]),
        lambda: completion(rng.choice([1, 2.5, True, ["a"], {"k": "v"}])),
        lambda: completion(choices="not a list"),
        lambda: [completion()],
    ]
    return rng.choice(shapes)()


def generated(rng: random.Random) -> tuple[str, Reply]:
    """A random variant of one class: (class name, reply)."""
    kind = rng.choice(["truncated-json", "garbage", "wrong-json", "html", "status", "short-body", "hang"])
    if kind == "truncated-json":
        whole = _json(completion(rng.choice(["x", '{"mesh": {"tp": 2}, "ops": []}', "é" * 20])))
        return kind, Reply(body=whole[: rng.randrange(0, len(whole))])
    if kind == "garbage":
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
        return kind, Reply(body=body, content_type=rng.choice(["application/json", "text/plain", "",
                                                               "application/octet-stream"]))
    if kind == "wrong-json":
        return kind, Reply(body=_json(_wrong_json(rng)))
    if kind == "html":
        status = rng.choice([200, 400, 404, 500, 502, 503, 504])
        return kind, Reply(status, _html(status), content_type=rng.choice(["text/html", "application/json"]))
    if kind == "status":
        status = rng.choice([400, 401, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 504])
        body = rng.choice([_error(status).body, _html(status), b"", b"{", b"null"])
        return kind, Reply(status, body, headers=(("Retry-After", "0"),) if status == 429 else ())
    if kind == "short-body":
        whole = _json(completion())
        return kind, Reply(body=whole[: rng.randrange(1, len(whole))] + b" " * 10, mode=SHORT)
    return kind, Reply(mode=HANG)


class RawLLM:
    """A server on 127.0.0.1 that sends ``reply`` to every request (``requests`` counts them)."""

    def __init__(self, reply: Reply):
        self.reply = reply
        self.requests = 0
        self.stopping = threading.Event()
        raw = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw.requests += 1
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    raw._answer(self)
                except OSError:  # the client gave up first
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "RawLLM":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        reply = self.reply
        if reply.mode == HANG:
            self.stopping.wait(600)
            return
        handler.send_response(reply.status)
        if reply.content_type:
            handler.send_header("Content-Type", reply.content_type)
        announced = len(reply.body) * 2 + 10 if reply.mode == SHORT else len(reply.body)
        handler.send_header("Content-Length", str(announced))
        for name, value in reply.headers:
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(reply.body)
        handler.wfile.flush()
        if reply.mode == SHORT:
            handler.close_connection = True
