"""The README's headline, generated from a scripts/compare run so that README and report give one value per figure.

usage: headline.py collect RUN_DIR OUT_JSON      the headline's numbers from a run directory (scripts/compare
                                                 writes RUN_DIR/headline.json; docs/results/headline.json is
                                                 the copy the README quotes)
       headline.py table HEADLINE_JSON           the markdown README.md carries between its headline markers
       headline.py check HEADLINE_JSON README    exit 1 unless README's headline is exactly `table`'s output

headline.json (written here):
  {"date": "YYYY-MM-DD", "commit": short hash or null, "rows": [{"source": "text" | "synthetic", "window": W, "tokens": N, "model": sink mode,
   "ppl": [0+W, 1+(W-1), 2+(W-2), 4+(W-4)], "full": dense attention's ppl or null}, ...],
   "seeds": null or {"variant": "token", "seeds": N, "evict": [geometric mean, low, high], "per_seed": [...],
   "effect": E, "effect_seeds": k}}
Rows come from RUN_DIR/stream-NAME.json (`sinklm stream --compare`) and stream-NAME-full.json, the synthetic
ones from RUN_DIR/synthetic/; the seeds from RUN_DIR/synthetic/seeds/sweep.json (scripts/sink_sweep).
"""
import datetime
import glob
import json
import os
import subprocess
import sys

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


def seeds_of(run_dir):
    sweep = load(os.path.join(run_dir, "synthetic", "seeds", "sweep.json"))
    if not sweep:
        return None
    summary = next((s for s in sweep["summaries"] if s["variant"] == "token"), None)
    if summary is None:
        return None
    per_seed = [r["evict"] for r in sorted(sweep["runs"], key=lambda r: r["seed"]) if r["variant"] == "token"]
    return {"variant": "token", "seeds": summary["seeds"], "evict": summary["evict"], "per_seed": per_seed,
            "effect": sweep["effect"], "effect_seeds": summary["effect_seeds"]}


def commit():
    """The checkout's short commit hash, or None outside a git checkout."""
    try:
        return subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def collect(run_dir):
    return {"date": datetime.date.today().isoformat(), "commit": commit(),
            "rows": rows_of(run_dir, "text") + rows_of(os.path.join(run_dir, "synthetic"), "synthetic"),
            "seeds": seeds_of(run_dir)}


def table(headline):
    lines = [f"Streaming perplexity of held-out text through a bounded cache, S sinks + W−S recent tokens "
             f"({headline['date']}" + (f", commit {headline['commit']}" if headline.get("commit") else "")
             + ", `scripts/demo.sh`):", "",
             "| source, cache W | model | 0+W | 1+(W−1) | 2+(W−2) | 4+(W−4) | full attention |",
             "|---|---|---|---|---|---|---|"]
    for r in headline["rows"]:
        ppl = [f"{p:.2f}" for p in r["ppl"]]
        if r["model"] == "token" and r["source"] == "synthetic":
            ppl[0] = f"**{ppl[0]}**"
        full = f"{r['full']:.2f}" if r["full"] is not None else "–"
        lines.append(f"| {r['source']}, W = {r['window']}, {r['tokens']:,} tokens | {LABELS.get(r['model'], r['model'])} | "
                     + " | ".join(ppl) + f" | {full} |")
    s = headline.get("seeds")
    if s:
        mean, low, high = s["evict"]
        lines += ["", f"Over {s['seeds']} seeds (data and initialisation seed 1..{s['seeds']}, `scripts/compare "
                  f"--seeds`), the synthetic sink-token model pays 0+W ÷ 1+(W−1) = **{mean:.2f}x [{low:.2f}, {high:.2f}]** "
                  f"(geometric mean, 95% Student-t interval on the log scale; per seed "
                  + ", ".join(f"{p:.2f}x" for p in s["per_seed"])
                  + f"; {s['effect_seeds']} of {s['seeds']} at least {s['effect']}x)."]
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
