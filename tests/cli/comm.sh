#!/usr/bin/env bash
# The MPI Communicator under real mpirun (tests/comm_driver.cpp): every operation's values with
# 2 and 4 ranks; a rank that stalls makes the waiting rank abort the job after its timeout with
# one line naming the operation and the peer; a rank that dies ends the job. `timeout 60`
# around every mpirun turns a hang into a failure instead of a stuck CI job.
source "$(dirname "$0")/lib.sh"
DRIVER=${GRAPHTUNE_COMM_DRIVER:?set by ctest}
need_mpirun 60


# 15 checks with 2 ranks; with 4 each parity half also runs a ring of its own.
for np_want in "2 15" "4 16"; do
  set -- $np_want
  run_timed "ops$1" "$1" ops
  sed 's/^/    /' "$TMP/ops$1.out"
  check "ops with $1 ranks: exit 0" [ "$rc" -eq 0 ]
  check "ops with $1 ranks: all $2 checks passed on every rank" \
    bash -c "[ \$(grep -c '^ok ' '$TMP/ops$1.out') -eq $2 ] && ! grep -q FAIL '$TMP/ops$1.out'"
done

# Rank 1 sleeps 60 s without answering; rank 0's 2 s timeout must end the job well before.
for op in recv all_reduce; do
  run_timed "stall_$op" 2 stall "$op"
  [ "$op" = recv ] && what=recv || what=all_reduce_sum
  line="graphtune: error: rank 0: $what with peer 1 timed out after 2 s (the peer never answered)"
  check "stalled peer in $op: the job fails" ended_with_failure
  check "stalled peer in $op: ends in under 20 s, not after the 60 s stall" faster_than 20
  check "stalled peer in $op: one line names the operation and peer 1" \
    bash -c "[ \$(grep -c 'graphtune: error' '$TMP/stall_$op.err') -eq 1 ] && grep -qxF '$line' '$TMP/stall_$op.err'"
done

# Rank 1 exits without MPI_Finalize before an all-reduce; the survivors' timeout is 120 s, so
# only mpirun noticing the death can end the job in time.
run_timed killed 2 killed
check "dead rank: the job fails" ended_with_failure
check "dead rank: mpirun ends the job in under 20 s" faster_than 20
finish
