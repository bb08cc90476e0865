"""A client that vanishes frees what it held: four streamed completions whose clients close their sockets after
the first event; within 5 s /metrics shows no active stream and no K/V entries held, and the server still
answers a new request. (Without sessions a stream's K/V lives only as long as the stream.)"""
import json
import socket
import time

from serve_support import LONG_COMPLETION, http_request, start_server, with_byte_model
from sinklm_test import check


def metric(port, name):
    _, _, body = http_request(port, "GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.split()[-1])
    return None


def open_and_vanish(port):
    """Starts a long streamed completion on a raw socket, reads up to its first event, then closes."""
    body = json.dumps(LONG_COMPLETION).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    seen = b""
    while b"data: " not in seen:
        chunk = s.recv(4096)
        if not chunk:
            break
        seen += chunk
    s.close()
    return b"data: " in seen


def main():
    def body(work, checkpoint):
        proc, base = start_server(checkpoint, "--session-dir", f"{work}/sessions")
        port = int(base.rsplit(":", 1)[1])
        try:
            started = [open_and_vanish(port) for _ in range(4)]
            check(all(started), "four streamed completions started", f"{started}")
            deadline, active, kv = time.time() + 5, None, None
            while time.time() < deadline:
                active, kv = metric(port, "sinklm_active_streams"), metric(port, "sinklm_kv_entries")
                if active == 0 and kv == 0:
                    break
                time.sleep(0.1)
            check(active == 0 and kv == 0, "clients that vanish free their streams and K/V within 5 s",
                  f"sinklm_active_streams {active}, sinklm_kv_entries {kv}")
            status, _, _ = http_request(port, "POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2})
            check(status == 200, "the server still answers", f"{status}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)

    with_byte_model("sinklm-serve-disconnect-", body)


if __name__ == "__main__":
    main()
