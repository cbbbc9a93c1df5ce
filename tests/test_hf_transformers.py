#!/usr/bin/env python3
"""graphtune's Hugging Face folders and forward pass against independent implementations:
the `safetensors` package reads what graphtune writes (byte-identical to its own output),
`transformers.LlamaForCausalLM` loads converted folders, and its logits match graphtune's
(`graphtune-worker dump-logits`) on stories260K (llama2.c) and on a random model with GQA,
linear RoPE scaling and an untied head that transformers itself wrote.

Environment (set by ctest): GRAPHTUNE_BIN (launcher), GRAPHTUNE_WORKER, GRAPHTUNE_ASSETS.
Exit 0 = pass, 1 = fail, 77 = skipped (prints "SKIP: why").
"""
import json
import os
import sys
import tempfile

from oracle import check, finish, run, skip

TOL = 1e-4  # fp32 logits, max abs difference


assets = os.environ.get("GRAPHTUNE_ASSETS", "../shared/assets")
stories = os.path.join(assets, "llm", "stories260K.bin")
if not os.path.exists(stories):
    skip(f"shared assets not found ({stories})")
try:
    import torch
    from safetensors.torch import load_file, save_file
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError as e:
    skip(f"python package missing: {e}")

transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()
WORKER = os.environ["GRAPHTUNE_WORKER"]
LAUNCHER = os.environ.get("GRAPHTUNE_BIN", WORKER)
def graphtune_logits(model, tokens, tmp, tag):
    out = os.path.join(tmp, f"logits-{tag}.safetensors")
    run(WORKER, "dump-logits", "--model", model, "--tokens", ",".join(map(str, tokens)), "--out", out)
    logits = load_file(out)["logits"]
    assert logits.dtype == torch.float32 and logits.shape == (1, len(tokens), logits.shape[-1]), logits.shape
    return logits


def hf_logits(folder, tokens):
    m = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        return m(torch.tensor([tokens])).logits, m


def expected_names(n_layers, tied):
    names = {"model.embed_tokens.weight", "model.norm.weight"}
    for i in range(n_layers):
        for part in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                     "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "input_layernorm",
                     "post_attention_layernorm"):
            names.add(f"model.layers.{i}.{part}.weight")
    if not tied:
        names.add("lm_head.weight")
    return names


def max_diff(a, b):
    return (a - b).abs().max().item()


def same_bytes_as_python_writer(path, tmp):
    """Re-save graphtune's file with the Python package: the bytes must be identical."""
    again = os.path.join(tmp, "python-resave.safetensors")
    save_file(load_file(path), again, metadata={"format": "pt"})
    return open(path, "rb").read() == open(again, "rb").read()


def stories_checks(tmp):
    tokens = [1, 403, 407, 261, 378, 280, 394, 259, 416, 270, 66, 273, 307, 44, 433, 11, 296, 262, 260, 2]
    ref = graphtune_logits(stories, tokens, tmp, "stories-bin")

    # (a) llama2.c -> HF folder, read by safetensors and transformers.
    hf = os.path.join(tmp, "stories-hf")
    run(WORKER, "convert", "--model", stories, "--out", hf)
    tensors = load_file(os.path.join(hf, "model.safetensors"))
    want = expected_names(5, tied=True)
    check("(a) safetensors.torch.load_file: names", set(tensors) == want,
          f"extra {sorted(set(tensors) - want)}, missing {sorted(want - set(tensors))}")
    check("(a) shapes", tensors["model.embed_tokens.weight"].shape == (512, 64)
          and tensors["model.layers.0.self_attn.k_proj.weight"].shape == (32, 64)
          and tensors["model.layers.4.mlp.down_proj.weight"].shape == (64, 172))
    check("(a) file is byte-identical to the Python writer's",
          same_bytes_as_python_writer(os.path.join(hf, "model.safetensors"), tmp))
    got, m = hf_logits(hf, tokens)
    check("(a) transformers config", m.config.num_key_value_heads == 4 and m.config.tie_word_embeddings)
    d = max_diff(got, ref)
    check("(a) stories260K: transformers vs graphtune logits", d <= TOL, f"max |diff| {d:.3g} (logits up to {ref.abs().max():.1f})")
    d = max_diff(graphtune_logits(hf, tokens, tmp, "stories-hf"), ref)
    check("(a) graphtune on its own HF folder vs the .bin", d == 0.0, f"max |diff| {d:.3g}")

    # (b) sharded, through the launcher.
    sharded = os.path.join(tmp, "stories-sharded")
    run(LAUNCHER, "convert", "--model", stories, "--out", sharded, "--max-shard-size", "300KB")
    index = json.load(open(os.path.join(sharded, "model.safetensors.index.json")))
    shards = sorted(set(index["weight_map"].values()))
    check("(b) sharded index", len(shards) > 1 and set(index["weight_map"]) == want
          and index["metadata"]["total_size"] == sum(t.nbytes for t in tensors.values()),
          f"{len(shards)} shards")
    got, _ = hf_logits(sharded, tokens)
    d = max_diff(got, ref)
    check("(b) sharded folder: transformers vs graphtune logits", d <= TOL, f"max |diff| {d:.3g}")

    # bf16 output: transformers reads the dtype and the rounded weights.
    bf16 = os.path.join(tmp, "stories-bf16")
    run(WORKER, "convert", "--model", hf, "--out", bf16, "--dtype", "bf16")
    m = LlamaForCausalLM.from_pretrained(bf16)
    w = load_file(os.path.join(bf16, "model.safetensors"))
    check("(bf16) torch_dtype and weights", m.dtype == torch.bfloat16
          and all(torch.equal(w[k], tensors[k].to(torch.bfloat16)) for k in tensors))


def scaled_gqa_checks(tmp):
    # (c) transformers writes a model graphtune has to read: GQA, linear RoPE x4, untied head.
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=128, max_position_embeddings=256,
                      rope_scaling={"type": "linear", "factor": 4.0}, rope_theta=10000.0,
                      rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=0.1)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # norms away from 1 so a mixed-up norm would show
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    src = os.path.join(tmp, "scaled-hf")
    model.save_pretrained(src, safe_serialization=True)
    tokens = torch.randint(0, 128, (100,), generator=torch.Generator().manual_seed(1)).tolist()
    with torch.no_grad():
        want = model(torch.tensor([tokens])).logits
    got = graphtune_logits(src, tokens, tmp, "scaled")
    d = max_diff(got, want)
    check("(c) GQA + linear rope x4 + untied head: graphtune vs transformers", d <= TOL,
          f"max |diff| {d:.3g} (logits up to {want.abs().max():.2f}, {len(tokens)} positions)")

    # Without the scaling the logits must differ: the factor really reaches graphtune.
    conf = json.load(open(os.path.join(src, "config.json")))
    for key in ("rope_scaling", "rope_parameters"):
        if isinstance(conf.get(key), dict):
            conf[key] = {"rope_type": "default", **({"rope_theta": conf[key]["rope_theta"]} if "rope_theta" in conf[key] else {})}
    unscaled = os.path.join(tmp, "unscaled-hf")
    os.makedirs(unscaled)
    os.link(os.path.join(src, "model.safetensors"), os.path.join(unscaled, "model.safetensors"))
    json.dump(conf, open(os.path.join(unscaled, "config.json"), "w"))
    d_unscaled = max_diff(graphtune_logits(unscaled, tokens, tmp, "unscaled"), want)
    check("(c) dropping the scaling changes graphtune's logits", d_unscaled > 100 * TOL, f"max |diff| {d_unscaled:.3g}")

    # (d) graphtune convert HF -> HF: transformers gives identical logits.
    dst = os.path.join(tmp, "scaled-converted")
    run(WORKER, "convert", "--model", src, "--out", dst)
    got2, m2 = hf_logits(dst, tokens)
    d = max_diff(got2, want)
    check("(d) converted folder: transformers logits identical", d == 0.0, f"max |diff| {d:.3g}")
    check("(d) converted config", m2.config.num_key_value_heads == 2 and not m2.config.tie_word_embeddings
          and _linear_factor(m2.config) == 4.0, str(_rope_dict(m2.config)))
    a, b = load_file(os.path.join(src, "model.safetensors")), load_file(os.path.join(dst, "model.safetensors"))
    check("(d) tensors bit-identical", set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a))


def _rope_dict(config):
    return getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}


def _linear_factor(config):
    r = _rope_dict(config)
    return r.get("factor") if r.get("rope_type", r.get("type")) == "linear" else None


def main():
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory(prefix="gt_hf_") as tmp:
        stories_checks(tmp)
        scaled_gqa_checks(tmp)
    finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
