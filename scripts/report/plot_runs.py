"""Draw train and validation loss of several sinklm runs (metrics.jsonl) in one figure."""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def read_metrics(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        sys.exit(f"plot_runs: {path}: no metrics.jsonl (is {run_dir} a `sinklm train --out` directory?)")
    train, val = [], []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"plot_runs: {path}:{number}: not JSON ({e})")
            if "loss" in record and not record.get("skipped"):
                train.append((record["step"], record["loss"]))
            if "val_loss" in record:
                val.append((record["step"], record["val_loss"]))
    return train, val


def main(argv):
    if len(argv) < 3:
        sys.exit("usage: scripts/report/plot_runs OUT.png RUN_DIR [RUN_DIR ...]")
    out, runs = argv[1], argv[2:]
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, run in enumerate(runs):
        train, val = read_metrics(run)
        label = os.path.basename(os.path.normpath(run))
        color = f"C{i}"
        if train:
            ax.plot(*zip(*train), marker="." if len(train) < 30 else None, color=color, alpha=0.8,
                    label=f"{label} (train)")
        if val:
            ax.plot(*zip(*val), "o--", color=color, label=f"{label} (validation)")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats/token)")
    ax.set_title("sinklm training runs")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv)
