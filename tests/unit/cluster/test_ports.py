"""Why a port cannot be listened on, as the services ask before they bind."""

from __future__ import annotations

import socket

from forethought.cluster.ports import accepts_connections, free_port, listen_failure


def test_a_free_port_and_port_zero_can_be_listened_on():
    assert listen_failure("127.0.0.1", free_port()) is None
    assert listen_failure("127.0.0.1", 0) is None


def test_free_port_never_hands_this_process_the_same_port_twice():
    ports = [free_port() for _ in range(3000)]  # the system alone repeats about 300 of 3,000 draws
    assert len(set(ports)) == len(ports)


def test_a_port_another_socket_listens_on_is_in_use_whatever_address_it_listens_on():
    for holder_host in ("127.0.0.1", "0.0.0.0"):
        with socket.socket() as holder:
            holder.bind((holder_host, 0))
            holder.listen()
            port = holder.getsockname()[1]
            assert listen_failure("127.0.0.1", port) == "Address already in use"
        assert listen_failure("127.0.0.1", port) is None  # closed, the port is free again at once


def test_a_closed_connections_lingering_port_is_free():
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            accepted.close()  # the server side closes first: its end waits in TIME_WAIT
            client.recv(1)
    assert listen_failure("127.0.0.1", port) is None


def test_an_address_that_is_not_this_machines_is_named():
    assert listen_failure("192.0.2.1", free_port()) == "Cannot assign requested address"  # TEST-NET-1
    reason = listen_failure("no-such-host.invalid", free_port())
    assert reason is not None and reason.startswith("no-such-host.invalid is no address of this machine (")


def test_a_number_past_the_port_range_is_no_port_not_another_port_modulo_65536():
    assert listen_failure("127.0.0.1", 70001) == "70001 is no TCP port (0..65535)"


def test_a_listener_accepts_connections_and_a_free_port_or_a_bad_address_does_not():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        assert accepts_connections(address)
    assert not accepts_connections(address)
    assert not accepts_connections("no-port-here")
