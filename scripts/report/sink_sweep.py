"""Search for a CPU-scale recipe that forms an attention sink (scripts/sink_sweep --help).

Each setting of the grid: a Bigram-Backcopy stream (`sinklm prepare synthetic`, cached per data options),
a sink-token model and its vanilla twin trained on it (`sinklm train`, 1 process, train.threads=1, same seed
and schedule), then on the held-out test stream: `sinklm analyze` (mean attention over heads per layer on the
sink token / on position 0, queries in the second half of 64-position segments) and `sinklm stream --compare`
(perplexity through 0+W, 1+(W-1), 2+(W-2), 4+(W-4) with W = the training length). One markdown table on
stdout; the targets (issue 10) are: sink-token model >= 0.5 on its sink in every layer >= 1, 0+W >= 2x
1+(W-1), and 1+(W-1) within 2% of 4+(W-4).
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/report/ -> the repository
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
DEFAULT_GRID = ["parallel", "sequential", "parallel-rotary-all"]


def run(cmd, log):
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        sys.exit(f"sink_sweep: command failed (see {log}): {' '.join(cmd)}")


def cpu_seconds():
    t = os.times()
    return t.children_user + t.children_system


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


def measure(run_dir, data_dir, window, stream_tokens, log):
    ckpt = newest_checkpoint(run_dir)
    analysis = os.path.join(run_dir, "analyze")
    if not os.path.exists(os.path.join(analysis, "heads.json")):
        run([SINKLM, "analyze", "--checkpoint", ckpt, "--text", f"{data_dir}/test.txt", "--tokens", "64",
             "--segments", "32", "--out", analysis], log)
    heads = json.load(open(os.path.join(analysis, "heads.json")))
    mass = []
    for layer in heads["layers"]:
        values = [h["sink_token"] if "sink_token" in h else h["first_positions"][0] for h in layer["heads"]]
        mass.append(sum(values) / len(values))
    stream_json = os.path.join(run_dir, "stream.json")
    if not os.path.exists(stream_json):
        run([SINKLM, "stream", "--checkpoint", ckpt, "--text", f"{data_dir}/test.txt", "--window", str(window),
             "--compare", "--max-tokens", str(stream_tokens), "--json", stream_json], log)
    ppl = {r["config"]: r["ppl"] for r in json.load(open(stream_json))["runs"]}
    return mass, ppl


def main():
    global SINKLM
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "runs", "sink_sweep"))
    parser.add_argument("--sinklm", default=SINKLM, help="the sinklm binary (default build/sinklm); a copy lets a "
                        "sweep run while the build directory is rebuilt")
    parser.add_argument("--grid", default=",".join(DEFAULT_GRID), help=f"settings, comma-separated: {', '.join(GRID)}")
    parser.add_argument("--variants", default="token,none", help="sink modes to train per setting")
    parser.add_argument("--steps", type=int, default=300, help="training steps per model (configs/synthetic.yaml: 300)")
    parser.add_argument("--batch-tokens", type=int, default=4096,
                        help="tokens per step (configs/synthetic.yaml: 8192)")
    parser.add_argument("--stream-tokens", type=int, default=3000)
    parser.add_argument("--set", action="append", default=[], help="extra config override for every setting")
    parser.add_argument("--stop-at-target", action="store_true", help="stop after the first setting that meets the targets")
    args = parser.parse_args()
    SINKLM = args.sinklm
    os.makedirs(args.out, exist_ok=True)
    log = os.path.join(args.out, "sweep.log")
    rows = []
    print("| setting | steps | CPU min (pair) | token model: sink mass per layer | token: 0+W / 1+(W-1) / 4+(W-4) "
          "| 0+W ÷ 1+(W-1) | vanilla: position-0 mass per layer | vanilla: 0+W / 4+(W-4) | targets |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    for name in args.grid.split(","):
        if name not in GRID:
            sys.exit(f"sink_sweep: unknown setting '{name}' (known: {', '.join(GRID)})")
        data_flags, overrides = GRID[name]
        data_dir = prepare(args.out, {**BASE_DATA, **data_flags}, log)
        sets = [f"train.steps={args.steps}", f"train.global_batch_tokens={args.batch_tokens}"] + [f"{k}={v}" for k, v in overrides.items()] + args.set
        results, cpu_start = {}, cpu_seconds()
        steps = "?"
        for mode in args.variants.split(","):
            run_dir = os.path.join(args.out, name, mode)
            config = os.path.join(ROOT, "configs", "synthetic-sink.yaml" if mode == "token" else "synthetic.yaml")
            cmd = [SINKLM, "train", "--config", config, "--out", run_dir, "--resume",
                   "--set", f"data.shards={data_dir}", "--set", f"model.sink.mode={mode}", "--set", "train.threads=1"]
            for s in sets:
                cmd += ["--set", s]
            run(cmd, log)
            saved = open(os.path.join(run_dir, "config.yaml")).read()
            steps = next((line.split(":")[1].split("#")[0].strip() for line in saved.splitlines()
                          if line.strip().startswith("steps:")), "?")
            window = int(next(line.split(":")[1].split("#")[0] for line in saved.splitlines()
                              if line.strip().startswith("seq_len:")))
            results[mode] = measure(run_dir, data_dir, window, args.stream_tokens, log)
        cpu_min = (cpu_seconds() - cpu_start) / 60
        row = [name, steps, f"{cpu_min:.1f}"]
        met = None
        if "token" in results:
            mass, ppl = results["token"]
            keys = list(ppl)
            evicted, one, four = ppl[keys[0]], ppl[keys[1]], ppl[keys[-1]]
            met = all(m >= 0.5 for m in mass[1:]) and evicted >= 2 * one and abs(one - four) <= 0.02 * four
            row += [" / ".join(f"{m:.2f}" for m in mass), f"{evicted:.2f} / {one:.2f} / {four:.2f}",
                    f"{evicted / one:.2f}x"]
        else:
            row += ["-", "-", "-"]
        if "none" in results:
            mass, ppl = results["none"]
            keys = list(ppl)
            row += [" / ".join(f"{m:.2f}" for m in mass), f"{ppl[keys[0]]:.2f} / {ppl[keys[-1]]:.2f}"]
        else:
            row += ["-", "-"]
        row.append("-" if met is None else ("**met**" if met else "no"))
        print("| " + " | ".join(row) + " |", flush=True)
        rows.append(row)
        if met and args.stop_at_target:
            break


if __name__ == "__main__":
    main()
