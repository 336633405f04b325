"""A stand-in for an OpenAI-compatible model server with ``slots`` parallel slots and a fixed delay per
request: the simulation of an Ollama / vLLM / llama.cpp host that the build benchmarks and the pool
tests run against (no model, no CPU: the delay is a sleep).

Its replies are extractive and deterministic, shaped to each prompt the methods send: the facts of a
paragraph as JSON (a schema in ``response_format``), GARLIC's bullet points (one per segment), triples
for a knowledge-graph prompt, and for any other prompt the first sentence of each paragraph (a
summary). ``/props`` reports ``total_slots`` as llama.cpp's server does; ``down = True`` makes it
answer 503, a host that fails; ``malformed = f`` cuts that share of its JSON replies in half (a small
model's reply that does not parse), spread evenly. ``slot_seconds`` sums the time requests held a slot
(its share of ``slots`` × wall time is how busy the host was). ``token_delay`` paces a streamed reply's tokens;
``streams_cut`` counts the streams whose client closed them before the end.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Any

from integrations_tests.http_stub import JSONHandler
from multihop_rag.indexing.text import count_tokens, encoding

__all__ = ["SlotServer", "stand_in_reply", "stream_chunks"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_NAME = re.compile(r"\b[A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+)*")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text.strip()) if s.strip()]


def _resolve(node: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``node`` with a ``$ref`` into the schema's ``$defs`` replaced by its target."""
    ref = node.get("$ref")
    return schema["$defs"][ref.rsplit("/", 1)[-1]] if ref else node


def _facts(paragraph: str, schema: dict[str, Any]) -> dict[str, Any]:
    facts_schema = schema["properties"]["facts"]
    most = facts_schema.get("maxItems", 30)
    item = _resolve(facts_schema["items"], schema)
    entities_most = item["properties"]["entities"].get("maxItems", 10)
    return {"facts": [{"fact": s, "entities": list(dict.fromkeys(_NAME.findall(s)))[:entities_most]}
                      for s in _sentences(paragraph)[:most]]}


def _instance(schema: dict[str, Any], text: str) -> Any:
    """A valid instance of ``schema`` drawn from ``text``."""
    props = schema.get("properties", {})
    if "facts" in props:
        paragraph = text.rsplit("Paragraph:", 1)[-1].split("Output:")[0]
        return _facts(paragraph, schema)
    if "enum" in schema:
        return schema["enum"][0]
    out: dict[str, Any] = {}
    for name, sub in props.items():
        if "enum" in sub:
            out[name] = sub["enum"][0]
        elif sub.get("type") == "array":
            out[name] = []
        else:
            out[name] = _sentences(text)[0] if _sentences(text) else ""
    return out


def stand_in_reply(prompt: str, schema: dict[str, Any] | None = None) -> str:
    """What the stand-in answers to ``prompt`` (see the module docstring)."""
    if schema is not None:
        return json.dumps(_instance(schema, prompt))
    if "Summary the following information" in prompt:  # GARLIC's summary prompt
        body = prompt.split("\n", 1)[-1]
        return "\n".join(f"* {_sentences(line)[0]}" for line in body.splitlines()[:-3] if _sentences(line))
    if "knowledge triplets" in prompt:  # LlamaIndex's triplet extraction
        text = prompt.rsplit("Text:", 1)[-1]
        names = list(dict.fromkeys(_NAME.findall(text)))
        return "\n".join(f"({a}, relates to, {b})" for a, b in zip(names, names[1:], strict=False)) or "(none, is, none)"
    paragraphs = [p for p in re.split(r"\n\s*\n|\n", prompt) if len(p.split()) > 6]
    return " ".join(_sentences(p)[0] for p in paragraphs[:8]) or "Unknown."


def stream_chunks(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """A reply as the chunks a streaming server sends: one a token (tiktoken's, as the usage it reports), the finish
    reason on the last."""
    choice = reply["choices"][0]
    chat = "message" in choice
    text = choice["message"]["content"] if chat else choice["text"]
    pieces = [encoding().decode([token]) for token in encoding().encode(text)] or [""]
    chunks = []
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        part = {"delta": {"content": piece}} if chat else {"text": piece}
        chunks.append({"id": reply["id"], "object": "chat.completion.chunk" if chat else "text_completion",
                       "created": 0, "model": reply["model"],
                       "choices": [{"index": 0, **part, "finish_reason": choice["finish_reason"] if last else None}]})
    return chunks


class SlotServer:
    """``with SlotServer(slots=4, delay=0.5) as server: …`` — ``server.url`` ends in ``/v1``."""

    def __init__(self, slots: int = 1, delay: float = 0.2, model: str = "stand-in", malformed: float = 0.0,
                 token_delay: float = 0.0):
        self.slots, self.delay, self.model, self.malformed = slots, delay, model, malformed
        self.token_delay = token_delay
        self.streams_cut = 0
        self.down = False
        self.requests = 0
        self.json_replies = 0
        self.slot_seconds = 0.0
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._gate = threading.Semaphore(slots)
        server = self

        class Handler(JSONHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                if self.path.endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
                elif self.path.endswith("/props"):
                    self._send(200, {"total_slots": server.slots})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if server.down:
                    self._send(503, {"error": {"message": "host down", "type": "server_error"}})
                    return
                reply = server.answer(self.path, body)
                if not body.get("stream"):
                    self._send(200, reply)
                elif not self._send_events(stream_chunks(reply), server.token_delay):
                    with server._lock:
                        server.streams_cut += 1

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with self._gate:
            started = time.perf_counter()
            with self._lock:
                self.requests += 1
                self._in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self._in_flight)
            try:
                time.sleep(self.delay)
                if "messages" in body:
                    prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
                else:
                    prompt = str(body.get("prompt", ""))
                fmt = body.get("response_format") or {}
                schema = fmt.get("json_schema", {}).get("schema") if fmt.get("type") == "json_schema" else None
                text = stand_in_reply(prompt, schema)
                if schema is not None and self._cut_next():
                    text = text[: len(text) // 2]
            finally:
                with self._lock:
                    self._in_flight -= 1
                    self.slot_seconds += time.perf_counter() - started
        prompt_tokens, completion_tokens = count_tokens(prompt), count_tokens(text)  # tiktoken, as the estimates
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        if "messages" in body:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            return {"id": "stub", "object": "chat.completion", "created": 0, "model": self.model, "choices": [choice], "usage": usage}
        choice = {"index": 0, "text": text, "finish_reason": "stop"}
        return {"id": "stub", "object": "text_completion", "created": 0, "model": self.model, "choices": [choice], "usage": usage}

    def _cut_next(self) -> bool:
        """Whether this JSON reply is one of the ``malformed`` share (every 1/f-th, evenly spread)."""
        with self._lock:
            self.json_replies += 1
            n = self.json_replies
        return int(n * self.malformed) > int((n - 1) * self.malformed)

    def __enter__(self) -> SlotServer:
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._http.shutdown()
        self._http.server_close()
