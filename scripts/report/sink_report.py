"""The attention-sink half of a scripts/compare report (markdown on stdout, PNGs beside report.md).

usage: sink_report.py OUT_DIR SOURCE [SOURCE ...]
  SOURCE = LABEL:DIR:VANILLA_RUN,SINK_RUN:WINDOW, DIR relative to OUT_DIR ("." for the text pair). In DIR, per
  run NAME (written by scripts/compare): NAME/metrics.jsonl (train.sink_probe_every records), stream-NAME.json
  (`sinklm stream --compare`), stream-NAME-full.json, nll-NAME.tsv.<S>+<R> and nll-NAME-full.tsv (per-token
  NLL), analyze-NAME/heads.json (`sinklm analyze`, with the attention-map values).

Sections: Table 3 on every source beside the paper's; Table 6 (cache-NAME-SIZE.json: one sink+window cache
of each size W/4 .. 4W); the mechanism (split mass, value norms, masking and
substitution: analyze-NAME/heads.json "mechanism"); sink onset (probe records vs step, one PNG per source);
perplexity vs stream position (the paper's Figure 3: 0+W, sink+window and dense attention); attention maps
with labelled axes and a colour bar; the probe's cost. Every figure says what it shows and how it was measured.
"""
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from compare_report import training_rows
import seed_stats

# StreamingLLM (Xiao et al., ICLR 2024), Table 3: 160M models pretrained on the Pile, first PG19 book,
# cache 1024 (0+1024, 1+1023, 2+1022, 4+1020).
PAPER_TABLE3 = {"Vanilla": [27.87, 18.49, 18.05, 18.05], "Zero Sink": [29214, 19.90, 18.27, 18.01],
                "Learnable Sink": [1235, 18.01, 18.01, 18.02]}


def load(path):
    return json.load(open(path)) if os.path.exists(path) else None


class Source:
    def __init__(self, out, spec):
        self.label, directory, runs, window = spec.split(":")
        self.dir = os.path.normpath(os.path.join(out, directory))
        self.runs = runs.split(",")
        self.window = int(window)
        self.out = out

    def rel(self, path):
        return os.path.relpath(path, self.out)

    def metrics(self, run):
        path = os.path.join(self.dir, run, "metrics.jsonl")
        return [json.loads(line) for line in open(path)] if os.path.exists(path) else []

    def trained_length(self):
        """train.seq_len of the first run (its config.yaml), the length every model here was trained on."""
        for line in open(os.path.join(self.dir, self.runs[0], "config.yaml")):
            if line.strip().startswith("seq_len:"):
                return int(line.split(":")[1].split("#")[0])
        return self.window

    def mode(self, run):
        stream = load(os.path.join(self.dir, f"stream-{run}.json"))
        return stream["sink_mode"] if stream else "?"

    def cache_sinks(self, run):
        """The sink slots `sinklm stream` keeps for this model when not told (model/sink.h: default_cache_sinks)."""
        stream = load(os.path.join(self.dir, f"stream-{run}.json"))
        return stream["default_cache_sinks"] if stream else 4


PAPER_MODEL_OF_MODE = {"none": "Vanilla", "softmax1": "Zero Sink", "token": "Learnable Sink"}
EVICTION_COST = 1.4  # a 0+W ÷ 1+(W−1) of at least this is "pays for evicting its sink" (the seeds' effect size)


def reproduced(mode, ratio):
    """Whether one run shows the paper's row for its mode: the same side of EVICTION_COST (the paper's sizes,
    1.51x to 1468x, are far beyond any run here, so only the direction is compared)."""
    paper = PAPER_MODEL_OF_MODE.get(mode)
    if paper is None:
        return "- (not in the paper)"
    values = PAPER_TABLE3[paper]
    theirs = values[0] / values[1]
    if (ratio >= EVICTION_COST) == (theirs >= EVICTION_COST):
        return f"direction yes, size no ({theirs:.2f}x)" if ratio < theirs / 2 else f"yes ({theirs:.2f}x)"
    return f"no ({theirs:.2f}x)"


def table3(sources):
    print("Perplexity of the held-out stream through a cache of W entries: S+R keeps the first S stream positions "
          "(for a sink-token model, position 0 is its sink token) and the R most recent tokens; 0+W is a plain "
          "sliding window, so the sink is evicted once the stream is longer than W. `full` keeps everything "
          "(dense attention far past the trained length). Measured with `sinklm stream --compare` and "
          "`--cache full` on the same tokens; each row is one run. The last column compares a run with the "
          f"paper's model of its mode: reproduced when both pay at least {EVICTION_COST}x for evicting the first "
          "tokens (0+W ÷ 1+(W−1)) or both do not.\n")
    print("| source | model | W | 0+W | 1+(W-1) | 2+(W-2) | 4+(W-4) | 0+W ÷ 1+(W-1) | 0+W ÷ 4+(W-4) | full "
          "| the paper's row reproduced? (its 0+W ÷ 1+(W−1)) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for s in sources:
        for run in s.runs:
            summary = load(os.path.join(s.dir, f"stream-{run}.json"))
            full = load(os.path.join(s.dir, f"stream-{run}-full.json"))
            if not summary:
                continue
            ppl = [r["ppl"] for r in summary["runs"]]
            full_ppl = f"{full['runs'][0]['ppl']:.2f}" if full else "-"
            print(f"| {s.label} | {run} ({summary['sink_mode']}) | {s.window} | " +
                  " | ".join(f"{p:.2f}" for p in ppl) + f" | {ppl[0] / ppl[1]:.2f}x | {ppl[0] / ppl[3]:.2f}x | {full_ppl} "
                  f"| {reproduced(summary['sink_mode'], ppl[0] / ppl[1])} |")
    for model, values in PAPER_TABLE3.items():
        print(f"| paper (PG19) | {model} 160M | 1024 | " + " | ".join(f"{v:g}" for v in values) +
              f" | {values[0] / values[1]:.2f}x | {values[0] / values[3]:.2f}x | - | - |")
    print()


def test_sources(shards):
    """The source of each position of the test split as `sinklm stream --shards` reads it: the documents of
    manifest.json in shard order, each followed by its end-of-text id (counted with its document)."""
    manifest = load(os.path.join(shards, "manifest.json"))
    if not manifest:
        return None
    labels = []
    for document in manifest["documents"]:
        if document["split"] == "test":
            labels += [document["id"].split("/")[0]] * (document["tokens"] + 1)
    return labels


def per_source_table(s):
    """Table 3 per source of the text's test split, from the per-token NLL files of the whole-split stream."""
    labels = test_sources(os.path.join(s.dir, "shards"))
    if not labels:
        return
    w = s.window
    caches = [f"0+{w}", f"1+{w - 1}", f"4+{w - 4}"]
    print(f"Per source of the {s.label} test split (the scored tokens of each source's test documents, end-of-text ids "
          "included; perplexity from the same per-token NLL as above):\n")
    print("| model | source | tokens | " + " | ".join(caches) + f" | {caches[0]} ÷ {caches[1]} |")
    print("|---|---|---|" + "---|" * (len(caches) + 1))
    for run in s.runs:
        nll = {c: read_nll(os.path.join(s.dir, f"nll-{run}.tsv.{c}")) for c in caches}
        if not all(nll.values()):
            continue
        for source in sorted(set(labels)):
            # Position i of an NLL file scores stream token i + 1.
            rows = [i for i in range(len(nll[caches[0]])) if i + 1 < len(labels) and labels[i + 1] == source]
            if not rows:
                print(f"| {run} | {source} | 0 (not reached by the stream) | " + " | ".join("-" for _ in caches) + " | - |")
                continue
            ppl = [math.exp(sum(nll[c][i] for i in rows) / len(rows)) for c in caches]
            print(f"| {run} | {source} | {len(rows)} | " + " | ".join(f"{p:.2f}" for p in ppl)
                  + f" | {ppl[0] / ppl[1]:.3f}x |")
    print()


def sink_mass_table(sources):
    print("Attention on the sink per layer (`sinklm analyze` on the held-out stream: mean over heads of the mass "
          "that queries in the second half of each segment put on the sink token, for a sink-token model, or on "
          "position 0, for vanilla), and Gu et al.'s Sink_1^0.3 from the last training-time probe (fraction of "
          "heads whose mean attention on the first position exceeds 0.3, T = 64, validation sequences). Beside "
          "it, what attention spread evenly over every visible key would put on that one key (a column mode's "
          "extra column counts as one key more): a mass near it is no sink.\n")
    print("| source | model | sink mass per layer (held-out) | uniform attention's mass on it | Sink_1^0.3 (last probe) |")
    print("|---|---|---|---|---|")
    for s in sources:
        for run in s.runs:
            heads = load(os.path.join(s.dir, f"analyze-{run}", "heads.json"))
            if not heads:
                continue
            masses = []
            for layer in heads["layers"]:
                values = [h.get("sink_token", h.get("implicit_sink", h["first_positions"][0])) for h in layer["heads"]]
                masses.append(sum(values) / len(values))
            probes = [r for r in s.metrics(run) if "sink_1" in r]
            sink1 = f"{probes[-1]['sink_1']:.2f} (step {probes[-1]['step']})" if probes else "-"
            print(f"| {s.label} | {run} ({heads['sink_mode']}) | " + " / ".join(f"{m:.3f}" for m in masses) +
                  f" | {uniform_mass(heads):.3f} | {sink1} |")
    print()


def uniform_mass(heads):
    """The mass one key gets from queries in the second half of a segment (analyze's far queries) attending evenly
    over every key they see: 1 / (keys) averaged over those queries; a column mode sees one key more."""
    T = heads["tokens_per_segment"]
    extra = 1 if heads.get("sink_site") == "sink column" else 0
    far = range(T // 2, T)
    return sum(1.0 / (q + 1 + extra) for q in far) / len(far)


# heads.json's key of the mass on the sink, per sink site (model/sink.h: SinkSite; heads.json "sink_site").
SITE_KEY = {"sink token": "sink_token", "sink column": "implicit_sink", "position 0": None}


def mode_statistics(heads):
    """Per layer, the mode's own statistics (heads.json "statistics": model/sink.h's SinkModeSpec) joined by
    '·' (e.g. mean gate·dormant fraction), layers by ' / '; '-' for a mode without any."""
    names = [st["name"] for st in heads.get("statistics", [])]
    if not names:
        return "-"
    per_layer = list(zip(*(layer_means(heads, name) for name in names)))
    return " / ".join("·".join(f"{v:.2f}" for v in values) for values in per_layer)


def layer_means(heads, key):
    """Per layer, the mean over heads of heads.json's `key` (None when the model has no such value)."""
    if key not in heads["layers"][0]["heads"][0]:
        return None
    return [sum(h[key] for h in layer["heads"]) / len(layer["heads"]) for layer in heads["layers"]]


def seeds_section(s):
    """The source's pair over seeds (scripts/compare --seeds: scripts/sink_sweep's tables, seeds/sweep.md), and
    Table 6's verdict on the seeds' geometric means."""
    path = os.path.join(s.dir, "seeds", "sweep.md")
    sweep = load(os.path.join(s.dir, "seeds", "sweep.json"))
    if not os.path.exists(path) or not sweep:
        return
    seeds = sorted({r["seed"] for r in sweep["runs"]})
    print(f"## Over seeds: the {s.label} pair\n")
    print(f"The vanilla model and the sink-token model on seeds {seeds[0]}..{seeds[-1]} (data seed S, "
          "initialisation and sample-order seed 1233 + S; seeds after the first trained here on one process and "
          "thread per model; seed 1 is the pair above, its checkpoints measured again) and measured the same way "
          "(`scripts/sink_sweep`, which scripts/compare --seeds runs; its tables follow). A claim here carries its "
          "k of N and its 95% interval.\n")
    print(open(path).read())
    length = s.trained_length()
    for summary in sweep["summaries"]:
        sizes = sorted(int(size) for size in summary.get("cache_sizes", {}))
        if sizes:
            ppl = [summary["cache_sizes"][str(size)][0] for size in sizes]
            print(f"- Table 6 over seeds, {summary['variant']}: lower or flat with each larger cache within the "
                  f"trained length ({length})? {table6_verdict(sizes, ppl, length)} (geometric means).")
    print()


TABLE6_TOLERANCE = 0.005  # a change of perplexity under 0.5% between cache sizes is "flat", not a direction


def table6_verdict(sizes, ppl, trained_length):
    """The paper's Table 6 question asked where the paper asked it: over the caches within the trained length, is
    each larger cache lower or flat (within TABLE6_TOLERANCE), or higher at some size?"""
    inside = [(w, p) for w, p in zip(sizes, ppl) if w <= trained_length]
    if len(inside) < 2:
        return "- (one cache within the trained length)"
    rises = [f"{b[0]}: +{(b[1] / a[1] - 1) * 100:.1f}%" for a, b in zip(inside, inside[1:])
             if b[1] > a[1] * (1 + TABLE6_TOLERANCE)]
    if rises:
        return "no: higher at " + ", ".join(rises)
    falls = any(b[1] < a[1] * (1 - TABLE6_TOLERANCE) for a, b in zip(inside, inside[1:]))
    return "yes" if falls else f"flat (within {TABLE6_TOLERANCE:.1%})"


def cache_size_table(sources):
    """The paper's Table 6: one sink+window cache of each size (cache-NAME-SIZE.json) around the source's W, the
    model's own sinks; judged within the trained length, as the paper's caches all were."""
    print("Perplexity of the same held-out stream through one sink+window cache of each size W (the model's "
          "default sinks: its sink token, else 4; `sinklm stream --window W`; one run each). The paper's Table 6 "
          "finds that a larger cache does not lower perplexity monotonically (Llama-2-7B 9.08 at 4+2044, 9.59 at "
          "4+4092, both within its 4,096-token pretraining length). The verdict asks the same within the trained "
          f"length: each larger cache lower, or flat within {TABLE6_TOLERANCE:.1%}. Past the trained length the "
          "cache's positions leave the range the model was trained on, so those columns say nothing about Table 6.\n")
    print("| source | model | trained length | " + " | ".join(("W/4", "W/2", "W", "2W", "4W"))
          + " | lower or flat with each larger W, within the trained length |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s in sources:
        length, w = s.trained_length(), s.window
        for run in s.runs:
            sizes = [w // 4, w // 2, w, 2 * w, 4 * w]  # scripts/compare's measure()
            runs = [load(os.path.join(s.dir, f"cache-{run}-{w}.json")) for w in sizes]
            if not all(runs):
                continue
            cells = [f"{r['runs'][0]['config']}: {r['runs'][0]['ppl']:.2f}" + (" (past)" if size > length else "")
                     for r, size in zip(runs, sizes)]
            ppl = [r["runs"][0]["ppl"] for r in runs]
            print(f"| {s.label} | {run} | {length} | " + " | ".join(cells)
                  + f" | {table6_verdict(sizes, ppl, length)} |")
    print()


def fmt_layers(values, digits=3):
    return " / ".join(f"{v:.{digits}f}" for v in values) if values else "-"


def fmt_cost(nll, name, part, per_segment=None):
    """The NLL an intervention adds over the intact model's (nats per far target), '-' where not defined; with
    analyze's per-segment costs, their mean over the segments that have such targets and its 95% interval."""
    value, intact = nll[name][part], nll["intact"][part]
    if value is None or intact is None:
        return "-"
    costs = [c for c in (per_segment or {}).get(name, {}).get(part, []) if c is not None]
    if len(costs) < 2:
        return f"{value - intact:+.3f}"
    mean, low, high = seed_stats.mean_interval(costs)
    return f"{mean:+.3f} [{low:+.2f}, {high:+.2f}] ({len(costs)} seg.)"


def mechanism_table(sources):
    """What each model's sink does (`sinklm analyze`: eval/sinks/sink_interventions.h), one row per model."""
    print("What the sink does (`sinklm analyze` on the held-out stream; per layer, mean over heads). Sink mass at "
          "trigger queries (where the synthetic copy head must act) and elsewhere; the sink's value norm ÷ the "
          "mean value norm of the text keys; and the NLL (nats per far target) added by each intervention on "
          "the sink positions: **masked** (no later query may attend them; a column mode's column dropped) and "
          "**substituted** (an ordinary token in their place: Table 1's experiment; vanilla and gated: the first "
          "four positions). With rotary positions masking equals evicting in a full sequence (a query sees only "
          "distances): masked is what this trained model predicts once its sink is evicted, not what a model "
          "trained without one would predict. One run each; n = the analysis's segments of tokens (last column). "
          "Each cost is the mean over the segments that hold such targets with its 95% Student-t interval over those "
          "segments: it says how the sample of text varies for this one model, not how seeds do (the seed tables "
          "above carry the claims).\n")
    print("| source | model | sinks | sink mass at triggers | elsewhere | sink value norm ÷ text's "
          "| masked: +NLL | at triggers | elsewhere | substituted (token) | +NLL | at triggers | elsewhere | n |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in sources:
        for run in s.runs:
            heads = load(os.path.join(s.dir, f"analyze-{run}", "heads.json"))
            if not heads or "mechanism" not in heads:
                continue
            r = heads["mechanism"]["interventions"]
            nll, per_segment = r["nll"], heads["mechanism"].get("per_segment")
            value = [a / b for a, b in zip(layer_means(heads, "sink_value_norm"), layer_means(heads, "value_norm"))]
            substitute = repr(r["substitute"]["text"]) if nll["substituted"]["all"] is not None else "-"
            cells = [fmt_layers(layer_means(heads, "sink_at_trigger")), fmt_layers(layer_means(heads, "sink_at_other")),
                     fmt_layers(value, 2)] + [fmt_cost(nll, "masked", p, per_segment) for p in ("all", "trigger", "other")] + \
                    [substitute] + [fmt_cost(nll, "substituted", p, per_segment) for p in ("all", "trigger", "other")]
            sinks = r["sinks"] or "column"
            spread = heads.get("segment_stride", heads["tokens_per_segment"]) > heads["tokens_per_segment"]
            n = f"{heads['segments']} x {heads['tokens_per_segment']}" + (
                f", spread over {heads['input_tokens']}" if spread else ", the first")
            print(f"| {s.label} | {run} ({heads['sink_mode']}) | {sinks} | " + " | ".join(cells) + f" | {n} |")
    print()


def tokens_per_s(records):
    """Mean training throughput over the logged steps after the first (which includes the warm-up)."""
    rates = [r["tokens_per_s"] for r in records if "tokens_per_s" in r][1:]
    return sum(rates) / len(rates) if rates else None


def variants_table(s):
    """One row per variant of a source: where its sink sits and how much attention it takes, its gates, what
    evicting it costs, its loss and what it costs to train."""
    print(f"Every variant on the {s.label} source (W = {s.window}). Sink mass: `sinklm analyze`, mean over heads "
          "of the attention queries in the second half of each held-out segment put on the variant's own sink "
          "(its sink token; the extra softmax column for the zero sink, sink logit and K/V sink; position 0 for "
          "the others). Mode statistics: what the variant's own row adds (heads.json \"statistics\"), per layer; "
          "gated: mean gate·fraction of (token, head) gates below 0.1. Perplexity "
          "through a W-entry cache as in Table 3; dense = the full cache. Validation loss: "
          "the last evaluation in training, every target / matched context (targets with 1 .. seq_len−2 text tokens "
          "before them, the same in every mode). Training speed: mean tokens/s over the logged steps, relative to the "
          "vanilla model of the same source.\n")
    print("| model | sink on | sink mass per layer | mode statistics per layer | 0+W | 1+(W-1) | 4+(W-4) | "
          "0+W ÷ 1+(W-1) | dense | validation loss | training speed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    vanilla = next((tokens_per_s(s.metrics(r)) for r in s.runs if s.mode(r) == "none"), None)
    for run in s.runs:
        heads = load(os.path.join(s.dir, f"analyze-{run}", "heads.json"))
        summary = load(os.path.join(s.dir, f"stream-{run}.json"))
        full = load(os.path.join(s.dir, f"stream-{run}-full.json"))
        if not heads or not summary:
            continue
        mode, site = heads["sink_mode"], heads["sink_site"]
        key = SITE_KEY[site]
        mass = layer_means(heads, key) if key else [  # position 0
            sum(h["first_positions"][0] for h in layer["heads"]) / len(layer["heads"]) for layer in heads["layers"]]
        gates = mode_statistics(heads)
        ppl = {r["config"]: r["ppl"] for r in summary["runs"]}
        w = s.window
        cells = [ppl.get(f"0+{w}"), ppl.get(f"1+{w - 1}"), ppl.get(f"4+{w - 4}")]
        text = [f"{v:.2f}" if v else "-" for v in cells]
        ratio = f"{cells[0] / cells[1]:.2f}x" if cells[0] and cells[1] else "-"
        dense = f"{full['runs'][0]['ppl']:.2f}" if full else "-"
        val = [r for r in s.metrics(run) if "val_loss" in r]
        speed = tokens_per_s(s.metrics(run))
        relative = f"{speed / vanilla:.2f}x" if speed and vanilla else "-"
        print(f"| {run} ({mode}) | {site} | " + " / ".join(f"{m:.3f}" for m in mass) +
              f" | {gates} | " + " | ".join(text) + f" | {ratio} | {dense} | " +
              (f"{val[-1]['val_loss']:.4f} / {val[-1].get('val_loss_matched', math.nan):.4f}" if val else "-")
              + f" | {relative} |")
    print("\n*Mode statistics: the row's statistics joined by '·', layer 0 / layer 1 / ...*\n")


def onset_plot(s, path):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharex=True)
    for i, run in enumerate(s.runs):
        probes = [r for r in s.metrics(run) if "sink_mass" in r]
        if not probes:
            continue
        steps = [r["step"] for r in probes]
        for layer in range(len(probes[0]["sink_mass"])):
            axes[0].plot(steps, [r["sink_mass"][layer] for r in probes], color=f"C{i}",
                         linestyle=["-", "--", ":", "-."][layer % 4], label=f"{run} ({s.mode(run)}), layer {layer}")
        axes[1].plot(steps, [r["sink_1"] for r in probes], color=f"C{i}", label=f"{run} ({s.mode(run)})")
    axes[0].set_ylabel("mean attention on the sink\n(sink token; vanilla: position 0)")
    axes[0].set_title("sink mass per layer, queries 32..63, 8 validation sequences")
    axes[1].set_ylabel("Sink_1^0.3 (fraction of heads)")
    axes[1].set_title("heads with mean attention on the first position > 0.3")
    for ax in axes:
        ax.set_xlabel("training step")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Sink onset during training, {s.label} source (train.sink_probe_every probe)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def read_nll(path):
    if not os.path.exists(path):
        return None
    return [float(line.split("\t")[1]) for line in open(path) if not line.startswith("#")]


def smoothed_ppl(nll, width):
    points = []
    for begin in range(0, len(nll) - width + 1, max(1, width // 4)):
        chunk = nll[begin:begin + width]
        points.append((begin + width, math.exp(sum(chunk) / len(chunk))))
    return points


def smoothing(s):
    """Tokens per point of the perplexity-vs-position curves: the cache size, so the eviction step shows."""
    return max(64, s.window)


def figure3_plot(s, path, trained_length):
    columns = min(3, len(s.runs))
    rows = (len(s.runs) + columns - 1) // columns
    fig, grid = plt.subplots(rows, columns, figsize=(5.5 * columns, 4 * rows), sharey=True, squeeze=False)
    axes = [ax for row in grid for ax in row]
    for ax in axes[len(s.runs):]:
        ax.set_visible(False)
    for ax, run in zip(axes, s.runs):
        sinks = s.cache_sinks(run)
        # Drawn so that none hides another where they coincide: dense below, then sink+window, the evicted
        # window on top, dashed.
        curves = [("dense attention (full cache)", f"nll-{run}-full.tsv", "C0", ":", 3.0),
                  (f"sink+window {sinks}+{s.window - sinks}", f"nll-{run}.tsv.{sinks}+{s.window - sinks}", "C2", "-", 2.0),
                  (f"window 0+{s.window} (sink evicted)", f"nll-{run}.tsv.0+{s.window}", "C3", "--", 1.2)]
        for label, file, color, style, width in curves:
            nll = read_nll(os.path.join(s.dir, file))
            if nll:
                ax.plot(*zip(*smoothed_ppl(nll, smoothing(s))), color=color, linestyle=style, linewidth=width,
                        label=label)
        ax.axvline(trained_length, color="grey", linestyle=":", label=f"trained length ({trained_length})")
        ax.set_yscale("log")
        ax.set_xlabel("stream position (tokens)")
        ax.set_title(f"{run} ({s.mode(run)})")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    for row in grid:
        row[0].set_ylabel(f"perplexity of the last {smoothing(s)} tokens")
    fig.suptitle(f"Perplexity vs stream position, {s.label} source, cache {s.window} (like StreamingLLM Figure 3)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def attention_map_plot(s, run, path):
    heads = load(os.path.join(s.dir, f"analyze-{run}", "heads.json"))
    maps = [m for m in (heads or {}).get("maps", []) if "values" in m]
    if not maps:
        return False
    fig, axes = plt.subplots(1, len(maps), figsize=(3.6 * len(maps), 3.4))
    axes = axes if len(maps) > 1 else [axes]
    sink_first = heads.get("sink_count", 0) > 0
    for ax, m in zip(axes, maps):
        values = [[math.nan if v is None else v for v in row] for row in m["values"]]
        image = ax.imshow(values, cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(f"layer {m['layer']}")
        ax.set_xlabel("key position" + (" (0 = sink token)" if sink_first else ""))
        ax.set_ylabel("query position")
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="attention probability")
    fig.suptitle(f"{s.label} {run} ({heads['sink_mode']}): attention of the first {maps[0]['size']} positions, "
                 f"mean over heads and {heads['segments']} held-out segments", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def probe_cost(sources):
    print("Cost of the training-time probe: seconds spent in the probe over seconds spent in training steps "
          "(from metrics.jsonl; rank 0 runs the probe).\n")
    print("| source | model | probes | probe seconds | training-step seconds | cost |")
    print("|---|---|---|---|---|---|")
    for s in sources:
        for run in s.runs:
            records = s.metrics(run)
            probes = [r for r in records if "sink_probe_s" in r]
            losses = [r for r in records if "tokens_per_s" in r]
            step_seconds, previous = 0.0, (0, 0.0)
            for r in losses:
                step_seconds += (r["tokens"] - previous[1]) / r["tokens_per_s"]
                previous = (r["step"], r["tokens"])
            probe_seconds = sum(r["sink_probe_s"] for r in probes)
            if probes and step_seconds > 0:
                print(f"| {s.label} | {run} | {len(probes)} | {probe_seconds:.2f} | {step_seconds:.1f} | "
                      f"{100 * probe_seconds / step_seconds:.2f}% |")
    print()


def synthetic_section(s):
    """The data and training of a source other than the text pair (its loss curves: loss-LABEL.png)."""
    manifest = load(os.path.join(s.dir, "data", "manifest.json")) or {}
    syn = manifest.get("synthetic")
    print(f"## The {s.label} source\n")
    if syn:
        triggers = ", ".join(f"'{t['symbol']}' copies {t['copies']}" for t in syn["triggers"])
        test = syn["splits"].get("test", {})
        print(f"`sinklm prepare synthetic` (seed {syn['seed']}): {syn['task']}. {len(syn['symbols'])} ordinary "
              f"symbols in a bigram chain ({syn['successors']} successors each, Zipf weights); after an ordinary symbol a "
              f"trigger follows with probability {syn['trigger_rate']}: {triggers}. Copies are "
              f"{100 * test.get('copy_fraction', 0):.1f}% of the held-out tokens; the generator's own loss on them is "
              f"{test.get('oracle_nll', float('nan')):.3f} nats/token (perplexity "
              f"{math.exp(test.get('oracle_nll', float('nan'))):.2f}), the floor any model can reach. Training samples "
              f"are cut from the stream like text (no BOS), so a vanilla model's position 0 is an arbitrary symbol.\n")
    training_rows([os.path.join(s.dir, run) for run in s.runs])
    print(f"\n![loss curves, {s.label}](loss-{s.label}.png)\n")


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    out = argv[1]
    sources = [Source(out, spec) for spec in argv[2:]]
    for s in sources:
        if os.path.normpath(s.dir) != os.path.normpath(out):
            synthetic_section(s)
    print("## Attention sinks: Table 3 on both sources\n")
    table3(sources)
    for s in sources:
        per_source_table(s)
    sink_mass_table(sources)
    print("## The variants side by side\n")
    for s in sources:
        variants_table(s)
    for s in sources:
        seeds_section(s)
    print("## Cache size (Table 6)\n")
    cache_size_table(sources)
    print("## The mechanism: split mass, value norms, masking and substitution\n")
    mechanism_table(sources)
    print("## Sink onset during training\n")
    for s in sources:
        png = f"sink_onset-{s.label}.png"
        onset_plot(s, os.path.join(out, png))
        print(f"![sink onset, {s.label}]({png})\n")
        print(f"*{s.label}: every `train.sink_probe_every` steps, on the same 8 validation sequences of 64 positions, "
              "the mean attention of queries 32..63 on the sink (sink token; vanilla: position 0), per layer "
              "(left), and Sink_1^0.3 (right).*\n")
    probe_cost(sources)
    print("## Perplexity vs stream position\n")
    for s in sources:
        png = f"stream_position-{s.label}.png"
        figure3_plot(s, os.path.join(out, png), s.trained_length())
        print(f"![perplexity vs position, {s.label}]({png})\n")
        print(f"*{s.label}: perplexity of each successive {smoothing(s)}-token stretch of the held-out stream "
              f"(log scale) through a {s.window}-entry sliding window (the sink evicted after {s.window} tokens), "
              "the sink+window cache, and dense attention over the whole stream; `sinklm stream --nll-out`.*\n")
    print("## Attention maps\n")
    for s in sources:
        for run in s.runs:
            png = f"attention_maps-{s.label}-{run}.png"
            if attention_map_plot(s, run, os.path.join(out, png)):
                print(f"![attention maps, {s.label} {run}]({png})\n")
    print("*Each panel: one layer's attention probabilities (rows: queries, columns: keys, causal, 0..1 colour "
          "scale) over the first positions of held-out segments, averaged over heads and segments "
          "(`sinklm analyze`, heads.json \"maps\").*\n")


if __name__ == "__main__":
    main(sys.argv)
