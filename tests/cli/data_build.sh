#!/usr/bin/env bash
# graphtune data build: GraphGPT instruction records from the embedded graph (and Cora-ML when
# the shared assets are there): valid JSON of the right shape, deterministic bytes, one-line
# errors with exit code 2 and nothing written for bad input.
source "$(dirname "$0")/lib.sh"

PY=${GRAPHTUNE_PYTHON:-python3}
"$PY" -c "import json" 2>/dev/null || PY=python3

one_line_mentioning() {  # one_line_mentioning FILE TEXT
  [ "$(grep -c '' "$1")" -eq 1 ] && grep -qF -- "$2" "$1"
}
differ() { ! cmp -s "$1" "$2"; }
schema_ok() {  # schema_ok FILE TASK SPLIT: every record has GraphGPT's keys, in order
  "$PY" - "$@" <<'PYEOF'
import json, sys
path, task, split = sys.argv[1:4]
recs = json.load(open(path))
assert isinstance(recs, list) and recs, "empty"
lp = task == "link_prediction"
sfx = ["_1", "_2"] if lp else [""]
yes = 0
for r in recs:
    assert list(r) == ["id", "graph", "conversations"], list(r)
    assert r["id"].startswith("synth_" + split + "_") or r["id"].startswith("cora_" + split + "_"), r["id"]
    assert r["id"].endswith("_LP") == lp, r["id"]
    assert list(r["graph"]) == [k + s for s in sfx for k in ("node_idx", "edge_index", "node_list")], list(r["graph"])
    for s in sfx:
        nl, ei = r["graph"]["node_list" + s], r["graph"]["edge_index" + s]
        assert nl[0] == r["graph"]["node_idx" + s] and len(set(nl)) == len(nl)
        assert len(ei) == 2 and len(ei[0]) == len(ei[1])
        assert all(0 <= x < len(nl) for x in ei[0] + ei[1])
    c = r["conversations"]
    assert [t["from"] for t in c] == ["human", "gpt"] and all(list(t) == ["from", "value"] for t in c)
    assert c[0]["value"].count("<graph>") == (2 if lp else 1)
    yes += c[1]["value"] == "yes"
if lp:
    assert 2 * yes == len(recs), (yes, len(recs))
PYEOF
}

for task in graph_matching node_classification link_prediction; do
  "$GT" data build --graph embedded --task $task --max-records 40 --out "$TMP/$task.json" 2>"$TMP/log"
  check "$task exits 0" [ $? -eq 0 ]
  check "$task summary is one line" one_line_mentioning "$TMP/log" "records"
  check "$task schema (train)" schema_ok "$TMP/$task.json" $task train
  "$GT" data build --graph embedded --task $task --split test --max-records 40 --out "$TMP/${task}_test.json" 2>/dev/null
  check "$task schema (test)" schema_ok "$TMP/${task}_test.json" $task test
  "$GT" data build --graph embedded --task $task --max-records 40 --out "$TMP/${task}_again.json" 2>/dev/null
  check "$task same seed, identical bytes" cmp -s "$TMP/$task.json" "$TMP/${task}_again.json"
  "$GT" data build --graph embedded --task $task --max-records 40 --seed 9 --out "$TMP/${task}_other.json" 2>/dev/null
  check "$task other seed, other bytes" differ "$TMP/$task.json" "$TMP/${task}_other.json"
done

# A graphtune text-graph folder works as --graph, and --max-nodes caps the subgraphs.
"$GT" data synth --out "$TMP/g" --nodes 300 --seed 2 2>/dev/null
"$GT" data build --graph "$TMP/g" --task graph_matching --max-nodes 6 --out "$TMP/gm_small.json" 2>/dev/null
check "text-graph folder as --graph" schema_ok "$TMP/gm_small.json" graph_matching train
check "--max-nodes caps node_list" "$PY" -c "
import json, sys
assert max(len(r['graph']['node_list']) for r in json.load(open(sys.argv[1]))) <= 6" "$TMP/gm_small.json"

# --template llaga: LLaGA's fixed-shape trees (hops 2, fanout 3: 13 slots) in GraphGPT's format.
"$GT" data build --graph embedded --task node_classification --template llaga --hops 2 --fanout 3 --max-records 40 \
  --out "$TMP/llaga.json" 2>"$TMP/log"
check "llaga exits 0" [ $? -eq 0 ]
check "llaga summary is one line" one_line_mentioning "$TMP/log" "13-slot llaga trees"
check "llaga trees: slot i under (i - 1) / 3, both ways, sorted; a pad holds the centre, no edge" "$PY" -c "
import json, sys
recs = json.load(open(sys.argv[1]))
assert len(recs) == 40
for r in recs:
    g = r['graph']
    nl, ei = g['node_list'], g['edge_index']
    assert len(nl) == 13 and nl[0] == g['node_idx'], r['id']
    edges = list(zip(ei[0], ei[1]))
    assert edges == sorted(edges), r['id']
    real = [0] + sorted(c for p, c in edges if c > p)
    assert sorted(edges) == sorted([((c - 1) // 3, c) for c in real[1:]] + [(c, (c - 1) // 3) for c in real[1:]]), r['id']
    assert all(nl[i] == nl[0] for i in range(13) if i not in real), r['id']
" "$TMP/llaga.json"
"$GT" data build --graph embedded --task node_classification --template llaga --hops 2 --fanout 3 --max-records 40 \
  --out "$TMP/llaga_again.json" 2>/dev/null
check "llaga same seed, identical bytes" cmp -s "$TMP/llaga.json" "$TMP/llaga_again.json"
"$GT" data build --graph embedded --task node_classification --template llaga --hops 2 --fanout 3 --max-records 40 \
  --seed 9 --out "$TMP/llaga_other.json" 2>/dev/null
check "llaga other seed, other bytes" differ "$TMP/llaga.json" "$TMP/llaga_other.json"

# Bad input: one line naming the flag, exit code 2, nothing written.
B="$GT data build --graph embedded --task node_classification"
expect_fail "missing graph folder" "--graph" -- $GT data build --graph "$TMP/nope" --task graph_matching --out "$TMP/bad.json"
expect_fail "unknown task" "--task" -- $GT data build --graph embedded --task captioning --out "$TMP/bad.json"
expect_fail "unknown split" "--split" -- $B --split dev --out "$TMP/bad.json"
expect_fail "train fraction above 1" "--train-frac" -- $B --train-frac 1.5 --out "$TMP/bad.json"
expect_fail "negative val fraction" "--val-frac" -- $B --val-frac -0.1 --out "$TMP/bad.json"
expect_fail "fractions add up over 1" "more than 1" -- $B --train-frac 0.7 --val-frac 0.5 --out "$TMP/bad.json"
expect_fail "edge fraction above 1" "--edge-test-frac" -- $B --edge-test-frac 1.2 --out "$TMP/bad.json"
expect_fail "empty test split" "--split" -- $B --train-frac 1 --val-frac 0 --split test --out "$TMP/bad.json"
expect_fail "llaga for link prediction" "--template: not supported yet" -- \
  $GT data build --graph embedded --task link_prediction --template llaga --out "$TMP/bad.json"
expect_fail "llaga with --max-nodes" "--max-nodes" -- $B --template llaga --max-nodes 24 --out "$TMP/bad.json"
expect_fail "unknown template" "--template" -- $B --template graphsage --out "$TMP/bad.json"
expect_fail "llaga tree past 4096 slots" "--fanout" -- $B --template llaga --hops 3 --fanout 20 --out "$TMP/bad.json"
check "nothing written for bad input" [ ! -e "$TMP/bad.json" ]

sha_before=$(sha256sum "$TMP/graph_matching.json")
expect_fail "existing --out" "--overwrite" -- "$GT" data build --graph embedded --task graph_matching --seed 9 --out "$TMP/graph_matching.json"
check "refused file untouched" [ "$(sha256sum "$TMP/graph_matching.json")" = "$sha_before" ]
"$GT" data build --graph embedded --task graph_matching --max-records 40 --seed 9 --out "$TMP/graph_matching.json" --overwrite 2>/dev/null
check "--overwrite replaces it" cmp -s "$TMP/graph_matching.json" "$TMP/graph_matching_other.json"
check "no temporary files left" [ -z "$(ls "$TMP" | grep -E '\.tmp')" ]

CORA="$ASSETS/graph/cora_ml"
if [ -d "$CORA" ]; then
  for task in graph_matching node_classification link_prediction; do
    "$GT" data build --graph "$CORA" --task $task --split test --out "$TMP/cora_$task.json" 2>"$TMP/log"
    check "cora $task: $(cat "$TMP/log")" schema_ok "$TMP/cora_$task.json" $task test
  done
else
  echo "skip cora_ml checks: $CORA not found"
fi

finish
