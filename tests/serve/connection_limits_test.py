"""Connections that cannot hold `sinklm serve` hostage (serve/http/connection_front.h), over real loopback sockets
with the default limits: with 300 connections open that never send a byte and 64 that send a header byte per
second, a normal streamed completion starts within 2 s and completes; a client address over
--max-connections-per-client (64) and a connection over --max-connections (512) are answered 503 with
Retry-After; the slow senders get 408 once --header-timeout (10 s) has passed since their first byte, and the
silent ones are closed after --idle-timeout (15 s). The attackers come from other loopback addresses
(127.0.0.2 and up, at most 40 each) than the normal client, so only the caps under test apply to each.
About 520 sockets here and as many in the server; the soft descriptor limit is raised if needed."""
import http.client
import json
import os
import resource
import select
import socket
import threading
import time

from serve_support import start_server, with_byte_model
from sinklm_test import check, skip

IDLE, SLOW = 300, 64
PER_CLIENT, TOTAL = 64, 512            # the defaults of --max-connections-per-client and --max-connections
HEADER_TIMEOUT, IDLE_TIMEOUT = 10, 15  # the defaults of --header-timeout and --idle-timeout
SLOW_REQUEST = b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" * 4


def raise_fd_limit(needed):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        skip(f"needs {needed} open files, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def connect_from(source, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def open_many(count, first_address, port, per_address=40):
    """count connections from 127.0.0.<first_address> and up, at most per_address from each."""
    return [connect_from(f"127.0.0.{first_address + i // per_address}", port) for i in range(count)]


def readable(socks, timeout):
    ready, _, _ = select.select(socks, [], [], timeout)
    return set(ready)


def read_answer(s, timeout=3.0):
    """What the server sent before closing (b"" on a silent close), or None if nothing within timeout."""
    s.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return data
            data += chunk
    except socket.timeout:
        return data if data else None
    except OSError:
        return data


class SlowSenders(threading.Thread):
    """Sends one byte of a request's headers per second on each socket until the server answers it."""

    def __init__(self, socks, seconds):
        super().__init__(daemon=True)
        self.socks, self.seconds, self.answers, self.first_byte = socks, seconds, {}, None

    def run(self):
        end = time.time() + self.seconds
        for i in range(len(SLOW_REQUEST)):
            if time.time() > end:
                return
            live = [s for s in self.socks if s not in self.answers]
            for s in readable(live, 0) if live else ():  # answered: read it before sending more (no reset)
                self.answers[s] = read_answer(s, 1.0)
            for s in live:
                if s in self.answers:
                    continue
                try:
                    s.send(SLOW_REQUEST[i:i + 1])
                except OSError as e:
                    self.answers[s] = e
            if self.first_byte is None:
                self.first_byte = time.time()
            time.sleep(1.0)


def streamed_completion(port):
    """(seconds to the first event, whole event stream) of a normal streamed completion from 127.0.0.1."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    start = time.time()
    try:
        conn.request("POST", "/v1/completions", json.dumps({"prompt": "hello", "max_tokens": 8, "stream": True}),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        first = resp.readline()
        first_at = time.time() - start
        return first_at, resp.status, first + resp.read()
    except (OSError, http.client.HTTPException) as e:
        return time.time() - start, None, repr(e).encode()
    finally:
        conn.close()


def run_checks(checkpoint, session_dir):
    raise_fd_limit(2 * (IDLE + SLOW + PER_CLIENT + TOTAL) + 64)
    proc, base = start_server(checkpoint, "--session-dir", session_dir)
    port = int(base.rsplit(":", 1)[1])
    socks = []
    try:
        opened = time.time()
        idle = open_many(IDLE, 2, port, per_address=30)
        slow = open_many(SLOW, 12, port, per_address=32)
        socks += idle + slow
        senders = SlowSenders(slow, HEADER_TIMEOUT + 4)
        senders.start()
        time.sleep(2.5)

        first_at, status, events = streamed_completion(port)
        check(status == 200 and first_at < 2.0, "a streamed completion starts within 2 s beside 300 silent and 64 "
              "slow-header connections", f"status {status}, first event after {first_at:.2f} s")
        check(events.rstrip().endswith(b"data: [DONE]"), "and it completes", events[-120:])
        time.sleep(0.3)  # the server sees that connection close

        # One address over its cap: the first 64 are kept, the 65th is answered 503 with Retry-After.
        mine = open_many(PER_CLIENT + 1, 50, port, per_address=PER_CLIENT + 1)
        socks += mine
        over = read_answer(mine[-1])
        check(over is not None and over.startswith(b"HTTP/1.1 503") and b"Retry-After:" in over
              and b"too_many_connections" in over, "connection 65 from one address: 503 with Retry-After",
              (over or b"nothing")[:200])
        kept = readable(mine[:-1], 0.5)
        check(not kept, "the first 64 from that address stay open", f"{len(kept)} answered")

        # The total cap: 300 + 64 + 64 are open; 84 more fit, the next one is refused.
        fill = open_many(TOTAL - IDLE - SLOW - PER_CLIENT + 1, 60, port)
        socks += fill
        last = read_answer(fill[-1])
        check(last is not None and last.startswith(b"HTTP/1.1 503") and b"Retry-After:" in last,
              f"connection {TOTAL + 1} in all: 503 with Retry-After", (last or b"nothing")[:200])
        early = readable(fill[:-1], 0.5)
        check(not early, f"the connections up to {TOTAL} stay open", f"{len(early)} answered")
        for s in mine + fill:
            s.close()

        # The slow senders: 408 once the header deadline has passed; no answer comes before it.
        senders.join()
        late = [s for s in slow if s not in senders.answers]
        for s in late:
            senders.answers[s] = read_answer(s, 3.0)
        timed_out = sum(1 for a in senders.answers.values() if isinstance(a, bytes) and a.startswith(b"HTTP/1.1 408"))
        check(timed_out == SLOW, f"all {SLOW} slow-header connections answered 408 after --header-timeout",
              f"{timed_out} got 408; e.g. {next(iter(senders.answers.values()), None)!r:.160}")

        # The silent ones: closed without an answer after the idle timeout.
        time.sleep(max(0.0, opened + IDLE_TIMEOUT + 2 - time.time()))
        closed = sum(1 for s in idle if read_answer(s, 0.2) == b"")
        check(closed == IDLE, f"all {IDLE} silent connections closed after --idle-timeout", f"{closed} closed")

        # And the server still serves.
        first_at, status, events = streamed_completion(port)
        check(status == 200 and events.rstrip().endswith(b"data: [DONE]"), "served normally afterwards",
              f"status {status}")
    finally:
        for s in socks:
            s.close()
        proc.terminate()
        proc.wait(timeout=60)


def main():
    with_byte_model("sinklm-serve-connections-", lambda work, checkpoint: run_checks(checkpoint, os.path.join(work, "sessions")))


if __name__ == "__main__":
    main()
