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
PP1=(--pp 1 embedded --training.steps 3 --training.log_every 1)
demo_pp1() {  # demo_pp1 NAME ARGS...: the demo into $TMP/demo_pp1; rc, $TMP/NAME.out and .err
  local name=$1 t0
  shift
  t0=$(date +%s)
  GRAPHTUNE_DEMO_OUT=$TMP/demo_pp1 timeout 600 bash "$ROOT/scripts/demo.sh" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
  rc=$?
  echo "     ($name: exit $rc after $(($(date +%s) - t0)) s)"
  [ $rc -eq 0 ] || sed 's/^/    stderr: /' "$TMP/$name.err" | tail -8
}
demo_pp1 pp1 "${PP1[@]}"
check "demo --pp 1 exits 0" test $rc -eq 0
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

# Run again in its folder, the demo starts over: one line says that it replaces the earlier run,
# and it ends as the first run did, with the same exit code and accuracy lines. Three steps teach
# the LLM too little to answer right, so the answers themselves are compared too, against the
# first run's, which the second replaces.
replaced() { test "$(grep -c "^demo: replacing the earlier demo run in $TMP/demo_pp1\$" "$TMP/$1.err")" -eq 1; }
scores() { sed -n '/^test papers/,$p' "$TMP/$1.out"; }
same_scores() { [ -n "$(scores pp1)" ] && diff <(scores pp1) <(scores "$1"); }
for e in eval eval_text_only; do cp "$TMP/demo_pp1/$e/predictions.jsonl" "$TMP/pp1.$e.jsonl"; done
same_answers() { cmp "$TMP/pp1.eval.jsonl" "$TMP/demo_pp1/eval/predictions.jsonl" &&
  cmp "$TMP/pp1.eval_text_only.jsonl" "$TMP/demo_pp1/eval_text_only/predictions.jsonl"; }
demo_pp1 again "${PP1[@]}"
check "run again: exits 0, as the first run did" test $rc -eq 0
check "run again: one line says it replaces the earlier run" replaced again
check "run again: the first run's accuracy lines" same_scores again
check "run again: the first run's answers" same_answers

# Ctrl-C in the LM warm-up (a longer one, stopped at its second step): SIGINT to the demo's
# process group, as a terminal sends it. The launcher saves a checkpoint on the way out: the
# committed work its one-job-a-folder rule refuses without --resume or --overwrite.
set -m
GRAPHTUNE_DEMO_OUT=$TMP/demo_pp1 bash "$ROOT/scripts/demo.sh" --pp 1 embedded --training.steps 500 \
  --training.log_every 1 >"$TMP/stopped.out" 2>"$TMP/stopped.err" &
demo=$!
set +m
for _ in $(seq 600); do grep -q '^== lm$' "$TMP/stopped.err" && break; sleep 0.1; done
wait_for_step "$TMP/demo_pp1/lm" 2
expect_fail "a second demo into the folder of a running one is refused" "another demo is running in it" -- \
  env GRAPHTUNE_DEMO_OUT="$TMP/demo_pp1" bash "$ROOT/scripts/demo.sh" "${PP1[@]}"
kill -INT -- -$demo
wait $demo
rc=$?
echo "     (stopped: exit $rc)"
check "Ctrl-C: the demo stops (exit 130)" test $rc -eq 130
check "Ctrl-C: the LM warm-up saved a checkpoint" bash -c "ls '$TMP/demo_pp1/lm/checkpoints/'step_*/index.json >/dev/null"
demo_pp1 after_stop "${PP1[@]}"
check "after Ctrl-C: exits 0" test $rc -eq 0
check "after Ctrl-C: one line says it replaces the stopped run" replaced after_stop
check "after Ctrl-C: the first run's accuracy lines" same_scores after_stop
check "after Ctrl-C: the first run's answers" same_answers

# Only a demo's run is replaced: anything else in the folder is refused and left as it is.
mkdir -p "$TMP/mine/stage1" && echo mine >"$TMP/mine/notes.txt"
expect_fail "a folder holding more than a demo run is refused" "holds what is not a demo run (notes.txt)" -- \
  env GRAPHTUNE_DEMO_OUT="$TMP/mine" bash "$ROOT/scripts/demo.sh" "${PP1[@]}"
rm "$TMP/mine/notes.txt"
expect_fail "a folder without the demo's data/ (a pipeline's, say) is refused" "holds what is not a demo run (no data/)" -- \
  env GRAPHTUNE_DEMO_OUT="$TMP/mine" bash "$ROOT/scripts/demo.sh" "${PP1[@]}"
check "the refused folder is left as it was" test -d "$TMP/mine/stage1"
finish
