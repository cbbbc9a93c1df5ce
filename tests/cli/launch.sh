#!/usr/bin/env bash
# graphtune train through the launcher: --dry-run, bad launch input (one line, exit 2, nothing
# started), metrics.jsonl and TensorBoard events read back by the tensorboard package, hostile
# bytes on the control port during a run, and a two-host job (two made-up hosts whose "remote"
# daemons tests/cli/fake_rsh.sh starts on this machine).
source "$(dirname "$0")/lib.sh"
need_mpirun 300
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${GRAPHTUNE_PYTHON:-python3}
CFG=$ROOT/configs/lm.toml
SHORT=(--training.steps 6 --training.log_every 2 --training.seq_len 64)

# --- dry run: the composed mpirun command, nothing started
"$GT" train -c "$CFG" "${SHORT[@]}" --pp 2 --job.out_dir "$TMP/dry" --dry-run >"$TMP/dry.out" 2>"$TMP/dry.err"
check "--dry-run exits 0" test $? -eq 0
check "--dry-run prints mpirun with 2 ranks" grep -q "^mpirun -np 2 " "$TMP/dry.out"
check "--dry-run passes the layout to the workers" grep -q -- "--parallelism.pp 2" "$TMP/dry.out"
check "--dry-run gives each rank its share of the cores" grep -q -- "--training.threads " "$TMP/dry.out"
check "the job token stays off the command line (-x NAME only)" \
  bash -c "grep -q -- '-x GRAPHTUNE_JOB_TOKEN ' '$TMP/dry.out' && ! grep -q 'GRAPHTUNE_JOB_TOKEN=' '$TMP/dry.out'"
check "--dry-run starts nothing" test ! -e "$TMP/dry"
"$GT" train -c "$CFG" "${SHORT[@]}" --np 4 --pp 2 --job.out_dir "$TMP/dry" --dry-run >"$TMP/dry4.out" 2>&1
check "--np 4 --pp 2 sets dp 2" grep -q -- "--parallelism.dp 2" "$TMP/dry4.out"
"$GT" train -c "$CFG" "${SHORT[@]}" --job.out_dir "$TMP/dry" --dry-run >"$TMP/dry1.out" 2>&1
check "one rank runs the worker alone (no mpirun)" bash -c "grep -q 'graphtune-worker train' '$TMP/dry1.out' && ! grep -q mpirun '$TMP/dry1.out'"

# A slot list picks devices: each host gets its own app context with CUDA_VISIBLE_DEVICES
printf 'nodeA slots=2\nnodeB slots=2\n' >"$TMP/two.txt"
"$GT" train -c "$CFG" "${SHORT[@]}" --hostfile "$TMP/two.txt" --include "nodeA:1@nodeB" --np 3 --job.out_dir "$TMP/dry" \
  --training.batch_size 12 \
  --dry-run >"$TMP/dry3.out" 2>&1
check "--include nodeA:1@nodeB: rank 0 sees device 1 of nodeA" grep -q -- "-np 1 --host nodeA:1 .*CUDA_VISIBLE_DEVICES=1 " "$TMP/dry3.out"
check "--include nodeA:1@nodeB: ranks 1, 2 see devices 0,1 of nodeB" grep -q -- " : -np 2 --host nodeB:2 .*CUDA_VISIBLE_DEVICES=0,1 " "$TMP/dry3.out"
# The printed line names a hostfile the launcher writes only when it runs: the dry run shows it,
# and names the variables -x passes on, which only the launcher has values for.
check "--dry-run shows the hostfile it would write" \
  bash -c "grep -qx '# $TMP/dry/logs/hostfile, which the launcher writes before it starts mpirun:' '$TMP/dry3.out' &&
           grep -qx '#   nodeB slots=2' '$TMP/dry3.out'"
check "--dry-run names the variables the launcher sets" \
  grep -q "  # GRAPHTUNE_CONTROL_ADDR, GRAPHTUNE_JOB_TOKEN, GRAPHTUNE_HEARTBEAT_S: set by the launcher" "$TMP/dry3.out"

# --- bad input: one line naming the problem, exit 2, nothing started
printf 'nodeA slots=2\nnodeB slot=2\n' >"$TMP/bad_syntax.txt"
printf 'nodeA slots=0\n' >"$TMP/zero.txt"
expect_fail "hostfile with bad syntax" "bad_syntax.txt:2" -- \
  "$GT" train -c "$CFG" --hostfile "$TMP/bad_syntax.txt" --np 2 --job.out_dir "$TMP/bad"
expect_fail "hostfile with zero slots" "zero.txt:1" -- "$GT" train -c "$CFG" --hostfile "$TMP/zero.txt" --job.out_dir "$TMP/bad"
expect_fail "unknown host in --include" "nodeC" -- \
  "$GT" train -c "$CFG" --hostfile "$TMP/two.txt" --include nodeC --job.out_dir "$TMP/bad"
expect_fail "--np larger than the slots" "--np 6" -- \
  "$GT" train -c "$CFG" --hostfile "$TMP/two.txt" --np 6 --job.out_dir "$TMP/bad"
expect_fail "--include without a hostfile" "--include" -- "$GT" train -c "$CFG" --include nodeA --job.out_dir "$TMP/bad"
expect_fail "a flag contradicting an override" "contradicts --parallelism.pp 4" -- \
  "$GT" train -c "$CFG" --pp 2 --parallelism.pp 4 --job.out_dir "$TMP/bad"
{ cat "$CFG"; printf '\n[parallelism]\ndp = 2\n'; } >"$TMP/dp2.toml"
expect_fail "--np contradicting the config's [parallelism].dp" "--np 4: contradicts $TMP/dp2.toml: [parallelism].dp = 2" -- \
  "$GT" train -c "$TMP/dp2.toml" --np 4 --job.out_dir "$TMP/bad"
expect_fail "--np contradicting --dp x --pp" "--np 3" -- "$GT" train -c "$CFG" --np 3 --dp 1 --pp 2 --job.out_dir "$TMP/bad"
expect_fail "--np not a multiple of pp" "not a multiple of pp x tp = 2" -- \
  "$GT" train -c "$CFG" --np 3 --pp 2 --job.out_dir "$TMP/bad"
expect_fail "a layout the model cannot take (the workers' preflight)" "[parallelism].pp" -- \
  "$GT" train -c "$CFG" --pp 8 --job.out_dir "$TMP/bad"
expect_fail "a config typo" "--training.stpes: unknown key" -- "$GT" train -c "$CFG" --training.stpes 3 --job.out_dir "$TMP/bad"
# A port already taken: a listener of our own holds it while the launcher tries.
"$PY" -c "
import socket, sys, time
s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)
print(s.getsockname()[1], flush=True); time.sleep(30)" >"$TMP/port" &
holder=$!
for _ in $(seq 50); do [ -s "$TMP/port" ] && break; sleep 0.1; done
expect_fail "a control port already taken" "--control-port $(cat "$TMP/port")" -- \
  "$GT" train -c "$CFG" "${SHORT[@]}" --control-port "$(cat "$TMP/port")" --job.out_dir "$TMP/bad"
kill $holder 2>/dev/null
check "no bad launch started a job" test ! -e "$TMP/bad"

# --- a run: metrics.jsonl, TensorBoard events, the summary; garbage on the control port
"$GT" train -c "$CFG" "${SHORT[@]}" --training.steps 12 --pp 2 --job.out_dir "$TMP/run" >"$TMP/run.out" 2>"$TMP/run.err" &
launcher=$!
for _ in $(seq 300); do grep -q "control 127.0.0.1:" "$TMP/run.out" 2>/dev/null && break; sleep 0.1; done
addr=$(sed -n 's/.*control \(127.0.0.1:[0-9]*\),.*/\1/p' "$TMP/run.out" | head -n 1)
"$PY" - "$addr" <<'PYEOF'
import socket, sys
host, port = sys.argv[1].split(":")
def send(data):
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(data)
    s.close()
send(b'{"type":"hello","token":"00000000000000000000000000000000","rank":0,"world":2}\n')  # wrong token
send(b"\x00\xff garbage\n")
send(b"x" * 100000 + b"\n")  # oversized
PYEOF
wait $launcher
rc=$?
check "the run exits 0 despite the garbage" test $rc -eq 0
check "the summary counts the dropped messages" grep -q "control messages dropped: 2 unauthenticated, 1 oversized, 0 malformed" "$TMP/run.out"
check "the summary lists both ranks as done" test "$(grep -cE '^ +[01] .* done ' "$TMP/run.out")" -eq 2
check "plain progress lines (not a terminal)" grep -q "^step 12/12  loss " "$TMP/run.out"
"$PY" - "$TMP/run" <<'PYEOF'
import json, sys, glob
run = sys.argv[1]
lines = [json.loads(l) for l in open(run + "/metrics.jsonl")]
steps = [l for l in lines if "loss" in l]
log = [json.loads(l) for l in open(run + "/train_log.jsonl")]  # the worker's own log, every 2 steps
ok = [l["step"] for l in steps] == list(range(1, 13))
# Each log window averages 2 steps: the mean of metrics.jsonl's two losses must equal it.
for w in log:
    pair = [s["loss"] for s in steps if w["step"] - 2 < s["step"] <= w["step"]]
    ok = ok and abs(sum(pair) / 2 - w["loss"]) < 1e-9 * max(1, abs(w["loss"]))
print("ok   metrics.jsonl: steps 1..12, losses agree with train_log.jsonl" if ok else "FAIL metrics.jsonl: %s" % steps[:3])
try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError:
    print("ok   (tensorboard not installed: event files not read back)")
    sys.exit(0 if ok else 1)
acc = EventAccumulator(run + "/tensorboard")
acc.Reload()
tb = {e.step: e.value for e in acc.Scalars("train/loss")}
import numpy as np
same = sorted(tb) == list(range(1, 13)) and all(np.float32(s["loss"]) == np.float32(tb[s["step"]]) for s in steps)
print(("ok  " if same else "FAIL") + " TensorBoard's reader: train/loss at steps 1..12 equals metrics.jsonl (float32)")
tags = set(acc.Tags()["scalars"])
want = {"train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s", "train/rss_mib"}
print(("ok  " if want <= tags else "FAIL") + " TensorBoard tags: " + ", ".join(sorted(tags)))
sys.exit(0 if ok and same and want <= tags else 1)
PYEOF
check "metrics.jsonl and TensorBoard events read back" test $? -eq 0

# --- on a terminal (a pseudo-terminal from `script`): a progress bar, the workers' lines in the log only
if command -v script >/dev/null; then
  script -qec "'$GT' train -c '$CFG' ${SHORT[*]} --job.out_dir '$TMP/tty'" "$TMP/tty.txt" >/dev/null 2>&1
  check "on a terminal: exit 0" test $? -eq 0
  check "on a terminal: a progress bar redrawn in place" grep -qaE $'\r\\[#+\\] step 6/6 ' "$TMP/tty.txt"
  check "on a terminal: the workers' own lines go to the log, not the screen" \
    bash -c "! grep -qa '^step     2/6 |' '$TMP/tty.txt' && grep -q '^step     2/6 |' '$TMP/tty/logs/workers.log'"
else
  echo "SKIP the terminal checks: no \`script\` (util-linux) here"
fi

# --- two hosts on one machine: mpirun starts nodeB's daemon through the fake rsh agent
chmod +x "$ROOT/tests/cli/fake_rsh.sh" 2>/dev/null || true
export FAKE_RSH_DIR=$TMP/fake-hosts
"$GT" train -c "$CFG" "${SHORT[@]}" --hostfile "$TMP/two.txt" --np 4 --pp 2 \
  --mpirun-args "--mca plm_rsh_agent $ROOT/tests/cli/fake_rsh.sh" --job.out_dir "$TMP/hosts" \
  >"$TMP/hosts.out" 2>"$TMP/hosts.err"
check "a two-host job (4 ranks, dp 2 x pp 2) finishes" test $? -eq 0
check "local ranks 0,1 on each host" test "$(grep -E '^ +[0-3] ' "$TMP/hosts.out" | awk '{print $3}' | tr -d '\n')" = "0101"
check "the launcher wrote the hostfile mpirun used" grep -q "^nodeB slots=2" "$TMP/hosts/logs/hostfile"
"$GT" train -c "$CFG" "${SHORT[@]}" --hostfile "$TMP/two.txt" --include "nodeA:1@nodeB" --np 3 \
  --training.batch_size 12 --mpirun-args "--mca plm_rsh_agent $ROOT/tests/cli/fake_rsh.sh" --job.out_dir "$TMP/hosts3" \
  >"$TMP/hosts3.out" 2>"$TMP/hosts3.err"
check "a job on chosen devices of two hosts (3 ranks) finishes" test $? -eq 0
check "its ranks are local rank 0 on nodeA and 0,1 on nodeB" \
  test "$(grep -E '^ +[0-2] ' "$TMP/hosts3.out" | awk '{print $3}' | tr -d '\n')" = "001"
"$GT" train -c "$CFG" "${SHORT[@]}" --job.out_dir "$TMP/one" >/dev/null 2>&1
"$PY" - "$TMP/one/metrics.jsonl" "$TMP/hosts/metrics.jsonl" <<'PYEOF'
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p) if '"loss"' in l] for p in sys.argv[1:])
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b)) if len(a) == len(b) == 6 else float("inf")
print(("ok  " if worst < 1e-5 else "FAIL") + " two hosts (dp 2 x pp 2) log one process's losses: worst relative difference %.1e" % worst)
sys.exit(0 if worst < 1e-5 else 1)
PYEOF
check "the two-host run computes what one process does" test $? -eq 0
sleep 1
no_leftovers() { ! pgrep -fa "$TMP/" | sed 's/^/     left: /' | grep -q .; }
check "no worker or daemon of the jobs is left" no_leftovers
finish
