#!/usr/bin/env bash
# One prepared GPU check (for a lent GPU machine or any CUDA node), run from the repository root after a
# CUDA-capable build: the gpu-labelled tests, then Pythia-160M with one learnable sink token trained with
# bf16 autocast for a few hundred steps on one GPU; prints tokens/s and MFU from metrics.jsonl.
# usage: scripts/gpu_train_check.sh SHARD_DIR [STEPS] [OUT_DIR]
set -euo pipefail
shards=${1:?usage: scripts/gpu_train_check.sh SHARD_DIR [STEPS] [OUT_DIR]}
steps=${2:-300}
out=${3:-runs/gpu-check}
sinklm=build/sinklm
(cd build && ctest -L gpu --output-on-failure)
rm -rf "$out"
"$sinklm" train --config configs/pythia-160m-sink.yaml --out "$out" --set data.shards="$shards" \
  --set train.steps="$steps" --set train.global_batch_tokens=262144 --set train.micro_batch=16 \
  --set train.eval_every=0 --set train.checkpoint_every=0 --set train.log_every=10 --set train.zero=0
"${PYTHON:-python3}" - "$out/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"tokens_per_s"' in l]
steady = rows[len(rows) // 4:]
print(f"pythia-160m-sink bf16, 1 GPU: median {statistics.median(r['tokens_per_s'] for r in steady):,.0f} tokens/s, "
      f"MFU {100 * statistics.median(r['mfu'] for r in steady):.1f}% over steps {steady[0]['step']}-{steady[-1]['step']}")
PY
