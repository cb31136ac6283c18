"""Talk to an OpenAI-compatible chat endpoint: one request in, one answer out, or one clear error.

Transient trouble (HTTP 429, 5xx, timeouts, connection resets, malformed bodies) is retried
with exponential backoff (honouring ``Retry-After``) under one total deadline for the client's
whole life (``LLMSettings.llm_deadline``), with ``tenacity``; when it runs out the error is
``LLMUnavailable`` (exit 3: nothing was decided).  A body that is not a chat completion
(truncated or non-JSON, an HTML page, the wrong schema, no choices, content that is not text)
is retried the same way and ends as ``LLMInvalidAnswer``.  An endpoint that cannot be used at
all — a bad key (401/403), an unknown model (404), no server at the URL (connection refused,
unknown host) — is ``LLMUnavailable`` at once, with a one-line message that says what to fix;
a missing endpoint or model in the settings is a plain ``LLMError`` (exit 2: the command line
is incomplete).  Nothing the endpoint sends can end the command as an internal error.  An answer longer than
``max_answer_bytes`` is not read: it comes back as a truncated completion.  A 400 that
complains about ``response_format`` means the endpoint has no structured output; the caller
falls back to asking for ``.vir`` text (``StructuredOutputUnsupported``).
"""
from __future__ import annotations

import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

import openai
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_after_delay

from .settings import LLMSettings


class LLMError(Exception):
    """The endpoint cannot be used; the message is one line a user can act on."""


class LLMUnavailable(LLMError):
    """The endpoint could not be used (it failed, refused or kept failing until the LLM deadline): inconclusive."""

    prefix = "LLM unavailable"


class LLMInvalidAnswer(LLMUnavailable):
    """The endpoint answered, but not with a chat completion we can read: inconclusive."""

    prefix = "LLM gave an invalid answer"


class MalformedAnswer(Exception):
    """One response body was not a chat completion (retried like a flaky proxy)."""


class AnswerTooLarge(Exception):
    """The endpoint announced or sent more than ``max_answer_bytes``."""


class StructuredOutputUnsupported(Exception):
    """The endpoint rejected ``response_format`` json_schema."""


@dataclass(frozen=True)
class Completion:
    text: str
    tokens_in: int
    tokens_out: int
    response_format: str  # "json" | "vir"
    truncated: bool = False


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _refused(exc: BaseException) -> bool:
    return any(isinstance(e, ConnectionRefusedError) for e in _chain(exc))


def _unresolvable(exc: BaseException) -> bool:
    return any(isinstance(e, socket.gaierror) for e in _chain(exc))


def _status(exc: BaseException) -> int | None:
    return getattr(exc, "status_code", None)


def _quota(exc: BaseException) -> bool:
    body = getattr(exc, "body", None)
    text = str(body if body is not None else exc).lower()
    return "insufficient_quota" in text


def _too_large(exc: BaseException) -> bool:
    return any(isinstance(e, AnswerTooLarge) for e in _chain(exc))


def _transient(exc: BaseException) -> bool:
    if _too_large(exc):
        return False
    if isinstance(exc, MalformedAnswer):
        return True
    if isinstance(exc, openai.APIResponseValidationError):
        return True  # a malformed body: a flaky proxy more often than a broken server
    if isinstance(exc, openai.APITimeoutError):
        return True
    if isinstance(exc, openai.APIConnectionError):
        return not (_refused(exc) or _unresolvable(exc))
    status = _status(exc)
    if status == 429:
        return not _quota(exc)
    return status is not None and status >= 500


def _first_line(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc)
    return message.strip().splitlines()[0][:300] if message.strip() else exc.__class__.__name__


def _about_response_format(exc: BaseException) -> bool:
    text = str(getattr(exc, "body", None) or "") + " " + str(exc)
    return any(word in text.lower() for word in ("response_format", "json_schema", "structured output",
                                                   "guided_json", "response format"))


class ChatClient:
    def __init__(self, settings: LLMSettings):
        if not settings.base_url:
            raise LLMError("no LLM endpoint configured: pass --base-url or set OPENAI_BASE_URL")
        if not settings.model:
            raise LLMError(f"no model for the LLM endpoint {settings.base_url}: pass --model or set VERIFY_AGENT_MODEL")
        self.settings = settings
        self.url = settings.base_url.rstrip("/")
        self.expires = time.monotonic() + settings.llm_deadline
        # max_retries=0: tenacity does the retrying, under one deadline.
        self.openai = openai.OpenAI(base_url=self.url, api_key=settings.api_key or "not-needed", max_retries=0,
                                    timeout=settings.request_timeout, http_client=self._http_client())

    def _http_client(self) -> Any:
        """The default HTTP client, with a transport that enforces the deadline and the size cap
        while the body streams in (a server trickling one byte a second never times out a read)."""
        try:
            httpx = sys.modules[openai.DefaultHttpxClient.__mro__[1].__module__.split(".")[0]]
            transport = _bounded_transport(httpx, self.settings.max_answer_bytes, lambda: self.expires)
            return openai.DefaultHttpxClient(transport=transport)
        except (AttributeError, KeyError, IndexError, TypeError):  # pragma: no cover - another HTTP stack
            return None

    def remaining(self) -> float:
        return max(0.0, self.expires - time.monotonic())

    def complete(self, messages: list[dict[str, str]], schema: dict[str, Any] | None = None) -> Completion:
        """One answer; ``schema`` asks for structured JSON output."""
        settings = self.settings
        arguments: dict[str, Any] = {"model": settings.model, "messages": messages,
                                     "temperature": settings.temperature, "max_tokens": settings.max_tokens}
        if schema is not None:
            arguments["response_format"] = {"type": "json_schema",
                                            "json_schema": {"name": "vir_program", "schema": schema, "strict": False}}
        started = time.monotonic()
        if self.remaining() <= 0:
            raise LLMUnavailable(f"the LLM deadline ({settings.llm_deadline:g} s) is spent")
        stop = (stop_after_attempt(settings.retry_attempts)
                | stop_after_delay(min(settings.retry_deadline, self.remaining())))
        retrying = Retrying(retry=retry_if_exception(_transient), wait=self._wait, stop=stop, reraise=True)

        response_format = "json" if schema is not None else "vir"

        failures: list[Exception] = []  # the deadline ends the retries with the last real failure

        def attempt() -> Completion:
            left = self.remaining()
            if left <= 0:
                raise failures[-1] if failures else openai.APITimeoutError(request=None)  # type: ignore[arg-type]
            try:
                try:
                    response = self.openai.with_options(timeout=min(settings.request_timeout, left)
                                                        ).chat.completions.create(**arguments)
                except (ValueError, TypeError, KeyError, AttributeError, UnicodeError) as exc:
                    # the client could not decode the body (truncated JSON, a schema it cannot build)
                    raise MalformedAnswer(_malformed(exc)) from None
                return self._completion(response, response_format)
            except (MalformedAnswer, openai.APIError) as exc:
                failures.append(exc)
                raise

        try:
            return retrying(attempt)
        except openai.APIError as exc:
            if _too_large(exc):
                return Completion("", 0, 0, response_format, truncated=True)
            raise self._error(exc, schema is not None, time.monotonic() - started) from None
        except AnswerTooLarge:
            return Completion("", 0, 0, response_format, truncated=True)
        except MalformedAnswer as exc:
            raise LLMInvalidAnswer(f"the LLM endpoint {self.url} {exc}; gave up after "
                                   f"{time.monotonic() - started:.0f} s of retries") from None

    def _wait(self, state: RetryCallState) -> float:
        settings = self.settings
        backoff = min(settings.retry_max_wait, settings.retry_initial_wait * 2 ** (state.attempt_number - 1))
        exc = state.outcome.exception() if state.outcome else None
        response = getattr(exc, "response", None)
        header = response.headers.get("retry-after") if response is not None else None
        try:
            asked = float(header) if header is not None else 0.0
        except ValueError:
            asked = 0.0
        wait = max(backoff, min(asked, settings.retry_max_wait))
        return max(0.0, min(wait, self.remaining()))  # never sleep past the deadline

    def _error(self, exc: openai.APIError, structured: bool, elapsed: float) -> Exception:
        url, model = self.url, self.settings.model
        status = _status(exc)
        if isinstance(exc, openai.APIConnectionError) and _refused(exc):
            return LLMUnavailable(f"no LLM endpoint at {url} (connection refused): start the server or fix --base-url / "
                            f"OPENAI_BASE_URL")
        if isinstance(exc, openai.APIConnectionError) and _unresolvable(exc):
            return LLMUnavailable(f"cannot resolve the host of the LLM endpoint {url}: check --base-url / OPENAI_BASE_URL")
        if status == 401:
            return LLMUnavailable(f"the LLM endpoint {url} rejected the API key (401 Unauthorized): check OPENAI_API_KEY")
        if status == 403:
            return LLMUnavailable(f"the LLM endpoint {url} refused access (403 Forbidden): {_first_line(exc)}")
        if status == 404:
            return LLMUnavailable(f"model {model!r} not found at {url} (404): check --model / VERIFY_AGENT_MODEL "
                            f"(and that the base URL ends in /v1)")
        if status == 429 and _quota(exc):
            return LLMUnavailable(f"the LLM endpoint {url} says the quota is exhausted (429 insufficient_quota)")
        if isinstance(exc, openai.APIResponseValidationError):
            return LLMInvalidAnswer(f"the LLM endpoint {url} sent a body that is not a chat completion "
                                    f"({_first_line(exc)}); gave up after {elapsed:.0f} s of retries")
        if status in (400, 422) and structured and _about_response_format(exc):
            return StructuredOutputUnsupported(_first_line(exc))
        if _transient(exc):
            what = "timed out" if isinstance(exc, openai.APITimeoutError) else (
                f"kept failing (HTTP {status})" if status else "kept dropping the connection")
            return LLMUnavailable(f"the LLM endpoint {url} {what}; gave up after {elapsed:.0f} s of retries "
                                  f"(--llm-deadline {self.settings.llm_deadline:g} s)")
        if status is not None:
            return LLMUnavailable(f"the LLM endpoint {url} rejected the request (HTTP {status}): {_first_line(exc)}")
        return LLMUnavailable(f"the LLM endpoint {url} failed: {_first_line(exc)}")

    def _completion(self, response: Any, response_format: str) -> Completion:
        """The answer in ``response``; ``MalformedAnswer`` when it is not a chat completion."""
        if isinstance(response, (str, bytes)):
            raise MalformedAnswer(f"sent a body that is not JSON ({_preview(response)})")
        try:
            choices = getattr(response, "choices", None)
            choice = choices[0] if isinstance(choices, (list, tuple)) else None
        except IndexError:
            choice = None
        if choice is None:
            raise MalformedAnswer("sent JSON without a chat completion's choices"
                                  + (" (an empty list)" if choices == [] else ""))
        message = getattr(choice, "message", None)
        if message is None or isinstance(message, (str, int, float, list)):
            raise MalformedAnswer("sent a chat completion whose choice has no message")
        text = getattr(message, "content", None)
        if text is not None and not isinstance(text, str):
            raise MalformedAnswer("sent a chat completion whose content is not text")
        if text is not None and len(text.encode("utf-8", "replace")) > self.settings.max_answer_bytes:
            return Completion("", 0, 0, response_format, truncated=True)
        refusal = getattr(message, "refusal", None)
        if text is None and refusal:
            raise LLMInvalidAnswer(f"the model refused to answer: {' '.join(str(refusal).split())[:200]}")
        usage = getattr(response, "usage", None)
        return Completion(text or "", _count(getattr(usage, "prompt_tokens", 0)),
                          _count(getattr(usage, "completion_tokens", 0)), response_format,
                          truncated=getattr(choice, "finish_reason", None) == "length")


def _preview(body: Any) -> str:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    text = " ".join(text.split())
    return repr(text[:60] + ("..." if len(text) > 60 else ""))


def _malformed(exc: BaseException) -> str:
    """What was wrong with a body the client could not decode, in a few words."""
    if isinstance(exc, ValueError) and exc.__class__.__name__ == "JSONDecodeError":
        return f"sent a body that is not complete JSON ({' '.join(str(exc).split())[:120]})"
    if isinstance(exc, ValueError) and exc.__class__.__name__ == "ValidationError":
        return "sent JSON that is not a chat completion"
    return f"sent a body that is not a chat completion ({exc.__class__.__name__})"


def _bounded_transport(httpx: Any, max_bytes: int, expires: Any) -> Any:
    """An ``httpx`` transport whose response bodies stop at ``max_bytes`` and at the deadline."""

    class BoundedStream(httpx.SyncByteStream):
        def __init__(self, inner: Any, request: Any):
            self.inner, self.request = inner, request

        def __iter__(self):
            received = 0
            for chunk in self.inner:
                received += len(chunk)
                if received > max_bytes:
                    raise AnswerTooLarge(f"more than {max_bytes} bytes")
                if time.monotonic() > expires():
                    raise httpx.ReadTimeout("the LLM deadline passed while the answer was arriving",
                                            request=self.request)
                yield chunk

        def close(self) -> None:
            self.inner.close()

    class BoundedTransport(httpx.HTTPTransport):
        def handle_request(self, request: Any) -> Any:
            response = super().handle_request(request)
            length = response.headers.get("content-length", "")
            if length.isdigit() and int(length) > max_bytes:
                response.close()
                raise AnswerTooLarge(f"{length} bytes announced")
            return httpx.Response(response.status_code, headers=response.headers,
                                  stream=BoundedStream(response.stream, request), extensions=response.extensions,
                                  request=request)

    return BoundedTransport()


def _count(value: Any) -> int:
    """A token count from the server; anything that is not a non-negative int counts 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
