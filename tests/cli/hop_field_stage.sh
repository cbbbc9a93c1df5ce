#!/usr/bin/env bash
# LLaGA's hop-field overview in graphtune's runner: records of the centre once a hop (data build
# --template hop_field), the hop_field encoder (no GNN: token k is the centre's features after k
# propagation steps over the whole graph, beside a one-hot of k), stage 2 training the projector
# and LoRA from a fresh projector, the features under dropout. Parallel equals serial: dp 2, pp 2
# (1F1B) and tp 2 equal one process in their losses, gradient norms and trained tensors (rtol
# 1e-5). The encoder file it writes reads back as hop_field for eval, and the same run resumes
# bit-exact. Then the refusals, each one line and exit 2: GraphGPT's subgraphs under a hop_field
# encoder (naming the record), a field of other hops, a features file (no citations to propagate
# over), grounding it, training its (absent) weights, records of another task. Its rows "l1" (each
# node's features over their L1 norm) kept in its file. The per_hop projector (each hop its own
# columns), under every layout and a resume. And the hop field over a base encoder, which it
# carries in its file.
source "$(dirname "$0")/lib.sh"
need_mpirun 300
train_fixture 4

FIELD=(--graph embedded --task node_classification --template hop_field --hops 3)
"$GT" data build "${FIELD[@]}" --split train --max-records 24 --out "$TMP/field.json" 2>"$TMP/build.err"
"$GT" data build "${FIELD[@]}" --split test --max-records 6 --out "$TMP/field_test.json" 2>/dev/null
"$GT" data build --graph embedded --task node_classification --split train --max-nodes 3 --max-records 8 \
  --out "$TMP/nc.json" 2>/dev/null
check "the hop-field records exist" test -s "$TMP/field.json" -a -s "$TMP/field_test.json"
check "data build says their shape" grep -q "hop fields of 3 hops (4 graph tokens each)" "$TMP/build.err"
check "each record's graph is its centre 4 times, no edges" "$PY" -c "
import json, sys
for r in json.load(open('$TMP/field.json')):
    g = r['graph']
    assert g['node_list'] == [g['node_idx']] * 4 and g['edge_index'] == [[], []], r['id']
"

HOPF=(--model.path "$TMP/base/model" --training.stage task --data.instructions "$TMP/field.json" --data.graph embedded
      --model.graph_encoder_type hop_field --model.hop_field_hops 3 --model.encoder_dropout 0.3
      --training.trainable projector+lora --lora.rank 4
      --data.max_len 1024 --data.num_workers 0 --training.steps 3 --training.batch_size 8 --training.log_every 1
      --training.threads 1 --optimizer.lr 1e-2 --training.max_grad_norm 2e-5)
run hf_ref 1 "${HOPF[@]}"
check "stage 2 with the hop_field encoder, one process" test -s "$TMP/hf_ref/graph_projector.bin"
check "its projector reads one hop of the features beside 4 hop indicators (128 + 4 wide)" "$PY" -c "
import sys
from safetensors.numpy import load_file
w = load_file('$TMP/hf_ref/graph_projector.safetensors')['model.graph_projector.weight']
e = load_file('$TMP/hf_ref/graph_encoder.safetensors')['hop_embedding']
sys.exit(0 if e.shape == (4, 4) and w.shape[1] == 132 else 1)"
against_serial hf "graph_projector.safetensors adapter/adapter_model.safetensors" HOPF \
  "dp2 2 --parallelism.dp 2" \
  "pp2_1f1b 2 --parallelism.pp 2 --parallelism.schedule 1f1b --parallelism.microbatches 4" \
  "tp2 2 --parallelism.tp 2"

# eval reads the encoder file the stage wrote (hop_field by its metadata) with the projector and adapter.
evals_every_record hf_ref "$TMP/field_test.json" 6 --data.graph embedded

# Resumed from its step-2 checkpoint, the run ends where the whole run ended, to the bit.
resumes_bit_exact hf "graph_projector.safetensors adapter/adapter_model.safetensors" HOPF

# Rows "l1": each node's features over the sum of their absolute values before the hops. The
# encoder file says so, eval reads it back, and the run learns from other tokens than hf_ref's.
run hl_ref 1 "${HOPF[@]}" --model.hop_field_rows l1
check "rows l1: in the encoder file's metadata, and another projector trained than from rows as they are" "$PY" -c "
import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file
assert safe_open('$TMP/hl_ref/graph_encoder.safetensors', 'np').metadata()['hop_field_rows'] == 'l1'
assert safe_open('$TMP/hf_ref/graph_encoder.safetensors', 'np').metadata()['hop_field_rows'] == 'as_is'
w = lambda run: load_file(run + '/graph_projector.safetensors')['model.graph_projector.weight']
d = np.abs(w('$TMP/hl_ref') - w('$TMP/hf_ref')).max()
assert d > 1e-4, d"
evals_every_record hl_ref "$TMP/field_test.json" 6 --data.graph embedded
expect_fail "a resume with other rows" 'saved with model.hop_field_rows = "as_is", this job has "l1"' -- \
  "$W" train -c "$CFG" "${HOPF[@]}" --model.hop_field_rows l1 --checkpoint.every 2 --resume latest \
  --job.out_dir "$TMP/hf_resumed"
expect_fail "rows that are no choice" "hop_field_rows: 'l3' is not one of: as_is, l1, l2" -- \
  "$W" train -c "$CFG" "${HOPF[@]}" --model.hop_field_rows l3 --job.out_dir "$TMP/x10"
expect_fail "rows for an encoder that is not a hop field" 'hop_field_rows: shapes a fresh hop_field encoder; graph_encoder_type is "gcn"' -- \
  "$W" train -c "$CFG" "${HOPF[@]}" --model.graph_encoder_type gcn --model.hop_field_rows l1 --job.out_dir "$TMP/x11"

# The per_hop projector: hop k's token holds its features in block k of a 4 x 128 wide row, so the
# projector reads each hop with its own columns. Its file says so, every layout equals one
# process, eval reads it back, a resume must keep it.
HOPP=("${HOPF[@]}" --model.hop_field_projector per_hop)
run hp_ref 1 "${HOPP[@]}"
check "per_hop: 4 x 128 + 4 wide tokens, in the encoder file's metadata, each hop's columns trained apart" "$PY" -c "
import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file
assert safe_open('$TMP/hp_ref/graph_encoder.safetensors', 'np').metadata()['hop_field_projector'] == 'per_hop'
assert safe_open('$TMP/hf_ref/graph_encoder.safetensors', 'np').metadata()['hop_field_projector'] == 'shared'
w = load_file('$TMP/hp_ref/graph_projector.safetensors')['model.graph_projector.weight']
assert w.shape[1] == 4 * 128 + 4, w.shape
blocks = [w[:, k * 128:(k + 1) * 128] for k in range(4)]
d = min(np.abs(blocks[i] - blocks[j]).max() for i in range(4) for j in range(i + 1, 4))
assert d > 1e-4, d"
against_serial hp "graph_projector.safetensors adapter/adapter_model.safetensors" HOPP \
  "dp2 2 --parallelism.dp 2" \
  "pp2_1f1b 2 --parallelism.pp 2 --parallelism.schedule 1f1b --parallelism.microbatches 4" \
  "tp2 2 --parallelism.tp 2"
evals_every_record hp_ref "$TMP/field_test.json" 6 --data.graph embedded
resumes_bit_exact hp "graph_projector.safetensors adapter/adapter_model.safetensors" HOPP
expect_fail "a resume with the other projector" 'saved with model.hop_field_projector = "shared", this job has "per_hop"' -- \
  "$W" train -c "$CFG" "${HOPP[@]}" --checkpoint.every 2 --resume latest --job.out_dir "$TMP/hf_resumed"
expect_fail "a projector that is no choice" "hop_field_projector: 'diagonal' is not one of: shared, per_hop" -- \
  "$W" train -c "$CFG" "${HOPF[@]}" --model.hop_field_projector diagonal --job.out_dir "$TMP/x12"
expect_fail "per_hop for an encoder that is not a hop field" 'hop_field_projector: shapes a fresh hop_field encoder; graph_encoder_type is "gcn"' -- \
  "$W" train -c "$CFG" "${HOPF[@]}" --model.graph_encoder_type gcn --model.hop_field_projector per_hop --job.out_dir "$TMP/x13"

# Over a base encoder (GraphGPT's GCN, 8 outputs, from a file): each hop is 128 + 8 wide, the
# base travels inside the stage's encoder file, dp 2 equals one process, eval reads it back.
"$PY" -c "
import numpy as np
from safetensors.numpy import save_file
r = np.random.default_rng(0)
save_file({'vars.0': r.normal(0, 0.1, (16, 128)).astype(np.float32), 'vars.1': np.zeros(16, np.float32),
           'vars.2': r.normal(0, 0.3, (8, 16)).astype(np.float32), 'vars.3': np.zeros(8, np.float32)}, '$TMP/base.safetensors')
save_file({'vars.0': np.zeros((16, 64), np.float32), 'vars.1': np.zeros(16, np.float32),
           'vars.2': np.zeros((8, 16), np.float32), 'vars.3': np.zeros(8, np.float32)}, '$TMP/base64.safetensors')"
HOPB=("${HOPF[@]}" --model.hop_field_base "$TMP/base.safetensors")
run hb_ref 1 "${HOPB[@]}"
check "the hop field over a base: 128 + 8 + 4 wide tokens, the base's tensors in the file" "$PY" -c "
import sys
import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file
w = load_file('$TMP/hb_ref/graph_projector.safetensors')['model.graph_projector.weight']
e, b = load_file('$TMP/hb_ref/graph_encoder.safetensors'), load_file('$TMP/base.safetensors')
meta = safe_open('$TMP/hb_ref/graph_encoder.safetensors', 'np').metadata()
assert w.shape[1] == 140 and meta['hop_field_base'] == 'gcn', (w.shape, meta)
assert all(np.array_equal(e['base.' + k], b[k]) for k in b), sorted(e)"
against_serial hb "graph_projector.safetensors adapter/adapter_model.safetensors" HOPB "dp2 2 --parallelism.dp 2"
evals_every_record hb_ref "$TMP/field_test.json" 6 --data.graph embedded
expect_fail "a base that reads other features" "hop_field_base: $TMP/base64.safetensors reads 64-wide node features, the graph's are 128 wide" -- \
  "$W" train -c "$CFG" "${HOPF[@]}" --model.hop_field_base "$TMP/base64.safetensors" --job.out_dir "$TMP/x8"
expect_fail "a base for an encoder that is not a hop field" "hop_field_base: is the base of a fresh hop_field encoder; graph_encoder_type is \"gcn\"" -- \
  "$W" train -c "$CFG" "${HOPF[@]}" --model.graph_encoder_type gcn --model.hop_field_base "$TMP/base.safetensors" --job.out_dir "$TMP/x9"
expect_fail "a resume with other hops" 'saved with model.hop_field_hops = "3"' -- \
  "$W" train -c "$CFG" "${HOPF[@]}" --model.hop_field_hops 2 --checkpoint.every 2 --resume latest \
  --job.out_dir "$TMP/hf_resumed"

expect_fail "GraphGPT's subgraphs under a hop_field encoder" 'graph.node_list has 3 nodes; the hop_field encoder reads its centre once a hop, 4 times (hops 3)' -- \
  "$W" train -c "$CFG" "${HOPF[@]}" --data.instructions "$TMP/nc.json" --job.out_dir "$TMP/x1"
expect_fail "a field of other hops" '4 nodes; the hop_field encoder reads its centre once a hop, 3 times (hops 2): build the records with graphtune data build --template hop_field --hops 2' -- \
  "$W" train -c "$CFG" "${HOPF[@]}" --model.hop_field_hops 2 --job.out_dir "$TMP/x2"
expect_fail "the hop_field encoder has no weights to train" "[training].trainable" -- \
  "$W" train -c "$CFG" "${HOPF[@]}" --training.trainable graphgpt+encoder --job.out_dir "$TMP/x3"
expect_fail "nor to ground" "the hop_field encoder has no weights to ground" -- \
  "$W" train -c "$CFG" --training.stage grounding --data.graph embedded --model.graph_encoder_type hop_field \
  --job.out_dir "$TMP/x4"
expect_fail "more hops than 32" "hop_field_hops: must be at most 32" -- \
  "$W" train -c "$CFG" "${HOPF[@]}" --model.hop_field_hops 40 --job.out_dir "$TMP/x5"
"$PY" -c "
import numpy as np
from safetensors.numpy import save_file
save_file({'synth.x': np.zeros((5000, 128), np.float32)}, '$TMP/features.safetensors')"
expect_fail "a features file, which has no citations" "[data].features: not supported yet: the hop_field encoder propagates" -- \
  "$W" train -c "$CFG" "${HOPF[@]}" --data.features "$TMP/features.safetensors" --job.out_dir "$TMP/x7"
expect_fail "link prediction records" "not supported yet: --template hop_field builds node_classification records" -- \
  "$GT" data build --graph embedded --task link_prediction --template hop_field --out "$TMP/x6.json"
finish
