"""llama.cpp's OpenAI-compatible server as GraphRAG uses it: a real subprocess on 127.0.0.1 with
the bundled 0.5B model."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from multihop_rag.serving import bundled
from multihop_rag.serving.llamacpp_server import LlamaCppServer

MODEL = "qwen2.5-coder-0.5b"


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.fixture(scope="module")
def server():
    with LlamaCppServer(bundled.gguf_path(MODEL), n_ctx=2048) as endpoint:
        yield endpoint


def test_json_schema_requests_come_back_as_schema_valid_json(server):
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": "Name the capital of France."}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": schema}},
        "max_tokens": 30,
    }
    request = urllib.request.Request(
        f"{server.api_base}/chat/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {server.api_key}"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        content = json.load(response)["choices"][0]["message"]["content"]
    assert isinstance(json.loads(content)["city"], str)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_server_exits_when_its_parent_is_killed(tmp_path):
    parent = tmp_path / "parent.py"
    parent.write_text(
        "import time\n"
        "from multihop_rag.serving import bundled\n"
        "from multihop_rag.serving.llamacpp_server import LlamaCppServer\n"
        f"server = LlamaCppServer(bundled.gguf_path({MODEL!r}), n_ctx=1024)\n"
        "server.start()\n"
        "print(server._process.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    process = subprocess.Popen([sys.executable, str(parent)], stdout=subprocess.PIPE, text=True)
    child = int(process.stdout.readline())
    assert _alive(child)
    process.kill()  # SIGKILL: no atexit, no finalizers
    process.wait()
    deadline = time.monotonic() + 20
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(child)


def _status(url: str, headers: dict[str, str]) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_server_takes_its_key_only_and_no_web_page(server):
    models = f"{server.api_base}/models"
    key = {"Authorization": f"Bearer {server.api_key}"}
    assert len(server.api_key) >= 24 and server.api_key != "local"
    assert _status(models, key) == 200
    assert _status(models, {}) == 401  # another local user, without the key made at this start
    assert _status(models, {**key, "Origin": "https://example.org"}) == 403  # a web page, even with the key


def test_the_log_is_private_and_removed_with_the_server():
    server = LlamaCppServer(bundled.gguf_path(MODEL), n_ctx=1024)
    server.start()
    folder = server.log_path.parent
    assert (folder.stat().st_mode & 0o777) == 0o700 and (server.log_path.stat().st_mode & 0o777) == 0o600
    server.stop()
    assert not folder.exists()
