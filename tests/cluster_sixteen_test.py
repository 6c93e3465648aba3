#!/usr/bin/env python3
"""Sixteen `herd node` processes on this machine (1 thread each, their bandwidth given so
that their start-up probes do not fight) run a pipeline of 16 and a hybrid of 8 stages x 2
tensor-parallel ranks; each loses two nodes (SIGKILL) in the middle of a greedy answer and
finishes it with the answer an undisturbed run gives.

Usage: cluster_sixteen_test.py path/to/herd [--peers-auto]
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from herd_nodes import DIR, ENV, HERD, PROCS, Node, cleanup, fail, herd, peers  # noqa: E402

PROMPT = "Sixteen nodes"


def answer(nodes, parallel, victims=()):
    """herd run across `nodes`; `victims` are killed once a third of the answer is out."""
    args = [HERD, "run", "-m", MODEL, "--peers", peers(nodes), "--no-local", "--parallel",
            parallel, "--temp", "0", "-n", "48", "-p", PROMPT, "-c", "256"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    PROCS.append(p)
    out, killed = b"", not victims
    while True:
        chunk = os.read(p.stdout.fileno(), 1)
        if not chunk:
            break
        out += chunk
        if not killed and len(out) >= len(PROMPT) + 16:
            for v in victims:
                v.kill()
            killed = True
    p.wait()
    err = p.stderr.read().decode(errors="replace")
    if p.returncode != 0:
        fail("%s: herd run exited %d: %s" % (parallel, p.returncode, err))
    if not killed:
        fail("%s: the answer ended before the kill" % parallel)
    return out.decode(errors="replace"), err


try:
    MODEL = os.path.join(DIR, "model16.gguf")
    r = herd("synth", "--arch", "llama", "--layers", "16", "--embd", "256", "--heads", "8",
             "--type", "f16", "--out", MODEL)
    if r.returncode != 0:
        fail("synth: " + r.stderr)
    start = time.time()
    nodes = [Node("n%02d" % i) for i in range(16)]
    print("ok: 16 nodes up in %.1f s" % (time.time() - start))

    for parallel, victims, stages in (("pipeline", (3, 11), 16), ("pipeline:8,tensor:2", (5, 12), 8)):
        reference, err = answer(nodes, parallel)
        formed = re.search(r"pod formed: (\S+) of (\d+) stages", err)
        if not formed or int(formed.group(2)) != stages:
            fail("%s: not %d stages: %s" % (parallel, stages, err))
        t0 = time.time()
        text, err = answer(nodes, parallel, [nodes[i] for i in victims])
        if text != reference:
            fail("%s: the answer after losing two nodes differs:\n%r\n%r" % (parallel, text, reference))
        again = re.findall(r"pod formed again in (\d+) ms after replaying (\d+) tokens \(in \d+ ms\): (.*)", err)
        if not again:
            fail("%s: no new pod: %s" % (parallel, err))
        print("ok: %s of 16 nodes lost %s mid-answer and finished it (same answer): %s" %
              (parallel, ", ".join(nodes[i].name for i in victims),
               "; ".join("formed again in %s ms, %s tokens replayed: %s" % a for a in again)))
        for i in victims:
            nodes[i].start()
finally:
    cleanup()
print("PASS")
