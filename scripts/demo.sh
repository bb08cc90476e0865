#!/usr/bin/env bash
# The main job on the small embedded default (README, first command): everything from nothing, on a CPU.
# Sets up the machine, then runs scripts/compare with its CPU default: a vanilla and a sink-token `tiny`
# GPT-NeoX pretrained side by side on English text from Debian packages, and every sink variant (each
# model.sink.mode: `build/sinklm config --choices model.sink.mode`) on the synthetic Bigram-Backcopy stream,
# compared in runs/demo/report.md.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "$root/scripts/compare" --out "$root/runs/demo" "$@"
