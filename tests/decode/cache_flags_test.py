#!/usr/bin/env python3
"""The cache flags mean the same in every command that takes them (label e2e).

`stream`, `bench-decode`, `serve`, `info` and `analyze --classify-heads` declare --window, --sinks,
--positions and --retrieval-window once (cli/inference_model.h: cache_flags) and resolve them in one place
(decode/cache/cache_options.h: resolve_cache_options), so on a tiny sink-token checkpoint each command:
  - refuses `--window 0` and `--retrieval-window 0` with the same message, naming the value;
  - refuses a retrieval window for a cache other than heads;
  - takes `--window -1` (the default) as the trained length, and says so in what it prints;
  - refuses an unknown --kv-dtype, and int8 K/V for a cache with no sink slot to keep exact, naming them.
`info` lists the bytes per stream and streams per GiB of every K/V format; `bench-decode --kv-dtype int8`
reports its own. --kv-dtype auto (the default) stores K/V in bf16 for a bf16 checkpoint and in fp32 otherwise,
in `info`, `bench-decode` and `serve` alike; a format named on the command line wins.
"""
import json
import os
import sys

from sinklm_test import check, config, finish, run_sinklm, source_path, temp_dir

sys.path.insert(0, source_path("tests", "serve"))
from serve_support import http_request, start_server  # noqa: E402

TRAINED = 256  # train.seq_len of configs/tiny.yaml


def check_kv_auto(work, ckpt, commands):
    """--kv-dtype auto: bf16 K/V for a bf16 checkpoint, in every command that reports its cache."""
    bf16 = os.path.join(work, "bf16")
    run_sinklm("quantize", "--checkpoint", ckpt, "--weights", "bf16", "--out", bf16)
    on_bf16 = lambda name: [bf16 if x == ckpt else x for x in commands[name]]
    info = json.loads(run_sinklm(*on_bf16("info"), "--window", 32, "--json").stdout)
    check(info["kv_cache"]["kv_dtype"] == "bf16", "info, bf16 checkpoint: --kv-dtype auto is bf16", info["kv_cache"])
    bench = json.loads(run_sinklm(*on_bf16("bench-decode"), "--window", 32).stdout)
    check(bench["kv_dtype"] == "bf16" and bench["weights"] == "bf16", "bench-decode, bf16 weights: bf16 K/V",
          {k: bench[k] for k in ("kv_dtype", "weights")})
    recompute = json.loads(run_sinklm(*on_bf16("bench-decode"), "--window", 32, "--cache", "recompute").stdout)
    check(recompute["kv_dtype"] == "fp32", "bench-decode, bf16 weights, recompute (no K/V): fp32, not refused",
          recompute["kv_dtype"])
    asked = json.loads(run_sinklm(*on_bf16("bench-decode"), "--window", 32, "--kv-dtype", "fp32").stdout)
    check(asked["kv_dtype"] == "fp32", "bench-decode, bf16 weights, --kv-dtype fp32: as asked", asked["kv_dtype"])
    server, base = start_server(bf16, "--session-dir", os.path.join(work, "bf16-sessions"), "--threads", "1",
                                "--window", "32")
    try:
        status, _, body = http_request(int(base.rstrip("/").rsplit(":", 1)[1]), "GET", "/v1/models")
    finally:
        server.terminate()
        server.wait()
    cache = json.loads(body)["data"][0]["sinklm"]["cache"] if status == 200 else body
    check(status == 200 and cache["kv_dtype"] == "bf16", "serve, bf16 checkpoint: bf16 K/V in the model card", cache)


def main():
    with temp_dir() as work:
        ckpt = os.path.join(work, "ckpt")
        run_sinklm("init", "--config", config("tiny-sink.yaml"), "--out", ckpt,
                   "--set", "model.vocab_size=264", "--set", "model.tokenizer_vocab_size=256")
        text = os.path.join(work, "text.txt")
        with open(text, "w") as f:
            f.write("the cache flags mean the same in every command. " * 20)
        heads = os.path.join(work, "heads.json")
        commands = {
            "stream": ["stream", "--checkpoint", ckpt, "--text", text, "--threads", 1],
            "bench-decode": ["bench-decode", "--checkpoint", ckpt, "--decode", 2, "--warmup", 0, "--threads", 1],
            "serve": ["serve", "--checkpoint", ckpt, "--port", 0, "--session-dir", os.path.join(work, "sessions"),
                      "--threads", 1],
            "info": ["info", ckpt],
            "analyze": ["analyze", "--checkpoint", ckpt, "--text", text, "--classify-heads", heads, "--tokens", 64,
                        "--threads", 1],
        }
        for name, base in commands.items():
            cache_heads = [] if name == "analyze" else ["--cache", "heads"]
            cases = [
                (["--window", 0], "the window (cache size) must be at least 1 (or -1: the model's trained length), got 0"),
                (cache_heads + ["--window", 32, "--retrieval-window", 0],
                 "the retrieval window (0) must be larger than the window (32), or -1 for 4 W"),
            ]
            if name != "analyze":  # analyze classifies heads: its cache is always the heads cache
                cases.append((["--window", 32, "--retrieval-window", 64], "apply to the heads cache only, not sink_window"))
                cases.append((["--window", 32, "--kv-dtype", "int4"], "--kv-dtype: unknown K/V format 'int4'"))
                cases.append((["--cache", "window", "--window", 32, "--kv-dtype", "int8"],
                              "keeps the sink slots exact in float32, but a window cache has none"))
            for flags, message in cases:
                p = run_sinklm(*base, *flags, expect=None, timeout=120)
                check(p.returncode != 0 and message in p.stderr, f"{name} {' '.join(map(str, flags))}: refused, \"{message}\"",
                      p.stderr.strip()[-300:])
        # --window -1 (and no --window) is the trained length, for every command that reports its cache.
        info = json.loads(run_sinklm("info", ckpt, "--window", -1, "--json").stdout)
        check(info["kv_cache"]["config"] == f"1+{TRAINED - 1}", "info --window -1: the trained length", info["kv_cache"])
        by_format = {row["kv_dtype"]: row for row in info["kv_cache"]["by_format"]}
        check(sorted(by_format) == ["bf16", "fp32", "int8", "int8-all"] and
              by_format["int8-all"]["kv_bytes_per_stream"] < by_format["int8"]["kv_bytes_per_stream"] <
              0.6 * by_format["bf16"]["kv_bytes_per_stream"] and
              by_format["fp32"]["streams_per_gib"] == (1 << 30) // by_format["fp32"]["kv_bytes_per_stream"],
              "info: bytes and streams per GiB of every K/V format", by_format)
        stream = json.loads(run_sinklm(*commands["stream"], "--max-tokens", 200).stdout)
        check(stream["window"] == TRAINED, "stream without --window: the trained length", stream["window"])
        bench = json.loads(run_sinklm(*commands["bench-decode"]).stdout)
        check(bench["cache_size"] == TRAINED, "bench-decode without --window: the trained length", bench["cache_size"])
        int8 = json.loads(run_sinklm(*commands["bench-decode"], "--kv-dtype", "int8").stdout)
        check(int8["kv_dtype"] == "int8" and int8["kv_bytes_per_stream"] == by_format["int8"]["kv_bytes_per_stream"] and
              int8["streams_per_gib"] == (1 << 30) // int8["kv_bytes_per_stream"],
              "bench-decode --kv-dtype int8: its bytes (counted from storage, as info counts them) and streams per GiB", int8)
        check(bench["kv_dtype"] == "fp32", "bench-decode, fp32 weights, no --kv-dtype: fp32 K/V", bench["kv_dtype"])
        check_kv_auto(work, ckpt, commands)
        run_sinklm(*commands["analyze"], "--window", 32, "--retrieval-heads", 2)
        with open(heads) as f:
            calibration = json.load(f)["calibration"]
        check((calibration["window"], calibration["retrieval_window"], calibration["sinks"]) == (32, 128, 1),
              "analyze --window 32: R = 4 W and the model's one sink, as in every command",
              {k: calibration[k] for k in ("window", "retrieval_window", "sinks")})
    finish()


if __name__ == "__main__":
    main()
