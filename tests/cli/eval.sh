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
check "nothing staged left behind (the files, GraphGPT's result folder, the launcher's logs/, metrics.jsonl, tensorboard/)" \
  test "$(ls -A "$TMP/ev/eval" | tr '\n' ' ')" = "graphgpt logs metrics.json metrics.jsonl predictions.jsonl tensorboard "
check "GraphGPT's result file: a JSON list of the same rows, named by the dataset and the range" "$PY" - "$TMP/ev/eval" <<'PYEOF'
import json, os, sys
d = sys.argv[1]
assert os.listdir(d + "/graphgpt") == ["synth_test_res_0_12.json"], os.listdir(d + "/graphgpt")
rows = json.load(open(d + "/graphgpt/synth_test_res_0_12.json"))
assert rows == [json.loads(l) for l in open(d + "/predictions.jsonl")]
m = json.load(open(d + "/metrics.json"))
assert m["protocol"] == "graphtune" and m["template"] == "vicuna_v1_1" and m["temperature"] == 0, m
assert m["datasets"]["synth"]["node_classification"] == m["node_classification"], m["datasets"]
assert 0 <= m["node_classification"]["top3_containment"] <= 1
PYEOF
check "the summary names GraphGPT's top-3 figure as what it is" grep -q 'top-3 containment (GraphGPT.s "accuracy")' "$TMP/ev.err"

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

# GraphGPT's protocol: its graphchat_v1 prompt, sampling at 0.2; each answer seeded by its record,
# so the batch size still changes nothing. Class lists by dataset from [eval].classes.
"$PY" - "$TMP/classes.json" <<'PYEOF'
import json, sys
names = ["Computer Networks", "Computer Vision", "Databases", "Natural Language Processing", "Neural Networks",
         "Reinforcement Learning", "Theory"]
json.dump({"synth": names, "arxiv": ["cs.AI", "cs.LG"]}, open(sys.argv[1], "w"))
PYEOF
for bs in 5 12; do
  "${EVAL[@]}" --model.projector "$TMP/s2/graph_projector.bin" --data.instructions "$TMP/test.json" --eval.protocol graphgpt \
    --eval.max_new_tokens 8 --eval.batch_size $bs --eval.classes "$TMP/classes.json" --out "$TMP/evgg$bs" >/dev/null 2>"$TMP/evgg$bs.err"
  check "eval --eval.protocol graphgpt (batch $bs) exits 0" test $? -eq 0
done
check "graphgpt protocol: the same sampled answers at batch 5 and 12" cmp -s "$TMP/evgg5/predictions.jsonl" "$TMP/evgg12/predictions.jsonl"
check "graphgpt protocol: graphchat_v1, temperature 0.2, classes from [eval].classes" "$PY" - "$TMP/evgg5/metrics.json" "$TMP/classes.json" <<'PYEOF'
import json, sys
m = json.load(open(sys.argv[1]))
assert m["protocol"] == "graphgpt" and m["template"] == "graphchat_v1" and abs(m["temperature"] - 0.2) < 1e-12, m
nc = m["node_classification"]
assert nc["classes_from"] == sys.argv[2] and len(nc["classes"]) == 7 and nc["n"] == 12, nc
PYEOF
check "graphgpt protocol says what it does" grep -q "protocol graphgpt, template graphchat_v1, sampling at temperature 0.2" "$TMP/evgg5.err"
"${EVAL[@]}" --model.projector "$TMP/s2/graph_projector.bin" --data.instructions "$TMP/test.json" --eval.protocol graphgpt \
  --eval.max_new_tokens 8 --eval.seed 99 --out "$TMP/evgg99" >/dev/null 2>&1
check "another [eval].seed samples other answers" bash -c "! cmp -s '$TMP/evgg5/predictions.jsonl' '$TMP/evgg99/predictions.jsonl'"
# max_new_tokens 0 (the default): enough for the longest reference answer, at least 32.
"$GT" eval --config "$CFG" --model.path "$TMP/lm/model" --data.max_len 1024 --model.projector "$TMP/s2/graph_projector.bin" \
  --data.instructions "$TMP/test.json" --eval.batch_size 12 --out "$TMP/evauto" >/dev/null 2>"$TMP/evauto.err"
check "the default answer budget is the longest reference answer's tokens and half again, at least 32" "$PY" - "$TMP/evauto.err" <<'PYEOF'
import re, sys
m = re.search(r"up to (\d+) new tokens \(the longest reference answer is (\d+) tokens\)", open(sys.argv[1]).read())
assert m, "no budget line"
budget, longest = int(m.group(1)), int(m.group(2))
assert longest > 0 and budget == min(1024, max(32, (3 * longest + 1) // 2)), (budget, longest)
PYEOF
# Link prediction rows carry GraphGPT's LP keys.
"$GT" data build --graph embedded --task link_prediction --split test --max-nodes 3 --max-records 6 --out "$TMP/lp.json" 2>/dev/null
"${EVAL[@]}" --model.projector "$TMP/s2/graph_projector.bin" --data.instructions "$TMP/lp.json" --out "$TMP/evlp" >/dev/null 2>"$TMP/evlp.err"
check "link-prediction eval exits 0" test $? -eq 0
check "link-prediction rows: id, node_idx_1, node_idx_2, truth, res (run_graphgpt_LP.py's)" "$PY" - "$TMP/evlp" "$TMP/lp.json" <<'PYEOF'
import json, os, sys
recs = json.load(open(sys.argv[2]))
rows = [json.loads(l) for l in open(sys.argv[1] + "/predictions.jsonl")]
assert all(list(r) == ["id", "node_idx_1", "node_idx_2", "truth", "res"] for r in rows), rows[0]
assert [r["node_idx_1"] for r in rows] == [x["graph"]["node_idx_1"] for x in recs]
assert [r["node_idx_2"] for r in rows] == [x["graph"]["node_idx_2"] for x in recs]
assert [r["truth"] for r in rows] == [x["conversations"][-1]["value"] for x in recs]
(f,) = os.listdir(sys.argv[1] + "/graphgpt")
assert json.load(open(sys.argv[1] + "/graphgpt/" + f)) == rows
PYEOF

# Answers within the choices: every answer a class name (yes or no) as the records write it, so
# none is unparsed; an answer that was one already stays the same. The budget follows the
# records' answers (a class name is up to 28 tokens in stories260K's vocabulary).
"${EVAL[@]}" --model.projector "$TMP/s2/graph_projector.bin" --data.instructions "$TMP/test.json" --eval.answers choices \
  --eval.max_new_tokens 0 --out "$TMP/evch" >/dev/null 2>"$TMP/evch.err"
check "--eval.answers choices: exit 0, and it says so" grep -q "greedy within the listed answers" "$TMP/evch.err"
check "--eval.answers choices: each answer a class name, none unparsed; free answers that were one unchanged" \
  "$PY" - "$TMP/evch" "$TMP/ev/eval" <<'PYEOF'
import json, sys
m = json.load(open(sys.argv[1] + "/metrics.json"))
names = m["node_classification"]["classes"]
assert m["answers"] == "choices" and m["node_classification"]["unparsed"] == 0, m
within = [json.loads(l)["res"] for l in open(sys.argv[1] + "/predictions.jsonl")]
free = [json.loads(l)["res"] for l in open(sys.argv[2] + "/predictions.jsonl")]
assert len(within) == 12 and all(a in names for a in within), within
assert all(w == f for w, f in zip(within, free) if f in names), (within, free)
assert json.load(open(sys.argv[2] + "/metrics.json"))["answers"] == "free"
PYEOF
"${EVAL[@]}" --model.projector "$TMP/s2/graph_projector.bin" --data.instructions "$TMP/lp.json" --eval.answers choices \
  --out "$TMP/evlpch" >/dev/null 2>&1
check "--eval.answers choices: each link-prediction answer is yes or no" "$PY" - "$TMP/evlpch/predictions.jsonl" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 6 and all(r["res"] in ("yes", "no") for r in rows), rows
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
echo '{"synth": ["a", "A."]}' >"$TMP/dup_classes.json"
expect_fail "class names that collide" 'dup_classes.json: "synth": classes 0 and 1 are both "a" once normalised' -- \
  "${EVAL[@]}" --model.projector "$TMP/s2/graph_projector.bin" --data.instructions "$TMP/test.json" \
  --eval.classes "$TMP/dup_classes.json" --out "$TMP/x4"
expect_fail "an unknown protocol" "--eval.protocol: 'llava' is not one of: graphtune, graphgpt" -- \
  "${EVAL[@]}" --data.instructions "$TMP/test.json" --eval.protocol llava --out "$TMP/x5"
"$PY" - "$TMP/test.json" "$TMP/worded.json" <<'PYEOF'
import json, sys
recs = json.load(open(sys.argv[1]))
recs[2]["conversations"][-1]["value"] = "It is " + recs[2]["conversations"][-1]["value"] + "."
json.dump(recs, open(sys.argv[2], "w"))
PYEOF
expect_fail "choices for a reference answer in other words" "is not \"" -- "${EVAL[@]}" \
  --model.projector "$TMP/s2/graph_projector.bin" --data.instructions "$TMP/worded.json" --eval.answers choices --out "$TMP/x6"
# Under --skip-invalid a record dropped for its node is not refused for its answer's wording.
"$PY" - "$TMP/bad2.json" "$TMP/bad2worded.json" <<'PYEOF'
import json, sys
recs = json.load(open(sys.argv[1]))
recs[3]["conversations"][-1]["value"] = "It is " + recs[3]["conversations"][-1]["value"] + "."
json.dump(recs, open(sys.argv[2], "w"))
PYEOF
"${EVAL[@]}" --model.projector "$TMP/s2/graph_projector.bin" --data.instructions "$TMP/bad2worded.json" --skip-invalid \
  --eval.answers choices --eval.max_new_tokens 0 --out "$TMP/skipch" >/dev/null 2>"$TMP/skipch.err"
check "--skip-invalid with choices: a dropped record's wording is not refused; 10 answers, the full run's" bash -c \
  "test \$(grep -c '' '$TMP/skipch/predictions.jsonl') -eq 10 && grep -q 'dropped 1 of 11 records' '$TMP/skipch.err' &&
   grep -F -x -f '$TMP/skipch/predictions.jsonl' '$TMP/evch/predictions.jsonl' | wc -l | grep -qx 10"
expect_fail "choices, --skip-invalid: a kept record in other words is still refused" "is not \"" -- "${EVAL[@]}" \
  --model.projector "$TMP/s2/graph_projector.bin" --data.instructions "$TMP/worded.json" --skip-invalid \
  --eval.answers choices --eval.max_new_tokens 0 --out "$TMP/x9"
expect_fail "a budget shorter than a choice" "[eval].max_new_tokens: 1 tokens cannot hold the longest answer choice" -- \
  "${EVAL[@]}" --model.projector "$TMP/s2/graph_projector.bin" --data.instructions "$TMP/test.json" --eval.answers choices \
  --eval.max_new_tokens 1 --out "$TMP/x7"
expect_fail "an unknown answers setting" "--eval.answers: 'any' is not one of: free, choices" -- \
  "${EVAL[@]}" --data.instructions "$TMP/test.json" --eval.answers any --out "$TMP/x8"
check "failed evals leave no output folder" bash -c "! ls -d $TMP/x1 $TMP/x2 $TMP/x3 $TMP/x4 $TMP/x5 $TMP/x6 $TMP/x7 $TMP/x8 $TMP/x9 2>/dev/null"
finish
