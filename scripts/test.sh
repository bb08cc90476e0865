#!/usr/bin/env bash
# The test command (README, .ci/run): set up a fresh Debian 12 machine if needed (idempotent), build, and
# run every test: labels unit, dist (mpirun), e2e (binary + Python reference packages), gpu (skips without
# CUDA). Extra arguments go to ctest, e.g. `scripts/test.sh -L unit`.
#
# It ends by listing every skipped test with its reason (scripts/report/ctest_skips.py). Strict mode
# (`--strict`, or CI=true in the environment, as CI sets it): a skipped test outside the `gpu` label fails
# the run, so a missing oracle package or browser cannot turn its tests off unnoticed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

strict=0
case "${CI:-}" in true | TRUE | True | 1) strict=1 ;; esac
ctest_args=()
for a in "$@"; do
  if [ "$a" = "--strict" ]; then strict=1; else ctest_args+=("$a"); fi
done
bash "$root/scripts/setup.sh"

# The chat page's browser test (tests/serve/chat_page_test.py) needs a browser: Debian's Chromium and its
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
mkdir -p Testing
junit="$root/build/Testing/ctest-results.xml"
rm -f "$junit"
status=0
ctest --output-on-failure --timeout 900 -j "$(nproc)" --output-junit "$junit" ${ctest_args[@]+"${ctest_args[@]}"} || status=$?
# The list of skips, by the system python3 (not the venv's: it must come out when the venv is what broke).
report=(python3 "$root/scripts/report/ctest_skips.py" "$junit" --build "$root/build")
[ "$strict" -eq 1 ] && report+=(--strict)
skips=0
"${report[@]}" || skips=$?
if [ "$status" -ne 0 ]; then exit "$status"; fi
exit "$skips"
