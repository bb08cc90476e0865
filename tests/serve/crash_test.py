#!/usr/bin/env python3
"""Sessions survive SIGKILL (label e2e): a real `sinklm serve` process on loopback, a real session directory.

1. Session A gets a whole response; session B is killed in the middle of a streamed response (SIGKILL from
   outside, after some chunks arrived).
2. After a restart both sessions hold every token their clients received; then A's next request crosses the
   snapshot interval and the server is SIGKILLed in the middle of writing the snapshot (test hook
   SINKLM_FAULT_KILL_IN_SNAPSHOT=1 in serve/session_snapshot.h), before the response completes.
3. B's log gets a torn tail (half a record, as a power cut mid-write leaves). After a restart the server warns
   naming B, the half-written snapshot is gone, and both sessions continue with every token their clients
   received, and snapshots are written again.
"Holds the tokens" is checked on text: GET /v1/sessions/{id} returns the session's text, which must start
with the prompts and replies the client saw. The tiny random model emits arbitrary bytes, which JSON carries
as U+FFFD, so replacement characters are dropped on both sides before comparing."""
import glob
import json
import os
import signal
import subprocess
import urllib.error
import urllib.request

from serve_support import start_server, with_byte_model
from sinklm_test import check


def start(checkpoint, sessions, fault=False):
    env = dict(os.environ, SINKLM_FAULT_KILL_IN_SNAPSHOT="1" if fault else "0")
    return start_server(checkpoint, "--window", "48", "--threads", "1", "--session-dir", sessions,
                        "--snapshot-every", "40", "--max-tokens-limit", "4096", env=env, stderr=subprocess.PIPE)


def post(base, path, body):
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(request, timeout=120)


def complete(base, session, prompt, max_tokens):
    with post(base, "/v1/completions", {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "session": session}) as r:
        return json.loads(r.read())


def history(base, session):
    with urllib.request.urlopen(base + "/v1/sessions/" + session, timeout=60) as r:
        return json.loads(r.read())


def plain(text):
    return text.replace("\ufffd", "")


def holds(base, session, seen, what):
    h = history(base, session)
    check(plain(h["text"]).startswith(plain(seen)), f"{what}: the session holds every token its client received "
          f"({len(seen)} characters seen, session has {h['tokens']} tokens)")
    return h


def main():
    with_byte_model("sinklm-crash-test-", lambda work, checkpoint: run(checkpoint, os.path.join(work, "sessions")))


def run(checkpoint, sessions):
    proc, base = start(checkpoint, sessions)
    a = json.loads(post(base, "/v1/sessions", {}).read())["id"]
    b = json.loads(post(base, "/v1/sessions", {}).read())["id"]
    seen = {a: "My name is Ada.", b: "Tell me a long story."}
    seen[a] += complete(base, a, seen[a], 8)["choices"][0]["text"]
    # B streams a long reply; the server is killed after a few chunks reached the client.
    stream = post(base, "/v1/completions", {"prompt": seen[b], "max_tokens": 3000, "temperature": 0, "stream": True,
                                            "session": b})
    chunks = 0
    while chunks < 4:
        line = stream.readline().decode()
        if line.startswith("data: {"):
            seen[b] += json.loads(line[6:])["choices"][0]["text"]
            chunks += 1
    proc.kill()
    proc.wait()
    stream.close()
    check(chunks == 4, "SIGKILL in the middle of a streamed response")

    proc, base = start(checkpoint, sessions, fault=True)
    holds(base, a, seen[a], "after SIGKILL, A (whole responses)")
    holds(base, b, seen[b], "after SIGKILL mid-stream, B")
    seen[a] += " And then?"
    try:  # 40 tokens since the last snapshot: the server kills itself while writing one
        complete(base, a, " And then?", 30)
        check(False, "the server dies in the middle of a snapshot")
    except (urllib.error.URLError, ConnectionError):
        pass
    check(proc.wait(timeout=60) == -signal.SIGKILL, "the server was SIGKILLed in the middle of a snapshot")
    leftovers = glob.glob(os.path.join(sessions, a, "snapshot-*.tmp-*"))
    check(len(leftovers) == 1, f"a half-written snapshot was left behind: {leftovers}")
    with open(os.path.join(sessions, b, "tokens.log"), "ab") as log:
        log.write(b"\x05\x00\x00\x00\xde\xad")  # a torn record: its length runs past the end

    proc, base = start(checkpoint, sessions)
    holds(base, a, seen[a], "after SIGKILL mid-snapshot, A")
    holds(base, b, seen[b], "after a torn log tail, B")
    check(not glob.glob(os.path.join(sessions, a, "snapshot-*.tmp-*")), "the half-written snapshot was removed")
    for s, prompt in ((a, " Go on."), (b, " The end.")):
        tokens = history(base, s)["tokens"]
        r = complete(base, s, prompt, 40)
        seen[s] = history(base, s)["text"]
        check(r["stream"]["stream_length"] >= tokens, f"session {s} continues after the restarts "
              f"({tokens} logged tokens, stream now {r['stream']['stream_length']})")
    check(glob.glob(os.path.join(sessions, a, "snapshot-*[0-9]")), "snapshots are written again")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    check(b in err and "torn tail" in err, "the torn tail was reported with the session named")
    check(proc.returncode == 0, "the server exits 0 on SIGTERM")


if __name__ == "__main__":
    main()
