"""Trains short synthetic models over a grid and seeds and prints their measurements (scripts/sink_sweep --help).

Each setting of the grid, for each seed: a Bigram-Backcopy stream (`sinklm prepare synthetic --seed S`, cached
per data options), one model per sink mode (--variants) trained on it (`sinklm train`, 1 process,
train.threads=1, model.init_seed and data.seed 1233 + S, the same schedule), then on that seed's held-out
test stream: `sinklm analyze` (mean attention over heads per layer on the mode's sink site: the sink token,
the sink column, or position 0; queries in the second half of 64-position segments) and `sinklm stream
--compare` (perplexity through 0+W, 1+(W-1), 2+(W-2), 4+(W-4) with W = the training length), the last
validation loss of metrics.jsonl, the largest |value| of the mode's sink parameters in the checkpoint
(sink_logit, sink_key, sink_value: how far training moved them from their init), and the mechanism: analyze's
sink mass at the trigger queries and elsewhere, the sink's value norm beside the text keys', and the NLL that
masking the sink or putting an ordinary token in its place adds (eval/sinks/sink_interventions.h).

Seed S = 1 is the main job's own seed (data seed 1, init and order seed 1234). With --seeds N > 1, a table of
every (setting, variant, seed) and a summary per (setting, variant): the mean with its 95% Student-t
interval over the N seeds (scripts/report/seed_stats.py), ratios on the log scale (geometric mean), and k of
N: the seeds whose eviction penalty 0+W / 1+(W-1) is at least --effect. --json keeps every value.
"""
import argparse
import concurrent.futures
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "report"))
import seed_stats  # noqa: E402  (scripts/report/seed_stats.py: the report's interval, shared)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/sweep/ -> the repository
SINKLM = os.path.join(ROOT, "build", "sinklm")

# name: (prepare synthetic flags, config overrides). Every setting starts from configs/synthetic.yaml
# (2 layers x 1 head x 128, parallel residual, rotary on 25% of dims, seq 64, lr 1e-3 constant after warmup,
# weight decay 0.5) with --steps (300) of --batch-tokens (4096) and `prepare synthetic`'s defaults (48 symbols, 6 successors,
# triggers '!' (copies 1 back) and '?' (2 back) after 15% of ordinary symbols).
BASE_DATA = {"symbols": 48, "successors": 6, "triggers": 2, "trigger-rate": 0.15, "seed": 1}
AFTER_MARKER = {"rule": "after-marker", "triggers": 1, "marker-rate": 0.08}
GRID = {
    "parallel": ({}, {}),
    "sequential": ({}, {"model.parallel_residual": "false"}),
    "parallel-rotary-all": ({}, {"model.rotary_pct": "1.0"}),
    "parallel-4-triggers": ({"triggers": 4, "trigger-rate": 0.3}, {}),
    "sequential-3-layers": ({}, {"model.parallel_residual": "false", "model.num_layers": "3"}),
    # The copy source needs two layers: the token after the most recent marker '@'.
    "sequential-after-marker": (AFTER_MARKER, {"model.parallel_residual": "false"}),
    "parallel-after-marker": (AFTER_MARKER, {}),
    # Training samples cut from packed documents (about 48 tokens, each followed by '\n'), as in real pretraining;
    # the held-out streams stay one long document, like the paper's books.
    "sequential-documents": ({"document-tokens": 48}, {"model.parallel_residual": "false"}),
    "sequential-3-layers-documents": ({"document-tokens": 48},
                                      {"model.parallel_residual": "false", "model.num_layers": "3"}),
    "sequential-3-layers-4-heads-documents": ({"document-tokens": 48},
                                              {"model.parallel_residual": "false", "model.num_layers": "3",
                                               "model.num_heads": "4"}),
}
# The main job's setting was chosen among these (docs/results.md, "How the main job's setting was chosen"), on
# seeds 101..105 that no report shows: `scripts/sink_sweep --grid selection --variants token --seeds 101-105`.
SEQUENTIAL = {"model.parallel_residual": "false"}
GRID.update({
    "sequential-lr-3e-3": ({}, {**SEQUENTIAL, "train.lr": "3e-3"}),
    "sequential-600-steps-batch-2048": ({}, {**SEQUENTIAL, "train.steps": "600", "train.global_batch_tokens": "2048",
                                         "train.micro_batch": "32"}),
})
# Each costs the base setting's tokens (3 layers: 1.5x the compute), so the main job's budget holds whichever wins.
SELECTION = ["sequential", "sequential-lr-3e-3", "sequential-600-steps-batch-2048", "sequential-3-layers"]
DEFAULT_GRID = ["parallel", "sequential", "parallel-rotary-all"]


def run(cmd, log):
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        sys.exit(f"sink_sweep: command failed (see {log}): {' '.join(cmd)}")


def prepare(out, data, log):
    key = "-".join(f"{k}{v}" for k, v in sorted(data.items()))
    directory = os.path.join(out, "data", key)
    if not os.path.exists(os.path.join(directory, "manifest.json")):
        cmd = [SINKLM, "prepare", "synthetic", "--out", directory]
        for k, v in data.items():
            cmd += [f"--{k}", str(v)]
        run(cmd, log)
    return directory


def newest_checkpoint(run_dir):
    steps = sorted(os.listdir(os.path.join(run_dir, "checkpoints")))
    return os.path.join(run_dir, "checkpoints", steps[-1])


def saved_value(run_dir, key):
    """A value of the run's saved config.yaml, by its last key part (steps, seq_len)."""
    for line in open(os.path.join(run_dir, "config.yaml")):
        if line.strip().startswith(key + ":"):
            return line.split(":", 1)[1].split("#")[0].strip()
    sys.exit(f"sink_sweep: {run_dir}/config.yaml has no '{key}'")


def last_validation_losses(run_dir):
    """(every target, matched context) of the run's last evaluation; NaN where it has none (or, for matched, was
    logged before the trainer reported it)."""
    losses = [r for r in map(json.loads, open(os.path.join(run_dir, "metrics.jsonl"))) if "val_loss" in r]
    return (losses[-1]["val_loss"], losses[-1].get("val_loss_matched", math.nan)) if losses else (math.nan, math.nan)


def sink_parameter_sizes(ckpt):
    """Largest |value| per sink parameter name over the layers (sink_logit, sink_key, sink_value); {} if none."""
    from safetensors.numpy import load_file
    sizes = {}
    for name, tensor in load_file(os.path.join(ckpt, "model.safetensors")).items():
        short = name.rsplit(".", 1)[-1]
        if short in ("sink_logit", "sink_key", "sink_value"):
            sizes[short] = max(sizes.get(short, 0.0), float(abs(tensor.astype("float64")).max()))
    return sizes


def site_mass(head):
    """A head's mass on its mode's sink site (heads.json of `sinklm analyze`)."""
    for key in ("sink_token", "implicit_sink"):
        if key in head:
            return head[key]
    return head["first_positions"][0]


# The synthetic source's trigger characters (data/synthetic/bigram_backcopy.h) and an ordinary symbol: analyze
# splits the sink mass and the interventions' losses at trigger queries from the rest, and puts 'a' in the
# sinks' place for the substitution.
TRIGGERS, ORDINARY = "!?#$%&*+", "a"
INTERVENTIONS = ("masked", "substituted")


def mechanism(heads):
    """Per layer (mean over heads) the sink mass at trigger queries and elsewhere and the sink's value norm over
    the text keys' mean; per intervention the NLL it adds at trigger queries and elsewhere (heads.json). None
    for an analysis cached before analyze measured these (delete the run's analyze/ to measure them)."""
    if "mechanism" not in heads or "sink_at_trigger" not in heads["layers"][0]["heads"][0]:
        return None
    def per_layer(key):
        return [sum(h[key] for h in layer["heads"]) / len(layer["heads"]) for layer in heads["layers"]]
    nll = heads["mechanism"]["interventions"]["nll"]
    value = [s / t for s, t in zip(per_layer("sink_value_norm"), per_layer("value_norm"))]
    out = {"trigger_mass": per_layer("sink_at_trigger"), "other_mass": per_layer("sink_at_other"), "value_ratio": value}
    for name in INTERVENTIONS:
        out[name] = {c: (nll[name][c] - nll["intact"][c]) if nll[name][c] is not None else None
                     for c in ("trigger", "other")}
    return out


def measure(run_dir, data_dir, log, stream_tokens):
    """One trained model's measurements (cached beside it: analyze/heads.json, stream.json)."""
    ckpt = newest_checkpoint(run_dir)
    window = int(saved_value(run_dir, "seq_len"))
    analysis = os.path.join(run_dir, "analyze")
    if not os.path.exists(os.path.join(analysis, "heads.json")):
        run([SINKLM, "analyze", "--checkpoint", ckpt, "--text", f"{data_dir}/test.txt", "--tokens", "64",
             "--segments", "32", "--trigger-tokens", TRIGGERS, "--substitute", ORDINARY, "--out", analysis], log)
    heads = json.load(open(os.path.join(analysis, "heads.json")))
    mass = [sum(site_mass(h) for h in layer["heads"]) / len(layer["heads"]) for layer in heads["layers"]]
    stream_json = os.path.join(run_dir, "stream.json")
    if not os.path.exists(stream_json):
        run([SINKLM, "stream", "--checkpoint", ckpt, "--text", f"{data_dir}/test.txt", "--window", str(window),
             "--compare", "--max-tokens", str(stream_tokens), "--json", stream_json], log)
    ppl = [r["ppl"] for r in json.load(open(stream_json))["runs"]]  # 0+W, 1+(W-1), 2+(W-2), 4+(W-4)
    # Table 2's last row (8 initial tokens kept) and Figure 3's sliding window with re-computation (a token
    # model's every window starts with its sink: --cache recompute's default sinks).
    extra = {name: stream_ppl(run_dir, ckpt, data_dir, window, stream_tokens, log, name, flags)
             for name, flags in (("eight", ["--cache", "sink_window", "--sinks", "8"]), ("recompute", ["--cache", "recompute"]))}
    # Table 6: one sink+window cache of each size W/4 .. 4W (the model's sinks).
    sizes = {size: stream_ppl(run_dir, ckpt, data_dir, size, stream_tokens, log, f"cache{size}", [])
             for size in cache_sizes(window)}
    val_loss, val_loss_matched = last_validation_losses(run_dir)
    return {"steps": int(saved_value(run_dir, "steps")),
            "batch_tokens": int(saved_value(run_dir, "global_batch_tokens")), "cache_sizes": {str(k): v for k, v in sizes.items()}, "val_loss": val_loss, "val_loss_matched": val_loss_matched,
            "sink_mass": mass, "ppl": ppl + [extra["eight"]], "recompute_ppl": extra["recompute"],
            "evict": ppl[0] / ppl[1], "four": ppl[-1] / ppl[1], "sink_parameters": sink_parameter_sizes(ckpt),
            "mechanism": mechanism(heads)}


def cache_sizes(window):
    return [window // 4, window // 2, window, 2 * window, 4 * window]


def stream_ppl(run_dir, ckpt, data_dir, window, stream_tokens, log, name, flags):
    """Perplexity of one more cache policy of `window` entries over the same held-out tokens (cached in
    stream-NAME.json)."""
    path = os.path.join(run_dir, f"stream-{name}.json")
    if not os.path.exists(path):
        run([SINKLM, "stream", "--checkpoint", ckpt, "--text", f"{data_dir}/test.txt", "--window", str(window),
             "--max-tokens", str(stream_tokens), "--json", path] + flags, log)
    return json.load(open(path))["runs"][0]["ppl"]


def seed_data(args, name, seed):
    """The setting's stream for `seed` (prepared once, before any model trains on it)."""
    return prepare(args.out, {**BASE_DATA, **GRID[name][0], "seed": seed}, os.path.join(args.out, "data.log"))


def train_and_measure(args, name, seed, mode):
    overrides = GRID[name][1]
    out = os.path.join(args.out, name, f"seed{seed}", mode)
    os.makedirs(out, exist_ok=True)
    log = os.path.join(out, "sweep.log")
    data_dir = seed_data(args, name, seed)
    config = os.path.join(ROOT, "configs", "synthetic-sink.yaml" if mode == "token" else "synthetic.yaml")
    sets = [f"data.shards={data_dir}", f"model.sink.mode={mode}", "train.threads=1", f"train.steps={args.steps}",
            f"train.global_batch_tokens={args.batch_tokens}", f"model.init_seed={1233 + seed}",
            f"data.seed={1233 + seed}"] + [f"{k}={v}" for k, v in overrides.items()] + args.set
    cmd = [SINKLM, "train", "--config", config, "--out", out, "--resume"]
    for s in sets:
        cmd += ["--set", s]
    run(cmd, log)
    return measure(out, data_dir, log, args.stream_tokens)


def fmt_parameters(sizes):
    return ", ".join(f"{k.removeprefix('sink_')} {v:.3f}" for k, v in sorted(sizes.items())) or "-"


CACHES = ["0+W", "1+(W−1)", "2+(W−2)", "4+(W−4)", "8+(W−8)"]  # the order of a measurement's "ppl"


def per_seed_table(results):
    print("| setting | variant | seed | validation loss: every target / matched context | sink mass per layer | perplexity " + " / ".join(CACHES)
          + " | recompute | 0+W ÷ 1+(W−1) | 4+(W−4) ÷ 1+(W−1) | largest \\|sink parameter\\| |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (name, mode, seed), r in results.items():
        print(f"| {name} | {mode} | {seed} | {r['val_loss']:.4f} / {r.get('val_loss_matched', math.nan):.4f} | {' / '.join(f'{m:.3f}' for m in r['sink_mass'])} "
              f"| {' / '.join(f'{p:.2f}' for p in r['ppl'])} | {r['recompute_ppl']:.2f} | {r['evict']:.3f}x "
              f"| {r['four']:.4f}x | {fmt_parameters(r['sink_parameters'])} |")


def summarize(rows, effect):
    """Mean and 95% interval per measurement over one variant's seeds."""
    layers = len(rows[0]["sink_mass"])
    names = sorted({k for r in rows for k in r["sink_parameters"]})
    return {"seeds": len(rows),
            "val_loss": seed_stats.mean_interval([r["val_loss"] for r in rows]),
            "sink_mass": [seed_stats.share_interval([r["sink_mass"][i] for r in rows]) for i in range(layers)],
            "cache_sizes": {size: seed_stats.ratio_interval([r["cache_sizes"][size] for r in rows])
                            for size in rows[0]["cache_sizes"]},
            "cost": rows[0]["steps"] * rows[0]["batch_tokens"],
            "evict": seed_stats.ratio_interval([r["evict"] for r in rows]),
            "four": seed_stats.ratio_interval([r["four"] for r in rows]),
            "effect_seeds": sum(r["evict"] >= effect for r in rows),
            "sink_parameters": {k: seed_stats.mean_interval([r["sink_parameters"].get(k, 0.0) for r in rows])
                                for k in names},
            "ppl": [seed_stats.mean_interval([r["ppl"][i] for r in rows]) for i in range(len(CACHES))],
            "recompute_ppl": seed_stats.mean_interval([r["recompute_ppl"] for r in rows]),
            "mechanism": summarize_mechanism([r["mechanism"] for r in rows]) if all(r["mechanism"] for r in rows) else None}


def summarize_mechanism(rows):
    """mechanism() of each seed -> the same keys, each value the mean with its 95% interval (None: not defined)."""
    out = {key: [interval([r[key][i] for r in rows]) for i in range(len(rows[0][key]))]
           for key, interval in (("trigger_mass", seed_stats.share_interval), ("other_mass", seed_stats.share_interval),
                                 ("value_ratio", seed_stats.ratio_interval))}
    for name in INTERVENTIONS:
        out[name] = {c: None if rows[0][name][c] is None else seed_stats.mean_interval([r[name][c] for r in rows])
                     for c in ("trigger", "other")}
    return out


def mechanism_table(summaries):
    """What each variant's sink does, over seeds: where its mass goes by query class, its value norm, and what
    masking it or putting an ordinary token in its place costs at trigger queries and elsewhere."""
    print("| setting | variant | seeds | sink mass at triggers | sink mass elsewhere | sink value norm ÷ text's "
          "| masked: +NLL at triggers | masked: +NLL elsewhere | substituted: +NLL at triggers | substituted: +NLL elsewhere |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (name, mode), s in summaries.items():
        m, interval = s["mechanism"], seed_stats.format_interval
        if m is None:
            continue
        layers = [" / ".join(interval(v, 3) for v in m[key]) for key in ("trigger_mass", "other_mass", "value_ratio")]
        costs = [interval(m[i][c], 3) if m[i][c] else "-" for i in INTERVENTIONS for c in ("trigger", "other")]
        print(f"| {name} | {mode} | {s['seeds']} | " + " | ".join(layers + costs) + " |")


def summary_table(summaries, effect):
    print(f"| setting | variant | seeds | validation loss | sink mass per layer | 0+W ÷ 1+(W−1) "
          f"| seeds with 0+W ÷ 1+(W−1) ≥ {effect} | 4+(W−4) ÷ 1+(W−1) | largest \\|sink parameter\\| |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (name, mode), s in summaries.items():
        interval = seed_stats.format_interval
        params = ", ".join(f"{k.removeprefix('sink_')} {interval(v, 3)}" for k, v in s["sink_parameters"].items()) or "-"
        print(f"| {name} | {mode} | {s['seeds']} | {interval(s['val_loss'], 4)} "
              f"| {' / '.join(interval(m, 3) for m in s['sink_mass'])} | {interval(s['evict'], 3, 'x')} "
              f"| {s['effect_seeds']} of {s['seeds']} | {interval(s['four'], 4, 'x')} | {params} |")


def cache_table(summaries):
    """The paper's Table 2 (S initial tokens kept beside W - S recent) and Figure 3's re-computation, over seeds."""
    print("| setting | variant | seeds | " + " | ".join(CACHES) + " | sliding window with re-computation |")
    print("|---|---|---|" + "---|" * (len(CACHES) + 1))
    for (name, mode), s in summaries.items():
        interval = seed_stats.format_interval
        print(f"| {name} | {mode} | {s['seeds']} | " + " | ".join(interval(p) for p in s["ppl"])
              + f" | {interval(s['recompute_ppl'])} |")


def cache_size_table(summaries):
    """The paper's Table 6 over seeds: perplexity with one sink+window cache of each size (geometric mean, 95%
    interval on the log scale); sizes up to W are inside the trained length, where the paper measures."""
    sizes = list(next(iter(summaries.values()))["cache_sizes"])
    print("| setting | variant | seeds | " + " | ".join(f"cache {size}" for size in sizes) + " |")
    print("|---|---|---|" + "---|" * len(sizes))
    for (name, mode), s in summaries.items():
        print(f"| {name} | {mode} | {s['seeds']} | "
              + " | ".join(seed_stats.format_interval(s["cache_sizes"][size]) for size in sizes) + " |")


def chosen_setting(summaries, variant):
    """The rule fixed before the selection ran: the most seeds whose `variant` model pays at least --effect for
    losing its sink (0+W / 1+(W-1)); ties go to the larger geometric-mean penalty, then to the fewer tokens."""
    rows = [(name, s) for (name, mode), s in summaries.items() if mode == variant]
    return max(rows, key=lambda row: (row[1]["effect_seeds"], row[1]["evict"][0], -row[1]["cost"]))[0]


def selection_table(summaries, variant, effect):
    print(f"| setting | seeds | training tokens | 0+W ÷ 1+(W−1) | seeds ≥ {effect} | chosen |")
    print("|---|---|---|---|---|---|")
    chosen = chosen_setting(summaries, variant)
    for (name, mode), s in summaries.items():
        if mode == variant:
            print(f"| {name} | {s['seeds']} | {s['cost'] / 1e6:.2f}M | {seed_stats.format_interval(s['evict'], 3, 'x')} "
                  f"| {s['effect_seeds']} of {s['seeds']} | {'**chosen**' if name == chosen else ''} |")


def paired_table(results, baseline):
    """Each variant against `baseline` on the same seed (same data, init and order seed): the paired difference
    of validation loss (every target, and matched context: the same context lengths in every mode) and the
    paired ratio of 1+(W-1) perplexity, mean with its 95% interval over seeds."""
    print(f"| setting | variant | seeds | validation loss − {baseline}'s | matched-context validation loss − "
          f"{baseline}'s | 1+(W−1) perplexity ÷ {baseline}'s |")
    print("|---|---|---|---|---|---|")
    pairs = {}
    for (name, mode, seed), r in results.items():
        base = results.get((name, baseline, seed))
        if mode != baseline and base is not None:
            pairs.setdefault((name, mode), []).append((r, base))
    for (name, mode), rows in pairs.items():
        loss, matched = (seed_stats.mean_interval([r[key] - b[key] for r, b in rows])
                         for key in ("val_loss", "val_loss_matched"))
        ppl = seed_stats.ratio_interval([r["ppl"][1] / b["ppl"][1] for r, b in rows])
        print(f"| {name} | {mode} | {len(rows)} | {seed_stats.format_interval(loss, 4)} "
              f"| {seed_stats.format_interval(matched, 4)} | {seed_stats.format_interval(ppl, 4, 'x')} |")


def parse_seeds(text):
    """--seeds: 'N' (1..N), 'A-B' (A..B) or 'A,B,...'."""
    try:
        if "," in text:
            seeds = [int(t) for t in text.split(",")]
        elif "-" in text:
            first, last = (int(t) for t in text.split("-"))
            seeds = list(range(first, last + 1))
        else:
            seeds = list(range(1, int(text) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not N, A-B or a comma-separated list of seeds")
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"'{text}' names no seeds, a negative one or one twice")
    return seeds


def main():
    global SINKLM
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "runs", "sink_sweep"))
    parser.add_argument("--sinklm", default=SINKLM, help="the sinklm binary (default build/sinklm); a copy lets a "
                        "sweep run while the build directory is rebuilt")
    parser.add_argument("--grid", default=",".join(DEFAULT_GRID),
                        help=f"settings, comma-separated: {', '.join(GRID)}; or selection ({', '.join(SELECTION)})")
    parser.add_argument("--variants", default="token,none", help="sink modes to train per setting and seed")
    parser.add_argument("--seeds", type=parse_seeds, default=[1],
                        help="seeds per variant (data, init and order seed): N for 1..N, A-B for A..B, or a list A,B,...")
    parser.add_argument("--effect", type=float, default=1.4,
                        help="a seed shows the eviction effect when 0+W / 1+(W-1) >= this (the science test's margin)")
    parser.add_argument("--baseline", default="none", help="the variant every other is paired with, seed by seed")
    parser.add_argument("--jobs", type=int, default=1, help="models trained at once (each on one thread)")
    parser.add_argument("--steps", type=int, default=300, help="training steps per model (configs/synthetic.yaml: 300)")
    parser.add_argument("--batch-tokens", type=int, default=4096,
                        help="tokens per step (configs/synthetic.yaml: 8192)")
    parser.add_argument("--stream-tokens", type=int, default=3000)
    parser.add_argument("--set", action="append", default=[], help="extra config override for every model")
    parser.add_argument("--json", help="write every per-seed value and summary here")
    args = parser.parse_args()
    SINKLM = args.sinklm
    if args.jobs < 1:
        sys.exit("sink_sweep: --jobs must be at least 1")
    grid = SELECTION if args.grid == "selection" else args.grid.split(",")
    for name in grid:
        if name not in GRID:
            sys.exit(f"sink_sweep: unknown setting '{name}' (known: selection, {', '.join(GRID)})")
    os.makedirs(args.out, exist_ok=True)
    keys = [(name, mode, seed) for name in grid for mode in args.variants.split(",") for seed in args.seeds]
    for name, _, seed in keys:
        seed_data(args, name, seed)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {key: pool.submit(train_and_measure, args, key[0], key[2], key[1]) for key in keys}
        results = {key: futures[key].result() for key in keys}
    print(f"{args.steps} steps of {args.batch_tokens} tokens per model, W = the training length, "
          f"{args.stream_tokens} held-out tokens per stream.\n")
    per_seed_table(results)
    summaries = {}
    for name, mode, _ in keys:
        if (name, mode) not in summaries:
            summaries[(name, mode)] = summarize([r for k, r in results.items() if k[:2] == (name, mode)], args.effect)
    if len(args.seeds) > 1:
        print("\nMean over seeds with its 95% Student-t interval (ratios: geometric mean, interval on the log scale; "
              "attention masses: on the logit scale, so inside (0, 1)):\n")
        summary_table(summaries, args.effect)
        print("\nThe mechanism (`sinklm analyze --trigger-tokens --substitute`, same held-out stream; per layer, "
              "mean over heads; 32 segments of 64 tokens per seed; +NLL: nats added per far target, paired with the intact model; 95% Student-t "
              "interval):\n")
        mechanism_table(summaries)
        print("\nPerplexity by cache (mean over seeds, 95% Student-t interval; W = the training length):\n")
        cache_table(summaries)
        print("\nTable 6 over seeds: one sink+window cache of each size (W = the training length):\n")
        cache_size_table(summaries)
        if args.grid == "selection":
            print(f"\nThe selection rule (fixed before it ran): the most seeds whose {args.variants.split(',')[0]} model "
                  f"pays ≥ {args.effect}x for losing its sink; ties: the larger geometric mean, then fewer tokens.\n")
            selection_table(summaries, args.variants.split(",")[0], args.effect)
        if args.baseline in args.variants.split(","):
            print(f"\nPaired with the {args.baseline} model of the same seed (mean of the per-seed differences or "
                  "ratios, 95% Student-t interval):\n")
            paired_table(results, args.baseline)
    if args.json:
        json.dump({"steps": args.steps, "batch_tokens": args.batch_tokens, "stream_tokens": args.stream_tokens,
                   "effect": args.effect,
                   "runs": [{"setting": k[0], "variant": k[1], "seed": k[2], **r} for k, r in results.items()],
                   "summaries": [{"setting": k[0], "variant": k[1], **s} for k, s in summaries.items()]},
                  open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
