#!/usr/bin/env bash
# Checkpoint save and load speed against dd on the same disk, in one run (this machine is shared
# and noisy: read the ratios). The job: stage lm on a LLaMA of DIM x LAYERS (default 768 x 12,
# ~85M parameters: 0.34 GB of fp32 weights + 0.68 GB of AdamW moments per checkpoint), one step,
# a checkpoint after it; then the same job resumed from it at its last step, which loads every
# tensor and saves them again into another folder. Layouts: one process, and dp=2 (each replica
# writes half of the tensors). dd writes and reads the same number of bytes with fsync.
# Usage: bench/checkpoint_io.sh [DIM] [LAYERS]   (run from a built tree; OUT=folder on the disk to measure)
set -euo pipefail
cd "$(dirname "$0")/.."
DIM=${1:-768}
LAYERS=${2:-12}
W=${GRAPHTUNE_WORKER:-build/worker/graphtune-worker}
# A fresh folder each run, inside OUT where one is given: a run again never meets an earlier
# one's jobs, and what goes at the end is only this run's, never the folder the user named.
OUT=$(mktemp -d -p "${OUT:-$PWD}" bench-ckpt.XXXX)
trap 'rm -rf "$OUT"' EXIT
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
JOB=(--model.dim "$DIM" --model.n_layers "$LAYERS" --model.n_heads 12 --model.n_kv_heads 12
     --model.hidden_dim $((DIM * 8 / 3 / 64 * 64)) --training.steps 1 --training.batch_size 2 --training.seq_len 32
     --training.log_every 1 --checkpoint.every 1)

# job NAME NP ARGS...: runs the job, leaves its stderr in $OUT/NAME.err
job() {
  local name=$1 np=$2; shift 2
  if [ "$np" -eq 1 ]; then "$W" train --config configs/lm.toml "${JOB[@]}" "$@" --job.out_dir "$OUT/$name" 2>"$OUT/$name.err"
  else "${MPIRUN[@]}" -np "$np" "$W" -c configs/lm.toml "${JOB[@]}" "$@" --job.out_dir "$OUT/$name" 2>"$OUT/$name.err"; fi
}
# The numbers the worker prints: "rank 0 wrote X MiB in T s" and "rank 0 read X MiB in T s".
wrote() { sed -n 's/.*(\([0-9.]*\) MiB in \([0-9]*\) shards; rank 0 wrote \([0-9.]*\) MiB in \([0-9.]*\) s, \([0-9.]*\) s in all).*/\1 \2 \3 \4 \5/p' "$1" | tail -n 1; }
read_back() { sed -n 's/.*rank 0 read \([0-9.]*\) MiB in \([0-9.]*\) s.*/\1 \2/p' "$1"; }
mibs() { awk -v m="$1" -v s="$2" 'BEGIN { printf "%.0f", m / (s > 0 ? s : 1e-9) }'; }

printf '%-10s %10s %7s %12s %10s %10s %12s %10s %10s\n' layout "total MiB" shards "rank0 MiB" "save s" "save MiB/s" "dd write/s" "load MiB/s" "dd read/s"
for layout in "1 " "2 --parallelism.dp 2"; do
  np=${layout%% *}
  flags=${layout#* }
  name=np$np
  # shellcheck disable=SC2086
  job "$name" "$np" $flags
  read -r total shards mine save_s all_s < <(wrote "$OUT/$name.err")
  # shellcheck disable=SC2086
  job "$name-load" "$np" $flags --checkpoint.dir "$OUT/$name-load/ck" --resume "$OUT/$name/checkpoints/step_00000001"
  read -r got load_s < <(read_back "$OUT/$name-load.err")
  # dd: the same bytes as rank 0's shard, written with fsync, then read back (page cache warm,
  # as the load above found its shard just written).
  count=$(awk -v m="$mine" 'BEGIN { printf "%d", m / 8 + 1 }')
  t0=$(date +%s.%N); dd if=/dev/zero of="$OUT/dd.bin" bs=8M count="$count" conv=fsync status=none; t1=$(date +%s.%N)
  dd if="$OUT/dd.bin" of=/dev/null bs=8M status=none; t2=$(date +%s.%N)
  dd_w=$(awk -v c="$count" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", c * 8 / (b - a) }')
  dd_r=$(awk -v c="$count" -v a="$t1" -v b="$t2" 'BEGIN { printf "%.0f", c * 8 / (b - a) }')
  rm -f "$OUT/dd.bin"
  printf '%-10s %10s %7s %12s %10s %10s %12s %10s %10s\n' "$([ "$np" = 1 ] && echo "1 rank" || echo "dp=2")" "$total" "$shards" \
    "$mine" "$save_s" "$(mibs "$mine" "$save_s")" "$dd_w" "$(mibs "$got" "$load_s")" "$dd_r"
done
echo "save: rank 0's shard written and fsynced (commit excluded); load: rank 0's reads, checksum pass included"
