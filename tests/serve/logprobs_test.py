#!/usr/bin/env python3
"""`sinklm serve`'s log-probs on tokens that are not whole UTF-8 characters, over real HTTP (label e2e).

Two models: a byte-level one (every byte >= 0x80 alone is part of a character) and a GPT-2-style byte-level
BPE one whose prompt tokens split multi-byte characters. For logprobs k = 2..5, echoed prompts, greedy
decoding, streamed and not, read from the raw JSON (where two equal keys of one object would silently
collapse into one):

- every top_logprobs object has exactly k distinct keys, most likely first;
- every key spells its token's bytes: the text itself when it is valid UTF-8, else `bytes:\\xNN...`;
- the greedy token heads its own list, with its own log-prob;
- every log-prob equals the log-softmax (over the whole vocabulary) of `sinklm forward`'s logits for the same
  ids, and the k reported are the k largest among the ids a client can receive;
- the stream's logprobs equal the whole response's; chat's logprobs carry each token's `bytes` and equal the
  completions' for the same prompt.

Exit 77 (skipped) when numpy, safetensors or (for the BPE model) transformers/tokenizers are missing."""
import json
import os
import re
import sys
import urllib.request

import serve_support
from serve_support import with_byte_model
from sinklm_test import check, run_sinklm, skip, temp_dir

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "eval"))

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError as e:
    skip(f"reference package not importable ({e}); run scripts/setup.sh to install it")

try:
    from lm_eval.models.openai_completions import LocalCompletionsAPI
except ImportError:  # its check is left out; scripts/setup.sh installs lm-eval
    LocalCompletionsAPI = None

TOLERANCE = 2e-4  # server (cached, batched decode) vs `sinklm forward` (one full pass), fp32
KS = (2, 3, 4, 5)
MAX_TOKENS = 6
BYTES_KEY = re.compile(r"bytes:((?:\\x[0-9a-f]{2})+)")
ID_KEY = re.compile(r"token_id:(\d+)")


class Pairs(dict):
    """A JSON object that keeps every key/value pair in order, a repeated key included."""


def keep_pairs(pairs):
    obj = Pairs(pairs)
    obj.pairs = pairs
    return obj


def post(base, path, body):
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as r:
        if not body.get("stream"):
            return json.loads(r.read().decode(), object_pairs_hook=keep_pairs)
        chunks = []
        for line in r.read().decode().splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:], object_pairs_hook=keep_pairs))
        return chunks


def key_bytes(key):
    """The bytes a logprobs key spells: `bytes:\\xNN...` written out, else the key's own UTF-8 text; None for
    a `token_id:N` key or a malformed `bytes:` key."""
    match = BYTES_KEY.fullmatch(key)
    if match:
        return bytes(int(h, 16) for h in match.group(1).split("\\x")[1:])
    return None if key.startswith(("bytes:", "token_id:")) else key.encode()


def is_text(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


class Model:
    """A served checkpoint and what the checks need of it: the bytes of each id, and the reference."""

    def __init__(self, name, checkpoint, work, token_bytes, sampleable, sinks):
        self.name, self.checkpoint, self.work = name, checkpoint, work
        self.token_bytes = token_bytes  # id -> bytes
        self.id_of_bytes = {b: i for i, b in enumerate(token_bytes)}
        self.sampleable, self.sinks = sampleable, sinks
        self.references = {}

    def id_of(self, key):
        """The token a key names (None when it names none)."""
        match = ID_KEY.fullmatch(key)
        if match:
            return int(match.group(1))
        b = key_bytes(key)
        return None if b is None else self.id_of_bytes.get(b)

    def reference(self, ids):
        """log_softmax rows of `sinklm forward` over ids: row j scores ids[j + 1]."""
        if tuple(ids) not in self.references:
            out = os.path.join(self.work, "logits.safetensors")
            run_sinklm("forward", "--checkpoint", self.checkpoint, "--ids", " ".join(map(str, ids)), "--out", out)
            logits = load_file(out)["logits"].astype(np.float64)[self.sinks:]  # the sink's row scores ids[0]
            shifted = logits - logits.max(axis=1, keepdims=True)
            self.references[tuple(ids)] = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        return self.references[tuple(ids)]


def completion_checks(model, base, prompt_ids, k):
    """One echoed greedy completion with logprobs k, whole and streamed: every entry's checks."""
    body = {"model": "m", "prompt": prompt_ids, "echo": True, "max_tokens": MAX_TOKENS, "temperature": 0,
            "logprobs": k}
    response = post(base, "/v1/completions", body)
    whole = response["choices"][0]["logprobs"]
    label = f"[{model.name}] k={k} prompt {bytes(b for i in prompt_ids for b in model.token_bytes[i])!r}"
    entries = list(zip(whole["tokens"], whole["token_logprobs"], whole["top_logprobs"]))[1:]  # the first: null
    problems = [p for j, (token, logprob, top) in enumerate(entries, 1)
                for p in shape_problems(j, token, logprob, top, k, greedy=j >= len(prompt_ids))]
    check(whole["token_logprobs"][0] is None and not problems,
          f"{label}: {len(entries)} entries with k distinct keys, most likely first, the greedy token heading its own",
          "; ".join(problems[:4]))
    if LocalCompletionsAPI:  # how lm-evaluation-harness reads it: a greedy continuation must be is_greedy
        [(_, is_greedy)] = LocalCompletionsAPI.parse_logprobs(response, ctxlens=[len(prompt_ids)])
        check(is_greedy, f"{label}: lm-evaluation-harness finds the greedy continuation greedy")
    ids = [model.id_of(t) for t in whole["tokens"]]
    check(ids[:len(prompt_ids)] == prompt_ids and None not in ids,
          f"{label}: every token key spells its token's bytes (the echoed ids come back)", f"{whole['tokens']}")
    if None not in ids:
        rows = model.reference(ids)
        problems = [p for j, (_, logprob, top) in enumerate(entries, 1)
                    for p in value_problems(model, j, ids[j], logprob, top, rows[j - 1], k)]
        check(not problems, f"{label}: every log-prob equals forward's, the k largest", "; ".join(problems[:4]))
        offsets = whole["text_offset"]
        check(offsets[0] == 0 and all(b - a == len(model.token_bytes[i]) for a, b, i in zip(offsets, offsets[1:], ids)),
              f"{label}: text_offset advances by each token's bytes", f"{offsets}")
    streamed = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for chunk in post(base, "/v1/completions", dict(body, stream=True)):
        for field, values in streamed.items():
            values += chunk["choices"][0]["logprobs"][field]
    same = all([getattr(t, "pairs", t) for t in streamed[f]] == [getattr(t, "pairs", t) for t in whole[f]]
               for f in streamed)
    check(same, f"{label}: the streamed logprobs equal the whole response's")


def shape_problems(j, token, logprob, top, k, greedy):
    """What is wrong with the form of entry j: its top_logprobs object's keys and order, the greedy token's place."""
    keys = [key for key, _ in top.pairs]
    values = [value for _, value in top.pairs]
    problems = []
    if len(keys) != k or len(set(keys)) != k:
        problems.append(f"entry {j}: {len(keys)} keys, {len(set(keys))} distinct, asked for {k}: {top.pairs}")
    if values != sorted(values, reverse=True):
        problems.append(f"entry {j}: alternatives not most likely first: {values}")
    if greedy and (not keys or keys[0] != token or top.get(token) != logprob):
        problems.append(f"entry {j}: greedy token {token!r} ({logprob}) does not head its list {top.pairs}")
    return problems


def value_problems(model, j, token_id, logprob, top, row, k):
    """What is wrong with entry j's log-probs against the reference row (log-softmax over the whole vocabulary)."""
    problems = []
    if abs(logprob - row[token_id]) > TOLERANCE:
        problems.append(f"entry {j}: log-prob {logprob} vs forward's {row[token_id]}")
    top_ids = [model.id_of(key) for key, _ in top.pairs]
    values = [value for _, value in top.pairs]
    if None in top_ids or any(abs(v - row[i]) > TOLERANCE for i, v in zip(top_ids, values)):
        problems.append(f"entry {j}: alternatives {top.pairs} are not forward's log-probs of those tokens")
    best = np.sort(row[:model.sampleable])[::-1][:k]
    if len(values) != k or np.abs(np.array(values) - best).max() > TOLERANCE:
        problems.append(f"entry {j}: alternatives {values} are not the {k} largest {best.tolist()}")
    return problems


def chat_checks(model, base, content, k):
    """Greedy chat with top_logprobs k, whole and streamed: bytes on every token and alternative, k distinct
    alternatives with the token first, and the same log-probs as a completion of the chat template's text."""
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": MAX_TOKENS,
            "temperature": 0, "logprobs": True, "top_logprobs": k}
    entries = post(base, "/v1/chat/completions", body)["choices"][0]["logprobs"]["content"]
    label = f"[{model.name}] chat k={k} {content!r}"
    problems = []
    for j, e in enumerate(entries):
        top = [(t["token"], t["logprob"], t["bytes"]) for t in e["top_logprobs"]]
        if e["bytes"] != list(key_bytes(e["token"]) or b"") or model.id_of(e["token"]) is None:
            problems.append(f"token {j}: {e['token']!r} does not spell its bytes {e['bytes']}")
        if any(b != list(key_bytes(t) or b"") for t, _, b in top):
            problems.append(f"token {j}: an alternative does not spell its bytes: {top}")
        if len(top) != k or len({t for t, _, _ in top}) != k:
            problems.append(f"token {j}: {len(top)} alternatives, {len({t for t, _, _ in top})} distinct: {top}")
        if not top or top[0][:2] != (e["token"], e["logprob"]):
            problems.append(f"token {j}: greedy token {e['token']!r} does not head its list {top}")
    check(entries and not problems, f"{label}: bytes on every token and alternative, k distinct, greedy first",
          "; ".join(problems[:5]))
    streamed = [e for chunk in post(base, "/v1/chat/completions", dict(body, stream=True))
                if chunk["choices"] and chunk["choices"][0]["logprobs"]
                for e in chunk["choices"][0]["logprobs"]["content"]]
    check(streamed == entries, f"{label}: the streamed logprobs equal the whole response's")
    completion = post(base, "/v1/completions", {"model": "m", "prompt": f"User: {content}\nAssistant:",
                                                "max_tokens": MAX_TOKENS, "temperature": 0, "logprobs": k,
                                                "stop": ["\nUser:"]})["choices"][0]["logprobs"]
    as_completion = [(t, lp, list(top.pairs)) for t, lp, top in
                     zip(completion["tokens"], completion["token_logprobs"], completion["top_logprobs"])]
    as_chat = [(e["token"], e["logprob"], [(t["token"], t["logprob"]) for t in e["top_logprobs"]]) for e in entries]
    check(as_chat == as_completion, f"{label}: the same tokens and log-probs as the completion of its template")


def serve_and_check(model, prompts, chat_contents):
    proc, base = serve_support.start_server(model.checkpoint, "--threads", "1", "--model-name", "m")
    try:
        for k in KS:
            for prompt_ids in prompts:
                completion_checks(model, base, prompt_ids, k)
        for k in (KS[0], KS[-1]):
            for content in chat_contents:
                chat_checks(model, base, content, k)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def byte_model_checks(work, checkpoint):
    model = Model("bytes", checkpoint, work, [bytes([b]) for b in range(256)], sampleable=256, sinks=1)
    prompts = [list(text.encode()) for text in ["naïve café", "日本語の", "€ 😀"]] + [[0xe2, 0x82]]  # half a "€"
    serve_and_check(model, prompts, ["日本", "café"])


def bpe_model_checks():
    """A byte-level BPE trained on the ASCII fixtures: a character it never saw is one token per byte."""
    try:
        from eval_support import save_model, train_tokenizer
        from gpt2_reference import bytes_to_unicode
        from tokenizers import Tokenizer
    except ImportError as e:
        skip(f"reference package not importable ({e}); run scripts/setup.sh to install it")
    with temp_dir("sinklm-logprobs-bpe-") as work:
        tokenizer_path = os.path.join(work, "tokenizer.json")
        n_tokens = train_tokenizer(tokenizer_path)
        checkpoint = save_model(os.path.join(work, "bpe"), tokenizer_path, n_tokens, "none", seed=5)
        tokenizer = Tokenizer.from_file(tokenizer_path)
        alphabet = {c: b for b, c in bytes_to_unicode().items()}
        # GPT-2's alphabet spells every byte, and <|endoftext|> spells itself.
        token_bytes = [bytes(alphabet[c] for c in tokenizer.id_to_token(i)) for i in range(n_tokens)]
        model = Model("bpe", checkpoint, work, token_bytes, sampleable=n_tokens, sinks=0)
        prompts = [tokenizer.encode(text).ids for text in ["The café in the land of 日本", "And the name 😀 was"]]
        partial = [i for p in prompts for i in p if not is_text(token_bytes[i])]
        check(partial, "the BPE prompts hold tokens that split a multi-byte character", f"{partial}")
        serve_and_check(model, prompts, ["日本"])


def both_models(work, checkpoint):
    byte_model_checks(work, checkpoint)
    bpe_model_checks()


def main():
    with_byte_model("sinklm-logprobs-test-", both_models)


if __name__ == "__main__":
    main()
