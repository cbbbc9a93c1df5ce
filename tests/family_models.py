"""The tiny models of each LLM family the family tests share (test_model_families.py,
test_gguf_families.py, test_llamacpp_gguf.py): written by `transformers` with random weights and
the family's real config keys, biases and norms moved away from 0 and 1 so that a missed one
shows in the logits. Imported after the tests checked that torch and transformers exist."""
import json
import os

import torch
import transformers
from transformers import AutoModelForCausalLM, LlamaConfig, MistralConfig, Qwen2Config

from oracle import run

transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()

SHAPE = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             rms_norm_eps=1e-5, initializer_range=0.3, max_position_embeddings=1024)
# Original context 256 over head size 16: wavelengths from 6 to 19,870 positions fall in the kept
# band (< 64), the blended band and the divided one (> 256).
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 256}


def tiny_families(vocab_size=512):
    """name -> config: Llama 3 (its rope scaling, GQA, an untied head, eos_token_id a list),
    Qwen2 tied, untied and with an embedding padded past the vocabulary (q/k/v biases, rope_theta
    1e6), Mistral with a window and without."""
    return {
        "llama3": LlamaConfig(**SHAPE, vocab_size=vocab_size, tie_word_embeddings=False, bos_token_id=1,
                              eos_token_id=[2, 3], rope_scaling=dict(LLAMA3_ROPE)),
        "qwen2_tied": Qwen2Config(**SHAPE, vocab_size=vocab_size, tie_word_embeddings=True, rope_theta=1e6,
                                  bos_token_id=1, eos_token_id=2),
        "qwen2": Qwen2Config(**SHAPE, vocab_size=vocab_size, tie_word_embeddings=False, rope_theta=1e6,
                             sliding_window=131072, bos_token_id=1, eos_token_id=2),
        # Qwen2.5 pads its embedding past its tokenizer (152,064 rows for 151,665 pieces): here
        # 64 rows past the 512 pieces.
        "qwen2_padded": Qwen2Config(**SHAPE, vocab_size=vocab_size + 64, tie_word_embeddings=False, rope_theta=1e6,
                                    bos_token_id=1, eos_token_id=2),
        "mistral": MistralConfig(**SHAPE, vocab_size=vocab_size, sliding_window=4096, rope_theta=1e6,
                                 bos_token_id=1, eos_token_id=2),
        "mistral_no_window": MistralConfig(**SHAPE, vocab_size=vocab_size, sliding_window=None, bos_token_id=1,
                                           eos_token_id=2),
    }


def write_model(name, cfg, tmp):
    """(folder, model): the model in eval mode, saved as safetensors in tmp/name."""
    torch.manual_seed(len(name))
    model = AutoModelForCausalLM.from_config(cfg).eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("bias"):
                p.normal_(0.0, 0.5)
            if pname.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    folder = os.path.join(tmp, name)
    model.save_pretrained(folder, safe_serialization=True)
    return folder, model


class Graphtune:
    """graphtune's commands the family tests run, with llama2.c's 512-token vocabulary for text."""

    def __init__(self, worker, launcher, tokenizer):
        self.worker, self.launcher, self.tokenizer = worker, launcher, tokenizer

    def logits(self, model, tokens, out):
        """fp32 logits [1, T, vocab] of the token ids (dump-logits, through a safetensors file)."""
        from safetensors.torch import load_file
        run(self.worker, "dump-logits", "--model", model, "--tokens", ",".join(map(str, tokens)), "--out", out)
        return load_file(out)["logits"]

    def greedy(self, model, prompt, n):
        p = run(self.worker, "generate", "--model", model, "--tokenizer", self.tokenizer, "--prompt", prompt,
                "--max-new-tokens", n, "--temperature", 0)
        return p.stdout

    def ids_of(self, text):
        p = run(self.launcher, "tokenize", "--tokenizer", self.tokenizer, "--bos", stdin=json.dumps(text) + "\n")
        return json.loads(p.stdout.strip())

    def text_of(self, ids):
        p = run(self.launcher, "tokenize", "--tokenizer", self.tokenizer, "--decode", stdin=json.dumps(ids) + "\n")
        return json.loads(p.stdout.strip())
