#!/usr/bin/env python3
"""`sinklm serve --cache heads` over real HTTP: a head policy written by `sinklm analyze --classify-heads`, a
session's greedy continuation across a restart (snapshot, restore) equal to one that never stopped, /metrics'
K/V bytes equal to what `sinklm info` says a stream of that cache holds, and a head policy for another model
refused at start, naming the file."""
import json
import os
import signal
import subprocess

import serve_support
from serve_support import http_request, with_byte_model
from sinklm_test import BIN, check, run_sinklm

W, R = 16, 40
PROMPT_1 = "The cache keeps one sink and a recent window; some heads keep more. " * 2  # > R bytes
PROMPT_2 = " Then the stream goes on."


def complete(port, session, prompt):
    status, _, body = http_request(port, "POST", "/v1/completions",
                                   {"prompt": prompt, "max_tokens": 8, "temperature": 0, "session": session})
    check(status == 200, f"completion on {session}: {status} {body[:200]!r}")
    return json.loads(body)["choices"][0]["text"]


def new_session(port):
    status, _, body = http_request(port, "POST", "/v1/sessions", {})
    return json.loads(body)["id"]


def metric(port, name):
    text = http_request(port, "GET", "/metrics")[2].decode()
    return int(next(l.split()[-1] for l in text.splitlines() if l.startswith(name + " ")))


def run_checks(work, checkpoint):
    recall = os.path.join(work, "recall")
    run_sinklm("prepare", "synthetic", "--task", "recall", "--out", recall, "--train-tokens", "2000",
               "--validation-tokens", "500", "--test-tokens", "500")
    policy = os.path.join(work, "heads.json")
    run_sinklm("analyze", "--checkpoint", checkpoint, "--recall", recall, "--classify-heads", policy, "--window", W,
               "--retrieval-window", R, "--retrieval-heads", 3, "--pairs", 2, "--tokens", 64, "--threads", 1)
    roles = json.load(open(policy))
    check(sum(len(layer) for layer in roles["retrieval"]) == 3 and roles["score"] == "recall-loss"
          and len(roles["scores"]["attention_mass"]) == 4 and len(roles["scores"]["recall_loss"]) == 4,
          f"analyze --classify-heads: 3 retrieval heads by recall loss, both scores kept: {roles['retrieval']}")
    cache = ["--cache", "heads", "--window", str(W), "--retrieval-window", str(R), "--head-policy", policy]
    info = json.loads(run_sinklm("info", checkpoint, *cache, "--json").stdout)["kv_cache"]
    heads_per_layer = [len(layer) for layer in roles["retrieval"]]
    expected = [(h * R + (4 - h) * W) * 2 * (128 // 4) * 4 for h in heads_per_layer]  # entries x K and V x D x fp32
    check(info["kv_bytes_per_layer"] == expected and info["kv_bytes_per_stream"] == sum(expected),
          f"info: K/V bytes per layer follow the heads' budgets: {info['kv_bytes_per_layer']} vs {expected}")

    sessions = os.path.join(work, "sessions")
    flags = [*cache, "--session-dir", sessions, "--threads", "1"]
    proc, base = serve_support.start_server(checkpoint, *flags)
    port = int(base.rsplit(":", 1)[1])
    a, c = new_session(port), new_session(port)
    complete(port, a, PROMPT_1)
    complete(port, c, PROMPT_1)
    check(metric(port, "sinklm_kv_bytes") == 2 * info["kv_bytes_per_stream"],
          f"/metrics: sinklm_kv_bytes = 2 idle sessions x {info['kv_bytes_per_stream']}")
    uninterrupted = complete(port, c, PROMPT_2)
    proc.send_signal(signal.SIGTERM)
    check(proc.wait(timeout=30) == 0, "server exits 0 on SIGTERM (sessions saved)")

    proc, base = serve_support.start_server(checkpoint, *flags)
    port = int(base.rsplit(":", 1)[1])
    restored = complete(port, a, PROMPT_2)
    check(restored == uninterrupted, f"after a restart the session goes on as one that never stopped: {restored!r} vs {uninterrupted!r}")
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)

    wrong = os.path.join(work, "wrong.json")
    json.dump({"format": "sinklm-head-policy", "layers": 2, "heads": 4, "retrieval": [[0], []]}, open(wrong, "w"))
    bad = subprocess.run([BIN, "serve", "--checkpoint", checkpoint, "--port", "0", "--cache", "heads", "--window", str(W),
                          "--head-policy", wrong], capture_output=True, text=True, timeout=60)
    check(bad.returncode != 0 and "wrong.json is for 2 layers x 4 heads, the model has 4 x 4" in bad.stderr,
          f"a head policy for another model is refused at start: {bad.stderr.strip()[-200:]!r}")


if __name__ == "__main__":
    with_byte_model("sinklm-heads-serve-", run_checks)
