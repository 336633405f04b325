"""Unit tier: deterministic fakes only, and no network beyond loopback stand-ins (a scripted
server speaking Ollama's API on 127.0.0.1)."""

import pytest
from pytest_socket import enable_socket, socket_allow_hosts


@pytest.fixture(autouse=True)
def _loopback_only():
    socket_allow_hosts(["127.0.0.1"], allow_unix_socket=True)
    yield
    enable_socket()
