#!/usr/bin/env bash
# Parallel equals serial for phase grounding: a few steps of it on the embedded graph, in its
# papers' texts and in the classes of 40 labelled records, on one process and split over
# data-parallel ranks under real mpirun (plain mpirun, the launcher's --dp and --np); every
# step's loss and gradient norm (train_log.jsonl) and every tensor of graph_encoder.safetensors
# must agree within 1e-5 relative (fp32), and the training must have moved the weights further.
# Each rank runs the whole graph on its share of the edges and encodes its share of each
# batch's records, with the graph transformer and with the GCN; 3 ranks split the 40 records
# unevenly. Then what grounding refuses on several ranks: pp, tp and checkpoints, in one line.
source "$(dirname "$0")/lib.sh"
need_mpirun 300
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=${GRAPHTUNE_WORKER:?set by ctest}
PY=${GRAPHTUNE_PYTHON:-python3}
CFG=$ROOT/configs/demo/grounding.toml
if ! "$PY" -c "import safetensors, numpy" 2>/dev/null; then echo "SKIP: $PY lacks safetensors/numpy"; exit 77; fi

"$GT" data build --graph embedded --task node_classification --split train --max-nodes 4 --max-records 40 \
  --out "$TMP/nc.json" 2>/dev/null
check "the labelled records exist" test -s "$TMP/nc.json"
JOB=(--training.steps 4 --training.log_every 1 --training.batch_size 48 --training.threads 1
     --data.instructions "$TMP/nc.json")
GCN=("${JOB[@]}" --model.graph_encoder_type gcn --model.encoder_dropout 0.4)

# same NAME REF EARLY: every step's loss and gradient norm agree within rtol 1e-5, and every
# encoder tensor after the last step within 1e-5 of its norm; and the last two steps moved the
# weights (REF against EARLY, the same job stopped two steps sooner) far beyond that, so the
# comparison proves something. The gradient norm is what catches a gradient summed once too
# often, which AdamW's steps, each entry divided by its own gradient's size, would hide. For the
# same reason the weights are held per tensor: an entry whose gradient sums to near zero moves
# by however that sum rounds, and the ranks add their shares in another order than one process.
same() {
  "$PY" - "$TMP/$2" "$TMP/$1" "$TMP/$3" >"$TMP/$1.cmp" 2>&1 <<'PYEOF'
import json, sys
import numpy as np
from safetensors.numpy import load_file
ref, got, early = sys.argv[1:4]
def log(d, key):
    return [json.loads(l)[key] for l in open(d + "/train_log.jsonl")]
for key in ("loss", "grad_norm"):
    a, b = log(ref, key), log(got, key)
    assert len(a) == len(b) == 4, (a, b)
    assert np.allclose(b, a, rtol=1e-5, atol=0), f"{key} {b} vs {a}"
x, y, e = (load_file(d + "/graph_encoder.safetensors") for d in (ref, got, early))
assert sorted(x) == sorted(y) == sorted(e), (sorted(x), sorted(y))
def rel(a, b):
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)
worst = max(rel(y[k], x[k]) for k in x)
moved = min(rel(e[k], x[k]) for k in x if k != "W_pos")  # GraphGPT's W_pos is unused (if_pos false)
assert worst <= 1e-5, f"the encoder differs: {', '.join(f'{k} {rel(y[k], x[k]):.1e}' for k in x if rel(y[k], x[k]) > 1e-5)}"
assert moved > 1e-4, f"two steps moved a tensor by {moved:.1e} only: the comparison would prove nothing"
print(f"ok {len(x)} tensors (worst relative {worst:.1e}; the last two steps moved each by {moved:.1e} or more), "
      f"losses {' '.join(f'{v:.7f}' for v in log(got, 'loss'))}, gradient norms {' '.join(f'{v:.4g}' for v in log(got, 'grad_norm'))}")
PYEOF
  local rc=$?
  sed 's/^/    /' "$TMP/$1.cmp"
  return $rc
}

# One process, then the same job on ranks: plain mpirun (NP ranks, --parallelism.dp NP) or the launcher.
run_one() {  # run_one NAME ARGS...
  local name=$1; shift
  "$W" train --config "$CFG" "$@" --job.out_dir "$TMP/$name" >"$TMP/$name.out" 2>"$TMP/$name.err" ||
    sed 's/^/    stderr: /' "$TMP/$name.err" | tail -3
}
run_mpirun() {  # run_mpirun NAME NP ARGS...
  local name=$1 np=$2; shift 2
  "${MPIRUN[@]}" -np "$np" "$W" train -c "$CFG" "$@" --parallelism.dp "$np" --job.out_dir "$TMP/$name" \
    >"$TMP/$name.out" 2>"$TMP/$name.err" || sed 's/^/    stderr: /' "$TMP/$name.err" | tail -3
}
run_launcher() {  # run_launcher NAME FLAGS... -- ARGS...
  local name=$1 flags=(); shift
  while [ "$1" != "--" ]; do flags+=("$1"); shift; done
  shift
  "$GT" train -c "$CFG" "${flags[@]}" "$@" --job.out_dir "$TMP/$name" >"$TMP/$name.out" 2>"$TMP/$name.err" ||
    sed 's/^/    stderr: /' "$TMP/$name.err" | tail -3
}

run_one gt_early "${JOB[@]}" --training.steps 2
run_one gt_ref "${JOB[@]}"
run_mpirun gt_dp2 2 "${JOB[@]}"
check "gt: dp 2 under mpirun equals one process" same gt_dp2 gt_ref gt_early
check "gt: rank 0 alone logs and says how the step is split" bash -c \
  "[ \$(grep -c '^step ' '$TMP/gt_dp2.err') -eq 4 ] &&
   grep -q 'on 2 data-parallel ranks (each a share of the graph.s edges and of each batch.s records)' '$TMP/gt_dp2.err'"
run_mpirun gt_dp3 3 "${JOB[@]}"
check "gt: dp 3 under mpirun (uneven shares of the records) equals one process" same gt_dp3 gt_ref gt_early
run_launcher gt_launch_np --np 2 -- "${JOB[@]}"
check "gt: graphtune train --np 2 equals one process" same gt_launch_np gt_ref gt_early

run_one gcn_early "${GCN[@]}" --training.steps 2
run_one gcn_ref "${GCN[@]}"
run_launcher gcn_launch_dp --dp 2 -- "${GCN[@]}"
check "gcn: graphtune train --dp 2 equals one process" same gcn_launch_dp gcn_ref gcn_early
run_mpirun gcn_dp3 3 "${GCN[@]}"
check "gcn: dp 3 under mpirun equals one process" same gcn_dp3 gcn_ref gcn_early

# What grounding has no use for is refused before anything runs, in one line naming the key.
expect_fail "grounding refuses pipeline stages" "[parallelism].pp: 2: stage grounding has no LLM layers to cut into pipeline stages (use dp)" -- \
  "$GT" train -c "$CFG" --pp 2 --dry-run --job.out_dir "$TMP/bad_pp"
expect_fail "grounding refuses tensor parallelism" "[parallelism].tp: 2: stage grounding has no projector to split over tensor-parallel ranks (use dp)" -- \
  "$GT" train -c "$CFG" --tp 2 --dry-run --job.out_dir "$TMP/bad_tp"
expect_fail "grounding on 2 ranks still refuses checkpoints" "not supported yet: checkpoints of stage grounding" -- \
  "$GT" train -c "$CFG" --dp 2 --checkpoint.every 2 --dry-run --job.out_dir "$TMP/bad_ckpt"
finish
