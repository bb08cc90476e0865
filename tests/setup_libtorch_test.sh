#!/usr/bin/env bash
# scripts/setup.sh builds against the LibTorch SINKLM_LIBTORCH names (label e2e): pointed at a LibTorch prefix
# (here the venv's own torch package, reached through the variable) and a build directory of its own
# (SINKLM_BUILD_DIR), it configures with that prefix's Torch_DIR and compiles a LibTorch translation unit
# (the precompiled header and model/model_config.cpp; the whole build is what setup.sh does by default); a
# path that is no directory, or a directory without TorchConfig.cmake, is refused naming the variable.
set -uo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$src/tests/cli_expect.sh"
work="$(mktemp -d /tmp/sinklm-setup-libtorch-XXXXXX)"
trap 'rm -rf "$work"' EXIT
torch_dir="$("$src/.venv/bin/python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')"

expect "a path that is no directory is refused naming the variable" 2 "SINKLM_LIBTORCH=/no/such/libtorch is no directory" -- \
  env SINKLM_LIBTORCH=/no/such/libtorch SINKLM_BUILD_DIR="$work/build" bash "$src/scripts/setup.sh" --configure-only
mkdir -p "$work/empty"
expect "a directory without TorchConfig.cmake is refused" 2 "has no share/cmake/Torch/TorchConfig.cmake" -- \
  env SINKLM_LIBTORCH="$work/empty" SINKLM_BUILD_DIR="$work/build" bash "$src/scripts/setup.sh" --configure-only
expect "a LibTorch prefix configures a build of its own" 0 "LibTorch from SINKLM_LIBTORCH: $torch_dir" -- \
  env SINKLM_LIBTORCH="$torch_dir" SINKLM_BUILD_DIR="$work/build" bash "$src/scripts/setup.sh" --configure-only
expect "its Torch_DIR is the prefix's" 0 "^Torch_DIR:[A-Z]+=$torch_dir/share/cmake/Torch\$" -- \
  grep "^Torch_DIR:" "$work/build/CMakeCache.txt"
expect "a LibTorch translation unit compiles in it" 0 "" -- \
  ninja -C "$work/build" model/CMakeFiles/sinklm_model.dir/model_config.cpp.o
expect_summary
