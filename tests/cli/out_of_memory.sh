#!/usr/bin/env bash
# A rank that runs out of memory (GRAPHTUNE_TEST_OOM=RANK:STEP makes its allocator fail in that
# step, with the c10::OutOfMemoryError a full GPU throws; train/step_runner.cpp): it says so in
# one line naming itself, the step and what to change, and ends the job, whose other ranks are
# waiting for it in a collective: exit 1 (the run failed; its input did not), nobody left
# hanging, no final model, and the checkpoints committed before it stay.
source "$(dirname "$0")/lib.sh"
need_mpirun 120
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=${GRAPHTUNE_WORKER:?set by ctest}
JOB=(-c "$ROOT/configs/lm.toml" --training.steps 6 --training.log_every 1 --training.seq_len 32
     --training.batch_size 8 --training.threads 1 --checkpoint.every 1 --checkpoint.keep_latest 0)
want='in step 3 (out of memory (injected by GRAPHTUNE_TEST_OOM)); `graphtune plan` says what a layout needs, or set [training].activation_checkpointing = true'

GRAPHTUNE_TEST_OOM=0:3 "$W" train "${JOB[@]}" --job.out_dir "$TMP/one" >"$TMP/one.out" 2>"$TMP/one.err"
rc=$?
check "one rank: exit 1 (exit $rc)" test "$rc" -eq 1
check "  one line naming the rank, the step and what to change" bash -c \
  "grep -c 'graphtune: error: rank 0: out of memory on the host $(printf '%s' "$want" | sed 's/[][\.*^$]/\\&/g')' '$TMP/one.err' | grep -qx 1"
sed -n '/out of memory/p' "$TMP/one.err" | head -1 | sed 's/^/     /'
check "  the checkpoints of steps 1 and 2 stay, nothing of step 3 or the final model" bash -c \
  "[ -d '$TMP/one/checkpoints/step_00000002' ] && [ ! -e '$TMP/one/checkpoints/step_00000003' ] && [ ! -e '$TMP/one/model' ]"

start=$(date +%s)
GRAPHTUNE_TEST_OOM=1:3 "$GT" train "${JOB[@]}" --dp 2 --job.out_dir "$TMP/dp" >"$TMP/dp.out" 2>"$TMP/dp.err"
rc=$?
secs=$(($(date +%s) - start))
check "dp=2, rank 1 runs out while rank 0 waits for it: exit 1 (exit $rc, ${secs} s)" test "$rc" -eq 1
check "  the launcher names rank 1 and the step" grep -q "rank 1 .*failed: out of memory on the host in step 3" "$TMP/dp.out" "$TMP/dp.err"
check "  no rank left running" no_leftovers
check "  no final model" test ! -e "$TMP/dp/model"
finish
