#!/usr/bin/env python3
"""Weights in bf16 and int8 as a user meets them (label e2e): `sinklm quantize` writes a checkpoint that
`info` verifies, that `stream`, `bench-decode` and `serve` load in its stored format (--weights auto), and that
gives what quantizing at load time (--weights int8 on the float32 checkpoint) gives.

- the int8 checkpoint holds every projection weight as I8 with an F32 `<name>_scale` beside it, the rest F32;
  the bf16 one holds every tensor as BF16;
- `stream` on the int8 checkpoint gives the per-token NLL and top-1 ids of `--weights int8` on the float32 one;
  bf16 and int8 stay near float32 (mean NLL within 2%, a random model's predictions being nearly flat);
- `bench-decode` says which weights it ran and reads half (bf16) or about a quarter (int8) of float32's bytes
  per step: the weights are not widened;
- `serve` on the int8 checkpoint answers a completion;
- --weights int4 and `quantize --weights fp32` are errors naming the flag."""
import json
import os
import re
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
import serve_support  # noqa: E402
from sinklm_test import check, config, finish, run_sinklm, source_path, temp_dir  # noqa: E402


def expect(what, ok, detail=""):
    check(ok, what, detail)


def safetensors_dtypes(path):
    """{tensor name: dtype} from a safetensors header."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return {name: e["dtype"] for name, e in header.items() if name != "__metadata__"}


def stream(checkpoint, work, name, *flags):
    """(per-token NLLs, top-1 ids, stderr) of `sinklm stream` over README.md."""
    out = os.path.join(work, name + ".tsv")
    r = run_sinklm("stream", "--checkpoint", checkpoint, "--text", source_path("README.md"), "--max-tokens", 600,
                   "--window", 128, "--nll-out", out, *flags)
    rows = [line.rstrip("\n").split("\t") for line in open(out) if not line.startswith("#")]
    return [float(r[1]) for r in rows], [int(r[2]) for r in rows], r.stderr


def bench(checkpoint, *flags):
    r = run_sinklm("bench-decode", "--checkpoint", checkpoint, "--window", 64, "--decode", 4, "--streams", 2, *flags)
    return json.loads(r.stdout.strip().splitlines()[-1])


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        return set(re.search(r"^flags\s*:(.*)$", f.read(), re.M).group(1).split())


with temp_dir("sinklm-precision-") as work:
    fp32, int8, bf16 = (os.path.join(work, n) for n in ("fp32", "int8", "bf16"))
    run_sinklm("init", "--config", config("tiny-sink.yaml"), "--out", fp32, "--set", "model.vocab_size=264",
               "--set", "model.tokenizer_vocab_size=256", "--set", "model.eos_token_id=255")
    said = run_sinklm("quantize", "--checkpoint", fp32, "--out", int8).stdout
    expect("quantize says what it stored", "projection weights int8 (LM head included)" in said, said.strip())
    run_sinklm("quantize", "--checkpoint", fp32, "--out", bf16, "--weights", "bf16")

    dtypes = safetensors_dtypes(os.path.join(int8, "model.safetensors"))
    int8_names = [n for n, d in dtypes.items() if d == "I8"]
    expect("int8: every projection weight is I8 with its F32 scale",
          len(int8_names) == 4 * 4 + 1 and all(dtypes.get(n + "_scale") == "F32" for n in int8_names),
          f"{len(int8_names)} I8 tensors: {int8_names[:3]}...")
    expect("int8: the rest stays F32", dtypes["gpt_neox.embed_in.weight"] == "F32" and
          dtypes["gpt_neox.layers.0.input_layernorm.weight"] == "F32")
    expect("bf16: every tensor BF16", set(safetensors_dtypes(os.path.join(bf16, "model.safetensors")).values()) == {"BF16"})
    expect("info verifies the int8 checkpoint", "manifest verified" in run_sinklm("info", int8).stdout)

    nll32, top32, _ = stream(fp32, work, "fp32")
    nll8, top8, err8 = stream(int8, work, "int8")
    nll8_load, top8_load, _ = stream(fp32, work, "int8-at-load", "--weights", "int8")
    nll16, top16, err16 = stream(bf16, work, "bf16")
    expect("stream says it runs the stored int8 weights", "weights int8 (--weights auto: as stored)" in err8, err8.strip()[-300:])
    expect("stream says it runs the stored bf16 weights", "weights bf16 (--weights auto: as stored)" in err16, err16.strip()[-300:])
    largest = max(abs(a - b) for a, b in zip(nll8, nll8_load))
    expect("the int8 checkpoint streams as --weights int8 on the float32 one",
          len(nll8) == len(nll8_load) and largest <= 1e-4 and top8 == top8_load, f"max |NLL difference| {largest:.2e}")
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    for name, nll in (("int8", nll8), ("bf16", nll16)):
        expect(f"{name}: mean NLL within 2% of float32", abs(mean(nll) / mean(nll32) - 1) <= 0.02,
              f"{mean(nll):.4f} vs {mean(nll32):.4f}")

    runs = {name: bench(path) for name, path in (("fp32", fp32), ("bf16", bf16), ("int8", int8))}
    for name, r in runs.items():
        expect(f"bench-decode names the {name} weights", r["weights"] == name, r["weights"])
    flags = cpu_flags()
    ratio16 = runs["bf16"]["weight_bytes"] / runs["fp32"]["weight_bytes"]
    expect("bf16 weights are not widened: half the bytes per step", 0.45 <= ratio16 <= 0.55, f"{ratio16:.3f}")
    if {"avx512f", "avx512bw", "avx512_vnni"} <= flags:
        ratio8 = runs["int8"]["weight_bytes"] / runs["fp32"]["weight_bytes"]
        expect("int8 weights: about a quarter of the bytes per step", 0.2 <= ratio8 <= 0.32, f"{ratio8:.3f}")
    else:
        print("note: no AVX512-VNNI here: int8 decodes with LibTorch's float32 linear, its bytes are not checked")

    proc, base = serve_support.start_server(int8, "--no-ui", "--session-dir", os.path.join(work, "sessions"))
    try:
        port = int(base.rstrip("/").rsplit(":", 1)[1])
        status, _, body = serve_support.http_request(port, "POST", "/v1/completions",
                                                     {"prompt": "hello", "max_tokens": 8, "temperature": 0})
        answer = json.loads(body) if status == 200 else {}
        expect("serve answers a completion from the int8 checkpoint",
              status == 200 and answer.get("usage", {}).get("completion_tokens") == 8, f"{status} {body[:200]!r}")
    finally:
        proc.terminate()
        proc.wait(timeout=60)

    bad = run_sinklm("stream", "--checkpoint", fp32, "--text", source_path("README.md"), "--weights", "int4", expect=2)
    expect("--weights int4 names the flag", "--weights: unknown weight format 'int4'" in bad.stderr, bad.stderr.strip())
    bad = run_sinklm("quantize", "--checkpoint", fp32, "--out", os.path.join(work, "x"), "--weights", "fp32", expect=2)
    expect("quantize --weights fp32 is refused", "nothing to quantize" in bad.stderr, bad.stderr.strip())
finish()
