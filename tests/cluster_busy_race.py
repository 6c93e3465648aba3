#!/usr/bin/env python3
"""Coordinators back to back: each round does the handshake (insecure mode), reads PROFILE,
says BYE, closes, and at once the next connects. A node must serve every one of them (it
once refused some as busy, when the previous session had not yet read its BYE: the node now
waits for a silent new connection's fate). Exit 1 when any round is refused.

Usage: start `herd node --listen 127.0.0.1:0 --name a` (no key), then
       tests/cluster_busy_race.py PORT [ROUNDS]
"""
import os
import socket
import struct
import sys

HELLO, PROFILE, PING, PONG, ERROR, BYE = 1, 2, 9, 10, 11, 12
port = int(sys.argv[1])
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 300


def send(sock, type_, payload=b""):
    sock.sendall(b"HERD" + struct.pack("<HHIQQ", 1, type_, 0, 0, len(payload)) + payload)


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def recv(sock):
    while True:
        _, type_, _, _, length = struct.unpack("<HHIQQ", recv_exact(sock, 28)[4:])
        payload = recv_exact(sock, length)
        if type_ == PING:
            send(sock, PONG, payload)
            continue
        return type_, payload


busy = 0
for k in range(rounds):
    name = b"c%d" % k
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    send(s, HELLO, struct.pack("<HBB", 1, 0, 0) + os.urandom(32) + struct.pack("<I", len(name)) + name)
    assert recv(s)[0] == HELLO
    type_, payload = recv(s)
    if type_ == ERROR:
        busy += 1
        if busy <= 3:
            print(f"round {k}: ERROR {payload[8:].decode(errors='replace')}")
    elif type_ != PROFILE:
        print(f"round {k}: message type {type_}")
    send(s, BYE)
    s.close()
print(f"{busy} of {rounds} coordinators refused as busy right after the previous one's BYE")
sys.exit(1 if busy else 0)
