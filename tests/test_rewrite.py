"""The optional LLM rewrite pass.

No LLM can run offline here, so ``apply_rewrite`` is tested with ``ScriptedRewriter``, a tiny
deterministic stand-in for a backend that returns a prepared answer per utterance. ``OpenAIRewriter``
is tested against a real HTTP server on 127.0.0.1 (``http.server`` in a thread) that speaks the
chat-completions protocol: it proves the request format, retry with exponential backoff on 429,
timeouts and 5xx, and the clear error once the retries are spent.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from benchmark.rewrite import (HFRewriter, OpenAIRewriter, RewriteError, RewriteStats, apply_rewrite,
                               must_keep)

UTTERANCE = "Which provinces does Quabro Tasherk govern with more than 1500 citizens?"
KEEP = ["Quabro Tasherk", "1500"]


class ScriptedRewriter:
    """Deterministic stand-in for an LLM backend: answers from a script, or raises."""

    def __init__(self, answer):
        self.answer = answer
        self.calls: list[tuple[str, str]] = []

    def rewrite(self, utterance: str, persona: str) -> str:
        self.calls.append((utterance, persona))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize("answer", [
    "  Hey, what provinces does Quabro Tasherk run that have over 1500 citizens?  ",
    "Which ones match? Provinces of Quabro Tasherk with more than 1500 citizens.",  # lower-case "match" is fine
])
def test_accepts_a_faithful_rewrite(answer):
    stats = RewriteStats()
    rewriter = ScriptedRewriter(answer)
    text, ok = apply_rewrite(rewriter, UTTERANCE, "casual_user", KEEP, stats)
    assert ok and text == answer.strip()
    assert rewriter.calls == [(UTTERANCE, "casual_user")]
    assert stats.as_dict() == {"attempted": 1, "accepted": 1, "rejected": 0, "errors": 0, "reasons": {}}


@pytest.mark.parametrize("answer, reason", [
    ("Which provinces does Quabro govern with more than 1500 citizens?", "lost_value"),  # name cut short
    ("Which provinces does quabro tasherk govern with more than 1500 citizens?", "lost_value"),  # case
    ("Which provinces does Quabro Tasherk govern with more than 1,500 citizens?", "lost_value"),  # reformatted
    ("", "empty"),
    ("   ", "empty"),
    (None, "empty"),
    ("Quabro Tasherk 1500 " + "and so on " * 30, "too_long"),  # over 3x the template
    ("Which provinces does {emperor} govern, Quabro Tasherk, 1500?", "braces"),
    ("MATCH the provinces of Quabro Tasherk with 1500 citizens", "cypher_keyword"),
    ("Provinces of Quabro Tasherk WHERE citizens > 1500?", "cypher_keyword"),
    ("Sure! Here it is:\nWhich provinces does Quabro Tasherk govern with 1500+ citizens?", "multi_line"),
])
def test_rejects_an_unfaithful_rewrite(answer, reason):
    stats = RewriteStats()
    text, ok = apply_rewrite(ScriptedRewriter(answer), UTTERANCE, "journalist", KEEP, stats)
    assert (text, ok) == (UTTERANCE, False)
    assert (stats.attempted, stats.accepted, stats.rejected, stats.errors) == (1, 0, 1, 0)
    assert stats.reasons == {reason: 1}


def test_a_failing_backend_does_not_break_the_build():
    stats = RewriteStats()
    for _ in range(2):
        text, ok = apply_rewrite(ScriptedRewriter(RewriteError("server down")), UTTERANCE, "student", KEEP, stats)
        assert (text, ok) == (UTTERANCE, False)
    apply_rewrite(ScriptedRewriter("Quabro Tasherk: 1500?"), UTTERANCE, "student", KEEP, stats)
    assert stats.as_dict() == {"attempted": 3, "accepted": 1, "rejected": 0, "errors": 2, "reasons": {}}


def test_keyword_already_in_the_template_is_not_a_leak():
    original = "Show the SET of legions of Quabro Tasherk"
    text, ok = apply_rewrite(ScriptedRewriter("Give me the SET of Quabro Tasherk's legions"), original,
                             "impatient_exec", ["Quabro Tasherk"])
    assert ok


def test_must_keep():
    assert must_keep(["Quabro Tasherk", 1500, None, " ", "Quabro Tasherk", 2.5, "Rome "]) == [
        "Quabro Tasherk", "1500", "2.5", "Rome"]


# -- OpenAIRewriter against a local server ----------------------------------------------------------

def completion(text: str) -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop"}]}).encode()


class ChatServer:
    """A chat-completions endpoint on 127.0.0.1 that plays a script of (status, body, delay_s) replies;
    the last one repeats. It records each request's arrival time, path, headers and JSON body."""

    def __init__(self, script):
        self.script = list(script)
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                n = len(server.requests)
                server.requests.append({"t": time.monotonic(), "path": self.path, "body": body,
                                        "auth": self.headers.get("Authorization")})
                status, payload, delay = server.script[min(n, len(server.script) - 1)]
                time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up waiting (the timeout test)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


ANSWER = "Hey, which provinces does Quabro Tasherk run with over 1500 citizens?"


def test_retries_429_then_succeeds():
    with ChatServer([(429, b'{"error": "rate limited"}', 0), (200, completion(f' "{ANSWER}" '), 0)]) as srv:
        rw = OpenAIRewriter(srv.url, "tiny-model", api_key="sk-test", temperature=0.2, retries=3, backoff=0.1)
        assert rw.rewrite(UTTERANCE, "casual_user") == ANSWER  # surrounding quotes and spaces stripped
    assert len(srv.requests) == 2
    assert srv.requests[1]["t"] - srv.requests[0]["t"] >= 0.1  # waited backoff * 2**0 before retrying
    req = srv.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer sk-test"
    assert req["body"]["model"] == "tiny-model" and req["body"]["temperature"] == 0.2
    roles = [m["role"] for m in req["body"]["messages"]]
    assert roles == ["system", "user"] and UTTERANCE in req["body"]["messages"][1]["content"]


def test_retries_a_timeout():
    with ChatServer([(200, completion("too late"), 1.0), (200, completion(ANSWER), 0)]) as srv:
        rw = OpenAIRewriter(srv.url + "/v1/", "m", timeout=0.3, retries=1, backoff=0.01)
        assert rw.rewrite(UTTERANCE, "student") == ANSWER
    assert [r["path"] for r in srv.requests] == ["/v1/chat/completions"] * 2
    assert srv.requests[0]["auth"] is None  # no key, no header


def test_gives_up_after_retries_with_a_clear_error():
    with ChatServer([(500, b'{"error": "boom"}', 0)]) as srv:
        rw = OpenAIRewriter(srv.url, "m", retries=2, backoff=0.05)
        with pytest.raises(RewriteError) as err:
            rw.rewrite(UTTERANCE, "student")
        # and inside the pass it is counted, never raised
        stats = RewriteStats()
        assert apply_rewrite(rw, UTTERANCE, "student", KEEP, stats) == (UTTERANCE, False)
        assert stats.errors == 1
    message = str(err.value)
    assert "failed 3 time(s)" in message and "HTTP 500" in message and "boom" in message
    assert srv.requests[0]["path"] == "/v1/chat/completions"
    gaps = [b["t"] - a["t"] for a, b in zip(srv.requests, srv.requests[1:3])]
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1  # exponential: 0.05 then 0.1 s


def test_client_errors_are_not_retried():
    with ChatServer([(401, b'{"error": "bad key"}', 0)]) as srv:
        with pytest.raises(RewriteError, match="refused the request: HTTP 401"):
            OpenAIRewriter(srv.url, "m", retries=3, backoff=0.01).rewrite(UTTERANCE, "student")
    assert len(srv.requests) == 1


def test_malformed_reply_is_a_clear_error():
    with ChatServer([(200, b'{"choices": []}', 0)]) as srv:
        with pytest.raises(RewriteError, match="not a chat completion"):
            OpenAIRewriter(srv.url, "m", backoff=0.01).rewrite(UTTERANCE, "student")


def test_hf_rewriter_needs_transformers(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if it were not installed
    with pytest.raises(ImportError, match="pip install transformers"):
        HFRewriter("some/model")
