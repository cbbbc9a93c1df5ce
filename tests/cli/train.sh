#!/usr/bin/env bash
# graphtune train, stage lm, through the real CLI: the loss falls, the model is written as a
# Hugging Face folder that generate reads back; bad configs get one line and exit code 2, and
# leave nothing behind.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CFG=$ROOT/configs/lm.toml

"$GT" train --config "$CFG" --training.steps 60 --training.log_every 10 --training.batch_size 8 \
  --training.seq_len 64 --job.out_dir "$TMP/run" >"$TMP/out.txt" 2>"$TMP/err.txt"
rc=$?
check "train exits 0" test $rc -eq 0
first=$(grep -m1 '^step' "$TMP/err.txt" | sed 's/.*loss \([0-9.]*\).*/\1/')
last=$(grep '^step' "$TMP/err.txt" | tail -1 | sed 's/.*loss \([0-9.]*\).*/\1/')
echo "loss: first logged $first, last logged $last"
check "loss falls by a fifth or more" awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a * 0.8) }'
check "the launcher's summary on stdout" grep -q "^graphtune: train finished" "$TMP/out.txt"
for f in config.json model.safetensors tokenizer.bin; do
  check "model folder has $f" test -s "$TMP/run/model/$f"
done
"$GT" generate --model "$TMP/run/model" --prompt "graph" --max-new-tokens 20 --temperature 0 >"$TMP/gen.txt" 2>/dev/null
check "generate reads the trained model back" grep -q '^graph' "$TMP/gen.txt"

# Same config, same seed: the same losses (training is deterministic on one rank).
"$GT" train --config "$CFG" --training.steps 10 --training.log_every 5 --training.batch_size 4 \
  --training.seq_len 32 --job.out_dir "$TMP/a" 2>"$TMP/a.txt" >/dev/null
"$GT" train --config "$CFG" --training.steps 10 --training.log_every 5 --training.batch_size 4 \
  --training.seq_len 32 --job.out_dir "$TMP/b" 2>"$TMP/b.txt" >/dev/null
check "deterministic losses" cmp <(grep '^step' "$TMP/a.txt" | cut -d'|' -f2) <(grep '^step' "$TMP/b.txt" | cut -d'|' -f2)

# bf16: autocast over fp32 master weights (every parameter of stage lm trains); the written model
# is those fp32 weights. Few short steps: bf16 matmuls are slow on CPUs without bf16 units.
"$GT" train --config "$CFG" --model.dtype bf16 --training.steps 3 --training.log_every 1 --training.batch_size 2 \
  --training.seq_len 32 --job.out_dir "$TMP/bf16" 2>"$TMP/bf16.txt" >/dev/null
check "bf16 training exits 0" test $? -eq 0
check "bf16 logs its precision once" test "$(grep -c 'precision: bf16 autocast, fp32 master weights' "$TMP/bf16.txt")" -eq 1
check "bf16 run writes fp32 master weights" grep -q '"torch_dtype": "float32"' "$TMP/bf16/model/config.json"

# Stage grounding: the graph encoder learns to find each paper's text (CLIP loss); it writes the
# encoder under GraphGPT's names, and reports held-out retrieval against chance.
"$GT" train --config "$CFG" --training.stage grounding --training.steps 40 --training.batch_size 64 \
  --training.log_every 20 --job.out_dir "$TMP/gr" 2>"$TMP/gr.txt" >/dev/null
check "grounding exits 0" test $? -eq 0
check "grounding writes graph_encoder.safetensors" test -s "$TMP/gr/graph_encoder.safetensors"
check "grounding names GraphGPT's encoder tensors" grep -qa '"gtLayers.0.qTrans"' "$TMP/gr/graph_encoder.safetensors"
g_first=$(grep -m1 '^step' "$TMP/gr.txt" | sed 's/.*contrastive loss \([0-9.]*\).*/\1/')
g_last=$(grep '^step' "$TMP/gr.txt" | tail -1 | sed 's/.*contrastive loss \([0-9.]*\).*/\1/')
echo "grounding loss: $g_first -> $g_last"
check "grounding loss falls" awk -v a="$g_first" -v b="$g_last" 'BEGIN { exit !(b < a) }'
retr=$(sed -n 's/.*retrieval top-1 \([0-9.]*\) (chance 0.0025, 400 nodes).*/\1/p' "$TMP/gr.txt")
echo "grounding held-out retrieval: $retr"
check "grounding retrieval is 20x chance or better" awk -v r="$retr" 'BEGIN { exit !(r > 0.05) }'
expect_fail "grounding from a missing encoder" "nope.safetensors: cannot open" -- \
  "$GT" train --config "$CFG" --training.stage grounding --model.graph_encoder "$TMP/nope.safetensors" --job.out_dir "$TMP/x10"

# Fine-tuning a model the user has: stories260K (llama2.c) with its tokenizer.
if [ -d "$ASSETS/llm" ]; then
  "$GT" train --config "$CFG" --model.path "$ASSETS/llm/stories260K.bin" --model.tokenizer "$ASSETS/llm/tok512.bin" \
    --training.steps 4 --training.log_every 2 --training.batch_size 2 --training.seq_len 32 \
    --job.out_dir "$TMP/ft" 2>"$TMP/ft.txt" >/dev/null
  check "fine-tunes stories260K and writes it back" test -s "$TMP/ft/model/model.safetensors"
  check "fine-tuning keeps the model's shape" grep -q '"hidden_size": 64' "$TMP/ft/model/config.json"
  expect_fail "the tokenizer beside a model must match it" "tokenizer vocab 32000 does not match model vocab 512" -- \
    "$GT" train --config "$CFG" --model.path "$ASSETS/llm/stories260K.bin" --job.out_dir "$TMP/x6"
else
  echo "SKIP (part): shared assets not found at $ASSETS: fine-tuning checks not run"
fi

printf '[training]\nsteps = 10\nstpes = 3\n' >"$TMP/typo.toml"
expect_fail "unknown key" "typo.toml: [training].stpes: unknown key" -- "$GT" train --config "$TMP/typo.toml" --job.out_dir "$TMP/x1"
printf '[training]\nsteps = "ten"\n' >"$TMP/type.toml"
expect_fail "wrong type" "type.toml: [training].steps: expected an integer, got string" -- "$GT" train --config "$TMP/type.toml" --job.out_dir "$TMP/x2"
printf '[training\n' >"$TMP/syntax.toml"
expect_fail "not TOML" "syntax.toml: not valid TOML at line" -- "$GT" train --config "$TMP/syntax.toml"
expect_fail "missing config" "nope.toml: cannot open" -- "$GT" train --config "$TMP/nope.toml"
expect_fail "bad override" "command line --optimizer.lr: expected a number, got string" -- "$GT" train --config "$CFG" --optimizer.lr fast --job.out_dir "$TMP/x3"
expect_fail "a trained vocabulary needs room" "[model].vocab_size: a trained tokenizer's vocabulary must be in [300" -- \
  "$GT" train --config "$CFG" --model.tokenizer train --model.vocab_size 100 --job.out_dir "$TMP/x4"
expect_fail "a trained vocabulary is for a fresh model" "[model].tokenizer: \"train\" makes a new vocabulary" -- \
  "$GT" train --config "$CFG" --model.tokenizer train --model.path "$TMP/run/model" --job.out_dir "$TMP/x8"
expect_fail "a trained vocabulary is for stage lm" "--model.tokenizer: \"train\" (a new vocabulary) is for stage 'lm' only" -- \
  "$GT" train --config "$CFG" --model.tokenizer train --training.stage grounding --job.out_dir "$TMP/x9"
expect_fail "a layout needs its ranks (the worker alone)" "lm.toml: [parallelism]: dp 1 x pp 2 x tp 1 = 2 ranks, but the job has 1 (start it with mpirun -np 2)" -- \
  "${GRAPHTUNE_WORKER:?}" train --config "$CFG" --parallelism.pp 2 --parallelism.microbatches 2 --job.out_dir "$TMP/x11"
expect_fail "graph stage without records" "[data].instructions: stage 'task' needs" -- "$GT" train --config "$CFG" --training.stage task --job.out_dir "$TMP/x7"
expect_fail "seq_len beyond context" "exceeds the model's context" -- "$GT" train --config "$CFG" --training.seq_len 4096 --job.out_dir "$TMP/x5"
check "failed runs leave no output folder" bash -c "for d in $TMP/x1 $TMP/x2 $TMP/x3 $TMP/x4 $TMP/x5 $TMP/x6 $TMP/x7 $TMP/x8 $TMP/x9 $TMP/x10 $TMP/x11; do test ! -e \"\$d\" || exit 1; done"
finish
