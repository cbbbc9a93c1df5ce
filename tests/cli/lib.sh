# Shared helpers for the command-line tests (sourced).
set -u
GT=${GRAPHTUNE_BIN:?set by ctest}
ASSETS=${GRAPHTUNE_ASSETS:-../shared/assets}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
checks=0

need_assets() {
  if [ ! -d "$ASSETS/llm" ]; then
    echo "SKIP: shared assets not found at $ASSETS"
    exit 77
  fi
}

# expect_fail NAME EXPECTED_SUBSTRING -- command...: exit code 2, one line on stderr with the text.
expect_fail() {
  local name=$1 want=$2; shift 3
  checks=$((checks + 1))
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  local lines
  lines=$(grep -c '' "$TMP/err")
  if [ "$rc" -ne 2 ] || ! grep -qF -- "$want" "$TMP/err" || [ "$lines" -ne 1 ]; then
    echo "FAIL $name: rc=$rc (want 2), stderr lines=$lines (want 1), want text: $want"
    sed 's/^/    stderr: /' "$TMP/err" | head -5
    failures=$((failures + 1))
  else
    echo "ok   $name: $(cat "$TMP/err")"
  fi
}

check() {  # check NAME CONDITION...
  local name=$1; shift
  checks=$((checks + 1))
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; failures=$((failures + 1)); fi
}

finish() {
  echo "$((checks - failures)) passed, $failures failed"
  [ "$failures" -eq 0 ]
}

# need_mpirun SECONDS: skips (77) where mpirun is missing; sets MPIRUN to mpirun under a
# `timeout` of SECONDS (a hang becomes a failure, not a stuck CI job). Root needs
# --allow-run-as-root; more ranks than this 2-core machine's cores need --oversubscribe.
need_mpirun() {
  if ! command -v mpirun >/dev/null; then
    echo "SKIP: mpirun not found"
    exit 77
  fi
  MPIRUN=(timeout "$1" mpirun --allow-run-as-root --oversubscribe)
}

# run_timed NAME NP ARGS...: $DRIVER under $MPIRUN with NP ranks (one thread each), leaving rc,
# ms, $TMP/NAME.out and .err; then faster_than SECONDS and ended_with_failure judge the run.
run_timed() {
  local name=$1 np=$2; shift 2
  local start=$(date +%s%N)
  OMP_NUM_THREADS=1 "${MPIRUN[@]}" -np "$np" "$DRIVER" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
  rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  echo "     ($name: exit $rc after $ms ms)"
}
faster_than() { [ "$ms" -lt $(($1 * 1000)) ]; }
ended_with_failure() { [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; }  # 124: `timeout` had to end it

# train_fixture RECORDS: what the training tests tune, in $TMP: base/ (a frozen LLM: 20 steps of
# stage lm on configs/lm.toml) and gm.json (RECORDS graph_matching records of the embedded
# graph). Sets ROOT, W (the worker), PY and CFG; skips (77) without safetensors/numpy.
train_fixture() {
  ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  W=${GRAPHTUNE_WORKER:?set by ctest}
  PY=${GRAPHTUNE_PYTHON:-python3}
  CFG=$ROOT/configs/lm.toml
  if ! "$PY" -c "import safetensors, numpy" 2>/dev/null; then echo "SKIP: $PY lacks safetensors/numpy"; exit 77; fi
  "$GT" train --config "$CFG" --model.max_seq_len 1024 --training.steps 20 --training.log_every 10 \
    --job.out_dir "$TMP/base" 2>/dev/null
  "$GT" data build --graph embedded --task graph_matching --split train --max-nodes 3 --max-records "$1" \
    --out "$TMP/gm.json" 2>/dev/null
  check "the frozen LLM and the records exist" test -s "$TMP/base/model/model.safetensors" -a -s "$TMP/gm.json"
}

# run NAME NP ARGS...: `graphtune-worker train` on $CFG with ARGS into $TMP/NAME, one process or
# NP ranks under $MPIRUN; stdout and stderr in $TMP/NAME.out and .err, the exit code in rc (and
# returned), the time logged, the end of stderr shown when it failed.
run() {
  local name=$1 np=$2; shift 2
  local start=$(date +%s)
  if [ "$np" -eq 1 ]; then
    "$W" train --config "$CFG" "$@" --job.out_dir "$TMP/$name" >"$TMP/$name.out" 2>"$TMP/$name.err"
  else
    "${MPIRUN[@]}" -np "$np" "$W" -c "$CFG" "$@" --job.out_dir "$TMP/$name" >"$TMP/$name.out" 2>"$TMP/$name.err"
  fi
  rc=$?
  echo "     ($name: $np ranks, exit $rc, $(($(date +%s) - start)) s)"
  [ "$rc" -eq 0 ] || sed 's/^/    stderr: /' "$TMP/$name.err" | tail -5
  return $rc
}

# --- Parallel equals serial (parallel_train.sh, family_stages.sh): needs PY, W, CFG, MPIRUN ---
# same NAME REF FILES...: losses per step and the named safetensors files agree within rtol 1e-5.
same() {
  local name=$1 ref=$2; shift 2
  "$PY" - "$TMP/$ref" "$TMP/$name" "$@" >"$TMP/$name.cmp" 2>&1 <<'PYEOF'
import json, sys
import numpy as np
from safetensors.numpy import load_file
ref, got, files = sys.argv[1], sys.argv[2], sys.argv[3:]
def log(d, key):
    return [json.loads(l)[key] for l in open(d + "/train_log.jsonl")]
a, b = log(ref, "loss"), log(got, "loss")
assert len(a) == len(b) == 3, (a, b)
assert np.allclose(b, a, rtol=1e-5, atol=0), f"losses {b} vs {a}"
assert min(a) > 0.1, f"losses {a}: nothing was learned from, the comparison would prove nothing"
# The norm of the whole model's gradient (every stage, every shard, each parameter once); the
# jobs clip to below it, so a wrong norm would also move the weights.
na, nb = log(ref, "grad_norm"), log(got, "grad_norm")
assert np.allclose(nb, na, rtol=1e-5, atol=0), f"gradient norms {nb} vs {na}"
n = 0
for f in files:
    x, y = load_file(f"{ref}/{f}"), load_file(f"{got}/{f}")
    assert sorted(x) == sorted(y), (sorted(x), sorted(y))
    for k in x:
        worst = np.max(np.abs(y[k] - x[k]) / np.maximum(np.abs(x[k]), 1e-3))
        assert np.allclose(y[k], x[k], rtol=1e-5, atol=1e-7), f"{f}:{k} differs (worst relative {worst:.2e})"
        n += 1
print(f"ok {n} tensors, losses {' '.join(f'{v:.6f}' for v in b)}, gradient norms {' '.join(f'{v:.3g}' for v in nb)}")
PYEOF
  local rc=$?
  sed 's/^/    /' "$TMP/$name.cmp"
  return $rc
}

# against_serial PREFIX FILES ARGS_VAR "NAME NP FLAGS..."...: each layout runs the job of the array
# named ARGS_VAR with its flags, and must equal PREFIX_ref in its losses and the FILES.
against_serial() {
  local prefix=$1 files=$2
  local -n job=$3
  shift 3
  for layout in "$@"; do
    set -- $layout
    local name=${prefix}_$1 np=$2
    shift 2
    run "$name" "$np" "${job[@]}" "$@"
    # shellcheck disable=SC2086
    check "$name equals one process" same "$name" "${prefix}_ref" $files
  done
}

# evals_every_record RUN RECORDS N FLAGS...: `graphtune eval` with what the stage in $TMP/RUN wrote
# (its encoder file, read back by its kind, its projector and adapter) answers all N of RECORDS.
evals_every_record() {
  local run=$1 records=$2 n=$3
  shift 3
  "$GT" eval -c "$CFG" --model.path "$TMP/base/model" --model.graph_encoder "$TMP/$run/graph_encoder.safetensors" \
    --model.projector "$TMP/$run/graph_projector.bin" --model.adapter "$TMP/$run/adapter" \
    --data.instructions "$records" --data.max_len 1024 --eval.max_new_tokens 4 --out "$TMP/${run}_eval" "$@" \
    >/dev/null 2>"$TMP/${run}_eval.err"
  check "eval of $run reads its encoder file back and answers all $n records" "$PY" -c "
import json, sys
sys.exit(0 if len([json.loads(l) for l in open(sys.argv[1])]) == int(sys.argv[2]) else 1)" "$TMP/${run}_eval/predictions.jsonl" "$n"
}

# resumes_bit_exact PREFIX FILES ARGS_VAR: the job of the array named ARGS_VAR, checkpointed every 2
# steps into PREFIX_ck, then resumed from its step-2 checkpoint in PREFIX_resumed, ends with the
# same FILES to the bit.
resumes_bit_exact() {
  local prefix=$1 files=$2
  local -n job=$3
  run "${prefix}_ck" 1 "${job[@]}" --checkpoint.every 2
  mkdir -p "$TMP/${prefix}_resumed/checkpoints"
  cp -r "$TMP/${prefix}_ck/checkpoints/step_00000002" "$TMP/${prefix}_resumed/checkpoints/"
  run "${prefix}_resumed" 1 "${job[@]}" --checkpoint.every 2 --resume latest
  check "resumed at step 2" grep -q "resumed from .*step_00000002 at step 2" "$TMP/${prefix}_resumed.err"
  # shellcheck disable=SC2086
  check "resumed, the same $files" "$PY" -c "
import sys
import numpy as np
from safetensors.numpy import load_file
for f in sys.argv[3:]:
    a, b = load_file(sys.argv[1] + '/' + f), load_file(sys.argv[2] + '/' + f)
    assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a), f
" "$TMP/${prefix}_ck" "$TMP/${prefix}_resumed" $files
}

# --- Jobs under the launcher, for the fault tests (launch_faults.sh, fault_trials.sh) ---
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }  # milliseconds since a `date +%s%N`
# no_leftovers: true when no process of any job of this test (its command line names $TMP) runs.
no_leftovers() { ! pgrep -fa "$TMP/" | sed 's/^/     left: /' | grep -q .; }
# wait_for_step DIR STEP: until the launcher has recorded STEP in DIR/metrics.jsonl (90 s at most);
# polled every 10 ms, so that a kill lands at the step meant.
wait_for_step() {
  for _ in $(seq 9000); do
    grep -q "\"step\":$2," "$1/metrics.jsonl" 2>/dev/null && return 0
    sleep 0.01
  done
  echo "     (step $2 never came in $1)"
  return 1
}
# rank_pid DIR RANK: the pid of world rank RANK of the job writing into DIR.
rank_pid() {
  local p
  for p in $(pgrep -f "graphtune-worker train .*$1( |$)"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then echo "$p"; return; fi
  done
}
