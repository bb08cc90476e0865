"""Write report.md for a scripts/compare run directory (stdout): training, streaming perplexity in the shape of
StreamingLLM's Table 3, zero-shot accuracy on the official sets, attention-sink analysis, each beside the paper's
figures."""
import json
import os
import sys

import headline
import zero_shot_stats

PAPER_STREAM = {"Vanilla": ["27.87", "18.49", "18.05", "18.05"], "Zero Sink": ["29214", "19.90", "18.27", "18.01"],
                "Learnable Sink": ["1235", "18.01", "18.01", "18.02"]}
# Tasks whose text is not what lm-eval scores under that name (eval/zero_shot/tasks/task_formats.cpp: the task's variant).
VARIANTS = {"hellaswag": "llama.cpp text form"}
PAPER_ZERO_SHOT = [("Vanilla", [18.6, 45.2, 29.4, 39.6, 16.0, 62.2, 50.1]),
                   ("+ Sink token", [19.6, 45.6, 29.8, 39.9, 16.6, 62.6, 50.8])]


def load(path):
    return json.load(open(path)) if os.path.exists(path) else None


def validation_cell(record, key):
    return f"{record[key]:.4f}" if record and key in record else "-"


TRAIN_LOSS_SHARE = 0.1  # the train loss is a mean over the logged steps of the last 10% of training: one batch is noise


def training_rows(runs):
    print(f"| run | steps | tokens | train loss (mean over the logged steps of the last {TRAIN_LOSS_SHARE:.0%}) | "
          "final validation loss | same, matched context |")
    print("|---|---|---|---|---|---|")
    for run in runs:
        rows = [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl"))]
        train = [r for r in rows if "loss" in r]
        val = [r for r in rows if "val_loss" in r]
        last = val[-1] if val else None
        recent = [r for r in train if r["step"] > (1 - TRAIN_LOSS_SHARE) * train[-1]["step"]] or train[-1:]
        loss = sum(r["loss"] for r in recent) / len(recent)
        print(f"| {os.path.basename(run)} | {train[-1]['step']} | {int(train[-1]['tokens']):,} | "
              f"{loss:.4f} ({len(recent)} logged, steps {recent[0]['step']}–{recent[-1]['step']}) | "
              f"{validation_cell(last, 'val_loss')} | {validation_cell(last, 'val_loss_matched')} |")
    print("\n*Matched context: the mean over targets with 1 .. seq_len−2 text tokens of context, the same in every "
          "sink mode (a sink-token model's first target, predicted from the sink alone, and a vanilla model's last "
          "are left out); the plain validation loss counts every target. Each run is one seed.*\n")
    configuration_rows(runs)


CONFIGURATION = [("model", "sink.mode", "sink"), ("model", "num_layers", "layers"), ("model", "num_heads", "heads"),
                 ("model", "hidden_size", "width"), ("model", "parallel_residual", "parallel residual"),
                 ("model", "rotary_pct", "rotary share"), ("train", "seq_len", "sample length"),
                 ("train", "global_batch_tokens", "tokens per step"), ("train", "steps", "steps"),
                 ("train", "lr", "peak lr"), ("train", "min_lr_ratio", "final lr ÷ peak"),
                 ("train", "warmup_fraction", "warm-up share"), ("train", "weight_decay", "weight decay"),
                 ("model", "init_seed", "init seed"), ("data", "seed", "order seed"),
                 ("data", "validation_batches", "validation batches")]


def configuration_rows(runs):
    """What each run was: architecture and schedule from its config.yaml (the run's resolved configuration)."""
    import yaml
    print("| run | " + " | ".join(label for _, _, label in CONFIGURATION) + " |")
    print("|---|" + "---|" * len(CONFIGURATION))
    for run in runs:
        config = yaml.safe_load(open(os.path.join(run, "config.yaml")))
        def value(section, key):
            node = config.get(section, {})
            for part in key.split("."):
                node = node.get(part, "?") if isinstance(node, dict) else "?"
            return node
        print(f"| {os.path.basename(run)} | " + " | ".join(str(value(section, key)) for section, key, _ in CONFIGURATION) + " |")
    print()


def streaming(out, names, window):
    header = None
    lines = []
    for name in names:
        summary = load(f"{out}/stream-{name}.json")
        full = load(f"{out}/stream-{name}-full.json")
        if not summary:
            continue
        runs = summary["runs"]
        header = [r["config"] for r in runs]
        full_ppl = f"{full['runs'][0]['ppl']:.2f}" if full else "-"
        lines.append(f"| {name} ({summary['sink_mode']}) | " + " | ".join(f"{r['ppl']:.2f}" for r in runs) +
                     f" | {full_ppl} |")
        tokens = runs[0]["scored_tokens"]
    if not header:
        print("(no streaming results)")
        return
    print(f"Perplexity over {tokens:,} held-out tokens streamed through a {window}-entry cache (S+R: S sinks kept,"
          f" R most recent; positions inside the cache). `full` keeps every token (dense attention, positions "
          f"far past the trained length).\n")
    print("| model | " + " | ".join(header) + " | full |")
    print("|---" * (len(header) + 2) + "|")
    for line in lines:
        print(line)
    print("\nStreamingLLM, Table 3 (160M models, cache 1024, first PG19 book):\n")
    print("| model | 0+1024 | 1+1023 | 2+1022 | 4+1020 |")
    print("|---|---|---|---|---|")
    for model, values in PAPER_STREAM.items():
        print(f"| {model} | " + " | ".join(values) + " |")


# "No cost" needs an equivalence margin: a paired difference whose 90% interval lies inside +-2 accuracy points.
EQUIVALENCE_MARGIN = 0.02


def p_text(p):
    return "< 1e-300" if p == 0 else f"{p:.2g}"


def chance_p(item):
    """The two-sided p-value of the item's number right against uniform guessing, or None (no fixed chance)."""
    choices = item.get("choices_per_document") or []
    if not choices or not item.get("per_document") or not item["metric"].startswith("acc"):
        return None
    return zero_shot_stats.chance_test(int(round(sum(item["per_document"]))), choices)["p_value"]


def above_chance(item):
    """Better than guessing at 5% (two-sided p < 0.05 and above chance); with no fixed chance, above 0."""
    p = chance_p(item)
    if p is None:
        return item["value"] > 0
    return p < 0.05 and item["value"] > item["chance"]


def score_cell(item):
    if not item["metric"].startswith("acc"):
        return f"{item['value']:.2f} ± {item['stderr']:.2f}"
    p = chance_p(item)
    return f"{100 * item['value']:.2f} ± {100 * item['stderr']:.2f}" + (f" (p {p_text(p)})" if p is not None else "")


def paired_rows(results, keys):
    """B - A per (task, metric) on the same documents: the mean, its 95% interval and the equivalence verdict."""
    (name_a, a), (name_b, b) = list(results.items())[:2]
    print(f"\nPaired difference on the same documents, {name_b} − {name_a}: the mean per-document difference with its "
          f"95% Student-t interval; accuracy in points. Equivalence (two one-sided tests at 5%): equivalent when the 90% "
          f"interval lies inside ±{100 * EQUIVALENCE_MARGIN:.0f} points, the margin within which we would call the "
          "models' quality the same; different when the 95% interval excludes 0; otherwise undecided; 'not above chance' "
          "where a model's number right is not significantly above a guesser's. LAMBADA's "
          "perplexity is compared as the mean log-probability of the word (nats), with no margin.\n")
    print("| task | metric | n | B − A | 95% interval | 90% interval | verdict |")
    print("|---|---|---|---|---|---|---|")
    verdicts = []
    for task, metric in keys:
        x = next((i for i in a["results"] if (i["task"], i["metric"]) == (task, metric)), None)
        y = next((i for i in b["results"] if (i["task"], i["metric"]) == (task, metric)), None)
        if not x or not y or not x.get("per_document") or x.get("data_sha256") != y.get("data_sha256") \
                or len(x["per_document"]) != len(y["per_document"]):
            continue
        accuracy = metric.startswith("acc")
        e = zero_shot_stats.equivalence(x["per_document"], y["per_document"], EQUIVALENCE_MARGIN)
        scale = 100 if accuracy else 1
        verdict = e["verdict"] if accuracy else ("different" if e["low"] > 0 or e["high"] < 0 else "no difference shown")
        if accuracy and not (above_chance(x) and above_chance(y)):  # a model that learned nothing has nothing to lose
            verdict += ", a model not above chance"
        if accuracy and metric == "acc":
            verdicts.append(verdict)
        print(f"| {task} | {metric if accuracy else 'word log-prob'} | {e['n']} | {scale * e['mean']:+.2f} | "
              f"[{scale * e['low']:+.2f}, {scale * e['high']:+.2f}] | [{scale * e['tost_low']:+.2f}, "
              f"{scale * e['tost_high']:+.2f}] | {verdict} |")
    if verdicts:
        counts = {v: sum(w.split(",")[0] == v for w in verdicts) for v in ("equivalent", "different", "undecided")}
        at_chance = sum(w.endswith("not above chance") for w in verdicts)
        print(f"\nOn acc, of {len(verdicts)} sets: {counts['equivalent']} equivalent within ±"
              f"{100 * EQUIVALENCE_MARGIN:.0f} points, {counts['different']} different, {counts['undecided']} undecided; "
              f"on {at_chance} of them a model scores no better than guessing (p >= 0.05, or below chance; LAMBADA: 0), "
              "where equivalence says only that a model did not learn the task, not that the sink costs nothing.")


def zero_shot(out, names):
    results = {}
    for n in names:  # one results list per model
        items = (load(f"{out}/eval-{n}.json") or {}).get("results", [])
        if items:
            results[n] = {"results": items}
    if not results:
        print("(no zero-shot results)")
        return
    keys = []
    for r in results.values():
        for item in r["results"]:
            if (item["task"], item["metric"]) not in keys:
                keys.append((item["task"], item["metric"]))
    print("ARC-Challenge, ARC-Easy, HellaSwag, LAMBADA (OpenAI), OpenBookQA, PIQA and Winogrande: the official "
          "evaluation splits, embedded in sinklm (`sinklm eval --tasks all`; sources and licences in "
          "eval/benchmarks/). HellaSwag is its 10,042 validation items in llama.cpp's text form, whose text is "
          "cleaned differently from lm-eval's preprocessing: its scores are close to, not identical with, "
          "lm-eval's `hellaswag` (the paper's). Accuracy in %, ± standard error, and in brackets the exact "
          "two-sided p-value of the number right against uniform guessing (chance: the mean over documents of "
          "1/choices; scripts/report/zero_shot_stats.py); LAMBADA's greedy word has no fixed chance, its "
          "perplexity is as is.\n")
    print("| task | data | metric | n | chance | " + " | ".join(results) + " |")
    print("|---|---|---|---|---" + "|---" * len(results) + "|")
    for task, metric in keys:
        cells, n, chance = [], "-", "-"
        for r in results.values():
            item = next((i for i in r["results"] if i["task"] == task and i["metric"] == metric), None)
            if item is None:
                cells.append("-")
                continue
            n = item["n"]
            if item.get("chance") is not None:
                chance = f"{100 * item['chance']:.2f}"
            cells.append(score_cell(item))
        label = f"{task} ({VARIANTS[task]})" if task in VARIANTS else task
        kind = "proxy" if task.startswith("proxy_") else "official"
        print(f"| {label} | {kind} | {metric} | {n} | {chance} | " + " | ".join(cells) + " |")
    if len(results) >= 2:
        paired_rows(results, keys)
    print("\nStreamingLLM, Table 4 (official sets, lm-eval's HellaSwag, 160M models):\n")
    print("| model | ARC-c | ARC-e | HellaSwag | LAMBADA | OBQA | PIQA | Winogrande |")
    print("|---|---|---|---|---|---|---|---|")
    for model, values in PAPER_ZERO_SHOT:
        print(f"| {model} | " + " | ".join(f"{v:.1f}" for v in values) + " |")


def sink_mass(head, mode):
    if "sink_token" in head:
        return head["sink_token"]
    if "implicit_sink" in head:
        return head["implicit_sink"]
    return head["first_positions"][0]


def attention(out, names):
    print("Attention mass of queries far from the start, per layer: the mean over heads and the largest head, on "
          "the sink token (token models) or on the first text position (vanilla), and on the first text "
          "position.\n")
    print("| model | layer | sink: mean head | sink: top head | first text position: mean head |")
    print("|---|---|---|---|---|")
    for name in names:
        heads = load(f"{out}/analyze-{name}/heads.json")
        if not heads:
            continue
        mode = heads.get("sink_mode", "")
        for layer in heads["layers"]:
            masses = [sink_mass(h, mode) for h in layer["heads"]]
            first = [h["first_positions"][0] for h in layer["heads"]]
            print(f"| {name} | {layer['layer']} | {sum(masses) / len(masses):.3f} | {max(masses):.3f} | "
                  f"{sum(first) / len(first):.3f} |")
    print()
    for name in names:
        heads = load(f"{out}/analyze-{name}/heads.json")
        if heads:
            sink_mass_plot(heads, name, f"{out}/sink_mass-{name}.png")
            print(f"![{name}: sink mass per layer and head](sink_mass-{name}.png)\n")


def sink_mass_plot(heads, name, path):
    """Layers x heads heatmap of the mass on the sink, with its axes, scale and what was measured."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    mode = heads.get("sink_mode", "")
    grid = [[sink_mass(h, mode) for h in layer["heads"]] for layer in heads["layers"]]
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(grid[0]), 1.0 + 0.7 * len(grid)))
    image = ax.imshow(grid, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    for layer, row in enumerate(grid):
        for head, value in enumerate(row):
            ax.text(head, layer, f"{value:.2f}", ha="center", va="center", fontsize=8,
                    color="black" if value > 0.5 else "white")
    ax.set_xticks(range(len(grid[0])))
    ax.set_yticks(range(len(grid)))
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(f"{name} ({mode}): mass on the {'sink token' if mode == 'token' else 'sink'}", fontsize=9)
    fig.colorbar(image, ax=ax, label="mean attention (queries in each segment's second half)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def result_over_seeds(out):
    """The report leads with what holds over seeds, the README's headline table (scripts/report/headline.py)."""
    seeds = headline.collect(out)["seeds"]
    print("## The result, over seeds\n")
    if not seeds:
        print("No seeds were run (`scripts/compare --seeds N`): every figure below is one run, a measurement of one "
              "model, not a result.\n")
        return
    print("\n".join(headline.seed_table(seeds)) + "\n")
    print("Every later table that names no seeds shows one run (seed 1): a per-run measurement, not a result.\n")


def main():
    out, preset, window, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    names = [os.path.basename(r) for r in runs]
    corpus = load(f"{out}/corpus/manifest.json") or {}
    shards = load(f"{out}/shards/manifest.json") or {}
    print(f"# sinklm comparison: `{preset}`, {', '.join(names)}\n")
    result_over_seeds(out)
    splits = shards.get("splits", {})
    print(f"Data: {', '.join(s.get('name', '?') for s in corpus.get('sources', []))} from Debian packages; "
          f"tokenizer: {shards.get('tokenizer', '?')}; train {splits.get('train', {}).get('tokens', 0):,} tokens, "
          f"held-out test {splits.get('test', {}).get('tokens', 0):,} tokens, streamed as training reads documents "
          f"(each followed by the end-of-text id). Every model has the same size, shards, schedule and seed; a "
          f"sink-token model's samples hold its sink id and seq_len−1 text tokens, so its samples are cut at other "
          f"boundaries, shuffled over a different count, and each step holds (seq_len−1)/seq_len of the vanilla "
          f"model's text. Streams score the same text tokens for every model.\n")
    print("## Training\n")
    training_rows(runs)
    print("\n![loss curves](loss.png)\n")
    print("## Streaming perplexity\n")
    streaming(out, names, window)
    print("\n## Zero-shot (the official sets)\n")
    zero_shot(out, names)
    print("\n## Where attention goes\n")
    attention(out, names)


if __name__ == "__main__":
    main()
