#!/usr/bin/env python3
"""Attacks on the HTTP request path of a running `herd serve` and `herd hub` (raw sockets),
each followed by the check that both servers are up, answer /health, and hold no more memory
than allowed. Usage (tests/hostile_http_test.sh starts the servers):
  hostile_http.py SERVE_URL SERVE_PID HUB_URL HUB_PID API_KEY MODEL RSS_SLACK_MIB"""
import gzip
import json
import socket
import sys
import threading
import time
import urllib.parse

serve_url, serve_pid, hub_url, hub_pid, api_key, model, slack_mib = sys.argv[1:8]
SLACK_KIB = int(slack_mib) * 1024
servers = {"serve": (serve_url, int(serve_pid)), "hub": (hub_url, int(hub_pid))}


def fail(message):
    print("FAIL: " + message, flush=True)
    sys.exit(1)


def address(url):
    u = urllib.parse.urlparse(url)
    return u.hostname, u.port


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        return None
    return None


def connect(url, timeout=10):
    s = socket.create_connection(address(url), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_until_close(s, timeout=10):
    s.settimeout(timeout)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (ConnectionResetError, socket.timeout):
        pass
    return out


def status_of(answer):
    parts = answer.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def request(url, method, path, body=b"", headers=(), timeout=10):
    """One request with Connection: close; (status, body bytes)."""
    s = connect(url, timeout)
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    for h in headers:
        head += h + "\r\n"
    if body or method == "POST":
        head += f"Content-Length: {len(body)}\r\n"
    s.sendall(head.encode() + b"\r\n" + body)
    answer = read_until_close(s, timeout)
    s.close()
    return status_of(answer), answer.partition(b"\r\n\r\n")[2]


def health_seconds(name):
    url, _ = servers[name]
    start = time.monotonic()
    status, _ = request(url, "GET", "/health", timeout=10)
    if status != 200:
        fail(f"{name}: /health answered {status}")
    return time.monotonic() - start


base_rss = {}


def check_servers(after):
    for name, (url, pid) in servers.items():
        rss = rss_kib(pid)
        if rss is None:
            fail(f"{name} is gone after {after}")
        health_seconds(name)
        if rss > base_rss[name] + SLACK_KIB:
            fail(f"{name}'s RSS is {rss // 1024} MiB after {after}, more than "
                 f"{base_rss[name] // 1024} + {SLACK_KIB // 1024} MiB")
        print(f"  {name}: up, RSS {rss // 1024} MiB (start {base_rss[name] // 1024} MiB)",
              flush=True)


def stream_chunked(url, path, total, headers=()):
    """A chunked body of `total` bytes in 64 KiB chunks, sent until the server answers or
    closes; (status, bytes sent)."""
    s = connect(url, timeout=10)
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
    for h in headers:
        head += h + "\r\n"
    s.sendall(head.encode() + b"\r\n")
    chunk = b"10000\r\n" + b"[" * 65536 + b"\r\n"
    sent = 0
    s.settimeout(5)
    try:
        while sent < total:
            s.sendall(chunk)
            sent += 65536
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        pass
    answer = read_until_close(s, 5)
    s.close()
    return status_of(answer), sent


auth = (f"Authorization: Bearer {api_key}", "Content-Type: application/json")


def deep_json():
    print("deep JSON (400 KB of '[', bodies nested 100000 deep)", flush=True)
    deep = b"[" * 400000
    nested = ('{"model": "%s", "messages": [{"role": "user", "content": %s%s}]}' %
              (model, "[" * 100000, "]" * 100000)).encode()
    # A checker's request whose served request is the deep part (what serve re-renders).
    verify = ('{"endpoint": "/v1/chat/completions", "completion_token_ids": [1], "request": '
              '{"model": "%s", "messages": [{"role": "user", "content": "x"}], "x": %s%s}}' %
              (model, "[" * 100000, "]" * 100000)).encode()
    for name, path in (("serve", "/api/verify"), ("serve", "/v1/chat/completions"),
                       ("serve", "/v1/completions"), ("hub", "/v1/chat/completions"),
                       ("hub", "/v1/completions"), ("hub", "/api/register")):
        for body in (deep, nested, verify):
            status, answer = request(servers[name][0], "POST", path, body, auth)
            if status != 400:
                fail(f"{name} {path}: deep JSON answered {status}: {answer[:200]!r}")
    status, answer = request(servers["serve"][0], "POST", "/v1/chat/completions", nested, auth)
    if b"deeper than 64" not in answer:
        fail(f"serve's 400 does not name the depth limit: {answer[:200]!r}")
    check_servers("deep JSON")


def big_bodies():
    print("200 MB chunked bodies, a 200 MB Content-Length, a gzip bomb", flush=True)
    bomb = gzip.compress(b"[" * (200 << 20), compresslevel=9)
    for name in servers:
        url = servers[name][0]
        status, sent = stream_chunked(url, "/v1/chat/completions", 200 << 20, auth)
        if status != 413:
            fail(f"{name}: a 200 MB chunked body answered {status}")
        if sent >= 100 << 20:
            fail(f"{name}: took {sent >> 20} MiB of a chunked body over its limit")
        status, _ = stream_chunked(url, "/nowhere", 200 << 20, auth)
        if status != 404:
            fail(f"{name}: a chunked body to a path without a handler answered {status}")
        s = connect(url)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: 200000000\r\n\r\n")
        status = status_of(read_until_close(s))
        s.close()
        if status != 413:
            fail(f"{name}: a 200 MB Content-Length answered {status}")
        status, _ = request(url, "POST", "/v1/chat/completions", bomb,
                            auth + ("Content-Encoding: gzip",))
        if status != 415:
            fail(f"{name}: a gzip body ({len(bomb)} bytes, 200 MiB inflated) answered {status}")
    check_servers("big bodies")


def slow_headers(name, n, header_timeout):
    url = servers[name][0]
    print(f"{n} connections sending a header line every 2 s to {name}", flush=True)
    socks = []
    for i in range(n):
        s = connect(url)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)
    stop = threading.Event()

    def trickle():
        i = 0
        while not stop.wait(2):
            for s in socks:
                try:
                    s.sendall(b"X-Slow-%d: 1\r\n" % i)
                except OSError:
                    pass
            i += 1

    t = threading.Thread(target=trickle)
    t.start()
    worst = 0.0
    start = time.monotonic()
    while time.monotonic() - start < header_timeout + 2:
        worst = max(worst, health_seconds(name))
        time.sleep(0.25)
    stop.set()
    t.join()
    if worst > 2:
        fail(f"{name}: /health took {worst:.1f} s while {n} connections trickled headers")
    # Past their deadline every one of them has been answered (408) or dropped.
    still_open = 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(1, socket.MSG_PEEK) == b"":
                pass
        except BlockingIOError:
            still_open += 1
        except OSError:
            pass
        s.close()
    if still_open:
        fail(f"{name}: {still_open} of {n} slow connections still open past the header deadline")
    print(f"  {name}: /health within {worst:.2f} s throughout", flush=True)
    check_servers(f"slow headers to {name}")


def main():
    for name, (_, pid) in servers.items():
        base_rss[name] = rss_kib(pid)
    header_timeout = 3
    deep_json()
    big_bodies()
    slow_headers("serve", 64, header_timeout)
    slow_headers("hub", 48, header_timeout)
    print("PASS", flush=True)


main()
