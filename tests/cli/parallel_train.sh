#!/usr/bin/env bash
# Parallel equals serial: the same job under every layout trains the same model as one process.
# Each layout runs 3 optimizer steps from the same seed and data as the one-process run under
# real mpirun; the loss of every step (train_log.jsonl) and every trainable parameter afterwards
# must agree within rtol 1e-5 (fp32). Stage graph_matching (frozen LLM; projector and token rows
# trained): dp=2; pp=2 with GPipe and with 1F1B (m=4); tp=2; dp=2 x pp=2; and with
# length-grouped batches and encoder dropout 0.1, tp=2 and dp=2 x pp=2. Stage lm (every LLM
# weight trained, tied embeddings across the first and last stage): dp=2; pp=2 GPipe and 1F1B;
# dp=2 x pp=2. LoRA adapters on every projection (projector+lora): dp=2, pp=2, tp=2, dp=2 x pp=2.
# The graph encoder trained too (graphgpt+encoder): dp=2, pp=2, tp=2, dp=2 x pp=2; with LoRA
# (projector+lora+encoder): dp=2, pp=2, tp=2.
# The graph stages pack each micro-batch's records with their shared prompt prefix once (the
# default): padded rows, packed rows each with its own prefix, activation checkpointing and 1F1B
# over padded rows equal it, with LoRA too.
# Then bad layouts (one line, once, exit 2, every rank gone in seconds) and a rank killed
# mid-step.
source "$(dirname "$0")/lib.sh"
need_mpirun 300
# The LLM the graph stage freezes. Both jobs below clip the gradient to below its norm (2e-5
# here, 1.0 in stage lm), so the global norm must be right too.
train_fixture 40

GRAPH=(--model.path "$TMP/base/model" --training.stage graph_matching --data.instructions "$TMP/gm.json"
       --data.max_len 1024 --data.num_workers 0 --training.steps 3 --training.batch_size 8 --training.log_every 1
       --training.threads 1 --optimizer.lr 1e-2 --training.max_grad_norm 2e-5)
LM=(--training.steps 3 --training.batch_size 8 --training.seq_len 32 --training.log_every 1 --training.threads 1
    --training.max_grad_norm 1.0)

G_FILES=(graph_projector.safetensors graph_tokens.safetensors)
run g_ref 1 "${GRAPH[@]}"
check "graph_matching, one process" test -s "$TMP/g_ref/graph_projector.safetensors"
against_serial g "${G_FILES[*]}" GRAPH "dp2 2 --parallelism.dp 2" \
  "pp2_gpipe 2 --parallelism.pp 2 --parallelism.schedule gpipe --parallelism.microbatches 4" \
  "pp2_1f1b 2 --parallelism.pp 2 --parallelism.schedule 1f1b --parallelism.microbatches 4" \
  "tp2 2 --parallelism.tp 2" \
  "dp2_pp2 4 --parallelism.dp 2 --parallelism.pp 2 --parallelism.microbatches 4"
check "1f1b holds at most pp micro-batches on stage 0, GPipe all m" bash -c \
  "grep -q 'rank 0: .*at most 2 micro-batches in flight' '$TMP/g_pp2_1f1b.err' &&
   grep -q 'rank 0: .*at most 4 micro-batches in flight' '$TMP/g_pp2_gpipe.err'"
check "data parallel reduced gradient buckets" grep -q 'rank 1: .*[1-9][0-9]* gradient buckets reduced' "$TMP/g_dp2.err"
# Length-grouped batches and the frozen encoder's dropout: every rank computes the same order, and
# each graph's mask is drawn from its own seed, so the layouts still equal one process. Node
# classification's records, which differ in length (stage 1's here are all cut at max_len).
"$GT" data build --graph embedded --task node_classification --split train --max-nodes 3 --max-records 40 \
  --out "$TMP/nc.json" 2>/dev/null
GROUPED=("${GRAPH[@]}" --data.instructions "$TMP/nc.json" --data.group_by_length true --model.encoder_dropout 0.1)
run gg_ref 1 "${GROUPED[@]}"
against_serial gg "${G_FILES[*]}" GROUPED "tp2 2 --parallelism.tp 2" \
  "dp2_pp2 4 --parallelism.dp 2 --parallelism.pp 2 --parallelism.microbatches 4"
# Packed micro-batches (the default; these records differ in length) against padded rows, and
# packing with activation checkpointing and under 1F1B: the same losses, norms and weights.
check "the shared prompt prefix was computed once a micro-batch" \
  grep -qE 'shared prompt prefix computed once a micro-batch another [1-9][0-9.]*%' "$TMP/gg_ref.err"
against_serial gg "${G_FILES[*]}" GROUPED "padded 1 --training.packing false" \
  "unshared 1 --training.share_prefix false" \
  "ckpt 1 --training.activation_checkpointing true" \
  "pp2_1f1b_padded 2 --parallelism.pp 2 --parallelism.microbatches 4 --training.packing false"

run l_ref 1 "${LM[@]}"
check "lm, one process" test -s "$TMP/l_ref/model/model.safetensors"
against_serial l model/model.safetensors LM "dp2 2 --parallelism.dp 2" \
  "pp2_gpipe 2 --parallelism.pp 2 --parallelism.schedule gpipe --parallelism.microbatches 4" \
  "pp2_1f1b 2 --parallelism.pp 2 --parallelism.schedule 1f1b --parallelism.microbatches 4" \
  "dp2_pp2 4 --parallelism.dp 2 --parallelism.pp 2 --parallelism.microbatches 2"

# LoRA on the frozen LLM (trainable projector+lora, every target): each stage trains its own
# layers' adapters, replicated over tp and summed over dp like the projector.
LORA=("${GRAPH[@]}" --training.trainable projector+lora --lora.rank 4
      --lora.targets q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj)
run lo_ref 1 "${LORA[@]}"
check "projector+lora, one process, writes a PEFT adapter" test -s "$TMP/lo_ref/adapter/adapter_model.safetensors"
against_serial lo "graph_projector.safetensors adapter/adapter_model.safetensors" LORA "dp2 2 --parallelism.dp 2" \
  "pp2_1f1b 2 --parallelism.pp 2 --parallelism.schedule 1f1b --parallelism.microbatches 4" \
  "tp2 2 --parallelism.tp 2" \
  "dp2_pp2 4 --parallelism.dp 2 --parallelism.pp 2 --parallelism.microbatches 4" \
  "padded 1 --training.packing false" "unshared 1 --training.share_prefix false" \
  "ckpt 1 --training.activation_checkpointing true"

# The graph encoder trained too (graphgpt+encoder, its own learning rate and weight decay): on
# stage 0, its gradients reduced over dp with the projector's, whole on every tp rank (the
# projector's input gradient summed over tp).
ENC=("${GRAPH[@]}" --training.trainable graphgpt+encoder --optimizer.encoder_lr 5e-3 --optimizer.encoder_weight_decay 0.01)
run en_ref 1 "${ENC[@]}"
check "graphgpt+encoder, one process, moves the encoder" "$PY" - "$TMP" <<'PYEOF'
import sys, numpy as np
from safetensors.numpy import load_file
a, b = (load_file(f"{sys.argv[1]}/{d}/graph_encoder.safetensors") for d in ("g_ref", "en_ref"))
change = max(float(np.abs(a[k] - b[k]).max()) for k in a)
print(f"    largest change of an encoder weight: {change:.3g}")
assert change > 1e-4, change
PYEOF
# The trained encoder also as GraphGPT's graph tower: a CLIP model built from its config.json
# with GraphGPT's module names loads its pickle strictly (as GraphGPT's load_model_pretrained
# does), and its gnn holds graph_encoder.safetensors' tensors.
check "graphgpt+encoder writes graph_tower/clip_gt_arxiv_pub, loaded as GraphGPT loads it" "$PY" - "$TMP/en_ref" <<'PYEOF'
import glob, json, sys, torch
from torch import nn
from safetensors.torch import load_file
out = sys.argv[1]
folder = f"{out}/graph_tower/clip_gt_arxiv_pub"
a = json.load(open(f"{folder}/config.json"))
class GTLayer(nn.Module):
    def __init__(s):
        super().__init__()
        s.qTrans, s.kTrans, s.vTrans = (nn.Parameter(torch.empty(a["att_d_model"], a["att_d_model"])) for _ in range(3))
        if a["att_norm"]:
            s.norm = nn.LayerNorm(a["att_d_model"], eps=1e-6)
class Tower(nn.Module):
    def __init__(s):
        super().__init__()
        s.gtLayers = nn.Sequential(*[GTLayer() for _ in range(a["gt_layers"])])
        s.W_pos = nn.Parameter(torch.empty(1, a["att_d_model"]))
        s.W_P = nn.Linear(a["gnn_input"], a["att_d_model"])
        s.inverW_P = nn.Linear(a["att_d_model"], a["gnn_output"])
class Clip(nn.Module):
    def __init__(s):
        super().__init__()
        w = a["transformer_width"]
        s.gnn = Tower()
        s.transformer = nn.Module()
        s.transformer.resblocks = nn.Sequential()
        assert a["transformer_layers"] == 0
        s.token_embedding = nn.Embedding(a["vocab_size"], w)
        s.positional_embedding = nn.Parameter(torch.empty(a["context_length"], w))
        s.ln_final = nn.LayerNorm(w)
        s.text_projection = nn.Parameter(torch.empty(w, a["embed_dim"]))
pkl = glob.glob(f"{folder}/*.pkl")
assert len(pkl) == 1, pkl
state = torch.load(pkl[0], weights_only=True)
clip = Clip()
clip.load_state_dict(state)  # strict, as GraphGPT's
want = load_file(f"{out}/graph_encoder.safetensors")
got = clip.gnn.state_dict()
assert sorted(got) == sorted(want), (sorted(got), sorted(want))
assert all(torch.equal(got[k], want[k]) for k in want)
print(f"    {len(want)} encoder tensors, strict load of {len(state)} CLIP tensors")
PYEOF
against_serial en "${G_FILES[*]} graph_encoder.safetensors" ENC "dp2 2 --parallelism.dp 2" \
  "pp2_1f1b 2 --parallelism.pp 2 --parallelism.schedule 1f1b --parallelism.microbatches 4" \
  "tp2 2 --parallelism.tp 2" \
  "dp2_pp2 4 --parallelism.dp 2 --parallelism.pp 2 --parallelism.microbatches 4"
# And with LoRA on the LLM (projector+lora+encoder): the adapters on every stage, the encoder on
# the first, three AdamW groups.
LENC=("${LORA[@]}" --training.trainable projector+lora+encoder --optimizer.encoder_lr 5e-3)
run le_ref 1 "${LENC[@]}"
against_serial le "graph_projector.safetensors adapter/adapter_model.safetensors graph_encoder.safetensors" LENC \
  "dp2 2 --parallelism.dp 2" \
  "pp2_1f1b 2 --parallelism.pp 2 --parallelism.schedule 1f1b --parallelism.microbatches 4" \
  "tp2 2 --parallelism.tp 2"
check "projector+lora+encoder trains the encoder and the adapters" "$PY" - "$TMP" <<'PYEOF'
import sys, numpy as np
from safetensors.numpy import load_file
t = sys.argv[1]
enc = max(float(np.abs(load_file(f"{t}/g_ref/graph_encoder.safetensors")[k] - v).max())
          for k, v in load_file(f"{t}/le_ref/graph_encoder.safetensors").items())
a, b = load_file(f"{t}/lo_ref/adapter/adapter_model.safetensors"), load_file(f"{t}/le_ref/adapter/adapter_model.safetensors")
print(f"    largest change of an encoder weight {enc:.3g}; adapters differ from projector+lora's: {any(not np.array_equal(a[k], b[k]) for k in a)}")
assert enc > 1e-4 and sorted(a) == sorted(b) and any(not np.array_equal(a[k], b[k]) for k in a)
PYEOF

# Bad layouts: refused before any weight is read, one line from rank 0 only, all ranks exit 2.
bad() {  # bad NAME NP TEXT ARGS...
  local name=$1 np=$2 want=$3; shift 3
  local start=$(date +%s)
  "${MPIRUN[@]}" -np "$np" "$W" -c "$CFG" "${LM[@]}" "$@" --job.out_dir "$TMP/$name" >"$TMP/$name.out" 2>"$TMP/$name.err"
  local rc=$? secs=$(($(date +%s) - start))
  check "$name: exit 2 ($rc) in under 30 s ($secs s), one error line, no output" bash -c \
    "[ $rc -eq 2 ] && [ $secs -lt 30 ] && [ \$(grep -c 'graphtune: error' '$TMP/$name.err') -eq 1 ] &&
     grep -qF -- '$want' '$TMP/$name.err' && [ ! -e '$TMP/$name/model' ]"
  grep 'graphtune: error' "$TMP/$name.err" | sed 's/^/    /'
}
bad bad_world 2 "dp 2 x pp 2 x tp 1 = 4 ranks, but the job has 2 (start it with mpirun -np 4)" --parallelism.dp 2 --parallelism.pp 2 \
  --training.batch_size 8 --parallelism.microbatches 2
bad bad_depth 5 "5 pipeline stages, but the model has only 4 decoder layers" --parallelism.pp 5 \
  --parallelism.schedule gpipe --training.batch_size 10 --parallelism.microbatches 5
bad bad_1f1b 2 "1f1b needs at least as many micro-batches as pipeline stages" --parallelism.pp 2 \
  --parallelism.microbatches 1
bad bad_batch 2 "micro-batches do not divide [training].batch_size 6" --parallelism.pp 2 \
  --parallelism.microbatches 4 --training.batch_size 6

# fault NAME SIGNAL TIMEOUT: a two-stage lm job; once it logs steps, rank 1's process gets SIGNAL.
# Leaves rc and secs (from the signal to the job's end).
fault() {
  local name=$1 signal=$2 timeout=$3
  "${MPIRUN[@]}" -np 2 "$W" -c "$CFG" "${LM[@]}" --training.steps 100000 --parallelism.pp 2 \
    --parallelism.timeout_s "$timeout" --job.out_dir "$TMP/$name" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  local job=$!
  for _ in $(seq 1 100); do grep -q 'step ' "$TMP/$name.err" 2>/dev/null && break; sleep 0.3; done
  victim=$(pgrep -f "^$W -c .*$TMP/$name" | tail -1)
  local start=$(date +%s)
  kill "-$signal" "$victim"
  wait $job
  rc=$?
  secs=$(($(date +%s) - start))
  kill -9 "$victim" 2>/dev/null  # a stopped rank stays stopped until killed
  sleep 1
  check "$name: no worker left behind" test -z "$(pgrep -f "^$W -c .*$TMP/$name")"
}

# A rank killed mid-step: mpirun sees the death and ends the job (the 60 s timeout would be too late).
fault killed KILL 60
check "killed rank: the job fails ($rc) within 20 s ($secs s)" bash -c "[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $secs -lt 20 ]"
# A rank that stalls: its peer's 3 s timeout ends the job, naming the operation and the peer.
fault stalled STOP 3
grep 'timed out' "$TMP/stalled.err" | sed 's/^/    /'
check "stalled rank: the job fails ($rc) within 20 s ($secs s)" bash -c "[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $secs -lt 20 ]"
check "stalled rank: the timeout names the operation and the peer" \
  grep -qE 'graphtune: error: rank [01]: [a-z_]+ with peers? [01] timed out after 3 s' "$TMP/stalled.err"
finish
