#!/usr/bin/env python3
"""A sink checkpoint handed to Hugging Face transformers, from its directory alone (label e2e).

A `token`-mode model trained by `sinklm train` on shards of a byte-level BPE tokenizer.json:
  - its checkpoint carries tokenizer.json (the sink as a special added token, a TemplateProcessing
    post-processor putting it first), tokenizer_config.json (bos = the sink, eos, model_max_length = the trained
    length) and the run's own tokenizer byte for byte as sinklm.tokenizer.json;
  - AutoTokenizer's ids on held-out text are the sink then `sinklm tokenize`'s ids;
  - AutoModelForCausalLM's logits equal `sinklm forward`'s (max relative error 1e-4, fp32), sink included, and
    its greedy continuation equals `sinklm serve`'s (temperature 0) token for token;
  - `export hf` of the model quantized to int8 gives a directory transformers loads with sinklm's logits;
  - the other tokenizer families get the same view: GPT-2's rank file (ids equal tiktoken's) and a SentencePiece
    BPE model trained by `sinklm prepare sentencepiece` (ids equal sinklm's), each after the sink;
  - a mode transformers cannot compute (gated) is refused by `export hf`, naming it, and nothing is written.
Exit 77 (skipped) when transformers cannot be imported."""
import json
import os
import signal
import sys

import export_support as fx
from sinklm_test import check, config, finish, run_sinklm, skip, source_path, temp_dir

try:
    import numpy as np
    import torch
    from safetensors.numpy import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer
except ImportError as e:  # pragma: no cover
    skip(f"reference package not importable ({e}); run scripts/setup.sh")

sys.path.insert(0, source_path("tests", "serve"))
from serve_support import http_request, start_server  # noqa: E402

TOLERANCE = 1e-4


def sinklm_ids(tokenizer, text):
    return [int(t) for t in run_sinklm("tokenize", "--tokenizer", tokenizer, stdin=text).stdout.split()]


def sinklm_logits(checkpoint, ids, work):
    out = os.path.join(work, "logits.safetensors")
    run_sinklm("forward", "--checkpoint", checkpoint, "--ids", " ".join(map(str, ids)), "--out", out)
    tensors = load_file(out)
    return tensors["logits"], [int(i) for i in tensors["input_ids"]]


def hf_logits(directory, ids):
    model = AutoModelForCausalLM.from_pretrained(directory).eval()
    with torch.no_grad():
        return model, model(torch.tensor([ids])).logits[0].float().numpy()


def relative_error(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def check_files(checkpoint, tokenizer_json, sink):
    with open(os.path.join(checkpoint, "tokenizer.json")) as f:
        hf = json.load(f)
    with open(os.path.join(checkpoint, "tokenizer_config.json")) as f:
        cfg = json.load(f)
    added = {t["content"]: t["id"] for t in hf["added_tokens"]}
    check(added.get("<|sink|>") == sink and hf["post_processor"]["type"] == "TemplateProcessing",
          "tokenizer.json: the sink id as a special added token, prepended by a TemplateProcessing post-processor",
          f"added {added}")
    check(cfg.get("bos_token") == "<|sink|>" and cfg.get("eos_token") == "<|endoftext|>"
          and cfg.get("model_max_length") == 64, "tokenizer_config.json: bos = the sink, eos, the trained length",
          str(cfg))
    with open(tokenizer_json, "rb") as a, open(os.path.join(checkpoint, "sinklm.tokenizer.json"), "rb") as b:
        check(a.read() == b.read(), "the run's own tokenizer.json is kept byte for byte as sinklm.tokenizer.json")


def check_tokens_and_logits(checkpoint, tokenizer_json, sink, work):
    text = fx.held_out_text()
    theirs = AutoTokenizer.from_pretrained(checkpoint)(text)["input_ids"]
    ours = sinklm_ids(tokenizer_json, text)
    check(theirs == [sink] + ours, f"AutoTokenizer: the sink, then sinklm's {len(ours)} ids of held-out text",
          f"first ids {theirs[:6]} vs {[sink] + ours[:5]}")
    ids = ours[:63]  # the trained length (64) with the sink
    logits, fed = sinklm_logits(checkpoint, ids, work)
    model, hf = hf_logits(checkpoint, [sink] + ids)
    check(fed == [sink] + ids, "sinklm forward puts the sink first too")
    err = relative_error(logits, hf)
    check(err <= TOLERANCE, "AutoModelForCausalLM from the directory alone: sinklm's logits on held-out text, sink "
          "included", f"max relative error {err:.2e}")
    return model, ours


def check_view_read_back(checkpoint, ours, sink, work):
    """The Hugging Face view's tokenizer.json (the sink added) handed back to sinklm as --tokenizer: the sink
    token is left out, so the ids are the run's own and the checkpoint takes it."""
    view = os.path.join(checkpoint, "tokenizer.json")
    text = fx.held_out_text()
    check(sinklm_ids(view, text) == ours, "sinklm tokenize with the view's tokenizer.json: the run's own ids")
    literal = sinklm_ids(view, "a <|sink|> b")
    check(sink not in literal, "a literal <|sink|> in a prompt is text, not the sink id", str(literal))
    text_file = os.path.join(work, "held_out.txt")
    with open(text_file, "w") as f:
        f.write(text)
    runs = {}
    for name in ("tokenizer.json", "sinklm.tokenizer.json"):
        p = run_sinklm("stream", "--checkpoint", checkpoint, "--tokenizer", os.path.join(checkpoint, name), "--text",
                       text_file, "--max-tokens", 200, "--threads", 1, "--json", os.path.join(work, name + ".stream"),
                       expect=None)
        if p.returncode == 0:
            run = json.load(open(os.path.join(work, name + ".stream")))["runs"][0]
            runs[name] = (run["scored_tokens"], run["ppl"])
        else:
            runs[name] = p.stderr.strip()[-300:]
    check(runs["tokenizer.json"] == runs["sinklm.tokenizer.json"],
          "stream --tokenizer CHECKPOINT/tokenizer.json (the view) scores as with the run's own", str(runs))


def check_greedy(checkpoint, model, ids, sink):
    prompt = ids[:16]
    with torch.no_grad():
        generated = model.generate(torch.tensor([[sink] + prompt]), max_new_tokens=24,
                                   do_sample=False)[0].tolist()[1 + len(prompt):]
    proc, base = start_server(checkpoint, "--threads", "1")
    try:
        status, _, body = http_request(int(base.rsplit(":", 1)[1]), "POST", "/v1/completions",
                                       {"prompt": prompt, "max_tokens": 24, "temperature": 0})
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    reply = json.loads(body) if status == 200 else {}
    choice = (reply.get("choices") or [{}])[0]
    text = AutoTokenizer.from_pretrained(checkpoint).decode(generated)
    check(status == 200 and choice.get("text") == text and reply["usage"]["completion_tokens"] == len(generated),
          f"greedy: transformers' generate() and sinklm serve agree token for token ({len(generated)} tokens)",
          f"{text!r} vs {choice.get('text')!r}")


def check_quantized_export(checkpoint, ids, sink, work):
    int8, exported = os.path.join(work, "int8"), os.path.join(work, "int8-hf")
    run_sinklm("quantize", "--checkpoint", checkpoint, "--out", int8)
    run_sinklm("export", "hf", "--checkpoint", int8, "--out", exported)
    logits, _ = sinklm_logits(int8, ids[:63], work)
    _, hf = hf_logits(exported, [sink] + ids[:63])
    err = relative_error(logits, hf)
    check(err <= TOLERANCE, "export hf of an int8 checkpoint: transformers loads it with sinklm's logits",
          f"max relative error {err:.2e}")


def check_family(work, name, tokenizer_file, tokenizer_vocab, reference_ids):
    """`export hf --tokenizer FILE` of a fresh token-mode model: AutoTokenizer gives the sink, then the reference."""
    model = fx.initialized_token_model(work, f"{name}-init", tokenizer_vocab)
    out = os.path.join(work, f"{name}-hf")
    run_sinklm("export", "hf", "--checkpoint", model, "--tokenizer", tokenizer_file, "--out", out)
    text = fx.held_out_text(20000)
    theirs = AutoTokenizer.from_pretrained(out)(text)["input_ids"]
    want = reference_ids(text)
    check(theirs == [tokenizer_vocab] + want, f"{name}: AutoTokenizer from export hf gives the sink, then the "
          f"reference's {len(want)} ids", f"first difference at {next((i for i, (a, b) in enumerate(zip(theirs[1:], want)) if a != b), None)}")


def check_families(work):
    import gpt2_reference as ref
    rank_file = ref.gpt2_rank_file()
    if rank_file is not None:
        encoding = ref.tiktoken_encoding(rank_file)
        check_family(work, "gpt2", rank_file, 50257, lambda t: encoding.encode(t, allowed_special=set()))
    spm = fx.sentencepiece_model(work)
    check_family(work, "sentencepiece", spm, 700, lambda t: sinklm_ids(spm, t))


def check_refusal(work):
    gated = os.path.join(work, "gated")
    run_sinklm("init", "--config", config("tiny.yaml"), "--out", gated, "--set", "model.sink.mode=gated")
    p = run_sinklm("export", "hf", "--checkpoint", gated, "--out", os.path.join(work, "gated-hf"), expect=None)
    check(p.returncode != 0 and "model.sink.mode gated" in p.stderr and not os.path.exists(os.path.join(work, "gated-hf")),
          "export hf refuses a mode transformers cannot compute, naming it, and writes nothing", p.stderr[-300:])


def main():
    with temp_dir("sinklm-hf-export-") as work:
        tokenizer_json, shards = fx.prepared_shards(work)
        checkpoint = fx.trained_checkpoint(work, shards, "token", "token")
        with open(os.path.join(checkpoint, "config.json")) as f:
            sink = json.load(f)["sink"]["token_ids"][0]
        check_files(checkpoint, tokenizer_json, sink)
        model, ids = check_tokens_and_logits(checkpoint, tokenizer_json, sink, work)
        check_view_read_back(checkpoint, ids, sink, work)
        check_greedy(checkpoint, model, ids, sink)
        check_quantized_export(checkpoint, ids, sink, work)
        check_families(work)
        check_refusal(work)
    finish()


if __name__ == "__main__":
    main()
