#!/usr/bin/env python3
"""Science test (label e2e): which sink variants pay for losing their first tokens, on a model that has a
load-bearing sink to lose.

Every sink variant other than the sink token (vanilla, zero sink, sink logit, learned K/V sink, gated
attention; the sink token's own half is tests/train/science_sink_test.py) is trained for 300 steps of
128 x 64 tokens with the sequential residual (configs/synthetic.yaml + model.parallel_residual=false, one
process and thread, ~1.5 CPU-minutes each) on a `sinklm prepare synthetic` Bigram-Backcopy stream, the
setting where the sink-token model's perplexity rises 1.8x when its sink token is evicted. Then, on the
held-out test stream (`sinklm stream --compare`, W = 64; `sinklm analyze`, 64-position segments):

  every variant        0+W within EVICT of 1+(W-1): none of them keeps its sink in a token that eviction
                       can take (vanilla: no fixed first token forms one; the column variants: the sink is
                       the extra softmax column, which every query sees whatever the cache holds; gated: a
                       closed gate needs no sink)
  zero sink, logit, kv the column takes at least COLUMN of the attention in some layer
  gated                at least DORMANT of the gates in some layer are below 0.1 (heads switch themselves off)

Margins sit below what two seeds measured (docs/results.md, "Every sink variant"). `--modes` picks the
variants (default all five); `--untrained` measures freshly initialised models instead (`sinklm init`): the
test must then fail on the column mass and the gates.
"""
import argparse
import json
import os
import time

from science_sink_test import describe, synthetic_data
from sinklm_test import check, config, finish, run_sinklm, temp_dir

EVICT, COLUMN, DORMANT = 0.03, 0.2, 0.2
SEQUENTIAL = ["model.parallel_residual=false", "train.threads=1", "train.sink_probe_every=0", "model.init_seed=7"]
COLUMN_MODES = ("softmax1", "logit", "kv")


def layer_means(heads, key):
    return [sum(h[key] for h in layer["heads"]) / len(layer["heads"]) for layer in heads["layers"]]


def checkpoint_of(work, data, mode, trained):
    """The model to measure: 300 training steps, or (untrained) a freshly initialised one."""
    run_dir = f"{work}/{mode}"
    overrides = SEQUENTIAL + [f"model.sink.mode={mode}"]
    if not trained:
        run_sinklm("init", "--config", config("synthetic.yaml"), "--out", f"{run_dir}/init",
                   *[a for o in overrides for a in ("--set", o)])
        return run_dir, f"{run_dir}/init"
    run_sinklm("train", "--config", config("synthetic.yaml"), "--out", run_dir, "--resume", "--set",
               f"data.shards={data}", "--set", "train.steps=300", *[a for o in overrides for a in ("--set", o)])
    return run_dir, f"{run_dir}/checkpoints/" + sorted(os.listdir(f"{run_dir}/checkpoints"))[-1]


def train_and_measure(work, data, mode, trained):
    run_dir, ckpt = checkpoint_of(work, data, mode, trained)
    run_sinklm("analyze", "--checkpoint", ckpt, "--text", f"{data}/test.txt", "--tokens", "64", "--segments", "32",
               "--out", f"{run_dir}/analyze")
    heads = json.load(open(f"{run_dir}/analyze/heads.json"))
    run_sinklm("stream", "--checkpoint", ckpt, "--text", f"{data}/test.txt", "--window", "64", "--compare",
               "--max-tokens", "3000", "--json", f"{run_dir}/stream.json")
    ppl = [r["ppl"] for r in json.load(open(f"{run_dir}/stream.json"))["runs"]]  # 0+W, 1+(W-1), 2+(W-2), 4+(W-4)
    return heads, ppl


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--modes", default="none,softmax1,logit,kv,gated")
    parser.add_argument("--untrained", action="store_true", help="freshly initialised models: the test must fail")
    parser.add_argument("--work", default="", help="keep the runs here (default: a temporary directory)")
    args = parser.parse_args()
    start = time.time()
    with temp_dir("sinklm-science-variants-") as tmp:
        work = args.work or tmp
        data = synthetic_data(work, "--seed", "2")
        for mode in args.modes.split(","):
            heads, ppl = train_and_measure(work, data, mode, not args.untrained)
            if mode in COLUMN_MODES:
                mass = layer_means(heads, "implicit_sink")
            else:
                mass = [sum(h["first_positions"][0] for h in layer["heads"]) / len(layer["heads"]) for layer in heads["layers"]]
            print(f"sequential {mode}: {describe(mass, ppl)}", flush=True)
            check(ppl[0] <= (1 + EVICT) * ppl[1], f"{mode}: evicting the first tokens costs little",
                  f"0+W {ppl[0]:.2f} vs 1+(W-1) {ppl[1]:.2f} (need within {EVICT:.0%})")
            if mode in COLUMN_MODES:
                check(max(mass) >= COLUMN, f"{mode}: the sink column takes attention in some layer",
                      f"column mass per layer {[round(m, 3) for m in mass]} (need >= {COLUMN})")
            if mode == "gated":
                dormant, gate = layer_means(heads, "gate_dormant"), layer_means(heads, "gate_mean")
                check(max(dormant) >= DORMANT, "gated: heads switch themselves off (gates below 0.1) in some layer",
                      f"dormant fraction per layer {[round(d, 3) for d in dormant]}, mean gate "
                      f"{[round(g, 3) for g in gate]} (need >= {DORMANT})")
    print(f"the runs and their measurements took {time.time() - start:.0f} s")
    finish()


if __name__ == "__main__":
    main()
