"""Shared by the Python tests of `sinklm serve`: check() bookkeeping and a tiny random byte-vocabulary model."""
import os
import shutil
import subprocess
import sys
import tempfile

BIN = os.environ["SINKLM_BIN"]
SOURCE = os.environ["SINKLM_SOURCE_DIR"]
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what)


def with_byte_model(prefix, what, body):
    """Runs body(work_dir, checkpoint) on a tiny model with a byte vocabulary (256 ids) plus one learnable
    sink token, in a scratch directory removed afterwards; exits 1 listing the failed checks."""
    work = tempfile.mkdtemp(prefix=prefix)
    checkpoint = os.path.join(work, "tiny-bytes")
    subprocess.run([BIN, "init", "--config", os.path.join(SOURCE, "configs/tiny-sink.yaml"), "--out", checkpoint,
                    "--set", "model.vocab_size=264", "--set", "model.tokenizer_vocab_size=256",
                    "--set", "model.eos_token_id=255"], check=True, stdout=subprocess.DEVNULL)
    try:
        body(work, checkpoint)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        sys.exit(f"{len(failures)} check(s) failed: {failures}")
    print(f"all {what} checks passed")
