#!/usr/bin/env python3
"""Sixteen `herd node` processes on this machine (1 thread each, their bandwidth given so
that their start-up probes do not fight) run a pipeline of 16 and a hybrid of 8 stages x 2
tensor-parallel ranks; each loses two nodes (SIGKILL) in the middle of a greedy answer and
finishes it with the answer an undisturbed run gives.

With --peers-auto the coordinator finds the nodes by discovery (DNS-SD: run by
tests/discovery_e2e_test.sh sixteen, inside its namespace with its own avahi-daemon); else
it names them.

Usage: cluster_sixteen_test.py path/to/herd [--peers-auto]
"""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from herd_nodes import DIR, Node, cleanup, fail, herd, peers, run_killing  # noqa: E402

PROMPT = "Sixteen nodes"
AUTO = "--peers-auto" in sys.argv[2:]


def wait_listed(nodes):
    """With discovery: until `herd nodes` lists exactly these nodes."""
    want = sorted(n.name for n in nodes)
    deadline = time.time() + 30
    while time.time() < deadline:
        r = herd("nodes", "--json", "--discover-ms", "1000")
        if r.returncode == 0 and sorted(n["name"] for n in json.loads(r.stdout)) == want:
            return
        time.sleep(0.2)
    fail("herd nodes does not list the 16 nodes: " + r.stdout + r.stderr)


def answer(nodes, parallel, victims=()):
    """herd run across `nodes`; `victims` are killed once a third of the answer is out."""
    args = ["run", "-m", MODEL, "--peers", "auto" if AUTO else peers(nodes), "--no-local",
            "--parallel",
            parallel, "--temp", "0", "-n", "48", "-p", PROMPT, "-c", "256"]
    out, err, code, killed = run_killing(args, victims, len(PROMPT) + 16)
    if code != 0:
        fail("%s: herd run exited %d: %s" % (parallel, code, err))
    if not killed:
        fail("%s: the answer ended before the kill" % parallel)
    return out, err


try:
    MODEL = os.path.join(DIR, "model16.gguf")
    r = herd("synth", "--arch", "llama", "--layers", "16", "--embd", "256", "--heads", "8",
             "--type", "f16", "--out", MODEL)
    if r.returncode != 0:
        fail("synth: " + r.stderr)
    start = time.time()
    nodes = [Node("n%02d" % i) for i in range(16)]
    if AUTO:
        wait_listed(nodes)
    print("ok: 16 nodes up in %.1f s%s" % (time.time() - start, ", found by discovery" if AUTO else ""))

    for parallel, victims, stages in (("pipeline", (3, 11), 16), ("pipeline:8,tensor:2", (5, 12), 8)):
        reference, err = answer(nodes, parallel)
        formed = re.search(r"pod formed: (\S+) of (\d+) stages", err)
        if not formed or int(formed.group(2)) != stages:
            fail("%s: not %d stages: %s" % (parallel, stages, err))
        t0 = time.time()
        text, err = answer(nodes, parallel, [nodes[i] for i in victims])
        if text != reference:
            fail("%s: the answer after losing two nodes differs:\n%r\n%r" % (parallel, text, reference))
        again = re.findall(r"pod formed again in (\d+) ms; its slots are empty: the scheduler "
                           r"runs every sequence again: (.*)", err)
        replayed = re.search(r"replayed (\d+) tokens after the runner lost its states", err)
        if not again or not replayed:
            fail("%s: no new pod, or no run again: %s" % (parallel, err))
        print("ok: %s of 16 nodes lost %s mid-answer and finished it (same answer, %s tokens "
              "run again): %s" %
              (parallel, ", ".join(nodes[i].name for i in victims), replayed.group(1),
               "; ".join("formed again in %s ms: %s" % a for a in again)))
        for i in victims:
            nodes[i].start()
        if AUTO:
            wait_listed(nodes)
finally:
    cleanup()
print("PASS")
