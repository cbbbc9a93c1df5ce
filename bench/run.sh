#!/usr/bin/env bash
# Every benchmark of BENCHMARKS.md in one run, so its rows compare (this machine is shared and
# noisy: read the ratios, each measured in this run, not the absolute numbers):
#   1. the machine's fp32 matmul peak (bench/matmul_peak), for MFU;
#   2. the same GraphGPT training step in graphtune and in the PyTorch reference, one process
#      and two (bench/reference_speed.sh), and graphtune's MFU;
#   3. that job under every parallel layout: step time, measured bubble next to the simulator's,
#      peak RSS and the tensors a step holds per rank (bench/parallel_layouts.sh);
#   4. checkpoint save/load against dd (bench/checkpoint_io.sh);
#   5. greedy generation with and without the KV cache (bench/generate_speed.sh);
#   6. evaluation under each layout: records/s, peak RSS per rank, the pipeline's idle time next
#      to its schedule's (bench/eval_layouts.sh).
# Usage: bench/run.sh   (after scripts/build.sh; about 25 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${GRAPHTUNE_BUILD:-build}
export GRAPHTUNE_WORKER=${GRAPHTUNE_WORKER:-$BUILD/worker/graphtune-worker}
export GRAPHTUNE_BIN=${GRAPHTUNE_BIN:-$BUILD/launcher/graphtune}
FX=$(mktemp -d)
trap 'rm -rf "$FX"' EXIT
section() { printf '\n== %s\n' "$*"; }

section "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$BUILD/tests/matmul_peak" --threads 1,2 | tee "$FX/peak.txt" | grep peak_gflops
peak2=$(sed -n 's/^peak_gflops 2 //p' "$FX/peak.txt")

section "training step: graphtune against the PyTorch reference (bench/reference_speed.sh)"
BATCH=8 FIXTURE_DIR=$FX/ref bench/reference_speed.sh 6 | tee "$FX/ref.txt"
# MFU of graphtune's one-process row: a frozen LLM still carries the gradient back through every
# layer to the graph tokens, so a step costs its forward (2 x parameters x tokens) and the
# backward to its inputs (as much again), without the weight gradients: 4 x N x tokens (N: the
# decoder layers' parameters; attention's own FLOPs are left out, so this is a lower bound).
"${GRAPHTUNE_PYTHON:-$HOME/.cache/graphtune/venv/bin/python}" - "$FX/ref/llm" "$FX/ref.txt" "$peak2" <<'PY'
import json, re, sys
cfg = json.load(open(sys.argv[1] + "/config.json"))
h, f, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
kv = h // cfg["num_attention_heads"] * cfg["num_key_value_heads"]
n = L * (2 * h * h + 2 * h * kv + 3 * h * f)
rate = float(re.search(r"^graphtune +1 x 2 +([0-9.]+)", open(sys.argv[2]).read(), re.M).group(1))
peak = float(sys.argv[3])
mfu = 4 * n * rate / 1e9 / peak
print(f"MFU, graphtune 1 process x 2 threads: {4 * n * rate / 1e9:.1f} GFLOP/s of the {peak:.1f} measured peak = {mfu:.0%} "
      f"(target >= 50%: {'met' if mfu >= 0.5 else 'missed'}; N = {n / 1e6:.1f} M decoder parameters)")
PY

section "parallel layouts of the same job (bench/parallel_layouts.sh, 6 steps, batch 8)"
bench/parallel_layouts.sh "$FX/ref/job.toml" 6 --training.batch_size 8 --data.num_workers 0 | tee "$FX/layouts.txt"
awk '$1 == "pp2_1f1b_m8" {split($NF, a, "/"); f = a[1]; sim = $5; meas = $6}
     $1 == "pp2_gpipe_m8" {split($NF, a, "/"); g = a[1]}
     END {
       printf "1F1B m=8: measured bubble %.3f against %.3f in theory: %.2fx (target <= 1.25x: %s)\n",
              meas, sim, meas / sim, meas / sim <= 1.25 ? "met" : "missed"
       printf "1F1B m=8: stage 0 holds %.1f MiB of step tensors against GPipe'"'"'s %.1f: %.2fx (target <= 0.35x: %s)\n",
              f, g, f / g, f / g <= 0.35 ? "met" : "missed"
     }' "$FX/layouts.txt"

section "checkpoints (bench/checkpoint_io.sh)"
bench/checkpoint_io.sh

section "generation, 256 new tokens (bench/generate_speed.sh)"
bench/generate_speed.sh 256

section "evaluation under each layout, SmolLM2-135M on 64 Cora-ML papers (bench/eval_layouts.sh)"
bench/eval_layouts.sh 64
