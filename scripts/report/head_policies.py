"""Head-policy files for a memory-recall curve: the top K heads of a classification for K = 0..H, and K heads
drawn at random, each a file that `sinklm stream --recall-policies heads:FILE` reads (decode/cache/head_roles.h).

usage: head_policies.py CLASSIFICATION OUT_DIR [--random K] [--draws N] [--seed S]
  CLASSIFICATION  a file of `sinklm analyze --classify-heads` ("scores" and "score" name what ranks the heads)
  OUT_DIR         receives top<K>.json for K = 0..L*H (the K heads of largest score; ties go to the earlier
                  layer, then the earlier head, as analyze's own choice does) and, with --random K,
                  random<K>-<i>.json for i = 0..N-1 (K distinct heads drawn uniformly; Python's random.Random(S)
                  so the draws are the same on every machine); prints the files written, one per line.

A top-K file of the K analyze was asked for equals analyze's own file in its "retrieval" lists; top0 is the
sink+window cache of W on every head, top<L*H> the every-head-at-R oracle.
"""
import json
import os
import random
import sys

SCORE_KEYS = {"recall-loss": "recall_loss", "attention-mass": "attention_mass"}


def ranked_heads(scores):
    """(layer, head) pairs by descending score; equal scores keep layer-major order (a stable sort)."""
    flat = [(layer, head) for layer, row in enumerate(scores) for head in range(len(row))]
    return sorted(flat, key=lambda lh: -scores[lh[0]][lh[1]])


def policy(layers, heads, chosen, chosen_by, calibration):
    retrieval = [sorted(h for l, h in chosen if l == layer) for layer in range(layers)]
    return {"format": "sinklm-head-policy", "version": 1, "layers": layers, "heads": heads,
            "retrieval": retrieval, "chosen_by": chosen_by, "calibration": calibration}


def top_k_policies(classification):
    """{K: policy} for K = 0..L*H, the K heads of largest classification["score"]."""
    scores = classification["scores"][SCORE_KEYS[classification["score"]]]
    layers, heads = classification["layers"], classification["heads"]
    order = ranked_heads(scores)
    return {k: policy(layers, heads, order[:k], f"top {k} by {classification['score']}", classification.get("calibration"))
            for k in range(layers * heads + 1)}


def random_policies(classification, k, draws, seed):
    """[policy] of `draws` independent uniform draws of k distinct heads."""
    layers, heads = classification["layers"], classification["heads"]
    every = [(l, h) for l in range(layers) for h in range(heads)]
    rng = random.Random(seed)
    return [policy(layers, heads, rng.sample(every, k), f"{k} heads at random (seed {seed}, draw {i})", None)
            for i in range(draws)]


def write(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    print(path)


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    source, out = argv[1], argv[2]
    options = {"--random": None, "--draws": "5", "--seed": "0"}
    rest = argv[3:]
    while rest:
        if rest[0] not in options or len(rest) < 2:
            sys.exit(f"head_policies.py: unknown or incomplete option '{rest[0]}'\n{__doc__}")
        options[rest[0]] = rest[1]
        rest = rest[2:]
    try:
        classification = json.load(open(source))
        total = classification["layers"] * classification["heads"]
        classification["scores"][SCORE_KEYS[classification["score"]]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"head_policies.py: {source}: not a classification of `sinklm analyze --classify-heads` ({e!r})")
    os.makedirs(out, exist_ok=True)
    for k, p in top_k_policies(classification).items():
        write(os.path.join(out, f"top{k}.json"), p)
    if options["--random"] is not None:
        k = int(options["--random"])
        if not 0 <= k <= total:
            sys.exit(f"head_policies.py: --random {k}: must be in [0, {total}]")
        for i, p in enumerate(random_policies(classification, k, int(options["--draws"]), int(options["--seed"]))):
            write(os.path.join(out, f"random{k}-{i}.json"), p)


if __name__ == "__main__":
    main(sys.argv)
