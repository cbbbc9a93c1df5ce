#!/usr/bin/env bash
# GraphGPT's two stages through the real CLI: records from `data build`, stage graph_matching on
# an LLM the lm stage wrote, stage task starting from stage 1's projector, GraphGPT's
# graph_projector.bin readable by Python's torch.load; bad input gets one line and exit 2.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CFG=$ROOT/configs/lm.toml
PY=${GRAPHTUNE_PYTHON:-python3}

"$GT" train --config "$CFG" --model.max_seq_len 1024 --training.steps 3 --job.out_dir "$TMP/lm" 2>/dev/null
check "lm stage wrote the LLM" test -s "$TMP/lm/model/model.safetensors"
"$GT" data build --graph embedded --task graph_matching --split train --max-nodes 3 --max-records 24 --out "$TMP/gm.json" 2>/dev/null
"$GT" data build --graph embedded --task node_classification --split train --max-nodes 3 --max-records 24 --out "$TMP/nc.json" 2>/dev/null

STAGE=(--model.path "$TMP/lm/model" --data.max_len 1024 --data.num_workers 2 --training.steps 4 --training.log_every 2
       --training.batch_size 2)
"$GT" train --config "$CFG" "${STAGE[@]}" --training.stage graph_matching --data.instructions "$TMP/gm.json" \
  --job.out_dir "$TMP/s1" >"$TMP/s1.out" 2>"$TMP/s1.err"
check "stage 1 exits 0" test $? -eq 0
check "stage 1 logs steps with the data wait" grep -q 'data wait' "$TMP/s1.err"
for f in graph_projector.bin graph_projector.safetensors graph_tokens.safetensors graph_encoder.safetensors; do
  check "stage 1 wrote $f" test -s "$TMP/s1/$f"
done
# The frozen encoder's dropout ([model].encoder_dropout): it changes the losses, and the same seed
# gives the same losses again.
dropout_run() {  # dropout_run NAME P: 3 logged steps of stage 1 with encoder dropout P
  "$GT" train --config "$CFG" "${STAGE[@]}" --training.stage graph_matching --data.instructions "$TMP/gm.json" \
    --data.num_workers 0 --training.steps 3 --training.log_every 1 --model.encoder_dropout "$2" \
    --job.out_dir "$TMP/$1" >/dev/null 2>"$TMP/$1.err"
}
losses() { "$PY" -c "import json, sys; print(' '.join(repr(json.loads(l)['loss']) for l in open(sys.argv[1])))" "$TMP/$1/train_log.jsonl"; }
dropout_run d0 0 && dropout_run d1 0.1 && dropout_run d1again 0.1
check "stage 1 with encoder dropout 0.1 exits 0 and says so" \
  grep -q 'the frozen graph encoder trains with dropout 0.1, its masks seeded per graph' "$TMP/d1.err"
echo "     (losses: dropout 0: $(losses d0); 0.1: $(losses d1); 0.1 again: $(losses d1again))"
check "encoder dropout 0.1 changes the losses" test "$(losses d0)" != "$(losses d1)"
check "encoder dropout 0.1 gives the same losses for the same seed" test "$(losses d1)" = "$(losses d1again)"
expect_fail "encoder dropout 1.5" "command line --model.encoder_dropout: must be in [0, 1) (0 = no dropout), got 1.5" -- \
  "$GT" train --config "$CFG" "${STAGE[@]}" --training.stage graph_matching --data.instructions "$TMP/gm.json" \
  --model.encoder_dropout 1.5 --job.out_dir "$TMP/x0"

# Length-grouped batches (node classification's records differ in length; stage 1's here are all
# cut at max_len): the lengths are estimated once, and the run says what that cost.
"$GT" train --config "$CFG" "${STAGE[@]}" --training.stage graph_matching --data.instructions "$TMP/nc.json" \
  --data.group_by_length true --training.steps 2 --job.out_dir "$TMP/s1grouped" >/dev/null 2>"$TMP/s1grouped.err"
check "stage 1 with grouped batches exits 0" test $? -eq 0
check "stage 1 with grouped batches says so" \
  grep -q 'batches grouped by length: 24 record lengths estimated in [0-9.]* s' "$TMP/s1grouped.err"
"$GT" train --config "$CFG" "${STAGE[@]}" --training.stage task --data.instructions "$TMP/nc.json" \
  --model.projector "$TMP/s1/graph_projector.bin" --model.graph_encoder "$TMP/s1/graph_encoder.safetensors" \
  --job.out_dir "$TMP/s2" >/dev/null 2>"$TMP/s2.err"
check "stage 2 from stage 1's projector exits 0" test $? -eq 0
check "stage 2 wrote its projector" test -s "$TMP/s2/graph_projector.bin"

# Stage 1's graph_projector.bin through GraphGPT's own stage-2 loading rules (train_graph.py):
# the projector from {key.split('.')[-1]: value} in file order, and model.embed_tokens.weight,
# required as [V, D] or [2, D], giving <g_start>/<g_end> its last two rows.
check "GraphGPT's stage-2 loader takes stage 1's graph_projector.bin as graphtune trained it" "$PY" - "$TMP/s1" <<'PYEOF2'
import sys, torch
from safetensors.torch import load_file
d = sys.argv[1]
sd = torch.load(f"{d}/graph_projector.bin", map_location="cpu", weights_only=True)
proj = load_file(f"{d}/graph_projector.safetensors")
rows = load_file(f"{d}/graph_tokens.safetensors")
projector = torch.nn.Linear(proj["model.graph_projector.weight"].shape[1], proj["model.graph_projector.weight"].shape[0])
projector.load_state_dict({k.split(".")[-1]: v for k, v in sd.items()})  # strict, as GraphGPT loads it
embed = sd["model.embed_tokens.weight"]
D = proj["model.graph_projector.weight"].shape[0]
assert embed.dim() == 2 and embed.shape[1] == D and embed.shape[0] == 2, embed.shape
assert torch.equal(projector.weight.data, proj["model.graph_projector.weight"])
assert torch.equal(projector.bias.data, proj["model.graph_projector.bias"])
assert torch.equal(embed[-2], rows["g_start"]) and torch.equal(embed[-1], rows["g_end"])
assert list(sd)[0] == "model.embed_tokens.weight", list(sd)
print("ok", list(sd), tuple(embed.shape))
PYEOF2

# GraphGPT's own stage-1 output as a starting point: its whole embedding table [V, D], whose last
# two rows are the learned <g_start>/<g_end>, and no graph_tokens.safetensors beside it.
mkdir -p "$TMP/graphgpt_s1"
"$PY" - "$TMP/s1" "$TMP/graphgpt_s1/graph_projector.bin" <<'PYEOF2'
import sys, torch
from safetensors.torch import load_file
proj = load_file(f"{sys.argv[1]}/graph_projector.safetensors")
D = proj["model.graph_projector.weight"].shape[0]
torch.save({"model.embed_tokens.weight": torch.randn(40, D), **proj}, sys.argv[2])
PYEOF2
"$GT" train --config "$CFG" "${STAGE[@]}" --training.stage task --data.instructions "$TMP/nc.json" \
  --model.projector "$TMP/graphgpt_s1/graph_projector.bin" --model.graph_encoder "$TMP/s1/graph_encoder.safetensors" \
  --training.steps 2 --job.out_dir "$TMP/s2_from_graphgpt" >/dev/null 2>"$TMP/s2g.err"
check "stage 2 from GraphGPT's stage-1 projector file (embedding [V, D] in it) exits 0" test $? -eq 0

# The LLM's config.json as GraphGPT's FAQ has users edit Vicuna's: its keys are read past and
# named in one line; the pickled weights (pytorch_model.bin, as Vicuna ships) are read as well.
cp -r "$TMP/lm/model" "$TMP/vicuna_like"
"$PY" - "$TMP/vicuna_like" <<'PYEOF2'
import json, os, sys, torch
from safetensors.torch import load_file
d = sys.argv[1]
c = json.load(open(f"{d}/config.json"))
c.update(graph_hidden_size=128, pretrain_graph_model_path="/home/me/Arxiv-PubMed-GraphCLIP-GT/")
json.dump(c, open(f"{d}/config.json", "w"), indent=2)
torch.save(load_file(f"{d}/model.safetensors"), f"{d}/pytorch_model.bin")
os.remove(f"{d}/model.safetensors")
PYEOF2
"$GT" train --config "$CFG" "${STAGE[@]}" --model.path "$TMP/vicuna_like" --training.stage graph_matching \
  --data.instructions "$TMP/gm.json" --training.steps 2 --job.out_dir "$TMP/s1vicuna" >/dev/null 2>"$TMP/s1vicuna.err"
check "stage 1 on a pickled LLM whose config.json has GraphGPT's keys exits 0" test $? -eq 0
check "  and names the keys in one line" grep -q \
  "config.json: GraphGPT's keys graph_hidden_size, pretrain_graph_model_path are not used" "$TMP/s1vicuna.err"

# Stage 1 in bf16 (configs/graphgpt/*.toml ask for it): frozen LLM and encoder stored in bf16,
# the projector trained from fp32 master weights and written as fp32.
"$GT" train --config "$CFG" "${STAGE[@]}" --training.stage graph_matching --data.instructions "$TMP/gm.json" \
  --model.dtype bf16 --training.steps 2 --job.out_dir "$TMP/s1bf16" >/dev/null 2>"$TMP/s1bf16.err"
check "stage 1 in bf16 exits 0" test $? -eq 0
check "stage 1 in bf16 logs its precision" \
  grep -q 'precision: bf16 autocast, fp32 master weights, frozen weights bf16 ([0-9.]* MB instead of [0-9.]* MB)' "$TMP/s1bf16.err"
check "stage 1 in bf16 writes an fp32 projector" grep -q '"model.graph_projector.weight":{"dtype":"F32"' \
  "$TMP/s1bf16/graph_projector.safetensors"
check "stage 1 in bf16 writes its encoder in fp32" test "$(head -c 4000 "$TMP/s1bf16/graph_encoder.safetensors" |
  grep -ao '"dtype":"[A-Z0-9]*"' | sort -u)" = '"dtype":"F32"'

if "$PY" -c "import torch" 2>/dev/null; then
  "$PY" - "$TMP/s1/graph_projector.bin" "$TMP/lm/model/config.json" <<'PYEOF' >"$TMP/py.txt" 2>&1
import json, sys, torch
d = torch.load(sys.argv[1])  # weights_only=True, the default since PyTorch 2.6
hidden = json.load(open(sys.argv[2]))["hidden_size"]
assert list(d) == ["model.embed_tokens.weight", "model.graph_projector.weight", "model.graph_projector.bias"], list(d)
assert tuple(d["model.embed_tokens.weight"].shape) == (2, hidden), d["model.embed_tokens.weight"].shape
assert tuple(d["model.graph_projector.weight"].shape) == (hidden, 128), d["model.graph_projector.weight"].shape
assert tuple(d["model.graph_projector.bias"].shape) == (hidden,)
print("ok")
PYEOF
  check "graph_projector.bin loads in Python with GraphGPT's keys" grep -qx ok "$TMP/py.txt"
else
  echo "SKIP (part): no Python torch at $PY: the torch.load check did not run"
fi

expect_fail "missing projector" "nope.bin: cannot open" -- "$GT" train --config "$CFG" "${STAGE[@]}" --training.stage task \
  --data.instructions "$TMP/nc.json" --model.projector "$TMP/nope.bin" --job.out_dir "$TMP/x1"
expect_fail "records longer than the LLM's context" "exceeds the context" -- "$GT" train --config "$CFG" \
  --model.path "$TMP/lm/model" --data.max_len 4096 --training.stage task --training.steps 2 \
  --data.instructions "$TMP/nc.json" --job.out_dir "$TMP/x2"
sed 's/"node_list":\[\([0-9]*\),/"node_list":[\1,999999,/' "$TMP/nc.json" >"$TMP/bad.json"
expect_fail "a node beyond the feature table" "999999" -- "$GT" train --config "$CFG" "${STAGE[@]}" --training.stage task \
  --data.instructions "$TMP/bad.json" --job.out_dir "$TMP/x3"
check "failed stages leave no output folder" bash -c "for d in $TMP/x0 $TMP/x1 $TMP/x2 $TMP/x3; do test ! -e \"\$d\" || exit 1; done"
finish
