#!/usr/bin/env bash
# The main job on the embedded default: installs what is missing, builds, trains a tiny LLaMA
# on the synthetic citation graph's texts (stage lm), then samples from it greedily.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
GT=build/launcher/graphtune
echo "== training a tiny LLaMA on the embedded corpus (configs/demo.toml)" >&2
"$GT" train --config configs/demo.toml "$@"
echo "== greedy sample from the trained model (runs/demo/model)" >&2
"$GT" generate --model runs/demo/model --prompt "graph neural" --max-new-tokens 120 --temperature 0
