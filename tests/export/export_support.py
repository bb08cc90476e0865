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


def sentencepiece_model(work, vocab_size=700):
    """A SentencePiece BPE model trained by `sinklm prepare sentencepiece` on the fixture texts."""
    corpus = os.path.join(work, "spm-corpus")
    os.makedirs(corpus, exist_ok=True)
    with open(os.path.join(corpus, "train.jsonl"), "w") as f:
        for i, text in enumerate(fixture_texts()):
            f.write(json.dumps({"id": f"fixture/{i}", "text": text}) + "\n")
    run_sinklm("prepare", "sentencepiece", "--in", corpus, "--out", os.path.join(work, "spm"),
               "--vocab-size", str(vocab_size), "--threads", "1")
    return os.path.join(work, "spm", "tokenizer.model")


def initialized_token_model(work, name, tokenizer_vocab):
    """A freshly initialised one-layer `token` model for a tokenizer of `tokenizer_vocab` ids (no tokenizer
    inside: the export commands take --tokenizer)."""
    model = os.path.join(work, name)
    run_sinklm("init", "--config", config("tiny-sink.yaml"), "--out", model, "--set", "model.hidden_size=64",
               "--set", "model.num_layers=1", "--set", "model.num_heads=4", "--set", "model.intermediate_size=128",
               "--set", f"model.tokenizer_vocab_size={tokenizer_vocab}", "--set", "model.vocab_size=-1",
               "--set", "model.bos_token_id=-1", "--set", "model.eos_token_id=-1")
    return model
