"""Loopback ports: pick free ones, and refuse a requested one that is taken with a message that says what to do."""

import socket
from collections.abc import Set as AbstractSet

from rtm_lab.errors import LabError

HOST = "127.0.0.1"


def is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def choose(
    requested: int | None, env_name: str, previous: int | None = None, avoid: AbstractSet[int] = frozenset()
) -> int:
    """A port for a service: the one the user asked for (must be free), else last run's if still free, else any."""
    if requested is not None:
        if not is_free(requested):
            raise LabError(
                f"Port {requested} on {HOST} (from {env_name}) is already in use. "
                f"Stop what listens there, choose another port, or unset {env_name} to let the lab pick a free one."
            )
        return requested
    if previous and previous not in avoid and is_free(previous):
        return previous
    while True:
        port = free_port()
        if port not in avoid:
            return port
