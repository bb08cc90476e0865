"""Shared fixtures of the export tests: a byte-level BPE tokenizer.json trained with Hugging Face `tokenizers` on
real text (the eval fixtures: benchmark items and prose), and a small GPT-NeoX trained by `sinklm train` on
shards made with it, so that its checkpoint carries the tokenizer as every checkpoint does. Held-out text is a
licence text Debian ships (base-files), never seen in training."""
import json
import os
import sys

from sinklm_test import check, config, run_sinklm, source_path

sys.path.insert(0, source_path("tests", "eval"))
from eval_support import fixture_texts, train_tokenizer  # noqa: E402

SMALL = ["model.hidden_size=64", "model.max_position_embeddings=1024", "model.num_layers=2", "model.num_heads=4", "model.intermediate_size=128",
         "train.seq_len=64", "train.global_batch_tokens=1024", "train.micro_batch=16", "train.lr=1e-2",
         "train.eval_every=0", "train.checkpoint_every=0", "data.validation_batches=1", "train.threads=1",
         "model.vocab_size=-1", "model.tokenizer_vocab_size=-1"]


def held_out_text(chars=3000):
    with open("/usr/share/common-licenses/GPL-3") as f:
        return f.read()[2000:2000 + chars]


def prepared_shards(work, tokenizer=None):
    """(tokenizer.json path, shard directory) for a tokenizer trained on the fixture texts."""
    tokenizer = tokenizer or os.path.join(work, "tokenizer.json")
    if not os.path.exists(tokenizer):
        train_tokenizer(tokenizer, vocab_size=600)
    corpus = os.path.join(work, "corpus.jsonl")
    with open(corpus, "w") as f:
        for text in fixture_texts():
            for paragraph in text.split("\n"):
                if paragraph.strip():
                    f.write(json.dumps({"text": paragraph}) + "\n")
    shards = os.path.join(work, "shards")
    run_sinklm("prepare", "shards", "--tokenizer", tokenizer, "--in", corpus, "--out", shards,
               "--validation-size", "0.05", "--test-size", "0.05", "--threads", "1")
    return tokenizer, shards


def trained_checkpoint(work, shards, name, mode, steps=40):
    """The last checkpoint of a `tiny` model (sink mode `mode`) trained `steps` steps on `shards`."""
    cfg = "tiny-sink.yaml" if mode == "token" else "tiny.yaml"
    args = ["train", "--config", config(cfg), "--out", os.path.join(work, name), "--set", f"data.shards={shards}",
            "--set", f"train.steps={steps}"]
    if mode not in ("none", "token"):
        args += ["--set", f"model.sink.mode={mode}"]
    for s in SMALL:
        args += ["--set", s]
    p = run_sinklm(*args, expect=None, timeout=600)
    check(p.returncode == 0, f"a {mode} model trains on the shards", p.stderr[-400:])
    return os.path.join(work, name, "checkpoints", f"step_{steps:08d}")
