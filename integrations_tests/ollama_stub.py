"""Local servers that speak Ollama's HTTP API: one backed by the embedded models, one scripted.

The Ollama binary cannot be installed here, so the Ollama code paths (``ChatOllama``,
LlamaIndex ``Ollama``, both embedding classes, ``format=`` JSON schemas, ``/api/tags`` checks)
are tested against these stand-ins: ``/api/tags``, ``/api/version``, ``/api/show``, ``/api/chat``
and ``/api/generate`` (streamed as NDJSON or not) and ``/api/embed``.

- :class:`OllamaStub` answers with the embedded llama.cpp and sentence-transformers models
  (integration tier).
- :class:`ScriptedOllama` answers with a function of the request (unit tier): it can reply with
  a thinking block, stop at the token limit (``done_reason: "length"``) or report a full context.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from typing import Any

from integrations_tests.http_stub import JSONHandler

__all__ = ["OllamaStub", "ScriptedOllama", "StubReply"]


@dataclass
class StubReply:
    """What a stand-in answers to one chat or generate request."""

    content: str
    done_reason: str = "stop"
    prompt_eval_count: int = 0
    eval_count: int = 0
    thinking: str | None = None
    """Sent in the message's separate ``thinking`` field (Ollama's API for thinking models)."""


class _OllamaServer:
    """The HTTP side; subclasses implement :meth:`reply` and :meth:`embed`."""

    models: list[str]

    def __init__(self, port: int = 0):
        self.requests: list[tuple[str, dict[str, Any]]] = []
        server = self

        class Handler(JSONHandler):
            # Keep-alive connections, as Ollama's Go server keeps them: a client that reuses a pooled
            # connection on another event loop fails here as it does against the real server.
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                if self.path == "/api/tags":
                    tags = [{"name": n, "model": n, "size": 0, "digest": f"digest-of-{n}"} for n in server.models]
                    self._send(200, {"models": tags})
                elif self.path == "/api/version":
                    self._send(200, {"version": "0.12.0"})
                else:
                    self._send(404, {"error": "not found"})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                server.requests.append((self.path, body))
                model = body.get("model", "")
                try:
                    if self.path == "/api/embed":
                        self._send(200, server.embed(model, body.get("input", "")))
                    elif self.path == "/api/show":
                        self._send(200, {"modelfile": "", "details": {"family": "stub"}, "capabilities": ["completion"]})
                    elif self.path in ("/api/chat", "/api/generate"):
                        server._generate(self, body)
                    else:
                        self._send(404, {"error": "not found"})
                except KeyError:
                    self._send(404, {"error": f"model '{model}' not found"})

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reply(self, body: dict[str, Any], stream: Callable[[str], None] | None) -> StubReply:
        raise NotImplementedError

    def embed(self, model: str, text: str | list[str]) -> dict[str, Any]:
        raise NotImplementedError

    def _generate(self, handler: Any, body: dict[str, Any]) -> None:
        model = body["model"]
        if model.removesuffix(":latest") not in self.models:
            raise KeyError(model)
        chat = handler.path == "/api/chat"
        started = time.time_ns()

        def frame(text: str, done: bool, reply: StubReply | None = None) -> dict[str, Any]:
            out: dict[str, Any] = {"model": model, "created_at": datetime.now(UTC).isoformat(), "done": done}
            if chat:
                out["message"] = {"role": "assistant", "content": text}
                if reply is not None and reply.thinking:
                    out["message"]["thinking"] = reply.thinking
            else:
                out["response"] = text
            if done and reply is not None:
                out |= {
                    "done_reason": reply.done_reason,
                    "total_duration": time.time_ns() - started,
                    "prompt_eval_count": reply.prompt_eval_count,
                    "eval_count": reply.eval_count,
                }
            return out

        if not body.get("stream", True):
            reply = self.reply(body, None)
            handler._send(200, frame(reply.content, True, reply))
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "application/x-ndjson")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()

        def chunk(data: bytes) -> None:
            handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            handler.wfile.flush()

        def emit(delta: str) -> None:
            chunk((json.dumps(frame(delta, False)) + "\n").encode())

        reply = self.reply(body, emit)
        chunk((json.dumps(frame("", True, reply)) + "\n").encode())
        chunk(b"")


def _messages(body: dict[str, Any]) -> list[dict[str, str]]:
    if "messages" in body:
        return [{"role": m.get("role", "user"), "content": m.get("content", "")} for m in body["messages"]]
    return [{"role": "user", "content": body.get("prompt", "")}]


class OllamaStub(_OllamaServer):
    """Serve ``llm_models`` (name -> GGUF path) and ``embed_models`` (name -> sentence-transformers dir)."""

    def __init__(self, llm_models: dict[str, str], embed_models: dict[str, str], port: int = 0):
        super().__init__(port)
        self.llm_models = llm_models
        self.embed_models = embed_models
        self.models = [*llm_models, *embed_models]
        self._encoders: dict[str, Any] = {}

    def embed(self, model: str, text: str | list[str]) -> dict[str, Any]:
        from sentence_transformers import SentenceTransformer

        if model not in self._encoders:
            self._encoders[model] = SentenceTransformer(self.embed_models[model.removesuffix(":latest")], device="cpu")
        texts = [text] if isinstance(text, str) else text
        vectors = self._encoders[model].encode(texts, normalize_embeddings=True)
        return {"model": model, "embeddings": [v.tolist() for v in vectors]}

    def reply(self, body: dict[str, Any], stream: Callable[[str], None] | None) -> StubReply:
        from multihop_rag.serving.llamacpp import _constraint, load_llama

        options = body.get("options") or {}
        llama, lock = load_llama(self.llm_models[body["model"].removesuffix(":latest")], int(options.get("num_ctx") or 4096))
        params = {
            "max_tokens": int(options.get("num_predict") or 256),
            "temperature": float(options.get("temperature") or 0.0),
            "seed": int(options.get("seed") or 0),
            "format": body.get("format"),
        }
        if options.get("stop"):
            params["stop"] = options["stop"]
        with lock, _constraint(llama, params) as constraint:  # Ollama, too, checks the grammar on the chosen token
            if stream is None:
                raw = llama.create_chat_completion(messages=_messages(body), **constraint, **params)
                usage = raw.get("usage") or {}
                return StubReply(
                    raw["choices"][0]["message"]["content"] or "",
                    raw["choices"][0].get("finish_reason") or "stop",
                    usage.get("prompt_tokens", 0),
                    usage.get("completion_tokens", 0),
                )
            tokens, reason = 0, "stop"
            for chunk in llama.create_chat_completion(messages=_messages(body), stream=True, **constraint, **params):
                choice = chunk["choices"][0]
                if delta := choice["delta"].get("content"):
                    tokens += 1
                    stream(delta)
                reason = choice.get("finish_reason") or reason
            return StubReply("", reason, 0, tokens)


class ScriptedOllama(_OllamaServer):
    """Answers every chat or generate request with ``respond(request_body)`` (a text or a
    :class:`StubReply`); embeddings are bags of hashed words."""

    def __init__(self, respond: Callable[[dict[str, Any]], str | StubReply], models: list[str], port: int = 0):
        super().__init__(port)
        self.respond = respond
        self.models = list(models)

    def reply(self, body: dict[str, Any], stream: Callable[[str], None] | None) -> StubReply:
        answer = self.respond(body)
        reply = answer if isinstance(answer, StubReply) else StubReply(answer, eval_count=len(answer.split()))
        if stream is not None and reply.content:
            stream(reply.content)
        return reply

    def embed(self, model: str, text: str | list[str]) -> dict[str, Any]:
        from integrations_tests.fakes import HashEmbedding

        texts = [text] if isinstance(text, str) else text
        return {"model": model, "embeddings": [HashEmbedding()._vector(t) for t in texts]}
