#!/usr/bin/env bash
# The data-parallel GradReducer under real mpirun (tests/dp_driver.cpp), with 2 ranks and with 3
# (more ranks than this machine's cores: --oversubscribe). Every check's numbers are recomputed
# on each rank without the reducer; `timeout 120` turns a hang (mismatched collectives) into a
# failure.
source "$(dirname "$0")/lib.sh"
DRIVER=${GRAPHTUNE_DP_DRIVER:?set by ctest}
need_mpirun 120
CHECKS=12  # "ok" lines the driver prints when every check holds

for np in 2 3; do
  "${MPIRUN[@]}" -np "$np" "$DRIVER" >"$TMP/dp$np.out" 2>"$TMP/dp$np.err"
  rc=$?
  sed 's/^/    /' "$TMP/dp$np.out"
  [ "$rc" -eq 0 ] || sed 's/^/    stderr: /' "$TMP/dp$np.err" | head -20
  check "grad reducer with $np ranks: exit 0" [ "$rc" -eq 0 ]
  check "grad reducer with $np ranks: all $CHECKS checks passed on every rank" \
    bash -c "[ \$(grep -c '^ok ' '$TMP/dp$np.out') -eq $CHECKS ] && ! grep -q FAIL '$TMP/dp$np.out'"
done
finish
