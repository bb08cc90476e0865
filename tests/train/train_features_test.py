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
    and its vanilla twin;
  - train.init_from: a sink token model started from a vanilla checkpoint, after a step at learning rate 0, has
    the validation loss the vanilla model has on the same windows each preceded by end-of-text (the sink row
    starts as the end-of-text row, so [sink, t1 ..] computes what [eos, t1 ..] did); from a Hugging Face
    GPT-NeoX directory its logits equal transformers' on [eos, t1 ..]; it then trains; another architecture,
    a source tensor the target mode has no place for, and a missing directory are refused, named;
  - data.mixture of two shard directories at 0.8/0.2: per-source token counts in metrics.jsonl (and
    TensorBoard's reader) within a binomial 99.9% bound, and a run killed mid-way resumes to the weights of
    the uninterrupted one; a weight of 0, a missing source and data.shards beside data.mixture are refused.
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


def validation_by_hand(work, checkpoint, sinks, samples, seq_len, prefix=()):
    """(every target, matched context) mean NLL of the first `samples` validation windows from forward's logits.
    `sinks` positions lead each window: the model's own sink tokens (forward adds them) or `prefix`'s ids."""
    tokens = shard_tokens(f"{work}/shards/validation-000000-0000.bin")
    text = seq_len - sinks
    every, matched = [], []
    for s in range(samples):
        window = tokens[s * text:(s + 1) * text]
        run_sinklm("forward", "--checkpoint", checkpoint, "--ids",
                   " ".join(map(str, list(prefix) + list(window))), "--out", f"{work}/logits.safetensors")
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
        every, matched = validation_by_hand(work, f"{work}/validation-{mode}/checkpoints/step_00000002", sinks,
                                            samples, seq_len)
        check(abs(record["val_loss"] - every) < 1e-4 and abs(record["val_loss_matched"] - matched) < 1e-4,
              f"validation losses of the {mode} model = forward's NLL by hand (every target, matched context)",
              f"trainer {record['val_loss']:.6f} / {record['val_loss_matched']:.6f}, "
              f"by hand {every:.6f} / {matched:.6f}")


def last_checkpoint(run_dir):
    return os.path.join(run_dir, "checkpoints", sorted(os.listdir(f"{run_dir}/checkpoints"))[-1])


def check_init_from_vanilla(work):
    """A sink token model from a vanilla checkpoint: at lr 0 its validation loss is the vanilla model's on
    [eos] + window (eos: the shards' end-of-text, as config.json says); with the usual learning rate it trains."""
    seq_len, samples = 64, 4
    rc, log = train(work, "vanilla", "model.sink.mode=none", "train.steps=4")
    check(rc == 0, "vanilla run to start from", log[-500:] if rc else "")
    vanilla = last_checkpoint(f"{work}/vanilla")
    rc, log = train(work, "from-vanilla", "model.sink.mode=token", f"train.init_from={vanilla}", "train.lr=0",
                    "train.steps=1", "train.eval_every=1", "data.validation_batches=1",
                    f"train.global_batch_tokens={seq_len * samples}", f"train.micro_batch={samples}")
    check(rc == 0 and "sink token 256 starts as the end-of-text row" in log,
          "train.init_from: a vanilla checkpoint into the token mode, the sink row from end-of-text (said in the log)",
          log[-600:])
    record = [json.loads(l) for l in open(f"{work}/from-vanilla/metrics.jsonl") if "val_loss" in l][-1]
    eos = json.load(open(f"{vanilla}/config.json"))["eos_token_id"]
    every, _ = validation_by_hand(work, vanilla, 1, samples, seq_len, prefix=[eos])
    check(abs(record["val_loss"] - every) < 1e-5,
          "the token model from a vanilla checkpoint scores [sink] + window as the vanilla model scores [eos] + window",
          f"token model {record['val_loss']:.7f}, vanilla on [eos] + window {every:.7f}")
    rc, log = train(work, "from-vanilla-trained", "model.sink.mode=token", f"train.init_from={vanilla}")
    fresh, started = losses(f"{work}/plain"), losses(f"{work}/from-vanilla-trained")
    check(rc == 0 and len(started) == 6 and all(np.isfinite(started)) and started[0] < fresh[0] - 0.05,
          "init_from trains, starting below a fresh token model's first loss",
          f"from vanilla {started}, fresh {fresh}")
    return vanilla


def check_init_from_hugging_face(work):
    """A transformers save_pretrained directory (GPT-NeoX, the synthetic architecture) into the token mode:
    sinklm forward on [sink] + ids equals transformers on [eos] + ids (eos: the run's, from its shards)."""
    import torch
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    torch.manual_seed(0)
    hf = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=320, hidden_size=128, num_hidden_layers=2,
                                          num_attention_heads=1, intermediate_size=512, rotary_pct=0.25,
                                          max_position_embeddings=64, layer_norm_eps=1e-5, eos_token_id=0,
                                          bos_token_id=0)).eval()
    hf.save_pretrained(f"{work}/hf")
    rc, log = train(work, "from-hf", "model.sink.mode=token", f"train.init_from={work}/hf", "train.lr=0",
                    "train.steps=1")
    check(rc == 0, "train.init_from a Hugging Face GPT-NeoX directory", log[-600:])
    ids = [int(i) for i in np.random.default_rng(1).integers(1, 256, 40)]
    checkpoint = last_checkpoint(f"{work}/from-hf")
    eos = json.load(open(f"{checkpoint}/config.json"))["eos_token_id"]
    run_sinklm("forward", "--checkpoint", checkpoint, "--ids", " ".join(map(str, ids)),
               "--out", f"{work}/hf-logits.safetensors")
    ours = load_file(f"{work}/hf-logits.safetensors")["logits"]  # [1 + len(ids), V]
    with torch.no_grad():
        theirs = hf(torch.tensor([[eos] + ids])).logits[0].numpy()
    worst = float(np.max(np.abs(ours[:, :320] - theirs))) if ours.shape[0] == len(ids) + 1 else float("inf")
    check(worst < 1e-4, "from Hugging Face: sinklm on [sink] + ids = transformers on [eos] + ids",
          f"max |logit difference| {worst:.2e}, shapes {ours.shape} {theirs.shape}")


def check_init_from_refusals(work, vanilla):
    rc, log = train(work, "wrong-shape", f"train.init_from={vanilla}", "model.hidden_size=64")
    check(rc != 0 and "model.hidden_size: 128 there, 64 here" in log and "train.init_from" in log,
          "init_from a model of another shape is refused naming the key and both values", log[-400:])
    rc, log = train(work, "logit", "model.sink.mode=logit", "train.steps=1")
    rc, log = train(work, "logit-into-none", "model.sink.mode=none", f"train.init_from={last_checkpoint(f'{work}/logit')}")
    check(rc != 0 and "sink_logit" in log and "has no place in the none model" in log,
          "a source tensor the target mode has no place for is refused, named", log[-400:])
    rc, log = train(work, "missing", f"train.init_from={work}/no-such-run")
    check(rc != 0 and "train.init_from" in log and "no-such-run" in log, "a missing init_from directory is refused",
          log[-300:])
    check(not os.path.exists(f"{work}/wrong-shape/checkpoints") or not os.listdir(f"{work}/wrong-shape/checkpoints"),
          "a refused init_from writes no checkpoint")


def check_mixture(work):
    run_sinklm("prepare", "synthetic", "--out", f"{work}/other", "--seed", "2", "--train-tokens", "100000")
    mixture = f"data.mixture={work}/shards=0.8, {work}/other=0.2"
    steps, samples = 12, 16
    common = ["data.shards=", mixture, f"train.steps={steps}", "train.checkpoint_every=4"]
    rc, log = train(work, "mixture", *common)
    check(rc == 0, "a run on data.mixture (two shard directories, 0.8/0.2)", log[-400:])
    records = [json.loads(l) for l in open(f"{work}/mixture/metrics.jsonl") if '"source_tokens"' in l]
    last = records[-1]["source_tokens"] if records else {}
    n, text_tokens = steps * samples, 63  # seq_len 64, one sink token
    drawn = {name: tokens / text_tokens for name, tokens in last.items()}
    sd = (n * 0.8 * 0.2) ** 0.5
    check(set(drawn) == {"shards", "other"} and sum(drawn.values()) == n and abs(drawn["shards"] - 0.8 * n) < 3.29 * sd,
          "per-source token counts in metrics.jsonl, within a binomial 99.9% bound of 0.8/0.2",
          f"{last} ({n} samples)")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(f"{work}/mixture/tensorboard")
    events.Reload()
    tb = {tag: events.Scalars(tag)[-1].value for tag in ("source_tokens/shards", "source_tokens/other")
          if tag in events.Tags()["scalars"]}
    check(tb == {f"source_tokens/{k}": float(v) for k, v in last.items()}, "TensorBoard holds the per-source counts",
          str(tb))
    state = json.load(open(f"{work}/mixture/checkpoints/step_{steps:08d}/trainer_state.json"))
    saved = {s["shards"]: s["tokens"] for s in state["loader"]["mixture"]["sources"]}
    check(saved == {f"{work}/shards": last.get("shards"), f"{work}/other": last.get("other")},
          "the checkpoint carries the per-source token counts", str(saved))

    rc, _ = train(work, "mixture-killed", *common, "train.fault.step=6", "train.fault.action=kill")
    args = ["train", "--config", config("synthetic-sink.yaml"), "--out", f"{work}/mixture-killed", "--resume"]
    for setting in ["train.seq_len=64", "train.global_batch_tokens=1024", "train.micro_batch=8", "train.eval_every=0",
                    "data.validation_batches=0", "train.threads=1", "train.log_every=1", *common]:
        args += ["--set", setting]
    resumed = run_sinklm(*args, expect=None, timeout=300)
    final = f"checkpoints/step_{steps:08d}/model.safetensors"
    same = False
    if resumed.returncode == 0:
        wa, wb = (load_file(f"{work}/{name}/{final}") for name in ("mixture", "mixture-killed"))
        same = wa.keys() == wb.keys() and all(np.array_equal(wa[k], wb[k]) for k in wa)
    check(rc != 0 and same, "a mixture run killed at step 6 resumes to the uninterrupted run's weights, bit for bit",
          f"kill exit {rc}, resume exit {resumed.returncode}: {resumed.stderr[-300:]}")

    for setting, said in [(f"data.mixture={work}/shards=0.8, {work}/other=0", "the weight of"),
                          (f"data.mixture={work}/shards=0.8, {work}/missing=0.2", "missing/manifest.json")]:
        rc, log = train(work, "mixture-bad", "data.shards=", setting)
        check(rc != 0 and said in log, f"a bad mixture is refused naming it ({said})", log[-300:])
    rc, log = train(work, "mixture-both", mixture)
    check(rc != 0 and "data.shards and data.mixture are both set" in log, "data.shards beside data.mixture is refused",
          log[-300:])


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
        vanilla = check_init_from_vanilla(work)
        check_init_from_hugging_face(work)
        check_init_from_refusals(work, vanilla)
        check_mixture(work)
        check_bf16(work, a)

        rc, log = train(work, "nccl", "train.communicator=nccl")
        check(rc != 0 and "train.communicator" in log, "train.communicator=nccl on CPUs is refused naming the key",
              log[-300:])
    finish()


if __name__ == "__main__":
    main()
