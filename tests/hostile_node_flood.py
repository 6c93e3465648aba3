#!/usr/bin/env python3
"""Half-open HELLOs for hostile_node_test.sh: keeps connections to `herd node` ports that
each send a HELLO frame's header and part of its payload, then stall, as an attacker
filling a node's handshake slots would. Opens COUNT to each port at once, prints
"flooding" (the caller waits for it), then opens RATE more per second per port for as
long as it runs, so the slots stay full past the node's handshake deadline. At its end
(SIGTERM) it prints how many of its connections the nodes closed.

Usage: hostile_node_flood.py COUNT RATE PORT...
"""
import os
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from herd_wire import HELLO, VERSION  # noqa: E402

count, rate = int(sys.argv[1]), float(sys.argv[2])
ports = [int(p) for p in sys.argv[3:]]
# A HELLO announcing 120 bytes, of which 40 arrive.
HALF = b"HERD" + struct.pack("<HHIQQ", VERSION, HELLO, 0, 0, 120) + bytes(40)
held = []


def half_open(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(HALF)
    s.setblocking(False)
    held.append(s)


def closed_by_node():
    n = 0
    for s in held:
        try:
            n += s.recv(1) == b""
        except BlockingIOError:
            pass
        except OSError:
            n += 1
    return n


def report(*_):
    print(f"flood: {len(held)} half-open connections opened, {closed_by_node()} closed by the"
          " nodes", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, report)
for port in ports:
    for _ in range(count):
        half_open(port)
print("flooding", flush=True)
while True:
    time.sleep(1 / rate)
    for port in ports:
        half_open(port)
