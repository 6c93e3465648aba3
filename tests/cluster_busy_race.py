#!/usr/bin/env python3
"""Coordinators back to back: each round does the handshake (no key; herd_wire.py), reads PROFILE,
says BYE, closes, and at once the next connects. A node must serve every one of them (it
once refused some as busy, when the previous session had not yet read its BYE: the node now
waits for a silent new connection's fate). Exit 1 when any round is refused.

Usage: start `herd node --listen 127.0.0.1:0 --name a` (no key), then
       tests/cluster_busy_race.py PORT [ROUNDS]
"""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from herd_wire import BYE, ERROR, PROFILE, Connection  # noqa: E402

port = int(sys.argv[1])
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 300

busy = 0
for k in range(rounds):
    name = b"c%d" % k
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn = Connection(s, name)
    type_, _, payload = conn.recv()
    if type_ == ERROR:
        busy += 1
        if busy <= 3:
            print(f"round {k}: ERROR {payload[8:].decode(errors='replace')}")
    elif type_ != PROFILE:
        print(f"round {k}: message type {type_}")
    conn.send(BYE)
    s.close()
print(f"{busy} of {rounds} coordinators refused as busy right after the previous one's BYE")
sys.exit(1 if busy else 0)
