#!/usr/bin/env bash
# Faults under the launcher, with real mpirun and real signals (pp=2, stage lm):
#  - a worker killed with -9: the job is stopped within 10 s, the error names the rank, no
#    process of the job is left; with --max-restarts 1 it resumes from the newest committed
#    checkpoint and ends with the uninterrupted run's weights, bit for bit;
#  - a worker stopped with SIGSTOP: the heartbeat timeout names it;
#  - the launcher killed with -9: no worker outlives it;
#  - SIGTERM and SIGINT on the launcher: the workers save a checkpoint at the step they agree
#    on, the launcher exits 143 / 130 and prints the command that resumes; that command ends
#    with the uninterrupted run's weights.
source "$(dirname "$0")/lib.sh"
need_mpirun 300
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CFG=$ROOT/configs/lm.toml
JOB=(-c "$CFG" --training.steps 24 --training.log_every 4 --training.seq_len 64 --checkpoint.every 4 --pp 2)

# The uninterrupted run every recovery must end at.
"$GT" train "${JOB[@]}" --job.out_dir "$TMP/ref" >"$TMP/ref.out" 2>&1
check "the uninterrupted run finishes" test -s "$TMP/ref/model/model.safetensors"

# --- kill -9 of rank 1, no restarts
"$GT" train "${JOB[@]}" --job.out_dir "$TMP/kill" >"$TMP/kill.out" 2>"$TMP/kill.err" &
launcher=$!
wait_for_step "$TMP/kill" 6
victim=$(rank_pid "$TMP/kill" 1)
t0=$(date +%s%N)
kill -9 "$victim"
wait $launcher
rc=$?
ms=$(ms_since "$t0")
echo "     (killed rank 1, pid $victim: the launcher exited $rc after $ms ms)"
check "a killed worker fails the job (exit 1)" test "$rc" -eq 1
check "it is stopped within 10 s" test "$ms" -lt 10000
check "the error names the rank and the cause" grep -q "error: rank 1 (pid $victim on .*) exited without finishing (killed or crashed)" "$TMP/kill.err"
sleep 0.5
check "no process of the job is left" no_leftovers

# --- the same kill with --max-restarts 1: the job resumes from its newest committed checkpoint
"$GT" train "${JOB[@]}" --max-restarts 1 --job.out_dir "$TMP/restart" >"$TMP/restart.out" 2>"$TMP/restart.err" &
launcher=$!
wait_for_step "$TMP/restart" 10
kill -9 "$(rank_pid "$TMP/restart" 1)"
wait $launcher
rc=$?
check "with --max-restarts 1 the job finishes (exit 0)" test "$rc" -eq 0
check "it restarted from a committed checkpoint" grep -q "restart 1 of 1 from .*/checkpoints/step_000000" "$TMP/restart.out"
check "the restarted run ends with the uninterrupted run's weights" \
  cmp "$TMP/restart/model/model.safetensors" "$TMP/ref/model/model.safetensors"
check "metrics.jsonl records the first attempt and the resumed one" grep -q '"attempt":1' "$TMP/restart/metrics.jsonl"
check "no process of the job is left" no_leftovers

# --- SIGSTOP of rank 1: silent, not dead; the heartbeat timeout finds it
"$GT" train "${JOB[@]}" --heartbeat-timeout 3 --job.out_dir "$TMP/stall" >"$TMP/stall.out" 2>"$TMP/stall.err" &
launcher=$!
wait_for_step "$TMP/stall" 4
victim=$(rank_pid "$TMP/stall" 1)
t0=$(date +%s%N)
kill -STOP "$victim"
wait $launcher
rc=$?
ms=$(ms_since "$t0")
echo "     (stopped rank 1, pid $victim: the launcher exited $rc after $ms ms)"
check "a stalled worker fails the job" test "$rc" -eq 1
check "the timeout names it" grep -q "error: rank 1 (pid $victim on .*) sent no heartbeat for 3 s" "$TMP/stall.err"
check "within the timeout and 10 s" test "$ms" -lt 13000
sleep 0.5
check "the stopped process is gone too" no_leftovers

# --- kill -9 of the launcher itself: mpirun dies with it, and the workers with mpirun
"$GT" train "${JOB[@]}" --job.out_dir "$TMP/orphan" >"$TMP/orphan.out" 2>&1 &
launcher=$!
wait_for_step "$TMP/orphan" 4
kill -9 $launcher
wait $launcher 2>/dev/null
gone=0
for _ in $(seq 100); do
  if no_leftovers; then gone=1; break; fi
  sleep 0.1
done
check "a launcher killed with -9 leaves no worker behind (within 10 s)" test $gone -eq 1

# --- SIGTERM and SIGINT on the launcher: save, stop, say how to resume
for sig in TERM INT; do
  want=$([ $sig = TERM ] && echo 143 || echo 130)
  "$GT" train "${JOB[@]}" --checkpoint.every 100 --job.out_dir "$TMP/sig$sig" >"$TMP/sig$sig.out" 2>"$TMP/sig$sig.err" &
  launcher=$!
  wait_for_step "$TMP/sig$sig" 6
  kill -$sig $launcher
  wait $launcher
  rc=$?
  check "SIG$sig: the launcher exits $want" test "$rc" -eq "$want"
  check "SIG$sig: the workers saved a checkpoint and stopped" \
    bash -c "ls -d '$TMP/sig$sig/checkpoints/step_'*/index.json >/dev/null && grep -q 'stopped' '$TMP/sig$sig.out'"
  check "SIG$sig: no final model (the run is not finished)" test ! -e "$TMP/sig$sig/model"
  resume=$(sed -n 's/^graphtune: saved at step [0-9]*; to continue: graphtune //p' "$TMP/sig$sig.out")
  check "SIG$sig: the launcher prints the command that resumes" test -n "$resume"
  eval "\"$GT\" $resume" >"$TMP/sig$sig.resume.out" 2>&1
  check "SIG$sig: that command finishes the run" test $? -eq 0
  check "SIG$sig: with the uninterrupted run's weights" cmp "$TMP/sig$sig/model/model.safetensors" "$TMP/ref/model/model.safetensors"
done
check "no process of the jobs is left" no_leftovers
finish
