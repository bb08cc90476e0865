"""What every Python test of sinklm shares: one check(), its count and the exit code, the standard environment,
scratch directories, running the binary, and skipping.

ctest (tests/CMakeLists.txt, SINKLM_TEST_ENV) runs each test with
  SINKLM_BIN          the `sinklm` binary of the build;
  SINKLM_SOURCE_DIR   the source tree (configs/, tests/eval/fixtures, ...);
  PYTHON              the Python interpreter the build was configured with (the project's venv);
  PYTHONPATH          tests/support, so that `import sinklm_test` (and `import gpt2_reference`) work.
By hand, from the repository root:
  PYTHONPATH=tests/support SINKLM_BIN=build/sinklm .venv/bin/python tests/model/hf_roundtrip.py
(without SINKLM_BIN the binary is build/sinklm of the source tree, and the source tree is the one this file is in).

A test calls check(ok, what, detail) for each thing it asserts and ends with finish(), which prints the count
and exits 1 when any check failed or none was made, 0 otherwise. Exit code 77 means "skipped" to ctest (SKIP_RETURN_CODE):
skip(reason) prints why and exits with it. A test that imports this module and ends any other way (a
forgotten finish() or `if __name__ == "__main__"`, an early sys.exit) exits 1, saying so: it cannot pass by
asserting nothing.
"""
import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile

SKIPPED = 77  # ctest's SKIP_RETURN_CODE of every script test

SOURCE = os.environ.get("SINKLM_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("SINKLM_BIN") or os.path.join(SOURCE, "build", "sinklm")
PYTHON = os.environ.get("PYTHON") or sys.executable

_passed, _failed = [], []
_ended = False  # by finish() or skip()


def check(ok, what, detail="", quiet=False):
    """Records one assertion and prints `PASS what: detail` or `FAIL what: detail`; returns ok as a bool.

    quiet: print only a failure (for checks made thousands of times, e.g. once per document)."""
    ok = bool(ok)
    (_passed if ok else _failed).append(what)
    if not ok or not quiet:
        print(("PASS " if ok else "FAIL ") + what + (f": {detail}" if detail not in ("", None) else ""), flush=True)
    return ok


def failures():
    """The `what` of every failed check so far."""
    return list(_failed)


def finish():
    """Prints `N passed, M failed` (the failed ones named) and exits 1 if any check failed or none was made,
    else 0: a test that checked nothing has shown nothing."""
    global _ended
    print(f"{len(_passed)} passed, {len(_failed)} failed", flush=True)
    if not _passed and not _failed:
        _failed.append("the test made no check (a test that checks nothing cannot pass)")
    for what in _failed[:30]:
        print(f"  failed: {what}")
    if len(_failed) > 30:
        print(f"  ... and {len(_failed) - 30} more")
    _ended = True
    sys.exit(1 if _failed else 0)


def skip(reason):
    """Ends the test as skipped (exit 77), saying why."""
    global _ended
    print(f"SKIPPED: {reason}", flush=True)
    _ended = True
    sys.exit(SKIPPED)


@atexit.register
def _ended_without_finish():
    if _ended:
        return
    sys.stdout.flush()
    print(f"sinklm_test: the test ended without finish() or skip() ({len(_passed)} passed, {len(_failed)} failed "
          f"checks so far): failing it", file=sys.stderr, flush=True)
    os._exit(1)


def source_path(*parts):
    """A path in the source tree, e.g. source_path("configs", "tiny.yaml")."""
    return os.path.join(SOURCE, *parts)


def config(name):
    """configs/<name> of the source tree."""
    return source_path("configs", name)


@contextlib.contextmanager
def temp_dir(prefix="sinklm-test-"):
    """A scratch directory, removed afterwards (kept, and its path printed, when SINKLM_KEEP_TEST_DIRS is set)."""
    path = tempfile.mkdtemp(prefix=prefix)
    try:
        yield path
    finally:
        if os.environ.get("SINKLM_KEEP_TEST_DIRS"):
            print(f"kept {path} (SINKLM_KEEP_TEST_DIRS)", flush=True)
        else:
            shutil.rmtree(path, ignore_errors=True)


class CommandFailed(RuntimeError):
    """A command exited with another status than the test expected; its message names the command, the
    status and the end of its output."""


def _tail(output, limit=3000):
    if output is None:
        return ""
    if isinstance(output, bytes):
        output = output.decode("utf-8", errors="replace")
    return output if len(output) <= limit else "..." + output[-limit:]


def run(cmd, expect=0, stdin=None, text=True, env=None, timeout=None, capture=True):
    """Runs cmd (a list) and returns its subprocess.CompletedProcess (stdout and stderr captured unless
    capture=False; str with text=True, else bytes). Raises CommandFailed when expect is not None and the
    exit status differs from it."""
    output = subprocess.PIPE if capture else None
    p = subprocess.run(cmd, input=stdin, stdout=output, stderr=output, text=text, env=env, timeout=timeout)
    if expect is not None and p.returncode != expect:
        raise CommandFailed(f"`{' '.join(map(str, cmd))}` exited {p.returncode} (expected {expect})\n"
                            f"--- stderr:\n{_tail(p.stderr)}\n--- stdout:\n{_tail(p.stdout)}")
    return p


def run_sinklm(*args, **kwargs):
    """run([BIN, *args], ...): one `sinklm` subcommand, e.g. run_sinklm("info", checkpoint).stdout."""
    return run([BIN, *map(str, args)], **kwargs)
