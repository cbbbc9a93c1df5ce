#!/usr/bin/env python3
"""The LLM families graphtune reads, from GGUF files written the way llama.cpp's
convert_hf_to_gguf.py writes them, against `transformers` on the folder they came from.

Each tiny model is the one tests/test_model_families.py builds (transformers, random weights, the
family's real config keys); this script writes its GGUF with the gguf package's GGUFWriter by the
converter's rules (F32 tensors):
  - Llama 3.x: arch "llama", q/k rows permuted (LlamaModel.permute), rope_scaling llama3 as the
    F32 tensor rope_freqs.weight (LlamaModel.generate_extra_tensors), an untied head;
  - Qwen2 / Qwen2.5: arch "qwen2", qwen2.* keys, q/k/v biases, q/k as they are (llama.cpp rotates
    qwen2 in halves, as Hugging Face does), untied and tied (no output.weight);
  - Mistral: arch "llama" with no sliding-window key.
Each: fp32 logits within 1e-4 of transformers', greedy text equal to transformers.generate's.
Also: without rope_freqs.weight the Llama 3 logits differ (the factors reach the rotary
tables); an unknown rope.scaling.type and another architecture ("gemma") are refused in one line
naming the file and the key, exit 2.

Environment (set by ctest): GRAPHTUNE_BIN (launcher), GRAPHTUNE_WORKER, GRAPHTUNE_ASSETS.
Exit 0 = pass, 1 = fail, 77 = skipped (prints "SKIP: why").
"""
import json
import math
import os
import subprocess
import sys
import tempfile

from oracle import check, finish, run, skip

TOL = 1e-4  # fp32 logits, max abs difference

assets = os.environ.get("GRAPHTUNE_ASSETS", "../shared/assets")
tok512 = os.path.join(assets, "llm", "tok512.bin")
if not os.path.exists(tok512):
    skip(f"shared assets not found ({tok512})")
try:
    import numpy as np
    import torch
    from safetensors.torch import load_file
    import gguf
    import transformers
except ImportError as e:
    skip(f"python package missing: {e}")
from family_models import Graphtune, tiny_families, write_model

WORKER = os.environ["GRAPHTUNE_WORKER"]
LAUNCHER = os.environ.get("GRAPHTUNE_BIN", WORKER)
GT = Graphtune(WORKER, LAUNCHER, tok512)
FAMILIES = {k: v for k, v in tiny_families().items() if k not in ("mistral_no_window", "qwen2_padded")}
# convert_hf_to_gguf.py's classes: MistralForCausalLM is a LlamaModel (arch "llama").
ARCH = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2"}
# gguf-py's tensor_mapping.py for these names.
LAYER_NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
               "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
               "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
TOP_NAMES = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}


def permute(w, n_head, n_head_kv=None):
    """convert_hf_to_gguf.py's LlamaModel.permute."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(rope, dim):
    """convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors, in its float32 torch ops."""
    base = rope.get("rope_theta", 10000.0)
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor = rope.get("factor", 8.0)
    low_freq_factor = rope.get("low_freq_factor", 1.0)
    high_freq_factor = rope.get("high_freq_factor", 4.0)
    old_context_len = rope.get("original_max_position_embeddings", 8192)
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            factors.append(1)
        elif wavelen > low_freq_wavelen:
            factors.append(factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(factors, dtype=torch.float32)


def write_gguf(folder, path, arch=None, rope_freqs=True, scaling_type=None):
    """The folder as convert_hf_to_gguf.py writes it at --outtype f32 (without a vocabulary:
    graphtune is given tok512 beside it). `arch` overrides general.architecture and its key
    prefix; `scaling_type` adds a rope.scaling.type key."""
    hp = json.load(open(os.path.join(folder, "config.json")))
    family = hp["model_type"]
    arch = arch or ARCH[family]
    rope = hp.get("rope_parameters") or {"rope_theta": hp.get("rope_theta", 10000.0), **(hp.get("rope_scaling") or {})}
    n_head, n_kv = hp["num_attention_heads"], hp["num_key_value_heads"]
    w = gguf.GGUFWriter(path, arch)  # writes general.architecture
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(os.path.basename(folder))
    # TextModel.set_gguf_parameters
    w.add_block_count(hp["num_hidden_layers"])
    w.add_context_length(hp["max_position_embeddings"])
    w.add_embedding_length(hp["hidden_size"])
    w.add_feed_forward_length(hp["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    if scaling_type:
        w.add_rope_scaling_type(scaling_type)
        w.add_rope_scaling_factor(4.0)
    w.add_rope_freq_base(rope["rope_theta"])
    w.add_layer_norm_rms_eps(hp["rms_norm_eps"])
    if hp.get("head_dim") is not None:
        w.add_key_length(hp["head_dim"])
        w.add_value_length(hp["head_dim"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    if arch == "llama":  # LlamaModel.set_gguf_parameters
        w.add_vocab_size(hp["vocab_size"])
        w.add_rope_dimension_count(hp.get("head_dim") or hp["hidden_size"] // n_head)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    # gguf.SpecialVocab's ids from config.json (its first eos when a list).
    eos = hp["eos_token_id"]
    w.add_bos_token_id(hp["bos_token_id"])
    w.add_eos_token_id(eos[0] if isinstance(eos, list) else eos)

    if rope_freqs and rope.get("rope_type", "").lower() == "llama3":
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(rope, hp.get("head_dim") or hp["hidden_size"] // n_head).numpy())
    for name, t in load_file(os.path.join(folder, "model.safetensors")).items():
        if name in TOP_NAMES:
            g = TOP_NAMES[name]
        else:
            i, rest = name[len("model.layers."):].split(".", 1)
            part, kind = rest.rsplit(".", 1)
            g = f"blk.{i}.{LAYER_NAMES[part]}.{kind}"
        if family != "qwen2":  # LlamaModel.undo_permute; Qwen2Model has none
            if name.endswith(("q_proj.weight", "q_proj.bias")):
                t = permute(t, n_head, n_head)
            if name.endswith(("k_proj.weight", "k_proj.bias")):
                t = permute(t, n_head, n_kv)
        w.add_tensor(g, t.to(torch.float32).contiguous().numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def refused(path, tmp):
    """Exit code and the error lines of dump-logits on `path`."""
    p = subprocess.run([WORKER, "dump-logits", "--model", path, "--tokens", "1,5,7", "--out",
                        os.path.join(tmp, "refused.safetensors")], capture_output=True, text=True)
    return p.returncode, [l for l in p.stderr.splitlines() if "error" in l]


def family_checks(name, cfg, tmp):
    folder, model = write_model(name, cfg, tmp)
    path = write_gguf(folder, os.path.join(tmp, name + ".gguf"))
    reader = gguf.GGUFReader(path)
    names = {t.name for t in reader.tensors}
    arch = reader.fields["general.architecture"].contents()
    print(f"{name}: {os.path.basename(path)} arch {arch}, {len(names)} tensors, "
          f"rope_freqs {'rope_freqs.weight' in names}, output {'output.weight' in names}, "
          f"biases {sum(n.endswith('.bias') for n in names)}")

    tokens = torch.randint(0, 512, (120,), generator=torch.Generator().manual_seed(5)).tolist()
    with torch.no_grad():
        want = model(torch.tensor([tokens])).logits
    got = GT.logits(path, tokens, os.path.join(tmp, name + "-logits.safetensors"))
    d = (got - want).abs().max().item()
    check(f"{name}: GGUF logits vs transformers on the folder", d <= TOL,
          f"max |diff| {d:.3g} (logits up to {want.abs().max():.1f})")

    if name == "llama3":
        plain = write_gguf(folder, os.path.join(tmp, name + "-no-rope-freqs.gguf"), rope_freqs=False)
        d = (GT.logits(plain, tokens, os.path.join(tmp, "unscaled.safetensors")) - want).abs().max().item()
        check("llama3: without rope_freqs.weight graphtune's logits differ", d > 100 * TOL, f"max |diff| {d:.3g}")

    prompt = "Once upon a time"
    ids = GT.ids_of(prompt)
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False, eos_token_id=None,
                             pad_token_id=0)[0].tolist()
    want_text = GT.text_of(out[len(ids):])
    got_text = GT.greedy(path, prompt, 24)
    # Random weights pick raw byte tokens too, which the two decoders print differently (one a
    # replacement character, the other nothing): compared on the printable characters.
    printable = lambda t: "".join(c for c in t if c.isprintable() and c != "\ufffd")
    check(f"{name}: GGUF greedy text vs transformers.generate",
          len(printable(want_text)) > 10 and printable(got_text).endswith(printable(want_text)),
          f"transformers {want_text!r}, graphtune {got_text.strip()!r}")
    return folder


def main():
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory(prefix="gt_gguf_families_") as tmp:
        folders = {name: family_checks(name, cfg, tmp) for name, cfg in FAMILIES.items()}

        # Another architecture: one line naming the file and the key, exit 2.
        gemma = write_gguf(folders["llama3"], os.path.join(tmp, "gemma.gguf"), arch="gemma")
        rc, errors = refused(gemma, tmp)
        check("gemma: another general.architecture is refused in one line, exit 2",
              rc == 2 and len(errors) == 1 and "gemma.gguf" in errors[0] and "general.architecture" in errors[0]
              and "gemma" in errors[0].split("general.architecture", 1)[1], f"exit {rc}: {errors}")

        # A RoPE scaling graphtune does not compute (YaRN, as the converter writes it for Qwen2.5's
        # long-context configs): refused, not read as plain RoPE.
        yarn = write_gguf(folders["qwen2"], os.path.join(tmp, "qwen2-yarn.gguf"), scaling_type=gguf.RopeScalingType.YARN)
        rc, errors = refused(yarn, tmp)
        check("qwen2: rope.scaling.type yarn is refused in one line, exit 2",
              rc == 2 and len(errors) == 1 and "qwen2-yarn.gguf" in errors[0] and "qwen2.rope.scaling.type" in errors[0]
              and "yarn" in errors[0], f"exit {rc}: {errors}")
    finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
