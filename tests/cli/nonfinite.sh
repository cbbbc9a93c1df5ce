#!/usr/bin/env bash
# Numeric faults ([training].on_nonfinite, train/train_loop.cpp): a NaN put into ONE rank's
# gradients after every reduction (GRAPHTUNE_TEST_NONFINITE=RANK:STEP, train/step_runner.cpp)
# is seen by every rank at the same step;
#  - skip_step (the default): every rank skips that step's update (the weights and the optimizer
#    state after it equal those before it, bit for bit), says so, the run goes on and finishes,
#    and the launcher counts it;
#  - abort: the job ends at that step, naming it, with no final model;
#  - more than max_skipped_in_a_row skips in a row end the run (the model diverged).
source "$(dirname "$0")/lib.sh"
need_mpirun 300
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${GRAPHTUNE_PYTHON:-python3}
READ=$ROOT/tests/read_checkpoint.py
JOB=(-c "$ROOT/configs/lm.toml" --training.steps 6 --training.log_every 1 --training.seq_len 32
     --training.batch_size 8 --training.threads 1 --checkpoint.every 1 --checkpoint.keep_latest 0)

# skip_lines NAME: the ranks' "skipped" lines of run NAME, as "rank R step S".
skip_lines() {
  cat "$TMP/$1.out" "$TMP/$1.err" |
    sed -n 's/.*graphtune: rank \([0-9]*\): step \([0-9]*\): the loss is .* its update is skipped.*/rank \1 step \2/p' | sort
}
ckpt() { echo "$TMP/$1/checkpoints/step_$(printf %08d "$2")"; }

# --- skip_step at dp=2: the NaN is in rank 1's summed gradients only
GRAPHTUNE_TEST_NONFINITE=1:3 "$GT" train "${JOB[@]}" --dp 2 --job.out_dir "$TMP/dp" >"$TMP/dp.out" 2>"$TMP/dp.err"
check "skip_step, dp=2: the run finishes (exit 0)" test $? -eq 0
echo "     skipped: $(skip_lines dp | tr '\n' ';')"
check "both ranks skipped step 3, and nothing else" test "$(skip_lines dp | tr '\n' ';')" = "rank 0 step 3;rank 1 step 3;"
check "the weights and optimizer state after step 3 are those after step 2, bit for bit" \
  "$PY" "$READ" same-state "$(ckpt dp 2)" "$(ckpt dp 3)"
check "and step 4 trained again (its weights differ)" bash -c "'$PY' '$READ' same-state '$(ckpt dp 3)' '$(ckpt dp 4)' 2>&1 | grep -q ': model/.* differs'"
check "train_log.jsonl marks step 3 skipped, without a gradient norm" \
  grep -q '^{"step":3,"loss":[^,]*,"lr":[^,]*,"grad_norm":null,.*"skipped":1}' "$TMP/dp/train_log.jsonl"
check "metrics.jsonl records step 3 without a gradient norm" grep -q '"grad_norm":null,.*"skipped":true' "$TMP/dp/metrics.jsonl"
check "the launcher's summary counts it" grep -q "graphtune: 1 step skipped (loss or gradients not finite): 3" "$TMP/dp.out"
check "the final model is written" test -s "$TMP/dp/model/model.safetensors"

# --- abort at pp=2: the NaN is in stage 0's gradients; the loss (on stage 1) is fine
GRAPHTUNE_TEST_NONFINITE=0:4 "$GT" train "${JOB[@]}" --pp 2 --training.on_nonfinite abort \
  --job.out_dir "$TMP/abort" >"$TMP/abort.out" 2>"$TMP/abort.err"
rc=$?
check "abort, pp=2: the job fails (exit 1)" test $rc -eq 1
check "the error names the step and the policy" \
  grep -q 'step 4: the loss is [0-9.]* and the gradient norm nan on every rank (\[training\].on_nonfinite = "abort")' "$TMP/abort.err"
check "on every rank, as an error of the run, not an internal one" \
  bash -c "[ \$(grep -c 'graphtune: error: rank [01]: step 4: ' '$TMP/abort.err') -eq 2 ] && ! grep -q 'internal error' '$TMP/abort.err'"
check "no step after 3 was committed" test ! -e "$(ckpt abort 4)" -a -e "$(ckpt abort 3)"
check "no final model" test ! -e "$TMP/abort/model"

# --- too many in a row, one process: steps 2, 3, 4 are NaN and at most 2 may be skipped
GRAPHTUNE_TEST_NONFINITE=0:2-4 "$GT" train "${JOB[@]}" --training.max_skipped_in_a_row 2 \
  --job.out_dir "$TMP/row" >"$TMP/row.out" 2>"$TMP/row.err"
rc=$?
check "max_skipped_in_a_row 2: the third NaN step in a row ends the run (exit 1)" test $rc -eq 1
check "steps 2 and 3 were skipped first" test "$(skip_lines row | tr '\n' ';')" = "rank 0 step 2;rank 0 step 3;"
check "the error says why" grep -q "step 4: .* 3 steps in a row were not finite, more than \[training\].max_skipped_in_a_row = 2: the model diverged" "$TMP/row.err"

# --- the policy is checked with the config
expect_fail "an unknown policy" "--training.on_nonfinite: 'ignore' is not one of: skip_step, abort" -- \
  "$GT" train "${JOB[@]}" --training.on_nonfinite ignore --job.out_dir "$TMP/bad"
expect_fail "a limit of 0" "--training.max_skipped_in_a_row: must be positive, got 0" -- \
  "$GT" train "${JOB[@]}" --training.max_skipped_in_a_row 0 --job.out_dir "$TMP/bad"
check "a rejected config leaves no run folder" test ! -e "$TMP/bad"
finish
