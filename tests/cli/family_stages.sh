#!/usr/bin/env bash
# GraphGPT's two stages on each LLM family graphtune reads, under dp 2 and pp 2, equal to one
# process. The frozen LLMs are tiny models `transformers` writes with random weights and the
# family's real config keys (4 layers): Llama 3.x (rope_scaling llama3, GQA, an untied head,
# eos_token_id a list), Qwen2.5 (q/k/v biases, tied head, rope_theta 1e6, 64 embedding rows past
# its 512-piece vocabulary, which GraphGPT's three tokens take the first of) and Mistral (a
# sliding window longer than any record). Stage 1 (graph_matching) trains the projector and the
# graph tokens' rows; stage 2 (task, node classification) starts from stage 1's projector. Each
# layout's losses, gradient norms and trained tensors must equal one process's within rtol 1e-5.
source "$(dirname "$0")/lib.sh"
need_mpirun 600
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=${GRAPHTUNE_WORKER:?set by ctest}
PY=${GRAPHTUNE_PYTHON:-python3}
CFG=$ROOT/configs/lm.toml
TOK512=${GRAPHTUNE_ASSETS:-$ROOT/../shared/assets}/llm/tok512.bin
[ -f "$TOK512" ] || { echo "SKIP: shared assets not found ($TOK512)"; exit 77; }
"$PY" -c "import transformers, safetensors, numpy" 2>/dev/null || { echo "SKIP: $PY lacks transformers"; exit 77; }

# The three families, each a folder with llama2.c's 512-token vocabulary beside it as
# tokenizer.bin (what a folder's tokenizer "auto" finds).
"$PY" - "$TMP" "$TOK512" <<'PYEOF' || { echo "FAIL: writing the family models"; exit 1; }
import os, shutil, sys, torch, transformers
from transformers import AutoModelForCausalLM, LlamaConfig, MistralConfig, Qwen2Config
transformers.logging.set_verbosity_error()
tmp, tok = sys.argv[1], sys.argv[2]
shape = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
             vocab_size=512, rms_norm_eps=1e-5, max_position_embeddings=2048, bos_token_id=1)
families = {
    "llama3": LlamaConfig(**shape, tie_word_embeddings=False, eos_token_id=[2, 3],
                          rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                        "high_freq_factor": 4.0, "original_max_position_embeddings": 256}),
    # Its embedding padded past the vocabulary, as Qwen2.5's is: the graph tokens take spare rows.
    "qwen2": Qwen2Config(**dict(shape, vocab_size=576), tie_word_embeddings=True, rope_theta=1e6, eos_token_id=2),
    "mistral": MistralConfig(**shape, sliding_window=4096, rope_theta=1e6, eos_token_id=2),
}
for name, cfg in families.items():
    torch.manual_seed(len(name))
    model = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("bias"):
                p.normal_(0.0, 0.5)
    folder = os.path.join(tmp, name)
    model.save_pretrained(folder, safe_serialization=True)
    shutil.copy(tok, os.path.join(folder, "tokenizer.bin"))
PYEOF
"$GT" data build --graph embedded --task graph_matching --split train --max-nodes 3 --max-records 24 \
  --out "$TMP/gm.json" 2>/dev/null
"$GT" data build --graph embedded --task node_classification --split train --max-nodes 3 --max-records 24 \
  --out "$TMP/nc.json" 2>/dev/null
check "the records exist" test -s "$TMP/gm.json" -a -s "$TMP/nc.json"

G_FILES="graph_projector.safetensors graph_tokens.safetensors"
LAYOUTS=("dp2 2 --parallelism.dp 2" "pp2 2 --parallelism.pp 2 --parallelism.schedule 1f1b --parallelism.microbatches 4")
for fam in llama3 qwen2 mistral; do
  S1=(--model.path "$TMP/$fam" --training.stage graph_matching --data.instructions "$TMP/gm.json"
      --data.max_len 1024 --data.num_workers 0 --training.steps 3 --training.batch_size 8 --training.log_every 1
      --training.threads 1 --optimizer.lr 1e-2 --training.max_grad_norm 2e-5)
  run "${fam}_s1_ref" 1 "${S1[@]}"
  check "$fam: stage 1, one process" test -s "$TMP/${fam}_s1_ref/graph_projector.bin"
  model_type=${fam%3}  # llama3 is model_type llama
  check "$fam: stage 1 read the family" grep -qF "LLM $TMP/$fam ($model_type, 4 layers) frozen" "$TMP/${fam}_s1_ref.err"
  against_serial "${fam}_s1" "$G_FILES" S1 "${LAYOUTS[@]}"

  S2=(--model.path "$TMP/$fam" --training.stage task --data.instructions "$TMP/nc.json"
      --model.projector "$TMP/${fam}_s1_ref/graph_projector.bin"
      --model.graph_encoder "$TMP/${fam}_s1_ref/graph_encoder.safetensors"
      --data.max_len 1024 --data.num_workers 0 --training.steps 3 --training.batch_size 8 --training.log_every 1
      --training.threads 1 --optimizer.lr 1e-2 --training.max_grad_norm 2e-5)
  run "${fam}_s2_ref" 1 "${S2[@]}"
  check "$fam: stage 2 from stage 1's projector, one process" test -s "$TMP/${fam}_s2_ref/graph_projector.bin"
  against_serial "${fam}_s2" "$G_FILES" S2 "${LAYOUTS[@]}"
done
finish
