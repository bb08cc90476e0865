#!/usr/bin/env python3
"""The README's headline (scripts/report/headline.py, label unit): README.md carries exactly the table that
docs/results/headline.json gives, and `collect` reads a run directory's files as they are written.

  - collect on a run directory made here by hand (stream JSONs of `sinklm stream --compare` and `--cache full`,
    a sweep.json of scripts/sink_sweep): the rows hold the values written, in the order vanilla, sink token, ...,
    the seeds' interval is the sweep's; the table prints them to two decimals (written out here by hand);
  - check: README.md's headline equals `table docs/results/headline.json`, and one changed digit is caught.
"""
import json
import os
import subprocess
import sys
import tempfile

from sinklm_test import SOURCE, check, finish

sys.path.insert(0, os.path.join(SOURCE, "scripts", "report"))
import headline  # noqa: E402

SCRIPT = os.path.join(SOURCE, "scripts", "report", "headline.py")


def stream_json(path, mode, window, tokens, ppls):
    runs = [{"config": f"{s}+{window - s}", "window": window, "ppl": p} for s, p in zip((0, 1, 2, 4), ppls)]
    json.dump({"sink_mode": mode, "text_tokens": tokens, "runs": runs}, open(path, "w"))


with tempfile.TemporaryDirectory() as run:
    os.makedirs(f"{run}/synthetic/seeds")
    stream_json(f"{run}/stream-tiny-token.json", "token", 128, 10000, [170.004, 169.994, 169.5, 169.0])
    stream_json(f"{run}/stream-tiny-none.json", "none", 128, 10000, [171.0, 170.0, 169.0, 168.0])
    json.dump({"runs": [{"window": 10008, "ppl": 180.126}]}, open(f"{run}/stream-tiny-none-full.json", "w"))
    stream_json(f"{run}/synthetic/stream-sequential-softmax1.json", "softmax1", 64, 5000, [5.23, 5.23, 5.23, 5.23])
    stream_json(f"{run}/synthetic/stream-sequential-token.json", "token", 64, 5000, [9.37, 5.28, 5.28, 5.28])
    json.dump({"effect": 1.4, "runs": [{"variant": "token", "seed": 2, "evict": 1.065}, {"variant": "token", "seed": 1, "evict": 1.773},
                                       {"variant": "none", "seed": 1, "evict": 1.0}],
               "summaries": [{"variant": "none", "seeds": 2, "evict": [1.0, 1.0, 1.0], "effect_seeds": 0},
                             {"variant": "token", "seeds": 2, "evict": [1.374, 0.5, 3.7], "effect_seeds": 1}]},
              open(f"{run}/synthetic/seeds/sweep.json", "w"))
    got = headline.collect(run)
    check([(r["source"], r["model"]) for r in got["rows"]] ==
          [("text", "none"), ("text", "token"), ("synthetic", "token"), ("synthetic", "softmax1")],
          "rows in the order text, synthetic; vanilla, sink token, zero sink", str(got["rows"]))
    check(got["rows"][0]["ppl"] == [171.0, 170.0, 169.0, 168.0] and got["rows"][0]["full"] == 180.126
          and got["rows"][1]["full"] is None, "the rows hold the files' values", str(got["rows"][:2]))
    check(got["seeds"] == {"variant": "token", "seeds": 2, "evict": [1.374, 0.5, 3.7], "per_seed": [1.773, 1.065],
                           "effect": 1.4, "effect_seeds": 1}, "the seeds are the sweep's, per seed in seed order",
          str(got["seeds"]))
    text = headline.table(got)
    for line in ("| text, W = 128, 10,000 tokens | vanilla | 171.00 | 170.00 | 169.00 | 168.00 | 180.13 |",
                 "| text, W = 128, 10,000 tokens | one sink token | 170.00 | 169.99 | 169.50 | 169.00 | – |",
                 "| synthetic, W = 64, 5,000 tokens | one sink token | **9.37** | 5.28 | 5.28 | 5.28 | – |",
                 "pays 0+W ÷ 1+(W−1) = **1.37x [0.50, 3.70]**", "per seed 1.77x, 1.06x; 1 of 2 at least 1.4x"):
        check(line in text, f"the table prints {line[:60]}", text)

    readme = os.path.join(SOURCE, "README.md")
    json_path = os.path.join(SOURCE, "docs", "results", "headline.json")
    ok = subprocess.run([sys.executable, SCRIPT, "check", json_path, readme], capture_output=True, text=True)
    check(ok.returncode == 0, "README.md's headline equals docs/results/headline.json's table", ok.stdout + ok.stderr)
    changed = json.load(open(json_path))
    changed["rows"][0]["ppl"][0] += 0.01
    json.dump(changed, open(f"{run}/changed.json", "w"))
    bad = subprocess.run([sys.executable, SCRIPT, "check", f"{run}/changed.json", readme], capture_output=True, text=True)
    check(bad.returncode != 0 and "differs" in bad.stderr, "a changed digit is caught", bad.stderr[-300:])
finish()
