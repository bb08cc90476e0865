#!/usr/bin/env python3
"""The recall report over seeds (scripts/report/recall_report.py, label unit) against values computed here.

  - seed_of groups scripts/compare's run names: recall-token is seed 1, recall-seedS-token seed S of it;
  - over_seeds: each band's centre and interval over seeds equal share_interval (logit scale) of the per-seed
    band means computed here from the probe points; the head-aware difference counts its k of N and says "not
    established" exactly when its interval includes 0.
"""
import contextlib
import io
import os
import sys

from sinklm_test import SOURCE, check, finish

sys.path.insert(0, os.path.join(SOURCE, "scripts", "report"))
import recall_report  # noqa: E402
import seed_stats  # noqa: E402

check(recall_report.seed_of("recall-token") == ("recall-token", 1), "seed 1 is the plain run name", recall_report.seed_of("recall-token"))
check(recall_report.seed_of("recall-seed4-token") == ("recall-token", 4), "recall-seed4-token is seed 4 of recall-token",
      recall_report.seed_of("recall-seed4-token"))

W, R, DISTANCES = 32, 128, [8, 16, 40, 80, 160]


def probe(sink_window, heads):
    """A probe result: a sink_window and a head-aware policy of equal K/V bytes, accuracies per distance."""
    def policy(label, cache, accuracies, budget):
        return {"label": label, "cache": cache, "budget": budget, "kv_bytes_per_stream": 4096,
                "points": [{"distance": d, "accuracy": a} for d, a in zip(DISTANCES, accuracies)]}
    return {"window": W, "policies": [policy("sink_window:68", "sink_window", sink_window, 68),
                                      policy("heads (3 at 128)", "heads", heads, R)]}


seeds = {1: probe([1, 1, 0.2, 0.1, 0.0], [1, 1, 0.6, 0.5, 0.0]),
         2: probe([1, 0.9, 0.3, 0.1, 0.1], [1, 0.9, 0.4, 0.2, 0.0]),
         3: probe([0.9, 1, 0.2, 0.3, 0.0], [0.9, 1, 0.1, 0.2, 0.1])}
members = [(s, f"recall-seed{s}-token", r) for s, r in seeds.items()]
out = io.StringIO()
with contextlib.redirect_stdout(out):
    recall_report.over_seeds("/nonexistent", "recall-token", members)
text = out.getvalue()

beyond = {label: [sum(a for d, a in zip(DISTANCES, acc) if W < d < R) / 2 for acc in
                  ([p["accuracy"] for p in r["policies"][i]["points"]] for r in seeds.values())]
          for i, label in enumerate(["sink_window:68", "heads (3 at 128)"])}
for label, values in beyond.items():
    cell = seed_stats.format_interval(seed_stats.share_interval(values))
    check(f"| {label} | 4.0 | " in text and cell in text.split(f"| {label} |")[1].split("\n")[0],
          f"{label}: W < d < R over seeds is the logit-scale interval of the per-seed band means", cell)
diffs = [a - b for a, b in zip(beyond["heads (3 at 128)"], beyond["sink_window:68"])]
mean, low, high = seed_stats.mean_interval(diffs)
line = [l for l in text.splitlines() if l.startswith("- head-aware")]
check(len(line) == 1 and f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]" in line[0], "the head-aware difference is the mean of "
      "per-seed differences with its interval", line)
above = sum(d > 0 for d in diffs)
check(f"above in {above} of 3 seeds" in line[0], "k of N counts the seeds where head-aware is above", line)
check(("not established" in line[0]) == (low <= 0 <= high), "'not established' exactly when the interval holds 0", line)
finish()
