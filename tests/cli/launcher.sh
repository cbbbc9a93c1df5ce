#!/usr/bin/env bash
# The launcher itself: it must not link libtorch (it starts fast and builds fast), --help works
# for its own and the worker's subcommands, and usage errors are one line with exit code 2.
source "$(dirname "$0")/lib.sh"

check "launcher does not link libtorch" bash -c "! ldd '$GT' | grep -q torch"
check "launcher links no CUDA" bash -c "! ldd '$GT' | grep -qi cuda"
check "--help exits 0" bash -c "'$GT' --help >/dev/null"
"$GT" generate --help >"$TMP/help.txt" 2>&1
check "worker subcommand help comes from the worker" grep -q -- "--max-new-tokens" "$TMP/help.txt"
expect_fail "unknown subcommand" "unknown subcommand 'frobnicate'" -- "$GT" frobnicate
expect_fail "missing required flag" "--model is required" -- "$GT" generate --prompt hi
expect_fail "bad number" "--max-new-tokens" -- "$GT" generate --model x --prompt hi --max-new-tokens many
GRAPHTUNE_WORKER=/nonexistent/worker "$GT" generate --model x --prompt hi >/dev/null 2>"$TMP/err"
check "a missing worker binary is named" grep -q "/nonexistent/worker" "$TMP/err"
finish
