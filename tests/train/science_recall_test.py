#!/usr/bin/env python3
"""Science test (label e2e): what a sink does not keep.

A sink-token model is trained on the recall source (`sinklm prepare synthetic --task recall`: facts '@ K v'
asked as '? K v' 4 to 100 tokens later; configs/recall-sink.yaml, one process and thread, a few CPU-minutes),
then the recall probe (`sinklm stream --recall`, W = 32) plants facts exactly d tokens before their queries:

  inside the cache   window and sink+window find the fact: accuracy >= FOUND at every d < W - 1
  beyond the cache   both answer at chance: accuracy <= chance + BEYOND at every d > W, though the same
                     model found the same kind of fact a moment earlier (the sink keeps local prediction, not
                     evicted facts)
  heads              `sinklm analyze --classify-heads` (recall loss, at CALIBRATION distances and analyze's
                     calibration seed, apart from the probe's) picks RETRIEVAL of the 8 heads to keep
                     R = 4 W entries, the rest keep W; at equal K/V memory to a sink+window cache of W_eq
                     entries, the head-aware cache's mean accuracy over W_eq < d < R beats that cache's by
                     >= AHEAD and the mean of DRAWS draws of as many heads at random
                     (scripts/report/head_policies.py) by >= AHEAD_OF_RANDOM, and it still finds a fact inside W

Margins sit below what was measured (docs/results.md, "What a sink does not keep"). `--untrained` measures a
freshly initialised model (`sinklm init`) instead: the test must then fail on the recall inside the cache.
"""
import argparse
import json
import os
import sys
import time

from sinklm_test import check, config, finish, run, run_sinklm, source_path, temp_dir

FOUND, BEYOND, AHEAD, AHEAD_OF_RANDOM, WINDOW, RETRIEVAL, DRAWS = 0.8, 0.12, 0.4, 0.3, 32, 3, 5
RETRIEVAL_WINDOW = 4 * WINDOW
EQUAL = -(-(RETRIEVAL * RETRIEVAL_WINDOW + (8 - RETRIEVAL) * WINDOW) // 8)  # 8 heads (configs/recall.yaml)
DISTANCES = [4, 8, 16, 24, 40, 64, 80, 96, 112, 128]
CALIBRATION = [48, 72, 104]  # none of DISTANCES: what chooses the heads never scores them


def checkpoint_of(work, data, trained):
    """The sink-token recall model: trained with configs/recall-sink.yaml, or (untrained) freshly initialised."""
    run_dir = f"{work}/token"
    if not trained:
        run_sinklm("init", "--config", config("recall-sink.yaml"), "--out", f"{run_dir}/init")
        return f"{run_dir}/init"
    run_sinklm("train", "--config", config("recall-sink.yaml"), "--out", run_dir, "--resume",
               "--set", f"data.shards={data}", "--set", "train.threads=1")
    return f"{run_dir}/checkpoints/" + sorted(os.listdir(f"{run_dir}/checkpoints"))[-1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--untrained", action="store_true", help="a freshly initialised model: the test must fail")
    parser.add_argument("--work", default="", help="keep the run here (default: a temporary directory)")
    args = parser.parse_args()
    start = time.time()
    with temp_dir("sinklm-science-recall-") as tmp:
        work = args.work or tmp
        data = f"{work}/data"
        if not os.path.exists(f"{data}/manifest.json"):
            run_sinklm("prepare", "synthetic", "--task", "recall", "--out", data, "--seed", "3")
        ckpt = checkpoint_of(work, data, not args.untrained)
        run_sinklm("analyze", "--checkpoint", ckpt, "--recall", data, "--classify-heads", f"{work}/heads.json",
                   "--window", WINDOW, "--retrieval-window", RETRIEVAL_WINDOW, "--retrieval-heads", RETRIEVAL,
                   "--calibration-distances", ",".join(map(str, CALIBRATION)), "--threads", "1")
        run([sys.executable, source_path("scripts", "report", "head_policies.py"), f"{work}/heads.json",
             f"{work}/policies", "--random", str(RETRIEVAL), "--draws", str(DRAWS)])
        drawn = [f"heads:{work}/policies/random{RETRIEVAL}-{i}.json" for i in range(DRAWS)]
        run_sinklm("stream", "--checkpoint", ckpt, "--recall", data, "--window", str(WINDOW), "--threads", "1",
                   "--recall-policies", ",".join(["window", "sink_window", f"sink_window:{EQUAL}", "heads"] + drawn),
                   "--head-policy", f"{work}/heads.json",
                   "--retrieval-window", RETRIEVAL_WINDOW, "--distances", ",".join(map(str, DISTANCES)),
                   "--json", f"{work}/probe.json")
        probe = json.load(open(f"{work}/probe.json"))
        chance = probe["chance"]
        window, sink_window, equal, heads, *randoms = probe["policies"]
        check(equal["kv_bytes_per_stream"] == heads["kv_bytes_per_stream"], "the head-aware cache and sink_window "
              f"{EQUAL} hold the same K/V memory", f"{equal['kv_bytes_per_stream']} vs {heads['kv_bytes_per_stream']} bytes")
        far = {}
        for policy in (equal, heads):
            accuracy = {p["distance"]: p["accuracy"] for p in policy["points"]}
            print(f"{policy['label']}: accuracy by distance {accuracy}", flush=True)
            far[policy["cache"]] = [accuracy[d] for d in DISTANCES if EQUAL < d < RETRIEVAL_WINDOW]
        check(min(p["accuracy"] for p in heads["points"] if p["distance"] < WINDOW - 1) >= FOUND,
              "heads: a fact inside W is found")
        mean = {name: sum(a) / len(a) for name, a in far.items()}
        check(mean["heads"] >= mean["sink_window"] + AHEAD, "the head-aware cache keeps facts a sink+window cache of equal "
              "memory has evicted", f"mean accuracy {mean['heads']:.2f} vs {mean['sink_window']:.2f} at {EQUAL} < d < "
              f"{RETRIEVAL_WINDOW} (need {AHEAD} more)")
        check(all(r["kv_bytes_per_stream"] == heads["kv_bytes_per_stream"] for r in randoms),
              f"{DRAWS} draws of {RETRIEVAL} heads at random hold the same K/V memory")
        at_random = [sum(p["accuracy"] for p in r["points"] if EQUAL < p["distance"] < RETRIEVAL_WINDOW) / len(far["heads"])
                     for r in randoms]
        random_mean = sum(at_random) / len(at_random)
        check(mean["heads"] >= random_mean + AHEAD_OF_RANDOM, "which heads keep R matters: the chosen heads beat as many "
              "at random", f"mean accuracy {mean['heads']:.2f} vs {random_mean:.2f} (draws {[round(a, 2) for a in at_random]}) "
              f"at {EQUAL} < d < {RETRIEVAL_WINDOW} (need {AHEAD_OF_RANDOM} more)")
        for policy in (window, sink_window):
            accuracy = {p["distance"]: p["accuracy"] for p in policy["points"]}
            print(f"{policy['label']}: accuracy by distance {accuracy} (chance {chance:.3f})", flush=True)
            inside = [accuracy[d] for d in DISTANCES if d < WINDOW - 1]
            beyond = [accuracy[d] for d in DISTANCES if d > WINDOW]
            check(min(inside) >= FOUND, f"{policy['label']}: a fact inside the cache is found",
                  f"accuracy {inside} at d < W - 1 (need >= {FOUND})")
            check(max(beyond) <= chance + BEYOND, f"{policy['label']}: a fact evicted from the cache is not",
                  f"accuracy {beyond} at d > W (need <= chance {chance:.3f} + {BEYOND})")
    print(f"the run and its measurements took {time.time() - start:.0f} s")
    finish()


if __name__ == "__main__":
    main()
