#!/usr/bin/env bash
# The test command (README, .ci/run): set up a fresh Debian 12 machine if needed (idempotent), build, and
# run every test: labels unit, dist (mpirun), e2e (binary + Python reference packages), gpu (skips without
# CUDA). Extra arguments go to ctest, e.g. `scripts/test.sh -L unit`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"

# The chat page's browser test (tests/server/chat_page_test.py) needs a browser: Debian's Chromium and its
# driver, and selenium in the venv. Installed here, not by setup.sh, since only the tests use them. A failed
# install does not stop the other tests: that test then skips, saying what is missing.
sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
browser=()
for p in chromium chromium-driver; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || browser+=("$p")
done
if [ ${#browser[@]} -gt 0 ]; then
  echo "[test] apt: installing ${browser[*]} (the chat page's browser test)"
  { sudo_if_needed apt-get update -qq &&
    sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${browser[@]}"; } ||
    echo "[test] warning: could not install ${browser[*]}; the chat page test will be skipped" >&2
fi
if ! "$root/.venv/bin/python" -c 'import selenium' 2>/dev/null; then
  echo "[test] pip: installing selenium (the chat page's browser test)"
  "$root/.venv/bin/python" -m pip install -q selenium ||
    echo "[test] warning: could not install selenium; the chat page test will be skipped" >&2
fi

cd "$root/build"
ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@"
