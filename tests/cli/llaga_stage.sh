#!/usr/bin/env bash
# LLaGA's recipe in graphtune's runner: records of LLaGA's neighbour trees (data build --template
# llaga), the llaga encoder (no GNN: each slot's features beside its place in the tree), stage 2
# training the projector and LoRA from a fresh projector. Parallel equals serial: dp 2, pp 2
# (1F1B) and tp 2 equal one process in their losses, gradient norms and trained tensors (rtol
# 1e-5). The encoder file it writes reads back as llaga for eval, and the same run resumes.
# Then the refusals, each one line and exit 2: GraphGPT's subgraphs under a llaga encoder (naming
# the record), a tree of another shape, grounding a llaga encoder, training its (absent) weights.
source "$(dirname "$0")/lib.sh"
need_mpirun 300
train_fixture 4

TREE=(--graph embedded --task node_classification --template llaga --hops 2 --fanout 3)
"$GT" data build "${TREE[@]}" --split train --max-records 24 --out "$TMP/tree.json" 2>/dev/null
"$GT" data build "${TREE[@]}" --split test --max-records 6 --out "$TMP/tree_test.json" 2>/dev/null
"$GT" data build --graph embedded --task node_classification --split train --max-nodes 3 --max-records 8 \
  --out "$TMP/nc.json" 2>/dev/null
check "the tree records exist" test -s "$TMP/tree.json" -a -s "$TMP/tree_test.json"

LLAGA=(--model.path "$TMP/base/model" --training.stage task --data.instructions "$TMP/tree.json"
       --model.graph_encoder_type llaga --model.llaga_hops 2 --model.llaga_fanout 3
       --training.trainable projector+lora --lora.rank 4
       --data.max_len 1024 --data.num_workers 0 --training.steps 3 --training.batch_size 8 --training.log_every 1
       --training.threads 1 --optimizer.lr 1e-2 --training.max_grad_norm 2e-5)
run ll_ref 1 "${LLAGA[@]}"
check "stage 2 with the llaga encoder, one process" test -s "$TMP/ll_ref/graph_projector.bin"
check "its projector reads 13 slots beside the features (n + 13 wide)" "$PY" -c "
import sys
from safetensors.numpy import load_file
w = load_file('$TMP/ll_ref/graph_projector.safetensors')['model.graph_projector.weight']
e = load_file('$TMP/ll_ref/graph_encoder.safetensors')['structure_embedding']
sys.exit(0 if e.shape == (13, 13) and w.shape[1] > 13 else 1)"
against_serial ll "graph_projector.safetensors adapter/adapter_model.safetensors" LLAGA \
  "dp2 2 --parallelism.dp 2" \
  "pp2_1f1b 2 --parallelism.pp 2 --parallelism.schedule 1f1b --parallelism.microbatches 4" \
  "tp2 2 --parallelism.tp 2"

# eval reads the encoder file the stage wrote (llaga by its metadata) with the projector and adapter.
evals_every_record ll_ref "$TMP/tree_test.json" 6

# Resumed from its step-2 checkpoint, the run ends where the whole run ended, to the bit.
resumes_bit_exact ll "graph_projector.safetensors adapter/adapter_model.safetensors" LLAGA

expect_fail "GraphGPT's subgraphs under a llaga encoder" 'graph.node_list has 3 nodes; the llaga encoder reads' -- \
  "$W" train -c "$CFG" "${LLAGA[@]}" --data.instructions "$TMP/nc.json" --job.out_dir "$TMP/x1"
expect_fail "a tree of another fanout" '13 nodes; the llaga encoder reads LLaGA'"'"'s trees of 21 slots (hops 2, fanout 4)' -- \
  "$W" train -c "$CFG" "${LLAGA[@]}" --model.llaga_fanout 4 --job.out_dir "$TMP/x2"
expect_fail "the llaga encoder has no weights to train" "[training].trainable" -- \
  "$W" train -c "$CFG" "${LLAGA[@]}" --training.trainable graphgpt+encoder --job.out_dir "$TMP/x3"
expect_fail "nor to ground" "the llaga encoder has no weights to ground" -- \
  "$W" train -c "$CFG" --training.stage grounding --data.graph embedded --model.graph_encoder_type llaga \
  --job.out_dir "$TMP/x4"
expect_fail "a tree past 4096 slots" "llaga_fanout: LLaGA's tree of 3 hops and fanout 20 has more than 4096 slots" -- \
  "$W" train -c "$CFG" "${LLAGA[@]}" --model.llaga_hops 3 --model.llaga_fanout 20 --job.out_dir "$TMP/x5"
finish
