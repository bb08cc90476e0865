"""sinklm train vs a PyTorch Python training loop on the same model, batch and optimizer (CPU, fp32).

For each preset: the median tokens/s over timed steps for both, their ratio, and the model FLOP/s as a
fraction of the float32 matmul throughput torch reaches on this machine (the practical CPU ceiling).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from transformers import GPTNeoXForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SINKLM = os.path.join(ROOT, "build", "sinklm")
# preset -> (seq_len, micro_batch); one micro-batch per step, so both loops do the same work per step.
SHAPES = {"tiny": (256, 8), "small": (512, 8), "pythia-160m": (128, 8)}


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def prepare_data(cache):
    shards = os.path.join(cache, "shards")
    if os.path.exists(os.path.join(shards, "manifest.json")):
        return shards
    sh([SINKLM, "prepare", "corpus", "--out", f"{cache}/corpus", "--sources", "bible-kjv,fortunes"])
    sh([SINKLM, "prepare", "sentencepiece", "--in", f"{cache}/corpus", "--out", f"{cache}/sp", "--vocab-size", "8000",
        "--max-sentences", "50000"])
    sh([SINKLM, "prepare", "shards", "--tokenizer", f"{cache}/sp/tokenizer.model", "--in", f"{cache}/corpus",
        "--out", shards])
    return shards


def settings(preset, shards, steps, threads):
    seq, micro = SHAPES[preset]
    return [f"data.shards={shards}", f"train.steps={steps}", f"train.seq_len={seq}", f"train.micro_batch={micro}",
            f"train.global_batch_tokens={seq * micro}", "train.eval_every=0", "train.checkpoint_every=0",
            "data.validation_batches=0", "train.log_every=1", f"train.threads={threads}", "model.sink.mode=none",
            "model.tokenizer_vocab_size=8000"]


def sinklm_tokens_per_s(preset, shards, steps, threads, work):
    cmd = [SINKLM, "train", "--config", f"{ROOT}/configs/{preset}.yaml", "--out", f"{work}/{preset}-run"]
    for s in settings(preset, shards, steps, threads):
        cmd += ["--set", s]
    sh(cmd)
    with open(f"{work}/{preset}-run/metrics.jsonl") as f:
        rates = [json.loads(line)["tokens_per_s"] for line in f if '"tokens_per_s"' in line]
    return statistics.median(rates[1:])  # the first step includes warm-up


def python_tokens_per_s(preset, steps, threads, work):
    seq, micro = SHAPES[preset]
    init = f"{work}/{preset}-init"
    cmd = [SINKLM, "init", "--config", f"{ROOT}/configs/{preset}.yaml", "--out", init]
    for s in ["model.sink.mode=none", "model.tokenizer_vocab_size=8000"]:
        cmd += ["--set", s]
    sh(cmd)
    torch.set_num_threads(threads)
    model = GPTNeoXForCausalLM.from_pretrained(init, attn_implementation="sdpa").train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    ids = torch.randint(0, 8000, (micro, seq))
    rates = []
    for _ in range(steps):
        start = time.perf_counter()
        logits = model(ids[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        rates.append(micro * seq / (time.perf_counter() - start))
    return statistics.median(rates[1:]), model.config


def matmul_flops(m, k, n, threads):
    torch.set_num_threads(threads)
    a, b = torch.randn(m, k), torch.randn(k, n)
    for _ in range(3):
        a @ b
    start, reps = time.perf_counter(), 0
    while time.perf_counter() - start < 1.0:
        a @ b
        reps += 1
    return 2.0 * m * k * n * reps / (time.perf_counter() - start)


def flops_per_token(config, seq):
    h, layers, v = config.hidden_size, config.num_hidden_layers, config.vocab_size
    i = config.intermediate_size
    params = layers * (4 * h * h + 2 * h * i) + v * h  # matmul weights incl. embed_out (embed_in is a lookup)
    return 6.0 * params + 12.0 * layers * h * seq


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--presets", default="small,pythia-160m")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--cache", default=os.path.join(ROOT, "runs", "bench-data"))
    args = parser.parse_args()
    shards = prepare_data(args.cache)
    print(f"torch {torch.__version__}, {args.threads} threads, fp32, one micro-batch per step, median of "
          f"{args.steps - 1} timed steps")
    print(f"{'preset':<12} {'tokens/step':>11} {'sinklm tok/s':>13} {'python tok/s':>13} {'ratio':>6} "
          f"{'matmul GFLOP/s':>15} {'sinklm % of matmul':>19}")
    with tempfile.TemporaryDirectory() as work:
        for preset in args.presets.split(","):
            seq, micro = SHAPES[preset]
            ours = sinklm_tokens_per_s(preset, shards, args.steps, args.threads, work)
            theirs, config = python_tokens_per_s(preset, args.steps, args.threads, work)
            peak = matmul_flops(micro * seq, config.hidden_size, config.intermediate_size, args.threads)
            fraction = ours * flops_per_token(config, seq) / peak
            print(f"{preset:<12} {micro * seq:>11} {ours:>13.0f} {theirs:>13.0f} {ours / theirs:>5.2f}x "
                  f"{peak / 1e9:>15.1f} {100 * fraction:>18.0f}%", flush=True)


if __name__ == "__main__":
    sys.exit(main())
