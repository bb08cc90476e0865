#!/usr/bin/env bash
# The test command (README, .ci/run): set up a fresh Debian 12 machine if needed (idempotent), build, and
# run every test: labels unit, dist (mpirun), e2e (binary + Python reference packages), gpu (skips without
# CUDA). Extra arguments go to ctest, e.g. `scripts/test.sh -L unit`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
cd "$root/build"
ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@"
