"""The server benchmark starts every server at once, each on a port of its own. Granian
binds with SO_REUSEPORT, so two servers handed one port both start and the kernel shares
the requests between them: one variant's requests answered by another's app."""

from __future__ import annotations

import socket

from support import load_bench_script

common = load_bench_script("common.py")


def test_ports_handed_out_together_are_distinct() -> None:
    ports = common.free_ports(200)
    assert len(ports) == 200
    assert len(set(ports)) == 200


def test_every_port_handed_out_can_be_listened_on() -> None:
    for port in common.free_ports(5):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))
            sock.listen()
