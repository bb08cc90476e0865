#!/usr/bin/env python3
"""Trainer switches end to end, one process on a tiny sink-token model over synthetic shards (label e2e):
  - train.activation_checkpointing=true gives the losses and weights of the plain path;
  - the log's first lines report memory (plan per rank, then the measured peak after the first step);
  - train.trace_steps=2 writes a Chrome trace and its per-operator table;
  - train.communicator=nccl on a CPU run is refused with the key named;
  - train.precision=bf16 on the CPU runs bf16 autocast (said in the log): its losses differ from fp32's, by no
    more than bf16's rounding allows;
  - validation losses, every target and matched context (val_loss, val_loss_matched), equal the mean NLL that
    `sinklm forward`'s logits give on the validation samples cut from the shard by hand, for a sink token model
    and its vanilla twin.
"""
import json
import os

import numpy as np
from safetensors.numpy import load_file

from sinklm_test import check, config, finish, run_sinklm, temp_dir


def train(work, name, *extra):
    args = ["train", "--config", config("synthetic-sink.yaml"), "--out", f"{work}/{name}"]
    for s in [f"data.shards={work}/shards", "train.steps=6", "train.seq_len=64", "train.global_batch_tokens=1024",
              "train.micro_batch=8", "train.eval_every=0", "train.checkpoint_every=0", "data.validation_batches=0",
              "train.threads=1", "train.log_every=1"] + list(extra):
        args += ["--set", s]
    p = run_sinklm(*args, expect=None, timeout=300)
    return p.returncode, p.stderr


def losses(run_dir):
    with open(f"{run_dir}/metrics.jsonl") as f:
        return [json.loads(line)["loss"] for line in f if '"loss"' in line]


def shard_tokens(path):
    """The tokens of a shard file (data/shards/token_shard.h: a 64-byte header, then uint16 or uint32 ids)."""
    raw = open(path, "rb").read()
    width, count = int.from_bytes(raw[12:16], "little"), int.from_bytes(raw[16:24], "little")
    return np.frombuffer(raw, dtype=np.uint16 if width == 2 else np.uint32, count=count, offset=64).astype(np.int64)


def validation_by_hand(work, run, sinks, samples, seq_len):
    """(every target, matched context) mean NLL of the first `samples` validation windows from forward's logits."""
    tokens = shard_tokens(f"{work}/shards/validation-000000-0000.bin")
    text = seq_len - sinks
    every, matched = [], []
    for s in range(samples):
        window = tokens[s * text:(s + 1) * text]
        run_sinklm("forward", "--checkpoint", f"{run}/checkpoints/step_00000002", "--ids",
                   " ".join(map(str, window)), "--out", f"{work}/logits.safetensors")
        logits = load_file(f"{work}/logits.safetensors")["logits"].astype(np.float64)  # [seq_len, V]
        logp = logits - logits.max(1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(1, keepdims=True))
        # Position p predicts text token p + 1 - sinks; the first text token is predicted at p = sinks - 1.
        nll = [-logp[p, window[p + 1 - sinks]] for p in range(max(sinks - 1, 0), seq_len - 1)]
        every += nll
        # Matched: text contexts of 1 .. seq_len-2 tokens (the sink model's first target and the vanilla
        # model's last are left out).
        matched += nll[1:] if sinks else nll[:-1]
    return float(np.mean(every)), float(np.mean(matched))


def check_bf16(work, fp32_losses):
    """CPU bf16 autocast: the log says so, and the losses track fp32's. bf16 keeps 8 significand bits (relative
    rounding 2^-9 per operand); over a few steps of a 2-layer model the loss moves by far less than 1% of itself
    unless bf16 is broken (a silent fp32 run gives identical losses, a wrong cast diverges at once)."""
    rc, log = train(work, "bf16", "train.precision=bf16")
    check(rc == 0 and "(bf16 autocast)" in log and "bf16 on the CPU" in log, "train.precision=bf16 on the CPU",
          log[-500:])
    bf16 = losses(f"{work}/bf16")
    worst = max(abs(x - y) / y for x, y in zip(bf16, fp32_losses))
    check(len(bf16) == len(fp32_losses) and bf16 != fp32_losses and worst < 0.01,
          "bf16 losses differ from fp32's by less than 1%", f"{bf16} vs {fp32_losses}")


def check_validation(work):
    """Both validation losses of a token model and a vanilla one against forward's logits by hand."""
    seq_len, samples = 64, 4
    for mode, sinks in [("token", 1), ("none", 0)]:
        rc, log = train(work, f"validation-{mode}", f"model.sink.mode={mode}", "train.steps=2", "train.eval_every=2",
                        "data.validation_batches=1", f"train.global_batch_tokens={seq_len * samples}",
                        f"train.micro_batch={samples}")
        check(rc == 0, f"validation run ({mode})", log[-500:] if rc else "")
        record = [json.loads(l) for l in open(f"{work}/validation-{mode}/metrics.jsonl") if "val_loss" in l][-1]
        every, matched = validation_by_hand(work, f"{work}/validation-{mode}", sinks, samples, seq_len)
        check(abs(record["val_loss"] - every) < 1e-4 and abs(record["val_loss_matched"] - matched) < 1e-4,
              f"validation losses of the {mode} model = forward's NLL by hand (every target, matched context)",
              f"trainer {record['val_loss']:.6f} / {record['val_loss_matched']:.6f}, "
              f"by hand {every:.6f} / {matched:.6f}")


def main():
    with temp_dir("sinklm-train-features-") as work:
        run_sinklm("prepare", "synthetic", "--out", f"{work}/shards", "--train-tokens", "200000")
        rc, log = train(work, "plain")
        check(rc == 0, "plain run", log[-500:] if rc else "")
        rc_ac, _ = train(work, "checkpointing", "train.activation_checkpointing=true")
        a, b = losses(f"{work}/plain"), losses(f"{work}/checkpointing")
        check(rc_ac == 0 and len(a) == 6 and np.allclose(a, b, rtol=0, atol=1e-6),
              "activation checkpointing: the plain path's losses", f"{a} vs {b}")
        wa = load_file(f"{work}/plain/checkpoints/step_00000006/model.safetensors")
        wb = load_file(f"{work}/checkpointing/checkpoints/step_00000006/model.safetensors")
        worst = max(float(np.max(np.abs(wa[k] - wb[k]))) for k in wa)
        check(worst <= 1e-5, "activation checkpointing: the plain path's weights", f"max |difference| {worst:.2e}")

        lines = log.splitlines()
        plan = next((i for i, l in enumerate(lines) if "memory per rank: parameters" in l), None)
        measured = next((i for i, l in enumerate(lines) if "memory measured after the first step: peak RSS" in l), None)
        check(plan is not None and plan < 3 and measured is not None, "memory report in the log's first lines",
              "\n".join(lines[:4]))

        rc, log = train(work, "traced", "train.trace_steps=2")
        trace_ok = rc == 0 and os.path.exists(f"{work}/traced/trace.json")
        events = json.load(open(f"{work}/traced/trace.json")).get("traceEvents", []) if trace_ok else []
        table = open(f"{work}/traced/trace_top.txt").read() if trace_ok else ""
        check(len(events) > 100 and "aten::mm" in table and "over 2 traced steps" in table,
              "train.trace_steps writes a Chrome trace and its table",
              f"exit {rc}, {len(events)} events, table: {table[:300]}")

        check_validation(work)
        check_bf16(work, a)

        rc, log = train(work, "nccl", "train.communicator=nccl")
        check(rc != 0 and "train.communicator" in log, "train.communicator=nccl on CPUs is refused naming the key",
              log[-300:])
    finish()


if __name__ == "__main__":
    main()
