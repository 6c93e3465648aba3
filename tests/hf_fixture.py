#!/usr/bin/env python3
"""A stand-in for the Hugging Face hub, for herd pull's end-to-end test (pull_e2e_test.sh).

Serves the repositories under --root (<root>/<org>/<repo>/<files>) as the hub does:
  GET /api/models/<org>/<repo>/tree/main?recursive=true   the listing (size, lfs.oid = SHA-256)
  GET /<org>/<repo>/resolve/main/<path>                    302 to the file on the "CDN"
  GET /cdn/<org>/<repo>/<path>                             the bytes, with Range support
The redirect goes to http://localhost:<port> while the hub is addressed as 127.0.0.1: another
host, so a client must not send it the hub's Authorization header.

What goes wrong is set by POST /_control with a JSON object (each call replaces the last
and resets the counters):
  {"cut": {"<file name>": N}}   the first download of that file stops after N bytes
  {"busy": K}                   the first K resolve requests answer 429, Retry-After: 1
  {"wrong_hash": ["<name>"]}    the listing gives those files a wrong SHA-256
  {"token": "T"}                the API and resolve endpoints want "Authorization: Bearer T"
  {"page_size": N}              the listing comes in pages of N, linked by Link: rel="next"
Every request is appended to --log as one JSON line: method, path, range, authorization,
status. The port is written to --port-file once the server listens.
"""
import argparse
import hashlib
import http.server
import json
import os
import socketserver
import threading
import urllib.parse

lock = threading.Lock()
control = {}
counters = {"busy": 0, "cut": set()}


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self, status):
        entry = {"method": self.command, "path": self.path, "status": status,
                 "range": self.headers.get("Range", ""),
                 "authorization": self.headers.get("Authorization", "")}
        with lock, open(self.server.log_path, "a") as log:
            log.write(json.dumps(entry) + "\n")

    def reply(self, status, body=b"", headers=None, content_type="application/json"):
        self.record(status)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def authorized(self):
        token = control.get("token")
        if token and self.headers.get("Authorization") != "Bearer " + token:
            self.reply(401, b'{"error":"Invalid credentials in Authorization header"}')
            return False
        return True

    def do_POST(self):
        global control
        if self.path != "/_control":
            return self.reply(404)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with lock:
            control = json.loads(body or b"{}")
            counters["busy"] = 0
            counters["cut"] = set()
        self.reply(200, b"{}")

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        if len(parts) >= 6 and parts[:2] == ["api", "models"] and parts[4] == "tree":
            return self.listing(parts[2], parts[3], urllib.parse.parse_qs(url.query))
        if len(parts) >= 5 and parts[2] == "resolve":
            return self.resolve(parts[0], parts[1], "/".join(parts[4:]))
        if len(parts) >= 4 and parts[0] == "cdn":
            return self.file(os.path.join(self.server.root, *parts[1:]))
        self.reply(404, b'{"error":"not found"}')

    def listing(self, org, repo, query):
        if not self.authorized():
            return
        top = os.path.join(self.server.root, org, repo)
        if not os.path.isdir(top):
            return self.reply(404, b'{"error":"Repository not found"}')
        entries = []
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, top)
            if rel_dir != ".":
                entries.append({"type": "directory", "oid": "0" * 40, "size": 0, "path": rel_dir})
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, top)
                size = os.path.getsize(path)
                entry = {"type": "file", "oid": "0" * 40, "size": size, "path": rel}
                if name.endswith(".gguf"):
                    sha = sha256_of(path)
                    if name in control.get("wrong_hash", []):
                        sha = hashlib.sha256(b"not " + sha.encode()).hexdigest()
                    entry["lfs"] = {"oid": sha, "size": size, "pointerSize": 134}
                entries.append(entry)
        headers = {}
        page_size = control.get("page_size")
        if page_size:
            start = int(query.get("cursor", ["0"])[0])
            if start + page_size < len(entries):
                nxt = "/api/models/%s/%s/tree/main?recursive=true&cursor=%d" % (org, repo, start + page_size)
                headers["Link"] = '<http://127.0.0.1:%d%s>; rel="next"' % (self.server.port, nxt)
            entries = entries[start:start + page_size]
        self.reply(200, json.dumps(entries).encode(), headers)

    def resolve(self, org, repo, path):
        if not self.authorized():
            return
        with lock:
            busy = counters["busy"] < control.get("busy", 0)
            counters["busy"] += busy
        if busy:
            return self.reply(429, b'{"error":"rate limited"}', {"Retry-After": "1"})
        if not os.path.isfile(os.path.join(self.server.root, org, repo, path)):
            return self.reply(404, b'{"error":"Entry not found"}')
        location = "http://localhost:%d/cdn/%s/%s/%s" % (
            self.server.port, org, repo, urllib.parse.quote(path))
        self.reply(302, b"", {"Location": location})

    def file(self, path):
        if not os.path.isfile(path):
            return self.reply(404)
        size = os.path.getsize(path)
        start, status, headers = 0, 200, {}
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= size:
                return self.reply(416, b"", {"Content-Range": "bytes */%d" % size})
            status = 206
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, size - 1, size)
        name = os.path.basename(path)
        with lock:
            cut_at = control.get("cut", {}).get(name)
            cut = cut_at is not None and name not in counters["cut"] and cut_at > start
            if cut:
                counters["cut"].add(name)
        self.record(status)
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size - start))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read()
        if cut:
            self.wfile.write(data[:cut_at - start])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(data)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port-file", required=True)
    args = ap.parse_args()
    server = Server(("127.0.0.1", 0), Handler)
    server.root = args.root
    server.log_path = args.log
    server.port = server.server_address[1]
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.port))
    os.rename(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
