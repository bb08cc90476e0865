#!/usr/bin/env bash
# The main job on the small embedded default (README, first command): set up, then build a tiny
# sink-token GPT-NeoX, run a forward pass on real English text, save and reload the checkpoint and check
# the logits are identical, and describe the result. Artefacts land in runs/demo/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
cd "$root"
sinklm=build/sinklm
out=runs/demo
mkdir -p "$out"
# Real text present on every Debian machine (base-files), so the demo needs no download.
text=/usr/share/common-licenses/GPL-3
[ -f "$text" ] || text=README.md

echo "== the preset"
"$sinklm" info configs/tiny-sink.yaml
echo "== init, forward on $(basename "$text"), save, reload"
"$sinklm" init --config configs/tiny-sink.yaml --out "$out/tiny-sink-init" --text "$text"
echo "== the checkpoint"
"$sinklm" info "$out/tiny-sink-init"
"$sinklm" forward --checkpoint "$out/tiny-sink-init" --text "$text" --max-tokens 256
echo "demo complete: $out/tiny-sink-init"
