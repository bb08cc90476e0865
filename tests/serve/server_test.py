#!/usr/bin/env python3
"""`sinklm serve` over real HTTP on loopback, driven by the official `openai` client and by curl.

Completions and chat (plain and streaming), /v1/models, /health, /metrics, OpenAI-style 4xx errors, sessions
that keep their stream across requests, LRU eviction to disk and restore, survival across a restart, and 16
concurrent streaming sessions. Exit 77 (skipped) when the `openai` package is missing."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

try:
    import openai
except ImportError:
    print("skipped: the openai package is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

BIN = os.environ["SINKLM_BIN"]
SOURCE = os.environ["SINKLM_SOURCE_DIR"]
KEY = "test-key"
WINDOW = 48
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what)


def start_server(checkpoint, sessions):
    proc = subprocess.Popen(
        [BIN, "serve", "--checkpoint", checkpoint, "--port", "0", "--window", str(WINDOW), "--api-key", KEY,
         "--session-dir", sessions, "--sessions-in-memory", "2", "--max-sessions", "20", "--max-body-bytes", "4096",
         "--max-tokens-limit", "64", "--threads", "1", "--model-name", "tiny-bytes"],
        stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "listening on http://" not in line:
        proc.kill()
        sys.exit(f"server did not start: {line!r}")
    base = line.split("listening on ")[1].split()[0]
    return proc, base


def stop_server(proc):
    proc.send_signal(signal.SIGTERM)
    check(proc.wait(timeout=30) == 0, "server exits 0 on SIGTERM")


def curl(base, *args):
    out = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", *args], capture_output=True, text=True, timeout=60).stdout
    body, _, code = out.rpartition("\n")
    return int(code), body


def error_of(body):
    try:
        return json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return None


def main():
    work = tempfile.mkdtemp(prefix="sinklm-serve-test-")
    checkpoint = os.path.join(work, "tiny-bytes")
    # A tiny model with a byte vocabulary (256 ids) plus one learnable sink token.
    subprocess.run([BIN, "init", "--config", os.path.join(SOURCE, "configs/tiny-sink.yaml"), "--out", checkpoint,
                    "--set", "model.vocab_size=264", "--set", "model.tokenizer_vocab_size=256",
                    "--set", "model.eos_token_id=255"], check=True, stdout=subprocess.DEVNULL)
    sessions_dir = os.path.join(work, "sessions")
    try:
        run_checks(checkpoint, sessions_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        sys.exit(f"{len(failures)} check(s) failed: {failures}")
    print("all server checks passed")


def run_checks(checkpoint, sessions_dir):
    proc, base = start_server(checkpoint, sessions_dir)
    deadline = time.time() + 240
    try:
        client = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0, timeout=60)

        models = client.models.list()
        check([m.id for m in models.data] == ["tiny-bytes"], "/v1/models lists the served model")

        c = client.completions.create(model="tiny-bytes", prompt="Once upon a time", max_tokens=12, temperature=0)
        check(c.choices[0].finish_reason in ("length", "stop") and c.usage.completion_tokens <= 12,
              "completion: finish_reason and usage")
        again = client.completions.create(model="tiny-bytes", prompt="Once upon a time", max_tokens=12, temperature=0)
        check(again.choices[0].text == c.choices[0].text, "greedy completions are reproducible")

        pieces, finish = [], None
        for chunk in client.completions.create(model="tiny-bytes", prompt="Once upon a time", max_tokens=12,
                                               temperature=0, stream=True):
            pieces.append(chunk.choices[0].text)
            finish = chunk.choices[0].finish_reason or finish
        check("".join(pieces) == c.choices[0].text and finish == c.choices[0].finish_reason,
              "streamed completion equals the non-streamed one")

        chat = client.chat.completions.create(model="tiny-bytes", messages=[{"role": "user", "content": "Hi!"}],
                                              max_tokens=10, temperature=0.7, seed=3)
        check(chat.choices[0].message.role == "assistant" and chat.usage.completion_tokens <= 10,
              "chat completion")
        deltas = [ch.choices[0].delta for ch in client.chat.completions.create(
            model="tiny-bytes", messages=[{"role": "user", "content": "Hi!"}], max_tokens=10, temperature=0.7, seed=3,
            stream=True)]
        check(deltas[0].role == "assistant" and "".join(d.content or "" for d in deltas) == chat.choices[0].message.content,
              "streamed chat equals the non-streamed one (same seed)")

        # Errors: OpenAI-style JSON with 4xx, and the server keeps serving.
        try:
            openai.OpenAI(base_url=base + "/v1", api_key="wrong", max_retries=0).models.list()
            check(False, "a wrong API key is refused")
        except openai.AuthenticationError as e:
            check(e.status_code == 401, "a wrong API key gets 401")
        for bad, name in [(dict(max_tokens=1000), "max_tokens over the limit"),
                          (dict(max_tokens=5, temperature="hot"), "temperature of the wrong type"),
                          (dict(max_tokens=5, extra_body={"session": "sess_nope"}), "unknown session")]:
            try:
                client.completions.create(model="tiny-bytes", prompt="x", **bad)
                check(False, f"{name} is refused")
            except openai.APIStatusError as e:
                check(400 <= e.status_code < 500 and e.body and "message" in e.body, f"{name}: {e.status_code} JSON error")
        auth = ["-H", f"Authorization: Bearer {KEY}"]
        code, body = curl(base, *auth, base + "/v1/completions", "-d", "{not json")
        check(code == 400 and error_of(body)["code"] == "invalid_json", "curl: malformed JSON gets 400")
        code, body = curl(base, *auth, base + "/v1/completions", "-d", json.dumps({"prompt": "x" * 5000}))
        check(code == 413 and error_of(body) is not None, "curl: a body over the limit gets 413 JSON")
        code, body = curl(base, *auth, base + "/v1/completions", "-d", json.dumps({"prompt": 7}))
        check(code == 400 and "prompt" in error_of(body)["message"], "curl: a prompt of the wrong type gets 400")
        code, body = curl(base, base + "/v1/nothing")
        check(code == 404 and error_of(body) is not None, "curl: unknown route gets 404 JSON")
        code, body = curl(base, base + "/health")
        check(code == 200 and json.loads(body)["status"] == "ok", "curl: /health")
        code, body = curl(base, "-N", *auth, base + "/v1/completions",
                          "-d", json.dumps({"prompt": "abc", "max_tokens": 6, "stream": True}))
        events = [line for line in body.splitlines() if line.startswith("data: ")]
        check(code == 200 and events[-1] == "data: [DONE]" and json.loads(events[-2][6:])["choices"][0]["finish_reason"],
              "curl: SSE stream ends with a finish_reason chunk and data: [DONE]")

        # Sessions: the stream carries over; only new text is sent each turn.
        def new_session():
            code, body = curl(base, *auth, "-X", "POST", base + "/v1/sessions", "-d", "{}")
            return json.loads(body)["id"]

        a, b, other = new_session(), new_session(), new_session()  # 3 sessions, 2 fit in memory
        lengths = []
        for turn in ["My name is Ada.", " What is my name?", " Tell me more."]:
            for s in (a, b):
                r = client.completions.create(model="tiny-bytes", prompt=turn, max_tokens=8, temperature=0,
                                              extra_body={"session": s})
                if s == a:
                    lengths.append((r.usage.prompt_tokens, r.usage.completion_tokens, r.choices[0].finish_reason,
                                    r.model_extra["stream"]))
            client.completions.create(model="tiny-bytes", prompt="filler", max_tokens=4, extra_body={"session": other})
        expected = 0
        ok = True
        for prompt_tokens, completion_tokens, finish, stream in lengths:
            # A reply's last token reaches the cache with the next prompt (counted there); end-of-text never does.
            expected += prompt_tokens + completion_tokens - (0 if finish == "stop" else 1)
            ok &= stream["stream_length"] == expected and stream["kv_entries"] == min(expected, WINDOW)
        check(ok and lengths[-1][3]["stream_length"] > WINDOW, f"a session's stream grows across requests: {lengths}")
        metrics = curl(base, base + "/metrics")[1]
        on_disk = [l for l in metrics.splitlines() if l.startswith('sinklm_sessions{where="disk"}')]
        check(on_disk and int(on_disk[0].split()[-1]) >= 1, "LRU: a session beyond --sessions-in-memory went to disk")
        generated = [l for l in metrics.splitlines() if l.startswith("sinklm_generated_tokens_total")]
        check(generated and int(generated[0].split()[-1]) > 0 and "sinklm_step_seconds_bucket" in metrics,
              "/metrics: counters and latency histograms")

        # 16 concurrent streaming sessions.
        results = {}

        def converse(i):
            s = new_session()
            text, finish = "", None
            for chunk in client.chat.completions.create(model="tiny-bytes", stream=True, max_tokens=24,
                                                        messages=[{"role": "user", "content": f"Hello number {i}"}],
                                                        extra_body={"session": s}):
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
            results[i] = finish

        threads = [threading.Thread(target=converse, args=(i,)) for i in range(16)]
        start = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(1, deadline - time.time()))
        check(len(results) == 16 and all(results.values()),
              f"16 concurrent streaming sessions all finished ({time.time() - start:.1f}s)")

        # The session limit (20: a, b, other and the 16 above, plus one), deletion, and the session header.
        extra = new_session()
        code, body = curl(base, *auth, "-X", "POST", base + "/v1/sessions", "-d", "{}")
        check(code == 429 and error_of(body)["code"] == "too_many_sessions", "--max-sessions: the 21st session gets 429")
        code, body = curl(base, *auth, "-X", "DELETE", base + "/v1/sessions/" + extra)
        check(code == 200 and json.loads(body)["deleted"], "DELETE /v1/sessions/{id}")
        code, body = curl(base, *auth, "-H", "X-Session-Id: " + other, base + "/v1/completions",
                          "-d", json.dumps({"prompt": "more", "max_tokens": 2}))
        check(code == 200 and json.loads(body)["stream"]["session"] == other, "X-Session-Id selects the session")
        code, body = curl(base, *auth, "-H", "X-Session-Id: " + extra, base + "/v1/completions",
                          "-d", json.dumps({"prompt": "more", "max_tokens": 2}))
        check(code == 404, "a deleted session is gone")

        # Continue a in memory vs b restored after a restart: identical histories give identical replies.
        follow = dict(model="tiny-bytes", prompt=" And then?", max_tokens=10, temperature=0)
        before = client.completions.create(**follow, extra_body={"session": a})
    finally:
        stop_server(proc)
    proc, base = start_server(checkpoint, sessions_dir)
    try:
        client = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0, timeout=60)
        after = client.completions.create(**follow, extra_body={"session": b})
        check(after.choices[0].text == before.choices[0].text
              and after.model_extra["stream"]["stream_length"] == before.model_extra["stream"]["stream_length"],
              "a session survives a restart: same reply, same stream length")
    finally:
        stop_server(proc)


if __name__ == "__main__":
    main()
