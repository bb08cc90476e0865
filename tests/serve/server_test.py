#!/usr/bin/env python3
"""`sinklm serve` over real HTTP on loopback, driven by the official `openai` client and by curl.

Completions and chat (plain and streaming), /v1/models and its model card, /health, /metrics, OpenAI-style 4xx
errors, sessions that keep their stream across requests (with their K/V entries, live in every streamed chunk),
LRU eviction to disk and restore, survival across a restart, 16 concurrent streaming sessions, and the chat
page's HTTP side: its files, their headers (CSP, nosniff) and --no-ui (the browser side: chat_page_test.py).
Exit 77 (skipped) when the `openai` package is missing."""
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

import serve_support
from serve_support import with_byte_model
from sinklm_test import check, skip

try:
    import openai
except ImportError:
    skip("the openai package is not installed (scripts/setup.sh installs it)")

KEY = "test-key"
WINDOW = 48


def start_server(checkpoint, sessions, extra=()):
    return serve_support.start_server(
        checkpoint, "--window", str(WINDOW), "--api-key", KEY, "--session-dir", sessions, "--sessions-in-memory", "2",
        "--max-sessions", "20", "--max-body-bytes", "4096", "--max-tokens-limit", "64", "--max-prompt-tokens", "1000",
        "--threads", "1", "--model-name", "tiny-bytes", *extra)


UNSEEDED = dict(model="tiny-bytes", prompt="Hi", max_tokens=24, temperature=1.0)
STATE = {"sinklm": {"stream_state": True}}  # asks for sinklm's extension object in each response


def unseeded_sample(client):
    """(text, seed) of a sampled completion that names no seed; the seed from the X-Sinklm-Seed header."""
    raw = client.completions.with_raw_response.create(**UNSEEDED)
    return raw.parse().choices[0].text, int(raw.headers["X-Sinklm-Seed"])


def stop_server(proc):
    proc.send_signal(signal.SIGTERM)
    check(proc.wait(timeout=30) == 0, "server exits 0 on SIGTERM")


def curl(base, *args):
    out = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", *args], capture_output=True, text=True, timeout=60).stdout
    body, _, code = out.rpartition("\n")
    return int(code), body


def fetch(url):
    """(status, headers, body) of a GET without any key, as a browser first loads the page."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def chat_page_is_served(base):
    """GET / and its files: no key needed (they hold no data), the right types, a CSP that allows only this
    origin and no inline script or style, nosniff; the HTML has no inline script, style or handler."""
    code, headers, html = fetch(base + "/")
    csp = headers.get("Content-Security-Policy", "")
    rules = dict((r.split(" ", 1) + [""])[:2] for r in (r.strip() for r in csp.split(";")) if r)
    check(code == 200 and headers.get_content_type() == "text/html" and headers.get("X-Content-Type-Options") == "nosniff",
          "GET /: the chat page, text/html, nosniff, without the API key")
    check(rules.get("default-src") == "'none'" and rules.get("script-src") == "'self'" and rules.get("style-src") == "'self'"
          and rules.get("connect-src") == "'self'" and "unsafe" not in csp and rules.get("frame-ancestors") == "'none'",
          f"GET /: Content-Security-Policy allows this origin only, no inline script or style: {csp!r}")
    scripts = re.findall(r"<script\b[^>]*>", html)
    check(scripts and all('src="' in s for s in scripts) and not re.search(r"\s(style|on[a-z]+)=", html)
          and not re.search(r"(src|href)=\"(https?:)?//", html),
          "index.html: no inline script, style attribute or handler, nothing from another origin")
    for path, kind in [("/chat.js", "text/javascript"), ("/chat.css", "text/css"), ("/favicon.svg", "image/svg+xml")]:
        code, headers, _ = fetch(base + path)
        check(code == 200 and headers.get_content_type() == kind and "Content-Security-Policy" in headers,
              f"GET {path}: {kind} with the same headers")
    code, _, body = fetch(base + "/chat.jsx")
    check(code == 404 and error_of(body) is not None, "a path near a page file is still a 404 JSON error")


def error_of(body):
    try:
        return json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return None


def main():
    with_byte_model("sinklm-serve-test-", lambda work, checkpoint: run_checks(checkpoint, os.path.join(work, "sessions")))


# README's list of malformed requests (section "Streaming inference"): each must answer its 4xx with an
# OpenAI-style JSON error (naming the field where there is one), never a 5xx, and the server keeps serving.
# (name, path, extra curl arguments, body, expected status, expected error.param)
MALFORMED = [
    ("not JSON", "/v1/completions", [], "{not json", 400, None),
    ("empty body", "/v1/completions", [], "", 400, None),
    ("JSON that is not an object", "/v1/completions", [], "[1, 2]", 400, None),
    ("invalid UTF-8", "/v1/completions", [], b'{"prompt": "\xff\xfe"}', 400, None),
    ("nested 2000 deep", "/v1/completions", [], "[" * 2000 + "]" * 2000, 400, None),
    ("body over --max-body-bytes", "/v1/completions", [], json.dumps({"prompt": "x" * 5000}), 413, None),
    ("absurd Content-Length", "/v1/completions", ["-H", "Content-Length: 99999999999"], "{}", 413, None),
    ("number out of range", "/v1/completions", [], '{"prompt": "x", "temperature": 1e999}', 400, "temperature"),
    ("NaN", "/v1/completions", [], '{"prompt": "x", "temperature": NaN}', 400, None),
    ("Infinity", "/v1/completions", [], '{"prompt": "x", "top_p": Infinity}', 400, None),
    ("negative overflow", "/v1/completions", [], '{"prompt": "x", "top_p": -1e400}', 400, "top_p"),
    ("integer too large", "/v1/completions", [], '{"prompt": "x", "max_tokens": 1e30}', 400, "max_tokens"),
    ("seed beyond 64 bits", "/v1/completions", [], '{"prompt": "x", "seed": 99999999999999999999}', 400, "seed"),
    ("wrong type", "/v1/completions", [], '{"prompt": "x", "temperature": "hot"}', 400, "temperature"),
    ("prompt of the wrong type", "/v1/completions", [], '{"prompt": 7}', 400, "prompt"),
    ("missing prompt", "/v1/completions", [], '{}', 400, "prompt"),
    ("prompt token id outside the vocabulary", "/v1/completions", [], '{"prompt": [1, 999999]}', 400, "prompt"),
    ("prompt over --max-prompt-tokens", "/v1/completions", [], json.dumps({"prompt": "ab" * 1500}), 400, None),
    ("max_tokens over the limit", "/v1/completions", [], '{"prompt": "x", "max_tokens": 100000}', 400, "max_tokens"),
    ("max_tokens 0 without echo", "/v1/completions", [], '{"prompt": "x", "max_tokens": 0}', 400, "max_tokens"),
    ("negative max_tokens", "/v1/completions", [], '{"prompt": "x", "max_tokens": -1}', 400, "max_tokens"),
    ("temperature out of range", "/v1/completions", [], '{"prompt": "x", "temperature": 7}', 400, "temperature"),
    ("top_p 0", "/v1/completions", [], '{"prompt": "x", "top_p": 0}', 400, "top_p"),
    ("n 0", "/v1/completions", [], '{"prompt": "x", "n": 0}', 400, "n"),
    ("logprobs over 20", "/v1/completions", [], '{"prompt": "x", "logprobs": 50}', 400, "logprobs"),
    ("too many stop strings", "/v1/completions", [], '{"prompt": "x", "stop": ["a","b","c","d","e"]}', 400, "stop"),
    ("empty stop string", "/v1/completions", [], '{"prompt": "x", "stop": [""]}', 400, "stop"),
    ("stream_options without stream", "/v1/completions", [], '{"prompt": "x", "stream_options": {}}', 400, "stream_options"),
    ("n > 1 on a session", "/v1/completions", [], '{"prompt": "x", "n": 2, "session": "sess_x"}', 400, "n"),
    ("unknown role", "/v1/chat/completions", [], '{"messages": [{"role": "robot", "content": "x"}]}', 400, "messages[0].role"),
    ("unsupported content part", "/v1/chat/completions", [],
     '{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}', 400,
     "messages[0].content[0].type"),
    ("no messages", "/v1/chat/completions", [], '{"messages": []}', 400, "messages"),
    ("top_logprobs without logprobs", "/v1/chat/completions", [],
     '{"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}', 400, "top_logprobs"),
    ("unknown session", "/v1/completions", [], '{"prompt": "x", "session": "sess_nope"}', 404, None),
    ("session id with bad characters", "/v1/completions", ["-H", "X-Session-Id: ../../etc"], '{"prompt": "x"}', 404, None),
    ("unknown route", "/v1/nothing", [], "{}", 404, None),
    ("wrong method", "/v1/models", ["-X", "DELETE"], None, 404, None),
    ("missing API key", "/v1/models", ["NOAUTH"], None, 401, None),
    ("wrong API key", "/v1/models", ["NOAUTH", "-H", "Authorization: Bearer wrong"], None, 401, None),
    ("a prefix of the API key", "/v1/models", ["NOAUTH", "-H", f"Authorization: Bearer {KEY[:-1]}"], None, 401, None),
    ("the API key and more", "/v1/models", ["NOAUTH", "-H", f"Authorization: Bearer {KEY}x"], None, 401, None),
    ("API key without Bearer", "/v1/models", ["NOAUTH", "-H", f"Authorization: {KEY}"], None, 401, None),
    ("API key in X-Api-Key", "/v1/models", ["NOAUTH", "-H", f"X-Api-Key: {KEY}"], None, 401, None),
    ("API key in api-key", "/v1/models", ["NOAUTH", "-H", f"api-key: {KEY}"], None, 401, None),
    ("API key in the query", f"/v1/models?api_key={KEY}", ["NOAUTH"], None, 401, None),
]


def tokenize_routes(base, auth):
    """/tokenize and /detokenize as llama.cpp's server has them, on the byte model (id = byte, sink 256)."""
    def post(path, body):
        code, text = curl(base, *auth, base + path, "-d", json.dumps(body))
        return code, json.loads(text) if text.startswith("{") else text
    code, body = post("/tokenize", {"content": "Héllo"})
    check(code == 200 and body["tokens"] == list("Héllo".encode()), "/tokenize: the tokenizer's ids", str(body))
    code, body = post("/tokenize", {"content": "Hé", "add_special": True, "with_pieces": True})
    pieces = body.get("tokens") if code == 200 else None
    check(pieces and pieces[0]["id"] == 256 and [p["id"] for p in pieces[1:]] == list("Hé".encode())
          and pieces[1]["piece"] == "H" and pieces[2]["piece"].startswith("bytes:"),
          "/tokenize add_special puts the sink first; with_pieces names each token as logprobs do", str(body))
    code, body = post("/detokenize", {"tokens": list("Héllo".encode())})
    check(code == 200 and body["content"] == "Héllo", "/detokenize gives the text back", str(body))
    code, body = post("/detokenize", {"tokens": [72, 256]})
    check(code == 400 and body["error"]["param"] == "tokens[1]", "/detokenize: a sink id is a 400 naming it", str(body))
    code, body = post("/tokenize", {"text": "x"})
    check(code == 400 and body["error"]["param"] == "content", "/tokenize without content: a 400 naming it", str(body))


def malformed_requests_answer_4xx(base, auth):
    for name, path, extra, body, status, param in MALFORMED:
        args = [] if "NOAUTH" in extra else list(auth)
        args += [a for a in extra if a != "NOAUTH"]
        if body is not None:
            data = body if isinstance(body, bytes) else body.encode()
            with tempfile.NamedTemporaryFile(delete=False) as f:
                f.write(data)
            args += ["--data-binary", "@" + f.name, "-H", "Content-Type: application/json"]
        code, text = curl(base, *args, base + path)
        if body is not None:
            os.unlink(f.name)
        error = error_of(text)
        check(code == status and error is not None and (param is None or error.get("param") == param),
              f"malformed request, {name}: {code} (expected {status}"
              + (f", param {param!r}, got {error and error.get('param')!r})" if param else ")"))
    metrics = curl(base, base + "/metrics")[1]
    server_errors = [l for l in metrics.splitlines() if l.startswith("sinklm_http_responses_total") and 'status="5' in l]
    check(not server_errors, f"no malformed request answered 5xx: {server_errors}")
    code, body = curl(base, *auth, base + "/v1/completions", "-d", json.dumps({"prompt": "still there?", "max_tokens": 2}))
    check(code == 200, "the server keeps serving after the malformed requests")


def run_checks(checkpoint, sessions_dir):
    proc, base = start_server(checkpoint, sessions_dir)
    deadline = time.time() + 240
    try:
        client = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0, timeout=60)

        models = client.models.list()
        check([m.id for m in models.data] == ["tiny-bytes"], "/v1/models lists the served model")
        card = models.data[0].model_extra["sinklm"]
        check(card["checkpoint"] == "tiny-bytes" and card["sink_mode"] == "token" and card["sink_tokens"] == 1
              and card["cache"] == {"policy": "sink_window", "window": WINDOW, "sinks": 1, "recent": WINDOW - 1,
                                    "positions": "cache", "kv_dtype": "fp32"} and card["max_tokens_limit"] == 64,
              f"/v1/models: the model card (checkpoint, sink mode, cache policy and window): {card}")
        chat_page_is_served(base)

        c = client.completions.create(model="tiny-bytes", prompt="Once upon a time", max_tokens=12, temperature=0)
        check(c.choices[0].finish_reason in ("length", "stop") and c.usage.completion_tokens <= 12,
              "completion: finish_reason and usage")
        again = client.completions.create(model="tiny-bytes", prompt="Once upon a time", max_tokens=12, temperature=0)
        check(again.choices[0].text == c.choices[0].text, "greedy completions are reproducible")

        pieces, finish = [], None
        for chunk in client.completions.create(model="tiny-bytes", prompt="Once upon a time", max_tokens=12,
                                               temperature=0, stream=True):
            pieces.append(chunk.choices[0].text)
            finish = chunk.choices[0].finish_reason or finish
        check("".join(pieces) == c.choices[0].text and finish == c.choices[0].finish_reason,
              "streamed completion equals the non-streamed one")

        chat = client.chat.completions.create(model="tiny-bytes", messages=[{"role": "user", "content": "Hi!"}],
                                              max_tokens=10, temperature=0.7, seed=3)
        check(chat.choices[0].message.role == "assistant" and chat.usage.completion_tokens <= 10,
              "chat completion")
        deltas = [ch.choices[0].delta for ch in client.chat.completions.create(
            model="tiny-bytes", messages=[{"role": "user", "content": "Hi!"}], max_tokens=10, temperature=0.7, seed=3,
            stream=True)]
        check(deltas[0].role == "assistant" and "".join(d.content or "" for d in deltas) == chat.choices[0].message.content,
              "streamed chat equals the non-streamed one (same seed)")

        # What evaluation tools use: log-probs, echo (first token null), max_tokens 0, token-id prompts.
        scored = client.completions.create(model="tiny-bytes", prompt="Once upon", max_tokens=0, echo=True, logprobs=2)
        lp = scored.choices[0].logprobs
        check(scored.choices[0].text == "Once upon" and lp.tokens == list("Once upon") and lp.token_logprobs[0] is None
              and all(x < 0 for x in lp.token_logprobs[1:]) and all(len(t) <= 2 for t in lp.top_logprobs[1:]),
              "echo + logprobs + max_tokens 0: the prompt's log-probs, the first null")
        by_ids = client.completions.create(model="tiny-bytes", prompt=list(b"Once upon"), max_tokens=1, echo=True,
                                           logprobs=1, temperature=0)
        check(by_ids.choices[0].logprobs.token_logprobs[:9] == lp.token_logprobs
              and len(by_ids.choices[0].logprobs.token_logprobs) == 10, "a token-id prompt scores like its text")
        picks = [client.completions.create(model="tiny-bytes", prompt="Hi", max_tokens=8, n=3, seed=9) for _ in range(2)]
        texts = [[c.text for c in sorted(p.choices, key=lambda c: c.index)] for p in picks]
        check(texts[0] == texts[1] and len(set(texts[0])) > 1, f"n = 3: distinct samples, reproducible from the seed")
        chunks = list(client.completions.create(model="tiny-bytes", prompt="Hi", max_tokens=4, stream=True,
                                                stream_options={"include_usage": True}))
        with_usage = [c for c in chunks if c.usage is not None]
        check(chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 4 and with_usage == chunks[-1:],
              "stream_options.include_usage: usage once, in the last chunk only", str([c.usage for c in chunks]))
        for api, kwargs in [(client.completions, dict(prompt="Hi")),
                            (client.chat.completions, dict(messages=[{"role": "user", "content": "Hi"}]))]:
            plain = list(api.create(model="tiny-bytes", max_tokens=4, stream=True, n=2, **kwargs))
            check(plain and all(c.usage is None for c in plain), f"{api.__class__.__name__}: no usage in any chunk "
                  "unless asked", str([c.usage for c in plain]))
        parts = client.chat.completions.create(model="tiny-bytes", max_tokens=3, temperature=0, logprobs=True,
                                               top_logprobs=2, messages=[{"role": "user", "content": [
                                                   {"type": "text", "text": "Hi"}, {"type": "text", "text": "!"}]}])
        plain = client.chat.completions.create(model="tiny-bytes", max_tokens=3, temperature=0,
                                               messages=[{"role": "user", "content": "Hi!"}])
        content = parts.choices[0].logprobs.content
        check(parts.choices[0].message.content == plain.choices[0].message.content and len(content) == 3
              and all(len(c.top_logprobs) == 2 for c in content), "chat: text parts, logprobs with top_logprobs")
        raw = client.completions.with_raw_response.create(model="tiny-bytes", prompt="x", max_tokens=1,
                                                          extra_body={"service_tier": "auto"})
        plain_keys = set(raw.parse().model_extra or {})
        check(raw.headers.get("X-Sinklm-Warnings") == "unsupported field 'service_tier' ignored" and not plain_keys,
              "unknown fields are ignored and named in X-Sinklm-Warnings; the body holds OpenAI's keys alone",
              f"{raw.headers.get('X-Sinklm-Warnings')!r}, extra keys {plain_keys}")
        # logit_bias and the penalties act in the sampler: +10 on "A" (id 65 of the byte vocabulary) makes a
        # greedy reply all A's; a frequency penalty of 2 per repeat ends the run of A's.
        forced = client.completions.create(model="tiny-bytes", prompt="Hi", max_tokens=12, temperature=0,
                                           logit_bias={"65": 10})
        tired = client.completions.create(model="tiny-bytes", prompt="Hi", max_tokens=12, temperature=0,
                                          logit_bias={"65": 10}, frequency_penalty=2)
        check(forced.choices[0].text == "A" * 12 and tired.choices[0].text.startswith("A")
              and tired.choices[0].text.count("A") < 12, "logit_bias and frequency_penalty steer the sampler",
              f"{forced.choices[0].text!r}, with the penalty {tired.choices[0].text!r}")
        try:
            client.completions.create(model="tiny-bytes", prompt="Hi", max_tokens=2, logit_bias={"300": 5})
            check(False, "a logit_bias id outside the vocabulary is refused")
        except openai.BadRequestError as e:
            check(e.body.get("param") == "logit_bias.300" and "outside the vocabulary" in e.body.get("message", ""),
                  "a logit_bias id outside the vocabulary: 400 naming it", str(e.body))
        chunks = list(client.completions.create(model="tiny-bytes", prompt="Hi", max_tokens=3, stream=True))
        check(all(not (c.model_extra or {}) for c in chunks), "streamed chunks hold OpenAI's keys alone unless asked",
              str([c.model_extra for c in chunks]))
        for field, value in [("tools", [{"type": "function", "function": {"name": "f", "parameters": {}}}]),
                             ("response_format", {"type": "json_object"}), ("best_of", 2)]:
            try:
                client.chat.completions.create(model="tiny-bytes", max_tokens=3,
                                               messages=[{"role": "user", "content": "Hi"}], extra_body={field: value})
                check(False, f"{field} is refused")
            except openai.BadRequestError as e:
                check(e.body.get("code") == "unsupported_parameter" and e.body.get("param") == field,
                      f"openai client: {field} gets 400 unsupported_parameter naming it", str(e.body))

        # Errors: OpenAI-style JSON with 4xx, and the server keeps serving.
        try:
            openai.OpenAI(base_url=base + "/v1", api_key="wrong", max_retries=0).models.list()
            check(False, "a wrong API key is refused")
        except openai.AuthenticationError as e:
            check(e.status_code == 401, "a wrong API key gets 401")
        code, body = curl(base, "-H", f"X-Api-Key: {KEY}", base + "/v1/models")
        error = error_of(body) or {}
        check(code == 401 and error.get("type") == "authentication_error" and error.get("code") == "invalid_api_key"
              and "Authorization: Bearer" in error.get("message", ""),
              f"the key in another header: 401, an OpenAI-style error naming the one accepted form: {body}")
        code, _ = curl(base, "-H", f"Authorization: Bearer {KEY}", base + "/v1/models")
        check(code == 200, "the right key as a bearer token: 200")
        for bad, name in [(dict(max_tokens=1000), "max_tokens over the limit"),
                          (dict(max_tokens=5, temperature="hot"), "temperature of the wrong type"),
                          (dict(max_tokens=5, extra_body={"session": "sess_nope"}), "unknown session")]:
            try:
                client.completions.create(model="tiny-bytes", prompt="x", **bad)
                check(False, f"{name} is refused")
            except openai.APIStatusError as e:
                check(400 <= e.status_code < 500 and e.body and "message" in e.body, f"{name}: {e.status_code} JSON error")
        auth = ["-H", f"Authorization: Bearer {KEY}"]
        code, body = curl(base, *auth, base + "/v1/completions", "-d", "{not json")
        check(code == 400 and error_of(body)["code"] == "invalid_json", "curl: malformed JSON gets 400")
        code, body = curl(base, *auth, base + "/v1/completions", "-d", json.dumps({"prompt": "x" * 5000}))
        check(code == 413 and error_of(body) is not None, "curl: a body over the limit gets 413 JSON")
        code, body = curl(base, *auth, base + "/v1/completions", "-d", json.dumps({"prompt": 7}))
        check(code == 400 and "prompt" in error_of(body)["message"], "curl: a prompt of the wrong type gets 400")
        malformed_requests_answer_4xx(base, auth)
        tokenize_routes(base, auth)
        code, body = curl(base, base + "/v1/nothing")
        check(code == 404 and error_of(body) is not None, "curl: unknown route gets 404 JSON")
        code, body = curl(base, base + "/health")
        check(code == 200 and json.loads(body)["status"] == "ok", "curl: /health")
        code, body = curl(base, "-N", *auth, base + "/v1/completions",
                          "-d", json.dumps({"prompt": "abc", "max_tokens": 6, "stream": True}))
        events = [line for line in body.splitlines() if line.startswith("data: ")]
        check(code == 200 and events[-1] == "data: [DONE]" and json.loads(events[-2][6:])["choices"][0]["finish_reason"],
              "curl: SSE stream ends with a finish_reason chunk and data: [DONE]")

        # Sessions: the stream carries over; only new text is sent each turn.
        def new_session():
            code, body = curl(base, *auth, "-X", "POST", base + "/v1/sessions", "-d", "{}")
            return json.loads(body)["id"]

        a, b, other = new_session(), new_session(), new_session()  # 3 sessions, 2 fit in memory
        lengths = []
        for turn in ["My name is Ada.", " What is my name?", " Tell me more."]:
            for s in (a, b):
                r = client.completions.create(model="tiny-bytes", prompt=turn, max_tokens=8, temperature=0,
                                              extra_body={"session": s, **STATE})
                if s == a:
                    lengths.append((r.usage.prompt_tokens, r.usage.completion_tokens, r.choices[0].finish_reason,
                                    r.model_extra["sinklm"]))
            client.completions.create(model="tiny-bytes", prompt="filler", max_tokens=4, extra_body={"session": other})
        expected = 0
        ok = True
        for prompt_tokens, completion_tokens, finish, stream in lengths:
            # A reply's last token reaches the cache with the next prompt (counted there); end-of-text never does.
            expected += prompt_tokens + completion_tokens - (0 if finish == "stop" else 1)
            ok &= stream["stream_length"] == expected and stream["kv_entries"] == min(expected, WINDOW)
        check(ok and lengths[-1][3]["stream_length"] > WINDOW, f"a session's stream grows across requests: {lengths}")
        code, body = curl(base, *auth, base + "/v1/sessions/" + a)
        session = json.loads(body)
        check(code == 200 and session["tokens"] > WINDOW and session["kv_entries"] == WINDOW,
              f"GET /v1/sessions/{{id}}: the stream length and its K/V entries ({session['tokens']}, {session['kv_entries']})")
        live = [chunk.model_extra["sinklm"] for chunk in client.chat.completions.create(  # not a: b must stay its twin
            model="tiny-bytes", messages=[{"role": "user", "content": "Go on."}], max_tokens=24, temperature=0,
            stream=True, extra_body={"session": other, **STATE})]
        grows = all(x["stream_length"] < y["stream_length"] for x, y in zip(live, live[1:-1]))
        check(len(live) > 2 and grows and live[-1]["stream_length"] > WINDOW
              and all(s["session"] == other and s["kv_entries"] == min(s["stream_length"], WINDOW) for s in live),
              f"every streamed chunk carries the stream as of that chunk: {[(s['stream_length'], s['kv_entries']) for s in live]}")
        metrics = curl(base, base + "/metrics")[1]
        on_disk = [l for l in metrics.splitlines() if l.startswith('sinklm_sessions{where="disk"}')]
        check(on_disk and int(on_disk[0].split()[-1]) >= 1, "LRU: a session beyond --sessions-in-memory went to disk")
        generated = [l for l in metrics.splitlines() if l.startswith("sinklm_generated_tokens_total")]
        check(generated and int(generated[0].split()[-1]) > 0 and "sinklm_step_seconds_bucket" in metrics,
              "/metrics: counters and latency histograms")

        # 16 concurrent streaming sessions.
        results = {}

        def converse(i):
            s = new_session()
            text, finish = "", None
            for chunk in client.chat.completions.create(model="tiny-bytes", stream=True, max_tokens=24,
                                                        messages=[{"role": "user", "content": f"Hello number {i}"}],
                                                        extra_body={"session": s}):
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
            results[i] = finish

        threads = [threading.Thread(target=converse, args=(i,)) for i in range(16)]
        start = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(1, deadline - time.time()))
        check(len(results) == 16 and all(results.values()),
              f"16 concurrent streaming sessions all finished ({time.time() - start:.1f}s)")

        # The session limit (20: a, b, other and the 16 above, plus one), deletion, and the session header.
        extra = new_session()
        code, body = curl(base, *auth, "-X", "POST", base + "/v1/sessions", "-d", "{}")
        check(code == 429 and error_of(body)["code"] == "too_many_sessions", "--max-sessions: the 21st session gets 429")
        code, body = curl(base, *auth, "-X", "DELETE", base + "/v1/sessions/" + extra)
        check(code == 200 and json.loads(body)["deleted"], "DELETE /v1/sessions/{id}")
        code, body = curl(base, *auth, "-H", "X-Session-Id: " + other, base + "/v1/completions",
                          "-d", json.dumps({"prompt": "more", "max_tokens": 2, **STATE}))
        check(code == 200 and json.loads(body)["sinklm"]["session"] == other, "X-Session-Id selects the session")
        code, body = curl(base, *auth, "-H", "X-Session-Id: " + extra, base + "/v1/completions",
                          "-d", json.dumps({"prompt": "more", "max_tokens": 2}))
        check(code == 404, "a deleted session is gone")

        # Continue a in memory vs b restored after a restart: identical histories give identical replies.
        follow = dict(model="tiny-bytes", prompt=" And then?", max_tokens=10, temperature=0)
        before = client.completions.create(**follow, extra_body={"session": a, **STATE})
        unseeded_before = unseeded_sample(client)
    finally:
        stop_server(proc)
    proc, base = start_server(checkpoint, sessions_dir, extra=["--no-ui"])
    try:
        code, _, body = fetch(base + "/")
        check(code == 404 and error_of(body) is not None, "--no-ui: GET / is a 404 JSON error")
        client = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0, timeout=60)
        after = client.completions.create(**follow, extra_body={"session": b, **STATE})
        check(after.choices[0].text == before.choices[0].text
              and after.model_extra["sinklm"]["stream_length"] == before.model_extra["sinklm"]["stream_length"],
              "a session survives a restart: same reply, same stream length")
        text, seed = unseeded_sample(client)
        check(seed != unseeded_before[1] and text != unseeded_before[0],
              "an unseeded sampled request after a restart draws another seed and another sample",
              f"{unseeded_before} vs {(text, seed)}")
        replay = client.completions.create(**UNSEEDED, seed=seed)
        check(replay.choices[0].text == text, "the X-Sinklm-Seed header's seed replays the unseeded sample")
    finally:
        stop_server(proc)


if __name__ == "__main__":
    main()
