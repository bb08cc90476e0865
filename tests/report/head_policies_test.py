#!/usr/bin/env python3
"""The memory-recall curve's head-policy files (scripts/report/head_policies.py, label unit) against sinklm's own
choice and hand-made cases.

  - top<K>.json equals the "retrieval" lists `sinklm analyze --classify-heads --retrieval-heads K` writes (its
    C++ top_scoring_heads is the independent computation), for K = 2 and 5, on a freshly initialised recall
    model; every file reads back through `sinklm stream --recall-policies heads:FILE`, top0 recalling as
    sink_window of W and top<L*H> as sink_window of R, query by query;
  - hand-made scores: the order is by score, ties go to the earlier layer and head; the top sets are nested;
  - random<K>-<i>.json: K distinct heads, the same files from the same seed, and over 400 draws every head is
    drawn within 5 standard deviations of K/(L*H) of the draws (uniform);
  - a file that is no classification is refused naming it.
"""
import json
import os
import sys

from sinklm_test import SOURCE, check, config, finish, run, run_sinklm, temp_dir

sys.path.insert(0, os.path.join(SOURCE, "scripts", "report"))
import head_policies  # noqa: E402

SCRIPT = os.path.join(SOURCE, "scripts", "report", "head_policies.py")


def retrieval(path):
    return json.load(open(path))["retrieval"]


def hand_made():
    scores = [[0.5, 0.9, 0.5], [0.9, 0.1, 0.5]]
    order = head_policies.ranked_heads(scores)
    check(order == [(0, 1), (1, 0), (0, 0), (0, 2), (1, 2), (1, 1)], "heads by descending score, ties to the earlier "
          "layer then head", str(order))
    tops = head_policies.top_k_policies({"layers": 2, "heads": 3, "score": "recall-loss",
                                         "scores": {"recall_loss": scores}})
    check(sorted(tops) == list(range(7)), "one file per K = 0..L*H", str(sorted(tops)))
    sets = [{(l, h) for l, heads in enumerate(tops[k]["retrieval"]) for h in heads} for k in range(7)]
    check(all(len(sets[k]) == k and sets[k] < sets[k + 1] for k in range(6)), "top K has K heads and is inside top K+1")
    check(tops[3]["retrieval"] == [[0, 1], [0]], "top 3 of the hand-made scores", str(tops[3]["retrieval"]))


def random_draws():
    classification = {"layers": 2, "heads": 4, "score": "recall-loss", "scores": {"recall_loss": [[0] * 4] * 2}}
    draws = head_policies.random_policies(classification, 3, 400, 11)
    chosen = [[(l, h) for l, heads in enumerate(p["retrieval"]) for h in heads] for p in draws]
    check(all(len(set(c)) == 3 and all(0 <= h < 4 for _, h in c) for c in chosen), "each draw holds 3 distinct heads")
    again = head_policies.random_policies(classification, 3, 400, 11)
    check([p["retrieval"] for p in again] == [p["retrieval"] for p in draws], "the same seed draws the same heads")
    check(len({json.dumps(p["retrieval"]) for p in draws}) > 20, "draws differ from each other")
    n, p = 400, 3 / 8
    bound = 5 * (n * p * (1 - p)) ** 0.5
    counts = {(l, h): sum((l, h) in c for c in chosen) for l in range(2) for h in range(4)}
    check(all(abs(c - n * p) <= bound for c in counts.values()), "every head is drawn about 3/8 of the time",
          f"{counts} (expected {n * p:.0f} +- {bound:.0f})")


def against_sinklm(tmp):
    data, ckpt = f"{tmp}/data", f"{tmp}/init"
    run_sinklm("prepare", "synthetic", "--task", "recall", "--out", data, "--seed", "5")
    run_sinklm("init", "--config", config("recall-sink.yaml"), "--out", ckpt)
    common = ["--checkpoint", ckpt, "--recall", data, "--window", "16", "--retrieval-window", "48", "--pairs", "8",
              "--tokens", "64", "--segments", "2", "--threads", "1"]
    for k in (2, 5):
        run_sinklm("analyze", *common, "--retrieval-heads", str(k), "--calibration-distances", "20,40", "--calibration-seed", "9",
                   "--classify-heads", f"{tmp}/analyze{k}.json")
        run([sys.executable, SCRIPT, f"{tmp}/analyze{k}.json", f"{tmp}/curve{k}",
             "--random", "3", "--draws", "2"])
        recorded = json.load(open(f"{tmp}/analyze{k}.json"))["calibration"]
        check(recorded["recall_loss"]["distances"] == [20, 40] and recorded["seed"] == recorded["recall_loss"]["seed"] == 9,
              "analyze records the calibration distances and seed it was given", str(recorded))
        check(retrieval(f"{tmp}/curve{k}/top{k}.json") == retrieval(f"{tmp}/analyze{k}.json"),
              f"top{k}.json keeps the {k} heads sinklm analyze chose", str(retrieval(f"{tmp}/analyze{k}.json")))
    total = 8  # configs/recall.yaml: 2 layers of 4 heads
    policies = f"sink_window,sink_window:48,heads:{tmp}/curve2/top0.json,heads:{tmp}/curve2/top{total}.json,heads:{tmp}/curve2/random3-1.json"
    run_sinklm("stream", "--checkpoint", ckpt, "--recall", data, "--window", "16", "--retrieval-window", "48",
               "--distances", "8,24,40", "--pairs", "8", "--threads", "1", "--recall-policies", policies,
               "--json", f"{tmp}/probe.json")
    small, large, top0, every, drawn = json.load(open(f"{tmp}/probe.json"))["policies"]
    def same(a, b):  # per distance: facts found, filler NLL after eviction, top-1 agreement with sink_window W
        keys = ("correct", "filler_nll_after_eviction", "agreement_with_reference")
        return [[p[k] for k in keys] for p in a["points"]] == [[p[k] for k in keys] for p in b["points"]]

    check(same(top0, small) and top0["kv_bytes_per_stream"] == small["kv_bytes_per_stream"],
          "top0: no head keeps R, the recall of sink_window W and its memory")
    check(same(every, large) and every["kv_bytes_per_stream"] == large["kv_bytes_per_stream"],
          f"top{total}: every head keeps R, the recall of sink_window R and its memory")
    check(drawn["head_policy"]["retrieval_heads"] == 3 and "random3-1" in drawn["label"],
          "a random file is read with its 3 heads and named in its label", drawn["label"])
    bad = f"{tmp}/not-a-classification.json"
    open(bad, "w").write('{"format": "sinklm-head-policy"}')
    refused = run([sys.executable, SCRIPT, bad, f"{tmp}/bad"], expect=1)
    check(bad in refused.stderr, "a file that is no classification is refused naming it", refused.stderr.strip())


hand_made()
random_draws()
with temp_dir() as tmp:
    against_sinklm(tmp)
finish()
