#!/usr/bin/env bash
# Randomized fault injection under the launcher, with real mpirun and real signals (stage lm,
# configs/lm.toml made small). The trials are drawn from a seed, printed first: FAULT_SEED=S
# replays the same trials (only the timing differs).
#  - 10 trials: a layout (pp=2, dp=2, dp=2 x pp=2 on 4 oversubscribed ranks, pp=2 with 1F1B),
#    a victim rank and a step; `kill -9` of that rank once the step is logged, --max-restarts 1.
#    The first attempt must be over within 10 s of the kill (the launcher prints its restart
#    line), every process of it gone by then, the error must name the victim, and the restarted
#    job must end (exit 0) with the uninterrupted run's weights, bit for bit.
#  - a drawn kill with --max-restarts 0: exit 1 within 10 s, nothing left.
#  - a drawn rank stopped with SIGSTOP, --max-restarts 1: the heartbeat timeout names it, and the
#    restart ends with the uninterrupted weights.
#  - a rank killed inside a checkpoint write (GRAPHTUNE_TEST_KILL_IN_SAVE, through the launcher):
#    the killed step is never committed, the restart resumes from the previous checkpoint and
#    ends with the uninterrupted weights.
#  - a kill -9 at a random moment while a bigger model's checkpoint is being written: the
#    restart resumes from the newest committed checkpoint, whatever that turned out to be, and
#    ends with the uninterrupted weights.
source "$(dirname "$0")/lib.sh"
need_mpirun 300
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CFG=$ROOT/configs/lm.toml
W=${GRAPHTUNE_WORKER:?set by ctest}

SEED=${FAULT_SEED:-$((RANDOM * 32768 + RANDOM))}
echo "fault trials: seed $SEED (replay: FAULT_SEED=$SEED)"
RANDOM=$SEED  # every draw below comes from bash's generator, seeded here

STEPS=24
EVERY=4
JOB=(-c "$CFG" --training.steps $STEPS --training.log_every 1 --training.seq_len 32 --training.batch_size 8
     --checkpoint.every $EVERY)
LAYOUTS=("--pp 2" "--dp 2" "--dp 2 --pp 2" "--pp 2 --schedule 1f1b --microbatches 4")
NAMES=(pp2 dp2 dp2xpp2 pp2-1f1b)
RANKS=(2 2 4 2)

# job_processes DIR LAUNCHER: "pid:starttime" of every process of the job writing into DIR (mpirun
# and the ranks), the launcher itself left out; the start time tells a pid reused later apart.
job_processes() {
  local p f
  for p in $(pgrep -f "out_dir $1( |$)"); do
    [ "$p" = "$2" ] && continue
    read -r -a f 2>/dev/null <"/proc/$p/stat" || continue
    echo "$p:${f[21]}"
  done
}
# alive PID:START...: prints those still running (a zombie has ended: only its exit status is left).
alive() {
  local e f
  for e in "$@"; do
    read -r -a f 2>/dev/null <"/proc/${e%%:*}/stat" || continue
    [ "${f[21]}" = "${e#*:}" ] && [ "${f[2]}" != Z ] && echo "${e%%:*}"
  done
}
# wait_for_line FILE TEXT LAUNCHER: until FILE has a line with TEXT, or the launcher has exited
# (15 s at most); 0 when the line came.
wait_for_line() {
  for _ in $(seq 750); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || { grep -q -- "$2" "$1"; return; }
    sleep 0.02
  done
  return 1
}

# reference LAYOUT_INDEX: sets ref to the weights of the uninterrupted run of that layout, run
# the first time a layout is drawn and kept.
reference() {
  local dir=$TMP/ref_${NAMES[$1]} t
  ref=$dir/model/model.safetensors
  [ -s "$ref" ] && return
  t=$(date +%s%N)
  # shellcheck disable=SC2086
  "$GT" train "${JOB[@]}" ${LAYOUTS[$1]} --job.out_dir "$dir" >"$dir.out" 2>"$dir.err"
  echo "     (reference ${NAMES[$1]}: exit $?, $(ms_since "$t") ms)"
}

# kill_at STEP DIR VICTIM LAUNCHER: once the job writing into DIR has logged STEP, kill -9 its
# rank VICTIM. Leaves pid (the victim's), first (every process of the job then, as job_processes
# gives them) and t0 (the time of the kill, ns). The pids are looked up at step 1, so that little
# happens between STEP and the kill.
kill_at() {
  wait_for_step "$2" 1
  pid=$(rank_pid "$2" "$3")
  mapfile -t first < <(job_processes "$2" "$4")
  wait_for_step "$2" "$1"
  t0=$(date +%s%N)
  kill -9 "$pid"
}
# show_failure FILES: what the launcher and the ranks said about the failure, for a failed check.
show_failure() { grep -hE 'graphtune: (error|restart)|mpirun noticed|resumed from' "$@" | sed 's/^/     | /'; }

stop_times=()
survived=0
trials=10
for trial in $(seq $trials); do
  li=$((RANDOM % ${#LAYOUTS[@]}))
  victim=$((RANDOM % RANKS[li]))
  step=$((2 + RANDOM % (STEPS - 3)))  # in [2, STEPS-2]
  reference "$li"
  dir=$TMP/t$trial
  what="trial $trial (${NAMES[$li]}, kill -9 rank $victim at step $step)"
  # shellcheck disable=SC2086
  "$GT" train "${JOB[@]}" ${LAYOUTS[$li]} --max-restarts 1 --job.out_dir "$dir" >"$dir.out" 2>"$dir.err" &
  launcher=$!
  kill_at "$step" "$dir" "$victim" "$launcher"
  wait_for_line "$dir.out" "restart 1 of 1" "$launcher"
  ms=$(ms_since "$t0")
  left=$(alive "${first[@]}" | tr '\n' ' ')
  wait $launcher
  rc=$?
  stop_times+=("$ms")
  echo "     ($what: pid $pid, ${#first[@]} processes; attempt 1 over after $ms ms; exit $rc)"
  failed_before=$failures
  check "$what: attempt 1 stopped within 10 s" test "$ms" -lt 10000
  check "$what: no process of attempt 1 outlived it" test -z "$left"
  [ -z "$left" ] || echo "     left: $left"
  check "$what: the error names rank $victim" \
    grep -q "error: rank $victim (pid $pid on .*) exited without finishing (killed or crashed)" "$dir.err"
  check "$what: the restarted job finishes (exit 0)" test "$rc" -eq 0
  check "$what: with the uninterrupted run's weights" cmp -s "$dir/model/model.safetensors" "$ref"
  check "$what: no process is left" no_leftovers
  if [ "$failures" -eq "$failed_before" ]; then
    survived=$((survived + 1))
  else
    show_failure "$dir.out" "$dir.err"
  fi
done
max=$(printf '%s\n' "${stop_times[@]}" | sort -n | tail -1)
echo "     (stop times, ms: ${stop_times[*]})"
echo "fault trials: $trials run, $survived survived, max stop $max ms"

# --- a drawn kill without restarts: the job fails at once and leaves nothing
li=$((RANDOM % ${#LAYOUTS[@]}))
victim=$((RANDOM % RANKS[li]))
step=$((2 + RANDOM % (STEPS - 3)))
dir=$TMP/norestart
what="no restart (${NAMES[$li]}, kill -9 rank $victim at step $step)"
# shellcheck disable=SC2086
"$GT" train "${JOB[@]}" ${LAYOUTS[$li]} --max-restarts 0 --job.out_dir "$dir" >"$dir.out" 2>"$dir.err" &
launcher=$!
kill_at "$step" "$dir" "$victim" "$launcher"
wait $launcher
rc=$?
ms=$(ms_since "$t0")
echo "     ($what: pid $pid; the launcher exited $rc after $ms ms)"
check "$what: exit 1" test "$rc" -eq 1
check "$what: within 10 s" test "$ms" -lt 10000
check "$what: the error names rank $victim" grep -q "error: rank $victim (pid $pid on .*) exited without finishing" "$dir.err"
check "$what: no process of the job outlived the launcher" test -z "$(alive "${first[@]}")"
check "$what: no process is left" no_leftovers

# --- a drawn rank stopped (SIGSTOP) with --max-restarts 1: silent, not dead. The heartbeat
# timeout names it, the stopped process is killed, and the restart ends with the same weights.
li=$((RANDOM % ${#LAYOUTS[@]}))
victim=$((RANDOM % RANKS[li]))
step=$((2 + RANDOM % (STEPS - 3)))
reference "$li"
dir=$TMP/stall
what="stall (${NAMES[$li]}, SIGSTOP to rank $victim at step $step, --heartbeat-timeout 4)"
# shellcheck disable=SC2086
"$GT" train "${JOB[@]}" ${LAYOUTS[$li]} --heartbeat-timeout 4 --max-restarts 1 --job.out_dir "$dir" \
  >"$dir.out" 2>"$dir.err" &
launcher=$!
wait_for_step "$dir" 1
pid=$(rank_pid "$dir" "$victim")
mapfile -t first < <(job_processes "$dir" "$launcher")
wait_for_step "$dir" "$step"
t0=$(date +%s%N)
kill -STOP "$pid"
wait_for_line "$dir.out" "restart 1 of 1" "$launcher"
ms=$(ms_since "$t0")
left=$(alive "${first[@]}" | tr '\n' ' ')
wait $launcher
rc=$?
echo "     ($what: pid $pid; attempt 1 over after $ms ms; exit $rc)"
check "$what: the timeout names rank $victim" grep -q "error: rank $victim (pid $pid on .*) sent no heartbeat for 4 s" "$dir.err"
check "$what: within the timeout and 10 s" test "$ms" -lt 14000
check "$what: the stopped process and the rest of attempt 1 are gone" test -z "$left"
check "$what: the restarted job finishes (exit 0)" test "$rc" -eq 0
check "$what: with the uninterrupted run's weights" cmp -s "$dir/model/model.safetensors" "$ref"
check "$what: no process is left" no_leftovers

# --- killed inside a checkpoint write (after its shard, before the commit), through the launcher.
# The restarted job inherits the variable; the worker fires it only in a run that did not resume.
li=$((RANDOM % ${#LAYOUTS[@]}))
victim=$((RANDOM % RANKS[li]))
save=$((EVERY * (2 + RANDOM % (STEPS / EVERY - 2))))  # a checkpoint with one before it, not the last
prev=$((save - EVERY))
dir=$TMP/insave
what="killed in save (${NAMES[$li]}, rank $victim in the save of step $save)"
reference "$li"
# shellcheck disable=SC2086
GRAPHTUNE_TEST_KILL_IN_SAVE=$victim:$save \
  "$GT" train "${JOB[@]}" ${LAYOUTS[$li]} --checkpoint.keep_latest 0 --max-restarts 1 --job.out_dir "$dir" \
  >"$dir.out" 2>"$dir.err" &
launcher=$!
wait_for_line "$dir.out" "restart 1 of 1" "$launcher"
killed=$dir/checkpoints/step_$(printf %08d $save)
uncommitted=$([ -d "$killed" ] && [ ! -e "$killed/index.json" ] && echo yes)
wait $launcher
rc=$?
echo "     ($what: exit $rc; step $save uncommitted when attempt 1 was over: ${uncommitted:-no})"
check "$what: the launcher hands the variable to mpirun (-x)" \
  grep -q "attempt 1: mpirun .*-x GRAPHTUNE_TEST_KILL_IN_SAVE" "$dir/logs/workers.log"
check "$what: the error names rank $victim" grep -q "error: rank $victim (pid .*) exited without finishing" "$dir.err"
check "$what: step $save was begun, not committed" test "$uncommitted" = yes
check "$what: the restart resumes from step $prev" grep -q "restart 1 of 1 from .*/step_$(printf %08d $prev)\$" "$dir.out"
check "$what: the ranks resumed at step $prev" grep -q "resumed from .*step_$(printf %08d $prev) at step $prev" "$dir.err"
check "$what: the job finishes (exit 0)" test "$rc" -eq 0
check "$what: step $save was written again, committed" test -s "$killed/index.json"
check "$what: with the uninterrupted run's weights" cmp -s "$dir/model/model.safetensors" "$ref"
check "$what: no process is left" no_leftovers

# --- a kill -9 at a random moment of a checkpoint write: a model of 180 MiB of checkpoint, whose
# save takes ~0.3 s here; the kill comes a drawn 0-150 ms after the step's folder appears.
# Whether it lands before the commit or after, the restart must resume from the newest
# committed checkpoint and end with the uninterrupted weights.
BIG=(-c "$CFG" --training.steps 4 --training.log_every 1 --training.seq_len 32 --training.batch_size 8
     --checkpoint.every 1 --model.dim 512 --model.hidden_dim 2048 --pp 2)
save=$((2 + RANDOM % 2))
victim=$((RANDOM % 2))
delay_ms=$((RANDOM % 151))
dir=$TMP/bigsave
what="kill in a write (pp2, 180 MiB, rank $victim ${delay_ms} ms into the save of step $save)"
t=$(date +%s%N)
"$GT" train "${BIG[@]}" --job.out_dir "$TMP/ref_big" >"$TMP/ref_big.out" 2>"$TMP/ref_big.err"
echo "     (reference of the big model: exit $?, $(ms_since "$t") ms)"
"$GT" train "${BIG[@]}" --max-restarts 1 --job.out_dir "$dir" >"$dir.out" 2>"$dir.err" &
launcher=$!
wait_for_step "$dir" 1
pid=$(rank_pid "$dir" "$victim")
folder=$dir/checkpoints/step_$(printf %08d $save)
for _ in $(seq 6000); do [ -d "$folder" ] && break; sleep 0.005; done
sleep "$(printf '0.%03d' $delay_ms)"
kill -9 "$pid"
wait_for_line "$dir.out" "restart 1 of 1" "$launcher"
# The newest committed checkpoint when attempt 1 was over: what the restart must resume from.
newest=$(ls -d "$dir"/checkpoints/step_*/index.json 2>/dev/null | tail -1 | xargs -r dirname | xargs -r basename)
landed=$([ -e "$folder/index.json" ] && echo "after the commit" || echo "inside the write")
wait $launcher
rc=$?
echo "     ($what: the kill landed $landed; newest committed then: ${newest:-none})"
check "$what: the restart resumes from the newest committed checkpoint" grep -q "restart 1 of 1 from .*/$newest\$" "$dir.out"
check "$what: the ranks resumed there" grep -q "resumed from .*/$newest at step" "$dir.err"
check "$what: the job finishes (exit 0)" test "$rc" -eq 0
check "$what: with the uninterrupted run's weights" cmp -s "$dir/model/model.safetensors" "$TMP/ref_big/model/model.safetensors"
check "$what: no process is left" no_leftovers
[ "$failures" -eq 0 ] || show_failure "$dir.out" "$dir.err"

finish
