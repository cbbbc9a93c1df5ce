"""Checks that an LLM folder graphtune export wrote is the base LLM with a PEFT adapter merged in:
every adapted projection W is W + (lora_alpha / r) B A (as PEFT's merge_and_unload writes it),
every other weight but the embeddings (grown by the graph tokens) is the base's own, and the
adapter changes what it adapts.

Usage: merged_adapter.py BASE.safetensors MERGED.safetensors ADAPTER_FOLDER
"""
import json
import sys

import numpy as np
from safetensors.numpy import load_file


def main(base_file, merged_file, adapter):
    base, merged = load_file(base_file), load_file(merged_file)
    cfg = json.load(open(f"{adapter}/adapter_config.json"))
    lora = {k.removeprefix("base_model.model."): v for k, v in load_file(f"{adapter}/adapter_model.safetensors").items()}
    scale = cfg["lora_alpha"] / cfg["r"]
    adapted = 0
    for k, w in base.items():
        if k == "model.embed_tokens.weight":
            continue
        a = lora.get(k.replace(".weight", ".lora_A.weight"))
        want = w if a is None else w + scale * lora[k.replace(".weight", ".lora_B.weight")] @ a
        assert np.allclose(merged[k], want, rtol=1e-5, atol=1e-6), k
        if a is not None:
            adapted += 1
            assert np.abs(merged[k] - w).max() > 1e-5, f"{k}: the adapter changes nothing"
    assert adapted == len(lora) // 2 > 0, (adapted, len(lora))
    print(f"     {adapted} projections merged")


if __name__ == "__main__":
    main(*sys.argv[1:])
