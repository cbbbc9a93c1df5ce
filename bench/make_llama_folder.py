"""A random LLaMA as a Hugging Face folder (config.json, model.safetensors in bf16, LLaMA's
tokenizer.model), of any size: what bench/load_memory.sh loads. Written tensor by tensor through
safetensors' own writer, so a 2 GB model needs about 2 GB of memory here.
Usage: make_llama_folder.py OUT_DIR TOKENIZER_MODEL DIM LAYERS HEADS HIDDEN"""
import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file


def main() -> None:
    out, tokenizer, dim, layers, heads, hidden = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
    vocab = 32000  # LLaMA's tokenizer
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    weights = {}

    def add(name: str, *shape: int) -> None:
        t = torch.ones(shape) if len(shape) == 1 else torch.randn(shape) * 0.02
        weights[name] = t.to(torch.bfloat16)

    add("model.embed_tokens.weight", vocab, dim)
    for i in range(layers):
        p = f"model.layers.{i}."
        add(p + "input_layernorm.weight", dim)
        for proj in ("q", "k", "v", "o"):
            add(p + f"self_attn.{proj}_proj.weight", dim, dim)
        add(p + "post_attention_layernorm.weight", dim)
        add(p + "mlp.gate_proj.weight", hidden, dim)
        add(p + "mlp.up_proj.weight", hidden, dim)
        add(p + "mlp.down_proj.weight", dim, hidden)
    add("model.norm.weight", dim)
    add("lm_head.weight", vocab, dim)
    save_file(weights, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": dim,
        "intermediate_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": heads, "vocab_size": vocab, "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2,
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    shutil.copy(tokenizer, os.path.join(out, "tokenizer.model"))
    params = sum(t.numel() for t in weights.values())
    print(f"{out}: {params / 1e9:.3f} B parameters, {os.path.getsize(os.path.join(out, 'model.safetensors')) / 2**30:.2f} GiB in bf16")


if __name__ == "__main__":
    main()
