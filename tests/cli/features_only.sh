#!/usr/bin/env bash
# A graph of features alone, through the text-graph folder format a user's own graph takes: the
# classic Cora (LINQS; no text, 1,433-wide 0/1 features) written by scripts/linqs_to_text_graph.py,
# its records (no title or text in the prompt), grounding in the training papers' classes, and
# the graph stages and eval with an encoder of that width (fresh, or the grounded one read back).
# Also `graphtune data convert`: Cora-ML as a text-graph folder builds the same records as the
# Cora-ML folder itself.
source "$(dirname "$0")/lib.sh"
need_assets
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${GRAPHTUNE_PYTHON:-python3}
"$PY" -c "import numpy" 2>/dev/null || { echo "SKIP: numpy not found (GRAPHTUNE_PYTHON=$PY)"; exit 77; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
G=$TMP/linqs

"$PY" "$ROOT/scripts/linqs_to_text_graph.py" "$ASSETS/graph/cora_linqs" "$G" 2>"$TMP/conv.err"
check "linqs_to_text_graph writes the folder" test -s "$G/features.npy" -a -s "$G/meta.json"
check "the folder: 2708 papers, 5429 citations, 1433-wide 0/1 features equal to cora.npz's, no text" \
  "$PY" - "$G" "$ASSETS/graph/cora_linqs/cora.npz" <<'PYEOF'
import sys, numpy as np
g, z = sys.argv[1], np.load(sys.argv[2])
x = np.load(g + "/features.npy")
assert x.shape == (2708, 1433) and x.dtype == np.float32, (x.shape, x.dtype)
dense = np.zeros(x.shape, np.float32)
for i in range(2708):
    dense[i, z["attr_indices"][z["attr_indptr"][i]:z["attr_indptr"][i + 1]]] = 1
assert (x == dense).all()
rows = [l.rstrip("\n").split("\t") for l in open(g + "/nodes.tsv")][1:]
assert len(rows) == 2708 and all(r[3] == "" and r[4] == "" for r in rows)
assert [int(r[1]) for r in rows] == z["labels"].tolist()
assert len(open(g + "/edges.tsv").read().splitlines()) == 1 + 5429
PYEOF

nc=(--graph "$G" --task node_classification --max-nodes 4 --train-frac 0.4 --val-frac 0.4)
"$GT" data build "${nc[@]}" --split train --max-records 40 --out "$TMP/train.json" 2>/dev/null
"$GT" data build "${nc[@]}" --split test --max-records 12 --out "$TMP/test.json" 2>/dev/null
check "records of the folder: ids coralinqs_*, a prompt without title or text" "$PY" - "$TMP/train.json" <<'PYEOF'
import json, sys
recs = json.load(open(sys.argv[1]))
assert len(recs) == 40 and all(r["id"].startswith("coralinqs_train_") for r in recs)
q = recs[0]["conversations"][0]["value"]
assert "where the 0th node is the target paper.\nQuestion:" in q and "Title:" not in q, q
PYEOF
expect_fail "graph matching needs titles" "graph matching pairs graph tokens with node titles" -- \
  "$GT" data build --graph "$G" --task graph_matching --split train --out "$TMP/gm.json"

GROUND=("$GT" train --config "$ROOT/configs/demo/grounding.toml" --data.graph "$G" --training.steps 20 --training.log_every 10)
"${GROUND[@]}" --data.instructions "$TMP/train.json" --job.out_dir "$TMP/ground" >/dev/null 2>"$TMP/ground.err"
check "grounding in the classes of the 40 training papers alone" grep -q "grounded in the classes of 40 labelled nodes, each on its record.s subgraph" "$TMP/ground.err"
check "grounding reports how many labelled nodes it places at their class" grep -q "nearest class text = label on" "$TMP/ground.err"
check "the grounded encoder takes the 1433-wide features" "$PY" - "$TMP/ground/graph_encoder.safetensors" <<'PYEOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
assert h["W_P.weight"]["shape"] == [128, 1433], h["W_P.weight"]
PYEOF
expect_fail "grounding a graph without texts needs labels" "no node titles or texts to ground the encoder in" -- \
  "${GROUND[@]}" --job.out_dir "$TMP/ground2"
"$GT" data build --graph embedded --task node_classification --split train --max-records 4 --out "$TMP/synth.json" 2>/dev/null
expect_fail "labels of another graph's records" "is of dataset 'synth', the graph is 'coralinqs'" -- \
  "${GROUND[@]}" --data.instructions "$TMP/synth.json" --job.out_dir "$TMP/ground3"

# The graph stages on a tiny LLM: the grounded encoder, and a fresh one of the features' width.
CFG=$ROOT/configs/lm.toml
"$GT" train --config "$CFG" --model.max_seq_len 1024 --training.steps 3 --job.out_dir "$TMP/lm" >/dev/null 2>&1
TASK=("$GT" train --config "$CFG" --training.stage task --model.path "$TMP/lm/model" --data.graph "$G"
      --data.instructions "$TMP/train.json" --data.max_len 1024 --training.steps 3 --training.batch_size 4)
"${TASK[@]}" --model.graph_encoder "$TMP/ground/graph_encoder.safetensors" --job.out_dir "$TMP/s2" >/dev/null 2>"$TMP/s2.err"
check "stage task with the grounded encoder" test -s "$TMP/s2/graph_projector.bin"
[ -s "$TMP/s2/graph_projector.bin" ] || tail -3 "$TMP/s2.err"
"${TASK[@]}" --job.out_dir "$TMP/s2fresh" >/dev/null 2>"$TMP/s2fresh.err"
check "stage task with a fresh encoder of the features' width" test -s "$TMP/s2fresh/graph_encoder.safetensors"
"$GT" eval --config "$CFG" --model.path "$TMP/lm/model" --data.graph "$G" --data.max_len 1024 --eval.max_new_tokens 4 \
  --model.graph_encoder "$TMP/s2fresh/graph_encoder.safetensors" --model.projector "$TMP/s2fresh/graph_projector.bin" \
  --data.instructions "$TMP/test.json" --out "$TMP/ev" >/dev/null 2>"$TMP/ev.err"
check "eval reads the 1433-wide encoder back and answers the 12 test papers" test "$(grep -c '' "$TMP/ev/predictions.jsonl" 2>/dev/null)" = 12
"$GT" eval --config "$CFG" --model.path "$TMP/lm/model" --data.graph "$G" --data.max_len 1024 --eval.max_new_tokens 4 \
  --model.graph_encoder "$TMP/s2fresh/graph_encoder.safetensors" --model.projector "$TMP/s2fresh/graph_projector.bin" \
  --data.instructions "$TMP/test.json" --out "$TMP/ev2" >/dev/null 2>&1
check "the same answers again" cmp -s "$TMP/ev/predictions.jsonl" "$TMP/ev2/predictions.jsonl"

# data convert: Cora-ML as a text-graph folder is the same graph to every reader.
"$GT" data convert --graph "$ASSETS/graph/cora_ml" --out "$TMP/coraml" 2>"$TMP/convert.err"
check "data convert says what it wrote" grep -q "graph cora, 2995 nodes, 8416 edges, 7 classes, 128-d features" "$TMP/convert.err"
for g in "$ASSETS/graph/cora_ml" "$TMP/coraml"; do
  "$GT" data build --graph "$g" --task node_classification --split test --max-records 30 --out "$TMP/$(basename "$g").json" 2>/dev/null
done
check "its records equal the Cora-ML folder's, byte for byte" cmp -s "$TMP/cora_ml.json" "$TMP/coraml.json"
expect_fail "data convert refuses a non-empty folder" "--overwrite" -- \
  "$GT" data convert --graph "$ASSETS/graph/cora_ml" --out "$TMP/coraml"
finish
