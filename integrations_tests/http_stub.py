"""The HTTP side the stand-in servers share: a quiet handler that answers JSON."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any


class JSONHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and sends JSON bodies."""

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client went away (a killed build)
            pass

    def _send_events(self, chunks: list[dict[str, Any]], pause: float = 0.0) -> bool:
        """Server-sent events, as OpenAI-compatible servers stream: one ``data:`` line a chunk (``pause`` seconds
        apart, as a model generates them), then ``[DONE]``; whether the client read to the end."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for chunk in chunks:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                time.sleep(pause)
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):  # the client stopped reading
            return False
        return True
