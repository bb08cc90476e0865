# Sourced by the shell tests of the sinklm binary: `expect` runs one command and checks its exit code and
# output; `expect_summary` prints the counts and fails the test if any check failed.
failed=0; passed=0
expect() {  # expect <name> <expected exit code> <grep pattern> -- <command...>
  local name="$1" code="$2" pattern="$3"; shift 4
  local out; out="$("$@" 2>&1)"; local rc=$?
  if [ "$rc" -eq "$code" ] && grep -qE -- "$pattern" <<<"$out"; then passed=$((passed+1)); echo "PASS $name"
  else failed=$((failed+1)); echo "FAIL $name (exit $rc, wanted $code and /$pattern/):"; echo "$out" | head -20; fi
}
expect_summary() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
