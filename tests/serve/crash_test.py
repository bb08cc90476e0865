#!/usr/bin/env python3
"""Sessions survive SIGKILL (label e2e): a real `sinklm serve` process on loopback, a real session directory.

1. Session A gets a whole response; session B is killed in the middle of a streamed response (SIGKILL from
   outside, after some chunks arrived).
2. After a restart both sessions hold every token their clients received; then A's next request crosses the
   snapshot interval and the server is SIGKILLed in the middle of writing the snapshot (test hook
   SINKLM_FAULT_KILL_IN_SNAPSHOT=1 in serve/sessions/session_snapshot.h), before the response completes.
3. B's log gets a torn tail (half a record, as a power cut mid-write leaves). After a restart the server warns
   naming B, the half-written snapshot is gone, and both sessions continue with every token their clients
   received, and snapshots are written again.
"Holds the tokens" is checked on counts and on text. GET /v1/sessions/{id} returns how many tokens the session's
log holds and its text. After the first restart A's log must hold exactly its prompt and reply (the response's
usage), and B's at least what it held before the stream, the streamed prompt and every token the client
received: counted from the streamed chunks (logprobs: 0 lists each chunk's tokens), including those still in
the client's socket when the server died, which the test reads after the SIGKILL. (B's log may hold a few more:
tokens logged but not yet sent.) The session's text must start with the prompts and replies the client saw;
the tiny random model emits arbitrary bytes, which JSON carries as U+FFFD, so replacement characters are
dropped on both sides before comparing."""
import glob
import http.client
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
    with post(base, "/v1/completions", {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "session": session,
                                        "sinklm": {"stream_state": True}}) as r:
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


def read_events(stream, received, until_chunks=None):
    """Reads the SSE stream's complete `data: {...}` events into `received` (chunks, tokens, text, finished):
    up to `until_chunks` chunks, or, after the server died, all it had sent (the stream then ends, usually
    without its final empty chunk: http.client's IncompleteRead)."""
    try:
        while until_chunks is None or received["chunks"] < until_chunks:
            line = stream.readline().decode("utf-8", errors="replace")
            if not line:
                return
            if line.startswith("data: {") and line.endswith("\n"):  # a line cut by the kill is not received
                choice = json.loads(line[6:])["choices"][0]
                received["chunks"] += 1
                received["tokens"] += len(choice["logprobs"]["tokens"])
                received["text"] += choice["text"]
                received["finished"] |= choice["finish_reason"] is not None
            elif line.startswith("data: [DONE]"):
                received["finished"] = True
    except (http.client.IncompleteRead, ConnectionError, OSError):
        return


def main():
    with_byte_model("sinklm-crash-test-", lambda work, checkpoint: run(checkpoint, os.path.join(work, "sessions")))


def run(checkpoint, sessions):
    proc, base = start(checkpoint, sessions)
    a = json.loads(post(base, "/v1/sessions", {}).read())["id"]
    b = json.loads(post(base, "/v1/sessions", {}).read())["id"]
    seen = {a: "My name is Ada.", b: "Tell me a story."}
    reply_a = complete(base, a, seen[a], 8)
    seen[a] += reply_a["choices"][0]["text"]
    seen[b] += complete(base, b, seen[b], 8)["choices"][0]["text"]
    logged_b = history(base, b)["tokens"]  # B's log before the stream
    # B streams a long reply; the server is killed after a few chunks reached the client. The prompt is given as
    # token ids (the byte vocabulary's), so the test knows how many tokens it adds to the log.
    prompt_b = list(b" Go on, a long one.")
    stream = post(base, "/v1/completions", {"prompt": prompt_b, "max_tokens": 3000, "temperature": 0, "stream": True,
                                            "logprobs": 0, "session": b})
    received = {"chunks": 0, "tokens": 0, "text": "", "finished": False}
    read_events(stream, received, until_chunks=4)
    proc.kill()
    proc.wait()
    read_events(stream, received)  # what was already on its way to the client when the server died
    stream.close()
    seen[b] += bytes(prompt_b).decode() + received["text"]
    check(received["chunks"] >= 4 and not received["finished"], "SIGKILL in the middle of a streamed response",
          f"the client received {received['tokens']} tokens in {received['chunks']} chunks, "
          f"{'and the end of the response' if received['finished'] else 'not the end of the response'}")

    proc, base = start(checkpoint, sessions, fault=True)
    usage = reply_a["usage"]
    h = holds(base, a, seen[a], "after SIGKILL, A (whole responses)")
    check(h["tokens"] == usage["prompt_tokens"] + usage["completion_tokens"],
          "after SIGKILL, A's log holds exactly its prompt and reply",
          f"{h['tokens']} tokens; the response's usage: {usage['prompt_tokens']} prompt + "
          f"{usage['completion_tokens']} completion")
    h = holds(base, b, seen[b], "after SIGKILL mid-stream, B")
    need = logged_b + len(prompt_b) + received["tokens"]
    check(h["tokens"] >= need, "after SIGKILL mid-stream, B's log holds every token its client received",
          f"{h['tokens']} tokens; need {logged_b} before the stream + {len(prompt_b)} prompt + "
          f"{received['tokens']} received = {need}")
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
        check(r["sinklm"]["stream_length"] >= tokens, f"session {s} continues after the restarts "
              f"({tokens} logged tokens, stream now {r['sinklm']['stream_length']})")
    check(glob.glob(os.path.join(sessions, a, "snapshot-*[0-9]")), "snapshots are written again")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    check(b in err and "torn tail" in err, "the torn tail was reported with the session named")
    check(proc.returncode == 0, "the server exits 0 on SIGTERM")


if __name__ == "__main__":
    main()
