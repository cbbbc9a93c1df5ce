#!/usr/bin/env bash
# Greedy generation speed with and without the KV cache (graphtune generate --no-kv-cache), same
# threads, same prompt, NEW new tokens (default 256). Models: stories260K (tiny: attention over
# 64-wide heads costs little, so the cache matters less) and a fresh LLaMA of DIM x LAYERS
# (default 512 x 8, ~25M parameters) that stage lm writes as a Hugging Face folder after one
# step. The times are the worker's own "N tokens in S s": generation only (the prompt's forward
# and every new token), model loading excluded. Both paths must print the same text; the script
# stops if they do not. Target: cache >= 5x no cache at 256 new tokens.
# Usage: bench/generate_speed.sh [NEW] [DIM] [LAYERS]   (THREADS=1 by default; run from a built tree)
set -euo pipefail
cd "$(dirname "$0")/.."
NEW=${1:-256}
DIM=${2:-512}
LAYERS=${3:-8}
THREADS=${THREADS:-1}
W=${GRAPHTUNE_WORKER:-build/worker/graphtune-worker}
ASSETS=${GRAPHTUNE_ASSETS:-../shared/assets}
OUT=$(mktemp -d -p "$PWD" bench-gen.XXXX)
trap 'rm -rf "$OUT"' EXIT
PROMPT="Once upon a time"

# The wider model: one training step, so its weights are a trained model's format and a real
# Hugging Face folder; the byte tokenizer keeps the vocabulary (259) from dominating the cost.
"$W" train --config configs/lm.toml --job.out_dir "$OUT/wide" --model.dim "$DIM" --model.n_layers "$LAYERS" \
  --model.n_heads 8 --model.n_kv_heads 8 --model.hidden_dim $((DIM * 8 / 3 / 64 * 64)) --model.max_seq_len 512 \
  --training.steps 1 --training.batch_size 2 --training.seq_len 32 --training.log_every 1 \
  >"$OUT/wide.train.out" 2>"$OUT/wide.train.err" || { cat "$OUT/wide.train.err" >&2; exit 1; }

# speed NAME MODEL TOKENIZER FLAGS...: "tokens seconds tok/s" from the worker's stderr line.
speed() {
  local name=$1 model=$2 tok=$3; shift 3
  "$W" generate --model "$model" --tokenizer "$tok" --prompt "$PROMPT" --max-new-tokens "$NEW" --temperature 0 \
    --threads "$THREADS" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" || { cat "$OUT/$name.err" >&2; exit 1; }
  sed -n 's/^graphtune: \([0-9]*\) tokens in \([0-9.]*\) s (\([0-9.]*\) tok\/s).*/\1 \2 \3/p' "$OUT/$name.err"
}

printf '%-22s %7s %7s %14s %17s %7s\n' model threads tokens "cache tok/s" "no cache tok/s" ratio
row() {
  local label=$1 model=$2 tok=$3
  read -r n_c s_c r_c < <(speed "$label.cache" "$model" "$tok")
  read -r n_n s_n r_n < <(speed "$label.nocache" "$model" "$tok" --no-kv-cache)
  if ! cmp -s "$OUT/$label.cache.out" "$OUT/$label.nocache.out"; then
    echo "FAIL $label: the text with and without the KV cache differs" >&2
    diff "$OUT/$label.cache.out" "$OUT/$label.nocache.out" >&2 || true
    exit 1
  fi
  printf '%-22s %7s %7s %14s %17s %7s\n' "$label" "$THREADS" "$n_c" "$r_c" "$r_n" \
    "$(awk -v a="$s_n" -v b="$s_c" 'BEGIN { printf "%.1fx", a / (b > 0 ? b : 1e-9) }')"
}

if [ -f "$ASSETS/llm/stories260K.bin" ]; then
  row stories260K "$ASSETS/llm/stories260K.bin" "$ASSETS/llm/tok512.bin"
else
  echo "stories260K: $ASSETS/llm/stories260K.bin absent, row skipped" >&2
fi
row "llama-${DIM}x${LAYERS}" "$OUT/wide/model" bytes
