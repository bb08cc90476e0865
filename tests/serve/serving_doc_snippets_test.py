#!/usr/bin/env python3
"""The `openai` client snippets of docs/serving.md ("Calling it from the `openai` client"), run verbatim.

Each ```python block of that section runs as its own script against a real `sinklm serve` on a free loopback
port (the tiny byte model of serve_support.py); the one change made to a snippet is the server's address,
"127.0.0.1:8000" in the doc. Each must exit 0 and print what it says it prints; the server must answer every
request 2xx and warn about no field; the section must cover a completion, a chat, a streamed chat, a session
and log-probs. The section's claims about the client are checked beside them: the client needs an api_key
when the server has none, `model` is ignored, `max_tokens` defaults to 16 for chat as for completions.
Exit 77 (skipped) only when the `openai` package is missing; any other problem fails."""
import os
import re
import subprocess

import serve_support
from serve_support import with_byte_model
from sinklm_test import PYTHON, check, finish, skip, source_path

try:
    import openai
except ImportError:
    skip("the openai package is not installed (scripts/setup.sh installs it)")

DOC = source_path("docs", "serving.md")
SECTION = "### Calling it from the `openai` client"
DOC_ADDRESS = "127.0.0.1:8000"  # the server the snippets call; replaced by the test server's address
MODEL_NAME = "tiny-bytes"        # the served model's id: the checkpoint directory's name


def snippets():
    """The ```python blocks of the section, in order (the section ends at the next heading of its level or above)."""
    text = open(DOC, encoding="utf-8").read()
    start = text.find("\n" + SECTION + "\n")
    if start < 0:
        return None
    body = text[start + len(SECTION) + 2:]
    end = re.search(r"^#{1,3} ", body, re.MULTILINE)
    body = body[:end.start()] if end else body
    return re.findall(r"^```python\n(.*?)^```$", body, re.MULTILINE | re.DOTALL)


def kind_of(code):
    """What a snippet shows, from its calls."""
    if '"session"' in code or "X-Session-Id" in code:
        return "session"
    if "logprobs=" in code:
        return "logprobs"
    if "chat.completions.create(" in code:
        return "streamed chat" if "stream=True" in code else "chat"
    if "completions.create(" in code:
        return "completion"
    return "other"


def printed_what_it_says(kind, out):
    """(ok, detail): the snippet's output looks like what its kind prints, whatever the random model says."""
    lines = out.rstrip("\n").split("\n")
    if kind == "completion":
        return re.fullmatch(r"(length|stop) \d+ tokens", lines[-1]) is not None, "last line: finish_reason, N tokens"
    if kind == "chat":
        return out.endswith("\n"), "the reply, one print"
    if kind == "streamed chat":
        usage = [l for l in lines if re.fullmatch(r"\[\d+ tokens\]", l)]
        return usage == lines[-1:] and 0 < int(usage[0][1:].split()[0]) <= 64, "the streamed text, then [N tokens] once"
    if kind == "session":
        return ("'session': 'sess_" in out and "'stream_length': " in out and "'kv_entries': " in out
                and "User: My name is Ada." in out and "User: What is my name?" in out), \
            "the stream object of the second turn, and the session's text holding both turns"
    if kind == "logprobs":
        scored = [l for l in lines if l.startswith("log-prob of the text: ")]
        number = r" -?\d+(\.\d+)?(e-?\d+)? "
        completion_rows = [l for l in lines if re.search(number + r"\{.*\}$", l)]
        chat_rows = [l for l in lines if re.search(number + r"\[.*\]$", l)]
        return (len(scored) == 1 and float(scored[0].split(": ")[1]) < 0 and completion_rows and chat_rows), \
            "tokens with their log-probs and alternatives (completion and chat), the text's log-prob < 0"
    return bool(out.strip()), "some output"


def printable(text):
    """text with control characters (the random model's bytes) escaped, so the test's log stays readable."""
    return "".join(ch if ch == "\n" or ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def snippet_env():
    """The environment a user's shell would give: no OpenAI settings that could stand in for the snippet's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def run_snippets(blocks, address, work):
    kinds = []
    for i, code in enumerate(blocks, 1):
        kind = kind_of(code)
        kinds.append(kind)
        name = f"snippet {i} ({kind})"
        if not check(code.count(DOC_ADDRESS) >= 1, f"{name} calls the documented server {DOC_ADDRESS}"):
            continue
        path = os.path.join(work, f"snippet_{i}.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(code.replace(DOC_ADDRESS, address))
        try:
            p = subprocess.run([PYTHON, path], capture_output=True, text=True, encoding="utf-8", errors="replace",
                               env=snippet_env(), cwd=work, timeout=180)
        except subprocess.TimeoutExpired:
            check(False, f"{name} finishes", "still running after 180 s")
            continue
        ok = p.returncode == 0 and "Traceback" not in p.stderr
        if not check(ok, f"{name} runs without an exception", "exit 0" if ok else
                     f"exit {p.returncode}\n--- stderr:\n{p.stderr[-3000:]}\n--- stdout:\n{p.stdout[-1000:]}"):
            continue
        print(f"--- {name} printed:\n{printable(p.stdout.rstrip())}\n---", flush=True)
        ok, what = printed_what_it_says(kind, p.stdout)
        check(ok, f"{name} printed {what}")
    for needed in ["completion", "chat", "streamed chat", "session", "logprobs"]:
        check(needed in kinds, f"the section has a snippet of: {needed}", f"found {kinds}")


def claims_hold(base):
    """What the section says about the client and the server's defaults."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("OPENAI_")}
    try:
        openai.OpenAI(base_url=base + "/v1")
        check(False, "the client refuses to start without an api_key")
    except openai.OpenAIError as e:
        check(True, "the client refuses to start without an api_key", str(e)[:80])
    finally:
        os.environ.update(saved)

    client = openai.OpenAI(base_url=base + "/v1", api_key="any string", max_retries=0, timeout=60)
    raw = client.completions.with_raw_response.create(model="no-such-model", prompt="x", max_tokens=2)
    c = raw.parse()
    check(c.model == MODEL_NAME and "X-Sinklm-Warnings" not in raw.headers,
          "any model name works and is ignored: the response names the served model, without a warning",
          f"model {c.model!r}, warnings {raw.headers.get('X-Sinklm-Warnings')}")
    check([m.id for m in client.models.list().data] == [MODEL_NAME], "models.list() names the served model")

    def default_max_tokens(create):
        counts = []
        for seed in range(12):  # until one runs to its limit (the random model may stop earlier)
            r = create(seed)
            counts.append((r.choices[0].finish_reason, r.usage.completion_tokens))
            if r.choices[0].finish_reason == "length":
                break
        return counts

    chat = default_max_tokens(lambda seed: client.chat.completions.create(
        model="x", messages=[{"role": "user", "content": "Hello"}], seed=seed))
    check(chat[-1] == ("length", 16) and all(n <= 16 for _, n in chat),
          "chat without max_tokens generates at most 16 tokens", f"(finish_reason, tokens): {chat}")
    plain = default_max_tokens(lambda seed: client.completions.create(model="x", prompt="Hello", seed=seed))
    check(plain[-1] == ("length", 16) and all(n <= 16 for _, n in plain),
          "a completion without max_tokens generates at most 16 tokens", f"(finish_reason, tokens): {plain}")
    raw = client.chat.completions.with_raw_response.create(model="x", messages=[{"role": "user", "content": "Hello"}],
                                                           max_completion_tokens=3, temperature=0)
    alias = raw.parse()
    check(alias.usage.completion_tokens <= 3 and "X-Sinklm-Warnings" not in raw.headers,
          "chat's max_completion_tokens is max_tokens", f"{alias.usage.completion_tokens} tokens")


def server_saw_no_trouble(base, log_path):
    """Every response 2xx (no snippet relied on an error), and no field of a snippet ignored with a warning."""
    port = int(base.rsplit(":", 1)[1])
    status, _, body = serve_support.http_request(port, "GET", "/metrics")
    responses = [l for l in body.decode().splitlines() if l.startswith("sinklm_http_responses_total")]
    bad = [l for l in responses if not re.search(r'status="2\d\d"', l)]
    check(status == 200 and responses and not bad, "the server answered every request 2xx", f"{bad or responses[:3]}")
    with open(log_path, encoding="utf-8", errors="replace") as f:
        warnings = [l.strip() for l in f if "unsupported field" in l]
    check(not warnings, "the server ignored no request field", f"{warnings[:5]}")


def main():
    blocks = snippets()
    if not check(blocks, f"docs/serving.md has the section {SECTION!r} with python blocks", f"{DOC}"):
        finish()

    def body(work, checkpoint):
        log_path = os.path.join(work, "server.log")
        with open(log_path, "w") as log:
            proc, base = serve_support.start_server(checkpoint, "--window", "64", "--threads", "1",
                                                    "--session-dir", os.path.join(work, "sessions"), stderr=log)
        try:
            run_snippets(blocks, base.split("://", 1)[1], work)
            claims_hold(base)
            server_saw_no_trouble(base, log_path)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()

    with_byte_model("sinklm-doc-snippets-", body)


if __name__ == "__main__":
    main()
