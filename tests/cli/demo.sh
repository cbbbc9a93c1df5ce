#!/usr/bin/env bash
# scripts/demo.sh end to end with a handful of steps per stage (the full demo is minutes; its
# accuracies are measured by running it, not here): every stage runs in order from the files
# the one before wrote, both evaluations score the test split, and the summary names each
# stage's time and the scores. The demo runs on the launcher with 2 ranks as pipeline stages
# (the LM warm-up, then `graphtune pipeline`: stages 1 and 2, the evaluations); `demo.sh --pp 1`
# runs the same in one process, with the same losses.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$TMP/demo
GRAPHTUNE_DEMO_OUT=$OUT bash "$ROOT/scripts/demo.sh" embedded --training.steps 3 --training.log_every 1 \
  >"$TMP/out.txt" 2>"$TMP/err.txt"
rc=$?
check "demo exits 0" test $rc -eq 0
[ $rc -eq 0 ] || sed 's/^/    stderr: /' "$TMP/err.txt" | tail -8
for s in data lm grounding pipeline total; do
  check "summary times $s" grep -qE "^  $s +[0-9]+\.[0-9]$" "$TMP/out.txt"
done
for s in stage1 stage2 "eval" "eval \(text only\)"; do
  check "the pipeline ran $s" grep -qE "^$s +done +[0-9]+\.[0-9] +$OUT/" "$TMP/out.txt"
done
check "the LM warm-up and stages 1 and 2 ran as two pipeline stages" \
  test "$(grep -c 'rank 1: dp 0 pp 1 tp 0' "$TMP/err.txt")" -ge 3
check "summary: graph model accuracy and macro-F1" \
  grep -qE '^  graph model \(GraphGPT recipe\) +[01]\.[0-9]{4} +[01]\.[0-9]{4}$' "$TMP/out.txt"
check "summary: text-only accuracy and macro-F1" \
  grep -qE '^  same LLM, text alone \(no graph\) +[01]\.[0-9]{4} +[01]\.[0-9]{4}$' "$TMP/out.txt"
check "summary: chance is 1/7" grep -qE '^  chance +0\.1429$' "$TMP/out.txt"
# The test split's most common class, counted here from the records' answers.
majority=$(python3 -c '
import json, sys, collections
answers = [r["conversations"][-1]["value"] for r in json.load(open(sys.argv[1]))]
print("%.4f" % (max(collections.Counter(answers).values()) / len(answers)))' "$OUT/data/node_classification_test.json")
check "summary: the most common class scores $majority" grep -qE "^  always the most common class +$majority\$" "$TMP/out.txt"
check "the lm stage trained a SentencePiece tokenizer and saved it with the model" test -s "$OUT/lm/model/tokenizer.model"
check "grounding wrote the encoder stage 1 started from" grep -q "encoder fresh" "$TMP/err.txt"
check "grounding reports retrieval against chance" grep -qE "retrieval top-1 [0-9.]+ \(chance 0\.0025, 400 nodes\)" "$TMP/err.txt"
check "the text-only eval says so in metrics.json" grep -q '"text_only": true' "$OUT/eval_text_only/metrics.json"
check "the graph eval says so in metrics.json" grep -q '"text_only": false' "$OUT/eval/metrics.json"
check "both evals scored the 404 test papers" test "$(grep -c '' "$OUT/eval/predictions.jsonl")" -eq 404 -a \
  "$(grep -c '' "$OUT/eval_text_only/predictions.jsonl")" -eq 404

# The same in one process: the LM warm-up's and stages 1 and 2's per-step losses (the full
# precision ones of train_log.jsonl) are the two-rank run's.
GRAPHTUNE_DEMO_OUT=$TMP/demo_pp1 timeout 600 bash "$ROOT/scripts/demo.sh" --pp 1 embedded --training.steps 3 \
  --training.log_every 1 >"$TMP/pp1.out" 2>"$TMP/pp1.err"
rc=$?
check "demo --pp 1 exits 0" test $rc -eq 0
[ $rc -eq 0 ] || sed 's/^/    stderr: /' "$TMP/pp1.err" | tail -8
check "--pp 1 ran one process" bash -c "! grep -q 'rank 1:' '$TMP/pp1.err'"
for s in lm stage1 stage2; do
  check "$s: pp=2 losses equal one process's (rtol 1e-5)" python3 -c '
import json, sys
losses = [[json.loads(l)["loss"] for l in open(f)] for f in sys.argv[1:]]
print("     losses", losses)
assert len(losses[0]) == 3 and losses[0][0] > 0.1
assert all(abs(a - b) <= 1e-5 * abs(a) for a, b in zip(*losses)) and len(losses[0]) == len(losses[1])' \
    "$TMP/demo_pp1/$s/train_log.jsonl" "$OUT/$s/train_log.jsonl"
done
finish
