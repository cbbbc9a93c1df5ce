#!/usr/bin/env bash
# The pipeline executor under real mpirun (tests/pipeline_driver.cpp): GPipe and 1F1B with 2 and
# 4 stages (and two 2-stage pipelines on sub-communicators) against the same model run serially
# in one process: losses, each stage's gradients, peak in-flight micro-batches, bytes sent. And a
# stage that sends a gradient of the wrong shape: the receiver names both shapes and the job
# ends at once instead of after the communicator's timeout.
source "$(dirname "$0")/lib.sh"
DRIVER=${GRAPHTUNE_PIPELINE_DRIVER:?set by ctest}
need_mpirun 120


# 5 checks per configuration. 2 ranks: {gpipe, 1f1b} x m {4, 8}; 4 ranks: {gpipe, 1f1b} x
# m {4, 6} on 4 stages, and {gpipe, 1f1b} with m 4 on two pipelines of 2 stages.
for np_want in "2 20" "4 30"; do
  set -- $np_want
  run_timed "check$1" "$1" check
  sed 's/^/    /' "$TMP/check$1.out"
  sed 's/^/    stderr: /' "$TMP/check$1.err" | head -5
  check "$1 ranks: exit 0" [ "$rc" -eq 0 ]
  check "$1 ranks: all $2 checks passed on every rank" \
    bash -c "[ \$(grep -c '^ok ' '$TMP/check$1.out') -eq $2 ] && ! grep -q FAIL '$TMP/check$1.out'"
done

# Rank 1 answers micro-batch 0 (2 rows) with a 3-row gradient and then stays silent for 60 s.
run_timed badshape 2 badshape
line="pipeline_driver: rank 0: pipeline stage 0: micro-batch 0: the gradient received from stage 1 has shape [3, 6] Double but stage 0 expected [2, 6] Double"
sed 's/^/    stderr: /' "$TMP/badshape.err" | grep -v '^    stderr: *$' | head -8
check "wrongly shaped gradient: the job fails" ended_with_failure
check "wrongly shaped gradient: ends in under 20 s, not after the peer's 60 s silence" faster_than 20
check "wrongly shaped gradient: one line names the micro-batch and both shapes" grep -qxF "$line" "$TMP/badshape.err"
check "wrongly shaped gradient: no timeout message hides the error" bash -c "! grep -q 'timed out' '$TMP/badshape.err'"
finish
