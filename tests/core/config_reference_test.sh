#!/usr/bin/env bash
# docs/configuration.md is generated from the schema (core/config_schema.cpp); fail when the committed file
# differs from what the binary prints now, with the command that regenerates it.
set -euo pipefail
doc="$SINKLM_SOURCE_DIR/docs/configuration.md"
[ -f "$doc" ] || { echo "FAIL: $doc is missing; run: build/sinklm config --markdown > docs/configuration.md"; exit 1; }
if ! "$SINKLM_BIN" config --markdown | diff -u "$doc" - ; then
  echo "FAIL: docs/configuration.md is stale (diff above: - committed, + schema)."
  echo "      regenerate it: build/sinklm config --markdown > docs/configuration.md"
  exit 1
fi
echo "docs/configuration.md matches the schema ($(grep -c '^| `' "$doc") keys)"
