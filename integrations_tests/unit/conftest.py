"""Unit tier: no network at all (sockets disabled), deterministic fakes only."""

import pytest
from pytest_socket import disable_socket, enable_socket


@pytest.fixture(autouse=True)
def _no_network():
    disable_socket(allow_unix_socket=True)
    yield
    enable_socket()
