#!/usr/bin/env bash
# GraphGPT's own files as its users download them (tests/graphgpt_fixtures.py writes each in its
# real format, tiny), run through the CLI with no conversion step: stage 1, stage 2 (from stage
# 1's projector and from GraphGPT's own stage-1 file), evaluation of GraphGPT's eval sets with
# GraphGPT's protocol and class lists, and GraphGPT's released tuned model (a GraphLlama folder).
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${GRAPHTUNE_PYTHON:-python3}
need_assets
if ! "$PY" -c "import torch, transformers, huggingface_hub, torch_geometric, numpy" 2>/dev/null; then
  echo "SKIP: $PY lacks torch, transformers, huggingface_hub, torch_geometric or numpy (scripts/install-deps.sh installs them)"
  exit 77
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
F=$TMP/graphgpt
"$PY" "$ROOT/tests/graphgpt_fixtures.py" "$F" "$ASSETS" >"$TMP/fixtures.txt" 2>&1
check "the fixture generator writes GraphGPT's files" test $? -eq 0 -a -s "$F/GraphGPT-7B-mix-all/pytorch_model.bin.index.json"

# The fixtures are what they claim: transformers loads the Vicuna folder from its .bin shards.
"$PY" -c "
import sys, transformers
m = transformers.LlamaForCausalLM.from_pretrained(sys.argv[1])
assert m.config.rope_scaling['factor'] == 4.0 and m.config.vocab_size == 32000
" "$F/vicuna-7b-v1.5-16k" 2>"$TMP/hf.err"
check "transformers loads the Vicuna-like folder (pytorch_model-*.bin shards, GraphGPT's keys in config.json)" test $? -eq 0

cd "$F" || exit 1
COMMON=(--data.features graph_data_all.pt --model.graph_encoder Arxiv-PubMed-GraphCLIP-GT --data.max_len 1024
        --data.num_workers 1 --training.epochs 0 --training.steps 2 --training.batch_size 2)
"$GT" train -c "$ROOT/configs/graphgpt/stage1.toml" --model.path vicuna-7b-v1.5-16k "${COMMON[@]}" \
  --data.instructions train_instruct_graphmatch.json --job.out_dir s1 >/dev/null 2>"$TMP/s1.err"
check "stage 1 on Vicuna's .bin shards, the CLIP encoder folder, graph_data_all.pt: exit 0" test $? -eq 0 -a -s s1/graph_projector.bin
check "  and names GraphGPT's keys in Vicuna's config.json in one line" \
  grep -q "GraphGPT's keys graph_hidden_size, pretrain_graph_model_path are not used" "$TMP/s1.err"
# Two pipeline stages, each reading only its layers from the pickled shards: the same run.
"$GT" train -c "$ROOT/configs/graphgpt/stage1.toml" --model.path vicuna-7b-v1.5-16k "${COMMON[@]}" --np 2 --pp 2 \
  --data.instructions train_instruct_graphmatch.json --job.out_dir s1pp >/dev/null 2>"$TMP/s1pp.err"
check "stage 1 at --pp 2 on the .bin shards: the loss and projector of one process" "$PY" - s1 s1pp <<'PYEOF'
import json, sys, torch
from safetensors.torch import load_file
one, two = ([json.loads(l) for l in open(d + "/train_log.jsonl")] for d in sys.argv[1:])
assert len(one) == len(two) > 0 and all(abs(a["loss"] - b["loss"]) <= 1e-6 * abs(a["loss"]) for a, b in zip(one, two)), (one, two)
p1, p2 = (load_file(d + "/graph_projector.safetensors") for d in sys.argv[1:])
# bf16 matmuls summed in another order: within 1% of one step of lr 2e-3 (Adam's first step is ~lr).
diff = max((p1[k] - p2[k]).abs().max().item() for k in p1)
assert diff <= 2e-5, f"projectors differ by {diff}"
PYEOF
"$GT" train -c "$ROOT/configs/graphgpt/stage2.toml" --model.path vicuna-7b-v1.5-16k "${COMMON[@]}" \
  --model.projector s1/graph_projector.bin --data.instructions arxiv_pub_node_st_cot_link_mix.json --job.out_dir s2 \
  >/dev/null 2>"$TMP/s2.err"
check "stage 2 from stage 1's projector on the node/cot/link mix: exit 0" test $? -eq 0 -a -s s2/graph_projector.bin
"$GT" train -c "$ROOT/configs/graphgpt/stage2.toml" --model.path vicuna-7b-v1.5-16k "${COMMON[@]}" \
  --model.projector stage_1_projector.bin --data.instructions arxiv_pub_node_st_cot_link_mix.json --job.out_dir s2g \
  >/dev/null 2>"$TMP/s2g.err"
check "stage 2 from GraphGPT's own stage-1 projector ([32003, D] embedding in it): exit 0" test $? -eq 0 -a -s s2g/graph_projector.bin

# Evaluation of GraphGPT's eval sets, GraphGPT's protocol, its class lists.
echo '{"cora": "Cora_id_labels.json"}' >cora_classes.json
EVAL=("$GT" eval -c "$ROOT/configs/graphgpt/stage2.toml" --model.path vicuna-7b-v1.5-16k --model.projector s2/graph_projector.bin
      --model.graph_encoder Arxiv-PubMed-GraphCLIP-GT --data.features graph_data_all.pt --data.max_len 1024)
"${EVAL[@]}" --data.instructions arxiv_test_instruct_std.json --eval.protocol graphgpt --eval.max_new_tokens 6 \
  --eval.classes "$ROOT/configs/graphgpt/classes.json" --out ev_arxiv >/dev/null 2>"$TMP/ev_arxiv.err"
check "eval of arxiv_test_instruct_std.json with --eval.protocol graphgpt: exit 0" test $? -eq 0
check "  scored against arXiv's 40 categories; GraphGPT's result file holds the same rows" "$PY" - ev_arxiv <<'PYEOF'
import json, sys
d = sys.argv[1]
m = json.load(open(d + "/metrics.json"))
nc = m["datasets"]["arxiv"]["node_classification"]
assert len(nc["classes"]) == 40 and nc["n"] == 6 and "top3_containment" in nc, nc
assert m["protocol"] == "graphgpt" and m["template"] == "graphchat_v1" and m["temperature"] == 0.2, m
rows = json.load(open(d + "/graphgpt/arxiv_test_res_0_6.json"))
assert rows == [json.loads(l) for l in open(d + "/predictions.jsonl")] and list(rows[0]) == ["id", "node_idx", "res"]
PYEOF
"${EVAL[@]}" --data.instructions arxiv_test_instruct_cot.json --eval.classes "$ROOT/configs/graphgpt/classes.json" \
  --eval.batch_size 4 --out ev_cot >/dev/null 2>"$TMP/ev_cot.err"
check "eval of the chain-of-thought set: the answer budget covers its long answers" \
  grep -qE "up to [0-9]+ new tokens \(the longest reference answer is [0-9]+ tokens\)" "$TMP/ev_cot.err"
"${EVAL[@]}" --data.instructions cora_test_instruct_std.json --eval.classes cora_classes.json --eval.max_new_tokens 4 \
  --out ev_cora >/dev/null 2>"$TMP/ev_cora.err"
check "eval of cora_test_instruct_std.json against Cora_id_labels.json's 70 labels" "$PY" -c "
import json, sys
nc = json.load(open(sys.argv[1]))['datasets']['cora']['node_classification']
assert len(nc['classes']) == 70 and nc['n'] == 6, nc
" ev_cora/metrics.json
"${EVAL[@]}" --data.instructions pubmed_test_instruct_LP.json --eval.max_new_tokens 4 --out ev_lp >/dev/null 2>"$TMP/ev_lp.err"
check "eval of pubmed_test_instruct_LP.json: link prediction, rows with node_idx_1, node_idx_2, truth" "$PY" -c "
import json, sys
m = json.load(open(sys.argv[1] + '/metrics.json'))
assert m['datasets']['pubmed']['link_prediction']['n'] == 6, m
rows = json.load(open(sys.argv[1] + '/graphgpt/pubmed_test_res_0_6.json'))
assert all(list(r) == ['id', 'node_idx_1', 'node_idx_2', 'truth', 'res'] for r in rows), rows[0]
" ev_lp

# GraphGPT-7B-mix-all: a GraphLlama folder (vocab 32,003, added_tokens.json, the projector in its
# shards). Its own projector is used, the same as the one GraphGPT's extract script takes out.
MIX=("$GT" eval -c "$ROOT/configs/graphgpt/stage2.toml" --model.path GraphGPT-7B-mix-all --model.graph_encoder Arxiv-PubMed-GraphCLIP-GT
     --data.features graph_data_all.pt --data.max_len 1024 --data.instructions arxiv_test_instruct_std.json
     --eval.max_new_tokens 6 --eval.classes "$ROOT/configs/graphgpt/classes.json")
"${MIX[@]}" --model.projector "" --out mx_own >/dev/null 2>"$TMP/mx_own.err"
check "eval of GraphGPT-7B-mix-all with its own projector: exit 0" test $? -eq 0
check "  says it is a GraphLlama whose projector comes from its weights" \
  grep -q "GraphGPT-7B-mix-all/config.json: a GraphLlama (GraphGPT's tuned model): its projector" "$TMP/mx_own.err"
check "  metrics.json names the model as the projector's source" grep -q '"projector": "GraphGPT-7B-mix-all"' mx_own/metrics.json
"${MIX[@]}" --model.projector GraphGPT-7B-mix-all-projector.bin --out mx_extracted >/dev/null 2>&1
"${MIX[@]}" --model.projector s2/graph_projector.bin --out mx_other >/dev/null 2>&1
check "  its answers equal those with extract_graph_projector.py's file, and differ from another projector's" bash -c \
  "cmp -s mx_own/predictions.jsonl mx_extracted/predictions.jsonl && ! cmp -s mx_own/predictions.jsonl mx_other/predictions.jsonl"
"$GT" train -c "$ROOT/configs/graphgpt/stage2.toml" --model.path GraphGPT-7B-mix-all --model.projector "" "${COMMON[@]}" \
  --data.instructions arxiv_pub_node_st_cot_link_mix.json --job.out_dir s2mix >/dev/null 2>"$TMP/s2mix.err"
check "further tuning of GraphGPT-7B-mix-all (stage 2 from its own projector): exit 0" test $? -eq 0 -a -s s2mix/graph_projector.bin

# Bad versions of these files: one line naming the file and what is wrong.
cp -r GraphGPT-7B-mix-all gap
echo '{"<g_patch>": 32000, "<g_start>": 32002, "<g_end>": 32003}' >gap/added_tokens.json
expect_fail "added_tokens.json with a gap in its ids" \
  'gap/added_tokens.json: "<g_start>" has id 32002, but the next id after gap/tokenizer.model' -- \
  "${MIX[@]}" --model.path gap --model.projector "" --out x1
"$PY" - GraphGPT-7B-mix-all wide <<'PYEOF'
import json, os, shutil, sys, torch
src, dst = sys.argv[1], sys.argv[2]
shutil.copytree(src, dst)
index = json.load(open(f"{dst}/pytorch_model.bin.index.json"))
f = f"{dst}/" + index["weight_map"]["model.graph_projector.weight"]
sd = torch.load(f, weights_only=True)
sd["model.graph_projector.weight"] = torch.zeros(sd["model.graph_projector.weight"].shape[0], 24, dtype=torch.float16)
torch.save(sd, f)
PYEOF
expect_fail "a GraphLlama whose projector does not fit the encoder" "wide (GraphLlama's model.graph_projector.*)" -- \
  "${MIX[@]}" --model.path wide --model.projector "" --out x2
check "failed runs leave no output folder" bash -c "! ls -d x1 x2 2>/dev/null"
finish
