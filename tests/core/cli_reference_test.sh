#!/usr/bin/env bash
# docs/cli.md is generated from each flag's one declaration (core/args.h: flag(&field, ...)); fail when the
# committed file differs from what the binary prints now, with the command that regenerates it.
set -euo pipefail
doc="$SINKLM_SOURCE_DIR/docs/cli.md"
[ -f "$doc" ] || { echo "FAIL: $doc is missing; run: build/sinklm help --markdown > docs/cli.md"; exit 1; }
if ! "$SINKLM_BIN" help --markdown | diff -u "$doc" - ; then
  echo "FAIL: docs/cli.md is stale (diff above: - committed, + declarations)."
  echo "      regenerate it: build/sinklm help --markdown > docs/cli.md"
  exit 1
fi
echo "docs/cli.md matches the declarations ($(grep -c '^| `--' "$doc") flags in $(grep -c '^## ' "$doc") commands)"
