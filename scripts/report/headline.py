"""The README's headline, generated from a scripts/compare run so that README and report give one value per figure.

usage: headline.py collect RUN_DIR OUT_JSON      the headline's numbers from a run directory (scripts/compare
                                                 writes RUN_DIR/headline.json; docs/results/headline.json is
                                                 the copy the README quotes)
       headline.py table HEADLINE_JSON           the markdown README.md carries between its headline markers
       headline.py check HEADLINE_JSON README    exit 1 unless README's headline is exactly `table`'s output

The result leads: the synthetic vanilla / sink-token pair over N seeds, each figure the mean with its 95% interval
and each effect with its k of N (seed_stats.py); an interval that includes 1 is said to in words. Single runs
(the text pair, the other variants: seed 1) follow in a per-run table, never in bold and never called a result.

headline.json (written here):
  {"date": "YYYY-MM-DD", "commit": short hash or null, "rows": [{"source": "text" | "synthetic", "window": W, "tokens": N, "model": sink mode,
   "ppl": [0+W, 1+(W-1), 2+(W-2), 4+(W-4)], "full": dense attention's ppl or null}, ...],
   "seeds": null or {"seeds": N, "effect": E, "window": W, "variants": [{"variant": "none" | "token",
     "ppl": [[geometric mean, low, high] for 0+W, 1+(W-1), 2+(W-2), 4+(W-4)], "evict": [geometric mean, low, high],
     "per_seed": [0+W ÷ 1+(W-1) of seed 1, 2, ...], "effect_seeds": k}, ...]}}
Rows come from RUN_DIR/stream-NAME.json (`sinklm stream --compare`) and stream-NAME-full.json, the synthetic
ones from RUN_DIR/synthetic/; the seeds from RUN_DIR/synthetic/seeds/sweep.json (scripts/sink_sweep).
"""
import datetime
import glob
import json
import os
import subprocess
import sys

import seed_stats

BEGIN, END = "<!-- headline: scripts/report/headline.py table docs/results/headline.json -->", "<!-- /headline -->"
LABELS = {"none": "vanilla", "token": "one sink token", "softmax1": "zero sink (softmax1)", "logit": "sink logit",
          "kv": "learned K/V sink", "gated": "gated attention", "softpick": "softpick"}


def load(path):
    return json.load(open(path)) if os.path.exists(path) else None


def rows_of(directory, source):
    """One row per model measured in `directory`, in LABELS' order."""
    rows = []
    for path in sorted(glob.glob(os.path.join(directory, "stream-*.json"))):
        if path.endswith("-full.json"):
            continue
        stream = load(path)
        full = load(path[:-len(".json")] + "-full.json")
        rows.append({"source": source, "window": stream["runs"][0]["window"], "tokens": stream["text_tokens"],
                     "model": stream["sink_mode"], "ppl": [r["ppl"] for r in stream["runs"]],
                     "full": full["runs"][0]["ppl"] if full else None})
    order = list(LABELS)
    return sorted(rows, key=lambda r: order.index(r["model"]) if r["model"] in order else len(order))


def seeds_of(run_dir, window):
    """The sweep's vanilla and sink-token models over seeds (its summaries; per seed in seed order)."""
    sweep = load(os.path.join(run_dir, "synthetic", "seeds", "sweep.json"))
    if not sweep:
        return None
    variants = []
    for summary in sweep["summaries"]:
        if summary["variant"] not in ("none", "token"):
            continue
        runs = sorted((r for r in sweep["runs"] if r["variant"] == summary["variant"]), key=lambda r: r["seed"])
        # Perplexity is positive and multiplicative: geometric mean, interval on the log scale (as the ratio's).
        ppl = [list(seed_stats.ratio_interval([r["ppl"][i] for r in runs])) for i in range(4)]
        variants.append({"variant": summary["variant"], "ppl": ppl, "evict": summary["evict"],
                         "per_seed": [r["evict"] for r in runs], "effect_seeds": summary["effect_seeds"]})
    if not variants:
        return None
    return {"seeds": max(len(v["per_seed"]) for v in variants), "effect": sweep["effect"], "window": window,
            "variants": variants}


def commit():
    """The checkout's short commit hash, or None outside a git checkout."""
    try:
        return subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def collect(run_dir):
    rows = rows_of(run_dir, "text") + rows_of(os.path.join(run_dir, "synthetic"), "synthetic")
    window = next((r["window"] for r in rows if r["source"] == "synthetic"), None)
    return {"date": datetime.date.today().isoformat(), "commit": commit(), "rows": rows,
            "seeds": seeds_of(run_dir, window)}


def seed_table(s):
    """The result: the synthetic pair over seeds, every figure a mean with its interval."""
    n = s["seeds"]
    lines = [f"The synthetic pair over {n} seeds (data and initialisation seed 1..{n}, `scripts/compare --seeds`): "
             "geometric means with their 95% Student-t intervals on the log scale (perplexities and their ratio are "
             "positive and multiplicative). The setting (steps, batch, learning rate, depth) was chosen beforehand "
             "on seeds 101..105, which score nothing here (docs/results.md).", "",
             "| synthetic, cache W | model | seeds | 0+W | 1+(W−1) | 2+(W−2) | 4+(W−4) | 0+W ÷ 1+(W−1) "
             f"| seeds with 0+W ÷ 1+(W−1) ≥ {s['effect']} |",
             "|---|---|---|---|---|---|---|---|---|"]
    for v in s["variants"]:
        lines.append(f"| W = {s['window']} | {LABELS[v['variant']]} | {len(v['per_seed'])} | "
                     + " | ".join(seed_stats.format_interval(p) for p in v["ppl"])
                     + f" | **{seed_stats.format_interval(v['evict'], suffix='x')}** | {v['effect_seeds']} of {len(v['per_seed'])} |")
    for v in s["variants"]:
        mean, low, high = v["evict"]
        n_v = len(v["per_seed"])
        per_seed = ", ".join(f"{p:.2f}x" for p in v["per_seed"])
        verdict = (f"its interval includes 1, so over {n_v} seeds a cost is not established"
                   if low <= 1.0 <= high else "its interval excludes 1")
        lines += ["", f"{LABELS[v['variant']].capitalize()}: 0+W ÷ 1+(W−1) = {seed_stats.format_interval(v['evict'], suffix='x')}; "
                  f"{verdict}; {v['effect_seeds']} of {n_v} seeds at least {s['effect']}x (per seed {per_seed})."]
    return lines


def single_run_table(rows):
    """Single runs (seed 1): measurements of one model each, not results."""
    lines = ["One run each (seed 1; the text pair and the other variants are trained once: per-run values, no "
             "interval):", "",
             "| source, cache W | model | 0+W | 1+(W−1) | 2+(W−2) | 4+(W−4) | full attention |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        full = f"{r['full']:.2f}" if r["full"] is not None else "–"
        lines.append(f"| {r['source']}, W = {r['window']}, {r['tokens']:,} tokens | {LABELS.get(r['model'], r['model'])} | "
                     + " | ".join(f"{p:.2f}" for p in r["ppl"]) + f" | {full} |")
    return lines


def table(headline):
    lines = [f"Streaming perplexity of held-out text through a bounded cache, S sinks + W−S recent tokens "
             f"({headline['date']}" + (f", commit {headline['commit']}" if headline.get("commit") else "")
             + ", `scripts/demo.sh`).", ""]
    if headline.get("seeds"):
        lines += seed_table(headline["seeds"]) + [""]
    lines += single_run_table(headline["rows"])
    return "\n".join(lines) + "\n"


def readme_headline(readme):
    text = open(readme).read()
    if BEGIN not in text or END not in text:
        sys.exit(f"headline.py: {readme} has no headline markers ({BEGIN} ... {END})")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def main(argv):
    if len(argv) == 4 and argv[1] == "collect":
        json.dump(collect(argv[2]), open(argv[3], "w"), indent=1)
    elif len(argv) == 3 and argv[1] == "table":
        print(table(json.load(open(argv[2]))), end="")
    elif len(argv) == 4 and argv[1] == "check":
        want, got = table(json.load(open(argv[2]))), readme_headline(argv[3])
        if want != got:
            sys.exit(f"headline.py: {argv[3]}'s headline differs from `headline.py table {argv[2]}`:\n--- README\n{got}"
                     f"--- generated\n{want}")
        print(f"{argv[3]}'s headline equals {argv[2]}'s")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
