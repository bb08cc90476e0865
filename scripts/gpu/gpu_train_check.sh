#!/usr/bin/env bash
# The one prepared GPU check: run on a CUDA machine (a lent GPU, a fresh cluster node) from the repository
# root. Every stage is time-bounded and recorded; a failing stage does not stop the others. Output: one JSON
# summary (OUT/summary.json) and every stage's log (OUT/logs/, also packed as OUT/logs.tar.gz).
#
# Stages: info (GPU, driver, torch) -> gpu tests (`ctest -L gpu`, or the bundled gtest binary) -> synthetic
# shards -> tiny-sink training on CPU vs CUDA (fp32; same losses) -> the NCCL communicator with a world of
# one (replicated and ZeRO-1; losses equal the MPI run bit for bit) -> 2 processes on one GPU (NCCL refuses
# two ranks on one device; sinklm must say so clearly: the summary checks the message) -> Pythia-160M-sink
# bf16 tokens/s, MFU and peak memory (micro-batch as given and 2x; with activation checkpointing) -> the same
# model in transformers with a plain PyTorch loop (scripts/gpu/gpu_python_baseline.py) -> CUDA streaming:
# perplexity equals the CPU's, decode tokens/s for 1 and 16 streams -> one
# completion from `sinklm serve --device cuda`. Beside them, one short training run per sink mode (every
# `model.sink.mode`): tokens/s, MFU and peak memory, one row each.
#
# usage: scripts/gpu/gpu_train_check.sh [--bundle sinklm-gpu.tar.gz] [--out DIR] [--steps N] [--micro-batch N]
#                                   [--stages REGEX] [--dry-run] [--text-run DIR [--text-steps N]]
#   --stages   run only the stages whose name matches (grep -E), e.g. 'pythia|python' (default: all)
#   --text-run the optional stage text_sink_run: scripts/text_sink_run's natural-text vanilla / sink-token pair
#              on this device for --text-steps steps (default 100000, 410M tokens per model), in DIR, which must
#              already hold the text (scripts/prepare_text --out DIR, carried: the device reaches no network);
#              the sink-onset curve and streaming perplexity along the way in DIR/report.md
#   --bundle   a tarball from scripts/gpu/gpu_bundle.sh (a machine without sinklm's libraries); default: build/
#   --dry-run  the whole check on the CPU, so it cannot rot between GPU loans (ctest gpu_check_dry_run): the
#              bundle is packed from build/ and unpacked into a temporary directory as on the device, every
#              stage runs on the tiny preset for a few steps (the NCCL and bf16 stages, which need CUDA, are
#              recorded as not run), and the summary says "cpu dry run". Exit status 1 if a stage failed.
# Every file goes under --out (default runs/gpu-check): summary.json, summary.md (one screen), logs/.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bundle="" out="$root/runs/gpu-check" steps=30 micro=16 only="." dry=0 text_run="" text_steps=100000
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --micro-batch) micro="$2"; shift 2 ;;
    --stages) only="$2"; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --text-run) text_run="$2"; shift 2 ;;
    --text-steps) text_steps="$2"; shift 2 ;;
    *) echo "gpu_train_check: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
only="^(info|bundle|shards|init_ckpt)\$|$only"  # what other stages need always runs
PY="${PYTHON:-python3}"
# The model of the long stages, and the sizes: Pythia-160M on a GPU; the tiny preset, a few steps on the CPU.
if [ "$dry" = 1 ]; then
  dev=cpu preset=tiny-sink seq=128 steps=3 micro=4 mode_steps=2 shard_tokens=400000 decode_tokens=8
else
  dev=cuda preset=pythia-160m-sink seq=2048 mode_steps=10 shard_tokens=3000000 decode_tokens=64
fi
mkdir -p "$out/logs"
out="$(cd "$out" && pwd)"
logs="$out/logs"
work="$(mktemp -d)"
stages="$out/stages.tsv"
: >"$stages"
printf '%s\n' "$([ "$dry" = 1 ] && echo "cpu dry run" || echo "cuda")" >"$out/device.txt"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# stage NAME TIMEOUT_S COMMAND...: runs it, logs to logs/NAME.log, records status and seconds.
stage() {
  local name="$1" limit="$2"; shift 2
  grep -qE "$only" <<<"$name" || return 0
  local t0=$SECONDS
  echo "[gpu-check] $name ..." >&2
  timeout --kill-after=10 "$limit" "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" >>"$stages"
  echo "[gpu-check] $name: exit $rc in $((SECONDS - t0)) s" >&2
  [ "$rc" = 0 ] || tail -n 15 "$logs/$name.log" >&2
  return "$rc"
}

# not_run NAME WHY: a stage this device cannot run (the summary shows it as such, not as passed).
not_run() {
  grep -qE "$only" <<<"$1" || return 0
  printf '%s\t%s\t%s\n' "$1" "not run" 0 >>"$stages"
  echo "[gpu-check] $1: not run ($2)" >"$logs/$1.log"
}

if [ "$dry" = 1 ] && [ -z "$bundle" ]; then  # as on the device: from a bundle, unpacked elsewhere
  stage bundle 300 bash "$root/scripts/gpu/gpu_bundle.sh" "$work/sinklm-gpu.tar.gz" && bundle="$work/sinklm-gpu.tar.gz"
fi
if [ -n "$bundle" ]; then
  tar -C "$work" -xzf "$bundle" || { echo "gpu_train_check: cannot unpack $bundle" >&2; exit 2; }
  export SINKLM_BUNDLE="$work/sinklm-gpu"
  SINKLM_TORCH_LIBS="$("$PY" - <<'PYLIBS'
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
dirs = [os.path.join(os.path.dirname(torch.__file__), "lib")]
dirs += sorted(d for d in glob.glob(os.path.join(site, "nvidia", "**", "lib"), recursive=True) if os.path.isdir(d))
print(":".join(dirs))
PYLIBS
)"
  export SINKLM_TORCH_LIBS
  # shellcheck disable=SC1091
  source "$SINKLM_BUNDLE/env.sh"
  sinklm="$SINKLM_BUNDLE/bin/sinklm"
  gpu_tests=(bash -c 'rc=0; for t in "$0"/test_*_gpu; do "$t" --gtest_output="json:$1/$(basename "$t").json" || rc=1; done; exit $rc'
             "$SINKLM_BUNDLE/bin" "$logs")
  mpi_env=(-x LD_LIBRARY_PATH -x OPAL_PREFIX -x OPAL_PKGLIBDIR -x OPAL_LIBDIR -x OPAL_PKGDATADIR -x OPAL_SYSCONFDIR -x OPAL_BINDIR
           -x PMIX_MCA_mca_base_component_path -x PMIX_MCA_pcompress_base_silence_warning)
  mpirun=(orterun)
else
  sinklm="$root/build/sinklm"
  gpu_tests=(ctest --test-dir "$root/build" -L gpu --output-on-failure -V)
  mpi_env=()
  mpirun=(mpirun)
fi

if [ "$dev" = cuda ]; then
  stage info 60 bash -c "nvidia-smi; '$PY' -c 'import torch; print(\"torch\", torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))'; ldd '$sinklm' | grep -i 'not found'; '$sinklm' --help | head -3"
else
  stage info 60 bash -c "'$PY' -c 'import torch; print(\"torch\", torch.__version__, torch.version.cuda, \"cpu dry run\")'; ! ldd '$sinklm' | grep -i 'not found'; '$sinklm' --help | head -3"
fi
stage gpu_tests 240 "${gpu_tests[@]}"
stage shards 120 "$sinklm" prepare synthetic --out "$work/shards" --train-tokens "$shard_tokens"

# tiny-sink: a few steps from the same initialisation on each path; the losses are compared in the summary.
tiny=(train --config "$root/configs/tiny-sink.yaml" --set data.shards="$work/shards" --set train.steps=8
      --set train.log_every=1 --set train.eval_every=0 --set train.checkpoint_every=0 --set train.seq_len=128
      --set train.global_batch_tokens=4096 --set train.micro_batch=16 --set data.seed=1)
stage tiny_cpu 240 "$sinklm" "${tiny[@]}" --out "$work/tiny_cpu" --set train.device=cpu --set train.threads=8
stage tiny_cuda_fp32 120 "$sinklm" "${tiny[@]}" --out "$work/tiny_cuda_fp32" --set train.device=$dev --set train.precision=fp32
if [ "$dev" = cuda ]; then
  stage tiny_cuda_nccl1 120 "$sinklm" "${tiny[@]}" --out "$work/tiny_cuda_nccl1" --set train.device=$dev --set train.precision=fp32 --set train.communicator=nccl --set train.zero=0
  stage tiny_cuda_nccl1_zero 120 "$sinklm" "${tiny[@]}" --out "$work/tiny_cuda_nccl1_zero" --set train.device=$dev --set train.precision=fp32 --set train.communicator=nccl --set train.zero=1
else
  not_run tiny_cuda_nccl1 "NCCL needs CUDA"
  not_run tiny_cuda_nccl1_zero "NCCL needs CUDA"
fi
stage tiny_cuda_2proc 90 "${mpirun[@]}" -np 2 "${mpi_env[@]}" "$sinklm" "${tiny[@]}" --out "$work/tiny_cuda_2proc" --set train.device=$dev --set train.precision=fp32 --set train.collective_timeout_s=30
if [ "$dev" = cuda ]; then
  stage tiny_cuda_bf16 120 "$sinklm" "${tiny[@]}" --out "$work/tiny_cuda_bf16" --set train.device=$dev --set train.precision=bf16
else
  not_run tiny_cuda_bf16 "bf16 training needs CUDA"
fi
for run in tiny_cpu tiny_cuda_fp32 tiny_cuda_nccl1 tiny_cuda_nccl1_zero tiny_cuda_2proc tiny_cuda_bf16; do
  [ -f "$work/$run/metrics.jsonl" ] && cp "$work/$run/metrics.jsonl" "$logs/$run.metrics.jsonl"
done

# The long model ($preset: Pythia-160M with one sink token, bf16 autocast, seq 2048, one GPU; tiny on the CPU).
long=(train --config "$root/configs/$preset.yaml" --set data.shards="$work/shards" --set train.seq_len="$seq"
      --set train.global_batch_tokens=$((micro * seq * 4)) --set train.eval_every=0 --set train.checkpoint_every=0
      --set train.log_every=1 --set data.validation_batches=0 --set train.zero=0 --set train.device=$dev)
stage pythia160m_bf16 300 "$sinklm" "${long[@]}" --out "$work/pythia" --set train.steps="$steps" \
  --set train.micro_batch="$micro" --set train.trace_steps=2
[ -f "$work/pythia/metrics.jsonl" ] && cp "$work/pythia/metrics.jsonl" "$logs/pythia160m_bf16.metrics.jsonl"
[ -f "$work/pythia/trace_top.txt" ] && cp "$work/pythia/trace_top.txt" "$logs/pythia160m_bf16.trace_top.txt"
# Micro-batch 2x larger, half the accumulation: the same tokens per step; which shape the GPU prefers.
stage pythia160m_bf16_micro2x 200 "$sinklm" "${long[@]}" --out "$work/pythia_2x" --set train.steps=$((steps / 2 + 1)) \
  --set train.micro_batch=$((2 * micro))
[ -f "$work/pythia_2x/metrics.jsonl" ] && cp "$work/pythia_2x/metrics.jsonl" "$logs/pythia160m_bf16_micro2x.metrics.jsonl"
# The same with activation checkpointing: the log's memory lines show what it saves, metrics what it costs.
stage pythia160m_bf16_checkpointing 200 "$sinklm" "${long[@]}" --out "$work/pythia_ac" --set train.steps=$((steps / 3 + 1)) \
  --set train.micro_batch="$micro" --set train.activation_checkpointing=true
[ -f "$work/pythia_ac/metrics.jsonl" ] && cp "$work/pythia_ac/metrics.jsonl" "$logs/pythia160m_bf16_checkpointing.metrics.jsonl"
# Every sink mode on the same model and batch: one row each (tokens/s, MFU, peak memory).
for mode in $("$sinklm" config --choices model.sink.mode); do
  stage "mode_$mode" 150 "$sinklm" "${long[@]}" --out "$work/mode_$mode" --set train.steps="$mode_steps" \
    --set train.micro_batch="$micro" --set model.sink.mode="$mode"
  [ -f "$work/mode_$mode/metrics.jsonl" ] && cp "$work/mode_$mode/metrics.jsonl" "$logs/mode_$mode.metrics.jsonl"
done

# Streaming on CUDA: the same perplexity as the CPU, then decode speed.
stage init_ckpt 120 "$sinklm" init --config "$root/configs/$preset.yaml" --out "$work/ckpt"
# The Python stack on the same device, checkpoint and batch shape: transformers + plain PyTorch loop.
stage python_baseline 200 bash -c "'$PY' '$root/scripts/gpu/gpu_python_baseline.py' '$work/ckpt' --device $dev --micro-batch $micro --seq $seq --accumulation 4 --steps $steps --trace '$logs/python_baseline.trace_top.txt' >'$logs/python_baseline.json'"
head -c 40000 "$root/README.md" >"$work/text.txt"
stream=(stream --checkpoint "$work/ckpt" --text "$work/text.txt" --tokenizer bytes --max-tokens 3000 --window 256 --segment 1000)
stage stream_cpu 240 "$sinklm" "${stream[@]}" --device cpu --threads 8 --json "$logs/stream_cpu.json"
stage stream_cuda 120 "$sinklm" "${stream[@]}" --device $dev --json "$logs/stream_cuda.json"
for k in 1 16 64; do
  stage "decode_cuda_$k" 120 bash -c "'$sinklm' bench-decode --checkpoint '$work/ckpt' --device $dev --window 1024 --streams $k --decode $decode_tokens >'$logs/decode_cuda_$k.json'"
done

serve_check() {
  "$sinklm" serve --checkpoint "$work/ckpt" --tokenizer bytes --device $dev --port 0 --session-dir "$work/sessions" >"$work/serve.out" 2>"$logs/serve_stderr.log" &
  local pid=$! port=""
  for _ in $(seq 1 120); do
    kill -0 "$pid" 2>/dev/null || return 1
    port=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$work/serve.out") && [ -n "$port" ] && break
    sleep 0.5
  done
  "$PY" - "$port" <<'PYREQ'
import json, sys, urllib.request
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/completions", method="POST",
    data=json.dumps({"prompt": "Attention sinks", "max_tokens": 16, "logprobs": 2, "temperature": 0}).encode(),
    headers={"Content-Type": "application/json"})
body = json.load(urllib.request.urlopen(req, timeout=60))
print(json.dumps(body)[:2000])
assert len(body["choices"][0]["logprobs"]["token_logprobs"]) == 16
PYREQ
  local rc=$?
  kill "$pid"; wait "$pid"
  return $rc
}
stage serve_cuda 120 bash -c "$(declare -f serve_check); sinklm='$sinklm' work='$work' logs='$logs' PY='$PY' dev='$dev'; serve_check"

# Optional: sinks on natural text as far as this device goes in the stage's half hour (scripts/text_sink_run).
[ -z "$text_run" ] || stage text_sink_run 1800 bash "$root/scripts/text_sink_run" --sinklm "$sinklm" --out "$text_run" \
  --steps "$text_steps" --checkpoint-every "$((text_steps / 10))"

"$PY" "$root/scripts/gpu/gpu_check_summary.py" "$out" --markdown "$out/summary.md" >"$out/summary.json"
tar -C "$out" -czf "$out/logs.tar.gz" logs
cat "$out/summary.md"
rm -rf "$work"
"$PY" -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["all_stages_ok"] else 1)' "$out/summary.json"
