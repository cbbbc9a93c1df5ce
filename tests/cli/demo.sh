#!/usr/bin/env bash
# scripts/demo.sh end to end with a handful of steps per stage (the full demo is minutes; its
# accuracies are measured by running it, not here): every stage runs in order from the files
# the one before wrote, both evaluations score the test split, and the summary names each
# stage's time and the three accuracies.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$TMP/demo
GRAPHTUNE_DEMO_OUT=$OUT bash "$ROOT/scripts/demo.sh" embedded --training.steps 3 --training.log_every 1 \
  >"$TMP/out.txt" 2>"$TMP/err.txt"
rc=$?
check "demo exits 0" test $rc -eq 0
[ $rc -eq 0 ] || sed 's/^/    stderr: /' "$TMP/err.txt" | tail -8
for s in data lm grounding stage1 stage2 eval eval-text total; do
  check "summary times $s" grep -qE "^  $s +[0-9]+\.[0-9]$" "$TMP/out.txt"
done
check "summary: graph model accuracy" grep -qE '^  graph model \(GraphGPT recipe\) +0\.[0-9]{4}$|^  graph model \(GraphGPT recipe\) +1\.0000$' "$TMP/out.txt"
check "summary: text-only accuracy" grep -qE '^  same LLM, text alone \(no graph\) +[01]\.[0-9]{4}$' "$TMP/out.txt"
check "summary: chance is 1/7" grep -qE '^  chance +0\.1429$' "$TMP/out.txt"
check "the lm stage trained a SentencePiece tokenizer and saved it with the model" test -s "$OUT/lm/model/tokenizer.model"
check "grounding wrote the encoder stage 1 started from" grep -q "encoder fresh" "$TMP/err.txt"
check "grounding reports retrieval against chance" grep -qE "retrieval top-1 [0-9.]+ \(chance 0\.0025, 400 nodes\)" "$TMP/err.txt"
check "the text-only eval says so in metrics.json" grep -q '"text_only": true' "$OUT/eval/text_only/metrics.json"
check "the graph eval says so in metrics.json" grep -q '"text_only": false' "$OUT/eval/graph/metrics.json"
check "both evals scored the 404 test papers" test "$(grep -c '' "$OUT/eval/graph/predictions.jsonl")" -eq 404 -a \
  "$(grep -c '' "$OUT/eval/text_only/predictions.jsonl")" -eq 404
finish
