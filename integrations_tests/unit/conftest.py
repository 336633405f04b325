"""Unit tier: deterministic fakes only, and no network beyond loopback stand-ins (a scripted
server speaking Ollama's API on 127.0.0.1); nothing written to the user's caches."""

import pytest
from pytest_socket import enable_socket, socket_allow_hosts


@pytest.fixture(autouse=True)
def _loopback_only():
    socket_allow_hosts(["127.0.0.1"], allow_unix_socket=True)
    yield
    enable_socket()


@pytest.fixture(autouse=True)
def _private_speed_file(tmp_path, monkeypatch):
    """Speeds ``index`` calibrates on a fake model stay out of the user's speed file."""
    monkeypatch.setattr("multihop_rag.app.speed.speed_cache_file", lambda: tmp_path / "speed.json")
