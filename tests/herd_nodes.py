"""What the cluster tests share: `herd node` processes on 127.0.0.1 and helpers.

Every process started here is killed by cleanup(); logs go to DIR, and fail() prints the
last lines of each before it exits.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERD = os.path.abspath(sys.argv[1])
DIR = tempfile.mkdtemp(prefix="herd-cluster-")
ENV = dict(os.environ, XDG_CACHE_HOME=os.path.join(DIR, "cache"),
           XDG_CONFIG_HOME=os.path.join(DIR, "config"))  # identities: never the user's
ENV.pop("HERD_KEY", None)
PROCS = []


def fail(message):
    print("FAIL: " + message)
    for name in sorted(os.listdir(DIR)):
        if name.endswith(".log"):
            with open(os.path.join(DIR, name), errors="replace") as f:
                print("--- " + name + "\n" + "".join(f.readlines()[-15:]))
    sys.exit(1)


def cleanup():
    for p in PROCS:
        if p.poll() is None:
            p.kill()
        p.wait()
    shutil.rmtree(DIR, ignore_errors=True)


class Node:
    """A `herd node` on 127.0.0.1; port 0 the first time, then the port it had."""

    def __init__(self, name, *options):
        self.name, self.options, self.port = name, options, 0
        self.start()

    def start(self):
        log = os.path.join(DIR, self.name + ".log")
        before = self.listening(log)
        self.proc = subprocess.Popen(
            [HERD, "node", "--listen", "127.0.0.1:%d" % self.port, "--threads", "1",
             "--bandwidth", "10", "--name", self.name, *self.options],
            stdout=subprocess.DEVNULL, stderr=open(log, "a"), env=ENV)
        PROCS.append(self.proc)
        deadline = time.time() + 30
        while time.time() < deadline:
            found = self.listening(log)
            if len(found) > len(before):
                self.port = int(found[-1])
                return
            if self.proc.poll() is not None:
                fail("node %s exited at start" % self.name)
            time.sleep(0.05)
        fail("node %s did not log its address" % self.name)

    @staticmethod
    def listening(log):
        if not os.path.exists(log):
            return []
        with open(log) as f:
            return re.findall(r"listening on 127\.0\.0\.1:(\d+)", f.read())

    @property
    def address(self):
        return "127.0.0.1:%d" % self.port

    def kill(self):
        self.proc.kill()
        self.proc.wait()


def herd(*args, timeout=120):
    r = subprocess.run([HERD, *args], capture_output=True, text=True, env=ENV, timeout=timeout)
    return r


def peers(nodes):
    return ",".join(n.address for n in nodes)


def run_killing(args, victims, after_bytes):
    """Runs herd with `args`, reading its stdout as it streams; once `after_bytes` bytes are
    out, SIGKILLs every node in `victims`. Returns (stdout text, stderr text, exit code,
    whether the kill happened)."""
    p = subprocess.Popen([HERD, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    PROCS.append(p)
    out, killed = b"", not victims
    while True:
        chunk = os.read(p.stdout.fileno(), 1)
        if not chunk:
            break
        out += chunk
        if not killed and len(out) >= after_bytes:
            for v in victims:
                v.kill()
            killed = True
    p.wait()
    return out.decode(errors="replace"), p.stderr.read().decode(errors="replace"), p.returncode, killed
