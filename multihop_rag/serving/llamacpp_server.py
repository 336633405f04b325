"""OpenAI-compatible chat endpoints for tools that only speak that API (GraphRAG).

Ollama serves one at ``$OLLAMA_HOST/v1``. For the embedded model, :class:`LlamaCppServer` runs
llama.cpp's server (``llama-cpp-python[server]``) in a subprocess bound to 127.0.0.1 on a free
port; it stops when stopped, garbage-collected, when Python exits, or — watching its parent —
when the parent process is killed.

``python -m multihop_rag.serving.llamacpp_server`` is that subprocess: llama-cpp-python's own FastAPI
app plus one adapter. OpenAI clients (litellm, hence GraphRAG) ask for structured output as
``response_format={"type": "json_schema", "json_schema": {"schema": …}}``; llama-cpp-python
0.3.x only accepts ``{"type": "json_object", "schema": …}`` (and answers 500 otherwise), so
:func:`rewrite_response_format` translates the request — the schema still becomes a grammar.

A request may also carry ``x_record_delimiter``: its reply is a list of records separated by that
string, and when generation stops at the token limit the record being written is a fragment —
:func:`drop_cut_record` cuts the reply back to its last complete record before the client sees it
(GraphRAG's extraction records, which GraphRAG would otherwise keep with a cut description).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index.core.llms.llm import LLM

from multihop_rag.errors import BackendError
from multihop_rag.serving.profile import profile, unwrap

__all__ = ["LlamaCppServer", "OpenAIEndpoint", "openai_endpoint", "rewrite_response_format", "drop_cut_record"]

RECORD_DELIMITER_FIELD = "x_record_delimiter"


@dataclass(frozen=True)
class OpenAIEndpoint:
    """Where an OpenAI-compatible chat model answers."""

    api_base: str
    """Base URL ending in ``/v1``."""
    model: str
    """Model name the server knows."""
    api_key: str = "local"
    """The key requests carry (:class:`LlamaCppServer` makes one per start; Ollama ignores it)."""
    grammar: bool = False
    """Whether requests may carry a llama.cpp GBNF ``grammar`` field (llama.cpp's server: yes)."""


KEY_VARIABLE = "MULTIHOP_RAG_SERVER_KEY"
"""The environment variable that hands the server its API key (never on the command line, which ``ps`` shows)."""


def _listening_socket() -> socket.socket:
    """A socket listening on a free port of 127.0.0.1, handed to the server process as it is: the port is held from
    the moment it is chosen (no bind, close and bind again, which another process could win)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


def _stop(process: subprocess.Popen[bytes], folder: str) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
    shutil.rmtree(folder, ignore_errors=True)  # its log


class LlamaCppServer:
    """llama.cpp's OpenAI-compatible server for one GGUF file, on 127.0.0.1.

    Example::

        with LlamaCppServer(bundled.gguf_path("default")) as endpoint:
            ...  # endpoint.api_base == "http://127.0.0.1:<port>/v1"
    """

    def __init__(
        self, model_path: str | Path, *, n_ctx: int = 8192, alias: str = "local", startup_timeout: float = 180.0
    ) -> None:
        self.model_path = str(model_path)
        self.n_ctx = n_ctx
        self.alias = alias
        self.startup_timeout = startup_timeout
        self.port = 0
        self.api_key = ""
        self.log_path = Path()
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def endpoint(self) -> OpenAIEndpoint:
        if self._process is None:
            raise RuntimeError("the server is not running; call start()")
        return OpenAIEndpoint(api_base=f"http://127.0.0.1:{self.port}/v1", model=self.alias, api_key=self.api_key, grammar=True)

    def start(self) -> OpenAIEndpoint:
        """Start the server (if not running) and wait until it answers ``/v1/models``."""
        if self._process is not None and self._process.poll() is None:
            return self.endpoint
        if not Path(self.model_path).is_file():
            raise BackendError(f"no GGUF model at {self.model_path}")
        self.api_key = secrets.token_urlsafe(24)  # another local user cannot drive the server without it
        folder = tempfile.mkdtemp(prefix="multihop-rag-llamacpp-server-")  # mode 0700: the log is this user's only
        self.log_path = Path(folder) / "server.log"
        with _listening_socket() as sock:
            self.port = int(sock.getsockname()[1])
            command = [
                sys.executable, "-m", "multihop_rag.serving.llamacpp_server",
                "--model", self.model_path, "--alias", self.alias, "--fd", str(sock.fileno()), "--n-ctx", str(self.n_ctx),
                "--parent-pid", str(os.getpid()),
            ]  # fmt: skip
            descriptor = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with open(descriptor, "wb") as log:
                self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, pass_fds=(sock.fileno(),),
                                                 env={**os.environ, KEY_VARIABLE: self.api_key})
        self._finalizer = weakref.finalize(self, _stop, self._process, folder)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code, tail = self._process.returncode, self._log_tail()
                self.stop()
                raise BackendError(
                    f"llama.cpp server exited with code {code}; is llama-cpp-python installed "
                    f"with the [server] extra? Its log ended with:\n{tail}"
                )
            try:
                probe = urllib.request.Request(f"{self.endpoint.api_base}/models",
                                               headers={"Authorization": f"Bearer {self.api_key}"})
                with urllib.request.urlopen(probe, timeout=2):
                    return self.endpoint
            except (urllib.error.URLError, OSError):
                time.sleep(0.5)
        tail = self._log_tail()
        self.stop()  # removes the log
        raise BackendError(f"llama.cpp server did not answer within {self.startup_timeout:.0f} s; its log ended with:\n{tail}")

    def stop(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._process = None

    def _log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> OpenAIEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def openai_endpoint(llm: LLM) -> tuple[OpenAIEndpoint, LlamaCppServer | None]:
    """The OpenAI-compatible endpoint serving the same model as ``llm``.

    Ollama → its ``/v1``; the embedded llama.cpp model → a :class:`LlamaCppServer` started here
    (returned so the caller keeps it alive and can stop it). Wrappers with an ``inner`` LLM (the
    LLM cache) are looked through.
    """
    known = profile(llm)
    if known.model_path:
        server = LlamaCppServer(known.model_path, n_ctx=known.context_window or 8192)
        return server.start(), server
    if known.kind == "ollama" and known.base_url and known.model_name:
        return OpenAIEndpoint(api_base=f"{known.base_url.rstrip('/')}/v1", model=known.model_name), None
    raise BackendError(
        f"no OpenAI-compatible endpoint known for {type(unwrap(llm)).__name__}; pass an OpenAIEndpoint explicitly "
        "(a llama.cpp GGUF model or an Ollama model work out of the box)"
    )


def rewrite_response_format(body: bytes) -> bytes:
    """Translate an OpenAI ``json_schema`` response format into llama-cpp-python's ``json_object``."""
    try:
        request = json.loads(body)
    except ValueError:
        return body
    response_format = request.get("response_format") if isinstance(request, dict) else None
    if not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
        return body
    schema = (response_format.get("json_schema") or {}).get("schema")
    request["response_format"] = {"type": "json_object", **({"schema": schema} if schema else {})}
    return json.dumps(request).encode()


def drop_cut_record(content: str, delimiter: str) -> str:
    """``content`` (records separated by ``delimiter``) without the last record, which a reply cut at
    the token limit was still writing; nothing when not one record was finished."""
    at = content.rfind(delimiter)
    return content[:at] if at >= 0 else ""


def _pop_record_delimiter(body: bytes) -> tuple[bytes, str | None]:
    try:
        request = json.loads(body)
    except ValueError:
        return body, None
    if not isinstance(request, dict) or RECORD_DELIMITER_FIELD not in request:
        return body, None
    delimiter = request.pop(RECORD_DELIMITER_FIELD)
    return json.dumps(request).encode(), str(delimiter)


def _drop_cut_records_in(body: bytes, delimiter: str) -> bytes:
    try:
        response = json.loads(body)
        choices = response["choices"]
    except (ValueError, KeyError, TypeError):
        return body
    for choice in choices:
        message = choice.get("message") or {}
        if choice.get("finish_reason") == "length" and isinstance(message.get("content"), str):
            message["content"] = drop_cut_record(message["content"], delimiter)
    return json.dumps(response).encode()


class _JsonSchemaAdapter:
    """ASGI middleware applying :func:`rewrite_response_format` to chat-completion requests."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        body, delimiter = _pop_record_delimiter(rewrite_response_format(body))
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        if delimiter is None:
            await self.app({**scope, "headers": headers}, replay, send)
            return
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def hold(message: dict[str, Any]) -> None:
            """Keep the whole (non-streamed) response to rewrite a cut reply before sending it."""
            if message["type"] == "http.response.start":
                start.update(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            payload = _drop_cut_records_in(b"".join(chunks), delimiter)
            out_headers = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
            out_headers.append((b"content-length", str(len(payload)).encode()))
            await send({**start, "headers": out_headers})
            await send({"type": "http.response.body", "body": payload, "more_body": False})

        await self.app({**scope, "headers": headers}, replay, hold)


class _NoBrowsers:
    """ASGI middleware refusing every request that carries an ``Origin`` header (403): browsers send one on every
    cross-origin request, the project's clients never do, so no web page can drive the local model (llama.cpp's app
    answers CORS for any origin, with credentials)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and any(name == b"origin" for name, _ in scope["headers"]):
            body = b'{"error": "requests from web pages are refused"}'
            await send({"type": "http.response.start", "status": 403,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def _exit_with_parent(parent_pid: int, interval: float = 1.0) -> threading.Thread:
    """Stop this server when its parent dies, even by a signal that skipped its cleanup (a killed
    notebook kernel or benchmark must not leave a model server eating the CPU)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval)
        os._exit(0)

    thread = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> None:
    """Serve one GGUF model on 127.0.0.1 (what :class:`LlamaCppServer` runs)."""
    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--model", required=True, help="GGUF file")
    parser.add_argument("--alias", default="local", help="model name clients use")
    parser.add_argument("--fd", type=int, required=True, help="a listening socket on 127.0.0.1 to serve on")
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")
    args = parser.parse_args(argv)
    if args.parent_pid:
        _exit_with_parent(args.parent_pid)
    model = ModelSettings(
        model=args.model, model_alias=args.alias, n_ctx=args.n_ctx, n_threads=max(1, os.cpu_count() or 1),
        seed=0, verbose=False,
    )  # fmt: skip
    key = os.environ.pop(KEY_VARIABLE, None)
    if not key:
        parser.error(f"{KEY_VARIABLE} is not set: the server never runs without an API key")
    app = create_app(server_settings=ServerSettings(host="127.0.0.1", api_key=key), model_settings=[model])
    # A stop must not wait for a generation whose client is gone.
    config = uvicorn.Config(_NoBrowsers(_JsonSchemaAdapter(app)), log_level="warning", timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[socket.socket(fileno=args.fd)])  # the family is read from the socket itself


if __name__ == "__main__":
    main()
