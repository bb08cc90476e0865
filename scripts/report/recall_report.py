"""The "what a sink does not keep" section of a scripts/compare report (markdown on stdout, recall.png beside it).

usage: recall_report.py OUT_DIR RECALL_DIR RUN [RUN ...]
  RECALL_DIR (relative to OUT_DIR) holds data/manifest.json (`sinklm prepare synthetic --task recall`), per run
  NAME the training run NAME/ and probe-NAME.json (`sinklm stream --recall`).

Per run: recall accuracy by fact-to-query distance for every cache policy (chance and the cache size beside
it), the filler's NLL after the cache first evicts, and top-1 agreement with the full cache; one PNG with a
panel per run (accuracy vs distance, one line per policy, W marked).
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from compare_report import training_rows


def load(path):
    if not os.path.exists(path):
        sys.exit(f"recall_report: {path}: missing (scripts/compare writes it)")
    return json.load(open(path))


def trained_length(run_dir):
    for line in open(os.path.join(run_dir, "config.yaml")):
        if line.strip().startswith("seq_len:"):
            return int(line.split(":")[1].split("#")[0])
    return None


def table(name, result, trained):
    points = result["policies"][0]["points"]
    window = result["window"]
    print(f"**{name}** ({result['sink_mode']}), cache W = {window}, {result['pairs']} queries per distance, "
          f"chance {result['chance']:.3f}:\n")
    print("| policy | " + " | ".join(f"d={p['distance']}" + (" (>W)" if p["distance"] > window else "") for p in points)
          + " | filler NLL after eviction | agreement with " + result["reference"] + " | KV entries (most) |")
    print("|---|" + "---|" * (len(points) + 3))
    for policy in result["policies"]:
        nll = [p["filler_nll_after_eviction"] for p in policy["points"] if p["filler_nll_after_eviction"] is not None]
        agreement = sum(p["agreement_with_reference"] for p in policy["points"]) / len(policy["points"])
        print(f"| {policy['label']} | " + " | ".join(f"{p['accuracy']:.2f}" for p in policy["points"])
              + f" | {sum(nll) / len(nll):.3f} | {agreement:.3f} | {max(p['max_kv_entries'] for p in policy['points'])} |")
    print()
    full = [p for p in result["policies"] if p["cache"] == "full"]
    if full and trained:
        most = max(p["max_kv_entries"] for p in full[0]["points"])
        if most > trained:
            print(f"The full cache holds up to {most} entries, so its positions run past the {trained} the model was "
                  "trained on: like dense attention in Table 3 it is out of its range there, which its filler NLL "
                  "and its agreement with the bounded caches show.\n")


def plot(results, path):
    fig, axes = plt.subplots(1, len(results), figsize=(max(7.5, 5.2 * len(results)), 4.0), sharey=True)
    axes = axes if len(results) > 1 else [axes]
    for ax, (name, result) in zip(axes, results):
        for i, policy in enumerate(result["policies"]):
            d = [p["distance"] for p in policy["points"]]
            ax.plot(d, [p["accuracy"] for p in policy["points"]], marker="o", color=f"C{i}", label=policy["label"])
        ax.axvline(result["window"], color="grey", linestyle=":", label=f"cache size W = {result['window']}")
        ax.axhline(result["chance"], color="black", linestyle="--", linewidth=0.8, label="chance")
        ax.set_xscale("log", base=2)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("distance from fact to query (tokens)")
        ax.set_title(f"{name} ({result['sink_mode']})")
    axes[0].set_ylabel("recall accuracy (top-1 = the fact's value)")
    axes[-1].legend(fontsize=8, loc="center left")
    fig.suptitle("Recall vs distance: facts planted d tokens before their queries", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    out, directory, runs = argv[1], argv[2], argv[3:]
    recall_dir = os.path.join(out, directory)
    manifest = load(os.path.join(recall_dir, "data", "manifest.json"))["synthetic"]
    options, test = manifest["recall"], manifest["splits"].get("test", {})
    print("## What a sink does not keep: long-range recall\n")
    print(f"`sinklm prepare synthetic --task recall` (seed {options['seed']}): filler from a Markov chain of order {options.get('order', 1)} over "
          f"{options['symbols']} symbols; after a filler symbol, with probability {options['fact_rate']}, a fact "
          f"'@ K v' ({options['keys']} keys), asked once as '? K v' {options['min_distance']} to "
          f"{options['max_distance']} tokens later (uniformly). The held-out split has {test.get('queries', 0)} "
          f"queries at a mean distance of {test.get('mean_distance', 0):.0f}. The probe (`sinklm stream --recall`) "
          "streams W filler tokens and then facts asked exactly d tokens later, through every cache policy; "
          "perplexity measures local prediction, recall measures what was kept.\n")
    training_rows([os.path.join(recall_dir, run) for run in runs])
    print()
    results = [(run, load(os.path.join(recall_dir, f"probe-{run}.json"))) for run in runs]
    for name, result in results:
        table(name, result, trained_length(os.path.join(recall_dir, name)))
    plot(results, os.path.join(out, "recall.png"))
    print("![recall vs distance](recall.png)\n")
    for name, result in results:
        window = result["window"]
        parts = []
        for policy in result["policies"]:
            inside = [p["accuracy"] for p in policy["points"] if p["distance"] < window]
            beyond = [p["accuracy"] for p in policy["points"] if p["distance"] > window]
            if inside and beyond:
                parts.append(f"{policy['label']} {sum(inside) / len(inside):.2f} within W, "
                             f"{sum(beyond) / len(beyond):.2f} beyond")
        print(f"- {name}: mean accuracy " + "; ".join(parts) + f" (chance {result['chance']:.3f}).")
    print()


if __name__ == "__main__":
    main(sys.argv)
