"""The "what a sink does not keep" section of a scripts/compare report (markdown on stdout, recall.png beside it).

usage: recall_report.py OUT_DIR RECALL_DIR RUN [RUN ...]
  RECALL_DIR (relative to OUT_DIR) holds data/manifest.json (`sinklm prepare synthetic --task recall`), per run
  NAME the training run NAME/, probe-NAME.json (`sinklm stream --recall`), and where the head-aware cache ran,
  heads-recall-loss-NAME.json / heads-attention-mass-NAME.json (`sinklm analyze --classify-heads`),
  probe-mass-NAME.json (the probe of the heads chosen by attention mass), probe-random-NAME.json (as many heads
  drawn at random, several draws) and probe-curve-NAME.json (the top K heads for K = 0..L*H, each followed by
  the sink+window cache of equal memory; scripts/report/head_policies.py wrote their files).

Per run: recall accuracy by fact-to-query distance for every cache policy (chance, the cache size and the
K/V bytes per stream beside it; the random draws as their mean), the filler's NLL after the cache first
evicts, and top-1 agreement with the full cache; what chose the heads (calibration distances and seed) against
what scores them, and whether they are disjoint; each head's two scores and the heads each chose; the
head-aware cache against the sink+window cache of equal memory, random heads and the every-head oracle; the
memory-recall curve over K (a table and recall_curve.png); one PNG with a panel per run (accuracy vs distance,
one line per policy, W and R marked). Runs named NAME-seedS-VARIANT (scripts/compare --recall-seeds) are seeds
S of NAME-VARIANT: the tables above show seed 1, and a summary over the seeds follows (recall per distance band,
the head-aware cache minus the caches of equal memory with k of N, the memory-recall curve), with 95% intervals
over seeds.
"""
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from compare_report import training_rows
import seed_stats


def load(path):
    if not os.path.exists(path):
        sys.exit(f"recall_report: {path}: missing (scripts/compare writes it)")
    return json.load(open(path))


def trained_length(run_dir):
    for line in open(os.path.join(run_dir, "config.yaml")):
        if line.strip().startswith("seq_len:"):
            return int(line.split(":")[1].split("#")[0])
    return None


def accuracy_cell(accuracy, queries):
    """'0.98 [0.89, 1.00]': the accuracy of `queries` queries with its Wilson interval."""
    return seed_stats.format_interval(seed_stats.wilson_interval(round(accuracy * queries), queries))


def table(name, result, trained):
    points = result["policies"][0]["points"]
    window = result["window"]
    print(f"**{name}** ({result['sink_mode']}), cache W = {window}, {result['pairs']} queries per distance, "
          f"chance {result['chance']:.3f}; each accuracy with its 95% Wilson interval over those queries (one model: "
          "the interval is over queries, not seeds):\n")
    print("| policy | " + " | ".join(f"d={p['distance']}" + (" (>W)" if p["distance"] > window else "") for p in points)
          + " | filler NLL after eviction | agreement with " + result["reference"] + " | KV entries (most) | K/V KiB per stream |")
    print("|---|" + "---|" * (len(points) + 4))
    for policy in result["policies"]:
        nll = [p["filler_nll_after_eviction"] for p in policy["points"] if p["filler_nll_after_eviction"] is not None]
        agreed = [p["agreement_with_reference"] for p in policy["points"] if p["agreement_with_reference"] is not None]
        agreement = f"{sum(agreed) / len(agreed):.3f}" if agreed else "-"
        print(f"| {policy['label']} | " + " | ".join(accuracy_cell(p["accuracy"], result["pairs"]) for p in policy["points"])
              + f" | {sum(nll) / len(nll):.3f} | {agreement} | {max(p['max_kv_entries'] for p in policy['points'])}"
              + f" | {policy['kv_bytes_per_stream'] / 1024:.1f} |")
    print()
    full = [p for p in result["policies"] if p["cache"] == "full"]
    if full and trained:
        most = max(p["max_kv_entries"] for p in full[0]["points"])
        if most > trained:
            print(f"The full cache holds up to {most} entries, so its positions run past the {trained} the model was "
                  "trained on: like dense attention in Table 3 it is out of its range there, which its filler NLL "
                  "and its agreement with the bounded caches show.\n")


def panels(count, least_width, panel_width, height):
    """One figure with `count` panels side by side sharing the y axis (recall from 0 to 1)."""
    fig, axes = plt.subplots(1, count, figsize=(max(least_width, panel_width * count), height), sharey=True)
    axes = list(axes) if count > 1 else [axes]
    for ax in axes:
        ax.set_ylim(-0.02, 1.02)
    return fig, axes


def finish(fig, axes, ylabel, legend_loc, title, path):
    axes[0].set_ylabel(ylabel)
    axes[-1].legend(fontsize=8, loc=legend_loc)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot(results, path):
    fig, axes = panels(len(results), 7.5, 5.2, 4.0)
    for ax, (name, result) in zip(axes, results):
        for i, policy in enumerate(result["policies"]):
            d = [p["distance"] for p in policy["points"]]
            ax.plot(d, [p["accuracy"] for p in policy["points"]], marker="o", color=f"C{i}", label=policy["label"])
        ax.axvline(result["window"], color="grey", linestyle=":", label=f"cache size W = {result['window']}")
        heads = [p for p in result["policies"] if p["cache"] == "heads"]
        if heads:
            ax.axvline(heads[0]["budget"], color="grey", linestyle="-.", label=f"retrieval budget R = {heads[0]['budget']}")
        ax.axhline(result["chance"], color="black", linestyle="--", linewidth=0.8, label="chance")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("distance from fact to query (tokens)")
        ax.set_title(f"{name} ({result['sink_mode']})")
    finish(fig, axes, "recall accuracy (top-1 = the fact's value)", "center left",
           "Recall vs distance: facts planted d tokens before their queries", path)


def with_mass_heads(recall_dir, name, result):
    """Adds the probe of the heads chosen by attention mass (probe-mass-NAME.json) beside those by recall loss."""
    path = os.path.join(recall_dir, f"probe-mass-{name}.json")
    if not os.path.exists(path):
        return result
    for policy in result["policies"]:
        if policy["cache"] == "heads":
            policy["label"] += " (by recall loss)"
    for policy in load(path)["policies"]:
        policy["label"] += " (by attention mass)"
        for point in policy["points"]:  # measured against itself in its own run: no agreement with the reference
            point["agreement_with_reference"] = None
        result["policies"].append(policy)
    return result


def with_random_heads(recall_dir, name, result):
    """Adds one row, the mean over the draws of probe-random-NAME.json (K heads at random), to the probe's."""
    path = os.path.join(recall_dir, f"probe-random-{name}.json")
    if not os.path.exists(path):
        return result
    draws = [p for p in load(path)["policies"] if p["cache"] == "heads"]
    if not draws:
        return result
    k = draws[0]["head_policy"]["retrieval_heads"]
    def mean(values):
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else None
    points = []
    for i, point in enumerate(draws[0]["points"]):
        at = [d["points"][i] for d in draws]
        points.append({"distance": point["distance"], "accuracy": mean([p["accuracy"] for p in at]),
                       "accuracy_range": (min(p["accuracy"] for p in at), max(p["accuracy"] for p in at)),
                       "filler_nll_after_eviction": mean([p["filler_nll_after_eviction"] for p in at]),
                       "agreement_with_reference": None, "max_kv_entries": max(p["max_kv_entries"] for p in at)})
    result["policies"].append({"label": f"heads, {k} at random (mean of {len(draws)} draws)", "cache": "random heads",
                               "budget": draws[0]["budget"], "kv_bytes_per_stream": draws[0]["kv_bytes_per_stream"],
                               "draws": len(draws), "points": points})
    return result


def calibration_apart(recall_dir, name, result):
    """What chose the heads (analyze's calibration) against what scores them (this probe): disjoint or not."""
    path = os.path.join(recall_dir, f"heads-recall-loss-{name}.json")
    if not os.path.exists(path):
        return
    calibration = load(path)["calibration"]
    chose = calibration["recall_loss"]["distances"]
    shared = sorted(set(chose) & set(result["distances"]))
    seeds = (calibration["recall_loss"]["seed"], result["seed"])
    verdict = ("disjoint: no distance and no seed that chose the heads scores them" if not shared and seeds[0] != seeds[1]
               else f"NOT disjoint: distances {shared} and seeds {seeds} are shared, so the head-aware rows are scored "
                    "partly on what chose them")
    print(f"- {name}: the heads were chosen at d = {chose} (probe seed {seeds[0]}, calibration stream seed "
          f"{calibration.get('seed', seeds[0])}) and are scored at d = {result['distances']} (probe seed {seeds[1]}): "
          f"{verdict}.")


def curve(recall_dir, name):
    """(probe, [(K, KiB, heads mean, equal sink_window's label, its mean)]) over K of probe-curve-NAME.json, or None."""
    path = os.path.join(recall_dir, f"probe-curve-{name}.json")
    if not os.path.exists(path):
        return None
    result = load(path)
    policies = result["policies"]
    mean = lambda policy: sum(p["accuracy"] for p in policy["points"]) / len(policy["points"])
    rows = []
    for i, policy in enumerate(policies):
        if policy["cache"] == "heads" and i + 1 < len(policies):
            same = policies[i + 1]
            assert same["cache"] == "sink_window" and same["kv_bytes_per_stream"] >= policy["kv_bytes_per_stream"], \
                f"{path}: each top-K policy is followed by its sink_window of equal memory"
            rows.append((policy["head_policy"]["retrieval_heads"], policy["kv_bytes_per_stream"] / 1024, mean(policy),
                         same["label"], mean(same)))
    return result, rows


def curve_table(recall_dir, name):
    found = curve(recall_dir, name)
    if not found:
        return None
    result, rows = found
    d = [p["distance"] for p in result["policies"][0]["points"]]
    print(f"**{name}: recall against memory** (the K heads of largest recall loss keep R, the rest W; mean accuracy "
          f"over d = {d}, all beyond W; chance {result['chance']:.3f}). K = 0 is sink+window of W on every head, "
          f"K = {rows[-1][0]} every head at R (the oracle of this budget):\n")
    print("| K heads at R | K/V KiB per stream | head-aware recall | sink+window of equal memory | its recall |")
    print("|---|---|---|---|---|")
    for k, kib, heads, label, same in rows:
        print(f"| {k} | {kib:.0f} | {heads:.2f} | {label} | {same:.2f} |")
    print()
    return rows


def plot_curves(curves, path):
    fig, axes = panels(len(curves), 6.0, 4.8, 3.6)
    for ax, (name, rows) in zip(axes, curves):
        kib = [r[1] for r in rows]
        ax.plot(kib, [r[2] for r in rows], marker="o", label="head-aware: top K heads at R")
        ax.plot(kib, [r[4] for r in rows], marker="s", label="sink+window of equal memory")
        for k, x, y in ((r[0], r[1], r[2]) for r in rows):
            ax.annotate(f"K={k}", (x, y), textcoords="offset points", xytext=(3, -10), fontsize=7)
        ax.set_xlabel("K/V KiB per stream")
        ax.set_title(name)
    finish(fig, axes, "mean recall beyond W, below R", "lower right",
           "Memory-recall curve: which heads keep the long cache", path)


def classification(recall_dir, name):
    """Each head's two scores and which heads each score keeps at R (heads-*-NAME.json)."""
    paths = {s: os.path.join(recall_dir, f"heads-{s}-{name}.json") for s in ("recall-loss", "attention-mass")}
    if not all(os.path.exists(p) for p in paths.values()):
        return
    files = {s: load(p) for s, p in paths.items()}
    scores, calibration = files["recall-loss"]["scores"], files["recall-loss"]["calibration"]
    print(f"**{name}: which heads need more than sinks + window** (`sinklm analyze --classify-heads`, W = "
          f"{calibration['window']}, R = {calibration['retrieval_window']}). Per head: the recall lost when that head alone "
          f"keeps only {calibration['sinks']}+{calibration['window'] - calibration['sinks']} while every other keeps R "
          f"(probe distances {calibration['recall_loss']['distances']}, seed {calibration['recall_loss']['seed']}), and its "
          "attention mass on keys a sink+window cache has evicted; L = kept at R by recall loss, M = by attention mass.\n")
    heads = len(scores["recall_loss"][0])
    print("| layer | " + " | ".join(f"head {h}: loss / mass" for h in range(heads)) + " |")
    print("|---|" + "---|" * heads)
    for layer, (loss, mass) in enumerate(zip(scores["recall_loss"], scores["attention_mass"])):
        marks = [("L" if h in files["recall-loss"]["retrieval"][layer] else "")
                 + ("M" if h in files["attention-mass"]["retrieval"][layer] else "") for h in range(heads)]
        print(f"| {layer} | " + " | ".join(f"{l:.2f} / {m:.3f} {k}".rstrip() for l, m, k in zip(loss, mass, marks)) + " |")
    print()


def equal_memory(name, result):
    """Mean accuracy between the equal-memory sink+window budget and R, for it and the head-aware caches."""
    heads = [p for p in result["policies"] if p["cache"] == "heads"]
    if not heads:
        return
    same = [p for p in result["policies"] if p["cache"] in ("sink_window", "random heads")
            and p["kv_bytes_per_stream"] == heads[0]["kv_bytes_per_stream"]]
    oracle = [p for p in result["policies"] if p["cache"] == "sink_window" and p["budget"] == heads[0]["budget"]]
    if not same or same[0]["cache"] != "sink_window":
        return
    budget, top = same[0]["budget"], heads[0]["budget"]
    def mean(policy):
        acc = [p["accuracy"] for p in policy["points"] if budget < p["distance"] < top]
        return sum(acc) / len(acc) if acc else float("nan")
    parts = [f"{p['label']} {mean(p):.2f}" for p in same + heads]
    parts += [f"every head at R ({p['label']}, {p['kv_bytes_per_stream'] / 1024:.0f} KiB) {mean(p):.2f}" for p in oracle]
    print(f"- {name}, at equal K/V memory ({same[0]['kv_bytes_per_stream'] / 1024:.0f} KiB per stream), mean recall "
          f"for {budget} < d < {top}: " + "; ".join(parts) + f" (chance {result['chance']:.3f}).")


def seed_of(name):
    """('recall-token', 1) for recall-token, ('recall-token', S) for recall-seedS-token (scripts/compare
    --recall-seeds: seed S of the run of that name)."""
    match = re.fullmatch(r"(.+)-seed(\d+)-([^-]+)", name)
    return (f"{match[1]}-{match[3]}", int(match[2])) if match else (name, 1)


def band_means(result, window, budget):
    """Per policy label: mean accuracy at d < W, W < d < R and d > R (None where no distance falls there)."""
    def mean(values):
        return sum(values) / len(values) if values else None
    out = {}
    for policy in result["policies"]:
        d = [(p["distance"], p["accuracy"]) for p in policy["points"]]
        out[policy["label"]] = (policy["kv_bytes_per_stream"],
                                [mean([a for x, a in d if x < window]), mean([a for x, a in d if window < x < budget]),
                                 mean([a for x, a in d if x > budget])])
    return out


def fmt_mean(values):
    """Accuracies over seeds: centre and 95% interval on the logit scale, so it stays inside [0, 1]."""
    return "-" if any(v is None for v in values) else seed_stats.format_interval(seed_stats.share_interval(values))


def difference_line(what, diffs):
    """'what: +0.21 [0.10, 0.32] (k of N seeds above)', with the verdict in words where the interval holds 0."""
    mean, low, high = seed_stats.mean_interval(diffs)
    above = sum(d > 0 for d in diffs)
    verdict = "" if low > 0 or high < 0 else " — the interval includes 0: not established"
    return f"- {what}: {mean:+.3f} [{low:+.3f}, {high:+.3f}], above in {above} of {len(diffs)} seeds{verdict}."


def over_seeds(recall_dir, key, members):
    """The recall probe, the head-aware cache and the memory-recall curve of one run over its seeds (members:
    [(seed, name, result)]): means over seeds with 95% Student-t intervals and k of N."""
    results = [r for _, _, r in members]
    window = results[0]["window"]
    heads = [p for p in results[0]["policies"] if p["cache"] == "heads"]
    budget = heads[0]["budget"] if heads else 4 * window
    bands = [band_means(r, window, budget) for r in results]
    labels = [label for label in bands[0] if all(label in b for b in bands)]
    seeds = ", ".join(str(seed) for seed, _, _ in members)
    print(f"**{key} over seeds {seeds}** ({len(members)} models trained from initialisation and sample-order seeds "
          f"1233 + S on the same source; each probed and its heads chosen as above). Mean recall per distance band, "
          f"over seeds with its 95% Student-t interval over seeds on the logit scale, which keeps it inside [0, 1] "
          f"(W = {window}, R = {budget}); differences are on the accuracy scale:\n")
    print(f"| policy | K/V KiB per stream | d < W | W < d < R | d > R |")
    print("|---|---|---|---|---|")
    for label in labels:
        kib = bands[0][label][0] / 1024
        print(f"| {label} | {kib:.1f} | " + " | ".join(fmt_mean([b[label][1][i] for b in bands]) for i in range(3)) + " |")
    print()
    chosen = [label for label in labels if label.startswith("heads") and "attention mass" not in label]
    if chosen:
        kv = bands[0][chosen[0]][0]
        same = [label for label in labels if label.startswith("sink_window") and bands[0][label][0] == kv]
        random_rows = [label for label in labels if "at random" in label]
        for other in same + random_rows:
            diffs = [b[chosen[0]][1][1] - b[other][1][1] for b in bands]
            print(difference_line(f"head-aware ({chosen[0]}) minus {other}, at equal K/V memory, W < d < R", diffs))
    curves = [curve(recall_dir, name) for _, name, _ in members]
    if all(curves):
        rows = [c[1] for c in curves]
        print(f"\n**{key}: recall against memory over seeds** (as the curve above; mean beyond W, below R):\n")
        print("| K heads at R | K/V KiB per stream | head-aware recall | sink+window of equal memory | head-aware above, seeds |")
        print("|---|---|---|---|---|")
        for i, (k, kib, _, label, _) in enumerate(rows[0]):
            mine, same = [r[i][2] for r in rows], [r[i][4] for r in rows]
            above = sum(a > b for a, b in zip(mine, same))
            print(f"| {k} | {kib:.0f} | {fmt_mean(mine)} | {label}: {fmt_mean(same)} | {above} of {len(rows)} |")
    print()


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
    every = [(run, with_random_heads(recall_dir, run, with_mass_heads(recall_dir, run, load(os.path.join(recall_dir, f"probe-{run}.json")))))
             for run in runs]
    groups = {}
    for name, result in every:
        key, seed = seed_of(name)
        groups.setdefault(key, []).append((seed, name, result))
    # The detailed tables and figures show seed 1 of each run; its seeds follow as one summary.
    results = [(name, result) for name, result in every if seed_of(name)[1] == 1]
    curves = []
    for name, result in results:
        table(name, result, trained_length(os.path.join(recall_dir, name)))
        calibration_apart(recall_dir, name, result)
        print()
        classification(recall_dir, name)
        rows = curve_table(recall_dir, name)
        if rows:
            curves.append((name, rows))
    plot(results, os.path.join(out, "recall.png"))
    print("![recall vs distance](recall.png)\n")
    if curves:
        plot_curves(curves, os.path.join(out, "recall_curve.png"))
        print("![memory-recall curve](recall_curve.png)\n")
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
        equal_memory(name, result)
    print()
    for key, members in groups.items():
        if len(members) > 1:
            over_seeds(recall_dir, key, sorted(members))
        else:
            print(f"{key} is one trained model: the figures above are per-run values, not a result over seeds "
                  "(`scripts/compare --recall-seeds N` trains and probes N; docs/results.md has five).\n")


if __name__ == "__main__":
    main(sys.argv)
