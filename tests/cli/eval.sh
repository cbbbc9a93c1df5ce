#!/usr/bin/env bash
# graphtune eval through the real CLI: a tiny pipeline (stage lm, records, stage task), then eval
# answers every test record: predictions.jsonl in record order, metrics.json with accuracy and n;
# bad input gets one line, exit code 2, and no outputs.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CFG=$ROOT/configs/lm.toml
PY=${GRAPHTUNE_PYTHON:-python3}
"$PY" -c "import json" 2>/dev/null || PY=python3
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

"$GT" train --config "$CFG" --model.max_seq_len 1024 --training.steps 5 --job.out_dir "$TMP/lm" >/dev/null 2>"$TMP/lm.txt"
check "stage lm exits 0" test -s "$TMP/lm/model/model.safetensors"
for split in train test; do
  n=40; [ $split = test ] && n=12
  "$GT" data build --graph embedded --task node_classification --split $split --max-nodes 3 --max-records $n \
    --out "$TMP/$split.json" 2>/dev/null
  check "data build $split" test -s "$TMP/$split.json"
done
"$GT" train --config "$CFG" --training.stage task --model.path "$TMP/lm/model" --data.instructions "$TMP/train.json" \
  --data.max_len 1024 --training.steps 3 --training.batch_size 4 --job.out_dir "$TMP/s2" >/dev/null 2>"$TMP/s2.txt"
check "stage task writes graph_projector.bin" test -s "$TMP/s2/graph_projector.bin"

EVAL=("$GT" eval --config "$CFG" --model.path "$TMP/lm/model" --data.max_len 1024 --eval.max_new_tokens 8)
"${EVAL[@]}" --model.projector "$TMP/s2/graph_projector.bin" --data.instructions "$TMP/test.json" \
  --job.out_dir "$TMP/ev" >"$TMP/ev.out" 2>"$TMP/ev.err"
rc=$?
check "eval exits 0" test $rc -eq 0
[ $rc -eq 0 ] || sed 's/^/    stderr: /' "$TMP/ev.err" | tail -5
check "the launcher's summary on stdout" grep -q "^graphtune: eval finished" "$TMP/ev.out"
check "summary line names accuracy, macro-F1, unparsed, chance and n" \
  grep -qE "accuracy .*macro-F1 .*unparsed .*chance .*n 12" "$TMP/ev.err"
check "predictions.jsonl: 12 lines, the test records' ids in order, GraphGPT's keys" "$PY" - "$TMP/ev/eval/predictions.jsonl" "$TMP/test.json" <<'PYEOF'
import json, sys
preds = [json.loads(l) for l in open(sys.argv[1])]
recs = json.load(open(sys.argv[2]))
assert len(preds) == 12 == len(recs), (len(preds), len(recs))
assert [p["id"] for p in preds] == [r["id"] for r in recs]
assert all(list(p) == ["id", "node_idx", "res"] for p in preds)
assert [p["node_idx"] for p in preds] == [r["graph"]["node_idx"] for r in recs]
PYEOF
check "metrics.json: accuracy in [0, 1], n = 12, node-classification block" "$PY" - "$TMP/ev/eval/metrics.json" <<'PYEOF'
import json, sys
m = json.load(open(sys.argv[1]))
assert m["n"] == 12 and 0 <= m["accuracy"] <= 1, m
nc = m["node_classification"]
assert nc["n"] == 12 and 0 <= nc["accuracy"] <= 1 and 0 <= nc["macro_f1"] <= 1 and 0 <= nc["unparsed"] <= 12, nc
PYEOF
check "nothing staged left behind (the two files and the launcher's logs/)" \
  test "$(ls -A "$TMP/ev/eval" | tr '\n' ' ')" = "logs metrics.json predictions.jsonl "

# --out wins over [eval].out_dir; [eval].batch_size changes nothing in the answers (greedy).
"${EVAL[@]}" --model.projector "$TMP/s2/graph_projector.bin" --data.instructions "$TMP/test.json" \
  --eval.batch_size 5 --out "$TMP/ev2" >/dev/null 2>&1
check "--out and another batch size give the same predictions" cmp -s "$TMP/ev/eval/predictions.jsonl" "$TMP/ev2/predictions.jsonl"

# bf16 (the reference configs ask for it): the frozen LLM and encoder in bf16, bf16 matmuls.
"${EVAL[@]}" --model.projector "$TMP/s2/graph_projector.bin" --data.instructions "$TMP/test.json" --model.dtype bf16 \
  --out "$TMP/evbf16" >/dev/null 2>"$TMP/evbf16.err"
check "eval in bf16 exits 0 and answers every record" test $? -eq 0 -a "$(grep -c '' "$TMP/evbf16/predictions.jsonl")" -eq 12

# Text alone: the same records, no graph tokens; metrics.json says so.
"${EVAL[@]}" --model.projector "$TMP/s2/graph_projector.bin" --data.instructions "$TMP/test.json" --eval.text_only true \
  --out "$TMP/evtext" >/dev/null 2>"$TMP/evtext.err"
check "text-only eval exits 0" test $? -eq 0
check "text-only eval says so" grep -q '"text_only": true' "$TMP/evtext/metrics.json"
check "text-only eval keeps GraphGPT's output shape" "$PY" - "$TMP/evtext/predictions.jsonl" "$TMP/test.json" <<'PYEOF'
import json, sys
preds = [json.loads(l) for l in open(sys.argv[1])]
recs = json.load(open(sys.argv[2]))
assert [p["id"] for p in preds] == [r["id"] for r in recs]
assert [p["node_idx"] for p in preds] == [r["graph"]["node_idx"] for r in recs]
PYEOF

# Bad input: one line, exit code 2, no outputs.
expect_fail "missing projector" "nope.bin: cannot open" -- "${EVAL[@]}" --model.projector "$TMP/nope.bin" \
  --data.instructions "$TMP/test.json" --out "$TMP/x1"
"$PY" - "$TMP/test.json" "$TMP/far.json" <<'PYEOF'
import json, sys
recs = json.load(open(sys.argv[1]))
recs[3]["graph"]["node_list"][-1] = 999999
json.dump(recs, open(sys.argv[2], "w"))
PYEOF
expect_fail "node id beyond the graph" "999999" -- "${EVAL[@]}" --model.projector "$TMP/s2/graph_projector.bin" \
  --data.instructions "$TMP/far.json" --out "$TMP/x2"
# --skip-invalid: the bad record (node beyond the graph) and an invalid one (edge outside
# node_list) are dropped and counted; the other answers are the same as before.
"$PY" - "$TMP/far.json" "$TMP/bad2.json" <<'PYEOF'
import json, sys
recs = json.load(open(sys.argv[1]))
recs[5]["graph"]["edge_index"][0][0] = 77
json.dump(recs, open(sys.argv[2], "w"))
PYEOF
"${EVAL[@]}" --model.projector "$TMP/s2/graph_projector.bin" --data.instructions "$TMP/bad2.json" --skip-invalid \
  --out "$TMP/skip" >/dev/null 2>"$TMP/skip.err"
check "--skip-invalid: exit 0" test $? -eq 0
check "--skip-invalid reports the invalid record" grep -q "dropped 1 of 12 records of $TMP/bad2.json (invalid)" "$TMP/skip.err"
check "--skip-invalid reports the record outside the feature table" \
  grep -q "dropped 1 of 11 records of $TMP/bad2.json (nodes outside the feature tables); first: .*999999" "$TMP/skip.err"
check "--skip-invalid: 10 answers, equal to the full run's" bash -c \
  "test \$(grep -c '' '$TMP/skip/predictions.jsonl') -eq 10 && grep -F -x -f '$TMP/skip/predictions.jsonl' '$TMP/ev/eval/predictions.jsonl' | wc -l | grep -qx 10"
expect_fail "eval needs records" "[data].instructions: eval needs" -- "$GT" eval --config "$CFG" --model.path "$TMP/lm/model" --out "$TMP/x3"
check "failed evals leave no output folder" bash -c "! ls -d $TMP/x1 $TMP/x2 $TMP/x3 2>/dev/null"
finish
