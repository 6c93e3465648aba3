"""herd's wire protocol from Python, for tests that play a peer (docs/protocol.md): frames,
the version-2 handshake without a cluster key (an identity of its own, an ephemeral X25519
exchange, a signed transcript) and the sealed frames after it, through libsodium (ctypes),
as src/net/auth.cpp and src/net/frame_cipher.cpp do them.

    conn = Connection(socket.create_connection(...), b"name")   # handshake done
    conn.send(type_, payload, id_); type_, id_, payload = conn.recv()
"""
import ctypes
import ctypes.util
import hashlib
import os
import struct

HELLO, PROFILE, LOAD, WEIGHTS, READY, FORWARD, RESULT = 1, 2, 3, 4, 5, 6, 7
PING, PONG, ERROR, BYE, WANT = 9, 10, 11, 12, 13
VERSION = 3

_sodium = ctypes.CDLL(ctypes.util.find_library("sodium") or "libsodium.so.23")
assert _sodium.sodium_init() >= 0
_buf = ctypes.create_string_buffer
_ull = ctypes.c_ulonglong


def string(b):
    return struct.pack("<I", len(b)) + b


class _Direction:
    """One direction's session key and frame counter (src/net/frame_cipher.h)."""

    def __init__(self, key):
        self.key, self.counter = key, 0

    def _nonce(self):
        self.counter += 1
        return struct.pack("<Q", self.counter - 1) + bytes(16)

    def seal(self, header, payload):
        out, tag = _buf(len(payload) or 1), _buf(16)
        _sodium.crypto_aead_xchacha20poly1305_ietf_encrypt_detached(
            out, tag, None, payload, _ull(len(payload)), header, _ull(len(header)), None,
            self._nonce(), self.key)
        return out.raw[:len(payload)] + tag.raw

    def open(self, header, sealed):
        out = _buf(len(sealed) - 16 or 1)
        if _sodium.crypto_aead_xchacha20poly1305_ietf_decrypt_detached(
                out, None, sealed[:-16], _ull(len(sealed) - 16), sealed[-16:], header,
                _ull(len(header)), self._nonce(), self.key) != 0:
            raise EOFError("a frame from the node failed authentication")
        return out.raw[:len(sealed) - 16]


def _hello(nonce, kx, node_id, signature=None, name=b"test"):
    """A HELLO without a cluster key, encrypting; without signature: its core."""
    body = struct.pack("<HBB", VERSION, 0, 0) + nonce + struct.pack("<B", 1) + kx + node_id
    body += struct.pack("<B", 1) + signature if signature else struct.pack("<B", 0)
    return body + string(name)


def _core_of(p):
    at = 4 + 32 + (32 if p[3] else 0)
    nonce, kx, node_id = p[4:36], p[at + 1:at + 33], p[at + 33:at + 65]
    at += 65
    at += 1 + (64 if p[at] else 0)
    (n,) = struct.unpack("<I", p[at:at + 4])
    return _hello(nonce, kx, node_id, name=p[at + 4:at + 4 + n])


class Connection:
    """A connected herd peer: the handshake is done on construction (as connector)."""

    def __init__(self, sock, name):
        self.sock, self.sealing = sock, None
        id_public, id_secret = _buf(32), _buf(64)
        _sodium.crypto_sign_keypair(id_public, id_secret)
        kx_public, kx_secret = _buf(32), _buf(32)
        _sodium.crypto_kx_keypair(kx_public, kx_secret)
        h1 = _hello(os.urandom(32), kx_public.raw, id_public.raw, name=name)
        self.send(HELLO, h1)
        type_, _, payload = self.recv()
        if type_ != HELLO:
            raise EOFError(f"expected HELLO, got type {type_}: {payload[8:]!r}")
        h2 = _core_of(payload)
        transcript = hashlib.blake2b(b"herd-hello-v2" + string(h1) + string(h2),
                                     digest_size=32).digest()
        signed = b"herd-sign-v2" + b"connector" + transcript
        signature = _buf(64)
        _sodium.crypto_sign_detached(signature, None, signed, _ull(len(signed)), id_secret)
        self.send(HELLO, _hello(h1[4:36], kx_public.raw, id_public.raw, signature.raw, name))
        shared = _buf(32)
        if _sodium.crypto_scalarmult(shared, kx_secret, h2[37:69]) != 0:
            raise EOFError("low-order ephemeral key")
        keys = hashlib.blake2b(b"herd-session-v2" + shared.raw + transcript,
                               digest_size=64).digest()
        self.sealing = (_Direction(keys[:32]), _Direction(keys[32:]))

    def send(self, type_, payload=b"", id_=0):
        header = b"HERD" + struct.pack("<HHIQQ", VERSION, type_, 0, id_, len(payload))
        sealed = self.sealing[0].seal(header, payload) if self.sealing else payload
        self.sock.sendall(header + sealed)

    def recv_exact(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise EOFError(f"the node closed the connection ({len(data)} of {n} bytes)")
            data += chunk
        return data

    def recv_frame(self):
        """(type, id, payload) of the next frame, PINGs included."""
        header = self.recv_exact(28)
        assert header[:4] == b"HERD", header
        _, type_, _, id_, length = struct.unpack("<HHIQQ", header[4:])
        payload = self.recv_exact(length + (16 if self.sealing else 0))
        if self.sealing:
            payload = self.sealing[1].open(header, payload)
        return type_, id_, payload

    def recv(self):
        """The next frame that is not a PING (PINGs are answered)."""
        while True:
            type_, id_, payload = self.recv_frame()
            if type_ == PING:
                self.send(PONG, payload)
                continue
            return type_, id_, payload
