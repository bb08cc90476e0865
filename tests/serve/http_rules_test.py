#!/usr/bin/env python3
"""HTTP as a client or a proxy relies on it (RFC 9110/9112), over raw loopback sockets:
  - the auth scheme is case-insensitive ("bearer", "BEARER", more than one space before the key);
  - whitespace between a header's name and its colon, a folded header line, and a NUL or another control
    character inside a field value are answered 400 (RFC 9112 5.1 MUST; a tab stays allowed);
  - 150 concurrent completions from one address each get a status: 200, or 429/503 with Retry-After; no
    connection is reset before its answer arrives, not even those over --max-connections-per-client;
  - with the session directory on a full file system (an 8 MB tmpfs) a new session is answered 507
    storage_full with a message holding no path; the path goes to the server's log and
    sinklm_storage_errors_total counts it; once space is freed, sessions are created again.
Exit 77 (skipped) for the full-disk part only where a tmpfs cannot be mounted (not root)."""
import errno
import json
import os
import socket
import subprocess
import threading

from serve_support import start_server, with_byte_model
from sinklm_test import check, skip

KEY = "sk-rules-test"
CONCURRENT = 150


def raw(port, request, timeout=30):
    """(status, headers {lower-case name: value}, body bytes) of one raw request; status None when the
    connection was reset or closed before an answer, with the reason in body."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    data = b""
    try:
        s.sendall(request)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            if b"content-length:" in head.lower():
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                if len(body) >= length:
                    break
    except OSError as e:
        if not data:
            return None, {}, repr(e).encode()
    finally:
        s.close()
    if not data.startswith(b"HTTP/1.1 "):
        return None, {}, b"no answer: " + data[:100]
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def get(path, *header_lines):
    return (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n".encode()
            + b"".join(h + b"\r\n" for h in header_lines) + b"\r\n")


def post(path, body, *header_lines):
    payload = json.dumps(body).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n".encode() + b"".join(h + b"\r\n" for h in header_lines)
            + b"\r\n" + payload)


def auth(key=KEY, scheme="Bearer", gap=" "):
    return f"Authorization: {scheme}{gap}{key}".encode()


def header_rules(port):
    for scheme, gap in [("Bearer", " "), ("bearer", " "), ("BEARER", " "), ("bEaReR", "   ")]:
        status, _, _ = raw(port, get("/v1/models", auth(scheme=scheme, gap=gap)))
        check(status == 200, f"the auth scheme is case-insensitive: {scheme!r} with {len(gap)} space(s) gets 200 ({status})")
    status, _, _ = raw(port, get("/v1/models", auth(key="wrong")))
    check(status == 401, f"... and a wrong key still gets 401 ({status})")
    status, _, _ = raw(port, get("/v1/models", auth(scheme="Basic")))
    check(status == 401, f"... and another scheme gets 401 ({status})")
    bad = {
        "whitespace between a header name and its colon": b"Authorization : Bearer " + KEY.encode(),
        "a tab before the colon": b"X-Note\t: one",
        "a folded header line (obs-fold)": b"X-Note: one\r\n two",
        "a NUL inside a field value": b"X-Note: a\x00b",
        "a control character inside a field value": b"X-Note: a\x01b",
        "DEL inside a field value": b"X-Note: a\x7fb",
    }
    for what, line in bad.items():
        status, _, body = raw(port, get("/v1/models", auth(), line))
        check(status == 400 and b"bad_header" in body, f"{what}: 400 ({status} {body[:120]!r})")
    status, _, _ = raw(port, get("/v1/models", auth(), b"X-Note: a\tb"))
    check(status == 200, f"a tab inside a field value is allowed: 200 ({status})")


def concurrent_completions(port):
    request = post("/v1/completions", {"prompt": "hello", "max_tokens": 64, "temperature": 0}, auth())
    answers = [None] * CONCURRENT
    start = threading.Barrier(CONCURRENT)

    def one(i):
        start.wait()
        answers[i] = raw(port, request, timeout=120)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(CONCURRENT)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = {}
    for status, _, _ in answers:
        statuses[status] = statuses.get(status, 0) + 1
    resets = [body[:80] for status, _, body in answers if status is None]
    check(not resets, f"{CONCURRENT} concurrent completions from one address: every one got an answer, none a reset "
                      f"(statuses {statuses}; first resets {resets[:3]})")
    check(set(statuses) <= {200, 429, 503} and statuses.get(200, 0) > 0 and len(statuses) > 1,
          f"... each 200, or 429/503 (statuses {statuses})")
    missing = [status for status, headers, _ in answers if status in (429, 503) and "retry-after" not in headers]
    check(not missing, f"... and every 429 and 503 carries Retry-After ({len(missing)} without)")


def fill(directory):
    """Writes a file into `directory` until its file system is full; returns its path."""
    path = os.path.join(directory, "filler")
    try:
        with open(path, "wb", buffering=0) as f:
            while True:
                f.write(b"\0" * 4096)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
    return path


def full_disk(work, checkpoint):
    mount = os.path.join(work, "small-fs")
    os.makedirs(mount)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mount]).returncode != 0:
        skip("the full-disk check mounts an 8 MB tmpfs, which needs root")
    try:
        log = os.path.join(work, "server.log")
        with open(log, "w") as err:
            proc, base = start_server(checkpoint, "--api-key", KEY, "--session-dir", os.path.join(mount, "sessions"),
                                      stderr=err)
        port = int(base.rsplit(":", 1)[1])
        try:
            status, _, _ = raw(port, post("/v1/sessions", {}, auth()))
            check(status == 200, f"a session on the small file system ({status})")
            filler = fill(mount)
            status, headers, body = raw(port, post("/v1/sessions", {}, auth()))
            error = json.loads(body).get("error", {}) if body.startswith(b"{") else {}
            check(status == 507 and error.get("code") == "storage_full" and "/" not in error.get("message", "/"),
                  f"a full disk: 507 storage_full, the message naming no path ({status} {body[:200]!r})")
            status, _, metrics = raw(port, get("/metrics"))
            counted = [line for line in metrics.decode().splitlines() if line.startswith("sinklm_storage_errors_total")]
            check(counted and float(counted[0].split()[-1]) >= 1, f"/metrics counts it: {counted}")
            if os.path.exists(filler):
                os.remove(filler)
            status, _, _ = raw(port, post("/v1/sessions", {}, auth()))
            check(status == 200, f"space freed: a new session again ({status})")
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        with open(log) as f:
            logged = f.read()
        check("storage" in logged and mount in logged, "the server's log names the file that could not be written",
              logged[-400:])
    finally:
        subprocess.run(["umount", "-l", mount])


def main(work, checkpoint):
    proc, base = start_server(checkpoint, "--api-key", KEY, "--max-concurrent", "8", "--session-dir",
                              os.path.join(work, "sessions"))
    try:
        port = int(base.rsplit(":", 1)[1])
        header_rules(port)
        concurrent_completions(port)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    full_disk(work, checkpoint)


if __name__ == "__main__":
    with_byte_model("sinklm-http-rules-", main)
