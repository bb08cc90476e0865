#!/usr/bin/env bash
# The model subcommands as a user runs them: info on presets and checkpoints, init, forward, and the
# errors a user sees for bad configs, bad options and damaged checkpoints.
set -uo pipefail
bin="${SINKLM_BIN:?}"; src="${SINKLM_SOURCE_DIR:?}"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
source "$src/tests/cli_expect.sh"

expect "info pythia-160m prints the published count" 0 "parameters +162,322,944 total, 85,056,000 non-embedding" -- \
  "$bin" info "$src/configs/pythia-160m.yaml"
expect "info pythia-70m" 0 "70,426,624 total" -- "$bin" info "$src/configs/pythia-70m.yaml"
expect "info --json" 0 '"parameters": 162322944' -- "$bin" info "$src/configs/pythia-160m.yaml" --json
expect "info --set changes the model" 0 "sink +token: 1 learnable" -- \
  "$bin" info "$src/configs/pythia-160m.yaml" --set model.sink.mode=token

printf 'model:\n  hidden_size: 64\n  num_head: 4\n' >"$work/bad.yaml"
expect "unknown key names file, key and suggestion" 2 "bad.yaml: unknown key 'model.num_head' \(did you mean 'model.num_heads'\?\)" -- \
  "$bin" info "$work/bad.yaml"
printf 'model:\n  rotary_pct: 2\n' >"$work/range.yaml"
expect "out of range value" 2 "range.yaml: key 'model.rotary_pct' must be in \[0, 1\], got '2'" -- "$bin" info "$work/range.yaml"
expect "bad --set" 2 "--set: key 'model.sink.mode' must be one of" -- \
  "$bin" info "$src/configs/tiny.yaml" --set model.sink.mode=tokens
expect "unknown option" 2 "unknown option '--confg' \(did you mean '--config'\?\)" -- "$bin" init --confg x --out y
expect "missing config file" 2 "nope.yaml: cannot open config file" -- "$bin" info "$work/nope.yaml"
expect "unknown command" 2 "unknown command 'trian'" -- "$bin" trian

expect "init + reload check on real text" 0 "reload check: max \|logit difference\| = 0" -- \
  "$bin" init --config "$src/configs/tiny-sink.yaml" --out "$work/ck" --text "$src/README.md"
expect "info on a checkpoint verifies it" 0 "manifest verified" -- "$bin" info "$work/ck"
expect "forward reports perplexity" 0 '"perplexity"' -- "$bin" forward --checkpoint "$work/ck" --text "$src/README.md" --max-tokens 64
expect "forward rejects out-of-vocabulary ids" 2 "token id 9000 is outside the tokenizer vocabulary" -- \
  "$bin" forward --checkpoint "$work/ck" --ids "1 9000"

expect "bad SINKLM_CPU_ISA names the variable and its values" 2 "SINKLM_CPU_ISA='avx9': expected amx" -- \
  env SINKLM_CPU_ISA=avx9 "$bin" forward --checkpoint "$work/ck" --ids "1 2"
expect "SINKLM_CPU_ISA=none runs LibTorch's ops" 0 '"perplexity"' -- \
  env SINKLM_CPU_ISA=none "$bin" forward --checkpoint "$work/ck" --text "$src/README.md" --max-tokens 64

printf '\x01' | dd of="$work/ck/model.safetensors" bs=1 seek=5000 conv=notrunc status=none
expect "flipped byte is caught" 2 "model.safetensors: sha256 mismatch" -- "$bin" forward --checkpoint "$work/ck" --ids "1 2"
expect "missing checkpoint dir" 2 "not a checkpoint directory" -- "$bin" forward --checkpoint "$work/none" --ids "1"

expect_summary
