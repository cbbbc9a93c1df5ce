#!/usr/bin/env python3
"""Writes the seed corpora tests/fuzz/corpus/<target>/: small, real, valid and invalid inputs.

Run with the project's venv python (the safetensors seeds are written by the safetensors
package, the independent writer): ~/.cache/graphtune/venv/bin/python tests/fuzz/make_corpus.py
Crash inputs found by scripts/fuzz.sh and fixed are added by hand as crash-<what> files, and
are kept by this script (it only writes its own seed-* files).
"""
import json
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORPUS = HERE / "corpus"


def write(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (d / ("seed-" + name)).write_bytes(data)


def control_protocol():
    tok = "0123456789abcdef0123456789abcdef"
    hello = {"type": "hello", "token": tok, "rank": 0, "world": 2, "host": "node-0", "local_rank": 0,
             "device": "cpu", "pid": 4242}
    msgs = {
        "hello": hello,
        "hello-rank-too-big": dict(hello, rank=2),
        "hello-pid-zero": dict(hello, pid=0),
        "hello-rank-float": dict(hello, rank=1.5),
        "heartbeat": {"type": "heartbeat", "rss_mib": 12.5, "peak_rss_mib": 13},
        "heartbeat-null": {"type": "heartbeat", "rss_mib": None, "peak_rss_mib": 1e308},
        "step": {"type": "step", "step": 3, "steps": 9, "loss": 0.25, "lr": 0.5, "grad_norm": 1,
                 "tokens_per_s": 2, "rss_mib": 3, "peak_rss_mib": 4},
        "step-nan-loss": {"type": "step", "step": 3, "steps": 9, "loss": None, "lr": 3e-3, "grad_norm": None,
                          "tokens_per_s": 1e5, "rss_mib": 3, "peak_rss_mib": 4},
        "checkpoint": {"type": "checkpoint", "step": 10, "path": "runs/x/checkpoints/step_10"},
        "eval": {"type": "eval", "metrics": {"accuracy": 0.75, "per_class": {"a": [1, 2]}}},
        "eval-not-object": {"type": "eval", "metrics": [1]},
        "error": {"type": "error", "message": "rank 1: out of memory \u00e9"},
        "done": {"type": "done"},
        "stopped": {"type": "stopped", "step": 18446744073709551615},
        "stop": {"type": "stop", "reason": "SIGINT"},
        "unknown": {"type": "reboot"},
        "type-number": {"type": 7},
    }
    for name, m in msgs.items():
        write("control_protocol", name + ".jsonl", json.dumps(m, separators=(",", ":")))
    write("control_protocol", "truncated.jsonl", '{"type":"done"')
    write("control_protocol", "two-objects.jsonl", '{"type":"done"}{"type":"done"}')
    write("control_protocol", "garbage.bin", b"\x00\x01\x02garbage\xff")
    write("control_protocol", "bad-utf8.jsonl", b'{"type":"error","message":"\xc3\x28\xa0\xa1"}')
    write("control_protocol", "escapes.jsonl", '{"type":"error","message":"a\\u0000b\\ud83d\\ude00\\n"}')
    write("control_protocol", "deep.jsonl", '{"type":"eval","metrics":{"a":' + "[" * 200 + "]" * 200 + "}}")


def hostfile():
    for f in ["deepspeed.txt", "two_nodes.txt", "local.txt"]:
        write("hostfile", f, (ROOT / "hostfiles" / f).read_bytes())
    write("hostfile", "include.txt", "worker-0 slots=4\nworker-1 slots=4\n#include worker-0@worker-1:0,2\n")
    write("hostfile", "exclude.txt", "worker-0 slots=4\nworker-1 slots=4\n#exclude worker-1:3\n")
    write("hostfile", "exclude-all.txt", "a slots=2\n#exclude a\n")
    write("hostfile", "openmpi.txt", "# c\n\nnode-1\nnode-2 slots=4\nnode-3 slots=4 max-slots=8  # x\n10.0.0.7 slots=1\r\n")
    write("hostfile", "bad-keyword.txt", "node-1 cpus=4\n")
    write("hostfile", "bad-slots.txt", "node-1 slots=2.5\nnode-1 slots=1\n")
    write("hostfile", "bad-name.txt", "-node.a..b slots=1\n")
    write("hostfile", "repeat.txt", "a slots=1\na slots=2\n#include a:0,0\n")


def instructions():
    nc = {"id": "arxiv_train_7", "graph": {"node_idx": 7, "edge_index": [[1, 2, 0], [0, 0, 1]], "node_list": [7, 52, 901]},
          "conversations": [{"from": "human", "value": "Given a citation graph: <graph> ... Which category?"},
                            {"from": "gpt", "value": "cs.LG, Machine Learning"}]}
    lp = {"id": "arxiv_test_3_LP", "graph": {"node_idx_1": 3, "edge_index_1": [[1], [0]], "node_list_1": [3, 8],
                                             "node_idx_2": 11, "edge_index_2": [[1, 2], [0, 0]], "node_list_2": [11, 4, 5]},
          "conversations": [{"from": "human", "value": "First: <graph>. Second: <graph>. Connected?"},
                            {"from": "gpt", "value": "yes"}]}
    gm = {"id": "cora_train_12", "graph": {"node_idx": 12, "edge_index": [[], []], "node_list": [12]},
          "conversations": [{"from": "human", "value": "<graph>\nMatch the nodes to titles:\n1. A\n2. B"},
                            {"from": "gpt", "value": "1. A"}, {"from": "human", "value": "And again?"},
                            {"from": "gpt", "value": "\u00e9t\u00e9"}]}
    write("instructions", "valid.json", json.dumps([nc, lp, gm]))
    write("instructions", "one-per-line.json", "[\n" + ",\n".join(json.dumps(r) for r in [nc, lp]) + "\n]\n")
    bad = [
        dict(nc, id="a_1", graph=dict(nc["graph"], node_idx=8)),
        dict(nc, id="a_2", graph=dict(nc["graph"], edge_index=[[0, 9], [0, 0]])),
        dict(nc, id="a_3", conversations=[{"from": "gpt", "value": "x"}]),
        dict(nc, id="a_4", conversations=[{"from": "human", "value": "<graph> </s>"}, {"from": "gpt", "value": "y"}]),
        dict(lp, id="a_5_LP", graph=nc["graph"]),
        dict(nc, id="a_6", graph=dict(nc["graph"], node_list=[7, -1])),
        dict(nc, id=7),
        dict(nc, id="arxiv_train_7"),
    ]
    write("instructions", "mixed-bad.json", json.dumps([nc] + bad))
    write("instructions", "not-list.json", json.dumps(nc))
    write("instructions", "empty-list.json", "[]")
    write("instructions", "big-int.json", json.dumps([dict(nc, graph=dict(nc["graph"], node_idx=2 ** 64 - 1))]))
    write("instructions", "truncated.json", json.dumps([nc])[:70])


def config():
    for p in sorted((ROOT / "configs").rglob("*.toml")):
        write("config", str(p.relative_to(ROOT / "configs")).replace("/", "-"), p.read_bytes())
    write("config", "overrides.toml", "[job]\nname = \"x\"\n#override parallelism.pp=2\n#override training.batch_size=8\n"
                                      "#override job.name=123\n#override nosection=1\n")
    write("config", "partition.toml", "[parallelism]\npp = 3\nmicrobatches = 3\npartition = \"0, 2,3\"\n"
                                      "[training]\nbatch_size = 9\n")
    write("config", "types.toml", "[model]\ndim = 64.0\n[data]\nnoise = inf\n[training]\nsteps = 0x10\n"
                                  "seed = -9223372036854775808\n[eval]\ntext_only = 1979-05-27T07:32:00Z\n")
    write("config", "top-level-key.toml", "name = \"x\"\n[job]\n")
    write("config", "bad-syntax.toml", "[job\nname = \"x\n")
    write("config", "arrays.toml", "[data]\ngraph = [[1, 2], [\"a\"]]\n[[training]]\nx = {a = {b = 1}}\n")


def safetensors():
    import numpy as np
    from safetensors.numpy import save

    files = {
        "f32.safetensors": save({"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.zeros(3, np.float32)}),
        "mixed.safetensors": save({"a": np.ones((2, 2), np.float16), "i": np.arange(3, dtype=np.int64),
                                   "s": np.array(1.5, np.float64), "z": np.zeros((0, 4), np.uint8),
                                   "m": np.array([True, False])}, metadata={"format": "pt"}),
        "empty.safetensors": save({}),
    }
    for name, data in files.items():
        write("safetensors_header", name, data)

    def raw(header, data=b""):
        h = json.dumps(header).encode()
        return struct.pack("<Q", len(h)) + h + data

    write("safetensors_header", "overlap.safetensors",
          raw({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
               "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8))
    write("safetensors_header", "overflow.safetensors",
          raw({"a": {"dtype": "F64", "shape": [2 ** 62, 4], "data_offsets": [0, 0]}}))
    write("safetensors_header", "beyond.safetensors",
          raw({"a": {"dtype": "I32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8))
    write("safetensors_header", "bad-metadata.safetensors", raw({"__metadata__": {"k": 1}}))
    write("safetensors_header", "bf16-bool.safetensors",
          raw({"__metadata__": {"format": "pt"}, "x": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [0, 4]},
               "y": {"dtype": "BOOL", "shape": [], "data_offsets": [4, 5]},
               "z": {"dtype": "F8_E4M3", "shape": [3], "data_offsets": [5, 8]}}, b"\0" * 8))
    write("safetensors_header", "huge-length.bin", struct.pack("<Q", 2 ** 64 - 1) + b"{}")
    write("safetensors_header", "short.bin", b"\x02\x00\x00")


def torch_pickle():
    """The data.pkl of real torch.save files (torch writes them), and hand-made bad ones."""
    import collections
    import io
    import zipfile

    import torch

    def pkl(obj, protocol=2):
        buf = io.BytesIO()
        torch.save(obj, buf, pickle_protocol=protocol)
        with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
            return z.read([n for n in z.namelist() if n.endswith("/data.pkl")][0])

    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    sd = collections.OrderedDict([("w", base.half()), ("b", torch.ones(4, dtype=torch.bfloat16)),
                                  ("view", base[1:, 1:3]), ("t", base.t()), ("scalar", torch.tensor(3.0)),
                                  ("empty", torch.zeros(0, 5))])
    sd._metadata = collections.OrderedDict([("", {"version": 1}), ("layer", {"version": 2})])
    write("torch_pickle", "state-dict.pkl", pkl(sd))
    write("torch_pickle", "state-dict-protocol4.pkl", pkl(sd, 4))
    write("torch_pickle", "plain-dict.pkl", pkl({"model.graph_projector.weight": torch.zeros(4, 2),
                                                 "model.graph_projector.bias": torch.zeros(4)}))
    write("torch_pickle", "parameter.pkl", pkl({"p": torch.nn.Parameter(torch.ones(2, 2))}))
    write("torch_pickle", "nested.pkl", pkl({"a": [1, 2.5, "x", b"y", None, True, (3, -70000, 2 ** 40)],
                                             "b": {"c": torch.ones(1, dtype=torch.int64)}}))
    try:
        import numpy as np
        from torch_geometric.data import Data

        d = Data(x=torch.randn(3, 2), y=torch.tensor([[1], [0], [-1]]), edge_index=torch.tensor([[0, 1], [1, 2]]))
        d.train_mask = np.array([True, False, True])
        write("torch_pickle", "pyg-data.pkl", pkl(collections.OrderedDict(cora=d)))
    except ImportError:
        pass
    write("torch_pickle", "os-system.pkl", b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02Rq\x03.")
    write("torch_pickle", "truncated.pkl", pkl(sd)[:100])
    write("torch_pickle", "self-append.pkl", b"\x80\x02]q\x00h\x00a.")
    write("torch_pickle", "deep.pkl", b"\x80\x02" + b"]" * 300 + b"a" * 299 + b".")


def pretokenizer():
    # The first byte picks the spec (0 Llama 3, 1 Qwen2 with NFC, 2 single digits, 3 digit runs
    # with a prefix space, 4 a Split regex up to the first newline).
    texts = {
        "words": "Hello, world! I'M here; they'll see 12345 apples.\n\n   Indented\tline\r\n",
        "unicode": "Cafe\u0301 \u65e5\u672c\u8a9e \uff11\uff12 \U0001f468\u200d\U0001f469 \u00a0\u0085x\u2028",
        "special": "<|im_start|>user\nhi<|im_end|>  \n",
        "spaces": " " * 40 + "x" + "\n" * 9,
    }
    for spec in range(4):
        for name, text in texts.items():
            write("pretokenizer", "%d-%s" % (spec, name), bytes([spec]) + text.encode())
    write("pretokenizer", "0-invalid-utf8", b"\x00ab\xff\xfe c\xc3 d\xe2\x82")
    write("pretokenizer", "1-invalid-utf8", b"\x01e\xcc\x81\xff\xcc\x81")
    write("pretokenizer", "4-regex", b"\x04(?i:'s)|\\p{L}+|\\s+(?!\\S)|\\s+\nit's  a  test\n")
    write("pretokenizer", "4-empty-match", b"\x04\\s*\nab  cd")
    write("pretokenizer", "4-class-S", b"\x04[^\\S]+\nab cd")
    write("pretokenizer", "4-bad", b"\x04(unclosed\nab")


def gguf_seeds():
    """Written by the gguf package (llama.cpp's own writer): every metadata type, arrays (a
    vocabulary's), tensors of two types; then cut short at a few places."""
    import os
    import tempfile
    import gguf
    import numpy as np
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "seed.gguf")
        w = gguf.GGUFWriter(path, "llama")
        w.add_block_count(2)
        w.add_float32("llama.rope.freq_base", 10000.0)
        w.add_bool("tokenizer.ggml.add_space_prefix", True)
        w.add_tokenizer_model("llama")
        w.add_token_list(["<unk>", "<s>", "</s>", "\u2581a", "b"])
        w.add_token_scores([0.0, 0.0, 0.0, -1.0, -2.0])
        w.add_token_types([2, 3, 3, 1, 1])
        w.add_uint32("tokenizer.ggml.bos_token_id", 1)
        w.add_int8("x.int8", -3)
        w.add_uint64("x.uint64", 1 << 40)
        w.add_float64("x.float64", 0.5)
        w.add_array("x.nested", [[1, 2], [3]])
        w.add_tensor("a", np.arange(8, dtype=np.float32).reshape(2, 4))
        w.add_tensor("b", np.ones((4,), dtype=np.float16))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        data = pathlib.Path(path).read_bytes()
    write("gguf", "whole.gguf", data)
    for cut in (3, 24, 100, len(data) // 2, len(data) - 8):
        write("gguf", "cut-%d.gguf" % cut, data[:cut])


if __name__ == "__main__":
    for target in ["control_protocol", "hostfile", "instructions", "config", "safetensors_header", "torch_pickle",
                   "pretokenizer", "gguf"]:
        d = CORPUS / target
        if d.exists():
            for f in d.glob("seed-*"):
                f.unlink()
    control_protocol()
    hostfile()
    instructions()
    config()
    safetensors()
    torch_pickle()
    pretokenizer()
    gguf_seeds()
