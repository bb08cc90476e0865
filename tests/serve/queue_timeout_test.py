"""A complete request that waits for a worker past --queue-timeout is answered 503 with Retry-After then, not
when a worker frees up: with one worker (--http-workers 1) busy streaming a long completion, GET /health
gets 503 `queue_timeout` about --queue-timeout (0.5 s) later; once the stream ends, requests are served again."""
import os
import time

from serve_support import LONG_COMPLETION, StreamedCompletion, http_request, start_server, with_byte_model
from sinklm_test import check


def run_checks(checkpoint, sessions):
    proc, base = start_server(checkpoint, "--session-dir", sessions, "--http-workers", "1", "--queue-timeout", "0.5")
    port = int(base.rsplit(":", 1)[1])
    try:
        stream = StreamedCompletion(port, LONG_COMPLETION)
        stream.start()
        stream.started.wait(30)
        start = time.time()
        status, headers, body = http_request(port, "GET", "/health")
        took = time.time() - start
        running = stream.is_alive()
        check(status == 503 and "Retry-After" in headers and b"queue_timeout" in body and 0.4 < took < 3.0,
              "a request waiting for the one busy worker gets 503 with Retry-After at --queue-timeout",
              f"{status} after {took:.2f} s {body[:120]}")
        check(running, "while the stream holding the worker still runs")
        stream.join(60)
        check(stream.events and stream.events[-1] == b"[DONE]", "the stream is not disturbed", f"{stream.error}")
        status, _, body = http_request(port, "GET", "/health")
        check(status == 200, "a free worker serves again", f"{status} {body[:80]}")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main():
    with_byte_model("sinklm-serve-queue-", lambda work, checkpoint: run_checks(checkpoint, os.path.join(work, "sessions")))


if __name__ == "__main__":
    main()
