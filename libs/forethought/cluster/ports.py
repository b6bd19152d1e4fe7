"""TCP ports on this machine: free ones for the embedded default and the tests, and why a service cannot
listen on the one its settings name.

A port held by another process must stop a service at start. gRPC's servers set ``SO_REUSEPORT`` on Linux
unless told not to, and with it a second server on a held port starts and takes a share of the first
one's connections: two meshes would serve each other's calls.
"""

from __future__ import annotations

import socket

_HANDED_OUT: set[tuple[str, int]] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago and that this process has not been given before.

    The system hands a just-closed port out again at random (two draws in a row match about once in
    14,000), so a caller that takes two ports before binding either (a service's and its metrics') would
    now and then get one port twice.
    """
    for _ in range(1000):
        with socket.socket() as probe:
            probe.bind((host, 0))
            port = int(probe.getsockname()[1])
        if (host, port) not in _HANDED_OUT:
            _HANDED_OUT.add((host, port))
            return port
    raise RuntimeError(f"no port at {host} that this process has not been given already")


def free_port_block(size: int, host: str = "127.0.0.1") -> int:
    """A base port whose next ``size`` ports were free a moment ago (``forethought up --base-port``)."""
    for _ in range(50):
        base = free_port(host)
        if base + size < 65535 and all(listen_failure(host, base + offset) is None for offset in range(size)):
            return base
    raise RuntimeError(f"no block of {size} free ports found")


def listen_failure(host: str, port: int) -> str | None:
    """Why a TCP server cannot listen on ``host:port`` now (the system's reason), or None when it can.

    Probed as the servers bind, with ``SO_REUSEADDR``: a port whose last connections linger in TIME_WAIT
    is free, one that another socket listens on is not.
    """
    if not 0 <= port <= 65535:  # getaddrinfo would take it modulo 65536
        return f"{port} is no TCP port (0..65535)"
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(
            host.strip("[]") or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as error:
        return f"{host} is no address of this machine ({error.strerror})"
    with socket.socket(family, kind, protocol) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            return error.strerror or str(error)
    return None


def accepts_connections(address: str, timeout_s: float = 1.0) -> bool:
    """Whether something listens at ``host:port``: a refused or unanswered connect says nothing does."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def listen_rule(host: str, reason: str) -> str:
    """The rule a port setting breaks when ``listen_failure`` gave ``reason``, for its ``ConfigError``."""
    return f"must be a port this process can listen on at {host}, and it cannot: {reason}"
