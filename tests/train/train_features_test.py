#!/usr/bin/env python3
"""Trainer switches end to end, one process on a tiny sink-token model over synthetic shards (label e2e):
  - train.activation_checkpointing=true gives the losses and weights of the plain path;
  - the log's first lines report memory (plan per rank, then the measured peak after the first step);
  - train.trace_steps=2 writes a Chrome trace and its per-operator table;
  - train.communicator=nccl on a CPU run is refused with the key named.
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

        rc, log = train(work, "nccl", "train.communicator=nccl")
        check(rc != 0 and "train.communicator" in log, "train.communicator=nccl on CPUs is refused naming the key",
              log[-300:])
    finish()


if __name__ == "__main__":
    main()
