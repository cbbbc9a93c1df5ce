#!/usr/bin/env bash
# Tensor-parallel linear layers under real mpirun (tests/tp_driver.cpp): the four named
# communication operators, ColumnParallelLinear, RowParallelLinear, their Column->Row MLP and
# three SGD steps, each against the unsplit layer computed in every rank's own process, with
# tp=2 and tp=4 (4 ranks on 2 cores: --oversubscribe). `timeout` turns a hang into a failure.
source "$(dirname "$0")/lib.sh"
DRIVER=${GRAPHTUNE_TP_DRIVER:?set by ctest}
need_mpirun 120
CHECKS=35  # every expect() in tp_driver.cpp; a check that silently stopped running shows here

for np in 2 4; do
  "${MPIRUN[@]}" -np "$np" "$DRIVER" >"$TMP/tp$np.out" 2>"$TMP/tp$np.err"
  rc=$?
  sed 's/^/    /' "$TMP/tp$np.out" "$TMP/tp$np.err"
  check "tp=$np: exit 0" [ "$rc" -eq 0 ]
  check "tp=$np: all $CHECKS checks passed on every rank" \
    bash -c "[ \$(grep -c '^ok ' '$TMP/tp$np.out') -eq $CHECKS ] && ! grep -q FAIL '$TMP/tp$np.out'"
done
finish
