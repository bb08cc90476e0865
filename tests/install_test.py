#!/usr/bin/env python3
"""`cmake --install` gives a binary that runs without the repository (label e2e).

Installs the build into a temporary prefix P, then runs P/bin/sinklm with the repository's .venv out of the
way: hidden under an empty directory in a private mount namespace (unshare), so that tests running beside
this one keep theirs. From P: `info`, a short `stream`, `eval` on an embedded official benchmark, and
`serve` answering a completion and its chat page. `ldd` of the installed binary names no library inside the
source tree. Usage: install_test.py BUILD_DIR. Exit 77 (skipped) where no mount namespace can be made.
"""
import json
import os
import shutil
import subprocess
import sys
import urllib.request

from sinklm_test import BIN, check, config, finish, run, skip, source_path, temp_dir

VENV = source_path(".venv")


def namespace_prefix(empty):
    """The command prefix that runs a command with VENV hidden under `empty` (a private mount namespace)."""
    hide = f'mount --bind "{empty}" "{VENV}" && exec "$@"'
    for unshare in (["unshare", "-m"], ["unshare", "-Urm"]):  # as root; else in a user namespace
        probe = subprocess.run(unshare + ["sh", "-c", hide, "sh", "ls", VENV], capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == "":
            return unshare + ["sh", "-c", hide, "sh"]
    return None


def main():
    build = sys.argv[1]
    if not os.path.isdir(VENV):
        skip(f"no {VENV} to hide (scripts/setup.sh makes it)")
    with temp_dir("sinklm-install-") as work:
        empty = os.path.join(work, "empty")
        os.makedirs(empty)
        hidden = namespace_prefix(empty)
        if hidden is None:
            skip("cannot make a mount namespace (unshare -m, unshare -Urm) to hide .venv")
        prefix = os.path.join(work, "prefix")
        run(["cmake", "--install", build, "--prefix", prefix])
        installed = os.path.join(prefix, "bin", "sinklm")
        libraries = subprocess.run(["ldd", installed], capture_output=True, text=True).stdout
        inside = [line.strip() for line in libraries.splitlines() if source_path() in line or "not found" in line]
        check(not inside, "ldd of the installed binary: every library resolves, none inside the source tree",
              "\n".join(inside[:5]))

        checkpoint = os.path.join(work, "tiny-bytes")
        run([BIN, "init", "--config", config("tiny-sink.yaml"), "--out", checkpoint, "--set", "model.vocab_size=264",
             "--set", "model.tokenizer_vocab_size=256", "--set", "model.eos_token_id=255"])
        text = os.path.join(work, "text.txt")
        with open(text, "w") as f:
            f.write("The installed binary streams this text through its cache. " * 20)
        env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}
        env["PATH"] = "/usr/bin:/bin"

        def from_prefix(*args, **kwargs):
            return run(hidden + [installed, *args], expect=None, env=env, timeout=300, **kwargs)

        info = from_prefix("info", checkpoint, "--json")
        check(info.returncode == 0 and json.loads(info.stdout or "{}").get("source") == checkpoint,
              "with .venv hidden, the installed binary runs `info`", info.stderr[-300:])
        streamed = from_prefix("stream", "--checkpoint", checkpoint, "--text", text, "--window", "64")
        check(streamed.returncode == 0 and "sink_window" in streamed.stdout + streamed.stderr,
              "... `stream` through a sink+window cache", streamed.stderr[-300:])
        scored = from_prefix("eval", "--checkpoint", checkpoint, "--tasks", "arc_easy", "--limit", "4")
        check(scored.returncode == 0 and "arc_easy" in scored.stdout,
              "... `eval` on a benchmark embedded in the binary", scored.stderr[-300:])

        proc = subprocess.Popen(hidden + [installed, "serve", "--checkpoint", checkpoint, "--port", "0", "--window", "64"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            line = proc.stdout.readline()
            check("listening on http://" in line, f"... `serve` starts: {line.strip()!r}")
            base = line.split("listening on ")[1].split()[0] if "listening on http://" in line else "http://127.0.0.1:9"
            body = json.dumps({"prompt": "hello", "max_tokens": 4, "temperature": 0}).encode()
            request = urllib.request.Request(base + "/v1/completions", body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=60) as r:
                answer = json.loads(r.read())
            check(answer["usage"]["completion_tokens"] == 4, f"... and answers a completion: {answer['choices'][0]}")
            with urllib.request.urlopen(base + "/", timeout=60) as r:
                page = r.read().decode()
            check("<html" in page.lower(), "... and serves its chat page from inside the binary")
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    finish()


if __name__ == "__main__":
    main()
