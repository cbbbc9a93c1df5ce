#!/usr/bin/env bash
# Host memory at load: GraphGPT's stage 1 in bf16 on a random LLaMA of at least 1 GB (default
# dim 2048, 16 layers, hidden 5632: 0.95 B parameters, 1.77 GiB as a bf16 file), one process and
# pp=2, each rank's peak RSS once its weights are in (the worker's own "peak RSS ... loaded"
# line), beside what the model weighs whole and per stage in bf16 and fp32. A rank should hold
# about its stage's bf16 weights plus the fixed runtime (the 1-process run of a tiny model, also
# measured), never the whole model in fp32. BEFORE=path/to/an/older/graphtune-worker runs the
# same jobs with it, for the change's before and after. Not a timed test: memory only.
# Usage: bench/load_memory.sh [DIM] [LAYERS] [HIDDEN]    (from a built tree; needs ../shared/assets)
set -euo pipefail
cd "$(dirname "$0")/.."
DIM=${1:-2048}
LAYERS=${2:-16}
HIDDEN=${3:-5632}
HEADS=$((DIM / 128))
W=${GRAPHTUNE_WORKER:-build/worker/graphtune-worker}
GT=${GRAPHTUNE_BIN:-build/launcher/graphtune}
PY=${GRAPHTUNE_PYTHON:-$HOME/.cache/graphtune/venv/bin/python}
ASSETS=${GRAPHTUNE_ASSETS:-../shared/assets}
# A fresh folder each run, inside OUT where one is given: a run again never meets an earlier
# one's jobs, and what goes at the end is only this run's, never the folder the user named.
OUT=$(mktemp -d -p "${OUT:-$PWD}" bench-load.XXXX)
trap 'rm -rf "$OUT"' EXIT
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS=1)

"$PY" bench/make_llama_folder.py "$OUT/big" "$ASSETS/llm/tokenizer.model" "$DIM" "$LAYERS" "$HEADS" "$HIDDEN"
"$PY" bench/make_llama_folder.py "$OUT/tiny" "$ASSETS/llm/tokenizer.model" 128 2 1 352 >/dev/null
"$GT" data build --graph embedded --task graph_matching --split train --max-nodes 3 --max-records 8 \
  --out "$OUT/gm.json" 2>/dev/null
JOB=(--training.stage graph_matching --model.dtype bf16 --data.instructions "$OUT/gm.json" --data.max_len 256
     --data.num_workers 0 --training.steps 1 --training.batch_size 2 --training.log_every 1 --training.threads 1)

# rss WORKER MODEL NP: the largest rank's peak RSS (MiB) once loaded.
rss() {
  local worker=$1 model=$2 np=$3 log=$OUT/run.err
  if [ "$np" -eq 1 ]; then
    "$worker" train -c configs/lm.toml "${JOB[@]}" --model.path "$model" --job.out_dir "$OUT/run" >/dev/null 2>"$log"
  else
    "${MPIRUN[@]}" -np "$np" "$worker" -c configs/lm.toml "${JOB[@]}" --model.path "$model" --parallelism.pp "$np" \
      --parallelism.microbatches 2 --job.out_dir "$OUT/run" >/dev/null 2>"$log"
  fi
  rm -rf "$OUT/run"
  local v
  v=$(sed -n 's/.*peak RSS \([0-9]*\) MiB loaded.*/\1/p; s/.*weights loaded, peak RSS \([0-9]*\) MiB.*/\1/p' "$log" | sort -n | tail -1)
  if [ -z "$v" ]; then  # an older worker without the "loaded" line: its peak over the run
    v=$(sed -n 's/.*peak RSS \([0-9]*\) MiB,.*/\1/p' "$log" | sort -n | tail -1)
  fi
  echo "${v:-?}"
}

params=$("$PY" -c "d,l,h=$DIM,$LAYERS,$HIDDEN; print(2*32003*d + l*(2*d + 4*d*d + 3*h*d) + d)")
mib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }
half_stage=$("$PY" -c "d,l,h=$DIM,$LAYERS,$HIDDEN; print(32003*d + (l//2)*(2*d + 4*d*d + 3*h*d))")
echo
echo "model: $params parameters; whole: bf16 $(mib $((params * 2))) MiB, fp32 $(mib $((params * 4))) MiB;"
echo "       a pp=2 stage: about $(mib $((half_stage * 2))) MiB in bf16"
printf '%-10s %12s %14s %14s\n' worker "tiny (MiB)" "1 process" "pp=2, per rank"
for w in "$W" ${BEFORE:+"$BEFORE"}; do
  name=$([ "$w" = "$W" ] && echo this || echo before)
  base=$(rss "$w" "$OUT/tiny" 1)
  one=$(rss "$w" "$OUT/big" 1)
  two=$(rss "$w" "$OUT/big" 2)
  printf '%-10s %12s %14s %14s\n' "$name" "$base" "$one" "$two"
  awk -v b="$base" -v o="$one" -v t="$two" -v w="$(mib $((params * 2)))" -v s="$(mib $((half_stage * 2)))" 'BEGIN {
    printf "           above the runtime: 1 process %.2f x the bf16 model, pp=2 %.2f x its bf16 stage\n", (o - b) / w, (t - b) / s }'
done
