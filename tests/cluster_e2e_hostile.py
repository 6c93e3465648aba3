#!/usr/bin/env python3
"""A hostile coordinator for cluster_e2e_test.sh: speaks the wire protocol (docs/protocol.md)
to an unkeyed `herd node` and sends it bad LOADs and FORWARDs. Each must be answered with
ERROR and the right code, never a crash or a dropped session; then a valid LOAD and FORWARD
must work on the same connection. It completes the version-2 handshake and seals its
frames as herd does (herd_wire.py), so the node's decoders, not its authentication, are
what it attacks.

Usage: cluster_e2e_hostile.py PORT MODEL_PATH HASH_LOW HASH_HIGH N_LAYER N_VOCAB
"""
import json
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from herd_wire import (BYE, ERROR, FORWARD, LOAD, PROFILE, READY, RESULT,  # noqa: E402
                       WANT, Connection, string)

E_PROTOCOL, E_LOAD_FAILED, E_FORWARD_FAILED = 1, 6, 7

port, model, low, high, n_layer, n_vocab = sys.argv[1:7]
low, high, n_layer, n_vocab = int(low), int(high), int(n_layer), int(n_vocab)
sock = socket.create_connection(("127.0.0.1", int(port)), timeout=20)
try:
    conn = Connection(sock, b"hostile")  # the handshake (no key), then sealed frames
except EOFError as e:
    raise SystemExit(f"FAIL: handshake: {e}")
send = conn.send


def recv():
    try:
        return conn.recv()
    except EOFError as e:
        raise SystemExit(f"FAIL: {e}")


def expect_error(code, needle, what):
    type_, _, payload = recv()
    if type_ != ERROR:
        raise SystemExit(f"FAIL: {what}: got message type {type_}, expected ERROR")
    got, length = struct.unpack("<II", payload[:8])
    message = payload[8:8 + length].decode(errors="replace")
    if got != code or needle not in message:
        raise SystemExit(f"FAIL: {what}: ERROR {got} '{message}', expected {code} with '{needle}'")
    print(f"hostile: {what}: ERROR {got}: {message}")


def load(plan, hint=model, h=(low, high)):
    text = plan if isinstance(plan, str) else json.dumps(plan)
    send(LOAD, struct.pack("<QQ", *h) + string(hint.encode()) + string(text.encode()))


def forward(tokens, id_, activations=b""):
    body = struct.pack("<I", len(tokens))
    for token, seq, pos, logits in tokens:
        body += struct.pack("<iiiB", token, seq, pos, logits)
    if not activations:
        activations = struct.pack("<BIIQ", 0, 0, 0, 0)  # a first stage: rows 0
    send(FORWARD, body + activations, id_)


type_, _, _ = recv()
assert type_ == PROFILE, f"expected PROFILE, got {type_}"

forward([(1, 0, 0, 1)], 1)
expect_error(E_PROTOCOL, "FORWARD before LOAD", "FORWARD before LOAD")

good = {"stage": 0, "n_stages": 1, "rank": 0, "n_ranks": 1,
        "slice": {"head": [0, -1], "kv_head": [0, -1], "ff": [0, -1], "vocab": [0, -1]},
        "ring": {"token": 0, "next": "", "prev": ""},
        "layer_begin": 0, "layer_end": n_layer, "embedding": True,
        "output": True, "n_ctx": 32, "n_seq": 1, "wire_dtype": "f32", "tensors": []}
load("{not json")
expect_error(E_LOAD_FAILED, "parse", "LOAD of text that is not JSON")
load(json.dumps([1, 2, 3]))
expect_error(E_LOAD_FAILED, "not a JSON object", "LOAD of a JSON array")
load({k: v for k, v in good.items() if k != "n_ctx"})
expect_error(E_LOAD_FAILED, "field 'n_ctx'", "LOAD without n_ctx")
load(dict(good, stage=3))
expect_error(E_LOAD_FAILED, "field 'stage'", "LOAD of stage 3 of 1")
load(dict(good, n_ctx=-5))
expect_error(E_LOAD_FAILED, "field 'n_ctx'", "LOAD with n_ctx -5")
load(dict(good, wire_dtype="f8"))
expect_error(E_LOAD_FAILED, "wire_dtype", "LOAD with wire_dtype f8")
load(dict(good, tensors=[{"name": "blk.0.attn_q.weight\n", "type": 0, "shape": [4]}]))
expect_error(E_LOAD_FAILED, "printable", "LOAD with a control byte in a tensor name")
load(dict(good, tensors=[{"name": "x", "type": 99999, "shape": [4]}]))
expect_error(E_LOAD_FAILED, "field 'type'", "LOAD with tensor type 99999")
load(dict(good, tensors=[{"name": "x", "type": 30000, "shape": [4]}]))
expect_error(E_LOAD_FAILED, "tensors.type", "LOAD with an unknown tensor type")
load(dict(good, tensors=[{"name": "x", "type": 0, "shape": [1 << 40, 1 << 40]}]))
expect_error(E_LOAD_FAILED, "too large", "LOAD with a 2^80-element tensor")
load(dict(good, layer_end=n_layer + 7))
expect_error(E_LOAD_FAILED, "layer", "LOAD of layers beyond the model")
# Stage links (assignment.h FlowSpec): checked before anything is dialled or loaded.
two = dict(good, n_stages=2, output=False)
load(dict(two, flow={"token": 5, "next": ["127.0.0.1:1"], "prev": 2}))
expect_error(E_LOAD_FAILED, "flow.prev", "LOAD with 2 links from the previous stage")
load(dict(two, flow={"token": 5, "next": [], "prev": 1}))
expect_error(E_LOAD_FAILED, "flow.prev", "LOAD of a first stage with a previous stage")
load(dict(good, flow={"token": 5, "next": ["127.0.0.1:1"], "prev": 0}))
expect_error(E_LOAD_FAILED, "flow.next", "LOAD of a last stage with a next stage")
load(dict(two, flow={"token": 5, "next": ["a b\n"], "prev": 0}))
expect_error(E_LOAD_FAILED, "flow.next", "LOAD with a control byte in a stage link address")
load(dict(two, flow={"token": 5, "next": [{"x": 1}], "prev": 0}))
expect_error(E_LOAD_FAILED, "flow.next", "LOAD with an object for an address")
load(dict(two, flow={"token": 0, "next": ["127.0.0.1:1"], "prev": 0}))
expect_error(E_LOAD_FAILED, "flow.token", "LOAD of stage links without a token")
# A next stage that is not there: the node says so (it dials before it loads anything).
load(dict(two, flow={"token": 5, "next": ["127.0.0.1:1"], "prev": 0}))
expect_error(E_LOAD_FAILED, "could not link to the next stage",
             "LOAD with a next stage nobody listens at")

# The model file with its real hash: loads. Then bad batches fail one request each.
load(good)
type_, _, payload = recv()
if type_ != READY:
    raise SystemExit(f"FAIL: valid LOAD: got type {type_}: {payload[8:].decode(errors='replace')}")
print("hostile: valid LOAD: READY")
forward([(1, 5, 0, 1)], 2)
expect_error(E_FORWARD_FAILED, "sequence slot", "FORWARD to sequence 5 of 1")
forward([(1, 0, 32, 1)], 3)
expect_error(E_FORWARD_FAILED, "context", "FORWARD at position 32 of 32")
forward([(n_vocab, 0, 0, 1)], 5)
expect_error(E_FORWARD_FAILED, "vocabulary", "FORWARD of token n_vocab")
forward([(1, 0, 0, 0), (2, 0, 1, 1)], 7)
type_, id_, payload = recv()
if type_ != RESULT or id_ != 7:
    raise SystemExit(f"FAIL: valid FORWARD: type {type_} id {id_}")
kind, _, dtype, rows, cols, n_bytes = struct.unpack("<BQBIIQ", payload[:26])
if (kind, dtype, rows, cols, n_bytes) != (1, 0, 1, n_vocab, 4 * n_vocab):
    raise SystemExit(f"FAIL: valid FORWARD: RESULT {kind} {dtype} {rows}x{cols} {n_bytes} B")
print(f"hostile: valid FORWARD: RESULT of 1 x {cols} logits")
# A LOAD naming a file with another hash: the node asks for the weights; we leave instead.
load(good, hint="/etc/passwd", h=(1, 2))
type_, _, _ = recv()
if type_ != WANT:
    raise SystemExit(f"FAIL: LOAD of an unknown model: type {type_}, expected WANT")
print("hostile: LOAD of an unknown model: WANT")
forward([(1, 0, 0, 1)], 8)
expect_error(E_LOAD_FAILED, "where WEIGHTS was expected", "FORWARD instead of WEIGHTS")
forward([(1, 0, 0, 1)], 9)
expect_error(E_PROTOCOL, "FORWARD before LOAD", "FORWARD after a failed LOAD")
# A negative position is malformed (the decoder refuses it): ERROR, and the session ends.
load(good)
type_, _, _ = recv()
if type_ != READY:
    raise SystemExit(f"FAIL: second valid LOAD: got type {type_}")
forward([(1, 0, -1, 1)], 10)
expect_error(E_PROTOCOL, "negative", "FORWARD at position -1")
sock.settimeout(10)
while True:  # only a BYE may come before the end of the stream
    try:
        header = sock.recv(28, socket.MSG_WAITALL)
    except ConnectionResetError:
        header = b""
    if not header:
        break
    if len(header) != 28 or struct.unpack("<H", header[6:8])[0] != BYE:
        raise SystemExit(f"FAIL: the session went on after a malformed FORWARD: {header!r}")
    conn.sealing[1].open(header, conn.recv_exact(16))  # a BYE: its tag
print("hostile: the node closed the session")
sock.close()
