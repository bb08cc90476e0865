"""Shared by the Python tests of `sinklm serve`: starting a server on a free loopback port, and a tiny random
byte-vocabulary model to serve. Checks and the exit code come from tests/support/sinklm_test.py."""
import http.client
import json
import os
import subprocess
import sys
import threading

from sinklm_test import BIN, config, finish, run_sinklm, temp_dir


def start_server(checkpoint, *flags, env=None, stderr=None, port=0):
    """Starts `sinklm serve --checkpoint CHECKPOINT --port PORT FLAGS...` (0: a free port) and waits for its
    `listening on` line; returns (process, base URL). stderr: None (the test's own), subprocess.PIPE (read by
    the test) or a file. Exits the test naming the problem when the server does not start."""
    proc = subprocess.Popen([BIN, "serve", "--checkpoint", checkpoint, "--port", str(port), *flags],
                            stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
    line = proc.stdout.readline()
    if "listening on http://" not in line:
        proc.kill()
        sys.exit(f"server did not start: {line!r} {proc.stderr.read() if stderr == subprocess.PIPE else ''}")
    return proc, line.split("listening on ")[1].split()[0]


# Greedy decoding of the byte model below runs to max_tokens (its end-of-text byte is never the argmax):
# 4096 tokens take seconds on a CPU, a request that holds its worker meanwhile.
LONG_COMPLETION = {"prompt": "hello", "max_tokens": 4096, "temperature": 0, "stream": True}


def http_request(port, method, path, body=None):
    """(status, headers, body); (None, {}, the error) when the server cannot be reached."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    except (OSError, http.client.HTTPException) as e:
        return None, {}, repr(e).encode()
    finally:
        conn.close()


class StreamedCompletion(threading.Thread):
    """A streamed completion read to its end; `started` is set at its first event."""

    def __init__(self, port, body):
        super().__init__(daemon=True)
        self.port, self.body, self.started, self.events, self.error = port, body, threading.Event(), [], None

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request("POST", "/v1/completions", json.dumps(self.body), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            while True:
                line = resp.readline()
                if not line:
                    break
                if line.startswith(b"data: "):
                    self.events.append(line[6:].strip())
                    self.started.set()
        except (OSError, http.client.HTTPException) as e:
            self.error = e
        finally:
            self.started.set()
            conn.close()

    def last_chunk(self):
        chunks = [json.loads(e) for e in self.events if e != b"[DONE]"]
        return chunks[-1] if chunks else {}


def with_byte_model(prefix, body):
    """Runs body(work_dir, checkpoint) on a tiny model with a byte vocabulary (256 ids) plus one learnable
    sink token, in a scratch directory removed afterwards; then finish(): the count, exit 1 on a failed check."""
    with temp_dir(prefix) as work:
        checkpoint = os.path.join(work, "tiny-bytes")
        run_sinklm("init", "--config", config("tiny-sink.yaml"), "--out", checkpoint,
                   "--set", "model.vocab_size=264", "--set", "model.tokenizer_vocab_size=256",
                   "--set", "model.eos_token_id=255")
        body(work, checkpoint)
    finish()
