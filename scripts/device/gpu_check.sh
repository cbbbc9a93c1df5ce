#!/usr/bin/env bash
# The GPU machine's check, prepared to run as it is: scripts/device/pack.sh first, here, then
#   run(carry=["device_pack"], timeout_s=540, command="scripts/device/gpu_check.sh")
# It takes under 8 minutes and writes one table, $OUT/gpu_check.md (and the whole log beside
# it): the machine, whether graphtune's binaries and the packed OpenMPI run there, the NCCL
# backend's operations with one rank and with two ranks on the one GPU (each its own
# NCCL_HOSTID, which NCCL accepts for a correctness check), a stalled peer, the pipeline
# executor's GPipe and 1F1B over NCCL against the serial model, the CUDA context and cuBLAS
# workspace, the bf16 matmul peak; then graphtune's own steps on the GPU: greedy generation
# against the golden text, a GraphGPT stage-1 job on CUDA against the same job on the CPU
# (fp32, TF32 off), bf16 with TF32 learning, dp=2, pp=2 (GPipe, 1F1B) and tp=2 over NCCL
# against one CUDA rank, packed records (flash attention's variable-length kernel in bf16)
# against padded rows, the phase lm, eval on one rank and on two (dp, pp), what each rank's GPU
# held at its peak, and the step at Vicuna-7B's layer shape against the PyTorch reference
# (bench/layer_shape_step.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
PACK=$PWD/device_pack
LOG=$OUT/gpu_check.log
TABLE=$OUT/gpu_check.md
: >"$LOG"
[ -x "$PACK/bin/graphtune" ] || { echo "no $PACK: run scripts/device/pack.sh here and carry device_pack" | tee "$TABLE"; exit 1; }

PY=${PYTHON:-python3}
torch_lib=$("$PY" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>>"$LOG")
nvidia_libs=$("$PY" -c 'import glob, os, nvidia; print(":".join(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], "*", "lib")))))' 2>>"$LOG")
export LD_LIBRARY_PATH="$PACK/lib:$PACK/mpi/usr/lib/x86_64-linux-gnu:$PACK/mpi/usr/lib/x86_64-linux-gnu/openmpi/lib:$torch_lib:$nvidia_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PREFIX=$PACK/mpi/usr PATH=$PACK/mpi/usr/bin:$PATH
export GRAPHTUNE_NCCL_LIBRARY=$PACK/lib/libgraphtune_comm_nccl.so GRAPHTUNE_ASSETS=$PACK/assets
# gVisor has no cross-memory attach; ob1 over shared memory and TCP needs none of the HPC stacks.
MPIRUN=(timeout 150 mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1
        --mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none
        -x LD_LIBRARY_PATH -x OPAL_PREFIX -x GRAPHTUNE_NCCL_LIBRARY)
# Two ranks on one GPU: NCCL refuses them as duplicates unless each says it is another host;
# they then talk over sockets, here the loopback (NCCL skips it unless named), and not IB.
own_host=$OUT/own_hostid.sh
printf '#!/bin/sh\nexport NCCL_HOSTID="graphtune-rank-${OMPI_COMM_WORLD_RANK:-0}"\nexport NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}" NCCL_IB_DISABLE=1\nexec "$@"\n' >"$own_host"
chmod +x "$own_host"

rows=()
row() { rows+=("| $1 | $2 | $3 |"); echo "== $1: $2 ($3)" | tee -a "$LOG"; }
last_rc=0
capture() {  # capture FILE command...: stdout+stderr to FILE and the log
  local file=$1; shift
  echo "\$ $*" >>"$LOG"
  local start=$SECONDS
  "$@" >"$file" 2>&1
  last_rc=$?
  last_secs=$((SECONDS - start))
  cat "$file" >>"$LOG"
}
oks() { grep -c '^ok ' "$1"; }

# 1. The machine.
gpus=$(nvidia-smi -L 2>>"$LOG" | grep -c '^GPU')
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>>"$LOG" | head -1)
seen=$("$PY" -c 'import torch; print(torch.__version__, torch.cuda.device_count(), torch.cuda.get_device_name(0) if torch.cuda.device_count() else "-")' 2>>"$LOG")
row "machine" "$([ "$gpus" -ge 1 ] && echo PASS || echo FAIL)" "$gpus GPU(s), driver ${driver:-?}; torch, devices, name: $seen"

# 2. The packed runtime starts.
capture "$OUT/mpi.txt" "${MPIRUN[@]}" -np 2 "$PACK/bin/nccl_probe" open mpi
row "packed OpenMPI, 2 ranks" "$([ "$last_rc" -eq 0 ] && grep -q 'rank 1 of 2' "$OUT/mpi.txt" && echo PASS || echo FAIL)" "exit $last_rc in ${last_secs}s"

# 3. Greedy generation on the GPU: llama2.c's stories260K must write the golden text.
llm=$PACK/assets/llm
capture "$OUT/generate.txt" timeout 60 "$PACK/bin/graphtune" generate --model "$llm/stories260K.bin" --tokenizer "$llm/tok512.bin" \
  --prompt "Once upon a time" --max-new-tokens 256 --temperature 0 --device cuda
golden_ok=$("$PY" - "$OUT/generate.txt" "$llm/stories260K_greedy_once_upon_a_time_n256.txt" <<'PY' 2>>"$LOG"
import sys
got, want = open(sys.argv[1]).read(), open(sys.argv[2]).read().strip()
print("PASS" if want in got else "FAIL")
PY
)
row "generate --device cuda: golden greedy text" "$([ "$last_rc" -eq 0 ] && [ "$golden_ok" = PASS ] && echo PASS || echo FAIL)" \
  "exit $last_rc, ${last_secs}s: $(grep -o '[0-9.]* tok/s' "$OUT/generate.txt" | tail -1)"

# 4-6. The NCCL backend.
capture "$OUT/nccl1.txt" "${MPIRUN[@]}" -np 1 "$PACK/bin/nccl_probe" ops nccl
row "NCCL probe, 1 rank" "$([ "$last_rc" -eq 0 ] && [ "$(oks "$OUT/nccl1.txt")" -eq 6 ] && ! grep -q FAIL "$OUT/nccl1.txt" && echo PASS || echo FAIL)" \
  "$(oks "$OUT/nccl1.txt") of 6 checks, exit $last_rc, ${last_secs}s"
capture "$OUT/nccl2.txt" "${MPIRUN[@]}" -np 2 "$own_host" "$PACK/bin/nccl_probe" ops nccl
row "NCCL probe, 2 ranks on 1 GPU" "$([ "$last_rc" -eq 0 ] && [ "$(oks "$OUT/nccl2.txt")" -eq 8 ] && ! grep -q FAIL "$OUT/nccl2.txt" && echo PASS || echo FAIL)" \
  "$(oks "$OUT/nccl2.txt") of 8 checks, exit $last_rc, ${last_secs}s"
capture "$OUT/stall.txt" "${MPIRUN[@]}" -np 2 "$own_host" "$PACK/bin/nccl_probe" stall nccl
# The host does not wait in recv under NCCL: the watchdog ends the job, naming host and GPU.
line='^graphtune: error: rank 0 \([^,]+, cuda:0\): recv with peer 1 timed out after 2 s \(the peer never answered\)$'
row "NCCL stalled peer (watchdog)" "$([ "$last_rc" -ne 0 ] && [ "$last_rc" -ne 124 ] && [ "$last_secs" -lt 15 ] && grep -qE "$line" "$OUT/stall.txt" && ! grep -q 'FAIL' "$OUT/stall.txt" && echo PASS || echo FAIL)" \
  "exit $last_rc after ${last_secs}s"

# 7. The pipeline executor over NCCL: GPipe and 1F1B, m = 4 and 8, 2 stages on the one GPU,
# each against the serial model (5 checks a configuration). 1F1B deadlocks here unless its
# paired messages share a group.
capture "$OUT/pipeline.txt" "${MPIRUN[@]}" -np 2 "$own_host" "$PACK/bin/pipeline_driver" check nccl
row "pipeline over NCCL, GPipe + 1F1B, pp=2" "$([ "$last_rc" -eq 0 ] && [ "$(oks "$OUT/pipeline.txt")" -eq 20 ] && ! grep -q FAIL "$OUT/pipeline.txt" && echo PASS || echo FAIL)" \
  "$(oks "$OUT/pipeline.txt") of 20 checks, exit $last_rc, ${last_secs}s"

# 8-9. What the planner and MFU need: the CUDA context and cuBLAS workspace, the bf16 peak.
capture "$OUT/cuda.txt" timeout 120 "$PY" - <<'PY'
import time, torch
free0, total = torch.cuda.mem_get_info()          # creating the context happens here
print(f"context_and_driver_mib {(total - free0) / 2**20:.0f}")
r0 = torch.cuda.memory_reserved()
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
free1, _ = torch.cuda.mem_get_info()
(a @ b).sum().item()
torch.cuda.synchronize()
free2, _ = torch.cuda.mem_get_info()
print(f"first_matmul_outside_allocator_mib {(free1 - free2 - (torch.cuda.memory_reserved() - r0 - 2 * a.nbytes)) / 2**20:.0f}")
n = 8192
x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16); y = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
for _ in range(3): x @ y
torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(10): x @ y
torch.cuda.synchronize(); dt = (time.perf_counter() - t) / 10
print(f"bf16_matmul_tflops {2 * n**3 / dt / 1e12:.0f}")
PY
ctx=$(awk '/^context_and_driver_mib/ {print $2}' "$OUT/cuda.txt")
cublas=$(awk '/^first_matmul_outside_allocator_mib/ {print $2}' "$OUT/cuda.txt")
peak=$(awk '/^bf16_matmul_tflops/ {print $2}' "$OUT/cuda.txt")
row "CUDA context; cuBLAS beyond the allocator" "$([ -n "$ctx" ] && echo MEASURED || echo FAIL)" "${ctx:-?} MiB; ${cublas:-?} MiB at the first bf16 matmul"
row "bf16 matmul peak (8192^3)" "$([ -n "$peak" ] && echo MEASURED || echo FAIL)" "${peak:-?} TFLOP/s"

# 10-16. graphtune's steps on the GPU. The fixture: a small LLM trained here on the CPU (stage
# lm, 20 steps) and 40 graph-matching records of the embedded graph, as tests/cli/parallel_train.sh.
G=$OUT/graph
mkdir -p "$G"
W=$PACK/bin/graphtune-worker
capture "$G/fixture.txt" bash -c "'$PACK/bin/graphtune' train --config configs/lm.toml --model.max_seq_len 1024 --training.steps 20 \
  --training.log_every 10 --device cpu --job.out_dir '$G/base' && '$PACK/bin/graphtune' data build --graph embedded \
  --task graph_matching --split train --max-nodes 3 --max-records 40 --out '$G/gm.json'"
GRAPH=(--model.path "$G/base/model" --training.stage graph_matching --data.instructions "$G/gm.json" --data.max_len 1024
       --data.num_workers 0 --training.steps 3 --training.batch_size 8 --training.log_every 1 --optimizer.lr 1e-2
       --training.max_grad_norm 2e-5)
job() {  # job NAME NP ARGS...: the worker's train on the fixture, one process or NP ranks on the one GPU
  local name=$1 np=$2; shift 2
  if [ "$np" -eq 1 ]; then
    capture "$G/$name.txt" timeout 150 "$W" train -c configs/lm.toml "${GRAPH[@]}" "$@" --job.out_dir "$G/$name"
  else
    capture "$G/$name.txt" "${MPIRUN[@]}" -x GRAPHTUNE_TEST_SHARE_GPU=1 -np "$np" "$own_host" "$W" train -c configs/lm.toml \
      "${GRAPH[@]}" "$@" --job.out_dir "$G/$name"
  fi
}
# same REF GOT RTOL: losses and gradient norms of every step, and the trained projector and token
# rows, agree within RTOL; prints the worst relative differences.
same() {
  "$PY" - "$G/$1" "$G/$2" "$3" <<'PY' 2>&1
import json, sys
import numpy as np
from safetensors.numpy import load_file
ref, got, rtol = sys.argv[1], sys.argv[2], float(sys.argv[3])
log = lambda d, k: np.array([json.loads(l)[k] for l in open(d + "/train_log.jsonl")])
worst = 0.0
for k in ("loss", "grad_norm"):
    a, b = log(ref, k), log(got, k)
    assert len(a) == len(b) > 0, (k, a, b)
    worst = max(worst, float(np.max(np.abs(b - a) / np.abs(a))))
import os
for f in ("graph_projector.safetensors", "graph_tokens.safetensors", "graph_encoder.safetensors"):
    if f == "graph_encoder.safetensors" and not os.path.exists(f"{ref}/{f}"):
        continue
    x, y = load_file(f"{ref}/{f}"), load_file(f"{got}/{f}")
    for n in x:
        worst = max(worst, float(np.max(np.abs(y[n] - x[n]) / np.maximum(np.abs(x[n]), 1e-3))))
print(("PASS" if worst <= rtol else "FAIL") + f" worst relative difference {worst:.2e} (allowed {rtol:g})")
PY
}
verdict() { [ "$last_rc" -eq 0 ] && grep -q '^PASS' <<<"$1" && echo PASS || echo FAIL; }
gpu_peak() { grep -o 'cuda:0: [0-9.]* GiB allocated (peak), [0-9.]* GiB reserved' "$1" | head -1; }

job g_cpu 1 --device cpu
job g_cuda 1 --device cuda --training.tf32 false
r=$(same g_cpu g_cuda 1e-4)
row "GraphGPT stage 1 on CUDA vs the CPU (fp32, TF32 off, 3 steps)" "$(verdict "$r")" \
  "$r; $(grep -o 'attention [^,]*' "$G/g_cuda.txt" | head -1); $(gpu_peak "$G/g_cuda.txt")"
job g_bf16 1 --device cuda --model.dtype bf16
close=$("$PY" -c "
import json
l = lambda d: [json.loads(x)['loss'] for x in open(d + '/train_log.jsonl')]
a, b = l('$G/g_cuda'), l('$G/g_bf16')
worst = max(abs(y - x) / x for x, y in zip(a, b))
print(('PASS' if len(a) == len(b) == 3 and worst <= 2e-2 else 'FAIL') + f' worst relative loss difference {worst:.2e} (allowed 2e-2)')" 2>>"$LOG")
row "bf16 autocast + TF32 vs fp32 on CUDA, 3 steps" "$(verdict "$close")" "$close; $(grep -o 'attention [a-z_]*' "$G/g_bf16.txt" | head -1)"
# Packing on CUDA: fp32 runs each packed record's attention on its own (as on the CPU), bf16
# runs flash attention's variable-length kernel over the packed row; each against padded rows.
# Both with the records' shared prompt prefix once (the default), each sharer's segment gathered
# from it; and fp32 against each record computing its own prefix.
# The packed and padded attentions reduce in other orders on the GPU (other kernels, other
# shapes), and AdamW's first steps scale such last-bit gradient differences up in the weights.
job g_cuda_padded 1 --device cuda --training.tf32 false --training.packing false
r=$(same g_cuda_padded g_cuda 1e-4)
row "packed vs padded rows on CUDA (fp32, TF32 off)" "$(verdict "$r")" "$r"
job g_cuda_unshared 1 --device cuda --training.tf32 false --training.share_prefix false
r=$(same g_cuda_unshared g_cuda 1e-4)
row "packed with the prompt prefix shared vs each record's own on CUDA (fp32)" "$(verdict "$r")" \
  "$r; $(sed -n 's/^graphtune: rank 0 computed //p' "$G/g_cuda.txt" | head -1)"
job g_bf16_padded 1 --device cuda --model.dtype bf16 --training.packing false
close=$("$PY" -c "
import json
l = lambda d, k: [json.loads(x)[k] for x in open(d + '/train_log.jsonl')]
worst = max(abs(y - x) / abs(x) for k in ('loss', 'grad_norm') for x, y in zip(l('$G/g_bf16_padded', k), l('$G/g_bf16', k)))
print(('PASS' if len(l('$G/g_bf16', 'loss')) == 3 and worst <= 2e-2 else 'FAIL') + f' worst relative loss or gradient-norm difference {worst:.2e} (allowed 2e-2)')" 2>>"$LOG")
row "flash varlen (packed, bf16) vs padded bf16 on CUDA" "$(verdict "$close")" "$close; $(grep -o 'attention [a-z_]* varlen' "$G/g_bf16.txt" | head -1)"
job g_bf16_20 1 --device cuda --model.dtype bf16 --training.steps 20 --training.log_every 5 --training.max_grad_norm 1.0
falling=$("$PY" -c "import json,sys; l=[json.loads(x)['loss'] for x in open('$G/g_bf16_20/train_log.jsonl')]; print('PASS' if l[-1] < l[0] else 'FAIL', ' '.join(f'{v:.4f}' for v in l))" 2>>"$LOG")
row "bf16 + TF32 on CUDA, 20 steps: loss falls" "$(verdict "$falling")" "losses ${falling#* }"
job g_ref 1 --device cuda --training.tf32 false
for layout in "dp2 --parallelism.dp 2" "pp2_gpipe --parallelism.pp 2 --parallelism.schedule gpipe --parallelism.microbatches 4" \
              "pp2_1f1b --parallelism.pp 2 --parallelism.schedule 1f1b --parallelism.microbatches 4" "tp2 --parallelism.tp 2"; do
  set -- $layout
  name=$1; shift
  job "g_$name" 2 --device cuda --training.tf32 false "$@"
  r=$(same g_ref "g_$name" 1e-4)
  row "$name over NCCL (2 ranks, 1 GPU) vs one CUDA rank" "$(verdict "$r")" "$r, ${last_secs}s"
done
# The graph encoder trained too: on CUDA against the CPU, and tensor parallel over NCCL (the
# projector's input gradient summed over the tp ranks reaches the replicated encoder).
job ge_cpu 1 --device cpu --training.trainable graphgpt+encoder
job ge_cuda 1 --device cuda --training.tf32 false --training.trainable graphgpt+encoder
r=$(same ge_cpu ge_cuda 1e-4)
row "graphgpt+encoder (the encoder trained) on CUDA vs the CPU (fp32)" "$(verdict "$r")" "$r"
job ge_tp2 2 --device cuda --training.tf32 false --training.trainable graphgpt+encoder --parallelism.tp 2
r=$(same ge_cuda ge_tp2 1e-4)
row "graphgpt+encoder tp2 over NCCL (2 ranks, 1 GPU) vs one CUDA rank" "$(verdict "$r")" "$r, ${last_secs}s"
capture "$G/lm.txt" timeout 150 "$W" train -c configs/lm.toml --training.steps 30 --training.log_every 10 --device cuda --job.out_dir "$G/lm"
lm_loss=$("$PY" -c "import json; l=[json.loads(x)['loss'] for x in open('$G/lm/train_log.jsonl')]; print('PASS' if l[-1] < l[0] else 'FAIL', ' '.join(f'{v:.3f}' for v in l))" 2>>"$LOG")
row "stage lm on CUDA, 30 steps: loss falls, model written" "$([ -s "$G/lm/model/model.safetensors" ] && verdict "$lm_loss" || echo FAIL)" \
  "losses ${lm_loss#* }; $(gpu_peak "$G/lm.txt")"
EVAL=(eval --config configs/lm.toml --model.path "$G/base/model" --model.projector "$G/g_cuda/graph_projector.bin"
      --data.instructions "$G/gm.json" --data.max_len 1024 --eval.max_new_tokens 8 --training.tf32 false)
capture "$G/eval_cpu.txt" timeout 150 "$W" "${EVAL[@]}" --device cpu --out "$G/eval_cpu"
capture "$G/eval.txt" timeout 150 "$W" "${EVAL[@]}" --device cuda --out "$G/eval"
row "eval --device cuda: the CPU's greedy answers" "$([ "$last_rc" -eq 0 ] && cmp -s "$G/eval/predictions.jsonl" "$G/eval_cpu/predictions.jsonl" && echo PASS || echo FAIL)" \
  "exit $last_rc, ${last_secs}s, $(grep -c '' "$G/eval/predictions.jsonl" 2>/dev/null) answers"
# Eval on two ranks sharing the GPU: data parallel over NCCL, and the two pipeline stages.
for layout in "dp2 --parallelism.dp 2" "pp2 --parallelism.pp 2"; do
  set -- $layout
  name=$1; shift
  capture "$G/eval_$name.txt" "${MPIRUN[@]}" -x GRAPHTUNE_TEST_SHARE_GPU=1 -np 2 "$own_host" "$W" "${EVAL[@]}" --device cuda "$@" \
    --out "$G/eval_$name"
  row "eval $name over NCCL (2 ranks, 1 GPU): one rank's answers" \
    "$([ "$last_rc" -eq 0 ] && cmp -s "$G/eval/predictions.jsonl" "$G/eval_$name/predictions.jsonl" && echo PASS || echo FAIL)" \
    "exit $last_rc, ${last_secs}s"
done

# The step at Vicuna-7B's layer shape (4 of its layers), bf16, against the PyTorch reference.
capture "$OUT/layer_shape.txt" timeout 240 env DEVICE=cuda DTYPE=bf16 PEAK_TFLOPS="${peak:-}" GRAPHTUNE_BIN="$PACK/bin/graphtune" \
  GRAPHTUNE_WORKER="$W" GRAPHTUNE_PYTHON="$PY" bench/layer_shape_step.sh "$G/layer_shape"
L=$OUT/layer_shape.txt
row "stage-1 step at Vicuna-7B's layer shape (4 layers, bf16)" "$([ "$last_rc" -eq 0 ] && echo MEASURED || echo FAIL)" \
  "$(grep -hE '^graphtune packed +[0-9]' "$L" | tr -s ' '); $(grep -h '^graphtune packed /' "$L"); $(grep -h '^attention' "$L"); $(grep -h 'peak memory, graphtune packed' "$L" | sed 's/peak memory, graphtune packed: //') at peak, plan: $(grep -h '^graphtune plan' "$L" | sed 's/.*: //')"

{
  echo "# graphtune GPU check, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "| check | result | detail |"
  echo "| --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
} >"$TABLE"
cat "$TABLE"
! grep -q '| FAIL |' "$TABLE"
