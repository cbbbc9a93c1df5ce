#!/usr/bin/env python3
"""Remakes the binary inputs of the bad-input corpus (tests/bad_inputs/), so a reader sees how
each one was damaged. Text inputs (configs, hostfiles, JSON, TSV) are committed as they are,
except config/deeply_nested_array.toml (20 KB of brackets), which is made here too.

    ~/.cache/graphtune/venv/bin/python tests/bad_inputs/make_binaries.py [GRAPHTUNE_BIN]

Needs `sentencepiece` (a real, tiny .model to truncate) and, for the checkpoints, the
`graphtune` binary (default build/launcher/graphtune): a two-step run of a 1-layer, dim-2
LLaMA writes the checkpoint each checkpoint case damages. Everything stays a few KB.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def out(rel, data):
    path = os.path.join(HERE, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


# --- llama2.c tokenizer.bin: int32 max_token_length, then per token float32 score, int32 length, bytes
def llama2c_tokenizer(pieces, max_len=None):
    max_len = max_len or max(len(p) for p in pieces)
    b = struct.pack("<i", max_len)
    for i, p in enumerate(pieces):
        b += struct.pack("<fi", -float(i), len(p)) + p
    return b


PIECES = [b"<unk>", b"\n<s>\n", b"\n</s>\n", b"a", b"b", b"ab", b" "]
good_tok = llama2c_tokenizer(PIECES)
out("tokenizer/llama2c_truncated.bin", good_tok[:-3])                 # cut inside the last token
bad = bytearray(good_tok)
struct.pack_into("<i", bad, 4 + 4, -5)                                # token 0's length: -5
out("tokenizer/llama2c_negative_length.bin", bytes(bad))
bad = bytearray(good_tok)
struct.pack_into("<i", bad, 4 + 4, 0x40000000)                        # token 0 claims 1 GiB
out("tokenizer/llama2c_huge_length.bin", bytes(bad))
out("tokenizer/llama2c_two_tokens.bin", llama2c_tokenizer(PIECES[:2]))  # no </s>
out("tokenizer/empty.bin", b"")
# Binary garbage that starts like a protobuf (0x0A, field 1), so it is taken for a .model.
out("tokenizer/garbage.model", b"\x0a\xff\xff\xff\xff\x0f" + bytes(range(256)) * 4)


def sentencepiece_model():
    import sentencepiece as spm
    with tempfile.TemporaryDirectory() as d:
        text = os.path.join(d, "t.txt")
        with open(text, "w") as f:
            for i in range(200):
                f.write(f"the graph node {i} cites paper {i * 7 % 13} about topic {i % 5}\n")
        spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(d, "m"), vocab_size=40,
                                       model_type="bpe", character_coverage=1.0, minloglevel=2,
                                       normalization_rule_name="identity")  # no 240 KB charsmap
        return open(os.path.join(d, "m.model"), "rb").read()


sp = sentencepiece_model()
out("tokenizer/sentencepiece_truncated.model", sp[: len(sp) // 3])   # cut in the middle of the pieces


# --- a config (text, but generated): a value nested 10000 arrays deep, past a recursive parser's stack
out("config/deeply_nested_array.toml", b"# a generated value nested 10000 arrays deep: a recursive parser runs out of stack\n"
    b"[training]\nsteps = " + b"[" * 10000 + b"]" * 10000 + b"\n")


# --- llama2.c model .bin: 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab, seq_len),
# then float32 weights in run.c's order. Tiny: dim 8, 1 layer, vocab 16, shared classifier.
def llama2c_floats(dim, hidden, layers, heads, kv, vocab, seq):
    hd = dim // heads
    n = vocab * dim                                       # token embedding
    n += layers * dim                                     # rms_att
    n += layers * dim * dim + 2 * layers * dim * kv * hd + layers * dim * dim  # wq wk wv wo
    n += layers * dim                                     # rms_ffn
    n += 3 * layers * dim * hidden                        # w1 w2 w3
    n += dim                                              # rms_final
    n += seq * hd                                         # freq_cis (real and imaginary halves)
    return n


def llama2c_model(h, floats=None):
    dim, hidden, layers, heads, kv, vocab, seq = h
    n = floats if floats is not None else llama2c_floats(dim, hidden, layers, heads, kv, abs(vocab), seq)
    return struct.pack("<7i", *h) + struct.pack(f"<{n}f", *([0.01] * n))


GOOD = (8, 16, 1, 2, 2, 16, 8)
good_model = llama2c_model(GOOD)
out("llama2c/truncated.bin", good_model[: len(good_model) - 100])        # the last 25 floats are gone
out("llama2c/trailing_bytes.bin", good_model + b"\0" * 12)              # 3 floats too many
out("llama2c/short_header.bin", good_model[:20])                         # 5 of the 7 header ints
out("llama2c/negative_dim.bin", llama2c_model((-8, 16, 1, 2, 2, 16, 8), 0))
out("llama2c/zero_layers.bin", llama2c_model((8, 16, 0, 2, 2, 16, 8), 0))
out("llama2c/huge_vocab.bin", llama2c_model((8, 16, 1, 2, 2, 0x7FFFFFFF, 8), 64))  # would be 8 GiB of embeddings
out("llama2c/heads_do_not_divide_dim.bin", llama2c_model((8, 16, 1, 3, 3, 16, 8), 0))
out("llama2c/kv_heads_do_not_divide_heads.bin", llama2c_model((8, 16, 1, 4, 3, 16, 8), 0))


# --- safetensors: u64 header length, JSON header, data. A Hugging Face folder around it with a
# tiny LLaMA's config.json (vocab 16, hidden 8, 1 layer, tied embeddings).
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8,
          "intermediate_size": 16, "num_attention_heads": 2, "num_key_value_heads": 2,
          "num_hidden_layers": 1, "vocab_size": 16, "max_position_embeddings": 32,
          "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": True,
          "torch_dtype": "float32"}


def llama_shapes(c):
    d, f, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    shapes = {"model.embed_tokens.weight": [v, d], "model.norm.weight": [d]}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            shapes[p + f"self_attn.{n}.weight"] = [d, d]
        shapes[p + "mlp.gate_proj.weight"] = [f, d]
        shapes[p + "mlp.up_proj.weight"] = [f, d]
        shapes[p + "mlp.down_proj.weight"] = [d, f]
        shapes[p + "input_layernorm.weight"] = [d]
        shapes[p + "post_attention_layernorm.weight"] = [d]
    return shapes


def safetensors_bytes(shapes, dtype="F32", header_edit=None, raw_header=None):
    header, data = {}, b""
    for name, shape in sorted(shapes.items()):
        n = 1
        for s in shape:
            n *= s
        blob = struct.pack(f"<{n}f", *([0.02] * n))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    if header_edit:
        header_edit(header)
    h = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def hf_folder(name, st, config=CONFIG):
    out(f"safetensors/{name}/config.json", (json.dumps(config, indent=2) + "\n").encode())
    out(f"safetensors/{name}/model.safetensors", st)


SHAPES = llama_shapes(CONFIG)
good_st = safetensors_bytes(SHAPES)
hf_folder("truncated", good_st[: len(good_st) - 64])                           # the last 16 floats are gone
bad = bytearray(good_st)
struct.pack_into("<Q", bad, 0, 1 << 40)                                         # header "1 TiB" long
hf_folder("header_length_past_end", bytes(bad))
hf_folder("header_not_json", safetensors_bytes(SHAPES, raw_header=b'{"model.norm.weight": {"dtype": "F32", '))
hf_folder("tiny_file", b"\x08\x00\x00")                                        # 3 bytes: not even the length
hf_folder("shape_mismatch", safetensors_bytes(
    {**SHAPES, "model.embed_tokens.weight": [16, 4], "model.embed_tokens.extra": [16, 4]},
    header_edit=lambda h: h.pop("model.embed_tokens.extra")))                 # embed is [16, 4]; config says hidden 8


def offsets_disagree(h):
    # dtype F32, shape [8]: 32 bytes, but the offsets hold 16.
    b, _ = h["model.norm.weight"]["data_offsets"]
    h["model.norm.weight"]["data_offsets"] = [b, b + 16]


hf_folder("offsets_disagree_with_shape", safetensors_bytes(SHAPES, header_edit=offsets_disagree))


def offsets_past_end(h):
    h["model.norm.weight"]["data_offsets"] = [1 << 40, (1 << 40) + 32]


hf_folder("offsets_past_end", safetensors_bytes(SHAPES, header_edit=offsets_past_end))


def unknown_dtype(h):
    h["model.norm.weight"]["dtype"] = "F31"


hf_folder("unknown_dtype", safetensors_bytes(SHAPES, header_edit=unknown_dtype))


def negative_shape(h):
    h["model.norm.weight"]["shape"] = [-8]


hf_folder("negative_shape", safetensors_bytes(SHAPES, header_edit=negative_shape))
hf_folder("config_missing_hidden_size", good_st, {k: v for k, v in CONFIG.items() if k != "hidden_size"})
hf_folder("config_nan_eps", good_st, {**CONFIG, "rms_norm_eps": float("nan")})       # json writes NaN
hf_folder("config_huge_hidden_size", good_st, {**CONFIG, "hidden_size": 1 << 40, "intermediate_size": 1 << 40})
hf_folder("missing_tensor", safetensors_bytes({k: v for k, v in SHAPES.items() if k != "model.norm.weight"}))


# --- graph folders (data build --graph): features.npy is the binary one. Good: 6 nodes x 4 features.
def npy(rows, cols, descr="<f4", data=None, header_extra=""):
    h = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({rows}, {cols}), {header_extra}}}".encode()
    h += b" " * (-(10 + len(h) + 1) % 64) + b"\n"
    body = data if data is not None else struct.pack(f"<{rows * cols}f", *([0.5] * (rows * cols)))
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + body


GRAPH_CASES = ["label_out_of_range", "edge_out_of_range", "nodes_header_typo", "features_rows_mismatch",
               "features_header_past_end", "features_float64", "meta_not_json", "missing_edges",
               "nodes_bom", "sha256_mismatch", "nodes_wrong_field_count", "negative_node_id",
               "edge_self_loop", "edge_duplicate", "no_nodes"]
for case in GRAPH_CASES:
    if case == "features_rows_mismatch":
        data = npy(5, 4)
    elif case == "features_header_past_end":
        data = bytearray(npy(6, 4))
        struct.pack_into("<H", data, 8, 60000)
        data = bytes(data)
    elif case == "no_nodes":
        data = npy(0, 4)                                   # consistent with its empty nodes.tsv
    elif case == "features_float64":
        data = npy(6, 4, "<f8", struct.pack("<24d", *([0.5] * 24)))
    else:
        data = npy(6, 4)
    out(f"graph/{case}/features.npy", data)


# --- checkpoints: a real one from a two-step run, then damaged copies.
def checkpoint(gt):
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([gt, "train", "-c", os.path.join(ROOT, "configs/lm.toml"), "--job.out_dir", d + "/run",
                        "--model.dim", "2", "--model.n_layers", "1", "--model.n_heads", "1", "--model.n_kv_heads", "1",
                        "--model.hidden_dim", "2", "--model.max_seq_len", "16", "--training.seq_len", "8",
                        "--training.batch_size", "1", "--training.steps", "2", "--training.log_every", "1",
                        "--training.threads", "1", "--data.nodes", "20", "--checkpoint.every", "2"],
                       check=True, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        src = os.path.join(d, "run/checkpoints/step_00000002")
        files = {n: open(os.path.join(src, n), "rb").read() for n in os.listdir(src)}
    return files


def ckpt_case(name, files):
    folder = os.path.join(HERE, "checkpoint", name)
    shutil.rmtree(folder, ignore_errors=True)
    for n, b in files.items():
        out(f"checkpoint/{name}/{n}", b)


gt = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/launcher/graphtune")
if not os.access(gt, os.X_OK):
    sys.exit(f"{gt}: not built; the checkpoint cases were not remade (pass the graphtune binary)")
good = checkpoint(gt)
index = json.loads(good["index.json"])
shard = "rank_00000.safetensors"
ckpt_case("index_not_json", {"index.json": good["index.json"][: len(good["index.json"]) // 2],
                             "config.json": good["config.json"]})
flipped = bytearray(good[shard])
flipped[-5] ^= 0x01                                                        # one bit of the last weight
ckpt_case("crc_mismatch", {**good, shard: bytes(flipped)})
ckpt_case("truncated_shard", {**good, shard: good[shard][:1000]})
ckpt_case("missing_shard", {k: v for k, v in good.items() if k != shard})
ckpt_case("uncommitted", {k: v for k, v in good.items() if k != "index.json"})


def edited_index(edit):
    # Refused from the index alone, before any shard is opened: the shard stays out (it is
    # most of a checkpoint's bytes), so a lost check shows as "rank_00000.safetensors: missing".
    i = json.loads(good["index.json"])
    edit(i)
    return {"index.json": json.dumps(i, separators=(",", ":")).encode(), "config.json": good["config.json"]}


def chunk_past_end(i):
    # A chunk's byte range runs past the shard; the crc of the shard itself is intact.
    t = next(iter(i["tensors"].values()))
    t["chunks"][0]["end"] = t["chunks"][0]["begin"] + (1 << 40)


ckpt_case("chunk_past_end", edited_index(chunk_past_end))
ckpt_case("index_missing_tensors", edited_index(lambda i: i.pop("tensors")))
ckpt_case("index_wrong_version", edited_index(lambda i: i.update(version=99)))


def two_stages(i):
    # The layout claims pp=2 but lists the first layer of one stage only.
    i["layout"].update(pp=2, partition=[0])


ckpt_case("layout_partition_short", edited_index(two_stages))


def norm_reshaped(i):
    # model.norm.weight [2] recorded as [1, 2]: the bytes still fit, the model does not.
    t = i["tensors"]["model/model.norm.weight"]
    t["shape"] = t["chunks"][0]["shape"] = [1, 2]
    t["chunks"][0]["offset"] = [0, 0]


# Found only after every checksum is verified, so this one keeps its shard.
ckpt_case("index_shape_not_the_model", {**good, **edited_index(norm_reshaped)})


def outside(i):
    # The shard named by a path that leaves the checkpoint folder.
    i["files"]["../rank_00000.safetensors"] = i["files"].pop(shard)
    for t in i["tensors"].values():
        for c in t["chunks"]:
            c["file"] = "../rank_00000.safetensors"


ckpt_case("index_file_outside_folder", edited_index(outside))
ckpt_case("index_step_past_total", edited_index(lambda i: i.update(step=9)))
ckpt_case("another_model", good)  # intact: the case resumes configs/lm.toml (dim 96) from it


# --- torch.save'd weights: a Hugging Face folder of the same tiny LLaMA with pytorch_model.bin
# (written by torch itself), each damaged one way. Needs torch.
def torch_pickles():
    import collections
    import io
    import pickle
    import zipfile

    import torch

    def pickle_folder(name, data):
        out(f"pickle/{name}/config.json", (json.dumps(CONFIG, indent=2) + "\n").encode())
        out(f"pickle/{name}/pytorch_model.bin", data)

    sd = collections.OrderedDict((k, torch.full(v, 0.02)) for k, v in sorted(SHAPES.items()))
    buf = io.BytesIO()
    torch.save(sd, buf)
    good = buf.getvalue()
    pickle_folder("truncated_zip", good[: len(good) // 2])

    class Storage:
        def __init__(self, key, numel):
            self.key, self.numel = key, numel

    class Tensor:  # pickled as torch.save pickles a tensor
        def __init__(self, storage, size):
            self.args = (storage, 0, size, (1,), False, collections.OrderedDict())

        def __reduce__(self):
            return torch._utils._rebuild_tensor_v2, self.args

    class Call:
        def __reduce__(self):
            return os.system, ("echo pwned",)

    def zip_of(obj, records):
        pkl = io.BytesIO()
        pk = pickle.Pickler(pkl, protocol=2)
        pk.persistent_id = lambda o: ("storage", torch.FloatStorage, o.key, "cpu", o.numel) if isinstance(o, Storage) else None
        pk.dump(obj)
        z = io.BytesIO()
        with zipfile.ZipFile(z, "w") as f:
            f.writestr("archive/data.pkl", pkl.getvalue())
            for k, v in records.items():
                f.writestr(f"archive/data/{k}", v)
            f.writestr("archive/version", "3\n")
        return z.getvalue()

    pickle_folder("calls_os_system", zip_of({"model.norm.weight": Call()}, {}))
    pickle_folder("tensor_past_storage", zip_of({"model.norm.weight": Tensor(Storage("0", 4), (8,))}, {"0": b"\0" * 16}))
    pickle_folder("record_too_short", zip_of({"model.norm.weight": Tensor(Storage("0", 8), (8,))}, {"0": b"\0" * 16}))


torch_pickles()
print("tokenizer/, llama2c/, safetensors/, pickle/, graph/*/features.npy, checkpoint/ remade in", HERE)
