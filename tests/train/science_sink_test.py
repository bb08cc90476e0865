#!/usr/bin/env python3
"""Science test (label e2e): an attention sink really forms, and the cache policies treat it as the paper says.

The only test that checks the cache policies against a model that really has a sink. Short sink-token runs
on `sinklm prepare synthetic` Bigram-Backcopy streams, one process and thread each: one with parallel residual
(configs/synthetic-sink.yaml, 300 steps of 128 x 64 tokens, ~3 CPU-minutes), and SEEDS (5) with sequential
residual by `scripts/sink_sweep --grid sequential --seeds 5` (300 steps of 64 x 64 tokens, ~1.3 CPU-minutes
each; seed S varies the data, the initialisation and the sample order; seed 1 is the main job's). No setting
found so far reaches both of issue 10's targets at once (docs/results.md, "A sink at CPU scale"): with
parallel residual the sink forms in layer 1 but evicting it costs nothing; with sequential residual evicting
it costs 1.07-1.77x, depending on the seed, and the sink sits in layer 0. So the test asserts each half where
it is measured (docs/results.md, "Over seeds"):
  parallel sink-token model   >= MASS of attention on the sink token in every layer >= 1 (`sinklm analyze`,
                              held-out test stream; measured 0.39, vanilla twins: 0.01-0.02); the training-time
                              probe (train.sink_probe_every) gives the same per-layer mass as `sinklm analyze`
                              on the same checkpoint and validation sequences
  sequential sink-token model evicting the sink costs perplexity over the seeds: the 95% Student-t interval
                              of 0+W / 1+(W-1) on the log scale (scripts/report/seed_stats.py) lies above 1
                              (measured [1.013, 1.766]: a thin margin, since 2 of 5 seeds pay ~1.07x), and
                              every seed pays >= EVERY_SEED (measured least 1.065x); `sinklm stream
                              --compare`, W = 64, on each seed's held-out test stream; and the
                              seeds that pay >= PAYS are those whose layer 0 sends its trigger queries to
                              the sink token and whose copies fail when it is masked (`sinklm analyze`)
and, for each model, 1+(W-1) within KEEP (2%) of 4+(W-4). That relation holds for a model without a sink too
(a vanilla model's first tokens carry no special weight, so keeping 1 or 4 of them changes nothing), so it is
claimed as "keeping the sink is enough" only for a model in which this run measured a sink: its mass on the
sink >= MASS in every layer >= 1, or evicting it costing >= PENALTY x. For a model without one the same
relation is asserted under a name that claims no sink.
Vanilla twins are not trained here (their figures are in scripts/sink_sweep's table and the compare report).

`--token-mode none` trains the "sink-token" models with model.sink.mode=none: the test must then fail (the sink
forms / evicting it costs), and must not claim "keeping the sink is enough" for either model.
"""
import argparse
import json
import os
import sys
import time

from sinklm_test import BIN, PYTHON, check, config, finish, run, run_sinklm, source_path, temp_dir

sys.path.insert(0, source_path("scripts", "report"))
import seed_stats  # noqa: E402

MASS, PENALTY, KEEP, SEEDS, EVERY_SEED = 0.2, 1.4, 0.02, 5, 1.03
# The mechanism over the same seeds (`sinklm analyze --trigger-tokens`, which the sweep passes): a seed that
# pays >= PAYS for eviction sends >= TRIGGER_MASS of layer 0's trigger queries to the sink token and loses
# >= COPY_COST nats per trigger target when the sink is masked (measured 3 of 5 seeds: 0.41-0.71, +2.8 to +4.7
# nats); at least TRIGGER_SEEDS seeds must show it.
PAYS, TRIGGER_MASS, COPY_COST, TRIGGER_SEEDS = 1.3, 0.3, 1.0, 2
SHORT = ["train.steps=300", "train.sink_probe_every=50", "train.threads=1"]


def layer_mass(heads_json):
    """Per layer, the mean over heads of the mass on the sink token (token models) or position 0 (others)."""
    out = []
    for layer in json.load(open(heads_json))["layers"]:
        values = [h["sink_token"] if "sink_token" in h else h["first_positions"][0] for h in layer["heads"]]
        out.append(sum(values) / len(values))
    return out


def analyze(ckpt, text, segments, out):
    run_sinklm("analyze", "--checkpoint", ckpt, "--text", text, "--tokens", "64", "--segments", str(segments),
               "--out", out)
    return layer_mass(f"{out}/heads.json")


def train(work, data, name, mode, extra=()):
    """Trains one short run; returns (run dir, final checkpoint, held-out sink mass per layer, Table 3 PPLs)."""
    run_dir = f"{work}/{name}"
    args = ["train", "--config", config("synthetic-sink.yaml"), "--out", run_dir, "--resume",
            "--set", f"data.shards={data}", "--set", f"model.sink.mode={mode}"]
    for override in SHORT + list(extra):
        args += ["--set", override]
    run_sinklm(*args)
    ckpt = f"{run_dir}/checkpoints/" + sorted(os.listdir(f"{run_dir}/checkpoints"))[-1]
    mass = analyze(ckpt, f"{data}/test.txt", 32, f"{run_dir}/analyze-test")
    run_sinklm("stream", "--checkpoint", ckpt, "--text", f"{data}/test.txt", "--window", "64", "--compare",
               "--max-tokens", "3000", "--json", f"{run_dir}/stream.json")
    ppl = [r["ppl"] for r in json.load(open(f"{run_dir}/stream.json"))["runs"]]  # 0+W, 1+(W-1), 2+(W-2), 4+(W-4)
    return run_dir, ckpt, mass, ppl


def synthetic_data(work, *flags):
    """The science tests' Bigram-Backcopy stream in WORK/data (kept when it is already there): 1M training
    tokens, 20k each held out; `flags` go to `sinklm prepare synthetic` (e.g. another --seed)."""
    data = f"{work}/data"
    if not os.path.exists(f"{data}/manifest.json"):
        run_sinklm("prepare", "synthetic", "--out", data, "--train-tokens", "1000000", "--validation-tokens", "20000",
                   "--test-tokens", "20000", *flags)
    return data


def describe(mass, ppl):
    return (f"sink mass per layer {[round(m, 3) for m in mass]}, 0+W / 1+(W-1) / 4+(W-4) = "
            f"{ppl[0]:.2f} / {ppl[1]:.2f} / {ppl[3]:.2f} ({ppl[0] / ppl[1]:.2f}x)")


def sink_measured(mass, ppl):
    """Whether this run measured a sink in the model: its mass on the sink token >= MASS in every layer >= 1,
    or evicting the sink costing perplexity, 0+W >= PENALTY x 1+(W-1)."""
    return all(m >= MASS for m in mass[1:]) or ppl[0] >= PENALTY * ppl[1]


def check_keeping(name, mass, ppl):
    """1+(W-1) within KEEP of 4+(W-4): "keeping the sink is enough" where a sink was measured; otherwise the same
    relation, claiming no sink."""
    ok = abs(ppl[1] - ppl[3]) <= KEEP * ppl[3]
    detail = f"1+(W-1) {ppl[1]:.2f} vs 4+(W-4) {ppl[3]:.2f} (within {KEEP:.0%})"
    if sink_measured(mass, ppl):
        check(ok, f"keeping the sink is enough ({name})", detail)
    else:
        check(ok, f"no sink measured ({name}): keeping 1 or 4 first tokens gives the same perplexity",
              f"{detail}; sink mass {[round(m, 3) for m in mass]} (< {MASS} in a layer >= 1), "
              f"0+W / 1+(W-1) = {ppl[0] / ppl[1]:.2f}x (< {PENALTY}x)")


def check_sequential_seeds(work, mode):
    """The eviction penalty over SEEDS seeds, by scripts/sink_sweep itself (the table docs/results.md quotes)."""
    sweep = f"{work}/sweep.json"
    run([PYTHON, source_path("scripts", "sweep", "sink_sweep.py"), "--sinklm", BIN, "--grid", "sequential",
         "--variants", mode, "--seeds", str(SEEDS), "--out", f"{work}/sweep", "--json", sweep])
    runs = json.load(open(sweep))["runs"]
    penalties = [r["evict"] for r in runs]
    for r in runs:
        print(f"sequential sink-token model ({mode}), seed {r['seed']}: {describe(r['sink_mass'], r['ppl'])}")
        check_keeping(f"sequential, seed {r['seed']}", r["sink_mass"], r["ppl"])
    mean, low, high = seed_stats.ratio_interval(penalties)
    detail = (f"0+W / 1+(W-1) per seed {[round(p, 3) for p in penalties]}, geometric mean {mean:.3f}x, 95% t "
              f"interval on the log scale [{low:.3f}, {high:.3f}]")
    check(low > 1.0, f"evicting the sink costs perplexity over {SEEDS} seeds", f"{detail} (need the lower bound above 1)")
    check(min(penalties) >= EVERY_SEED, f"evicting the sink costs perplexity in each of {SEEDS} seeds",
          f"least {min(penalties):.3f}x (need >= {EVERY_SEED}x); {sum(p >= PENALTY for p in penalties)} of {SEEDS} "
          f">= {PENALTY}x")
    check_mechanism(runs)


def check_mechanism(runs):
    """The seeds that pay for eviction are those whose layer 0 sends its trigger queries to the sink token and
    whose copies fail without it (docs/results.md, "The mechanism, measured")."""
    paying = [r for r in runs if r["evict"] >= PAYS]
    shown = [r for r in paying if r["mechanism"]["trigger_mass"][0] >= TRIGGER_MASS
             and r["mechanism"]["masked"]["trigger"] >= COPY_COST]
    detail = "; ".join(f"seed {r['seed']}: {r['evict']:.2f}x, layer-0 trigger mass {r['mechanism']['trigger_mass'][0]:.3f}, "
                       f"masked {r['mechanism']['masked']['trigger']:+.2f} nats at triggers" for r in runs)
    check(len(shown) == len(paying) and len(shown) >= TRIGGER_SEEDS,
          "the seeds that pay for eviction lose their copies without the sink",
          f"{len(shown)} of {len(paying)} paying >= {PAYS}x show it (need all, and >= {TRIGGER_SEEDS}): {detail}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--token-mode", default="token", help="sink mode of the models that should have a sink")
    parser.add_argument("--work", default="", help="keep the runs here (default: a temporary directory)")
    args = parser.parse_args()
    start = time.time()
    with temp_dir("sinklm-science-sink-") as tmp:
        work = args.work or tmp
        data = synthetic_data(work)

        run_dir, ckpt, mass, ppl = train(work, data, "parallel", args.token_mode)
        print(f"parallel sink-token model ({args.token_mode}): {describe(mass, ppl)}")
        check(all(m >= MASS for m in mass[1:]), "the sink forms in every layer >= 1", f"{mass} (need >= {MASS})")
        check_keeping("parallel", mass, ppl)
        # The training-time probe at the last step against `sinklm analyze` on the same validation sequences.
        probe = [json.loads(line) for line in open(f"{run_dir}/metrics.jsonl") if "sink_mass" in line][-1]
        analyzed = analyze(ckpt, f"{data}/validation.txt", 8, f"{run_dir}/analyze-validation")
        step = int(os.path.basename(ckpt).split("_")[-1])
        check(probe["step"] == step, "the probe ran at the checkpoint's step", f"{probe['step']} vs {step}")
        check(all(abs(a - b) <= 1e-4 for a, b in zip(probe["sink_mass"], analyzed)) and len(analyzed) == len(probe["sink_mass"]),
              "the probe agrees with sinklm analyze", f"probe {probe['sink_mass']} vs analyze {analyzed}")

        check_sequential_seeds(work, args.token_mode)

    print(f"the {1 + SEEDS} runs and their measurements took {time.time() - start:.0f} s")
    finish()


if __name__ == "__main__":
    main()
