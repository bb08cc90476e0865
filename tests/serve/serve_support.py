"""Shared by the Python tests of `sinklm serve`: starting a server on a free loopback port, and a tiny random
byte-vocabulary model to serve. Checks and the exit code come from tests/support/sinklm_test.py."""
import os
import subprocess
import sys

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
