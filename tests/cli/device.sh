#!/usr/bin/env bash
# Where the ranks compute: [training].device and --device on train, eval, pipeline, generate and
# the worker. On a machine where libtorch sees no GPU (CI's), asking for cuda is one line and
# exit 2 before anything is read, and nothing is written; auto and cpu run on the CPU. Where
# libtorch sees a GPU these refusals do not apply (cuda runs there): scripts/device/gpu_check.sh
# is that machine's check.
source "$(dirname "$0")/lib.sh"
ROOT=${GRAPHTUNE_SOURCE_DIR:?set by ctest}
WORKER=${GRAPHTUNE_WORKER:?set by ctest}
cd "$TMP"

gpus=$("${GRAPHTUNE_PYTHON:-python3}" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
if [ "$gpus" -ne 0 ]; then
  echo "SKIP: libtorch sees $gpus CUDA devices here, so cuda is not refused; scripts/device/gpu_check.sh checks that path"
  exit 77
fi
echo "libtorch sees no CUDA device here: cuda must be refused as absent"
want="cuda: no CUDA device on"

expect_fail "train --device cuda (the demo's stage 1)" "command line --training.device: $want" -- \
  "$GT" train -c "$ROOT/configs/demo/stage1.toml" --device cuda --job.out_dir "$TMP/stage1"
check "  nothing written" [ ! -e "$TMP/stage1" ]
expect_fail "train --training.device cuda" "command line --training.device: $want" -- \
  "$GT" train -c "$ROOT/configs/lm.toml" --training.device cuda --job.out_dir "$TMP/lm"
printf '[training]\ndevice = "cuda"\n' >"$TMP/cuda.toml"
expect_fail "[training].device = \"cuda\" in the file" "cuda.toml: [training].device: $want" -- \
  "$WORKER" train -c "$TMP/cuda.toml" --job.out_dir "$TMP/file"
expect_fail "the worker's own --device" "command line --training.device: $want" -- \
  "$WORKER" train -c "$ROOT/configs/lm.toml" --device cuda --job.out_dir "$TMP/worker"
expect_fail "eval --device cuda" "command line --training.device: $want" -- \
  "$GT" eval -c "$ROOT/configs/demo/stage2.toml" --device cuda --out "$TMP/eval"
check "  nothing written" [ ! -e "$TMP/eval" ]
expect_fail "pipeline --device cuda" "command line --training.device: $want" -- \
  "$GT" pipeline -c "$ROOT/configs/demo/pipeline.toml" --device cuda --job.out_dir "$TMP/pipeline"
check "  nothing written" [ ! -e "$TMP/pipeline" ]
expect_fail "generate --device cuda" "--device: $want" -- \
  "$GT" generate --model "$ROOT/configs/lm.toml" --prompt hi --device cuda

expect_fail "an unknown device" "command line --training.device: 'tpu' is not one of: auto, cpu, cuda" -- \
  "$GT" train -c "$ROOT/configs/lm.toml" --device tpu --job.out_dir "$TMP/tpu"
expect_fail "generate: an unknown device" "--device: expected auto, cpu or cuda, got 'gpu'" -- \
  "$GT" generate --model "$ROOT/configs/lm.toml" --prompt hi --device gpu
expect_fail "nccl with device cpu" \
  "command line --parallelism.backend: nccl moves CUDA tensors, but [training].device is cpu (use mpi, or device cuda)" -- \
  "$GT" train -c "$ROOT/configs/lm.toml" --device cpu --parallelism.backend nccl --job.out_dir "$TMP/nccl"
expect_fail "nccl with device auto, which is the CPU" \
  "command line --parallelism.backend: nccl moves CUDA tensors, but this job computes on the CPU ([training].device auto; use mpi)" -- \
  "$GT" train -c "$ROOT/configs/lm.toml" --parallelism.backend nccl --job.out_dir "$TMP/nccl_auto"

# The launcher counts a host's GPUs through the NVIDIA driver's own library. A stand-in
# libcuda.so.1 that shows one GPU lets its rank-per-GPU rule and its refusal be checked here.
if cc -shared -fPIC -o "$TMP/libcuda.so.1" -x c - <<'C'
int cuInit(unsigned int flags) { (void)flags; return 0; }
int cuDeviceGetCount(int* n) { *n = 1; return 0; }
C
then
  expect_fail "2 ranks, 1 GPU shown" "command line --training.device: cuda: 2 ranks on $(hostname) but it shows 1 GPU: one rank a GPU" -- \
    env LD_LIBRARY_PATH="$TMP" "$GT" train -c "$ROOT/configs/lm.toml" --device cuda --np 2 --job.out_dir "$TMP/two"
  # The launcher lets one rank through; the rank asks libtorch, which finds no real driver.
  expect_fail "1 rank, 1 GPU shown: the rank's own check refuses it" \
    "command line --training.device: cuda: no CUDA device on $(hostname) (libtorch sees none" -- \
    env LD_LIBRARY_PATH="$TMP" "$GT" train -c "$ROOT/configs/lm.toml" --device cuda --job.out_dir "$TMP/one"
  check "  nothing written" bash -c "[ ! -e '$TMP/two' ] && [ ! -e '$TMP/one' ]"
else
  echo "SKIP the stand-in driver checks: no C compiler"
fi

# auto and cpu train (a 2-step lm run on the CPU).
for device in auto cpu; do
  "$GT" train -c "$ROOT/configs/lm.toml" --device "$device" --training.steps 2 --job.out_dir "$TMP/run_$device" \
    >"$TMP/$device.out" 2>"$TMP/$device.err"
  rc=$?
  check "--device $device trains on the CPU (exit $rc)" [ "$rc" -eq 0 ]
done
finish
