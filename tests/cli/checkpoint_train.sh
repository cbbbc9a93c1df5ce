#!/usr/bin/env bash
# Sharded checkpoints under real mpirun (train/train_checkpoint.hpp, checkpoint/):
# - exact resume: a run resumed at step 4 of 6 logs the same losses and gradient norms, bit for
#   bit, as the run that never stopped, and ends with the same weights and optimizer state; in
#   stage graph_matching (one process, and pp=2) and in stage lm (pp=2, tied embeddings);
# - resharding: a checkpoint saved at tp=2 x pp=2 loads at dp=2, that one in one process, and all
#   three hold the same tensors bit for bit (read back by tests/read_checkpoint.py, which uses
#   only index.json and the safetensors package);
# - a rank killed while a checkpoint is written: the previous checkpoint stays `latest`, and the
#   run resumed from it ends where the uninterrupted one did;
# - export of a run that trained the encoder and LoRA adapters writes them as the run did, and
#   merges the adapters into its merged LLM;
# - keep_latest, save_frozen, and each kind of damage: one line naming the file, exit 2.
source "$(dirname "$0")/lib.sh"
need_mpirun 300
train_fixture 60
READ=$ROOT/tests/read_checkpoint.py

GRAPH=(--model.path "$TMP/base/model" --training.stage graph_matching --data.instructions "$TMP/gm.json"
       --data.max_len 1024 --data.num_workers 0 --training.steps 6 --training.batch_size 8 --training.log_every 1
       --training.threads 1 --optimizer.lr 1e-2 --checkpoint.every 2)
LM=(--training.steps 6 --training.batch_size 8 --training.seq_len 32 --training.log_every 1 --training.threads 1
    --checkpoint.every 2)

# resumed_from REF NAME STEP: NAME's checkpoint folder starts as a copy of REF's up to STEP.
resumed_from() {
  mkdir -p "$TMP/$2/checkpoints"
  for d in "$TMP/$1"/checkpoints/step_*; do
    [ "$(basename "$d")" \> "step_$(printf %08d "$3")" ] || cp -r "$d" "$TMP/$2/checkpoints/"
  done
}

# exact REF NAME: NAME's log is REF's (steps 5 and 6, every digit), and their last checkpoints
# hold the same tensors bit for bit.
exact() {
  "$PY" - "$TMP/$1/train_log.jsonl" "$TMP/$2/train_log.jsonl" <<'PYEOF' && "$PY" "$READ" same "$TMP/$1/checkpoints/step_00000006" "$TMP/$2/checkpoints/step_00000006"
import json, sys
a, b = ([json.loads(l) for l in open(f)] for f in sys.argv[1:])
assert [l["step"] for l in b] == [1, 2, 3, 4, 5, 6], [l["step"] for l in b]
for x, y in zip(a, b):
    assert (x["loss"], x["grad_norm"], x["lr"]) == (y["loss"], y["grad_norm"], y["lr"]), (x, y)
assert a[-1]["loss"] > 0.1
print("ok losses of steps 5, 6:", [y["loss"] for y in b[4:]])
PYEOF
}

# Stage graph_matching, one process: the uninterrupted run, then one resumed at step 4.
run g1 1 "${GRAPH[@]}"
check "graph_matching: 6 steps, checkpoints at 2, 4 and 6" test -s "$TMP/g1/checkpoints/step_00000006/index.json" -a \
  -s "$TMP/g1/checkpoints/step_00000002/index.json"
resumed_from g1 g1r 4
cp "$TMP/g1/train_log.jsonl" "$TMP/g1r/train_log.jsonl"  # the log of steps 1-4 is kept, 5-6 rewritten
run g1r 1 "${GRAPH[@]}" --resume latest
check "graph_matching: resumed at step 4 (latest)" grep -q "resumed from .*step_00000004 at step 4" "$TMP/g1r.err"
check "graph_matching, one process: resume is exact" exact g1 g1r
check "graph_matching: the projector written at the end is the same file" cmp -s "$TMP/g1/graph_projector.bin" \
  "$TMP/g1r/graph_projector.bin"

# The same with two pipeline stages (the projector on stage 0, the frozen LLM split).
run gp 2 "${GRAPH[@]}" --parallelism.pp 2 --parallelism.microbatches 2
resumed_from gp gpr 4
cp "$TMP/gp/train_log.jsonl" "$TMP/gpr/train_log.jsonl"
run gpr 2 "${GRAPH[@]}" --parallelism.pp 2 --parallelism.microbatches 2 --resume "$TMP/gpr/checkpoints/step_00000004"
check "graph_matching, pp=2: resume is exact" exact gp gpr

# The graph encoder trained too (its weights and AdamW state in the checkpoint): exact at pp=2,
# and the encoder file written at the end is the same.
ENC=("${GRAPH[@]}" --training.trainable graphgpt+encoder --optimizer.encoder_lr 5e-3)
run ge 2 "${ENC[@]}" --parallelism.pp 2 --parallelism.microbatches 2
resumed_from ge ger 4
cp "$TMP/ge/train_log.jsonl" "$TMP/ger/train_log.jsonl"
run ger 2 "${ENC[@]}" --parallelism.pp 2 --parallelism.microbatches 2 --resume latest
check "graphgpt+encoder, pp=2: resume is exact" exact ge ger
check "graphgpt+encoder: the encoder written at the end is the same file" cmp -s "$TMP/ge/graph_encoder.safetensors" \
  "$TMP/ger/graph_encoder.safetensors"
check "graphgpt+encoder: the encoder trained (it differs from the frozen run's)" bash -c \
  "! cmp -s '$TMP/ge/graph_encoder.safetensors' '$TMP/gp/graph_encoder.safetensors'"
# With LoRA too (projector+lora+encoder: the adapters, the encoder and the projector, each with
# its AdamW state), one process.
LENC=("${GRAPH[@]}" --training.trainable projector+lora+encoder --lora.rank 4 --optimizer.encoder_lr 5e-3)
run gle 1 "${LENC[@]}"
resumed_from gle gler 4
cp "$TMP/gle/train_log.jsonl" "$TMP/gler/train_log.jsonl"
run gler 1 "${LENC[@]}" --resume latest
check "projector+lora+encoder: resume is exact" exact gle gler
check "projector+lora+encoder: the same encoder and adapter files at the end" bash -c \
  "cmp -s '$TMP/gle/graph_encoder.safetensors' '$TMP/gler/graph_encoder.safetensors' &&
   cmp -s '$TMP/gle/adapter/adapter_model.safetensors' '$TMP/gler/adapter/adapter_model.safetensors'"

# export of that run's last checkpoint writes what the run wrote: the trained encoder (and its
# graph_tower), the adapters, the projector; its merged LLM has the adapters merged in.
"$GT" export --checkpoint "$TMP/gle/checkpoints/step_00000006" --out "$TMP/glex" 2>"$TMP/glex.err"
check "projector+lora+encoder: export writes the run's encoder, graph_tower, adapter and projector, byte for byte" bash -c \
  "cmp -s '$TMP/gle/graph_encoder.safetensors' '$TMP/glex/graph_encoder.safetensors' &&
   diff -r '$TMP/gle/graph_tower' '$TMP/glex/graph_tower' && diff -r '$TMP/gle/adapter' '$TMP/glex/adapter' &&
   cmp -s '$TMP/gle/graph_projector.safetensors' '$TMP/glex/graph_projector.safetensors'"
check "projector+lora+encoder: the exported LLM is the base one with W + (alpha / r) B A merged" "$PY" \
  "$ROOT/tests/merged_adapter.py" "$TMP/base/model/model.safetensors" "$TMP/glex/model/model.safetensors" "$TMP/gle/adapter"

# A rank killed after writing its shard of step 4, before the commit: step 4 is not committed,
# `latest` is step 2, and the run resumed from it ends where gp did.
GRAPHTUNE_TEST_KILL_IN_SAVE=1:4 run gk 2 "${GRAPH[@]}" --parallelism.pp 2 --parallelism.microbatches 2
check "killed in save: the job failed" ended_with_failure
check "killed in save: step 4 was begun, never committed" test -d "$TMP/gk/checkpoints/step_00000004" \
  -a ! -e "$TMP/gk/checkpoints/step_00000004/index.json"
run gkr 2 "${GRAPH[@]}" --parallelism.pp 2 --parallelism.microbatches 2 --checkpoint.dir "$TMP/gk/checkpoints" \
  --resume latest
check "killed in save: latest is step 2" grep -q "resumed from .*step_00000002 at step 2" "$TMP/gkr.err"
check "killed in save: the resumed run ends with gp's weights" "$PY" "$READ" same "$TMP/gp/checkpoints/step_00000006" \
  "$TMP/gk/checkpoints/step_00000006"
check "killed in save: its step 4 was written again, committed" test -s "$TMP/gk/checkpoints/step_00000004/index.json"

# Resharding: saved at tp=2 x pp=2 after 4 steps; loaded at dp=2 (which, resumed at its last
# step, saves what it loaded), then in one process; all three hold the same tensors.
R=("${GRAPH[@]}" --training.steps 4 --checkpoint.every 4)
run gt 4 "${R[@]}" --parallelism.tp 2 --parallelism.pp 2 --parallelism.microbatches 2
run gd 2 "${R[@]}" --parallelism.dp 2 --resume "$TMP/gt/checkpoints/step_00000004"
run gs 1 "${R[@]}" --resume "$TMP/gd/checkpoints/step_00000004"
check "reshard: loaded at dp=2 from tp=2 x pp=2" grep -q "saved at dp=1 pp=2 tp=2.*resharded" "$TMP/gd.err"
check "reshard: tp=2's projector is saved in two slices" \
  grep -qE "^optim/model.graph_projector.weight/exp_avg \[[0-9]+, [0-9]+\] 2$" <("$PY" "$READ" keys "$TMP/gt/checkpoints/step_00000004")
check "reshard: tp2 x pp2 -> dp2 -> 1 process, every tensor equal" "$PY" "$READ" same \
  "$TMP/gt/checkpoints/step_00000004" "$TMP/gd/checkpoints/step_00000004" "$TMP/gs/checkpoints/step_00000004"

# Stage lm, pp=2: every weight trained, the embeddings tied across the two stages.
run l1 2 "${LM[@]}" --parallelism.pp 2
resumed_from l1 l1r 4
cp "$TMP/l1/train_log.jsonl" "$TMP/l1r/train_log.jsonl"
run l1r 2 "${LM[@]}" --parallelism.pp 2 --resume latest
check "lm, pp=2: resume is exact" exact l1 l1r
check "lm: the model written at the end is the same file" cmp -s "$TMP/l1/model/model.safetensors" \
  "$TMP/l1r/model/model.safetensors"
run ls 1 "${LM[@]}" --checkpoint.dir "$TMP/ls/ck" --resume "$TMP/l1/checkpoints/step_00000006"
check "lm: pp=2's checkpoint loads in one process, every tensor equal" "$PY" "$READ" same \
  "$TMP/l1/checkpoints/step_00000006" "$TMP/ls/ck/step_00000006"

# A run that trains its tokenizer carries it in every checkpoint; resumed, it reads it back
# instead of training another.
TOK=("${LM[@]}" --model.tokenizer train --model.vocab_size 400)
run t1 1 "${TOK[@]}"
resumed_from t1 t1r 4
cp "$TMP/t1/train_log.jsonl" "$TMP/t1r/train_log.jsonl"
run t1r 1 "${TOK[@]}" --resume latest
check "tokenizer=train: the checkpoint lists tokenizer.model" grep -q '"tokenizer.model":{"bytes"' \
  "$TMP/t1/checkpoints/step_00000004/index.json"
check "tokenizer=train: the resumed run did not train another" test "$(grep -c 'trained a SentencePiece' "$TMP/t1r.err")" -eq 0
check "tokenizer=train: resume is exact" exact t1 t1r
check "tokenizer=train: the same vocabulary" cmp -s "$TMP/t1/model/tokenizer.model" "$TMP/t1r/model/tokenizer.model"

# keep_latest: only the newest two committed checkpoints remain. save_frozen: the LLM too.
run keep 1 "${GRAPH[@]}" --checkpoint.every 1 --checkpoint.keep_latest 2 --checkpoint.save_frozen true
check "keep_latest 2 keeps steps 5 and 6 only" test "$(ls "$TMP/keep/checkpoints" | tr '\n' ' ')" = "step_00000005 step_00000006 "
check "save_frozen saves the frozen LLM and encoder" grep -q '"model/model.layers.0.mlp.up_proj.weight"' \
  "$TMP/keep/checkpoints/step_00000006/index.json"

# Damage: one line naming the file and the problem, exit 2.
C=$TMP/g1/checkpoints
cp -r "$C/step_00000006" "$TMP/flipped" && printf '\x01' | dd of="$TMP/flipped/rank_00000.safetensors" bs=1 seek=3000 conv=notrunc 2>/dev/null
cp -r "$C/step_00000006" "$TMP/short" && truncate -s 5000 "$TMP/short/rank_00000.safetensors"
cp -r "$C/step_00000006" "$TMP/lost" && rm "$TMP/lost/rank_00000.safetensors"
cp -r "$C/step_00000006" "$TMP/open" && rm "$TMP/open/index.json"
expect_fail "corrupted shard" "rank_00000.safetensors: checksum mismatch" -- "$W" train --config "$CFG" "${GRAPH[@]}" \
  --job.out_dir "$TMP/x" --resume "$TMP/flipped"
expect_fail "truncated shard" "rank_00000.safetensors: truncated: 5000 bytes" -- "$W" train --config "$CFG" "${GRAPH[@]}" \
  --job.out_dir "$TMP/x" --resume "$TMP/short"
expect_fail "missing shard" "rank_00000.safetensors" -- "$W" train --config "$CFG" "${GRAPH[@]}" \
  --job.out_dir "$TMP/x" --resume "$TMP/lost"
expect_fail "uncommitted checkpoint" "not a committed checkpoint" -- "$W" train --config "$CFG" "${GRAPH[@]}" \
  --job.out_dir "$TMP/x" --resume "$TMP/open"
expect_fail "nothing to resume" "no committed checkpoint in $TMP/none/checkpoints" -- "$W" train --config "$CFG" \
  "${GRAPH[@]}" --job.out_dir "$TMP/none" --resume latest
expect_fail "another learning rate" "saved with optimizer.lr = \"0.01\", this job has \"0.02\"" -- "$W" train \
  --config "$CFG" "${GRAPH[@]}" --optimizer.lr 2e-2 --job.out_dir "$TMP/x" --resume "$C/step_00000006"
expect_fail "length grouping switched on" "saved with data.group_by_length = \"false\", this job has \"true\"" -- "$W" train \
  --config "$CFG" "${GRAPH[@]}" --data.group_by_length true --job.out_dir "$TMP/x" --resume "$C/step_00000006"
expect_fail "another encoder dropout" "saved with model.encoder_dropout = \"0\", this job has \"0.10000000000000001\"" -- "$W" train \
  --config "$CFG" "${GRAPH[@]}" --model.encoder_dropout 0.1 --job.out_dir "$TMP/x" --resume "$C/step_00000006"
expect_fail "another model" "saved with model.dim = \"96\", this job has \"32\"" -- "$W" train --config "$CFG" "${LM[@]}" --model.dim 32 \
  --job.out_dir "$TMP/x" --resume "$TMP/l1/checkpoints/step_00000006"
expect_fail "another run length" "saved by a run of 6 steps, this job has 8" -- "$W" train --config "$CFG" \
  "${GRAPH[@]}" --training.steps 8 --job.out_dir "$TMP/x" --resume "$C/step_00000006"
check "nothing was written by the refused runs" test ! -e "$TMP/x/graph_projector.bin"
finish
