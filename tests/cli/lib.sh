# Shared helpers for the command-line tests (sourced).
set -u
GT=${GRAPHTUNE_BIN:?set by ctest}
ASSETS=${GRAPHTUNE_ASSETS:-../shared/assets}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
checks=0

need_assets() {
  if [ ! -d "$ASSETS/llm" ]; then
    echo "SKIP: shared assets not found at $ASSETS"
    exit 77
  fi
}

# expect_fail NAME EXPECTED_SUBSTRING -- command...: exit code 2, one line on stderr with the text.
expect_fail() {
  local name=$1 want=$2; shift 3
  checks=$((checks + 1))
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  local lines
  lines=$(grep -c '' "$TMP/err")
  if [ "$rc" -ne 2 ] || ! grep -qF -- "$want" "$TMP/err" || [ "$lines" -ne 1 ]; then
    echo "FAIL $name: rc=$rc (want 2), stderr lines=$lines (want 1), want text: $want"
    sed 's/^/    stderr: /' "$TMP/err" | head -5
    failures=$((failures + 1))
  else
    echo "ok   $name: $(cat "$TMP/err")"
  fi
}

check() {  # check NAME CONDITION...
  local name=$1; shift
  checks=$((checks + 1))
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; failures=$((failures + 1)); fi
}

finish() {
  echo "$((checks - failures)) passed, $failures failed"
  [ "$failures" -eq 0 ]
}
