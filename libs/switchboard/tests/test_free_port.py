"""free_port picks below the ephemeral range, where no outgoing connection's source port can
take a service's port between the pick and the bind."""

from __future__ import annotations

import socket

from switchboard.embedded import LOWEST_PICKED_PORT, ephemeral_ports, free_port, port_is_free


def test_ports_come_from_below_the_ephemeral_range_and_can_be_bound() -> None:
    low, high = ephemeral_ports()
    assert LOWEST_PICKED_PORT < low <= high
    ports = {free_port() for _ in range(50)}
    assert all(LOWEST_PICKED_PORT <= p < low for p in ports), sorted(ports)
    assert len(ports) > 40  # random picks, not the same few ports
    for port in list(ports)[:5]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
            sock.listen()


def test_a_port_someone_listens_on_is_not_free() -> None:
    """What free_port checks each pick with."""
    port = free_port()
    assert port_is_free(port)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        assert not port_is_free(port)
