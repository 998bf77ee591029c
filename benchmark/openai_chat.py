"""A minimal OpenAI-compatible chat-completions client (urllib; tenacity for the retries), shared by the LLM
rewrite pass, the user simulator's LLM backend and the evaluator's API backend.

``base_url`` is the server root or its ``/v1``. 429, 5xx, timeouts and connection failures are
retried ``retries`` times with exponential backoff (``backoff * 2**attempt`` seconds, or the server's
Retry-After when it is longer, capped at ``max_backoff``), then ``ChatError`` is raised with
``transient=True``; other HTTP errors and malformed replies raise at once (``transient=False``).
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from cypherturn.errors import InfrastructureError


class ChatError(InfrastructureError):
    """The endpoint gave no usable completion; ``transient`` says whether retries were exhausted."""

    def __init__(self, message: str, *, transient: bool):
        super().__init__(message)
        self.transient = transient


class _Transient(InfrastructureError):
    """A failure worth retrying (429, 5xx, timeout, dropped connection); never leaves this module."""

    def __init__(self, message: str, *, retry_after: str | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def _error_body(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read(500).decode("utf-8", "replace").strip()
    except Exception:  # noqa: BLE001 - the body is only a detail of the message
        return ""


class OpenAIChat:
    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 30,
                 retries: int = 3, backoff: float = 1.0, max_backoff: float = 30.0):
        root = base_url.rstrip("/")
        self.url = root + ("/chat/completions" if root.endswith("/v1") else "/v1/chat/completions")
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff

    def _request(self, body: dict) -> urllib.request.Request:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return urllib.request.Request(self.url, data=json.dumps(body).encode("utf-8"), headers=headers,
                                      method="POST")

    def _wait(self, state: RetryCallState) -> float:
        """Seconds before the next attempt: ``backoff * 2**n``, or the server's Retry-After when it is
        longer (capped at ``max_backoff``)."""
        delay = self.backoff * 2 ** (state.attempt_number - 1)
        retry_after = getattr(state.outcome.exception(), "retry_after", None) if state.outcome else None
        if retry_after:
            try:
                delay = max(delay, min(float(retry_after), self.max_backoff))
            except ValueError:
                pass  # an HTTP date; the exponential delay will do
        return delay

    def complete(self, messages: list[dict[str, str]], *, temperature: float = 0.0, max_tokens: int = 512,
                 seed: int | None = None, **extra: Any) -> str:
        """The assistant message content of one completion."""
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": temperature,
                                "max_tokens": max_tokens, **extra}
        if seed is not None:
            body["seed"] = seed  # servers that honour it make runs reproducible
        request = self._request(body)
        retrying = Retrying(stop=stop_after_attempt(self.retries + 1), wait=self._wait,
                            retry=retry_if_exception_type(_Transient), sleep=time.sleep, reraise=True)
        try:
            return retrying(self._complete_once, request)
        except _Transient as exc:
            raise ChatError(f"{self.url} failed {self.retries + 1} time(s); last error: {exc}",
                            transient=True) from None

    def _complete_once(self, request: urllib.request.Request) -> str:
        """One request: the content, ``_Transient`` for what is worth retrying, ``ChatError`` otherwise."""
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read().decode("utf-8"))
            content = payload["choices"][0]["message"]["content"]
            return content if isinstance(content, str) else ""
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code} {exc.reason}: {_error_body(exc)}".strip()
            if exc.code != 429 and exc.code < 500:
                raise ChatError(f"{self.url} refused the request: {last}", transient=False) from None
            raise _Transient(last, retry_after=exc.headers.get("Retry-After")) from None
        except (TimeoutError, socket.timeout) as exc:
            raise _Transient(f"no answer within {self.timeout:g} s ({exc})") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (TimeoutError, socket.timeout)):
                raise _Transient(f"no answer within {self.timeout:g} s") from None
            raise _Transient(f"cannot reach the server: {exc.reason}") from None
        except (ConnectionError, http.client.HTTPException) as exc:  # dropped mid-response
            raise _Transient(f"the connection failed: {exc!r}") from None
        except UnicodeDecodeError as exc:
            raise ChatError(f"{self.url} sent a reply that is not valid UTF-8 ({exc.reason} at byte {exc.start})",
                            transient=False) from None
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ChatError(f"{self.url} sent a reply that is not a chat completion: {exc!r}",
                            transient=False) from None
