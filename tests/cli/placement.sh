#!/usr/bin/env bash
# Device placement without a GPU: a GraphGPT stage-1 job (3 steps), an eval batch and a
# generation run on a fake accelerator (tests/fake_device.hpp: not the CPU, but the CPU's
# kernels), where any CPU tensor beside the device's is an error, as it is on a GPU. They must
# run there as on the CPU: the same answers and tokens, the same weights and loss to float
# rounding (the fake device reaches libtorch's kernels through their generic paths). A CPU
# tensor planted in each of the three must be caught, in that part.
source "$(dirname "$0")/lib.sh"
need_assets
DRIVER=${GRAPHTUNE_PLACEMENT_DRIVER:?set by ctest}
PY=${GRAPHTUNE_PYTHON:-python3}
"$PY" -c "import safetensors, torch" 2>/dev/null || { echo "SKIP: $PY lacks safetensors/torch"; exit 77; }
export OMP_NUM_THREADS=1

"$GT" convert --model "$ASSETS/llm/stories260K.bin" --out "$TMP/hf" 2>/dev/null
"$GT" data build --graph embedded --task graph_matching --split train --max-nodes 4 --max-records 8 \
  --out "$TMP/gm.json" 2>/dev/null
# stories260K's context is 512 positions: the question's first sentence and a short answer.
"$PY" - "$TMP/gm.json" <<'PYEOF'
import json, sys
records = json.load(open(sys.argv[1]))
for r in records:
    human, gpt = r["conversations"]
    human["value"] = human["value"][:human["value"].index(".", human["value"].index("<graph>")) + 1]
    gpt["value"] = gpt["value"][:300]
json.dump(records, open(sys.argv[1], "w"))
PYEOF
cat >"$TMP/job.toml" <<EOF
[job]
name = "placement"
out_dir = "$TMP/unused"
[model]
path = "$TMP/hf"
tokenizer = "$ASSETS/llm/tok512.bin"
dtype = "fp32"
[data]
instructions = "$TMP/gm.json"
graph = "embedded"
max_len = 512
num_workers = 1
[training]
stage = "graph_matching"
steps = 3
batch_size = 2
seed = 7
EOF

"$DRIVER" "$TMP/job.toml" "$TMP/cpu" cpu 2>"$TMP/cpu.err"
check "the job, an eval batch and a generation on the CPU" grep -q "generation on cpu done" "$TMP/cpu.err"
"$DRIVER" "$TMP/job.toml" "$TMP/fake" fakegpu 2>"$TMP/fake.err"
check "the same on the fake device, every operator checked" \
  grep -qE "generation on fakegpu done; [0-9]{4,} operators ran on fakegpu" "$TMP/fake.err"
grep -E "^placement|Expected|got a cpu" "$TMP/fake.err" | tail -3 | sed 's/^/     /'
check "eval answers: the fake device's are the CPU's" cmp -s "$TMP/cpu/answers.txt" "$TMP/fake/answers.txt"
check "generated tokens: the fake device's are the CPU's" cmp -s "$TMP/cpu/generated.txt" "$TMP/fake/generated.txt"
check "projector, <g_start>/<g_end> rows and loss: within 1e-5 of the CPU's" "$PY" - "$TMP/cpu/train" "$TMP/fake/train" <<'PYEOF'
import json, sys
from safetensors.torch import load_file
a, b = sys.argv[1], sys.argv[2]
worst = 0.0
for f in ("graph_projector.safetensors", "graph_tokens.safetensors"):
    x, y = load_file(f"{a}/{f}"), load_file(f"{b}/{f}")
    assert x.keys() == y.keys(), (x.keys(), y.keys())
    for k in x:
        worst = max(worst, (x[k] - y[k]).abs().max().item())
losses = [[json.loads(l)["loss"] for l in open(f"{d}/train_log.jsonl")] for d in (a, b)]
assert len(losses[0]) == len(losses[1]) > 0, losses
gap = max(abs(p - q) / abs(p) for p, q in zip(*losses))
print(f"     weights differ by at most {worst:.2e}, losses by {gap:.2e} (relative)")
assert worst < 1e-5 and gap < 1e-5, (worst, gap)
PYEOF

# The options that add tensors of their own to a step.
for opt in "training.trainable projector+lora" "model.encoder_dropout 0.1" "training.grad_accum_steps 2" \
  "training.activation_checkpointing true" "training.stage task"; do
  set -- $opt
  "$DRIVER" "$TMP/job.toml" "$TMP/opt" fakegpu "--$1" "$2" 2>"$TMP/opt.err"
  check "fake device with --$1 $2" grep -q "generation on fakegpu done" "$TMP/opt.err"
  rm -rf "$TMP/opt"
done

# A planted CPU tensor: caught in the part it was planted in, with one line naming the cpu tensor.
caught='(placement: aten::[a-z_]+ got a cpu tensor|(key|value|query)\.device: cpu|devices, fakegpu:0 and cpu)'
for part in step eval generate; do
  "$DRIVER" "$TMP/job.toml" "$TMP/plant-$part" fakegpu --plant "$part" 2>"$TMP/plant.err"
  rc=$?
  case $part in
    step) before="placement: training" ;;
    eval) before="placement: eval batch" ;;
    generate) before="placement: generation" ;;
  esac
  check "a cpu tensor planted in the $part: exit 1, caught there" \
    test "$rc" -eq 1 -a "$(grep -cE "$caught" "$TMP/plant.err")" -eq 1 -a "$(grep -c "^$before" "$TMP/plant.err")" -eq 0
  grep -E "planted|$caught" "$TMP/plant.err" | sed 's/^/     /'
done
finish
