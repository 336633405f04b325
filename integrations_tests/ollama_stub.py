"""A local server that speaks Ollama's HTTP API, backed by the embedded models.

The Ollama binary cannot be installed here, so the Ollama code paths (``ChatOllama``,
LlamaIndex ``Ollama``, both embedding classes, ``format=`` JSON schemas, ``/api/tags`` checks)
are tested against this stand-in: ``/api/tags``, ``/api/version``, ``/api/show``, ``/api/chat``
and ``/api/generate`` (streamed as NDJSON or not) and ``/api/embed``.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from multihop_rag.llamacpp import _response_format, load_llama


class OllamaStub:
    """Serve ``llm_models`` (name -> GGUF path) and ``embed_models`` (name -> sentence-transformers dir)."""

    def __init__(self, llm_models: dict[str, str], embed_models: dict[str, str], port: int = 0):
        self.llm_models = llm_models
        self.embed_models = embed_models
        self._encoders: dict[str, Any] = {}
        self.requests: list[tuple[str, dict[str, Any]]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/api/tags":
                    names = [*stub.llm_models, *stub.embed_models]
                    self._send(200, {"models": [{"name": n, "model": n, "size": 0, "digest": "0"} for n in names]})
                elif self.path == "/api/version":
                    self._send(200, {"version": "0.12.0"})
                else:
                    self._send(404, {"error": "not found"})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.end_headers()

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                stub.requests.append((self.path, body))
                model = body.get("model", "")
                try:
                    if self.path == "/api/embed":
                        self._send(200, stub.embed(model, body.get("input", "")))
                    elif self.path == "/api/show":
                        self._send(200, {"modelfile": "", "details": {"family": "stub"}, "capabilities": ["completion"]})
                    elif self.path in ("/api/chat", "/api/generate"):
                        stub.generate(self, body)
                    else:
                        self._send(404, {"error": "not found"})
                except KeyError:
                    self._send(404, {"error": f"model '{model}' not found"})

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> OllamaStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def embed(self, model: str, text: str | list[str]) -> dict[str, Any]:
        from sentence_transformers import SentenceTransformer

        if model not in self._encoders:
            self._encoders[model] = SentenceTransformer(self.embed_models[model.removesuffix(":latest")], device="cpu")
        texts = [text] if isinstance(text, str) else text
        vectors = self._encoders[model].encode(texts, normalize_embeddings=True)
        return {"model": model, "embeddings": [v.tolist() for v in vectors]}

    def generate(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        model = body["model"]
        path = self.llm_models[model]
        chat = handler.path == "/api/chat"
        messages = body.get("messages") if chat else [{"role": "user", "content": body.get("prompt", "")}]
        options = body.get("options") or {}
        llama, lock = load_llama(path, int(options.get("num_ctx") or 4096))
        params = {
            "max_tokens": int(options.get("num_predict") or 256),
            "temperature": float(options.get("temperature") or 0.0),
            "seed": int(options.get("seed") or 0),
            "response_format": _response_format(body.get("format") or None),
        }
        stream = body.get("stream", True)
        started = time.time_ns()

        def frame(text: str, done: bool, usage: dict[str, int] | None = None) -> dict[str, Any]:
            out: dict[str, Any] = {"model": model, "created_at": datetime.now(UTC).isoformat(), "done": done}
            if chat:
                out["message"] = {"role": "assistant", "content": text}
            else:
                out["response"] = text
            if done:
                out |= {
                    "done_reason": "stop",
                    "total_duration": time.time_ns() - started,
                    "prompt_eval_count": (usage or {}).get("prompt_tokens", 0),
                    "eval_count": (usage or {}).get("completion_tokens", 0),
                }
            return out

        plain = [{"role": m.get("role", "user"), "content": m.get("content", "")} for m in messages]
        if not stream:
            with lock:
                raw = llama.create_chat_completion(messages=plain, **params)
            handler._send(200, frame(raw["choices"][0]["message"]["content"] or "", True, raw.get("usage")))
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "application/x-ndjson")
        handler.end_headers()
        tokens = 0
        with lock:
            for chunk in llama.create_chat_completion(messages=plain, stream=True, **params):
                if delta := chunk["choices"][0]["delta"].get("content"):
                    tokens += 1
                    handler.wfile.write((json.dumps(frame(delta, False)) + "\n").encode())
                    handler.wfile.flush()
        final = frame("", True, {"prompt_tokens": 0, "completion_tokens": tokens})
        handler.wfile.write((json.dumps(final) + "\n").encode())
        handler.wfile.flush()
