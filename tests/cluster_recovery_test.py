#!/usr/bin/env python3
"""End to end: an answer survives a node's death.

Real `herd node` processes on 127.0.0.1 and a coordinator (`herd run`, `herd serve`):
- a pipeline of 3 and a tensor-parallel pair lose a node (SIGKILL) about a third of the way
  into a greedy answer of 60 tokens: the answer is the undisturbed one, byte for byte, for
  `herd run` and for a streaming request through `herd serve` (killed at its 20th chunk);
- a node that comes back on its address is taken into the plan at the next request;
- with a spare (--spare 1, nodes shipped their weights, each its own cache), the node the
  spare stands by for dies mid-answer: the spare takes its place under the same plan, no
  node is shipped anything again, and the answer is the undisturbed one;
- when the survivors cannot hold the model (nodes given --memory), the request fails within
  5 s with an error naming the lost node and the numbers, the server answers 503 with the
  reason, and serves again once the node is back.

Usage: cluster_recovery_test.py path/to/herd
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from herd_nodes import (DIR, ENV, HERD, PROCS, Node, cleanup, fail, herd, peers,  # noqa: E402
                        run_killing)

PROMPT = "The herd keeps going"

def run_args(nodes, parallel):
    return ["run", "-m", MODEL, "--peers", peers(nodes), "--no-local", "--parallel", parallel,
            "--temp", "0", "-n", "60", "-p", PROMPT]


def run_with_kill(nodes, parallel, victim, reference):
    """herd run, SIGKILL of `victim` once a third of the reference answer has arrived."""
    target = len(PROMPT) + (len(reference) - len(PROMPT)) // 3
    out, err, code, killed = run_killing(run_args(nodes, parallel), [victim], target)
    if code != 0:
        fail("%s run with a kill exited %d: %s" % (parallel, code, err))
    if not killed:
        fail("%s: the answer ended before the kill" % parallel)
    if out != reference:
        fail("%s: the answer after a kill differs:\n%r\n%r" % (parallel, out, reference))
    if "lost node '%s'" % victim.name not in err or "pod formed again" not in err:
        fail("%s: no recovery reported:\n%s" % (parallel, err))
    # The new pod's slots are empty: the scheduler runs the prompt and the answer so far again.
    recovered = re.search(r"pod formed again in (\d+) ms; its slots are empty: the scheduler "
                          r"runs every sequence again", err)
    replayed = re.search(r"replayed (\d+) tokens after the runner lost its states", err)
    if not recovered or not replayed:
        fail("%s: the scheduler's run again not reported:\n%s" % (parallel, err))
    print("ok: %s, %s killed mid-answer: same answer; pod formed again in %s ms (the scheduler "
          "ran %s tokens again)" % (parallel, victim.name, recovered.group(1), replayed.group(1)))


def http(port, path, body=None, timeout=60):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def completion_body(stream):
    return {"prompt": PROMPT, "max_tokens": 60, "temperature": 0, "stream": stream}


def stream_with_kill(port, victim, kill_at=20):
    """A streaming completion; `victim` is killed after chunk `kill_at` (None: no kill)."""
    req = urllib.request.Request("http://127.0.0.1:%d/v1/completions" % port,
                                 data=json.dumps(completion_body(True)).encode(),
                                 headers={"Content-Type": "application/json"})
    text, chunks = "", 0
    with urllib.request.urlopen(req, timeout=120) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if "error" in event:
                fail("stream error: %s" % event)
            text += event["choices"][0].get("text", "")
            chunks += 1
            if victim and chunks == kill_at:
                victim.kill()
    return text, chunks


def start_serve(name, nodes, parallel):
    log = os.path.join(DIR, name + ".log")
    p = subprocess.Popen([HERD, "serve", "-m", MODEL, "--peers", peers(nodes), "--no-local",
                          "--parallel", parallel, "--port", "0", "--ctx", "512"],
                         stdout=subprocess.DEVNULL, stderr=open(log, "w"), env=ENV)
    PROCS.append(p)
    deadline = time.time() + 60
    port = None
    while time.time() < deadline:
        with open(log) as f:
            text = f.read()
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", text)
        if m and "serve: ready" in text:
            port = int(m.group(1))
            break
        if p.poll() is not None:
            fail("serve %s exited at start" % name)
        time.sleep(0.05)
    if port is None:
        fail("serve %s not ready" % name)
    return p, port


try:
    MODEL = os.path.join(DIR, "model.gguf")
    r = herd("synth", "--arch", "llama", "--layers", "6", "--embd", "512", "--heads", "8",
             "--type", "f16", "--out", MODEL)
    if r.returncode != 0:
        fail("synth: " + r.stderr)

    # ---- herd run: a pipeline of 3, then a tensor-parallel pair
    a, b, c = Node("a"), Node("b"), Node("c")
    for nodes, parallel, victim in (([a, b, c], "pipeline", b), ([a, c], "tensor", c)):
        r = herd(*run_args(nodes, parallel))
        if r.returncode != 0:
            fail("undisturbed %s run: %s" % (parallel, r.stderr))
        run_with_kill(nodes, parallel, victim, r.stdout)
    b.start()
    c.start()

    # ---- a hybrid (qwen35moe: its Gated DeltaNet layers keep a recurrent state per sequence
    # on the nodes): the new pod's states are rebuilt by the scheduler's run again from
    # position 0, and the answer is the undisturbed one
    dense_model, MODEL = MODEL, os.path.join(DIR, "hybrid.gguf")
    r = herd("synth", "--arch", "qwen35moe", "--layers", "8", "--embd", "256", "--heads", "4",
             "--experts", "8", "--type", "q8_0", "--out", MODEL)
    if r.returncode != 0:
        fail("synth qwen35moe: " + r.stderr)
    # (A pipeline only: a tensor pair that loses a rank goes on as one node, whose sums run in
    # another order; on this q8_0 model with near-tied experts the answers then part within
    # the tolerance, not bit for bit. The llama pair above shows the run again over tensor
    # ranks.)
    for nodes, parallel, victim in (([a, b, c], "pipeline", b),):
        r = herd(*run_args(nodes, parallel))
        if r.returncode != 0:
            fail("undisturbed qwen35moe %s run: %s" % (parallel, r.stderr))
        run_with_kill(nodes, parallel, victim, r.stdout)
    print("ok: the qwen35moe answer above (recurrent states rebuilt by the run again)")
    b.start()
    MODEL = dense_model

    # ---- a spare: w stands by with x's weights (stage 0: spare j stands by for rank j)
    def shipped_node(name):
        return Node(name, "--no-model-files", "--cache-dir", os.path.join(DIR, "cache-" + name))
    x, y, z, w = (shipped_node(n) for n in ("x", "y", "z", "w"))
    args = run_args([x, y, z, w], "pipeline") + ["--spare", "1"]
    r = herd(*args)
    if r.returncode != 0 or "spares: w for stage 0" not in r.stderr:
        fail("the run with a spare: %d %s" % (r.returncode, r.stderr))
    reference = r.stdout
    received = {n.name: open(os.path.join(DIR, n.name + ".log")).read().count("received ")
                for n in (y, z, w)}
    target = len(PROMPT) + (len(reference) - len(PROMPT)) // 3
    out, err, code, killed = run_killing(args, [x], target)
    if code != 0 or not killed or out != reference:
        fail("spare: exit %d, killed %s, answer %r (undisturbed %r): %s" %
             (code, killed, out, reference, err))
    if "spare 'w' in the place of 'x'" not in err:
        fail("spare: w did not take x's place:\n" + err)
    for n in (y, z, w):
        with open(os.path.join(DIR, n.name + ".log")) as f:
            if f.read().count("received ") != received[n.name]:
                fail("spare: node %s was shipped weights after x's death" % n.name)
    recovered = re.search(r"pod formed again in (\d+) ms", err)
    print("ok: spare w took x's place mid-answer, nothing shipped again, same answer; pod "
          "formed again in %s ms" % recovered.group(1))
    for n in (y, z, w):
        n.kill()

    # ---- herd serve: a streaming request survives; the node returns; the reference is
    # the same request on the undisturbed pod
    serve, port = start_serve("serve", [a, b, c], "pipeline")
    reference, n = stream_with_kill(port, None)
    if n < 40:
        fail("the reference stream has only %d chunks" % n)
    killed_at = time.time()
    text, _ = stream_with_kill(port, b)
    if text != reference:
        fail("the streamed answer after a kill differs:\n%r\n%r" % (text, reference))
    with open(os.path.join(DIR, "serve.log")) as f:
        log = f.read()
    if "lost node 'b'" not in log:
        fail("serve did not report the lost node")
    print("ok: serve, a streaming request survives b's death with the same answer")
    b.start()
    time.sleep(2)  # the coordinator asks the missing nodes once a second
    _, again = http(port, "/v1/completions", completion_body(False))
    if again["choices"][0]["text"] != reference:
        fail("the answer after b returned differs")
    with open(os.path.join(DIR, "serve.log")) as f:
        log = f.read()
    if not re.search(r"node 127\.0\.0\.1:%d joined" % b.port, log):
        fail("b was not taken back into the pod at the next request")
    print("ok: serve, b returns and is taken in at the next request")
    serve.terminate()
    serve.wait()

    # ---- herd serve, a tensor-parallel pair: c dies at chunk 20 of a streaming answer
    serve, port = start_serve("serve-tensor", [a, c], "tensor")
    reference, n = stream_with_kill(port, None)
    text, _ = stream_with_kill(port, c)
    if text != reference:
        fail("tensor: the streamed answer after a kill differs:\n%r\n%r" % (text, reference))
    with open(os.path.join(DIR, "serve-tensor.log")) as f:
        if "lost node 'c'" not in f.read():
            fail("serve (tensor) did not report the lost node")
    print("ok: serve, a streaming request survives the death of a tensor-parallel rank")
    serve.terminate()
    serve.wait()
    for n in (a, b, c):
        n.kill()

    # ---- survivors too small: 503 with the reason, until the node is back
    small = [Node("s1", "--memory", "48M"), Node("s2", "--memory", "48M")]
    serve, port = start_serve("serve-small", small, "pipeline")
    status, body = http(port, "/v1/completions", completion_body(False))
    if status != 200:
        fail("the small pod does not answer: %s" % body)
    small[1].kill()
    t0 = time.time()
    status, body = http(port, "/v1/completions", completion_body(False))
    elapsed = time.time() - t0
    message = json.dumps(body)
    if status == 200 or elapsed > 5:
        fail("a pod too small answered %d after %.1f s: %s" % (status, elapsed, message))
    if "'s2'" not in message:
        fail("the error does not name the lost node: " + message)
    if "MiB" not in message and "GiB" not in message:
        fail("the error does not give the numbers: " + message)
    status, body = http(port, "/v1/completions", completion_body(False))
    if status != 503 or "s2" not in json.dumps(body) and small[1].address not in json.dumps(body):
        fail("the next request got %d, not 503 naming the node: %s" % (status, body))
    status, _ = http(port, "/health")
    if status != 503:
        fail("/health says %d while the pod cannot run the model" % status)
    print("ok: survivors too small: error in %.1f s, then 503: %s" % (elapsed, message[:200]))
    small[1].start()
    deadline = time.time() + 20
    while time.time() < deadline:
        status, body = http(port, "/v1/completions", completion_body(False))
        if status == 200:
            break
        time.sleep(0.5)
    if status != 200:
        fail("the pod did not come back after s2 returned: %d %s" % (status, body))
    print("ok: the pod is whole again once s2 is back")
    serve.terminate()
    serve.wait()
finally:
    cleanup()
print("PASS")
