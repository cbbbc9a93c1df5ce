#!/usr/bin/env bash
# Padding with and without [data].group_by_length, in one run: GraphGPT stage-1-like records
# (graph_matching records of a synthetic citation graph, a few hundred to 2,048 tokens under
# LLaMA's tokenizer), one epoch at the reference's batch (global 8 in 4 parts of 2: 4 GPUs x 2),
# every part built as training builds it and its padding read off the attention mask. Also what
# estimating the lengths costs against tokenising every record, and how exact the estimate is.
# Usage: bench/length_grouping.sh [RECORDS]   (after scripts/build.sh; about 20 s on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${GRAPHTUNE_BUILD:-build}
ASSETS=${GRAPHTUNE_ASSETS:-../shared/assets}
TOKENIZER=$ASSETS/llm/tokenizer.model
if [ ! -f "$TOKENIZER" ]; then
  echo "(no $TOKENIZER: the byte tokenizer instead, records up to 8,192 bytes)"
  exec "$BUILD/tests/length_grouping" bytes --records "${1:-1024}" --max-len 8192
fi
exec "$BUILD/tests/length_grouping" "$TOKENIZER" --records "${1:-2048}" --batch 8 --shards 4 --max-len 2048
