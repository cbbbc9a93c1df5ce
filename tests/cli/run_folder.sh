#!/usr/bin/env bash
# A failing or repeated run never destroys what earlier steps or runs committed (docs/robustness.md):
# - a full disk mid-run: a real one (a 12 MB tmpfs, where mount works) and an injected ENOSPC
#   (GRAPHTUNE_TEST_DISK_FULL_IN_SAVE) for one rank and for pp=2: exit 1, one line naming the file,
#   the operation and the errno text; the committed checkpoints, train_log.jsonl and logs/ stay;
#   after space is freed, --resume latest ends with the weights of an uninterrupted run (cmp);
# - a read-only folder (where mount works): exit 1, nothing started;
# - one job a folder: a second job into a running one's folder is refused naming the holder; a
#   lock left by a process that is gone is taken over, and the run says so; a finished run's
#   folder is refused without --resume or --overwrite, and replaced with --overwrite; so are a
#   hand-written mpirun's (the worker alone) and a pipeline's.
source "$(dirname "$0")/lib.sh"
need_mpirun 300
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CFG=$ROOT/configs/lm.toml
W=${GRAPHTUNE_WORKER:?set by ctest}
JOB=(train -c "$CFG" --training.steps 8 --training.log_every 2 --checkpoint.every 2 --training.threads 1)
committed() { test -f "$1/checkpoints/step_0000000$2/index.json"; }

# The uninterrupted runs every resumed one must end with, bit for bit.
"$GT" "${JOB[@]}" --job.out_dir "$TMP/ref" >"$TMP/ref.out" 2>&1
check "the uninterrupted run finishes" test -s "$TMP/ref/model/model.safetensors"
"$GT" "${JOB[@]}" --pp 2 --job.out_dir "$TMP/ref_pp2" >"$TMP/ref_pp2.out" 2>&1
check "the uninterrupted pp=2 run finishes" test -s "$TMP/ref_pp2/model/model.safetensors"

# full NAME DIR [FLAGS...]: a job that runs out of space at step 6 (after 2 and 4 committed), then
# its resume once there is space; checks what is left between the two.
full() {
  local name=$1 dir=$2 ref=$3; shift 3
  "$GT" "${JOB[@]}" --job.out_dir "$dir" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
  local rc=$?
  check "$name: exit 1 (the run failed, its input did not)" test "$rc" -eq 1
  check "$name: one line names the file, the operation and the errno text" \
    grep -qE "^graphtune: error: .*step_00000006/rank_0000[01]\.safetensors: (write failed|cannot create): No space left on device" \
    "$TMP/$name.err"
  grep -m1 'No space left' "$TMP/$name.err" | sed 's/^/    /' | cut -c1-200
  check "$name: steps 2 and 4 stay committed" bash -c "$(declare -f committed); committed '$dir' 2 && committed '$dir' 4"
  check "$name: step 6 is not committed" test ! -f "$dir/checkpoints/step_00000006/index.json"
  check "$name: train_log.jsonl and the logs stay" test -s "$dir/train_log.jsonl" -a -s "$dir/logs/workers.log"
  check "$name: nothing final was written" test ! -e "$dir/model"
}
resumes() {
  local name=$1 dir=$2 ref=$3; shift 3
  "$GT" "${JOB[@]}" --job.out_dir "$dir" --resume latest "$@" >"$TMP/$name.resume.out" 2>&1
  check "$name: --resume latest finishes" test $? -eq 0
  check "$name: with the uninterrupted run's weights" cmp -s "$dir/model/model.safetensors" "$ref/model/model.safetensors"
}

# A real full disk: 12 MB holds two checkpoints of this job (5 MB each), not a third.
MNT=$TMP/small
mkdir -p "$MNT"
if mount -t tmpfs -o size=12m tmpfs "$MNT" 2>/dev/null; then
  trap 'umount "$MNT" 2>/dev/null; umount "$TMP/ro" 2>/dev/null; rm -rf "$TMP"' EXIT
  full tmpfs "$MNT/run" "$TMP/ref"
  mount -o remount,size=200m "$MNT"
  resumes tmpfs "$MNT/run" "$TMP/ref"
  umount "$MNT"
  # A read-only folder: the job cannot make its run folder there; nothing starts.
  mkdir -p "$TMP/ro"
  mount -t tmpfs -o ro,size=1m tmpfs "$TMP/ro"
  "$GT" "${JOB[@]}" --job.out_dir "$TMP/ro/run" >"$TMP/ro.out" 2>"$TMP/ro.err"
  check "read-only folder: exit 1, one line: cannot create folder: Read-only file system" \
    bash -c "test $? -eq 1 && test \$(grep -c '' '$TMP/ro.err') -eq 1 && grep -q 'ro/run: cannot create folder: Read-only file system' '$TMP/ro.err'"
  umount "$TMP/ro"
else
  echo "SKIP (the real full disk and the read-only folder): mount -t tmpfs is not allowed here; the injected one follows"
fi
# An injected one, at one rank and at pp=2 (rank 1's shard).
GRAPHTUNE_TEST_DISK_FULL_IN_SAVE=0:6 full injected "$TMP/inj" "$TMP/ref"
resumes injected "$TMP/inj" "$TMP/ref"
GRAPHTUNE_TEST_DISK_FULL_IN_SAVE=1:6 full injected_pp2 "$TMP/inj_pp2" "$TMP/ref_pp2" --pp 2
check "injected_pp2: the line names rank 1" grep -q 'rank_00001.safetensors: write failed' "$TMP/injected_pp2.err"
resumes injected_pp2 "$TMP/inj_pp2" "$TMP/ref_pp2" --pp 2

# One job a folder: while a job runs, a second one into its folder is refused, naming the first.
"$GT" train -c "$CFG" --training.steps 100000 --training.threads 1 --job.out_dir "$TMP/busy" >"$TMP/busy.out" 2>&1 &
first=$!
wait_for_step "$TMP/busy" 2
expect_fail "a second job into a running job's folder" "is the run folder of another job (host " -- \
  "$GT" "${JOB[@]}" --job.out_dir "$TMP/busy"
check "the refusal names the holder's pid" grep -q "pid $first, started" "$TMP/err"
expect_fail "and so is the worker alone (a hand-written mpirun)" "is the run folder of another job" -- \
  "$W" train -c "$CFG" --training.steps 8 --job.out_dir "$TMP/busy"
kill -INT "$first"
wait "$first"
check "the first job stopped and saved" grep -q "saved at step" "$TMP/busy.out"
check "its folder is released: the lock file is gone" test ! -e "$TMP/busy/graphtune.lock"

# A lock left by a process that is gone is taken over, and the run says so.
mkdir -p "$TMP/stale"
echo "host gone, pid 999999, started 2026-01-01 00:00:00 UTC: graphtune train" >"$TMP/stale/graphtune.lock"
"$GT" "${JOB[@]}" --job.out_dir "$TMP/stale" >"$TMP/stale.out" 2>&1
check "a stale lock: the job runs" test -s "$TMP/stale/model/model.safetensors"
check "a stale lock: taken over, and said so" \
  grep -q "graphtune.lock was left by a job that no longer runs (host gone, pid 999999, started 2026-01-01 00:00:00 UTC: graphtune train): taken over" \
  "$TMP/stale.out"

# A finished run's folder: refused without --resume or --overwrite, replaced with --overwrite.
expect_fail "a finished run's folder" "holds the committed work of an earlier run (model/config.json, checkpoints/step_" -- \
  "$GT" "${JOB[@]}" --job.out_dir "$TMP/ref"
check "the refusal says what to do" grep -q -- "--resume latest continues that run, --overwrite replaces it" "$TMP/err"
expect_fail "a finished run's folder, the worker alone" "holds the committed work of an earlier run" -- \
  "$W" train -c "$CFG" --training.steps 8 --job.out_dir "$TMP/ref"
expect_fail "a finished run's folder, --dry-run" "holds the committed work of an earlier run" -- \
  "$GT" "${JOB[@]}" --job.out_dir "$TMP/ref" --dry-run
cp "$TMP/ref/model/model.safetensors" "$TMP/ref_model.safetensors"
"$GT" train -c "$CFG" --training.steps 4 --training.log_every 2 --checkpoint.every 2 --training.threads 1 \
  --job.out_dir "$TMP/ref" --overwrite >"$TMP/over.out" 2>&1
check "--overwrite replaces it" test $? -eq 0
check "--overwrite: the earlier run's checkpoints are gone" test ! -e "$TMP/ref/checkpoints/step_00000008"
check "--overwrite: the new run's model" bash -c "! cmp -s '$TMP/ref/model/model.safetensors' '$TMP/ref_model.safetensors'"
"$W" train -c "$CFG" --training.steps 4 --training.log_every 2 --job.out_dir "$TMP/ref" --overwrite >"$TMP/wover.out" 2>&1
check "the worker alone: --overwrite replaces it too" test $? -eq 0

# A pipeline's stages follow the same rule; the rest of its folder is not the pipeline's.
printf '[pipeline]\nstage1 = "%s"\nstage2 = "%s"\nout_dir = "%s"\n' "$CFG" "$CFG" "$TMP/pipe" >"$TMP/pipe.toml"
mkdir -p "$TMP/pipe" && cp -r "$TMP/ref" "$TMP/pipe/warmup"
"$GT" pipeline -c "$TMP/pipe.toml" --dry-run >"$TMP/pipe.out" 2>&1
check "a pipeline beside another run's work in its folder" test $? -eq 0
cp -r "$TMP/ref" "$TMP/pipe/stage1"
expect_fail "a pipeline whose stage1 finished before" "pipe: holds the committed work of an earlier run (stage1/model/config.json" -- \
  "$GT" pipeline -c "$TMP/pipe.toml" --dry-run
check "the pipeline's refusal says what to do" grep -q -- "--resume continues it, --overwrite replaces it" "$TMP/err"
"$GT" pipeline -c "$TMP/pipe.toml" --dry-run --overwrite >"$TMP/pipe.out" 2>&1
check "a pipeline with --overwrite" test $? -eq 0
check "no job was left running" no_leftovers
finish
