#!/usr/bin/env python3
"""Special ids and vocabulary sizes come from the run's tokenizer (label e2e):
  - a model trained on shards made with GPT-2's rank file (gpt2.tiktoken) and a config that leaves the ids and
    sizes at -1 has eos = bos = 50256, no pad, tokenizer_vocab_size 50257 and vocab_size 50304 (rounded up to
    128) in config.json, sinklm.yaml and generation_config.json; transformers' own GenerationConfig reads them;
  - a served completion of that model stops at end-of-text (finish_reason "stop", fewer tokens than asked);
  - a config naming another eos (0), or a tokenizer_vocab_size its tokenizer's ids do not fit, is refused
    naming both values, before anything is written;
  - byte-level shards without a tokenizer file (`prepare synthetic`): the ids come from their manifest.
Exit 77 (skipped) without openai-whisper's rank file.
"""
import json
import os
import signal
import sys

import gpt2_reference as ref
from sinklm_test import check, config, finish, run_sinklm, skip, source_path, temp_dir

sys.path.insert(0, source_path("tests", "serve"))
from serve_support import http_request, start_server  # noqa: E402

SMALL = ["model.hidden_size=64", "model.num_layers=2", "model.intermediate_size=128", "train.seq_len=64",
         "train.global_batch_tokens=1024", "train.micro_batch=16", "train.lr=1e-2", "train.eval_every=0",
         "train.checkpoint_every=0", "data.validation_batches=1", "train.threads=1"]


def train(work, name, shards, *settings, cfg="tiny.yaml"):
    args = ["train", "--config", config(cfg), "--out", f"{work}/{name}", "--set", f"data.shards={shards}"]
    for s in SMALL + list(settings):
        args += ["--set", s]
    p = run_sinklm(*args, expect=None, timeout=600)
    return p.returncode, p.stderr


def read_json(path):
    with open(path) as f:
        return json.load(f)


def gpt2_model(work, rank_file):
    """Documents 'Sink N ends here.': after 30 steps the model ends each with end-of-text."""
    with open(f"{work}/corpus.jsonl", "w") as f:
        for i in range(3000):
            f.write(json.dumps({"text": f"Sink {i} ends here."}) + "\n")
    run_sinklm("prepare", "shards", "--tokenizer", rank_file, "--in", f"{work}/corpus.jsonl", "--out",
               f"{work}/shards", "--validation-size", "0.05", "--test-size", "0.05", "--threads", "1")
    # tiny.yaml sets the SentencePiece demo's sizes (8192, 8000): -1 hands them to the tokenizer.
    rc, log = train(work, "gpt2", f"{work}/shards", "model.vocab_size=-1", "model.tokenizer_vocab_size=-1",
                    "train.steps=30")
    check(rc == 0, "a model trains on GPT-2 rank-file shards with the sizes and ids left to the tokenizer", log[-500:])
    return f"{work}/gpt2/checkpoints/step_00000030"


def check_files(checkpoint):
    hf, generation = read_json(f"{checkpoint}/config.json"), read_json(f"{checkpoint}/generation_config.json")
    got = {k: hf.get(k) for k in ("eos_token_id", "bos_token_id", "pad_token_id", "vocab_size")}
    got["tokenizer_vocab_size"] = hf.get("sink", {}).get("tokenizer_vocab_size")
    check(got == {"eos_token_id": 50256, "bos_token_id": 50256, "pad_token_id": None, "vocab_size": 50304,
                  "tokenizer_vocab_size": 50257},
          "config.json: eos = bos = 50256 (<|endoftext|>), no pad, 50257 ids padded to 50304 rows", str(got))
    yaml = open(f"{checkpoint}/sinklm.yaml").read()
    check("eos_token_id: 50256" in yaml and "vocab_size: 50304" in yaml, "sinklm.yaml carries the resolved values")
    from transformers import GenerationConfig
    theirs = GenerationConfig.from_pretrained(checkpoint)
    check(generation["eos_token_id"] == 50256 and theirs.eos_token_id == 50256 and theirs.bos_token_id == 50256,
          "generation_config.json: transformers' GenerationConfig reads eos 50256", str(generation))


def check_served_stop(checkpoint):
    proc, base = start_server(checkpoint)
    try:
        status, _, body = http_request(int(base.rsplit(":", 1)[1]), "POST", "/v1/completions",
                                       {"prompt": "Sink 12", "max_tokens": 40, "temperature": 0})
        reply = json.loads(body) if status == 200 else {}
        choice = (reply.get("choices") or [{}])[0]
        used = reply.get("usage", {}).get("completion_tokens", 40)
        check(status == 200 and choice.get("finish_reason") == "stop" and used < 40
              and choice.get("text", "").endswith("here."),
              "a served completion stops at the tokenizer's end-of-text", f"{status} {body[:300]}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def check_refusals(work):
    rc, log = train(work, "wrong-eos", f"{work}/shards", "model.vocab_size=-1", "model.tokenizer_vocab_size=-1",
                    "model.eos_token_id=0", "train.steps=1")
    check(rc != 0 and "model.eos_token_id = 0" in log and "end-of-text 50256" in log and "gpt2.tiktoken" in log,
          "a config naming another eos than the tokenizer's is refused naming both", log[-400:])
    rc, log = train(work, "too-small", f"{work}/shards", "train.steps=1")
    check(rc != 0 and "model.tokenizer_vocab_size = 8000" in log and "50257 ids" in log,
          "a tokenizer_vocab_size the tokenizer's ids do not fit is refused naming both", log[-400:])
    check(not os.path.exists(f"{work}/wrong-eos/checkpoints") and not os.path.exists(f"{work}/too-small/checkpoints"),
          "a refused config writes no checkpoint")


def check_byte_shards(work):
    run_sinklm("prepare", "synthetic", "--out", f"{work}/synthetic", "--train-tokens", "20000")
    manifest = read_json(f"{work}/synthetic/manifest.json")
    rc, log = train(work, "bytes", f"{work}/synthetic", "train.steps=1", "model.bos_token_id=-1",
                    "model.eos_token_id=-1", cfg="synthetic.yaml")
    hf = read_json(f"{work}/bytes/checkpoints/step_00000001/config.json") if rc == 0 else {}
    check(rc == 0 and hf.get("eos_token_id") == manifest["end_of_text_id"] == hf.get("bos_token_id"),
          "byte shards without a tokenizer file: eos and bos from their manifest",
          f"manifest {manifest.get('end_of_text_id')}, config.json {hf.get('eos_token_id')} {log[-300:]}")


def main():
    rank_file = ref.gpt2_rank_file()
    if rank_file is None:
        skip("needs openai-whisper's gpt2.tiktoken (scripts/setup.sh installs it into .venv)")
    with temp_dir("sinklm-special-ids-") as work:
        checkpoint = gpt2_model(work, rank_file)
        check_files(checkpoint)
        check_served_stop(checkpoint)
        check_refusals(work)
        check_byte_shards(work)
    finish()


if __name__ == "__main__":
    main()
