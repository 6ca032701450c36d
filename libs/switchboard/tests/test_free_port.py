"""free_port picks below the ephemeral range, where no outgoing connection's source port can
take a service's port between the pick and the bind."""

from __future__ import annotations

import json
import os
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


def test_a_process_hands_out_no_port_twice_until_it_has_gone_round_the_range() -> None:
    """A stack picks its services' ports before any of them binds: random picks with repeats
    gave two services one port (a birthday collision, seen once in a few hundred stacks)."""
    low, _ = ephemeral_ports()
    picks = [free_port() for _ in range(2000)]
    assert len(set(picks)) == len(picks)
    assert all(LOWEST_PICKED_PORT <= p < low for p in picks)


def test_a_forked_child_walks_from_a_start_of_its_own() -> None:
    """Two processes picking at once (test workers, launchers) start far apart; a fork must
    not copy the parent's walk (it would pick exactly the parent's next ports)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next five ports, then out without pytest's clean-up
        os.write(write, json.dumps([free_port() for _ in range(5)]).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = json.loads(pipe.read())
    os.waitpid(pid, 0)
    mine = [free_port() for _ in range(5)]
    assert not set(child) & set(mine), (child, mine)
