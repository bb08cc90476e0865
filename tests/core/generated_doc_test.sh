#!/usr/bin/env bash
# A generated document is current: DOC (relative to the source tree) must equal what `sinklm ARGS...` prints
# now; fail with the diff and the command that regenerates it.
#   generated_doc_test.sh docs/configuration.md config --markdown   (the schema, core/config/config_schema.cpp)
#   generated_doc_test.sh docs/cli.md help --markdown               (each flag's declaration, core/config/args.h)
set -euo pipefail
doc="$1"
shift
regenerate="build/sinklm $* > $doc"
[ -f "$SINKLM_SOURCE_DIR/$doc" ] || { echo "FAIL: $doc is missing; run: $regenerate"; exit 1; }
if ! "$SINKLM_BIN" "$@" | diff -u "$SINKLM_SOURCE_DIR/$doc" - ; then
  echo "FAIL: $doc is stale (diff above: - committed, + generated now)."
  echo "      regenerate it: $regenerate"
  exit 1
fi
echo "$doc matches \`sinklm $*\` ($(wc -l < "$SINKLM_SOURCE_DIR/$doc") lines)"
