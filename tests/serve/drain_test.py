"""SIGTERM drains `sinklm serve` (--drain-seconds): a streamed completion running on a session when the signal
comes goes on to its last token; meanwhile /health answers 503 {"status": "draining"} and a new completion 503
with Retry-After; the server then exits 0 and the session holds the whole stream after a restart. With a
short --drain-seconds the server stops a stream that outlasts it and still exits 0. The server runs with its
default thread count (a SIGTERM once killed it when LibTorch's threads had it unblocked)."""
import json
import os
import signal
import time

from serve_support import LONG_COMPLETION, StreamedCompletion, http_request, start_server, with_byte_model
from sinklm_test import check

LONG = LONG_COMPLETION  # seconds of streaming: long enough to signal the server mid-stream


def drain_lets_the_stream_finish(checkpoint, sessions):
    log_path = os.path.join(os.path.dirname(sessions), "server.log")
    log = open(log_path, "w")
    proc, base = start_server(checkpoint, "--session-dir", sessions, stderr=log)
    port = int(base.rsplit(":", 1)[1])
    _, _, body = http_request(port, "POST", "/v1/sessions")
    session = json.loads(body)["id"]
    stream = StreamedCompletion(port, dict(LONG, session=session, stream_options={"include_usage": True}))
    stream.start()
    stream.started.wait(30)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    status, _, body = http_request(port, "GET", "/health")
    check(status == 503 and body == b'{"status":"draining"}', "while draining /health answers 503 draining",
          f"{status} {body[:100]}")
    status, headers, body = http_request(port, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 2})
    check(status == 503 and "Retry-After" in headers and b"server_draining" in body,
          "while draining a new completion answers 503 with Retry-After", f"{status} {headers} {body[:160]}")
    stream.join(60)
    chunks = [json.loads(e) for e in stream.events if e != b"[DONE]"]
    last = chunks[-1] if chunks else {}
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices") and c["choices"][0]["finish_reason"]]
    check(stream.events and stream.events[-1] == b"[DONE]" and finish == ["length"] and not last.get("choices")
          and last.get("usage", {}).get("completion_tokens") == LONG["max_tokens"],
          "the stream running at SIGTERM goes on to its last token", f"{len(stream.events)} events, {stream.error}")
    try:
        rc = proc.wait(timeout=30)
    except Exception:
        proc.kill()
        rc = None
    log.close()
    said = open(log_path).read()
    check(rc == 0 and "draining" in said, "then the server exits 0, having said it drained", f"exit {rc}: {said[-300:]}")

    proc, base = start_server(checkpoint, "--session-dir", sessions)
    try:
        status, _, body = http_request(int(base.rsplit(":", 1)[1]), "GET", f"/v1/sessions/{session}")
        tokens = json.loads(body)["tokens"] if status == 200 else None
        # Its log: the sink and prompt, then every generated token (the last one sampled, not yet fed).
        total = last.get("usage", {}).get("total_tokens")
        check(tokens == total, "the session holds the whole stream after a restart",
              f"{tokens} tokens logged, {total} streamed")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def drain_time_is_bounded(checkpoint, sessions):
    proc, base = start_server(checkpoint, "--session-dir", sessions, "--drain-seconds", "0.5")
    stream = StreamedCompletion(int(base.rsplit(":", 1)[1]), LONG)
    stream.start()
    stream.started.wait(30)
    signalled = time.time()
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=30)
    except Exception:
        proc.kill()
        rc = None
    took = time.time() - signalled
    check(rc == 0 and took < 4.5, "with --drain-seconds 0.5 the server stops a longer stream and exits 0",
          f"exit {rc} after {took:.1f} s")
    stream.join(30)


def ending_of(stream):
    """How a stream ended: its last chunk's finish_reason, its error event's code, or what cut it."""
    events = [json.loads(e) for e in stream.events if e != b"[DONE]"]
    if not events:
        return f"no events ({stream.error})"
    last = events[-1]
    if "error" in last:
        return last["error"]["code"]
    return (last.get("choices") or [{}])[0].get("finish_reason") or f"cut ({stream.error})"


def sixteen_streams_end_at_a_logged_token(checkpoint, sessions):
    """SIGTERM under 16 streams, each on a session, with a drain too short for them: every stream ends, on its
    last token or with a server_stopped error event, the server exits 0, and after a restart each session's log
    holds exactly the tokens that reached its client (prompt and sink first): a stream is stopped on a token
    boundary and sent every token generated before it, though its response lags the model (each write
    waits for its log's fsync). The streams ask for logprobs, whose entries name every token sent: counting
    text chunks would miss the bytes of a character held until its UTF-8 sequence is whole."""
    proc, base = start_server(checkpoint, "--session-dir", sessions, "--drain-seconds", "1")
    port = int(base.rsplit(":", 1)[1])
    streams = []
    for _ in range(16):
        _, _, body = http_request(port, "POST", "/v1/sessions")
        stream = StreamedCompletion(port, dict(LONG, session=json.loads(body)["id"], logprobs=0))
        stream.start()
        streams.append(stream)
    for stream in streams:
        stream.started.wait(30)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    for stream in streams:
        stream.join(60)
    try:
        rc = proc.wait(timeout=30)
    except Exception:
        proc.kill()
        rc = None
    check(rc == 0 and not any(s.is_alive() for s in streams), "16 streams at SIGTERM: all end and the server exits 0",
          f"exit {rc}")
    endings = [ending_of(s) for s in streams]
    check(all(e in ("length", "server_stopped") for e in endings),
          "each stream ends on its last token or says the server stopped it (error event server_stopped)",
          f"endings: {endings}")
    proc, base = start_server(checkpoint, "--session-dir", sessions)
    port = int(base.rsplit(":", 1)[1])
    try:
        mismatched = []
        for stream in streams:
            status, _, body = http_request(port, "GET", f"/v1/sessions/{stream.body['session']}")
            logged = json.loads(body)["tokens"] if status == 200 else None
            chunks = [json.loads(e) for e in stream.events if e != b"[DONE]"]
            received = sum(len((c["choices"][0].get("logprobs") or {}).get("tokens", []))
                           for c in chunks if c.get("choices"))
            # A byte model: one id per prompt byte after its sink token, then every generated token.
            if received == 0 or logged != len(LONG["prompt"].encode()) + 1 + received:
                mismatched.append((logged, received))
        check(not mismatched, "every session's log holds exactly the tokens its client received",
              f"(logged, received): {mismatched[:4]}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def main():
    def body(work, checkpoint):
        drain_lets_the_stream_finish(checkpoint, os.path.join(work, "sessions"))
        drain_time_is_bounded(checkpoint, os.path.join(work, "sessions-2"))
        sixteen_streams_end_at_a_logged_token(checkpoint, os.path.join(work, "sessions-3"))

    with_byte_model("sinklm-serve-drain-", body)


if __name__ == "__main__":
    main()
