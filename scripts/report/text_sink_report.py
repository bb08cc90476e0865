"""The long natural-text run of scripts/text_sink_run: its test text per source, then its report.

  text_sink_report.py sources CORPUS_DIR OUT_DIR   one OUT_DIR/<source>.txt per source: that source's test
                                                   documents (CORPUS_DIR/test.jsonl, file order) joined by
                                                   blank lines
  text_sink_report.py report RUN_DIR WINDOW        report.md on stdout; RUN_DIR/summary.json and
                                                   RUN_DIR/text_sink_onset.png

A sink "forms" here by the criterion fixed before the run: some (layer, head) gives the first position more
than 0.3 of its attention on average (Gu et al.'s Sink_1^0.3 > 0), or some layer's mean mass on the sink
(position 0 for the vanilla model) exceeds 0.3.
"""
import collections
import glob
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

VARIANTS = ("none", "token")
THRESHOLD = 0.3


def write_sources(corpus, out):
    texts = collections.defaultdict(list)
    with open(os.path.join(corpus, "test.jsonl")) as f:
        for number, line in enumerate(f, 1):
            try:
                document = json.loads(line)
                texts[document["id"].split("/")[0]].append(document["text"])
            except (json.JSONDecodeError, KeyError) as e:
                sys.exit(f"text_sink_report: {corpus}/test.jsonl:{number}: not a corpus document ({e})")
    os.makedirs(out, exist_ok=True)
    for source, documents in sorted(texts.items()):
        with open(os.path.join(out, f"{source}.txt"), "w") as f:
            f.write("\n\n".join(documents))


def metrics(run):
    with open(os.path.join(run, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def tokens_per_step(records):
    for r in records:
        if "tokens" in r and r.get("step"):
            return r["tokens"] / r["step"]
    return math.nan


def stream_table(run_dir, variant):
    """{step: {source: {config: ppl}}} from RUN_DIR/stream/<variant>-step_<N>-<source>.json."""
    table = collections.defaultdict(dict)
    for path in sorted(glob.glob(os.path.join(run_dir, "stream", f"{variant}-step_*.json"))):
        name = os.path.basename(path)[len(variant) + 1:-len(".json")]
        step, source = name.split("-", 1)
        with open(path) as f:
            runs = json.load(f)["runs"]
        table[int(step[len("step_"):])][source] = {r["config"]: r["ppl"] for r in runs}
    return table


def geometric(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def configs(window):
    return [f"0+{window}", f"1+{window - 1}", f"4+{window - 4}"]


def summarise(run_dir, window):
    summary = {"window": window, "threshold": THRESHOLD, "variants": {}}
    for variant in VARIANTS:
        records = metrics(os.path.join(run_dir, f"tiny-{variant}"))
        per_step = tokens_per_step(records)
        probes = [r for r in records if "sink_mass" in r]
        formed = [r for r in probes if r["sink_1"] > 0 or max(r["sink_mass"]) > THRESHOLD]
        streams = stream_table(run_dir, variant)
        speed = [r["tokens_per_s"] for r in records if "tokens_per_s" in r]
        summary["variants"][variant] = {
            "tokens_per_step": per_step,
            "tokens_per_s": sorted(speed)[len(speed) // 2] if speed else math.nan,
            "probes": [{"step": r["step"], "tokens": r["step"] * per_step, "sink_mass": r["sink_mass"],
                        "sink_1": r["sink_1"]} for r in probes],
            "validation": [{"step": r["step"], "val_loss": r["val_loss"]} for r in records if "val_loss" in r],
            "onset_step": formed[0]["step"] if formed else None,
            "streams": {str(step): sources for step, sources in sorted(streams.items())},
        }
    return summary


def plot(summary, path):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    window = summary["window"]
    first, evicted = configs(window)[1], configs(window)[0]
    for i, (variant, v) in enumerate(summary["variants"].items()):
        tokens = [p["tokens"] / 1e6 for p in v["probes"]]
        for layer in range(len(v["probes"][0]["sink_mass"]) if v["probes"] else 0):
            axes[0].plot(tokens, [p["sink_mass"][layer] for p in v["probes"]], color=f"C{i}",
                         linestyle=["-", "--", ":", "-."][layer % 4], label=f"{variant}, layer {layer}")
        axes[1].plot(tokens, [p["sink_1"] for p in v["probes"]], color=f"C{i}", marker=".", label=variant)
        steps = sorted(v["streams"], key=int)
        ratio = [geometric([s[evicted] / s[first] for s in v["streams"][step].values()]) for step in steps]
        axes[2].plot([int(step) * v["tokens_per_step"] / 1e6 for step in steps], ratio, color=f"C{i}",
                     marker="o", label=variant)
    axes[0].axhline(THRESHOLD, color="grey", linewidth=0.8)
    axes[0].set_ylabel("mean attention on the sink token\n(vanilla: on position 0)")
    axes[0].set_title("sink mass per layer (queries 32..63 of 64)")
    axes[1].set_ylabel("Sink_1^0.3 (fraction of the 16 heads)")
    axes[1].set_title("heads giving the first position > 0.3")
    axes[2].axhline(1.0, color="grey", linewidth=0.8)
    axes[2].set_ylabel(f"perplexity {evicted} / {first}\n(geometric mean over sources)")
    axes[2].set_title("cost of evicting the first token")
    for ax in axes[:2]:
        ax.set_ylim(-0.02, 1.02)
    for ax in axes:
        ax.set_xlabel("training tokens (millions)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Natural text (every Debian source), tiny 4 x 4 x 128 pair, lr 2e-3 constant, weight decay 0.5")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(summary):
    window = summary["window"]
    names = configs(window)
    print("## Sinks on natural text, one long run (scripts/text_sink_run)\n")
    print("| model | step | tokens | validation loss | sink mass per layer | Sink_1^0.3 | " +
          " | ".join(f"PPL {c}" for c in names) + f" | {names[0]} / {names[1]} |")
    print("|---|---|---|---|---|---|" + "---|" * (len(names) + 1))
    for variant, v in summary["variants"].items():
        probes = {p["step"]: p for p in v["probes"]}
        val = {r["step"]: r["val_loss"] for r in v["validation"]}
        for step in sorted(v["streams"], key=int):
            sources = v["streams"][step]
            ppl = [geometric([s[c] for s in sources.values()]) for c in names]
            p = probes.get(int(step))
            mass = " / ".join(f"{m:.3f}" for m in p["sink_mass"]) if p else "-"
            print(f"| {variant} | {step} | {int(step) * v['tokens_per_step'] / 1e6:.1f}M | "
                  f"{val.get(int(step), math.nan):.3f} | {mass} | {p['sink_1'] if p else math.nan:.3f} | " +
                  " | ".join(f"{x:.2f}" for x in ppl) + f" | {ppl[0] / ppl[1]:.3f}x |")
    print("\n*Perplexities: geometric mean over the sources' test text (the per-source rows follow).*\n")
    for variant, v in summary["variants"].items():
        if not v["streams"]:
            continue
        last = max(v["streams"], key=int)
        print(f"\n{variant} at step {last}, per source:\n")
        print("| source | " + " | ".join(f"PPL {c}" for c in names) + " |")
        print("|---|" + "---|" * len(names))
        for source, ppl in sorted(v["streams"][last].items()):
            print(f"| {source} | " + " | ".join(f"{ppl[c]:.2f}" for c in names) + " |")
    print()
    for variant, v in summary["variants"].items():
        peak = max((max(p["sink_mass"]) for p in v["probes"]), default=math.nan)
        verdict = (f"a sink formed at step {v['onset_step']}" if v["onset_step"] is not None else
                   f"no sink formed (largest layer mass {peak:.3f}, threshold {THRESHOLD})")
        print(f"- {variant}: {verdict}; training speed {v['tokens_per_s']:.0f} tokens/s (median of logged steps).")


def main(argv):
    if len(argv) == 4 and argv[1] == "sources":
        write_sources(argv[2], argv[3])
    elif len(argv) == 4 and argv[1] == "report":
        run_dir, window = argv[2], int(argv[3])
        summary = summarise(run_dir, window)
        with open(os.path.join(run_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        plot(summary, os.path.join(run_dir, "text_sink_onset.png"))
        report(summary)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
